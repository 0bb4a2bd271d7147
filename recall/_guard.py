"""The context guard: before every model call, which items may still be used (model §4.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from claims import Actor, get_items

__all__ = ["ContextCheck", "check_context"]


@dataclass(frozen=True)
class ContextCheck:
    """Items still usable and items to drop, with the reason for each drop."""

    usable: tuple[int, ...]
    dropped: dict[int, str]


def check_context(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_ids: Sequence[int],
    case_id: str | None,
) -> ContextCheck:
    """Re-read the state of every item in a context, in one round trip.

    Usable: ``active`` items, and ``case`` items inside their own case. It
    re-reads states; it does not re-evaluate applicability. Items the actor
    may not read, or that do not exist, are dropped as ``not_found``.
    """
    actor.require("check_context")
    found = get_items(session=session, tenant=tenant, ids=item_ids)
    usable: list[int] = []
    dropped: dict[int, str] = {}
    for item_id in item_ids:
        item = found.get(item_id)
        if item is None or not actor.can_read_acl(item.acl):
            dropped[item_id] = "not_found"
        elif item.state == "active" or (
            item.state == "case" and item.scope_axis == "case" and item.scope_id == case_id
        ):
            usable.append(item_id)
        else:
            dropped[item_id] = item.state
    return ContextCheck(tuple(usable), dropped)
