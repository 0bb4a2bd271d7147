"""Typed facts: observations checked against the schema and stored atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._access import Actor
from factgen._world import World
from predicates import TypedValue, ValueType, coerce, encode
from predicates.errors import ValueTypeError, shown

__all__ = ["Observation", "TypedFact", "observe", "type_observations"]


@dataclass(frozen=True)
class Observation:
    """A raw observation as an adapter or a caller gives it."""

    subject: str
    attribute: str
    value: Any
    source: str | None = None


@dataclass(frozen=True)
class TypedFact:
    """An observation whose subject resolved and whose value has the declared type."""

    subject: str
    attribute: str
    value: TypedValue
    vtype: ValueType
    observed_at: datetime
    source: str | None


def type_observations(
    world: World, observations: Sequence[Observation], observed_at: datetime
) -> list[TypedFact]:
    """Resolve and type every observation, or raise for the first one that fails.

    Raises ``SubjectUnresolved``, ``UnknownAttribute`` or ``ValueTypeError``
    naming the subject, attribute, expected type and value; nothing is kept.
    """
    out: list[TypedFact] = []
    for index, obs in enumerate(observations):
        subject = world.resolver.resolve(obs.subject)
        spec = world.schema.require(obs.attribute)
        try:
            value = coerce(obs.value, spec.vtype)
        except ValueTypeError as exc:
            raise ValueTypeError(
                f"{obs.attribute} of {subject}: expected {spec.vtype}, got {shown(obs.value)}",
                attribute=obs.attribute,
                subject=subject,
                expected=str(spec.vtype),
                value=shown(obs.value),
                index=index,
            ) from exc
        out.append(TypedFact(subject, obs.attribute, value, spec.vtype, observed_at, obs.source))
    return out


def observe(
    *,
    session: Session,
    world: World,
    actor: Actor,
    observations: Sequence[Observation],
    observed_at: datetime,
    now: datetime,
) -> list[TypedFact]:
    """Type-check the whole batch, then store it; one bad value stores nothing
    (``observe`` action)."""
    actor.require("observe")
    return store_facts(
        session=session, world=world, observations=observations, observed_at=observed_at, now=now
    )


def store_facts(
    *,
    session: Session,
    world: World,
    observations: Sequence[Observation],
    observed_at: datetime,
    now: datetime,
) -> list[TypedFact]:
    """``observe`` for a caller that checked its actor already (an event, an import)."""
    facts = type_observations(world, observations, observed_at)
    q.insert_facts(
        session=session,
        rows=[
            {
                "tenant_id": world.tenant,
                "subject": f.subject,
                "attribute": f.attribute,
                "value": encode(f.value, f.vtype),
                "observed_at": f.observed_at,
                "recorded_at": now,
                "source": f.source,
            }
            for f in facts
        ],
    )
    return facts
