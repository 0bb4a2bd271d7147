"""Cases awaiting an outcome (model §2.2, docs/sme.md): an incident its sender reported
resolved without saying how waits in the SME review queue until someone closes its
case. Through the application layer as the application role under row-level security,
and over HTTP with PagerDuty's recorded, signed webhooks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import claims
import lifecycle
from caveat import app as use
from caveat import db
from predicates.errors import CaseNotOpen, Forbidden
from tests.caveat._doors import world
from tests.caveat._review_world import resolved_incident, review_world
from tests.caveat.test_http import client, serving
from tests.conftest import ADMIN
from tests.connectors.test_hooks import PD_SECRET, hooks_world, pagerduty_signature, payload

SME = claims.Actor("sme-alice", "sme")


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    world(runtime)
    world(runtime.for_tenant("globex"))
    review_world(runtime)
    try:
        yield runtime
    finally:
        engine.dispose()


def test_a_resolved_incident_without_an_outcome_waits_in_the_queue(rt: use.Runtime) -> None:
    before = use.utcnow()
    readable, hidden = resolved_incident(rt)
    after = use.utcnow()
    [waiting] = use.review_queue(rt, SME).awaiting  # INC-1..6 are open, none reported over
    assert (waiting.case_id, waiting.subjects, waiting.reported_by) == (
        "pd-Q1",
        ("payment-api",),
        "source:pagerduty",
    )
    assert before <= waiting.opened_at <= waiting.since <= after
    # the SME counts only the cited items it may read; the operator counts both
    assert waiting.cited == (readable,)
    assert use.review_queue(rt, ADMIN).awaiting[0].cited == (readable, hidden)
    assert waiting.close_as == ("confirmed", "rejected")
    assert use.review_queue(rt, SME).about("PAYMENT").awaiting == (waiting,)
    assert use.review_queue(rt, SME).about("ledger").awaiting == ()
    # another tenant's queue does not list it
    assert use.review_queue(rt.for_tenant("globex"), ADMIN).awaiting == ()


def test_a_second_report_keeps_the_first_and_a_case_closed_by_its_sender_never_waits(
    rt: use.Runtime,
) -> None:
    resolved_incident(rt)
    [first] = use.review_queue(rt, SME).awaiting
    pagerduty = use.source_actor("pagerduty")
    resolved = use.CloseCase("pd-Q1", None)
    again = use.deliver_hook(rt, kind="pagerduty", actor=pagerduty, actions=[resolved])
    assert again.done[0]["action"] == "awaiting_outcome"
    assert use.review_queue(rt, SME).awaiting == (first,)
    use.open_case(rt, ADMIN, "pd-Q2", subjects=["payment-api"])
    closing = use.CloseCase("pd-Q2", "confirmed")
    use.deliver_hook(rt, kind="pagerduty", actor=pagerduty, actions=[closing])
    assert [c.case_id for c in use.review_queue(rt, SME).awaiting] == ["pd-Q1"]


def test_an_sme_closes_it_from_the_queue_and_it_leaves(rt: use.Runtime) -> None:
    readable, hidden = resolved_incident(rt)
    closed = use.close_case(rt, SME, "pd-Q1", outcome="confirmed")
    assert (closed.case.status, closed.case.outcome) == ("closed", "confirmed")
    # the SME's answer names only what it may read; the hidden item got its signal too
    assert closed.signals == {readable: "support"}
    listed = use.list_citations(rt, ADMIN, lifecycle.CitationFilter(case_id="pd-Q1")).items
    assert {c.item_id: c.signal for c in listed} == {readable: "support", hidden: "support"}
    assert use.review_queue(rt, SME).awaiting == ()
    [row] = use.audit_entries(rt, ADMIN, action="close_case")
    assert (row.actor, row.detail["case"], row.code) == ("sme-alice", "pd-Q1", "confirmed")
    with pytest.raises(CaseNotOpen):
        use.close_case(rt, SME, "pd-Q1", outcome="rejected")


def test_who_may_close_a_case_and_read_the_queue(rt: use.Runtime) -> None:
    # an SME (and so an admin) closes the case an incident's sender left open; agents
    # and the sending tool may close one as before (docs/sme.md)
    assert {r for r, acts in claims.ROLE_ACTIONS.items() if "close_case" in acts} == {
        "agent",
        "sme",
        "admin",
        "source",
    }
    resolved_incident(rt)
    agent = claims.Actor("agent-ir", "agent")
    assert use.review_queue(rt, agent).awaiting[0].close_as == ("confirmed", "rejected")
    with pytest.raises(Forbidden):  # a tool that sends hooks reads no queue
        use.review_queue(rt, use.source_actor("pagerduty"))


def test_over_http_pagerdutys_resolved_webhook_waits_then_an_sme_closes_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAVEAT_TEST_PD_SECRET", PD_SECRET)
    case = "pd-Q0RIJJZL24RC6W"  # the recorded payloads' incident
    with serving(db_url) as s:
        hooks_world(s.rt)
        with client(s, None) as hook, client(s, s.sme) as sme, client(s, s.agent) as agent:

            def deliver(name: str) -> None:
                body = payload(name)
                sig = {"X-PagerDuty-Signature": pagerduty_signature(body)}
                r = hook.post("/v1/hooks/pagerduty", content=body, headers=sig)
                assert r.status_code == 200, r.text

            deliver("pagerduty-triggered.json")
            assert sme.get("/v1/review").json()["awaiting"] == []  # firing: not over yet
            deliver("pagerduty-resolved.json")
            review = sme.get("/v1/review")
            assert review.status_code == 200, review.text
            [waiting] = review.json()["awaiting"]
            assert {k: waiting[k] for k in ("case_id", "subjects", "reported_by", "cited")} == {
                "case_id": case,
                "subjects": ["payment-api"],
                "reported_by": "source:pagerduty",
                "cited": [],
            }
            assert waiting["close_as"] == ["confirmed", "rejected"]
            assert waiting["since"] >= waiting["opened_at"]
            assert agent.get("/v1/review").json()["awaiting"][0]["case_id"] == case
            bad = sme.post(f"/v1/cases/{case}/close", json={"outcome": "fixed"})
            assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
            closed = sme.post(f"/v1/cases/{case}/close", json={"outcome": "rejected"})
            assert closed.status_code == 200, closed.text
            assert closed.json()["outcome"] == "rejected"
            assert sme.get("/v1/review").json()["awaiting"] == []
            deliver("pagerduty-resolved.json")  # the sender's retry: acknowledged once
            assert sme.get("/v1/review").json()["awaiting"] == []
