"""Event-triggered expiry (model §4.3): match, judge, act.

1. **Match** (deterministic): items in ``active`` or ``verify_on_next_use``
   whose content type the event's type triggers (``TriggerTable``) and whose
   subject the event reaches (its subjects; for ``dependents`` triggers also
   every entity that depends on one of them, transitively; for ``principal``
   triggers also the event's principal); and, whatever their content type,
   every such item with a condition that names an attribute the event changes,
   about one of the event's subjects (its own subject or an ``@entity:``
   reference): the deterministic rule below flags exactly those.
2. **Judge**: the deterministic rules always run (affected when the event
   changes an attribute that a condition of the item mentions, about one of
   the event's subjects); a pluggable ``Judge`` may raise more flags. The
   flags are a union: a judge narrows the matched set to the affected ones
   and may add flags, but it can never clear a flag the rules raised, and
   nothing it answers returns an item to ``active``.
3. **Act** (deterministic): affected -> ``needs_reverification``; judged not
   affected -> ``verify_on_next_use`` (a pending check from the event's
   ``occurred_at``); an item already waiting for its check keeps waiting, from
   the later event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy.orm import Session

from claims import DeclaredRegistry, ItemRecord, append, record_from_row
from factgen import Event, World, load_world, normalise
from lifecycle import _queries as q
from lifecycle._bulk import Move, transition_groups
from lifecycle._states import SYSTEM_ACTOR

__all__ = [
    "DEFAULT_TRIGGERS",
    "Conditioned",
    "EventOutcome",
    "Judge",
    "Reach",
    "RuleJudge",
    "Trigger",
    "TriggerTable",
    "Verdict",
    "handle_event",
    "rule_flags",
    "tenant_triggers",
]


class Reach(StrEnum):
    """Which items' subjects an event reaches."""

    SUBJECT = "subject"  # the event's subjects
    DEPENDENTS = "dependents"  # ... and every entity that depends on them (topology)
    PRINCIPAL = "principal"  # ... and the event's principal


@dataclass(frozen=True)
class Trigger:
    """Events of these types re-open items of this content type."""

    content_type: str
    events: frozenset[str]
    reach: Reach = Reach.SUBJECT


class TriggerTable:
    """The trigger of each content type (model §4.3); ``with_trigger`` extends it."""

    def __init__(self, triggers: Iterable[Trigger]) -> None:
        self._by_type: dict[str, Trigger] = {}
        for t in triggers:
            self._by_type[t.content_type] = t

    def with_trigger(self, trigger: Trigger) -> TriggerTable:
        """A copy with ``trigger`` added (or replacing the one for its content type)."""
        return TriggerTable([*self._by_type.values(), trigger])

    def triggers(self) -> list[Trigger]:
        """Every trigger, by content type."""
        return [self._by_type[k] for k in sorted(self._by_type)]

    def for_event(self, event_type: str) -> list[Trigger]:
        """The triggers that an event of ``event_type`` fires."""
        return [t for t in self.triggers() if event_type in t.events]


DEFAULT_TRIGGERS = TriggerTable(
    [
        Trigger("configuration", frozenset({"deploy", "config_change"})),
        Trigger("topology", frozenset({"deploy", "config_change"})),
        Trigger("failure_mechanism", frozenset({"version_change"}), Reach.DEPENDENTS),
        Trigger("permission_refusal", frozenset({"authorisation"}), Reach.PRINCIPAL),
    ]
)


def tenant_triggers(world: World) -> TriggerTable:
    """The built-in triggers and those of the content types the tenant's registry
    declares (``claims.DeclaredRegistry``): what its events re-open."""
    table = DEFAULT_TRIGGERS
    for ct in DeclaredRegistry.of(world).content_types:
        table = table.with_trigger(Trigger(ct.name, frozenset(ct.triggers), Reach(ct.reach)))
    return table


@dataclass(frozen=True)
class Verdict:
    """A judge's answer for one item: affected or not, and why."""

    affected: bool
    reason: str = ""


class Judge(Protocol):
    """Decides which matched items an event affects; may be semantic (an LLM)."""

    def __call__(self, event: Event, items: Sequence[ItemRecord]) -> Mapping[int, Verdict]:
        """A verdict per item id; an item left out counts as not affected by this judge."""
        ...


def _path_matches(condition: str, changed: str) -> bool:
    a, b = condition.split("."), changed.split(".")
    return len(a) == len(b) and all(x == y or "*" in (x, y) for x, y in zip(a, b, strict=True))


class Conditioned(Protocol):
    """What the deterministic rule reads of an item (an ``ItemRecord`` is one)."""

    @property
    def id(self) -> int: ...

    @property
    def subject(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def conditions(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _Matched:
    """A matched item as the rule needs it (the default path loads no more)."""

    id: int
    subject: str
    state: str
    conditions: dict[str, Any]


def rule_flags(event: Event, item: Conditioned) -> str | None:
    """The deterministic rule: why the event affects ``item``, or None.

    Affected when the event changes an attribute that one of the item's
    conditions mentions, about one of the event's subjects.
    """
    if not event.changes:
        return None
    subjects = set(event.subjects)
    for which in ("required", "excluded"):
        for cond in item.conditions.get(which, ()):
            subject = cond.get("e") or item.subject
            if subject not in subjects:
                continue
            for changed in event.changes:
                if _path_matches(str(cond.get("a", "")), changed):
                    return f"changes {changed} of {subject}, which a condition mentions"
    return None


class RuleJudge:
    """The default judge: exactly the deterministic rule."""

    def __call__(self, event: Event, items: Sequence[ItemRecord]) -> Mapping[int, Verdict]:
        """Affected when the event changes an attribute the item's conditions mention."""
        out = {}
        for item in items:
            why = rule_flags(event, item)
            out[item.id] = Verdict(why is not None, why or "no condition mentions a change")
        return out


@dataclass(frozen=True)
class EventOutcome:
    """What an event did: matched items, and which went where."""

    event_id: int
    matched: tuple[int, ...]
    affected: tuple[int, ...]
    unaffected: tuple[int, ...]
    reasons: dict[int, str] = field(default_factory=dict)
    #: matched only through their conditions (the event changes an attribute they
    #: name), not through their content type's trigger
    by_conditions: tuple[int, ...] = ()


def _change_patterns(changes: Iterable[str]) -> list[str]:
    """Each changed attribute as an anchored regular expression matching the condition
    attributes ``_path_matches`` matches (a ``*`` segment on either side)."""
    out = []
    for changed in sorted(changes):
        parts = [
            "[^.]+" if part == "*" else f"(?:{re.escape(part)}|\\*)" for part in changed.split(".")
        ]
        out.append("^" + "\\.".join(parts) + "$")
    return out


def _reach(world: World, event: Event, reach: Reach) -> set[str]:
    import networkx as nx

    subjects = set(event.subjects)
    if reach is Reach.DEPENDENTS:
        graph = world.topology.graph
        for s in list(subjects):
            if s in graph:
                subjects |= nx.ancestors(graph, s)
    elif reach is Reach.PRINCIPAL and event.principal:
        subjects |= _principal_names(world, event.principal)
    return subjects


def _principal_names(world: World, principal: str) -> set[str]:
    """The principal as written, as an entity id if it names one, and normalised."""
    return {principal, world.resolver.lookup(principal) or normalise(principal)}


def _match(
    session: Session,
    tenant: str,
    world: World,
    event: Event,
    triggers: TriggerTable,
    full: bool,
) -> tuple[list[Conditioned], set[int]]:
    """The matched items, and those matched only through their conditions."""
    found: dict[int, Conditioned] = {}
    by_reach: dict[Reach, list[str]] = {}
    for t in triggers.for_event(event.type):
        by_reach.setdefault(t.reach, []).append(t.content_type)
    for reach, content_types in sorted(by_reach.items()):
        rows = q.match_event(
            session=session,
            tenant=tenant,
            content_types=sorted(content_types),
            subjects=sorted(_reach(world, event, reach)),
            names=sorted(_principal_names(world, event.principal))
            if reach is Reach.PRINCIPAL and event.principal
            else [],
            full=full,
        )
        for row in rows:
            rec = _matched(row, full)
            found[rec.id] = rec
    by_conditions: set[int] = set()
    if event.changes and event.subjects:
        rows = q.match_conditions(
            session=session,
            tenant=tenant,
            subjects=sorted(event.subjects),
            patterns=_change_patterns(event.changes),
            full=full,
        )
        for row in rows:
            rec = _matched(row, full)
            if rec.id not in found and rule_flags(event, rec) is not None:
                found[rec.id] = rec
                by_conditions.add(rec.id)
    return [found[k] for k in sorted(found)], by_conditions


def _matched(row: Any, full: bool) -> Conditioned:
    if full:
        return record_from_row(row)
    return _Matched(int(row.id), row.subject, row.state, dict(row.conditions))


def handle_event(
    *,
    session: Session,
    tenant: str,
    event: Event,
    now: datetime,
    judge: Judge | None = None,
    triggers: TriggerTable | None = None,
    actor: str = SYSTEM_ACTOR,
) -> EventOutcome:
    """Match, judge and act on one recorded event; audited (one row for the event, one per move).

    ``triggers``: the tenant's (``tenant_triggers``: the built-ins and the content types
    its registry declares) unless given.

    Nothing returns to ``active`` from an event: matched items go to
    ``needs_reverification`` or ``verify_on_next_use``, whatever the judge says.
    """
    world = load_world(session=session, tenant=tenant)
    if triggers is None:
        triggers = tenant_triggers(world)
    matched, by_conditions = _match(session, tenant, world, event, triggers, full=judge is not None)
    by_rules = {i.id: why for i in matched if (why := rule_flags(event, i)) is not None}
    by_judge: dict[int, str] = {}
    if judge is not None and matched:
        known = {i.id for i in matched}
        records = [i for i in matched if isinstance(i, ItemRecord)]
        for item_id, verdict in judge(event, records).items():
            if item_id in known and verdict.affected and item_id not in by_rules:
                by_judge[item_id] = verdict.reason or "judged affected"
    affected = sorted({*by_rules, *by_judge})
    unaffected = [i for i in matched if i.id not in by_rules and i.id not in by_judge]
    base_cause: dict[str, Any] = {"event": event.id, "type": event.type}
    _, _, fresh = transition_groups(
        session=session,
        tenant=tenant,
        moves=[
            *(
                Move(
                    "expire_affected",
                    sorted(flagged),
                    f"{event.type} event {event.id} affects it ({flagged_by})",
                    {**base_cause, "flagged_by": flagged_by},
                )
                for flagged, flagged_by in ((by_rules, "rules"), (by_judge, "judge"))
            ),
            Move(
                "expire_unaffected",
                [i.id for i in unaffected if i.state == "active"],
                f"{event.type} event {event.id} matched it; judged not affected",
                base_cause,
            ),
        ],
        at=now,
        actor=actor,
    )
    q.drop_expiry_checks(
        session=session,
        tenant=tenant,
        ids=[
            i.id for i in matched if i.state != "active" and (i.id in by_rules or i.id in by_judge)
        ],
    )
    waiting = {m[0] for m in fresh} | {i.id for i in unaffected if i.state != "active"}
    q.upsert_expiry_checks(
        session=session,
        tenant=tenant,
        ids=sorted(waiting),
        since=[event.occurred_at] * len(waiting),
        event_id=event.id,
        cause=base_cause,
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor,
        action="event",
        at=now,
        code=event.type,
        detail={
            "event": event.id,
            "subjects": list(event.subjects),
            "changes": sorted(event.changes),
            "principal": event.principal,
            "matched": len(matched),
            "affected": len(affected),
            "verify_on_next_use": len(unaffected),
        },
    )
    reasons = {**by_rules, **by_judge}
    return EventOutcome(
        event.id,
        tuple(i.id for i in matched),
        tuple(affected),
        tuple(i.id for i in unaffected),
        reasons,
        tuple(sorted(by_conditions)),
    )
