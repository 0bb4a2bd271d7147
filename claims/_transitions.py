"""Recording a state change: the row's state, one transition row, one audit row."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q

__all__ = ["record_transition"]


def record_transition(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    from_state: str | None,
    to_state: str,
    at: datetime,
    actor: str,
    reason: str | None = None,
    cause: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Move one item to ``to_state``; history and audit are written in the same transaction."""
    cause = cause or {}
    if from_state is not None:
        q.set_state(session=session, item_id=item_id, state=to_state, extra=extra)
    q.insert_transition(
        session=session,
        tenant=tenant,
        item_id=item_id,
        from_state=from_state,
        to_state=to_state,
        at=at,
        actor=actor,
        reason=reason,
        cause=cause,
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor,
        action="transition",
        at=at,
        item_id=item_id,
        code=to_state,
        detail={"from": from_state, "to": to_state, "reason": reason, "cause": cause},
    )
