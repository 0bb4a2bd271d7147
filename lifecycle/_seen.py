"""What a use case's answer says as its caller may see it: an event's fan-out and a
close's signals name only the items the caller may read (the audit log drops those
counts for the same reason: ``lifecycle._review.audit_as_seen``)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.orm import Session

from claims import Actor
from lifecycle._access import readable_ids
from lifecycle._cases import CloseResult
from lifecycle._events import EventOutcome

__all__ = ["close_as_seen", "event_as_seen"]


def _keep(ids: tuple[int, ...], seen: set[int]) -> tuple[int, ...]:
    return tuple(i for i in ids if i in seen)


def event_as_seen(
    *, session: Session, tenant: str, actor: Actor, outcome: EventOutcome
) -> EventOutcome:
    """``outcome`` naming only the items ``actor`` may read (all of them for an admin):
    the event re-opened what it re-opened, but a reader learns nothing of hidden items
    from the answer, not even how many there were."""
    if actor.role == "admin":
        return outcome
    named = {*outcome.matched, *outcome.affected, *outcome.unaffected, *outcome.by_conditions}
    seen = set(readable_ids(session=session, tenant=tenant, actor=actor, ids=named))
    return replace(
        outcome,
        matched=_keep(outcome.matched, seen),
        affected=_keep(outcome.affected, seen),
        unaffected=_keep(outcome.unaffected, seen),
        by_conditions=_keep(outcome.by_conditions, seen),
        reasons={i: r for i, r in outcome.reasons.items() if i in seen},
    )


def close_as_seen(
    *, session: Session, tenant: str, actor: Actor, result: CloseResult
) -> CloseResult:
    """``result`` naming only the cited, demoted, graduated and dropped items ``actor``
    may read (all of them for an admin)."""
    if actor.role == "admin":
        return result
    named = {
        *result.signals,
        *result.demoted,
        *result.graduated,
        *result.dropped,
        *result.confidence,
    }
    seen = set(readable_ids(session=session, tenant=tenant, actor=actor, ids=named))
    return replace(
        result,
        signals={i: s for i, s in result.signals.items() if i in seen},
        demoted=_keep(result.demoted, seen),
        graduated=_keep(result.graduated, seen),
        dropped=_keep(result.dropped, seen),
        confidence={i: c for i, c in result.confidence.items() if i in seen},
    )
