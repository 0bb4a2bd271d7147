"""The context guard: before every model call, which items may still be used (model §4.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

import lifecycle
from claims import Actor, ItemRecord, record_from_row
from factgen import build_snapshot, load_world
from recall import _queries as q

__all__ = ["ContextCheck", "check_context"]


@dataclass(frozen=True)
class ContextCheck:
    """Items still usable and items to drop, with the reason for each drop."""

    usable: tuple[int, ...]
    dropped: dict[int, str]
    checked: dict[int, bool] = field(default_factory=dict)  # verify-on-next-use: passed?


def check_context(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_ids: Sequence[int],
    case_id: str | None,
    now: datetime,
) -> ContextCheck:
    """Re-read the state of every item in a context, in one round trip.

    Usable: ``active`` items, ``case`` items inside their own case, and
    ``verify_on_next_use`` items that pass their check now (the check, and
    running out a secondary TTL, are the only extra reads, and only when such
    an item is in the context; both are recorded transitions). It re-reads
    states; it does not re-evaluate applicability. Items the actor may not
    read, redacted ones, or ones that do not exist, are dropped as
    ``not_found``; the others that may not be used are dropped with their state.
    """
    actor.require("check_context")
    rows = {int(r.id): r for r in q.context_states(session=session, tenant=tenant, ids=item_ids)}
    found: dict[int, ItemRecord] = {}
    for item_id, row in rows.items():
        record = record_from_row(row)
        if not row.redacted and actor.can_read_acl(record.acl):
            found[item_id] = record
    ttl = [i for i in found if rows[i].ttl_applies]
    to_check = [r for r in found.values() if r.state == "verify_on_next_use"]
    checks: dict[int, bool] = {}
    if ttl or to_check:
        world = load_world(session=session, tenant=tenant)
        expired = lifecycle.expire_ttl(
            session=session,
            tenant=tenant,
            world=world,
            now=now,
            actor=lifecycle.SYSTEM_ACTOR,
            ids=ttl,
        )
        if expired:
            fresh = q.context_states(session=session, tenant=tenant, ids=expired)
            for row in fresh:
                found[int(row.id)] = record_from_row(row)
            to_check = [r for r in found.values() if r.state == "verify_on_next_use"]
        snapshot = build_snapshot(session=session, world=world, subjects=None, at=now)
        outcome = lifecycle.run_checks(
            session=session,
            tenant=tenant,
            items=sorted(to_check, key=lambda r: r.id),
            world=world,
            snapshot=snapshot,
            now=now,
            actor=actor.id,
        )
        checks = {i: c.passed for i, c in outcome.items()}
    usable: list[int] = []
    dropped: dict[int, str] = {}
    for item_id in item_ids:
        item = found.get(item_id)
        if item is None:
            dropped[item_id] = "not_found"
        elif (
            item.state == "active"
            or checks.get(item_id) is True
            or (item.state == "case" and item.scope_axis == "case" and item.scope_id == case_id)
        ):
            usable.append(item_id)
        elif item_id in checks:
            dropped[item_id] = "needs_reverification"
        else:
            dropped[item_id] = item.state
    return ContextCheck(tuple(usable), dropped, checks)
