"""Recall: six gates in SQL before any ranking, then ranking over the survivors (model §6)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, record_from_row
from factgen import Observation, Snapshot, SnapshotEntry, World, build_snapshot, type_observations
from factgen import load_world as _load_world
from predicates import Truth, compile_predicate, parse
from predicates.errors import PredicateSyntaxError, PredicateTypeError
from recall import _queries as q

__all__ = [
    "GATES",
    "ConditionValue",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "Withheld",
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
class ConditionValue:
    """One condition's value against the snapshot, with the observation it used."""

    condition: str
    list: str  # "required" or "excluded"
    value: Truth
    subject: str
    attribute: str
    observed: SnapshotEntry | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        obs = self.observed
        return {
            "condition": self.condition,
            "list": self.list,
            "value": self.value.name,
            "subject": self.subject,
            "attribute": self.attribute,
            "observed": None
            if obs is None
            else {
                "value": str(obs.value),
                "observed_at": obs.observed_at.isoformat(),
                "source": obs.source,
                "inline": obs.inline,
            },
        }


@dataclass(frozen=True)
class RecalledItem:
    """A result: the item, its score parts, and the condition values that let it through."""

    item: ItemRecord
    score: float
    parts: dict[str, float]
    conditions: tuple[ConditionValue, ...]


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


def _tsquery(text: str) -> str:
    """Free text as an OR query: a paraphrase still ranks, no term is required."""
    words = {w.lower() for w in _WORD.findall(text)}
    return " | ".join(sorted(words))


def condition_values(item: ItemRecord, world: World, snapshot: Snapshot) -> list[ConditionValue]:
    """Every condition of ``item`` evaluated in Python against ``snapshot``."""
    out: list[ConditionValue] = []
    for which, texts in (("required", item.required), ("excluded", item.excluded)):
        for text in texts:
            pred = parse(text)
            subject = pred.attribute.entity or item.subject
            entry = snapshot.get(subject, pred.attribute.path)
            spec = world.schema.get(pred.attribute.path)
            if spec is None:
                value = Truth.UNKNOWN
            else:
                try:
                    compiled = compile_predicate(pred, spec.vtype)
                except (PredicateTypeError, PredicateSyntaxError):
                    value = Truth.UNKNOWN
                else:
                    value = compiled(snapshot.observed(subject, pred.attribute.path))
            out.append(ConditionValue(text, which, value, subject, pred.attribute.path, entry))
    return out


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
    Items hidden by ``tenant_scope`` or ``capability`` are never mentioned.
    """
    actor.require("recall")
    world = _load_world(session=session, tenant=tenant)
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
    }
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
                },
                tuple(condition_values(record, world, snapshot)),
            )
        )
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
    )
