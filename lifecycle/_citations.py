"""Citations (model §4.2): how each item that entered a case's context influenced it.

A citation names an item, an influence (``decisive``, ``contributing``,
``considered``, ``ignored``) and, derived here, a compliance: ``na`` for
anything but a skill; for a skill, ``complied`` when it was followed
(decisive or contributing), else ``violation`` when the skill is *binding*
and ``discretion`` when it is not. A skill is binding when its enforcement
level (``advisory`` < ``recommended`` < ``required``; ``advisory`` unless an
SME set one) reaches the tenant's ``skill_enforcement_threshold``.

Only items that entered the case's context may be cited: an item returned by
a recall made in the case, passed by the context guard in the case, or
written into the case. Citing into a case that is not open is
``case_not_open``; citing anything else is ``not_in_context``. Citing an
item again replaces its influence. Each citation is audited and counts as a
use of the item (salience).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from claims import Actor, append
from factgen import load_world
from lifecycle import _queries as q
from lifecycle._access import visible_item
from lifecycle._cases import FOLLOWED, INFLUENCES, get_case
from predicates.errors import CaseNotOpen, CaveatError, InputError

__all__ = [
    "ENFORCEMENT_LEVELS",
    "INFLUENCES",
    "Citation",
    "NotInContext",
    "cite",
    "compliance",
    "set_enforcement",
]

ENFORCEMENT_LEVELS: tuple[str, ...] = ("advisory", "recommended", "required")


class NotInContext(CaveatError):
    """Citing an item that did not enter the case's context."""

    code = "not_in_context"


@dataclass(frozen=True)
class Citation:
    """One stored citation."""

    case_id: str
    item_id: int
    influence: str
    compliance: str
    cited_at: datetime
    cited_by: str
    signal: str | None = None


def compliance(kind: str, influence: str, level: str | None, threshold: str) -> str:
    """``na``, ``complied``, ``discretion`` or ``violation`` (pure)."""
    if kind != "skill":
        return "na"
    if influence in FOLLOWED:
        return "complied"
    binding = ENFORCEMENT_LEVELS.index(level or "advisory") >= ENFORCEMENT_LEVELS.index(threshold)
    return "violation" if binding else "discretion"


def cite(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    item_id: int,
    influence: str,
    actor: Actor,
    now: datetime,
) -> Citation:
    """Record that an item which entered the case's context influenced it."""
    actor.require("cite")
    if influence not in INFLUENCES:
        raise InputError(
            f"unknown influence {influence!r}; expected one of {', '.join(INFLUENCES)}"
        )
    case = get_case(session=session, tenant=tenant, case_id=case_id, lock=True)
    if case.status != "open":
        raise CaseNotOpen(
            f"case {case_id!r} is {case.status}; cite into an open case", case=case_id
        )
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    own = item.scope_axis == "case" and item.scope_id == case_id
    if not own and not q.in_context(
        session=session, tenant=tenant, case_id=case_id, item_id=item_id
    ):
        raise NotInContext(
            f"item {item_id} did not enter the context of case {case_id!r}; "
            "only items a recall returned in the case, or written into it, can be cited",
            item=item_id,
            case=case_id,
        )
    world = load_world(session=session, tenant=tenant)
    level = q.enforcement_level(session=session, tenant=tenant, item_id=item_id)
    result = compliance(item.kind, influence, level, world.policy.skill_enforcement_threshold)
    q.upsert_citation(
        session=session,
        tenant=tenant,
        case_id=case_id,
        item_id=item_id,
        influence=influence,
        compliance=result,
        at=now,
        actor=actor.id,
    )
    q.record_use(session=session, tenant=tenant, ids=[item_id], at=now)
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="cite",
        at=now,
        item_id=item_id,
        code=influence,
        detail={"case": case_id, "influence": influence, "compliance": result},
    )
    return Citation(case_id, item_id, influence, result, now, actor.id)


def set_enforcement(
    *, session: Session, tenant: str, item_id: int, level: str, actor: Actor, now: datetime
) -> None:
    """An SME sets a skill's enforcement level. Audited."""
    actor.require("set_enforcement")
    if level not in ENFORCEMENT_LEVELS:
        raise InputError(
            f"unknown enforcement level {level!r}; expected one of {', '.join(ENFORCEMENT_LEVELS)}"
        )
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    if item.kind != "skill":
        raise InputError(f"item {item_id} is a {item.kind}; only skills have an enforcement level")
    q.set_enforcement(
        session=session, tenant=tenant, item_id=item_id, level=level, at=now, actor=actor.id
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="set_enforcement",
        at=now,
        item_id=item_id,
        code=level,
        detail={"level": level},
    )
