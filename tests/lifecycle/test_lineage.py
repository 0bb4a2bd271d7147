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
