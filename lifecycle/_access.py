"""What redaction hides from the lifecycle's reads.

Who may do what is claims' one role table (``claims.ROLE_ACTIONS``), the
lifecycle's own actions (``drop``, ``redact``, ``forget``, ``set_enforcement``,
``rollup``, ``sweep``) included; actions check it with ``Actor.require``.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, get_item
from lifecycle import _queries as q
from predicates.errors import NotFound

__all__ = ["visible_item"]


def visible_item(
    *, session: Session, tenant: str, item_id: int, actor: Actor, lock: bool = False
) -> ItemRecord:
    """The item as ``actor`` may see it; ``NotFound`` if absent, unreadable or redacted."""
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=lock)
    if q.redacted(session=session, tenant=tenant, ids=[item_id]):
        raise NotFound(f"no item {item_id}", item=item_id)
    return item
