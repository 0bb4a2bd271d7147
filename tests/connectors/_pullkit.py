"""What the pull tests share: a runtime on the test store (tenant ``acme``: payment-api
with aliases payment_api and paymentapi-prod, payments-db, orders-db; attributes
metrics.pool_utilisation float, config.connection_pool.max int), loading a
``sources.yaml``, reading back the stored facts and the status, and a real local HTTP
server whose answers a test sets (JSON, garbage, slow, an error status)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import sqlalchemy as sa

import factgen
from caveat import app
from tests.conftest import Store
from tests.stack import LOOPBACK, LoopbackServer, QuietHandler

ADMIN = app.LOCAL_ADMIN


@pytest.fixture(name="rt")
def rt_fixture(store: Store) -> app.Runtime:
    """A runtime acting for the test store's tenant."""
    return app.Runtime.over(store.engine, store.tenant)


def load(rt: app.Runtime, text: str) -> factgen.SourcesConfig:
    return app.load_sources(rt, ADMIN, text).config


def entities(rt: app.Runtime, *names: str) -> None:
    """Declare services of a test's own (each its own alias)."""
    app.import_entities(rt, ADMIN, [factgen.EntitySpec(n, "service") for n in names])


@dataclass(frozen=True)
class Row:
    subject: str
    attribute: str
    value: Any
    observed_at: Any
    source: str | None
    provenance: dict[str, Any] | None


def facts(rt: app.Runtime, source: str | None = None) -> list[Row]:
    """Every fact of the tenant (of ``source``), in insertion order."""
    with rt.transaction() as s:
        rows = s.execute(
            sa.text(
                "SELECT subject, attribute, value, observed_at, source, provenance FROM facts "
                "WHERE (CAST(:source AS text) IS NULL OR source = :source) ORDER BY id"
            ),
            {"source": source},
        ).all()
    return [Row(*r) for r in rows]


def status(rt: app.Runtime, source: str) -> factgen.SourceStatus:
    [found] = [s for s in app.sources_status(rt, ADMIN) if s.source == source]
    return found


#: The attribute the Prometheus sources of the pull tests answer.
ATTR = "metrics.pool_utilisation"


def prom(name: str, url: str, query: str = "q", *, extra: str = "", attribute: str = ATTR) -> str:
    """One Prometheus source of a ``sources:`` list (``extra``: more keys of the source),
    naming its subject by the ``service`` label."""
    return f"""
  - name: {name}
    kind: prometheus
    url: {url}
{extra}    attributes:
      - attribute: {attribute}
        query: '{query}'
        subject_label: service
"""


def ratio(*services: str) -> str:
    """The pool ratio of these services only (a shared Prometheus: each test's own)."""
    sel = "|".join(services)
    return (
        f'max by (service) (db_pool_in_use{{service=~"{sel}"}} / db_pool_max{{service=~"{sel}"}})'
    )


def vector(*samples: tuple[dict[str, str], str], at: float | None = None) -> dict[str, Any]:
    """A Prometheus instant-vector answer."""
    stamp = time.time() if at is None else at
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [stamp, value]} for labels, value in samples],
        },
    }


@dataclass
class Answer:
    """What the server answers on a path: a JSON body (or raw bytes), a status, a delay."""

    body: Any = None
    raw: bytes | None = None
    status: int = 200
    delay: float = 0.0
    content_type: str = "application/json"


@dataclass(frozen=True)
class Request:
    path: str
    query: str
    headers: dict[str, str]


@dataclass
class JsonServer(LoopbackServer):
    """A real HTTP server on the loopback answering what ``answers[path]`` says (404
    for a path it was not given), recording every request."""

    answers: dict[str, Answer] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    #: called as each request arrives; what it answers goes to ``probed``
    probe: Callable[[], object] | None = None
    probed: list[object] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                path = unquote(parts.path)
                server.requests.append(
                    Request(path, parts.query, {k.lower(): v for k, v in self.headers.items()})
                )
                if server.probe is not None:
                    server.probed.append(server.probe())
                answer = server.answers.get(path, Answer({"error": "no such path"}, status=404))
                if answer.delay:
                    time.sleep(answer.delay)
                raw = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.content_type)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test)

        self._serve(Handler)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@pytest.fixture(name="json_server")
def json_server_fixture() -> Iterator[JsonServer]:
    with JsonServer() as s:
        yield s
