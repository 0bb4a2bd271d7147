"""Citations (model §4.2): how each item that entered a case's context influenced it.

A citation names an item, an influence (``decisive``, ``contributing``,
``considered``, ``ignored``), optionally the value the item ``expected`` and the
value the agent ``observed`` (JSON values, both or neither) and a ``rationale``,
and, derived here, a compliance: ``na`` for anything but a skill (a rule is filed
as a skill, model §1.3); for a skill, ``complied`` when it was followed, else
``violation`` when the skill is *binding* and ``discretion`` when it is not.
Followed means: ``expected`` equals ``observed`` when the citation gives them
(``same_value``: typed, ``20`` is ``20.0`` but not ``"20"``; the values decide,
whatever the influence), otherwise an influence of ``decisive`` or
``contributing``. A skill is binding when its enforcement level (``advisory`` <
``recommended`` < ``required``; ``advisory`` unless an SME set one) reaches the
tenant's ``skill_enforcement_threshold``. The compliance is the one of the
instant of the citation: a later change of level re-derives nothing.

Only items that entered the case's context may be cited: an item returned by
a recall made in the case, passed by the context guard in the case, or
written into the case. Citing into a case that is not open is
``case_not_open``; citing anything else is ``not_in_context``. Citing an
item again replaces the citation. Each citation is audited and counts as a
use of the item (salience).

``list_citations`` reads them back, filtered and keyset-paged, as the reader may
see them (an item it may not read is neither listed nor counted).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import Actor, append
from factgen import load_world
from lifecycle import _queries as q
from lifecycle._access import visible_item
from lifecycle._cases import FOLLOWED, INFLUENCES, get_case
from predicates.errors import CaseNotOpen, CaveatError, InputError

__all__ = [
    "COMPLIANCES",
    "ENFORCEMENT_LEVELS",
    "INFLUENCES",
    "Citation",
    "CitationFilter",
    "CitationKey",
    "Enforcement",
    "NotInContext",
    "binding",
    "cite",
    "compliance",
    "enforcement_of",
    "followed",
    "list_citations",
    "same_value",
    "set_enforcement",
]

ENFORCEMENT_LEVELS: tuple[str, ...] = ("advisory", "recommended", "required")
COMPLIANCES: tuple[str, ...] = ("na", "complied", "discretion", "violation")
#: The position of a citation in ``list_citations``' order: ``(cited_at, case_id, item_id)``.
CitationKey = tuple[datetime, str, int]


class NotInContext(CaveatError):
    """Citing an item that did not enter the case's context."""

    code = "not_in_context"


@dataclass(frozen=True)
class Citation:
    """One stored citation (``kind``, ``subject``, ``attribute``: its item's, when listed)."""

    case_id: str
    item_id: int
    influence: str
    compliance: str
    cited_at: datetime
    cited_by: str
    signal: str | None = None
    expected: Any = None
    observed: Any = None
    rationale: str | None = None
    signalled_at: datetime | None = None
    kind: str | None = None
    subject: str | None = None
    attribute: str | None = None

    @property
    def key(self) -> CitationKey:
        """Its position in ``list_citations``' order."""
        return (self.cited_at, self.case_id, self.item_id)


@dataclass(frozen=True)
class Enforcement:
    """A skill's enforcement level as an SME set it (``previous``: the level before)."""

    item_id: int
    level: str
    set_at: datetime
    set_by: str
    reason: str | None
    previous: str | None = None


def same_value(a: Any, b: Any) -> bool:
    """Typed equality of two JSON values: numbers by value (``20`` is ``20.0``), a
    boolean only a boolean (``true`` is not ``1``), strings exactly, lists item by item,
    objects key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def followed(influence: str, expected: Any = None, observed: Any = None) -> bool:
    """Whether the cited item was followed: the values decide when given (equal), the
    influence otherwise (``decisive`` or ``contributing``)."""
    if expected is None and observed is None:
        return influence in FOLLOWED
    return same_value(expected, observed)


def binding(level: str | None, threshold: str) -> bool:
    """A skill at ``level`` (``advisory`` when none was set) binds at ``threshold``."""
    return ENFORCEMENT_LEVELS.index(level or "advisory") >= ENFORCEMENT_LEVELS.index(threshold)


def compliance(
    kind: str,
    influence: str,
    level: str | None,
    threshold: str,
    expected: Any = None,
    observed: Any = None,
) -> str:
    """``na``, ``complied``, ``discretion`` or ``violation`` (pure)."""
    if kind != "skill":
        return "na"
    if followed(influence, expected, observed):
        return "complied"
    return "violation" if binding(level, threshold) else "discretion"


def _json_value(value: Any, name: str) -> Any:
    """``value`` as a JSON value (``InputError`` naming ``name`` otherwise)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: not a JSON value: {value!r}", attribute=name) from exc
    return value


def _values(expected: Any, observed: Any) -> tuple[Any, Any]:
    if (expected is None) != (observed is None):
        missing = "observed" if observed is None else "expected"
        raise InputError(
            f"{missing}: expected and observed are given together (what the item "
            "prescribes and what was observed or done), or neither",
            attribute=missing,
        )
    return _json_value(expected, "expected"), _json_value(observed, "observed")


def cite(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    item_id: int,
    influence: str,
    actor: Actor,
    now: datetime,
    expected: Any = None,
    observed: Any = None,
    rationale: str | None = None,
) -> Citation:
    """Record that an item which entered the case's context influenced it, with what it
    expected and what was observed (both or neither) and why."""
    actor.require("cite")
    if influence not in INFLUENCES:
        raise InputError(
            f"unknown influence {influence!r}; expected one of {', '.join(INFLUENCES)}",
            attribute="influence",
            expected=list(INFLUENCES),
        )
    expected, observed = _values(expected, observed)
    rationale = (rationale or "").strip() or None
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
    set_level = q.enforcement(session=session, tenant=tenant, item_id=item_id)
    level = None if set_level is None else str(set_level.level)
    threshold = world.policy.skill_enforcement_threshold
    result = compliance(item.kind, influence, level, threshold, expected, observed)
    q.upsert_citation(
        session=session,
        tenant=tenant,
        case_id=case_id,
        item_id=item_id,
        influence=influence,
        compliance=result,
        expected=expected,
        observed=observed,
        rationale=rationale,
        at=now,
        actor=actor.id,
    )
    q.record_use(session=session, tenant=tenant, ids=[item_id], at=now)
    detail: dict[str, Any] = {"case": case_id, "influence": influence, "compliance": result}
    if item.kind == "skill":
        detail |= {"level": level or "advisory", "threshold": threshold}
    if expected is not None:
        detail |= {"expected": expected, "observed": observed}
    if rationale is not None:
        detail["rationale"] = rationale
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="cite",
        at=now,
        item_id=item_id,
        code=influence,
        detail=detail,
    )
    return Citation(
        case_id,
        item_id,
        influence,
        result,
        now,
        actor.id,
        expected=expected,
        observed=observed,
        rationale=rationale,
        kind=item.kind,
        subject=item.subject,
        attribute=item.attribute,
    )


def enforcement_of(*, session: Session, tenant: str, item_id: int) -> Enforcement | None:
    """The skill's enforcement level as an SME set it; ``None`` until one did (the skill
    is then ``advisory``). The caller has read the item."""
    row = q.enforcement(session=session, tenant=tenant, item_id=item_id)
    if row is None:
        return None
    return Enforcement(item_id, str(row.level), row.set_at, str(row.set_by), row.reason)


def set_enforcement(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    level: str,
    reason: str,
    actor: Actor,
    now: datetime,
) -> Enforcement:
    """An SME sets a skill's enforcement level, with a reason. Audited (setting the level
    it has is audited too: the reason is new). Citations already made keep the compliance
    they were derived with."""
    actor.require("set_enforcement")
    if level not in ENFORCEMENT_LEVELS:
        raise InputError(
            f"unknown enforcement level {level!r}; expected one of {', '.join(ENFORCEMENT_LEVELS)}",
            attribute="level",
            expected=list(ENFORCEMENT_LEVELS),
        )
    reason = (reason or "").strip()
    if not reason:
        raise InputError("reason: say why the level is set (it is audited)", attribute="reason")
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    if item.kind != "skill":
        raise InputError(
            f"item {item_id} is a {item.kind}; only skills have an enforcement level "
            "(a rule is filed as a skill)",
            attribute="item",
        )
    before = enforcement_of(session=session, tenant=tenant, item_id=item_id)
    previous = None if before is None else before.level
    q.set_enforcement(
        session=session,
        tenant=tenant,
        item_id=item_id,
        level=level,
        reason=reason,
        at=now,
        actor=actor.id,
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="set_enforcement",
        at=now,
        item_id=item_id,
        code=level,
        detail={"level": level, "previous": previous or "advisory", "reason": reason},
    )
    return Enforcement(item_id, level, now, actor.id, reason, previous)


#: The most citations one page of ``list_citations`` holds.
MAX_PAGE = 1000


@dataclass(frozen=True)
class CitationFilter:
    """What ``list_citations`` keeps: a case, an item, an influence, a compliance, and a
    range of when the citation was made (``since`` inclusive, ``until`` not); ``None``
    keeps any. ``InputError`` naming the filter for an unknown influence or compliance,
    or a range whose ``since`` is after its ``until`` (equal is an empty range)."""

    case_id: str | None = None
    item_id: int | None = None
    influence: str | None = None
    compliance: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name, known in (("influence", INFLUENCES), ("compliance", COMPLIANCES)):
            value = getattr(self, name)
            if value is not None and value not in known:
                raise InputError(
                    f"{name}: unknown {value!r}; expected one of {', '.join(known)}",
                    attribute=name,
                    expected=list(known),
                )
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InputError(
                f"since ({self.since.isoformat()}) is after until ({self.until.isoformat()})",
                attribute="since",
            )


def list_citations(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    filters: CitationFilter = CitationFilter(),
    after: CitationKey | None = None,
    limit: int = 100,
) -> list[Citation]:
    """Citations in ``(cited_at, case_id, item_id)`` order (oldest first) past ``after``,
    at most ``limit`` (1..``MAX_PAGE``, ``InputError`` otherwise), kept by ``filters``, of
    the items ``actor`` may read: an item it may not read (or a redacted one) is neither
    listed nor counted. ``NotFound`` for a case that does not exist or an item the actor
    may not see."""
    actor.require("read")
    if isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise InputError(f"limit: {limit!r} is not in 1..{MAX_PAGE}", attribute="limit")
    if filters.case_id is not None:
        get_case(session=session, tenant=tenant, case_id=filters.case_id)
    if filters.item_id is not None:
        visible_item(session=session, tenant=tenant, item_id=filters.item_id, actor=actor)
    rows = q.citation_page(
        session=session,
        tenant=tenant,
        gate=_gate(actor),
        filters=asdict(filters),
        after=after,
        limit=limit,
    )
    return [_citation(r) for r in rows]


def _gate(actor: Actor) -> dict[str, Any]:
    """The parameters of the SQL read gate (``claims._queries.readable``) for ``actor``."""
    return actor.gate_params("capabilities")


def _citation(row: Any) -> Citation:
    return Citation(
        str(row.case_id),
        int(row.item_id),
        str(row.influence),
        str(row.compliance),
        row.cited_at,
        str(row.cited_by),
        row.signal,
        row.expected,
        row.observed,
        row.rationale,
        row.signalled_at,
        row.kind,
        row.subject,
        row.attribute,
    )
