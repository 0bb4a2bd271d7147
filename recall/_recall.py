"""Recall: six gates in SQL before any ranking, then ranking over the survivors (model §6)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

import lifecycle
from claims import Actor, ItemRecord, record_from_row
from factgen import Observation, Snapshot, build_snapshot, type_observations
from factgen import load_world as _load_world
from lifecycle import ConditionValue, condition_values
from predicates import Truth
from recall import _queries as q

__all__ = [
    "GATES",
    "ConditionValue",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "Withheld",
    "condition_values",
    "recall",
]

#: The six gates, in the order they run. The first two are never reported.
GATES = (
    "tenant_scope",
    "capability",
    "activated_version",
    "purpose",
    "applicability",
    "validity_window",
)
_REPORTED = GATES[2:]
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class RecallRequest:
    """What an agent asks. ``subjects`` None means every subject."""

    query: str
    subjects: Sequence[str] | None = None
    purpose: str | None = None
    case_id: str | None = None
    observations: Sequence[Observation] = ()
    as_of: datetime | None = None
    limit: int = 10
    explain: bool = False


@dataclass(frozen=True)
class RecalledItem:
    """A result: the item, its score parts, and the condition values that let it through."""

    item: ItemRecord
    score: float
    parts: dict[str, float]
    conditions: tuple[ConditionValue, ...]
    checked: bool = False  # it was in verify_on_next_use and passed its check here


@dataclass(frozen=True)
class Withheld:
    """An item the caller may see that a gate withheld (explain only)."""

    item: ItemRecord
    gate: str
    state: str | None
    conditions: tuple[ConditionValue, ...] = ()
    verdicts: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class RecallResult:
    """Ranked items; with explain, what was withheld and which observations are missing."""

    items: tuple[RecalledItem, ...]
    at: datetime
    subjects: tuple[str, ...] | None
    withheld: tuple[Withheld, ...] = ()
    missing_observations: tuple[str, ...] = ()
    snapshot: Snapshot | None = field(default=None, repr=False)
    checks: dict[int, bool] = field(default_factory=dict)  # verify-on-next-use: passed?


def _tsquery(text: str) -> str:
    """Free text as an OR query: a paraphrase still ranks, no term is required."""
    words = {w.lower() for w in _WORD.findall(text)}
    return " | ".join(sorted(words))


def _blocking_unknowns(item: ItemRecord, values: Sequence[ConditionValue]) -> list[str]:
    """Attributes (``@entity:`` for another subject) whose observation would decide."""
    return [
        v.attribute if v.subject == item.subject else f"@{v.subject}:{v.attribute}"
        for v in values
        if v.value is Truth.UNKNOWN
    ]


def recall(
    *, session: Session, tenant: str, actor: Actor, request: RecallRequest, now: datetime
) -> RecallResult:
    """Items whose every gate passes, ranked; the gates run in SQL before any ranking.

    ``as_of`` evaluates every gate as of that instant: the rows current then,
    their state then, the validity window then and the fact snapshot then.
    Items hidden by ``tenant_scope`` or ``capability``, and redacted items,
    are never mentioned.

    Before the top-k cut, every ``verify_on_next_use`` item that passes the
    other gates is checked (``lifecycle.run_checks``): passed, it is returned;
    failed, it is withheld. A live recall (no ``as_of``) records what it saw:
    those checks as transitions (after running out secondary TTLs), the
    shadow log of its case, the items that entered the case's context, and
    their last use. An ``as_of`` recall records nothing.
    """
    actor.require("recall")
    world = _load_world(session=session, tenant=tenant)
    live = request.as_of is None
    at = request.as_of or now
    subjects: tuple[str, ...] | None = None
    if request.subjects is not None:
        direct = {world.resolver.resolve(s) for s in request.subjects}
        subjects = tuple(sorted(world.topology.neighbourhood(direct, world.policy.topology_depth)))
    inline = type_observations(world, list(request.observations), at)
    snapshot = build_snapshot(
        session=session, world=world, subjects=None, at=at, known_at=at, inline=inline
    )
    params: dict[str, Any] = {
        "tenant": tenant,
        "admin": actor.role == "admin",
        "capabilities": sorted(actor.capabilities),
        "as_of": at,
        "at": at,
        "case_id": request.case_id,
        "purpose": request.purpose,
        "snapshot": snapshot.to_json(),
        "tsquery": _tsquery(request.query),
        "query_entities": list(subjects or ()),
        "all_subjects": subjects is None,
        "subjects": list(subjects or ()),
        "limit": request.limit,
        "half_life_s": max(world.policy.salience_half_life.total_seconds(), 1.0),
        "blocked": [],
        "live": live,
    }
    if live:
        lifecycle.expire_ttl(
            session=session, tenant=tenant, world=world, now=now, actor=lifecycle.SYSTEM_ACTOR
        )
    checks = lifecycle.run_checks(
        session=session,
        tenant=tenant,
        items=[record_from_row(r) for r in q.to_check(session=session, params=params)],
        world=world,
        snapshot=snapshot,
        now=now,
        actor=actor.id,
        record=live,
    )
    params["blocked"] = sorted(i for i, c in checks.items() if not c.passed)
    rows = q.gated_ranked(session=session, params=params)
    items = []
    for row in rows:
        record = record_from_row(row)
        items.append(
            RecalledItem(
                record,
                float(row.score),
                {
                    "lexical": float(row.lexical),
                    "lexical_rank": float(row.lexical_rank),
                    "entity_overlap": float(row.entity_overlap),
                    "entity_rank": float(row.entity_rank),
                    "salience": record.salience,
                    "effective_salience": float(row.effective_salience),
                },
                tuple(condition_values(record, world, snapshot)),
                record.id in checks,
            )
        )
    if live:
        _record(session, tenant, request.case_id, [r.item.id for r in items], params, now)
    withheld: list[Withheld] = []
    missing: list[str] = []
    if request.explain:
        returned = {r.item.id for r in items}
        for row in q.candidates(session=session, params=params):
            if int(row.id) in returned:
                continue
            gate = next((g for g in _REPORTED if not getattr(row, f"g_{g}")), None)
            if gate is None:
                continue  # passed every gate; fell below the limit
            record = record_from_row(row)
            values: tuple[ConditionValue, ...] = ()
            if gate in {"applicability", "validity_window"}:
                values = tuple(condition_values(record, world, snapshot))
                missing.extend(_blocking_unknowns(record, values))
            verdicts = tuple((g, bool(getattr(row, f"g_{g}"))) for g in _REPORTED)
            withheld.append(Withheld(record, gate, row.state_then, values, verdicts))
    return RecallResult(
        tuple(items),
        at,
        subjects,
        tuple(withheld),
        tuple(dict.fromkeys(missing)),
        snapshot,
        {i: c.passed for i, c in checks.items()},
    )


def _record(
    session: Session,
    tenant: str,
    case_id: str | None,
    returned: list[int],
    params: dict[str, Any],
    now: datetime,
) -> None:
    """What a live recall leaves behind: last use, context entries and the shadow log."""
    lifecycle.record_use(session=session, tenant=tenant, ids=returned, at=now)
    if case_id is None:
        return
    lifecycle.enter_context(
        session=session, tenant=tenant, case_id=case_id, ids=returned, at=now, via="recall"
    )
    shadow = q.shadow_candidates(session=session, params=params)
    lifecycle.log_shadow(
        session=session,
        tenant=tenant,
        case_id=case_id,
        entries=[(int(r.id), bool(r.matched)) for r in shadow],
        now=now,
    )
