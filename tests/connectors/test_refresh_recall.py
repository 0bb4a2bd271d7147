"""``refresh: true`` on a recall at every door, against the real Prometheus.

Each door's test asks about three services of its own, each with one active precedent
requiring ``metrics.pool_utilisation gte 0.8`` that nobody observed:

- ``live``: the exporter shows 97 of 100 in use; the refresh pulls the ratio from
  Prometheus, and the precedent comes back with the condition's value, the source,
  its query and the sample's time (explain's observation provenance);
- ``down``: the source points at a port nobody listens on; the recall still answers,
  the condition is UNKNOWN, the precedent withheld, and ``source_errors`` names the
  source and its error beside ``missing_observations``;
- ``slow``: a local source that answers after 3 s, with a 300 ms deadline: the answer
  names it "timed out after 300 ms" (the report's failure, not the wall time).

HTTP over real HTTP as the application role (GET and POST), MCP through the SDK
client over streamable HTTP, the CLI in process; the sources are loaded with
``caveat.app.load_sources``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner

import factgen
from caveat import app as use
from caveat.cli import app as cli
from predicates import ValueType
from tests.caveat.test_http import Server, client, serving
from tests.caveat.test_mcp_http import _data, _session
from tests.conftest import ADMIN
from tests.precedents import active_episode
from tests.stack import Exporter, Prometheus, by_label, free_port

from ._pullkit import ATTR, Answer, JsonServer, prom, vector

QUERY = "connection pool exhausted"
API = "/api/v1/query"


def ratio(service: str) -> str:
    return (
        f'max by (service) (db_pool_in_use{{service="{service}"}}'
        f' / db_pool_max{{service="{service}"}})'
    )


@dataclass(frozen=True)
class World:
    server: Server
    live: str
    down: str
    slow: str
    items: dict[str, int]
    sources: dict[str, str]

    def only(self, name: str) -> None:
        """Make ``name`` the tenant's one source (each answers the attribute for every
        subject: a refresh asks all of them)."""
        use.load_sources(self.server.rt, ADMIN, "sources:" + self.sources[name])


def _precedent(rt: use.Runtime, service: str) -> int:
    """An active precedent of ``service``: its pool exhausted (utilisation >= 0.8)."""
    return active_episode(rt, ADMIN, service, [f"{ATTR} gte 0.8"])


@contextmanager
def world(door: str, db_url: str, exporter: Exporter, prometheus: Prometheus) -> Iterator[World]:
    """The door's three services (``<door>-live``, ``-down``, ``-slow``), their
    precedents, the exporter showing 97 of 100 in use for the live one, and the text of
    three sources (``World.only`` loads one): ``prom`` (the real Prometheus) for the
    live one, ``gone`` (nobody listening) for the down one, ``slow`` (3 s) for the slow
    one."""
    live, down, slow = (f"{door}-{k}" for k in ("live", "down", "slow"))
    with serving(db_url) as s, JsonServer() as slow_server:
        specs = [
            factgen.AttributeSpec(
                "config.connection_pool.max", ValueType.parse("int"), content_type="configuration"
            ),
            factgen.AttributeSpec(ATTR, ValueType.parse("float"), max_age=_minutes(15)),
        ]
        use.declare_schema(s.rt, ADMIN, specs)
        use.import_entities(
            s.rt, ADMIN, [factgen.EntitySpec(n, "service") for n in (live, down, slow)]
        )
        items = {n: _precedent(s.rt, n) for n in (live, down, slow)}
        exporter.set(live, in_use=97, max=100)
        prometheus.wait_for(ratio(live), lambda r: by_label(r).get(live) == "0.97")
        slow_server.answers[API] = Answer(vector(({"service": slow}, "0.9")), delay=3)
        sources = {
            "prom": prom("prom", prometheus.url, ratio(live)),
            "gone": prom("gone", f"http://127.0.0.1:{free_port()}", ratio(down)),
            "slow": prom("slow", slow_server.url, ratio(slow)),
        }
        yield World(s, live, down, slow, items, sources)


def _minutes(n: int) -> Any:
    from datetime import timedelta

    return timedelta(minutes=n)


def _ask(service: str, **more: Any) -> dict[str, Any]:
    return {"query": QUERY, "subjects": [service], "explain": True, "refresh": True, **more}


def _assert_live(w: World, answer: dict[str, Any], prometheus: Prometheus) -> None:
    """The precedent is back, its condition's value from Prometheus with the query."""
    assert [r["item"]["id"] for r in answer["items"]] == [w.items[w.live]], answer
    [condition] = answer["items"][0]["conditions"]
    assert condition["value"] == "TRUE"
    observed = condition["observed"]
    assert (observed["value"], observed["source"], observed["inline"]) == (0.97, "prom", False)
    provenance = observed["provenance"]
    assert provenance["source"] == "prom" and provenance["query"] == ratio(w.live), provenance
    # the sample's own time, which is the observation's instant
    assert provenance["sample_time"][:19] == observed["observed_at"][:19], provenance
    assert answer["source_errors"] == []


def _assert_down(w: World, answer: dict[str, Any]) -> None:
    """The recall answers; the condition is UNKNOWN, the precedent withheld, the source
    and its error named beside missing_observations."""
    assert answer["items"] == []
    [withheld] = [x for x in answer["withheld"] if x["id"] == w.items[w.down]]
    assert withheld["gate"] == "applicability"
    [condition] = withheld["conditions"]
    assert (condition["value"], condition["observed"]) == ("UNKNOWN", None)
    assert ATTR in answer["missing_observations"]
    [error] = answer["source_errors"]
    assert (error["source"], error["attributes"]) == ("gone", [ATTR]), error
    assert error["error"], error


def _assert_slow(w: World, answer: dict[str, Any]) -> None:
    assert answer["items"] == []
    assert answer["source_errors"] == [
        {"source": "slow", "error": "timed out after 300 ms", "attributes": [ATTR]}
    ]


def test_refresh_over_http_get_and_post(
    db_url: str, exporter: Exporter, prometheus: Prometheus
) -> None:
    with world("http", db_url, exporter, prometheus) as w, client(w.server, w.server.agent) as c:
        # without refresh nobody observed it: withheld, the observation missing
        plain = c.post("/v1/recall", json={**_ask(w.live), "refresh": False})
        assert plain.status_code == 200, plain.text
        assert plain.json()["items"] == [] and ATTR in plain.json()["missing_observations"]
        w.only("prom")
        live = c.post("/v1/recall", json=_ask(w.live))
        assert live.status_code == 200, live.text
        _assert_live(w, live.json(), prometheus)
        w.only("gone")
        down = c.get(
            "/v1/recall",
            params={"query": QUERY, "subject": w.down, "explain": True, "refresh": True},
        )
        assert down.status_code == 200, down.text
        _assert_down(w, down.json())
        w.only("slow")
        slow = c.post("/v1/recall", json=_ask(w.slow, refresh_deadline_ms=300))
        assert slow.status_code == 200, slow.text
        _assert_slow(w, slow.json())
        # a source's token may observe, not recall: refused before anything is pulled
        pulls = {x.source: x.pulls for x in use.sources_status(w.server.rt, ADMIN)}
        token = use.create_token(w.server.rt, ADMIN, "source:slow", role="source").token
        with client(w.server, token) as as_source:
            refused = as_source.post("/v1/recall", json=_ask(w.slow))
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden"), refused.text
        assert {x.source: x.pulls for x in use.sources_status(w.server.rt, ADMIN)} == pulls
        # refresh needs subjects, and pulls now: refused, not ignored
        for bad in ({"query": QUERY, "refresh": True}, {**_ask(w.live), "as_of": "2026-01-01"}):
            refused = c.post("/v1/recall", json=bad)
            assert (refused.status_code, refused.json()["code"]) == (422, "invalid_input")
            assert "refresh" in refused.json()["detail"]


def test_refresh_through_the_mcp_sdk_client(
    db_url: str, exporter: Exporter, prometheus: Prometheus
) -> None:
    with world("mcp", db_url, exporter, prometheus) as w:
        plain_ask = {k: v for k, v in _ask(w.down).items() if k != "explain"}
        answers = {}
        for source, tool, args in (
            ("prom", "recall", _ask(w.live)),
            ("gone", "explain", plain_ask),
            ("slow", "recall", _ask(w.slow, refresh_deadline_ms=300)),
        ):
            w.only(source)
            [result] = asyncio.run(_session(w.server, w.server.agent, [(tool, args)]))
            answers[source] = _data(result)
        live, down, slow = answers["prom"], answers["gone"], answers["slow"]
        _assert_live(w, live, prometheus)
        _assert_down(w, down)
        _assert_slow(w, slow)
        # the same request at HTTP: the same source errors and withheld entries
        w.only("gone")
        with client(w.server, w.server.agent) as c:
            http = c.post("/v1/recall", json=_ask(w.down)).json()
        assert (http["source_errors"], http["withheld"]) == (
            down["source_errors"],
            down["withheld"],
        )


runner = CliRunner()


def _cli(*args: str) -> dict[str, Any]:
    res = runner.invoke(cli, ["recall", QUERY, *args, "--as", "agent-ir", "--json"])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.output)
    return data


def test_refresh_from_the_cli(
    db_url: str, exporter: Exporter, prometheus: Prometheus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    with world("cli", db_url, exporter, prometheus) as w:
        w.only("prom")
        _assert_live(w, _cli("--subject", w.live, "--explain", "--refresh"), prometheus)
        w.only("gone")
        _assert_down(w, _cli("--subject", w.down, "--explain", "--refresh"))
        # the setting is the default deadline (CAVEAT_REFRESH_DEADLINE_MS)
        monkeypatch.setenv("CAVEAT_REFRESH_DEADLINE_MS", "300")
        w.only("slow")
        _assert_slow(w, _cli("--subject", w.slow, "--refresh"))
        w.only("gone")
        # as a person reads it: the query behind the value, the source that failed
        text = runner.invoke(
            cli, ["recall", QUERY, "--subject", w.down, "--refresh", "--as", "agent-ir"]
        )
        assert text.exit_code == 0, text.output
        assert "source gone failed: " in text.output, text.output
        assert f"(asked for {ATTR})" in text.output
