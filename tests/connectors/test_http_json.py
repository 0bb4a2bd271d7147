"""The http_json fact source against a real local HTTP server: one GET per listed
subject (its name URL-quoted into the template), a JSON pointer per attribute, each
value typed by the schema; a missing pointer refused, a failed GET that subject's
error."""

from __future__ import annotations

from datetime import UTC, datetime

from caveat import app, connectors

from ._pullkit import (
    Answer,
    JsonServer,
    entities,
    facts,
    json_server_fixture,
    load,
    rt_fixture,
    status,
)

__all__ = ["json_server_fixture", "rt_fixture"]  # fixtures

MAX = "config.connection_pool.max"
UTIL = "metrics.pool_utilisation"


def config(url: str, *subjects: str) -> str:
    listed = ", ".join(f'"{s}"' for s in subjects)
    return f"""
sources:
  - name: cfg
    kind: http_json
    url: "{url}/config/{{subject}}.json"
    subjects: [{listed}]
    attributes:
      - attribute: {MAX}
        pointer: /pool/max
      - attribute: {UTIL}
        pointer: /stats/utilisation~1now
"""


def test_each_subject_is_fetched_and_read_at_its_pointers(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    json_server.answers["/config/paymentapi-prod.json"] = Answer(
        {"pool": {"max": 20}, "stats": {"utilisation/now": 0.97}}
    )
    json_server.answers["/config/payments-db.json"] = Answer(
        {"pool": {"max": 100.0}, "stats": {"utilisation/now": 0.5}}
    )
    load(rt, config(json_server.url, "paymentapi-prod", "payments-db"))
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

    [outcome] = connectors.pull_sources(rt, now=now)

    assert outcome.error is None and outcome.refused == ()
    got = {(f.subject, f.attribute): f.value for f in outcome.stored}
    assert got == {
        ("payment-api", MAX): 20,
        ("payment-api", UTIL): 0.97,
        ("payments-db", MAX): 100,  # an integral float for an int attribute
        ("payments-db", UTIL): 0.5,
    }
    row = next(r for r in facts(rt) if (r.subject, r.attribute) == ("payment-api", MAX))
    assert row.observed_at == now
    assert row.provenance == {
        "source": "cfg",
        "kind": "http_json",
        "url": f"{json_server.url}/config/paymentapi-prod.json",
        "pointer": "/pool/max",
        "sample_time": now.isoformat(),
    }


def test_a_subject_name_is_url_quoted_into_the_template(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    entities(rt, "team a/api?x")
    json_server.answers["/config/team a/api?x.json"] = Answer({"pool": {"max": 3}, "stats": {}})
    load(rt, config(json_server.url, "team a/api?x"))

    [outcome] = connectors.pull_sources(rt)

    assert [(f.subject, f.value) for f in outcome.stored] == [("team a/api?x", 3)]
    assert json_server.requests[0].path == "/config/team a/api?x.json"
    [refusal] = outcome.refused
    assert (refusal.code, refusal.observation.attribute) == ("pointer_missing", UTIL)
    assert status(rt, "cfg").refused == {"pointer_missing": 1}


def test_a_value_of_the_wrong_type_is_refused_and_a_failed_get_is_that_subjects_error(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    json_server.answers["/config/payment-api.json"] = Answer(
        {"pool": {"max": "twenty"}, "stats": {"utilisation/now": 0.4}}
    )
    # orders-db has no document: the server answers 404
    load(rt, config(json_server.url, "payment-api", "orders-db"))

    [outcome] = connectors.pull_sources(rt)

    assert [(f.subject, f.attribute) for f in outcome.stored] == [("payment-api", UTIL)]
    assert [(r.code, r.observation.subject) for r in outcome.refused] == [
        ("fact_type_mismatch", "payment-api")
    ]
    assert outcome.error == "orders-db: HTTP 404: no such path"
    assert status(rt, "cfg").errors == 1


def test_a_refresh_fetches_only_the_subjects_needed(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    for name in ("payment-api", "orders-db"):
        json_server.answers[f"/config/{name}.json"] = Answer(
            {"pool": {"max": 7}, "stats": {"utilisation/now": 0.1}}
        )
    load(rt, config(json_server.url, "payment-api", "orders-db"))

    report = connectors.refresh(rt, [("orders-db", MAX), ("payments-db", MAX)])

    assert [r.path for r in json_server.requests] == ["/config/orders-db.json"]
    [outcome] = report.outcomes
    assert [(f.subject, f.attribute) for f in outcome.stored] == [("orders-db", MAX)]
    assert report.skipped == (("payments-db", MAX),)  # cfg does not list payments-db


def test_two_listed_names_of_one_subject_are_both_refused_ambiguous(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    # payment-api and paymentapi-prod are one entity: two documents, which one is right?
    json_server.answers["/config/payment-api.json"] = Answer({"pool": {"max": 20}})
    json_server.answers["/config/paymentapi-prod.json"] = Answer({"pool": {"max": 100}})
    load(rt, config(json_server.url, "payment-api", "paymentapi-prod"))

    [outcome] = connectors.pull_sources(rt)

    assert outcome.stored == ()
    codes = sorted((r.code, r.observation.attribute) for r in outcome.refused)
    assert codes == [
        ("ambiguous", MAX),
        ("ambiguous", MAX),
        ("pointer_missing", UTIL),
        ("pointer_missing", UTIL),
    ]
    assert facts(rt) == []
