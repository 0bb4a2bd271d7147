"""As-of fidelity: a skill's release state and an item's verification as they were then."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import claims
import lifecycle
import recall
from tests.conftest import T0, Store
from tests.recall.test_recall import _activate
from tests.recall.test_recall import _write as write_item

COND = ["config.connection_pool.max eq 20"]
PROC = "drain one pod, restart its pool, watch p99 for two minutes, repeat"
T1 = T0 + timedelta(days=1)
T2 = T0 + timedelta(days=3)


def _write(store: Store, **changes: Any) -> int:
    return write_item(store, required=COND, **changes)


@pytest.fixture
def setup(store: Store) -> Store:
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=store.agent,
            now=T0,
        )
        claims.register_evidence(
            session=s,
            tenant=store.tenant,
            evidence_id="T-pass",
            actor=store.sme,
            now=T0,
            test_outcome="passed",
        )
    store.observe(T0, ("payment-api", "config.connection_pool.max", 20))
    return store


def _as_of(
    store: Store, at: datetime, query: str = "pool restart procedure"
) -> recall.RecallResult:
    req = recall.RecallRequest(query=query, as_of=at, limit=50, explain=True)
    with store.sessions.begin() as s:
        return recall.recall(
            session=s, tenant=store.tenant, actor=store.agent, request=req, now=T2 + timedelta(1)
        )


def _found(res: recall.RecallResult, item_id: int) -> claims.ItemRecord | None:
    return next((r.item for r in res.items if r.item.id == item_id), None)


def test_as_of_sees_the_release_state_of_then(setup: Store) -> None:
    skill = _write(setup, kind="skill", attribute="pool_restart_procedure", object=PROC)
    _activate(setup, skill)
    with setup.sessions.begin() as s:
        claims.release_skill(
            session=s, tenant=setup.tenant, item_id=skill, actor=setup.sme, now=T1, test="T-pass"
        )
    with setup.sessions.begin() as s:
        claims.retire_skill(
            session=s, tenant=setup.tenant, item_id=skill, actor=setup.sme, now=T2, reason="old"
        )
    before = _as_of(setup, T1 - timedelta(seconds=1))
    during = _as_of(setup, T1 + timedelta(hours=1))
    after = _as_of(setup, T2 + timedelta(seconds=1))
    assert _found(before, skill) is None
    assert {w.item.id: w.gate for w in before.withheld}[skill] == "activated_version"
    released = _found(during, skill)
    assert released is not None and released.release_state == "released"
    assert _found(after, skill) is None
    [withheld] = [w for w in after.withheld if w.item.id == skill]
    assert withheld.gate == "activated_version" and withheld.item.release_state == "retired"
    assert {w.item.release_state for w in before.withheld if w.item.id == skill} == {"draft"}
    # the boundary instants: the release and the retirement count from their own instant
    assert _found(_as_of(setup, T1), skill) is not None
    assert _found(_as_of(setup, T2), skill) is None


def test_releasing_another_version_retires_this_one_as_of_that_instant(setup: Store) -> None:
    v1 = _write(setup, kind="skill", attribute="pool_restart_procedure", object=PROC)
    v2 = _write(setup, kind="skill", attribute="pool_restart_procedure", object=PROC + " slowly")
    for item in (v1, v2):
        _activate(setup, item)
    for item, at in ((v1, T1), (v2, T2)):
        with setup.sessions.begin() as s:
            claims.release_skill(
                session=s, tenant=setup.tenant, item_id=item, actor=setup.sme, now=at, test="T-pass"
            )

    def skills(at: datetime) -> list[int]:
        return [r.item.id for r in _as_of(setup, at).items if r.item.kind == "skill"]

    assert skills(T1 - timedelta(seconds=1)) == []
    assert skills(T1 + timedelta(hours=1)) == [v1]
    assert skills(T2 + timedelta(hours=1)) == [v2]


def test_as_of_sees_the_verification_of_then(setup: Store) -> None:
    plain = _write(setup)
    verified = _write(setup, attribute="lag_returned_within_s", object=5)
    for item in (plain, verified):
        _activate(setup, item)
    with setup.sessions.begin() as s:
        lifecycle.verify(session=s, tenant=setup.tenant, item_id=verified, actor=setup.sme, now=T1)
    query = "tail latency spike payment-api pool restart"
    before = _as_of(setup, T1 - timedelta(seconds=1), query)
    after = _as_of(setup, T1 + timedelta(seconds=1), query)
    then = _found(before, verified)
    assert then is not None
    assert (then.verified_by, then.verified_at, then.epistemic) == (None, None, "observation")
    now = _found(after, verified)
    assert now is not None
    assert (now.verified_by, now.verified_at, now.epistemic) == ("sme-alice", T1, "verified")
    # the ranking boost follows the verification of then: x1.05 from then on, against an
    # item never verified (whose score moves only with recency, as the verified one's does)
    score = {(r.item.id, "before"): r.score for r in before.items}
    score |= {(r.item.id, "after"): r.score for r in after.items}
    ratio_before = score[(verified, "before")] / score[(plain, "before")]
    ratio_after = score[(verified, "after")] / score[(plain, "after")]
    assert ratio_after == pytest.approx(1.05 * ratio_before)


def test_a_reverification_is_in_the_verification_history(setup: Store) -> None:
    parent = _write(setup)
    child = _write(setup, attribute="lag_returned_within_s", object=5, derived_from=[parent])
    for i in (parent, child):
        _activate(setup, i)
    with setup.sessions.begin() as s:
        lifecycle.revoke(
            session=s, tenant=setup.tenant, item_id=parent, reason="wrong", actor=setup.sme, now=T1
        )
        lifecycle.verify(session=s, tenant=setup.tenant, item_id=child, actor=setup.sme, now=T2)
    with setup.engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT action, code, detail FROM audit_log WHERE tenant_id = 'acme' "
                "AND item_id = :i AND action IN ('verify', 'transition') AND at = :at ORDER BY seq"
            ),
            {"i": child, "at": T2},
        ).all()
    assert [(r.action, r.code) for r in rows] == [("transition", "active"), ("verify", "verified")]
    assert rows[1].detail == {"state": "needs_reverification", "epistemic": "observation"}
    with setup.sessions.begin() as s:
        [item] = claims.items_as_of(
            session=s,
            tenant=setup.tenant,
            actor=setup.agent,
            at=T2,
            attribute="lag_returned_within_s",
        )
        [earlier] = claims.items_as_of(
            session=s,
            tenant=setup.tenant,
            actor=setup.agent,
            at=T1,
            attribute="lag_returned_within_s",
        )
    assert (item.verified_by, item.state) == ("sme-alice", "active")
    assert (earlier.verified_by, earlier.state) == (None, "needs_reverification")
