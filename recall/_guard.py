"""The context guard: before every model call, which items may still be used (model §4.4).

``check_context`` is the read (one round trip, nothing written): for the items it is
given it answers by recall's rule (the same SQL fragments as a recall's gates): the
state, the verify-on-next-use check, applicability and the validity window, against
what is observed now, inline observations first. ``record_context`` is the same
answer with what it leaves behind: a secondary TTL that ran out and every
verify-on-next-use check it ran, persisted as transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

import lifecycle
from claims import Actor, record_from_mapping
from factgen import Observation, World, load_world, type_observations
from lifecycle import ConditionValue
from recall import _queries as q
from recall._recall import _declared, _inline_json, _values, admits_private

__all__ = ["ContextCheck", "check_context", "record_context"]


@dataclass(frozen=True)
class ContextCheck:
    """Items still usable and items to drop, with the reason for each drop.

    ``checked``: the verify-on-next-use checks run (passed?); ``conditions``: for each
    item dropped as ``applicability``, its condition values now."""

    usable: tuple[int, ...]
    dropped: dict[int, str]
    checked: dict[int, bool] = field(default_factory=dict)
    conditions: dict[int, tuple[ConditionValue, ...]] = field(default_factory=dict)


def check_context(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_ids: Sequence[int],
    case_id: str | None,
    now: datetime,
    world: World | None = None,
    observations: Sequence[Observation] = (),
    session_id: str | None = None,
) -> ContextCheck:
    """Answer, for every item of a context, by recall's rule, in one round trip; a pure read.

    Usable: an ``active`` item, a ``case`` item inside its own case (or on the
    actor's own agent anchor, or working memory of ``session_id`` that the actor
    owns, within its TTL; the actor's own agent lesson in ``shadow`` too:
    ``admits_private``), or a
    ``verify_on_next_use`` one (an active one whose secondary TTL ran out reads as
    one) whose check passes now; a skill only in its released version; and only
    while it applies (every required condition TRUE, every excluded one FALSE,
    UNKNOWN never granted) and its validity window holds, on what is observed now
    (``observations``, typed as a recall types them, take precedence over stored
    facts). A forgotten item (erased by ``forget``) is dropped as ``revoked``, before
    anything else. Dropped, with the first reason in recall's gate order: ``not_found``
    (the actor may not read it, it is redacted, or it does not exist),
    ``unreleased`` (a draft or retired skill version), its state (``revoked``,
    ``needs_reverification``, another case's ``case``, ...), ``applicability``
    (with its condition values in ``conditions``; its state does not change),
    ``validity_window``, and ``needs_reverification`` for a failed check.
    """
    actor.require("check_context")
    world = world or load_world(session=session, tenant=tenant)
    inline = type_observations(world, list(observations), now)
    params: dict[str, Any] = {
        "tenant": tenant,
        **actor.gate_params("caps"),
        "ids": list(item_ids),
        "at": now,
        "inline": _inline_json(inline),
        "declared": _declared(world),
        "ttl": lifecycle.ttl_seconds(world),
    }
    rows = {int(r["id"]): r for r in q.guard_states(session=session, params=params)}
    given = {(f.subject, f.attribute): f for f in inline}
    usable: list[int] = []
    dropped: dict[int, str] = {}
    checked: dict[int, bool] = {}
    conditions: dict[int, tuple[ConditionValue, ...]] = {}
    for item_id in item_ids:
        row = rows.get(item_id)
        if row is not None and row["forgotten"]:
            dropped[item_id] = "revoked"  # erased (forget): dropped like a revoked item
            continue
        if row is None or not row["readable"]:
            dropped[item_id] = "not_found"
            continue
        state = row["state"]
        admitted = state in {"active", "verify_on_next_use"} or (
            admits_private(
                state=state,
                scope_axis=row["scope_axis"],
                scope_id=row["scope_id"],
                recorded_at=row["recorded_at"],
                case_id=case_id,
                principal=actor.id,
                session=session_id,
                session_owner=row["session_owner"],
                at=now,
                ttl=world.policy.working_memory_ttl,
            )
        )
        if not row["released"]:
            dropped[item_id] = "unreleased"
        elif not admitted:
            dropped[item_id] = state
        elif not row["applies"]:
            dropped[item_id] = "applicability"
            values = _values(record_from_mapping(row), row["condition_values"], given, now)
            conditions[item_id] = values or ()
        elif not row["valid"]:
            dropped[item_id] = "validity_window"
        elif state == "verify_on_next_use":
            checked[item_id] = bool(row["check_passed"])
            if checked[item_id]:
                usable.append(item_id)
            else:
                dropped[item_id] = "needs_reverification"
        else:
            usable.append(item_id)
    return ContextCheck(tuple(usable), dropped, checked, conditions)


def record_context(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_ids: Sequence[int],
    case_id: str | None,
    now: datetime,
    world: World | None = None,
    observations: Sequence[Observation] = (),
    session_id: str | None = None,
) -> ContextCheck:
    """``check_context``, recording what it found: secondary TTLs that ran out move their
    items to ``verify_on_next_use``, and each verify-on-next-use check the guard ran is
    recorded (passed: ``active``; failed: ``needs_reverification``). An item dropped
    for ``applicability`` or its validity window keeps its state. Returns the answer."""
    actor.require("check_context")
    world = world or load_world(session=session, tenant=tenant)
    answer = check_context(
        session=session,
        tenant=tenant,
        actor=actor,
        item_ids=item_ids,
        case_id=case_id,
        now=now,
        world=world,
        observations=observations,
        session_id=session_id,
    )
    # a revoked (or forgotten) item has no TTL left to run out: nothing to record of it
    seen = [i for i in item_ids if answer.dropped.get(i) not in ("not_found", "revoked")]
    if seen:
        lifecycle.expire_ttl(
            session=session,
            tenant=tenant,
            world=world,
            now=now,
            actor=lifecycle.SYSTEM_ACTOR,
            ids=seen,
        )
    lifecycle.record_checks(
        session=session, tenant=tenant, outcomes=answer.checked, now=now, actor=actor.id
    )
    return answer
