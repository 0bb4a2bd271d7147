"""Cases, promotion, verification and revocation over lineage, on the real store."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

import claims
import lifecycle
from claims._queries import TRANSITIONS
from predicates.errors import (
    CaseNotOpen,
    Forbidden,
    GateRejection,
    IllegalTransition,
    NotFound,
    PromotionNeedsConditions,
)
from tests.conftest import T0, Store


def _open(store: Store, case_id: str = "INC-1") -> None:
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=store.tenant,
            case_id=case_id,
            subjects=["payment_api"],
            actor=store.agent,
            now=T0,
        )


def _write(store: Store, **changes: Any) -> int:
    request = claims.ItemWrite.model_validate(
        {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": "restart_restored_service_at",
            "object": "E-1",
            "required": ["config.connection_pool.max eq 20"],
            "evidence": ["E-1"],
            "scope": {"axis": "case", "id": "INC-1"},
            **changes,
        }
    )
    return lifecycle.write(
        sessions=store.sessions, tenant=store.tenant, request=request, actor=store.agent, now=T0
    ).item_id


def _do(store: Store, fn: Any, **kw: Any) -> Any:
    with store.sessions.begin() as s:
        return fn(session=s, tenant=store.tenant, now=T0, **kw)


def _state(store: Store, item_id: int) -> str:
    with store.engine.connect() as c:
        return str(
            c.execute(
                sa.text("SELECT state FROM item_states WHERE item_id = :i"), {"i": item_id}
            ).scalar()
        )


def test_writes_need_an_open_case(store: Store) -> None:
    with pytest.raises(NotFound):
        _write(store)
    _open(store)
    _do(store, lifecycle.close_case, case_id="INC-1", outcome="confirmed", actor=store.agent)
    with pytest.raises(CaseNotOpen):
        _write(store)
    with pytest.raises(CaseNotOpen):
        _do(store, lifecycle.close_case, case_id="INC-1", outcome="confirmed", actor=store.agent)


def test_promotion_path_and_its_guards(store: Store) -> None:
    _open(store)
    item = _write(store)
    bare = _write(store, required=[], attribute="lag_returned_within_s", object=3)
    with pytest.raises(Forbidden):
        _do(store, lifecycle.promote, item_id=item, to="shadow", actor=store.agent)
    with pytest.raises(IllegalTransition):
        _do(store, lifecycle.promote, item_id=item, to="active", actor=store.sme)
    with pytest.raises(PromotionNeedsConditions):
        _do(store, lifecycle.promote, item_id=bare, to="shadow", actor=store.sme)
    _do(store, lifecycle.promote, item_id=item, to="shadow", actor=store.sme)
    _do(store, lifecycle.promote, item_id=item, to="active", actor=store.sme)
    assert _state(store, item) == "active"
    with store.engine.connect() as c:
        history = c.execute(
            sa.text(
                f"SELECT from_state, to_state FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq"
            ),
            {"i": item},
        ).all()
        audited = c.execute(
            sa.text("SELECT count(*) FROM audit_log WHERE action = 'transition' AND item_id = :i"),
            {"i": item},
        ).scalar()
    assert [tuple(r) for r in history] == [(None, "case"), ("case", "shadow"), ("shadow", "active")]
    assert audited == len(history)


def test_verify_marks_verified(store: Store) -> None:
    _open(store)
    item = _write(store)
    rec = _do(store, lifecycle.verify, item_id=item, actor=store.sme)
    assert rec.epistemic == "verified" and rec.verified_by == "sme-alice"


def test_revoke_reopens_descendants_transitively_and_blocks_new_lineage(store: Store) -> None:
    _open(store)
    base = _write(store)
    child = _write(
        store, derived_from=[base], attribute="lag_returned_within_s", object=900, evidence=["E-2"]
    )
    grandchild = _write(
        store,
        derived_from=[child],
        attribute="lag_returned_within_s",
        object=60,
        required=["config.connection_pool.max eq 30"],
    )
    already = _write(
        store,
        derived_from=[base],
        attribute="lag_returned_within_s",
        object=1,
        required=["config.connection_pool.max eq 40"],
    )
    _do(store, lifecycle.revoke, item_id=already, reason="wrong", actor=store.sme)
    res = _do(store, lifecycle.revoke, item_id=base, reason="coincidence", actor=store.sme)
    assert sorted(res.reopened) == sorted([child, grandchild])
    assert _state(store, base) == "revoked"
    assert _state(store, child) == _state(store, grandchild) == "needs_reverification"
    assert _state(store, already) == "revoked"
    with pytest.raises(GateRejection) as err:
        _write(
            store,
            derived_from=[grandchild],
            attribute="lag_returned_within_s",
            object=2,
            required=["config.connection_pool.max eq 50"],
        )
    assert err.value.code == "lineage_revoked"
    with pytest.raises(IllegalTransition):
        _do(store, lifecycle.revoke, item_id=base, reason="again", actor=store.sme)
