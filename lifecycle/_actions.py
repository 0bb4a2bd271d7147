"""SME actions on items: verify, promote. All audited (revoke and refute: ``_lineage``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, append, record_transition
from claims import _queries as claims_q
from lifecycle import _queries as q
from lifecycle._access import visible_item
from lifecycle._states import State, decide
from predicates.errors import IllegalTransition, InputError, PromotionNeedsConditions

__all__ = ["promote", "promoted_state", "verified_state", "verify"]


def verified_state(item: ItemRecord) -> State:
    """The state a verification leaves ``item`` in (a re-opened item returns to active,
    any other keeps its own); ``IllegalTransition`` for an item out of circulation."""
    if item.state in {State.REVOKED, State.REFUTED, State.SUPERSEDED, State.ARCHIVED}:
        raise IllegalTransition(
            f"cannot verify an item in state {item.state!r}", action="verify", state=item.state
        )
    if item.state == State.NEEDS_REVERIFICATION:
        return decide("reverify", item.state)
    return State(item.state)


def promoted_state(item: ItemRecord, to: str) -> State:
    """The state promoting ``item`` to ``to`` leads to: ``case`` -> ``shadow`` (which needs
    a required condition), ``shadow`` -> ``active``; refused otherwise."""
    if to == "shadow":
        target = decide("promote_shadow", item.state)
        if not item.required:
            raise PromotionNeedsConditions(
                f"item {item.id} has no required condition; it stays in its case",
                item=item.id,
            )
        return target
    if to == "active":
        return decide("graduate", item.state)
    raise InputError(f"cannot promote to {to!r}; expected shadow or active")


def verify(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    actor: Actor,
    now: datetime,
    rationale: str | None = None,
) -> ItemRecord:
    """An SME verifies an item: it becomes ``verified``; a re-opened item returns to active.

    Appends one ``verify`` audit row (actor, instant, the epistemic status before, the
    rationale when given), the item's verification history; a re-verification also
    appends its ``transition`` row.
    """
    actor.require("verify")
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    target = verified_state(item)
    extra = {"epistemic": "verified", "verified_by": actor.id, "verified_at": now}
    if target != item.state:
        record_transition(
            session=session,
            tenant=tenant,
            item_id=item_id,
            from_state=item.state,
            to_state=target,
            at=now,
            actor=actor.id,
            reason=rationale or "re-verified by SME",
            extra=extra,
        )
    else:
        claims_q.set_item_columns(session=session, tenant=tenant, item_id=item_id, values=extra)
    # every verification has its own row: the verification history an as-of read sees
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="verify",
        at=now,
        item_id=item_id,
        code="verified",
        detail={"state": item.state, "epistemic": item.epistemic}
        | ({"rationale": rationale} if rationale else {}),
    )
    return visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


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
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    target = promoted_state(item, to)
    reason = rationale or ("promoted to shadow" if to == "shadow" else "graduated by SME")
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
    q.drop_expiry_checks(session=session, tenant=tenant, ids=[item_id])
    return visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
