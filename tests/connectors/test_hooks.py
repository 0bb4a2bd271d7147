"""Hooks over real HTTP (docs/hooks.md): the recorded payloads of tests/connectors/payloads
posted to ``POST /v1/hooks/{kind}`` of a uvicorn server whose engine logs in as the
application role, authenticated as their senders are (a ``source`` token, or the
sender's HMAC signature), and the store read back afterwards."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN

PAYLOADS = Path(__file__).parent / "payloads"
GITHUB_SECRET = "gh-test-secret"
PD_SECRET = "pd-test-secret"

SOURCES = """\
hooks:
  alertmanager: {subject_labels: [service]}
  github:
    repositories:
      acme/payments@production: [payment-api]
      acme/search: [search-api]
    secret_env: CAVEAT_TEST_GITHUB_SECRET
  pagerduty:
    services: {PF9KMXH: [payment_api]}
    secret_env: CAVEAT_TEST_PD_SECRET
  cloudevents:
    types: {dev.argocd.sync.succeeded: deploy}
"""


def payload(name: str) -> bytes:
    return (PAYLOADS / name).read_bytes()


def github_signature(body: bytes, secret: str = GITHUB_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def pagerduty_signature(body: bytes, secret: str = PD_SECRET) -> str:
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Hooked:
    server: Server
    source: str  # a token of role source, tenant acme
    other_source: str  # a token of role source, tenant globex
    owner: sa.Engine  # the database's owner: reads every tenant's rows

    def post(
        self,
        kind: str,
        body: bytes,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token:
            sent["Authorization"] = f"Bearer {token}"
        with httpx.Client(base_url=self.server.base, timeout=30) as c:
            return c.post(f"/v1/hooks/{kind}", content=body, headers=sent, params=params)

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.owner.connect() as conn:
            return list(conn.execute(sa.text(sql), params))

    def count(self, table: str, where: str = "true", **params: Any) -> int:
        return int(self.rows(f"SELECT count(*) FROM {table} WHERE {where}", **params)[0][0])


def hooks_world(rt: use.Runtime) -> None:
    """On top of the door tests' world: the alert attribute, search-api, the hooks."""
    use.declare_schema(
        rt, ADMIN, [factgen.AttributeSpec("alert.PoolExhausted", ValueType.parse("bool"))]
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec("search-api", "service", ())])
    use.load_sources(rt, ADMIN, SOURCES)


@pytest.fixture
def hooked(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hooked]:
    monkeypatch.setenv("CAVEAT_TEST_GITHUB_SECRET", GITHUB_SECRET)
    monkeypatch.setenv("CAVEAT_TEST_PD_SECRET", PD_SECRET)
    owner = db.make_engine(db_url)
    with serving(db_url) as s:
        hooks_world(s.rt)
        hooks_world(s.rt.for_tenant("globex"))
        source = use.create_token(s.rt, ADMIN, "alertmanager", role="source").token
        other = use.create_token(s.rt.for_tenant("globex"), ADMIN, "am-g", role="source").token
        yield Hooked(s, source, other, owner)
    owner.dispose()


def problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = r.json()
    assert body["code"] == code, body
    return body


def refusals(h: Hooked, tenant: str = "acme") -> list[Any]:
    return h.rows(
        "SELECT code, detail FROM audit_log WHERE tenant_id = :t AND action = 'hook_refused'",
        t=tenant,
    )


# --- Alertmanager ----------------------------------------------------------------------


def test_a_firing_alert_opens_its_case_and_observes_the_alert(hooked: Hooked) -> None:
    r = hooked.post("alertmanager", payload("alertmanager-firing.json"), token=hooked.source)
    assert r.status_code == 200, r.text
    delivery = r.json()
    assert delivery["kind"] == "alertmanager" and delivery["duplicate"] is False
    assert delivery["delivery_id"].startswith("am-")
    opened, observed = delivery["done"]
    assert opened["action"] == "open_case" and opened["subjects"] == ["payment-api"]
    assert opened["case"].startswith("am-poolexhausted-")
    assert observed["facts"] == [{"subject": "payment-api", "attribute": "alert.PoolExhausted"}]
    (case,) = hooked.rows("SELECT id, subjects, status FROM cases WHERE tenant_id = 'acme'")
    assert (case.id, list(case.subjects), case.status) == (opened["case"], ["payment-api"], "open")
    (fact,) = hooked.rows(
        "SELECT value, observed_at, source FROM facts WHERE attribute = 'alert.PoolExhausted'"
    )
    assert fact.observed_at == datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC)
    assert fact.source == "alertmanager"
    assert hooked.count("audit_log", "action = 'open_case' AND actor = 'alertmanager'") == 1
    (kept,) = hooked.rows("SELECT kind, delivery_id, outcome FROM hook_deliveries")
    assert (kept.kind, kept.delivery_id) == ("alertmanager", delivery["delivery_id"])
    assert kept.outcome == {"done": delivery["done"]}


def test_a_repeated_notification_is_acted_on_once(hooked: Hooked) -> None:
    body = payload("alertmanager-firing.json")
    first = hooked.post("alertmanager", body, token=hooked.source).json()
    again = hooked.post("alertmanager", body, token=hooked.source)
    assert again.status_code == 200
    assert again.json() == {**first, "duplicate": True}
    assert hooked.count("cases") == 1
    assert hooked.count("facts", "attribute = 'alert.PoolExhausted'") == 1


def test_a_resolved_alert_observes_false_and_the_case_stays(hooked: Hooked) -> None:
    hooked.post("alertmanager", payload("alertmanager-firing.json"), token=hooked.source)
    r = hooked.post("alertmanager", payload("alertmanager-resolved.json"), token=hooked.source)
    assert r.status_code == 200, r.text
    assert [d["action"] for d in r.json()["done"]] == ["observe"]
    values = hooked.rows(
        "SELECT value FROM facts WHERE attribute = 'alert.PoolExhausted' ORDER BY observed_at"
    )
    assert [v.value["v"] for v in values] == [True, False]
    (current,) = hooked.rows(
        "SELECT value, observed_at FROM facts_current WHERE attribute = 'alert.PoolExhausted'"
    )
    assert current.value["v"] is False
    assert current.observed_at == datetime(2026, 12, 3, 10, 20, tzinfo=UTC)
    assert hooked.count("cases", "status = 'open'") == 1


def test_a_delivery_whose_second_alert_does_not_resolve_writes_nothing(hooked: Hooked) -> None:
    body = payload("alertmanager-second-unresolved.json")
    r = hooked.post("alertmanager", body, token=hooked.source)
    problem(r, 404, "subject_unresolved")
    assert "no-such-service" in r.json()["detail"]
    assert hooked.count("cases") == 0
    assert hooked.count("facts", "attribute = 'alert.PoolExhausted'") == 0
    assert hooked.count("hook_deliveries") == 0
    ((code, detail),) = refusals(hooked)
    assert code == "subject_unresolved" and detail["kind"] == "alertmanager"


def test_an_alert_without_a_subject_label_is_refused(hooked: Hooked) -> None:
    data = json.loads(payload("alertmanager-firing.json"))
    del data["alerts"][0]["labels"]["service"]
    r = hooked.post("alertmanager", json.dumps(data).encode(), token=hooked.source)
    assert "subject labels service" in problem(r, 404, "subject_unresolved")["detail"]
    assert hooked.count("cases") == 0


def test_an_undeclared_alert_attribute_is_skipped_and_the_case_still_opens(
    hooked: Hooked,
) -> None:
    text = payload("alertmanager-firing.json").decode().replace("PoolExhausted", "DiskFull")
    r = hooked.post("alertmanager", text.encode(), token=hooked.source)
    assert r.status_code == 200, r.text
    opened, observed = r.json()["done"]
    assert opened["action"] == "open_case"
    assert observed["facts"] == []
    assert observed["skipped"] == [
        {"subject": "payment-api", "attribute": "alert.DiskFull", "code": "fact_unknown_attribute"}
    ]
    assert hooked.count("facts", "attribute = 'alert.DiskFull'") == 0


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.update(version="3"), "version"),
        (lambda d: d.update(status="pending"), "status"),
        (lambda d: d.update(alerts=[]), "alerts"),
        (lambda d: d["alerts"][0].update(startsAt="yesterday"), "alerts[0].startsAt"),
        (lambda d: d["alerts"][0]["labels"].update(service=3), "alerts[0].labels"),
    ],
)
def test_a_payload_that_is_not_version_4_says_where(
    hooked: Hooked, mutate: Any, where: str
) -> None:
    data = json.loads(payload("alertmanager-firing.json"))
    mutate(data)
    r = hooked.post("alertmanager", json.dumps(data).encode(), token=hooked.source)
    detail = problem(r, 422, "document_invalid")["detail"]
    assert re.match(rf"alertmanager:\d+:\d+: {re.escape(where)}: ", detail), detail
    assert hooked.count("cases") == 0
    assert [c for c, _ in refusals(hooked)] == ["document_invalid"]


def test_not_json_is_document_invalid(hooked: Hooked) -> None:
    r = hooked.post("alertmanager", b"{not json", token=hooked.source)
    problem(r, 422, "document_invalid")


def test_an_integer_beyond_pythons_digit_limit_is_document_invalid_not_a_500(
    hooked: Hooked,
) -> None:
    # json.loads raises a plain ValueError (not JSONDecodeError) past 4,300 digits
    r = hooked.post("alertmanager", b'{"version": ' + b"9" * 5000 + b"}", token=hooked.source)
    problem(r, 422, "document_invalid")
    assert [row.code for row in refusals(hooked)] == ["document_invalid"]


# --- authentication and isolation ------------------------------------------------------


def test_an_unknown_kind_is_not_found_and_audited(hooked: Hooked) -> None:
    r = hooked.post("nagios", b"{}", token=hooked.source)
    assert "alertmanager" in problem(r, 404, "not_found")["detail"]
    assert [c for c, _ in refusals(hooked)] == ["not_found"]


@pytest.mark.parametrize(
    "token",
    [None, "cvt1.YWNtZQ.nope.nope", "cvt1.acme", "Basic dXNlcjpwYXNz"],
    ids=["none", "acme-wrong-secret", "malformed", "basic"],
)
def test_a_delivery_without_a_valid_token_is_unauthenticated(
    hooked: Hooked, token: str | None
) -> None:
    """Refused and audited in the tenant addressed: the token's (acme's, for a token
    naming acme with a wrong secret), else the server's."""
    headers = {"Authorization": token} if token and token.startswith("Basic") else {}
    bearer = None if token is None or token.startswith("Basic") else token
    r = hooked.post(
        "alertmanager", payload("alertmanager-firing.json"), token=bearer, headers=headers
    )
    problem(r, 401, "unauthenticated")
    assert hooked.count("cases") == 0
    assert [c for c, _ in refusals(hooked)] == ["unauthenticated"]


def test_hooks_take_only_a_source_token(hooked: Hooked) -> None:
    r = hooked.post("alertmanager", payload("alertmanager-firing.json"), token=hooked.server.agent)
    assert "role source" in problem(r, 403, "forbidden")["detail"]
    assert hooked.count("cases") == 0


def test_a_hook_with_tenant_as_token_never_writes_another_tenant(hooked: Hooked) -> None:
    body = payload("alertmanager-firing.json")
    r = hooked.post("alertmanager", body, token=hooked.source, params={"tenant": "globex"})
    problem(r, 403, "forbidden")
    assert hooked.count("cases") == 0
    ok = hooked.post("alertmanager", body, token=hooked.other_source)
    assert ok.status_code == 200, ok.text
    assert [r.tenant_id for r in hooked.rows("SELECT tenant_id FROM cases")] == ["globex"]
    # acme's own delivery of the same payload is its own: not a duplicate of globex's
    mine = hooked.post("alertmanager", body, token=hooked.source)
    assert mine.json()["duplicate"] is False
    assert sorted(r.tenant_id for r in hooked.rows("SELECT tenant_id FROM cases")) == [
        "acme",
        "globex",
    ]


def test_a_source_token_cannot_recall(hooked: Hooked) -> None:
    with httpx.Client(
        base_url=hooked.server.base, headers={"Authorization": f"Bearer {hooked.source}"}
    ) as c:
        r = c.get("/v1/recall", params={"query": "pool exhausted"})
        problem(r, 403, "forbidden")
        w = c.post("/v1/items/1/verify", json={})
        assert w.status_code in (403, 422), w.text


# --- GitHub ----------------------------------------------------------------------------


def _github_post(
    hooked: Hooked, body: bytes, *, signed: bytes | None = None, **headers: str
) -> httpx.Response:
    """A ``deployment_status`` delivery of ``body``, signed over ``signed`` (default:
    the body itself)."""
    sent = {
        "X-GitHub-Event": "deployment_status",
        "X-Hub-Signature-256": github_signature(body if signed is None else signed),
        **headers,
    }
    return hooked.post("github", body, headers=sent)


def _github(hooked: Hooked, name: str, **headers: str) -> httpx.Response:
    """The recorded payload ``name``, with GitHub's delivery id."""
    headers = {"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", **headers}
    return _github_post(hooked, payload(name), **headers)


def test_a_successful_deployment_is_a_deploy_event_with_its_changes(hooked: Hooked) -> None:
    r = _github(hooked, "github-deployment-status-success.json")
    assert r.status_code == 200, r.text
    (done,) = r.json()["done"]
    assert (done["action"], done["type"], done["subjects"]) == ("event", "deploy", ["payment-api"])
    (event,) = hooked.rows("SELECT type, subjects, changes, occurred_at, source FROM events")
    assert list(event.subjects) == ["payment-api"]
    assert set(event.changes) == {"config.connection_pool.max"}
    assert event.occurred_at == datetime(2026, 12, 3, 10, 5, tzinfo=UTC)
    assert event.source == "source:github"
    (fact,) = hooked.rows(
        "SELECT source FROM facts_current WHERE attribute = 'config.connection_pool.max'"
    )
    assert fact.source == "event:deploy"


def test_a_redelivered_deployment_is_one_event(hooked: Hooked) -> None:
    first = _github(hooked, "github-deployment-status-success.json")
    again = _github(hooked, "github-deployment-status-success.json")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["duplicate"] is True
    assert hooked.count("events") == 1


@pytest.mark.parametrize(
    "signature",
    ["sha256=" + "0" * 64, "", "sha1=abc", None],
    ids=["wrong", "empty", "sha1", "wrong-secret"],
)
def test_a_badly_signed_github_delivery_writes_nothing(
    hooked: Hooked, signature: str | None
) -> None:
    body = payload("github-deployment-status-success.json")
    sig = github_signature(body, "another-secret") if signature is None else signature
    r = _github(hooked, "github-deployment-status-success.json", **{"X-Hub-Signature-256": sig})
    problem(r, 401, "unauthenticated")
    assert hooked.count("events") == 0
    ((code, detail),) = refusals(hooked)
    assert code == "unauthenticated" and detail["kind"] == "github"


def test_a_signature_over_another_body_is_refused(hooked: Hooked) -> None:
    body = payload("github-deployment-status-success.json")
    tampered = body.replace(b'"max": 100', b'"max": 999')
    r = _github_post(hooked, tampered, signed=body)
    problem(r, 401, "unauthenticated")
    assert hooked.count("events") == 0


def test_without_a_secret_configured_a_signed_delivery_is_refused(
    hooked: Hooked, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAVEAT_TEST_GITHUB_SECRET")
    r = _github(hooked, "github-deployment-status-success.json")
    assert "secret_env" in problem(r, 401, "unauthenticated")["detail"]


@pytest.mark.parametrize(
    ("name", "event", "reason"),
    [
        ("github-deployment-status-failure.json", "deployment_status", "'failure'"),
        ("github-deployment-status-success.json", "ping", "ping"),
        ("github-deployment-status-success.json", "push", "'push'"),
    ],
)
def test_other_github_deliveries_are_acknowledged_and_ignored(
    hooked: Hooked, name: str, event: str, reason: str
) -> None:
    r = _github(hooked, name, **{"X-GitHub-Event": event})
    assert r.status_code == 202, r.text
    (done,) = r.json()["done"]
    assert done["action"] == "ignored" and reason in done["reason"]
    assert hooked.count("events") == 0


def test_a_repository_that_maps_to_no_subject_is_refused(hooked: Hooked) -> None:
    text = payload("github-deployment-status-success.json").decode()
    body = text.replace("acme/payments", "acme/unknown").encode()
    r = _github_post(hooked, body)
    assert "acme/unknown" in problem(r, 404, "subject_unresolved")["detail"]


def test_a_github_delivery_may_use_a_source_token_instead(hooked: Hooked) -> None:
    r = hooked.post(
        "github",
        payload("github-deployment-status-success.json"),
        token=hooked.source,
        headers={"X-GitHub-Event": "deployment_status"},
    )
    assert r.status_code == 200, r.text
    (event,) = hooked.rows("SELECT source FROM events")
    assert event.source == "alertmanager"  # the token's principal


# --- CloudEvents -----------------------------------------------------------------------


def _structured(
    hooked: Hooked, body: bytes, content_type: str = "application/cloudevents+json"
) -> httpx.Response:
    """A structured-mode CloudEvent, sent with a source token."""
    return hooked.post(
        "cloudevents", body, token=hooked.source, headers={"Content-Type": content_type}
    )


def test_a_structured_cloudevent_of_a_mapped_type_is_its_event(hooked: Hooked) -> None:
    r = _structured(
        hooked, payload("cloudevent-structured.json"), "application/cloudevents+json; charset=utf-8"
    )
    assert r.status_code == 200, r.text
    assert r.json()["delivery_id"] == "argocd/payments argocd-sync-7"
    (event,) = hooked.rows("SELECT type, subjects, external_id FROM events")
    assert (event.type, list(event.subjects)) == ("deploy", ["payment-api"])
    assert event.external_id == "argocd/payments argocd-sync-7"


def test_a_binary_mode_cloudevent_is_read_from_its_headers(hooked: Hooked) -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "bin-1",
        "ce-source": "ci/payments",
        "ce-type": "com.example.config-change",
        "ce-time": "2026-12-03T10:07:00Z",
        "Content-Type": "application/json",
    }
    body = payload("cloudevent-binary-data.json")
    r = hooked.post("cloudevents", body, token=hooked.source, headers=headers)
    assert r.status_code == 200, r.text
    (event,) = hooked.rows("SELECT type, subjects, occurred_at, external_id FROM events")
    assert (event.type, list(event.subjects)) == ("config_change", ["payment-api"])
    assert event.occurred_at == datetime(2026, 12, 3, 10, 7, tzinfo=UTC)
    again = hooked.post("cloudevents", body, token=hooked.source, headers=headers)
    assert again.json()["duplicate"] is True
    assert hooked.count("events") == 1


def test_a_cloudevent_of_an_unknown_type_is_ignored(hooked: Hooked) -> None:
    data = json.loads(payload("cloudevent-structured.json"))
    data["type"] = "dev.argocd.app.health-degraded"
    r = _structured(hooked, json.dumps(data).encode())
    assert r.status_code == 202, r.text
    assert "health-degraded" in r.json()["done"][0]["reason"]
    assert hooked.count("events") == 0


def future_cloudevent() -> bytes:
    """The recorded CloudEvent dated 2027 (or a year ahead, once 2027 has come)."""
    data = json.loads(payload("cloudevent-2027.json"))
    if datetime.now(UTC) > datetime(2026, 12, 1, tzinfo=UTC) + timedelta(days=25):
        data["time"] = (datetime.now(UTC) + timedelta(days=365)).isoformat()
    return json.dumps(data).encode()


def test_a_cloudevent_dated_2027_is_refused_at_the_hook(hooked: Hooked) -> None:
    r = _structured(hooked, future_cloudevent())
    assert "event_clock_skew" in problem(r, 422, "event_in_future")["detail"]
    assert hooked.count("events") == 0
    assert hooked.count("facts", "attribute = 'config.connection_pool.max'") == 0
    assert [c for c, _ in refusals(hooked)] == ["event_in_future"]


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"Content-Type": "application/json"}, b"{}"),
        ({"Content-Type": "application/cloudevents+json"}, b'{"specversion": "0.3"}'),
        ({"Content-Type": "application/cloudevents-batch+json"}, b"[]"),
        ({"ce-specversion": "1.0", "ce-id": "x", "ce-type": "a.deploy"}, b"{}"),
    ],
    ids=["plain-json", "old-spec", "batch", "no-source"],
)
def test_what_is_not_a_cloudevent_is_document_invalid(
    hooked: Hooked, headers: dict[str, str], body: bytes
) -> None:
    r = hooked.post("cloudevents", body, token=hooked.source, headers=headers)
    problem(r, 422, "document_invalid")


# --- PagerDuty -------------------------------------------------------------------------


def _pd(
    hooked: Hooked, body: bytes, signature: str | None = None, *, tenant: str | None = None
) -> httpx.Response:
    """A PagerDuty delivery of ``body``, signed with the secret (or ``signature``), to
    ``tenant`` when given (``?tenant=``)."""
    sig = pagerduty_signature(body) if signature is None else signature
    params = None if tenant is None else {"tenant": tenant}
    return hooked.post("pagerduty", body, headers={"X-PagerDuty-Signature": sig}, params=params)


def test_a_triggered_incident_opens_its_case(hooked: Hooked) -> None:
    r = _pd(hooked, payload("pagerduty-triggered.json"))
    assert r.status_code == 200, r.text
    assert r.json()["delivery_id"] == "01DEN9Q8V2RT1ZKM0KZ4DPE5CQ"
    (case,) = hooked.rows("SELECT id, subjects, status, opened_by FROM cases")
    assert (case.id, list(case.subjects), case.status) == (
        "pd-Q0RIJJZL24RC6W",
        ["payment-api"],
        "open",
    )


def test_a_resolved_incident_without_an_outcome_waits_for_one(hooked: Hooked) -> None:
    _pd(hooked, payload("pagerduty-triggered.json"))
    r = _pd(hooked, payload("pagerduty-resolved.json"))
    assert r.status_code == 200, r.text
    assert [d["action"] for d in r.json()["done"]] == ["join_case", "awaiting_outcome"]
    assert hooked.count("cases", "status = 'open'") == 1
    (row,) = hooked.rows("SELECT actor, detail FROM audit_log WHERE action = 'awaiting_outcome'")
    assert (row.actor, row.detail) == ("source:pagerduty", {"case": "pd-Q0RIJJZL24RC6W"})


def test_a_resolved_incident_with_an_outcome_closes_the_case(hooked: Hooked) -> None:
    _pd(hooked, payload("pagerduty-triggered.json"))
    data = json.loads(payload("pagerduty-resolved.json"))
    data["event"]["data"]["outcome"] = "confirmed"
    r = _pd(hooked, json.dumps(data).encode())
    assert r.status_code == 200, r.text
    assert r.json()["done"][-1] == {
        "action": "close_case",
        "case": "pd-Q0RIJJZL24RC6W",
        "outcome": "confirmed",
    }
    assert hooked.count("cases", "status = 'open'") == 0


def test_pagerduty_signatures_during_a_secret_rotation(hooked: Hooked) -> None:
    body = payload("pagerduty-triggered.json")
    rotated = f"v1={'ab' * 32},{pagerduty_signature(body)}"
    assert _pd(hooked, body, rotated).status_code == 200
    problem(_pd(hooked, body, f"v1={'ab' * 32}"), 401, "unauthenticated")
    problem(_pd(hooked, body, ""), 401, "unauthenticated")


def test_a_pagerduty_event_dated_ahead_of_the_clock_is_refused(hooked: Hooked) -> None:
    data = json.loads(payload("pagerduty-triggered.json"))
    data["event"]["occurred_at"] = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    problem(_pd(hooked, json.dumps(data).encode()), 422, "event_in_future")
    assert hooked.count("cases") == 0


def test_a_repeated_pagerduty_event_opens_one_case(hooked: Hooked) -> None:
    body = payload("pagerduty-triggered.json")
    assert _pd(hooked, body).json()["duplicate"] is False
    assert _pd(hooked, body).json()["duplicate"] is True
    assert hooked.count("cases") == 1
    assert hooked.count("audit_log", "action = 'open_case'") == 1


def test_a_signed_delivery_goes_to_the_tenant_it_names(hooked: Hooked) -> None:
    body = payload("pagerduty-triggered.json")
    r = _pd(hooked, body, tenant="globex")
    assert r.status_code == 200, r.text
    assert [r.tenant_id for r in hooked.rows("SELECT tenant_id FROM cases")] == ["globex"]


def test_a_signed_delivery_to_a_tenant_that_does_not_exist_is_refused(hooked: Hooked) -> None:
    body = payload("pagerduty-triggered.json")
    r = _pd(hooked, body, tenant="nobody")
    problem(r, 401, "unauthenticated")
    assert hooked.count("cases") == 0


# --- over HTTP, never a 500 -------------------------------------------------------------

_HEADER = st.sampled_from(
    ["Content-Type", "X-GitHub-Event", "X-Hub-Signature-256", "X-PagerDuty-Signature", "ce-id"]
)
_PATH = st.one_of(
    st.sampled_from(["alertmanager", "github", "cloudevents", "pagerduty"]),
    st.text(alphabet="abcxyz%2F.-_~", max_size=12),
)


@settings(
    max_examples=int(os.environ.get("CAVEAT_FUZZ_EXAMPLES", "60")) // 2,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=_PATH,
    name=st.sampled_from(sorted(p.name for p in PAYLOADS.glob("*.json"))),
    cut=st.integers(0, 4000),
    junk=st.binary(max_size=64),
    headers=st.dictionaries(
        _HEADER,
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(
            str.strip
        ),
        max_size=3,
    ),
    with_token=st.booleans(),
    tenant=st.sampled_from([None, "acme", "globex", "nobody", "x" * 80]),
)
def test_any_body_and_headers_to_any_hook_never_500(
    hooked: Hooked,
    kind: str,
    name: str,
    cut: int,
    junk: bytes,
    headers: dict[str, str],
    with_token: bool,
    tenant: str | None,
) -> None:
    """A recorded payload cut short and padded with junk, with random sender headers,
    a token or none, to any kind and tenant: an answer or problem details, never 500."""
    body = payload(name)[:cut] + junk
    params = {"tenant": tenant} if tenant is not None else None
    r = hooked.post(
        kind, body, token=hooked.source if with_token else None, headers=headers, params=params
    )
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/problem+json"), r.text
        assert re.fullmatch(r"[a-z][a-z0-9_]*", r.json()["code"])
