"""``pull_sources`` and ``refresh`` with real servers: the real Prometheus, and a real
local HTTP server that answers slowly, garbage, or an error; the deadline, the token,
what a refresh stores and skips, and the counters ``/metrics`` shows."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from caveat import app, connectors
from predicates.errors import NotFound
from tests.stack import Exporter, Prometheus, by_label

from ._pullkit import (
    ATTR,
    Answer,
    JsonServer,
    entities,
    facts,
    json_server_fixture,
    load,
    prom,
    ratio,
    rt_fixture,
    status,
    vector,
)

__all__ = ["json_server_fixture", "rt_fixture"]  # fixtures

MAX = "config.connection_pool.max"
API = "/api/v1/query"


def test_a_slow_source_times_out_within_the_deadline_and_the_others_still_count(
    exporter: Exporter, prometheus: Prometheus, json_server: JsonServer, rt: app.Runtime
) -> None:
    query = ratio("payment-api")
    exporter.set("payment-api", in_use=3, max=4)
    prometheus.wait_for(query, lambda r: "payment-api" in by_label(r))
    json_server.answers[API] = Answer(vector(({"service": "payment-api"}, "0.5")), delay=3)
    load(rt, "sources:" + prom("slow", json_server.url) + prom("prom", prometheus.url, query))

    started = time.monotonic()
    report = connectors.refresh(rt, [("payment-api", ATTR)], deadline=timedelta(milliseconds=500))
    elapsed = time.monotonic() - started

    assert elapsed < 1.5, elapsed  # the deadline, then two small transactions
    [failure] = report.failures
    assert failure == connectors.SourceFailure("slow", "timed out after 500 ms", (ATTR,))
    assert {o.source: len(o.stored) for o in report.outcomes} == {"slow": 0, "prom": 1}
    assert [(r.subject, r.source) for r in facts(rt)] == [("payment-api", "prom")]
    assert status(rt, "slow").last_error == "timed out after 500 ms"
    assert status(rt, "slow").errors == 1


def test_a_refresh_pulls_only_what_is_needed_and_says_what_no_source_answers(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    query = ratio("payment-api", "orders-db", "ghost-api")
    exporter.set("payment-api", in_use=1, max=2)
    exporter.set("orders-db", in_use=1, max=4)
    exporter.set("ghost-api", in_use=1, max=4)  # no entity answers to it
    prometheus.wait_for(query, lambda r: len(by_label(r)) == 3)
    load(rt, "sources:" + prom("prom", prometheus.url, query))

    report = connectors.refresh(rt, [("payment-api", ATTR), ("payment-api", MAX)])

    [outcome] = report.outcomes
    assert [(f.subject, f.value) for f in outcome.stored] == [("payment-api", 0.5)]
    assert outcome.refused == ()  # ghost-api is not a need: the scheduled pull counts it
    assert report.skipped == (("payment-api", MAX),)
    assert report.failures == ()
    # and with nothing needed, nothing is fetched or stored
    assert connectors.refresh(rt, []) == connectors.RefreshReport((), (), ())
    assert status(rt, "prom").pulls == 1


def test_garbage_is_an_error_and_nothing_of_it_is_stored(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    load(rt, "sources:" + prom("junk", json_server.url))
    garbage = [
        Answer(raw=b"<html>502 Bad Gateway</html>", content_type="text/html"),
        Answer({"status": "success", "data": {"resultType": "matrix", "result": []}}),
        Answer({"status": "success", "data": {"resultType": "vector", "result": [{"x": 1}]}}),
        Answer({"status": "error", "errorType": "timeout", "error": "query timed out"}, status=503),
        Answer({"hello": "world"}),
    ]
    errors = []
    for answer in garbage:
        json_server.answers[API] = answer
        [outcome] = connectors.pull_sources(rt, ["junk"])
        assert outcome.stored == () and outcome.refused == ()
        errors.append(outcome.error)
    assert errors == [
        f"{ATTR}: the answer is not JSON (text/html)",
        f"{ATTR}: an instant query answers a vector or a scalar, not 'matrix'",
        f"{ATTR}: a vector sample has metric labels and a value",
        f"{ATTR}: HTTP 503: timeout: query timed out",
        f"{ATTR}: the answer is not a Prometheus API response",
    ]
    assert facts(rt) == []
    assert status(rt, "junk").errors == 5


def test_token_env_is_sent_as_a_bearer_and_a_missing_one_is_an_error_that_names_it(
    json_server: JsonServer, rt: app.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    json_server.answers[API] = Answer(vector(({"service": "payment-api"}, "0.4")))
    load(rt, "sources:" + prom("prom", json_server.url, extra="    token_env: PROM_TOKEN\n"))
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    monkeypatch.delenv("CAVEAT_SOURCE_ENV", raising=False)
    [not_allowed] = connectors.pull_sources(rt)  # the operator allowed no variable
    monkeypatch.setenv("CAVEAT_SOURCE_ENV", "GRAFANA_TOKEN, PROM_TOKEN")
    monkeypatch.delenv("PROM_TOKEN", raising=False)

    [missing] = connectors.pull_sources(rt)
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    [sent] = connectors.pull_sources(rt)

    assert not_allowed.error == (
        f"{ATTR}: token_env PROM_TOKEN is not a variable the server allows sources to send "
        "(the operator lists them in CAVEAT_SOURCE_ENV)"
    )
    assert missing.error == f"{ATTR}: the environment variable PROM_TOKEN (token_env) is not set"
    assert json_server.requests[-1].headers["authorization"] == "Bearer s3cret-token"
    assert len(json_server.requests) == 1  # nothing was sent without the token
    assert json_server.requests[-1].query == "query=q"  # no time: Prometheus's now
    assert [f.value for f in sent.stored] == [0.4]
    assert "s3cret" not in repr(status(rt, "prom"))


def test_an_unknown_source_name_is_not_found_before_anything_is_fetched(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    load(rt, "sources:" + prom("prom", json_server.url))
    with pytest.raises(NotFound, match="no source 'nope' \\(declared: prom\\)"):
        connectors.pull_sources(rt, ["prom", "nope"])
    assert json_server.requests == []
    assert connectors.pull_sources(rt, []) == []


def test_the_counters_for_metrics_count_samples_by_outcome_errors_and_latency(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    entities(rt, "m-api", "m-nan")
    json_server.answers[API] = Answer(
        vector(({"service": "m-api"}, "0.5"), ({"service": "m-nan"}, "NaN"), ({}, "1"))
    )
    load(rt, "sources:" + prom("counted", json_server.url))
    registry = CollectorRegistry()
    registry.register(connectors.SourceMetrics())

    def sample(name: str, **labels: str) -> float:
        value = registry.get_sample_value(
            name, {"tenant": rt.tenant, "source": "counted", **labels}
        )
        return value or 0.0

    before = {
        o: sample("caveat_source_samples_total", outcome=o)
        for o in ("stored", "not_finite", "label_missing")
    }
    errors_before = sample("caveat_source_pull_errors_total")
    count_before = sample("caveat_source_pull_seconds_count")
    connectors.pull_sources(rt)
    json_server.answers[API] = Answer(raw=b"nope")
    connectors.pull_sources(rt)

    assert sample("caveat_source_samples_total", outcome="stored") - before["stored"] == 1
    assert sample("caveat_source_samples_total", outcome="not_finite") - before["not_finite"] == 1
    assert (
        sample("caveat_source_samples_total", outcome="label_missing") - before["label_missing"]
        == 1
    )
    assert sample("caveat_source_pull_errors_total") - errors_before == 1
    assert sample("caveat_source_pull_seconds_count") - count_before == 2
    assert b"caveat_source_samples_total" in generate_latest(registry)


def test_no_connection_is_held_while_a_source_is_fetched(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    """Fetch first, then one use-case call: while the source answers, the pull holds no
    database connection (so no transaction spans the network call)."""
    pool = rt.engine.pool
    json_server.probe = pool.checkedout
    json_server.answers[API] = Answer(vector(({"service": "payment-api"}, "0.3")), delay=0.2)
    load(rt, "sources:" + prom("prom", json_server.url))

    [outcome] = connectors.pull_sources(rt)
    connectors.refresh(rt, [("payment-api", ATTR)])

    assert [f.value for f in outcome.stored] == [0.3]
    assert json_server.probed == [0, 0]


def test_the_public_surface_is_pinned_and_documented() -> None:
    assert set(connectors.__all__) == {
        "AMBIGUOUS",
        "LABEL_MISSING",
        "NOT_FINITE",
        "POINTER_MISSING",
        "FetchError",
        "RefreshReport",
        "SourceFailure",
        "SourceMetrics",
        "Transport",
        "count_pull",
        "pull_sources",
        "refresh",
        # hooks (docs/hooks.md)
        "Translation",
        "hook_kind",
        "receive",
        "translators",
        # the server-side extractor (docs/proposals.md)
        "ChatExtractor",
        "chat_request",
    }
    root = Path(__file__).resolve().parents[2] / "docs"
    for name in ("receive", "source_actor", "hook_kind"):
        assert name in (root / "hooks.md").read_text(), name
    for name in ("ChatExtractor", "chat_request"):
        assert name in (root / "proposals.md").read_text(), name
    docs = (root / "sources.md").read_text()
    for name in ("pull_sources", "refresh", "RefreshReport", "SourceFailure", "SourceMetrics"):
        assert name in docs, name
    for code in ("label_missing", "not_finite", "ambiguous", "pointer_missing"):
        assert f"`{code}`" in docs, code


def test_a_pull_of_a_slow_source_ends_at_the_sources_timeout(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    json_server.answers[API] = Answer(vector(({"service": "payment-api"}, "0.5")), delay=3)
    load(rt, "sources:" + prom("slow", json_server.url, extra="    timeout: 300ms\n"))

    started = time.monotonic()
    [outcome] = connectors.pull_sources(rt)

    assert time.monotonic() - started < 1.5
    assert outcome.error == f"{ATTR}: timed out after 300 ms"
    assert outcome.stored == ()
    assert status(rt, "slow").consecutive_failures == 1
