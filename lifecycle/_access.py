"""Who may do the lifecycle's own actions, and what redaction hides.

claims' role table (``claims.ROLE_ACTIONS``) names the actions of the model;
the lifecycle adds a few of its own, each borrowing the authority of a
model action: an SME who may promote may also drop a shadow item, one who may
revoke may also redact and forget, one who may verify may set a skill's
enforcement level, and whoever may write may roll episodes up.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from claims import ROLE_ACTIONS, Actor, ItemRecord, get_item
from lifecycle import _queries as q
from predicates.errors import Forbidden, NotFound

__all__ = ["BORROWED", "require", "visible_item"]

BORROWED = {
    "drop": "promote",
    "redact": "revoke",
    "forget": "revoke",
    "set_enforcement": "verify",
    "rollup": "write",
    "sweep": "promote",
}


def require(actor: Actor, action: str) -> None:
    """Raise ``Forbidden`` naming ``action`` unless the actor's role allows it."""
    needed = action if any(action in a for a in ROLE_ACTIONS.values()) else BORROWED[action]
    if not actor.may(needed):
        raise Forbidden(
            f"{actor.id} ({actor.role}) may not {action.replace('_', ' ')}",
            actor=actor.id,
            role=actor.role,
            action=action,
        )


def visible_item(
    *, session: Session, tenant: str, item_id: int, actor: Actor, lock: bool = False
) -> ItemRecord:
    """The item as ``actor`` may see it; ``NotFound`` if absent, unreadable or redacted."""
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=lock)
    if q.redacted(session=session, tenant=tenant, ids=[item_id]):
        raise NotFound(f"no item {item_id}", item=item_id)
    return item
