"""Recall on the real store: the six gates, explain, as-of, hidden items."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import claims
import factgen
import lifecycle
import recall
from predicates.errors import Forbidden
from tests.conftest import T0, Store

POOL = ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"]


def _write(
    store: Store, actor: claims.Actor | None = None, now: datetime = T0, **changes: Any
) -> int:
    request = claims.ItemWrite.model_validate(
        {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": "restart_restored_service_at",
            "object": "E-1",
            "required": POOL,
            "evidence": ["E-1"],
            "scope": {"axis": "case", "id": "INC-1"},
            "text": "Tail latency spike on payment-api; pool exhausted; restart restored it.",
            **changes,
        }
    )
    return lifecycle.write(
        sessions=store.sessions,
        tenant=store.tenant,
        request=request,
        actor=actor or store.agent,
        now=now,
    ).item_id


def _activate(store: Store, item_id: int, now: datetime = T0) -> None:
    with store.sessions.begin() as s:
        for to in ("shadow", "active"):
            lifecycle.promote(
                session=s,
                tenant=store.tenant,
                item_id=item_id,
                to=to,  # type: ignore[arg-type]
                actor=store.sme,
                now=now,
            )


def _recall(
    store: Store, actor: claims.Actor | None = None, at: Any = None, **kw: Any
) -> recall.RecallResult:
    req = recall.RecallRequest(**{"query": "tail latency on payment api", "explain": True, **kw})
    with store.sessions.begin() as s:
        return recall.recall(
            session=s, tenant=store.tenant, actor=actor or store.agent, request=req, now=at or T0
        )


def ids(res: recall.RecallResult) -> list[int]:
    return [r.item.id for r in res.items]


def withheld(res: recall.RecallResult) -> dict[int, str]:
    return {w.item.id: w.gate for w in res.withheld}


def test_case_items_surface_only_in_their_own_case(setup: Store) -> None:
    item = _write(setup)
    assert ids(_recall(setup, case_id="INC-1")) == [item]
    res = _recall(setup, case_id="INC-2")
    assert ids(res) == [] and withheld(res) == {item: "activated_version"}


def test_applicability_withholds_with_condition_values(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    later = T0 + timedelta(days=1)
    setup.observe(
        later,
        ("payment-api", "config.connection_pool.max", 100),
        ("payment-api", "metrics.pool_utilisation", 0.12),
    )
    res = _recall(setup, at=later)
    assert ids(res) == [] and withheld(res) == {item: "applicability"}
    [w] = res.withheld
    assert {c.condition: c.value.name for c in w.conditions} == {
        "config.connection_pool.max eq 20": "FALSE",
        "metrics.pool_utilisation gte 0.8": "FALSE",
    }
    assert dict(w.verdicts)["validity_window"] is True


def test_unknown_is_never_granted_and_is_reported_missing(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    stale = T0 + timedelta(hours=1)  # utilisation is older than its 15m max_age
    res = _recall(setup, at=stale)
    assert ids(res) == [] and withheld(res) == {item: "applicability"}
    assert res.missing_observations == ("metrics.pool_utilisation",)
    fresh = _recall(
        setup,
        at=stale,
        observations=[factgen.Observation("payment-api", "metrics.pool_utilisation", 0.9)],
    )
    assert ids(fresh) == [item]
    assert {c.condition: c.value.name for c in fresh.items[0].conditions} == {
        "config.connection_pool.max eq 20": "TRUE",
        "metrics.pool_utilisation gte 0.8": "TRUE",
    }


def test_excluded_condition_must_be_false(setup: Store) -> None:
    item = _write(setup, excluded=["env.postgres.version lt v16.0"])
    _activate(setup, item)
    assert withheld(_recall(setup)) == {item: "applicability"}  # UNKNOWN version blocks
    setup.observe(T0, ("payment-api", "env.postgres.version", "v16.2"))
    assert ids(_recall(setup)) == [item]


def test_purpose_gate(setup: Store) -> None:
    item = _write(setup, purposes=["postmortem"])
    _activate(setup, item)
    assert withheld(_recall(setup, purpose="incident_diagnosis")) == {item: "purpose"}
    assert ids(_recall(setup, purpose="postmortem")) == [item]


def test_validity_window(setup: Store) -> None:
    item = _write(setup, valid_to=(T0 + timedelta(minutes=5)).isoformat())
    _activate(setup, item)
    assert withheld(_recall(setup, at=T0 + timedelta(minutes=10))) == {item: "validity_window"}


def test_hidden_items_are_never_mentioned(setup: Store) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
    secret = _write(
        setup,
        actor=insider,
        evidence=["E-secret"],
        object="E-secret",
        attribute="lag_returned_within_s",
    )
    res = _recall(setup, actor=setup.outsider, case_id="INC-1")
    assert secret not in ids(res) and secret not in withheld(res)
    assert secret in ids(_recall(setup, actor=insider, case_id="INC-1"))


def test_subjects_filter_widens_over_topology(setup: Store) -> None:
    db_item = _write(
        setup, subject="payments-db", required=["@payment-api:config.connection_pool.max eq 20"]
    )
    _activate(setup, db_item)
    assert ids(_recall(setup, subjects=["payment_api"])) == [db_item]
    assert ids(_recall(setup, subjects=["orders-db"])) == []


def test_as_of_sees_the_state_and_facts_of_then(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    later = T0 + timedelta(days=2)
    with setup.sessions.begin() as s:
        lifecycle.revoke(
            session=s, tenant=setup.tenant, item_id=item, reason="no", actor=setup.sme, now=later
        )
    assert ids(_recall(setup, at=later + timedelta(minutes=1))) == []
    then = T0 + timedelta(minutes=1)
    assert ids(_recall(setup, at=later, as_of=then)) == [item]


def test_lexical_ranking_prefers_the_paraphrase(setup: Store) -> None:
    near = _write(setup)
    far = _write(
        setup,
        attribute="lag_returned_within_s",
        object=3,
        text="Disk filled on the batch host; cron cleanup freed space.",
    )
    res = _recall(setup, case_id="INC-1", query="latency spike payment-api pool restart")
    assert ids(res)[:2] == [near, far]
    assert res.items[0].parts["lexical"] > res.items[1].parts["lexical"]


def test_smes_do_not_recall(setup: Store) -> None:
    with pytest.raises(Forbidden):
        _recall(setup, actor=setup.sme)


def test_context_guard_drops_revoked_items_in_one_read(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    case_item = _write(setup, attribute="lag_returned_within_s", object=5)
    with setup.sessions.begin() as s:
        lifecycle.revoke(
            session=s, tenant=setup.tenant, item_id=item, reason="x", actor=setup.sme, now=T0
        )
        res = recall.check_context(
            session=s,
            tenant=setup.tenant,
            actor=setup.agent,
            item_ids=[item, case_item, 999999],
            case_id="INC-1",
            now=T0,
        )
    assert res.usable == (case_item,)
    assert res.dropped == {item: "revoked", 999999: "not_found"}


def test_context_guard_is_one_round_trip_given_the_world(
    setup: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """State, applicability and validity of every item in one statement (a door passes
    the world it keeps; without one the guard reads it first)."""
    import sqlalchemy as sa

    from recall import _queries

    item = _write(setup)
    _activate(setup, item)
    with setup.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=setup.tenant)
    statements: list[str] = []
    guard_reads = _queries.guard_states

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    def counted(**kw: Any) -> Any:
        statements.append("guard")
        return guard_reads(**kw)

    monkeypatch.setattr(_queries, "guard_states", counted)
    sa.event.listen(setup.engine, "before_cursor_execute", count)
    try:
        with setup.sessions.begin() as s:
            res = recall.check_context(
                session=s,
                tenant=setup.tenant,
                actor=setup.agent,
                item_ids=[item, 424242],
                case_id=None,
                now=T0,
                world=world,
            )
    finally:
        sa.event.remove(setup.engine, "before_cursor_execute", count)
    assert res.usable == (item,) and res.dropped == {424242: "not_found"}
    assert statements == ["guard"], statements
