"""The Prometheus fact source against a real Prometheus (Debian's, scraping a
``prometheus_client`` exporter the test changes): what a pull stores, under which
subject, with which time and provenance, and what it refuses or counts as an error.

The module's Prometheus is shared: each test's query selects series of its own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from caveat import app, connectors
from tests.stack import Exporter, Prometheus, by_label

from ._pullkit import ATTR, entities, facts, load, prom, ratio, rt_fixture, status

__all__ = ["rt_fixture"]  # a fixture
from .conftest import StartPrometheus


def sources(url: str, query: str, *, name: str = "prom", extra: str = "") -> str:
    """A ``sources.yaml`` of one Prometheus source (``extra``: more of its attributes)."""
    return "\nsources:" + prom(name, url, query) + extra


def test_a_pull_stores_the_exporters_ratio_for_the_canonical_subject_of_an_alias(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    query = ratio("paymentapi-prod")
    exporter.set("paymentapi-prod", in_use=19.4, max=20)
    prometheus.wait_for(query, lambda r: "paymentapi-prod" in by_label(r))
    load(rt, sources(prometheus.url, query))

    before = datetime.now(UTC)
    [outcome] = connectors.pull_sources(rt)

    assert outcome.source == "prom" and outcome.error is None and outcome.refused == ()
    [fact] = outcome.stored
    assert (fact.subject, fact.attribute) == ("payment-api", ATTR)
    assert fact.value == pytest.approx(0.97)
    [row] = facts(rt, "prom")
    assert (row.subject, row.attribute) == ("payment-api", ATTR)
    assert row.value == {"t": "float", "v": pytest.approx(0.97)}
    # the sample's own time (Prometheus's evaluation time), not the store's clock
    assert row.observed_at == fact.observed_at
    assert abs((row.observed_at - before).total_seconds()) < 5
    assert row.provenance == {
        "source": "prom",
        "kind": "prometheus",
        "query": query,
        "sample_time": fact.observed_at.isoformat(),
    }
    st = status(rt, "prom")
    assert (st.pulls, st.samples_stored, st.errors, st.refused) == (1, 1, 0, {})


def test_nan_and_inf_are_refused_and_counted_never_stored(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    entities(rt, "nan-api", "inf-api", "fine-api")
    query = ratio("nan-api", "inf-api", "fine-api")
    exporter.set("nan-api", in_use=0, max=0)
    exporter.set("inf-api", in_use=5, max=0)
    exporter.set("fine-api", in_use=1, max=4)
    prometheus.wait_for(query, lambda r: len(by_label(r)) == 3)
    load(rt, sources(prometheus.url, query))

    [outcome] = connectors.pull_sources(rt)

    assert [(f.subject, f.value) for f in outcome.stored] == [("fine-api", 0.25)]
    refused = {r.observation.subject: r.code for r in outcome.refused}
    assert refused == {"nan-api": "not_finite", "inf-api": "not_finite"}
    assert [r.subject for r in facts(rt, "prom")] == ["fine-api"]
    assert status(rt, "prom").refused == {"not_finite": 2}


def test_a_label_no_entity_answers_to_is_refused_never_stored_under_a_guess(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    query = ratio("paymnet-api")  # a typo an alias lookup must not "correct"
    exporter.set("paymnet-api", in_use=3, max=4)
    prometheus.wait_for(query, lambda r: "paymnet-api" in by_label(r))
    load(rt, sources(prometheus.url, query))

    [outcome] = connectors.pull_sources(rt)

    assert outcome.stored == () and outcome.error is None
    [refusal] = outcome.refused
    assert (refusal.code, refusal.observation.subject) == ("subject_unresolved", "paymnet-api")
    assert facts(rt) == []
    assert status(rt, "prom").refused == {"subject_unresolved": 1}


def test_a_sample_without_the_label_is_refused_label_missing(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    exporter.set("nolabel-api", in_use=1, max=2)
    query = 'sum(db_pool_in_use{service="nolabel-api"})'
    prometheus.wait_for(query, bool)
    load(rt, sources(prometheus.url, query))

    [outcome] = connectors.pull_sources(rt)

    assert outcome.stored == ()
    assert [r.code for r in outcome.refused] == ["label_missing"]
    assert "no label 'service'" in outcome.refused[0].message


def test_two_samples_landing_on_one_subject_are_both_refused(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    # payment_api and payment-api are both aliases of payment-api: which is right?
    exporter.set("payment_api", in_use=1, max=10)
    exporter.set("payment-api", in_use=9, max=10)
    query = ratio("payment_api", "payment-api")
    prometheus.wait_for(query, lambda r: len(by_label(r)) == 2)
    load(rt, sources(prometheus.url, query))

    [outcome] = connectors.pull_sources(rt)

    assert outcome.stored == ()
    assert [(r.code, r.observation.subject) for r in outcome.refused] == [
        ("ambiguous", "payment-api"),
        ("ambiguous", "payment-api"),
    ]
    assert facts(rt) == []
    assert status(rt, "prom").refused == {"ambiguous": 2}


def test_a_scalar_answers_the_attributes_fixed_subject(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    exporter.set("scalar-db", in_use=3, max=12)
    sel = '{service="scalar-db"}'
    query = f"scalar(max(db_pool_in_use{sel}) / max(db_pool_max{sel}))"
    prometheus.wait_for(query.replace("scalar(", "(", 1), bool)
    load(
        rt,
        f"""
sources:
  - name: prom
    kind: prometheus
    url: {prometheus.url}
    attributes:
      - attribute: {ATTR}
        query: '{query}'
        subject: payments-db
""",
    )

    [outcome] = connectors.pull_sources(rt)

    assert [(f.subject, f.value) for f in outcome.stored] == [("payments-db", 0.25)]


def test_an_error_answer_is_that_querys_error_and_the_other_attributes_still_count(
    exporter: Exporter, prometheus: Prometheus, rt: app.Runtime
) -> None:
    exporter.set("errs-api", in_use=5, max=10)
    entities(rt, "errs-api")
    query = ratio("errs-api")
    prometheus.wait_for(query, bool)
    load(
        rt,
        sources(
            prometheus.url,
            query,
            extra="""      - attribute: config.connection_pool.max
        query: 'max by (service (db_pool_max'
        subject_label: service
""",
        ),
    )

    [outcome] = connectors.pull_sources(rt)

    assert [(f.subject, f.attribute) for f in outcome.stored] == [("errs-api", ATTR)]
    assert outcome.error is not None
    assert outcome.error.startswith("config.connection_pool.max: HTTP 400: bad_data")
    st = status(rt, "prom")
    assert (st.errors, st.samples_stored, st.consecutive_failures) == (1, 1, 1)
    assert st.last_error == outcome.error


def test_prometheus_stopped_is_an_error_counted_nothing_stored_no_exception(
    exporter: Exporter, start_prometheus: StartPrometheus, rt: app.Runtime
) -> None:
    p = start_prometheus()
    load(rt, sources(p.url, ratio("paymentapi-prod")))
    p.stop()

    [outcome] = connectors.pull_sources(rt)
    report = connectors.refresh(rt, [("payment-api", ATTR)])

    assert outcome.stored == () and outcome.refused == ()
    assert outcome.error is not None and "cannot reach http://127.0.0.1:" in outcome.error
    [failure] = report.failures
    assert failure.source == "prom" and failure.attributes == (ATTR,)
    assert "cannot reach" in failure.error
    assert facts(rt) == []
    st = status(rt, "prom")
    # both counted; only the pull moves the schedule's back-off (a refresh's never does)
    assert (st.pulls, st.errors, st.consecutive_failures, st.last_ok_at) == (2, 2, 1, None)
