"""Events: deploys, config changes, version changes and authorisations (model §4.3).

An event names the entities it touched (``subjects``, canonical ids) and,
optionally, the attributes it changed with their new typed values. factgen
records events; the lifecycle engine decides what they re-open. A deploy,
config-change or version-change event's ``changes`` are also observations:
they are stored as facts of every subject, observed when the event occurred.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._access import Actor
from factgen._facts import Observation, store_facts
from factgen._world import World
from predicates import TypedValue, ValueType, coerce, decode, encode
from predicates.errors import Conflict, EventInFuture, InputError, ValueTypeError, shown

__all__ = ["EVENT_TYPES", "FACT_EVENT_TYPES", "Event", "events_between", "record_event"]

#: The event types caveat knows (model §4.3).
EVENT_TYPES: frozenset[str] = frozenset(
    {"deploy", "config_change", "version_change", "authorisation"}
)

#: Event types whose ``changes`` are also stored as facts of every subject.
FACT_EVENT_TYPES: frozenset[str] = frozenset({"deploy", "config_change", "version_change"})


@dataclass(frozen=True)
class Event:
    """One recorded event. ``changes`` maps attribute -> (typed value, declared type)."""

    id: int
    tenant: str
    type: str
    subjects: tuple[str, ...]
    changes: dict[str, tuple[TypedValue, ValueType]] = field(hash=False)
    principal: str | None
    occurred_at: datetime
    recorded_at: datetime
    source: str | None
    external_id: str | None

    @property
    def attributes(self) -> frozenset[str]:
        """The attributes the event changed."""
        return frozenset(self.changes)


def _aware(name: str, value: datetime) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InputError(f"{name} must be a timezone-aware datetime, not {value!r}", field=name)


def _type_changes(
    world: World, changes: Mapping[str, object]
) -> dict[str, tuple[TypedValue, ValueType]]:
    typed: dict[str, tuple[TypedValue, ValueType]] = {}
    for attribute, raw in changes.items():
        spec = world.schema.require(attribute)
        try:
            value = coerce(raw, spec.vtype)
        except ValueTypeError as exc:
            raise ValueTypeError(
                f"{attribute}: expected {spec.vtype}, got {shown(raw)}",
                attribute=attribute,
                expected=str(spec.vtype),
                value=shown(raw),
            ) from exc
        typed[attribute] = (value, spec.vtype)
    return typed


def record_event(
    *,
    session: Session,
    world: World,
    actor: Actor,
    type: str,
    subjects: Sequence[str],
    changes: Mapping[str, object] | None = None,
    principal: str | None = None,
    occurred_at: datetime,
    now: datetime,
    source: str | None = None,
    external_id: str | None = None,
) -> Event:
    """Check and store one event; nothing is stored when anything is wrong.

    Every subject must resolve (``SubjectUnresolved`` with suggestions) and
    every change must name a declared attribute (``UnknownAttribute``) with a
    value of its type (``ValueTypeError`` with attribute, expected type and
    value). ``type`` is one of ``EVENT_TYPES`` (``InputError`` otherwise); a
    non-authorisation event needs a subject, an authorisation event a
    principal. A deploy, config-change or version-change event's changes are
    also stored as facts of each subject, observed at ``occurred_at`` with
    source ``event:<type>``. An ``external_id`` already recorded in the tenant
    raises ``Conflict``.
    """
    actor.require("event")
    if type not in EVENT_TYPES:
        raise InputError(
            f"unknown event type {type!r}; expected one of {', '.join(sorted(EVENT_TYPES))}",
            field="type",
            value=type,
        )
    _aware("occurred_at", occurred_at)
    _aware("now", now)
    EventInFuture.check(
        f"{type} event",
        occurred_at,
        now=now,
        skew=world.policy.event_clock_skew,
        cause="a sender's clock is wrong or the event is not one yet",
    )
    if isinstance(subjects, str):
        raise InputError("subjects is a list of names, not one string", field="subjects")
    if type == "authorisation" and not principal:
        raise InputError("an authorisation event names its principal", field="principal")
    if type != "authorisation" and not subjects:
        raise InputError(f"a {type} event names at least one subject", field="subjects")
    resolved: list[str] = []
    for name in subjects:
        canonical = world.resolver.resolve(name)
        if canonical not in resolved:
            resolved.append(canonical)
    typed = _type_changes(world, changes or {})
    event_id = q.insert_event(
        session=session,
        row={
            "tenant_id": world.tenant,
            "external_id": external_id,
            "type": type,
            "subjects": resolved,
            "changes": {a: encode(v, t) for a, (v, t) in typed.items()},
            "principal": principal,
            "occurred_at": occurred_at,
            "recorded_at": now,
            "source": source,
        },
    )
    if event_id is None:
        raise Conflict(
            f"event {external_id!r} is already recorded",
            external_id=external_id,
            tenant=world.tenant,
        )
    if type in FACT_EVENT_TYPES and typed:
        store_facts(
            session=session,
            world=world,
            observations=[
                Observation(subject, attribute, value, f"event:{type}")
                for subject in resolved
                for attribute, (value, _) in typed.items()
            ],
            observed_at=occurred_at,
            now=now,
        )
    return Event(
        id=event_id,
        tenant=world.tenant,
        type=type,
        subjects=tuple(resolved),
        changes=typed,
        principal=principal,
        occurred_at=occurred_at,
        recorded_at=now,
        source=source,
        external_id=external_id,
    )


def _event(row: Any) -> Event:
    changes: dict[str, tuple[TypedValue, ValueType]] = {
        attribute: decode(encoded) for attribute, encoded in dict(row.changes).items()
    }
    return Event(
        id=int(row.id),
        tenant=row.tenant_id,
        type=row.type,
        subjects=tuple(row.subjects),
        changes=changes,
        principal=row.principal,
        occurred_at=row.occurred_at,
        recorded_at=row.recorded_at,
        source=row.source,
        external_id=row.external_id,
    )


def events_between(
    *,
    session: Session,
    tenant: str,
    since: datetime | None,
    until: datetime,
    types: Sequence[str] | None = None,
    subjects: Sequence[str] | None = None,
) -> list[Event]:
    """Events of ``tenant`` with ``since < occurred_at <= until`` (no lower bound when None).

    Oldest first (ties by id). ``types`` keeps only those types; ``subjects``
    keeps events touching at least one of those canonical ids. An enum value
    in ``changes`` comes back with a choiceless ``ValueType("enum")``.
    """
    rows = q.events_between(
        session=session, tenant=tenant, since=since, until=until, types=types, subjects=subjects
    )
    return [_event(r) for r in rows]
