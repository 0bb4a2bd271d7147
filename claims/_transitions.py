"""Recording a state change: the item's state row and one ``transition`` audit row."""

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
    from_state: str,
    to_state: str,
    at: datetime,
    actor: str,
    reason: str | None = None,
    cause: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Move one item to ``to_state`` with its ``transition`` audit row (its history), in the
    same transaction."""
    cause = cause or {}
    q.move_state(session=session, tenant=tenant, item_id=item_id, state=to_state)
    if extra:
        q.set_item_columns(session=session, tenant=tenant, item_id=item_id, values=extra)
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
