"""SME actions on items: verify, promote, refute, revoke (with lineage). All audited."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, append, get_item, record_transition
from claims import _queries as claims_q
from lifecycle import _queries as q
from lifecycle._states import CIRCULATING, State, decide
from predicates.errors import IllegalTransition, InputError, PromotionNeedsConditions

__all__ = ["RevokeResult", "promote", "refute", "revoke", "verify"]


def verify(
    *, session: Session, tenant: str, item_id: int, actor: Actor, now: datetime
) -> ItemRecord:
    """An SME verifies an item: it becomes ``verified``; a re-opened item returns to active."""
    actor.require("verify")
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    if item.state in {State.REVOKED, State.REFUTED, State.SUPERSEDED, State.ARCHIVED}:
        raise IllegalTransition(
            f"cannot verify an item in state {item.state!r}", action="verify", state=item.state
        )
    extra = {"epistemic": "verified", "verified_by": actor.id, "verified_at": now}
    if item.state == State.NEEDS_REVERIFICATION:
        record_transition(
            session=session,
            tenant=tenant,
            item_id=item_id,
            from_state=item.state,
            to_state=decide("reverify", item.state),
            at=now,
            actor=actor.id,
            reason="re-verified by SME",
            extra=extra,
        )
    else:
        claims_q.set_state(session=session, item_id=item_id, state=item.state, extra=extra)
        append(
            session=session,
            tenant=tenant,
            actor=actor.id,
            action="verify",
            at=now,
            item_id=item_id,
            code="verified",
            detail={"state": item.state},
        )
    return get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


def promote(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    to: Literal["shadow", "active"],
    actor: Actor,
    now: datetime,
    rationale: str | None = None,
) -> ItemRecord:
    """Scope expansion: ``case`` -> ``shadow`` (needs a condition), ``shadow`` -> ``active``.

    Promotion to ``active`` by an SME is early graduation from the shadow period.
    """
    actor.require("promote")
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    if to == "shadow":
        target = decide("promote_shadow", item.state)
        if not item.required:
            raise PromotionNeedsConditions(
                f"item {item_id} has no required condition; it stays in its case",
                item=item_id,
            )
        reason = rationale or "promoted to shadow"
    elif to == "active":
        target = decide("graduate", item.state)
        reason = rationale or "graduated by SME"
    else:
        raise InputError(f"cannot promote to {to!r}; expected shadow or active")
    record_transition(
        session=session,
        tenant=tenant,
        item_id=item_id,
        from_state=item.state,
        to_state=target,
        at=now,
        actor=actor.id,
        reason=reason,
    )
    return get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


def refute(
    *, session: Session, tenant: str, item_id: int, reason: str, actor: Actor, now: datetime
) -> ItemRecord:
    """An SME refutes an item with a reason."""
    actor.require("refute")
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    record_transition(
        session=session,
        tenant=tenant,
        item_id=item_id,
        from_state=item.state,
        to_state=decide("refute", item.state),
        at=now,
        actor=actor.id,
        reason=reason,
    )
    return get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


@dataclass(frozen=True)
class RevokeResult:
    """The revoked item and the descendants it re-opened."""

    item: ItemRecord
    reopened: list[int]


def revoke(
    *, session: Session, tenant: str, item_id: int, reason: str, actor: Actor, now: datetime
) -> RevokeResult:
    """Revoke an item; every descendant still in circulation goes to ``needs_reverification``.

    Descendants already revoked (or otherwise out of circulation) keep their
    state. Nothing is deleted.
    """
    actor.require("revoke")
    if not reason.strip():
        raise InputError("a revocation needs a reason")
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    record_transition(
        session=session,
        tenant=tenant,
        item_id=item_id,
        from_state=item.state,
        to_state=decide("revoke", item.state),
        at=now,
        actor=actor.id,
        reason=reason,
    )
    descendants = claims_q.descendants(session=session, tenant=tenant, item_id=item_id)
    reopened: list[int] = []
    for row in q.lock_items(session=session, tenant=tenant, ids=descendants):
        if State(row.state) not in CIRCULATING:
            continue
        record_transition(
            session=session,
            tenant=tenant,
            item_id=int(row.id),
            from_state=row.state,
            to_state=decide("lineage_reopen", row.state),
            at=now,
            actor=actor.id,
            reason=f"ancestor {item_id} revoked: {reason}",
            cause={"revoked": item_id},
        )
        reopened.append(int(row.id))
    return RevokeResult(
        get_item(session=session, tenant=tenant, item_id=item_id, actor=actor), reopened
    )
