"""Revocation over lineage (set-based) and the lineage graph; the bulk audit append."""

from __future__ import annotations

import pytest

import claims
import lifecycle
from claims._queries import TRANSITIONS
from predicates.errors import NotFound
from tests.lifecycle.helpers import Life


def test_revoke_reopens_the_whole_lineage_set_based(life: Life) -> None:
    root = life.write()
    life.activate(root)
    children = [life.write(derived_from=[root], evidence=["E-2"]) for _ in range(3)]
    grand = life.write(derived_from=[children[0], children[1]])
    life.activate(children[0])
    already = life.write(derived_from=[root])
    life.do(lifecycle.revoke, item_id=already, reason="wrong", actor=life.store.sme)
    res = life.do(lifecycle.revoke, item_id=root, reason="coincidence", actor=life.store.sme)
    assert sorted(res.reopened) == sorted([*children, grand])
    assert life.states(root, already) == ["revoked", "revoked"]
    assert set(life.states(*children, grand)) == {"needs_reverification"}
    assert life.history_holds() and life.audit_ok()
    cause = life.scalar(
        f"SELECT cause FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq DESC LIMIT 1", i=grand
    )
    assert cause == {"revoked": root}
    with life.sessions.begin() as s:
        graph = lifecycle.lineage(
            session=s, tenant=life.tenant, item_id=children[0], actor=life.store.sme
        )
    assert [(n.id, n.depth, n.state) for n in graph.ancestors] == [(root, -1, "revoked")]
    assert [(n.id, n.depth) for n in graph.descendants] == [(grand, 1)]
    assert graph.item.state == "needs_reverification"
    assert set(graph.graph.edges) == {(root, children[0]), (children[0], grand)}


def test_lineage_hides_what_the_reader_may_not_see(life: Life) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    secret = life.write(actor=insider, evidence=["E-secret"], object="E-secret")
    child = life.write(actor=insider, derived_from=[secret])
    with life.sessions.begin() as s:
        seen = lifecycle.lineage(
            session=s, tenant=life.tenant, item_id=child, actor=life.store.agent
        )
        assert seen.ancestors == ()
        with pytest.raises(NotFound):
            lifecycle.lineage(session=s, tenant=life.tenant, item_id=secret, actor=life.store.agent)
        with pytest.raises(NotFound):
            lifecycle.lineage(session=s, tenant=life.tenant, item_id=999999, actor=life.store.sme)


def test_transition_many_skips_states_the_action_is_not_defined_from(life: Life) -> None:
    a, b = life.write(), life.write()
    life.activate(a)
    with life.sessions.begin() as s:
        moved = lifecycle.transition_many(
            session=s,
            tenant=life.tenant,
            item_ids=[a, b, 424242],
            action="demote",
            at=life.now,
            actor="tester",
            reason="test",
        )
    assert moved == [(a, "active")]
    assert life.states(a, b) == ["needs_reverification", "case"]
    assert life.audit_ok() and life.history_holds()


def test_audit_rows_of_a_move_are_one_sequence_however_read() -> None:
    from lifecycle._bulk import Move, _AuditRows

    moves = [Move("revoke", [1], "bad"), Move("lineage_reopen", [], "ancestor", {"revoked": 1})]
    moved = [(1, "active", 1), (2, "active", 2), (3, "case", 2), (4, "active", 2)]
    rows = _AuditRows(moved, moves, "sme")
    assert len(rows) == 4
    assert list(rows) == [rows[i] for i in range(4)] == list(rows[0:4])
    assert [(r.item_id, r.code, r.detail["from"]) for r in rows] == [
        (1, "revoked", "active"),
        (2, "needs_reverification", "active"),
        (3, "needs_reverification", "case"),
        (4, "needs_reverification", "active"),
    ]
    assert rows[1].detail is rows[3].detail  # one detail object per group and state: encoded once
    assert rows[1].detail == {
        "from": "active",
        "to": "needs_reverification",
        "reason": "ancestor",
        "cause": {"revoked": 1},
    }
