"""OpenTelemetry spans (issue 28): every use case a door calls, each recall stage, each
source pull and webhook; counts as attributes, never an item's text; exported over OTLP
only when OTEL_EXPORTER_OTLP_ENDPOINT is set, and the SDK not even imported otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import factgen
from caveat import _tracing, db
from caveat import app as use
from tests.caveat._doors import precedent
from tests.caveat.test_http import serving

ROOT = Path(__file__).resolve().parents[2]
SECRET_TEXT = "pool exhausted"  # in the precedent's text and the query: never in a span


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans made while the test runs (the process's recorder, shared with any other
    test or benchmark in it: a process has one tracer provider)."""
    with _tracing.recorder().recording() as exporter:
        yield exporter


def _named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _no_text(spans: Sequence[ReadableSpan]) -> None:
    for s in spans:
        for value in (s.attributes or {}).values():
            assert SECRET_TEXT not in str(value), (s.name, s.attributes)


def test_a_recall_over_http_is_a_use_case_span_with_its_stages(
    spans: InMemorySpanExporter, db_url: str
) -> None:
    with serving(db_url) as s:
        item = precedent(s.rt)
        seen = factgen.Observation("payment-api", "config.connection_pool.max", 20, "test")
        use.observe(s.rt, use.LOCAL_ADMIN, [seen])
        spans.clear()
        with httpx.Client(base_url=s.base, timeout=30) as c:
            got = c.get(
                "/v1/recall",
                params={"query": SECRET_TEXT, "budget": 500},
                headers={"Authorization": f"Bearer {s.agent}"},
            )
        assert got.status_code == 200 and [r["item"]["id"] for r in got.json()["items"]] == [item]
    done = spans.get_finished_spans()
    [use_case] = _named(done, "caveat.recall_items")
    assert use_case.attributes == {
        "caveat.use_case": "recall_items",
        "caveat.tenant": "acme",
        "caveat.actor.role": "agent",
        "caveat.count": 1,
    }
    [auth] = _named(done, "caveat.authenticate")
    assert auth.attributes is not None and auth.attributes["caveat.tenant"] == "acme"
    stages = {s.name: s for s in done if s.name.startswith("recall.")}
    assert {"recall.candidates", "recall.gates", "recall.ranking", "recall.packing"} <= set(stages)
    assert use_case.context is not None
    for stage in stages.values():  # each a child of the use case, in its trace
        assert stage.context is not None and stage.parent is not None
        assert stage.context.trace_id == use_case.context.trace_id
    gates = [s.attributes or {} for s in _named(done, "recall.gates")]
    assert sum(int(str(g["caveat.count"])) for g in gates) == 1  # the text stage, then recency
    assert int(str(gates[0]["caveat.candidates"])) >= 1 and gates[0]["caveat.source"] == "ids"
    assert (stages["recall.candidates"].attributes or {})["caveat.channel"] == "text"
    _no_text(done)


def test_a_refusal_and_a_webhook_are_spans_too(spans: InMemorySpanExporter, db_url: str) -> None:
    with serving(db_url) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        spans.clear()  # the fixture's own tokens
        assert c.post("/v1/hooks/github", content=b"{}").status_code == 401
        refused = c.post(
            "/v1/items", json=[{"kind": "fact"}], headers={"Authorization": f"Bearer {s.agent}"}
        )
        assert refused.status_code == 422
        forbidden = c.post("/v1/tokens", json={"principal": "x", "role": "agent"},
                           headers={"Authorization": f"Bearer {s.agent}"})  # fmt: skip
        assert forbidden.status_code == 403
    done = spans.get_finished_spans()
    [hook] = _named(done, "caveat.hook")
    assert hook.attributes == {
        "caveat.hook.kind": "github",
        "caveat.tenant": "acme",
        "caveat.refusal": "unauthenticated",
    }
    [made] = _named(done, "caveat.create_token")
    assert (made.attributes or {})["caveat.refusal"] == "forbidden"


def test_a_source_pull_is_a_span(spans: InMemorySpanExporter, db_url: str, tmp_path: Path) -> None:
    from caveat import connectors
    from tests.caveat._doors import world

    (tmp_path / "payment-api.json").write_text('{"pool": {"max": 20}}')
    sources = (
        f"sources:\n  - name: configs\n    kind: file\n    path: {tmp_path}/{{subject}}.json\n"
        "    subjects: [payment-api]\n    attributes:\n"
        "      - {attribute: config.connection_pool.max, pointer: /pool/max}\n"
    )
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        use.load_sources(rt, use.LOCAL_ADMIN, sources)
        spans.clear()
        [outcome] = use.pull_sources(
            rt, use.LOCAL_ADMIN, ["configs"], puller=connectors.pull_sources
        )
    finally:
        engine.dispose()
    [pull] = _named(spans.get_finished_spans(), "caveat.source.pull")
    attributes = dict(pull.attributes or {})
    assert attributes.pop("caveat.source.fetch_ms") >= 0
    assert attributes == {
        "caveat.tenant": "acme",
        "caveat.source": "configs",
        "caveat.source.kind": "file",
        "caveat.source.stored": 1,
        "caveat.source.refused": 0,
        "caveat.source.failed": False,
    }
    assert [f.value for f in outcome.stored] == [20]


class _Collector(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.bodies.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caveat", *args],
        check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_spans_go_over_otlp_only_when_an_endpoint_is_set(db_url: str, tmp_path: Path) -> None:
    from tests.caveat._doors import world

    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        precedent(rt)
    finally:
        engine.dispose()
    env = {**os.environ, "DATABASE_URL": db_url, "CAVEAT_HOME": str(tmp_path)}
    env["CAVEAT_EMBEDDER"] = "none"
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    # off: the SDK is never imported
    probe = (
        "import sys; from caveat import _tracing; print(_tracing.configure(), "
        "any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
    )
    off = subprocess.run([sys.executable, "-c", probe], check=False, env=env, cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert off.stdout.split() == ["False", "False"], off.stderr
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        on = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}"}
        ran = _cli(["recall", SECRET_TEXT, "--tenant", "acme"], on)
        assert ran.returncode == 0, ran.stderr[-2000:]
    finally:
        collector.shutdown()
    assert _Collector.bodies, "nothing was exported"
    path, kind, _ = _Collector.bodies[0]
    assert path == "/v1/traces" and kind == "application/x-protobuf"
    everything = b"".join(b for _, _, b in _Collector.bodies)
    for expected in (b"caveat.recall_items", b"recall.gates", b"acme", b"service.name"):
        assert expected in everything
    assert SECRET_TEXT.encode() not in everything


def test_every_use_case_a_door_calls_is_traced() -> None:
    untraced = [n for n in use.USE_CASES if not hasattr(getattr(use, n), "__wrapped__")]
    assert untraced == []
