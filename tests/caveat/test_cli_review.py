"""The SME's reads through the CLI (``caveat review``, ``item dossier``, ``item preview``),
as the application's login role, on the review pages' world."""

from __future__ import annotations

import json

import pytest

from caveat import app as use
from caveat import db
from tests.caveat._doors import world
from tests.caveat._review_world import Review, resolved_incident, review_world
from tests.caveat.test_cli_incident import run
from tests.conftest import ADMIN


@pytest.fixture
def review(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Review:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        use.register_principal(rt, ADMIN, "sme-alice", role="sme", capabilities=[])
        use.register_principal(rt, ADMIN, "agent-ir", role="agent", capabilities=[])
        return review_world(rt)
    finally:
        engine.dispose()


def test_review_lists_only_what_the_sme_may_read(review: Review) -> None:
    text = run("review", "--as", "sme-alice").output
    assert "shadow items: 1" in text and f"#{review.child} " in text
    assert f"#{review.hidden} " not in text and "card_vault" not in text
    assert "contested keys: 1" in text and "subject_unresolved: 2" in text
    assert "shadow items: 0" in run("review", "--subject", "ledger", "--as", "sme-alice").output
    body = json.loads(run("review", "--json").output)  # the local admin reads everything
    assert sorted(r["item_id"] for r in body["shadow"]) == [review.child, review.hidden]


def test_dossier_and_preview(review: Review) -> None:
    text = run("item", "dossier", str(review.child), "--as", "sme-alice").output
    assert "UNKNOWN" in text and "observe config.connection_pool.max of payment-api" in text
    assert f"ancestors [{review.parent}], descendants [{review.grandchild}]" in text
    preview = run("item", "preview", str(review.parent), "revoke", "--as", "sme-alice").output
    assert "active -> revoked" in preview
    assert f"re-opens #{review.child}" in preview and f"re-opens #{review.grandchild}" in preview
    refused = run("item", "preview", str(review.parent), "revoke", "--as", "agent-ir", ok=1)
    assert "forbidden" in refused.output
    hidden = run("item", "dossier", str(review.hidden), "--as", "sme-alice", ok=1)
    assert "not_found" in hidden.output
    run("verify", str(review.child), "--rationale", "checked the pool", "--as", "sme-alice")
    last = json.loads(run("item", "dossier", str(review.child), "--json").output)["history"][-1]
    assert (last["action"], last["detail"]["rationale"]) == ("verify", "checked the pool")


def test_sweep(review: Review) -> None:
    assert run("sweep", "--as", "sme-alice").output.startswith("archived 0, expired 0")
    assert "forbidden" in run("sweep", "--as", "agent-ir", ok=1).output


def test_review_lists_a_case_awaiting_its_outcome_until_an_sme_closes_it(
    review: Review, db_url: str
) -> None:
    engine = db.make_app_engine(db_url)
    try:
        readable, hidden = resolved_incident(use.Runtime.over(engine, "acme"))
    finally:
        engine.dispose()
    text = run("review", "--as", "sme-alice").output
    assert "awaiting an outcome: 1" in text
    [line] = [x for x in text.splitlines() if x.startswith("  pd-Q1 ")]
    assert line.startswith("  pd-Q1 (payment-api): reported over 20")
    assert line.endswith(
        "by source:pagerduty, 1 cited; caveat case close pd-Q1 --outcome confirmed|rejected"
    )
    [waiting] = json.loads(run("review", "--json").output)["awaiting"]
    assert (waiting["case_id"], waiting["cited"]) == ("pd-Q1", [readable, hidden])
    assert (
        "closed case pd-Q1 as rejected"
        in run("case", "close", "pd-Q1", "--outcome", "rejected", "--as", "sme-alice").output
    )
    assert "awaiting an outcome: 0" in run("review", "--as", "sme-alice").output


def test_review_counts_refused_writes_and_lists_active_items_false_now(
    review: Review, db_url: str
) -> None:
    import factgen

    text = run("review", "--as", "sme-alice").output
    assert "refusals since " in text and ": 2\n" in text  # two writes, one reason code
    assert "active, conditions false now: 0" in text
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        use.observe(
            rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 25)]
        )
    finally:
        engine.dispose()
    text = run("review", "--as", "sme-alice").output
    assert "active, conditions false now: 1" in text
    assert (
        f"  #{review.parent} payment-api restart_restored_service_at: "
        "config.connection_pool.max eq 20 is FALSE (config.connection_pool.max = 25)"
    ) in text
    body = json.loads(run("review", "--json", "--as", "sme-alice").output)
    assert body["refusals_total"] == 2
    [false] = body["false_now"]
    assert false["item_id"] == review.parent and false["conditions"][0]["value"] == "FALSE"
    dossier = json.loads(run("item", "dossier", str(review.parent), "--json").output)
    assert dossier["false_now"] == ["config.connection_pool.max eq 20"]


def test_transitions_lists_the_changes_inside_a_window(review: Review) -> None:
    run("revoke", str(review.parent), "--reason", "disproved", "--as", "sme-alice")
    text = run("transitions", "--subject", "PAY", "--as", "sme-alice").output
    assert text.startswith("transitions from ")
    assert (
        f"#{review.parent} payment-api restart_restored_service_at: "
        "active -> revoked by sme-alice: disproved" in text
    )
    assert f"#{review.hidden} " not in text  # an item the SME may not read
    rows = json.loads(run("transitions", "--json", "--as", "sme-alice").output)
    assert {(r["item"], r["to"]) for r in rows} >= {(review.child, "needs_reverification")}
    assert json.loads(run("transitions", "--subject", "nobody", "--json").output) == []
    bad = run("transitions", "--from", "yesterday", ok=2)
    assert "--from" in bad.output
