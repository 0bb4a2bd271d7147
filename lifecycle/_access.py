"""What redaction hides from the lifecycle's reads.

Who may do what is claims' one role table (``claims.ROLE_ACTIONS``), the
lifecycle's own actions (``drop``, ``redact``, ``forget``, ``set_enforcement``,
``rollup``, ``sweep``) included; actions check it with ``Actor.require``.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy.orm import Session

from claims import Access, Actor, ItemRecord, get_item
from lifecycle import _queries as q
from predicates.errors import NotFound

__all__ = ["readable_ids", "visible_item"]


def visible_item(
    *, session: Session, tenant: str, item_id: int, actor: Actor, lock: bool = False
) -> ItemRecord:
    """The item as ``actor`` may see it; ``NotFound`` if absent, unreadable or redacted."""
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=lock)
    if q.redacted(session=session, tenant=tenant, ids=[item_id]):
        raise NotFound(f"no item {item_id}", item=item_id)
    return item


def readable_ids(
    *, session: Session, tenant: str, actor: Actor, ids: Collection[int]
) -> dict[int, str]:
    """Of ``ids``, the items ``actor`` may know of (evidence it holds, not redacted, not
    another principal's working memory: ``claims._queries.private_visible``), each with
    its scope's id (its case, for a case item). What an answer that names items (a
    close, an event, a revocation's re-opened descendants) may name to ``actor``."""
    if not ids:
        return {}
    hidden = q.redacted(session=session, tenant=tenant, ids=sorted(ids))
    return {
        int(r.id): str(r.scope_id)
        for r in q.item_scopes(
            session=session, tenant=tenant, ids=sorted(ids), gate=actor.gate_params()
        )
        if Access.of(r).readable_by(actor) and int(r.id) not in hidden
    }
