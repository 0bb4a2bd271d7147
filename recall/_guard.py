"""The context guard: before every model call, which items may still be used (model §4.4).

``check_context`` is the read (one round trip, nothing written);
``record_context`` is the same answer with what it leaves behind: a secondary
TTL that ran out and every verify-on-next-use check among the items, persisted
as transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

import lifecycle
from claims import Actor, ItemRecord, record_from_row
from factgen import World, build_snapshot, load_world
from recall import _queries as q
from recall._recall import _conditions_subjects, _declared

__all__ = ["ContextCheck", "check_context", "record_context"]


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
    world: World | None = None,
) -> ContextCheck:
    """Re-read the state of every item in a context, in one round trip; a pure read.

    Usable: ``active`` items, ``case`` items inside their own case, and
    ``verify_on_next_use`` items (an active one whose secondary TTL ran out
    reads as one) whose check passes now; a skill only in its released
    version, as recall admits it. It re-reads states; it does not re-evaluate
    applicability. Items the actor may not read, redacted ones, or ones that
    do not exist, are dropped as ``not_found``; the others that may not be used
    are dropped with their state (``needs_reverification`` for a failed
    check, ``unreleased`` for a draft or retired skill version).
    """
    actor.require("check_context")
    params: dict[str, Any] = {
        "tenant": tenant,
        "admin": actor.role == "admin",
        "caps": sorted(actor.capabilities),
        "ids": list(item_ids),
        "at": now,
        "inline": {},
        "declared": {"exact": {}, "patterns": []},
        "ttl": {},
        "ttl_types": sorted(lifecycle.TTL_CONTENT_TYPES),
    }
    if world is not None:
        params.update(declared=_declared(world), ttl=lifecycle.ttl_seconds(world))
    rows = {int(r[0]): r for r in q.guard_states(session=session, params=params)}
    pending = [i for i, r in rows.items() if r[7]]
    if pending and world is None:
        # an item's answer depends on the schema or the TTL policy: read them, once
        world = load_world(session=session, tenant=tenant)
        params.update(ids=pending, declared=_declared(world), ttl=lifecycle.ttl_seconds(world))
        rows.update((int(r[0]), r) for r in q.guard_states(session=session, params=params))
    usable: list[int] = []
    dropped: dict[int, str] = {}
    checked: dict[int, bool] = {}
    for item_id in item_ids:
        row = rows.get(item_id)
        if row is None or not row[5]:
            dropped[item_id] = "not_found"
            continue
        _, state, scope_axis, scope_id, released, _, passed, _ = row
        if state == "verify_on_next_use":
            checked[item_id] = bool(passed)
        if not released:
            dropped[item_id] = "unreleased"
        elif (
            state == "active"
            or (state == "verify_on_next_use" and passed)
            or (state == "case" and scope_axis == "case" and scope_id == case_id)
        ):
            usable.append(item_id)
        elif state == "verify_on_next_use":
            dropped[item_id] = "needs_reverification"
        else:
            dropped[item_id] = state
    return ContextCheck(tuple(usable), dropped, checked)


def record_context(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_ids: Sequence[int],
    case_id: str | None,
    now: datetime,
    world: World | None = None,
) -> ContextCheck:
    """``check_context``, recording what it found: secondary TTLs that ran out move their
    items to ``verify_on_next_use``, and each verify-on-next-use check among the items
    is recorded (passed: ``active``; failed: ``needs_reverification``). Returns the
    answer as recorded."""
    actor.require("check_context")
    world = world or load_world(session=session, tenant=tenant)
    rows = {int(r.id): r for r in q.context_states(session=session, tenant=tenant, ids=item_ids)}
    found: dict[int, ItemRecord] = {}
    for item_id, row in rows.items():
        record = record_from_row(row)
        if not row.redacted and actor.can_read_acl(record.acl):
            found[item_id] = record
    ttl = [i for i in found if rows[i].ttl_applies]
    if ttl:
        lifecycle.expire_ttl(
            session=session,
            tenant=tenant,
            world=world,
            now=now,
            actor=lifecycle.SYSTEM_ACTOR,
            ids=ttl,
        )
        for row in q.context_states(session=session, tenant=tenant, ids=ttl):
            found[int(row.id)] = record_from_row(row)
    to_check = sorted(
        (r for r in found.values() if r.state == "verify_on_next_use"), key=lambda r: r.id
    )
    checked: dict[int, bool] = {}
    if to_check:
        snapshot = build_snapshot(
            session=session,
            world=world,
            subjects=_conditions_subjects(to_check),
            at=now,
            current=True,
        )
        outcome = lifecycle.run_checks(
            session=session,
            tenant=tenant,
            items=[r for r in to_check if r.kind != "skill" or r.release_state == "released"],
            world=world,
            snapshot=snapshot,
            now=now,
            actor=actor.id,
        )
        checked = {i: c.passed for i, c in outcome.items()}
    after = check_context(
        session=session,
        tenant=tenant,
        actor=actor,
        item_ids=item_ids,
        case_id=case_id,
        now=now,
        world=world,
    )
    return ContextCheck(after.usable, after.dropped, {**after.checked, **checked})
