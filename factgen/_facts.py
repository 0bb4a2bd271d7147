"""Typed facts: observations checked against the schema and stored atomically."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._access import Actor
from factgen._schema import AttributeSpec
from factgen._world import World
from predicates import TypedValue, ValueType, coerce, encode
from predicates.errors import CaveatError, ValueTypeError, shown

__all__ = [
    "Observation",
    "Refusal",
    "TypedFact",
    "observe",
    "observe_each",
    "type_observations",
]


@dataclass(frozen=True)
class Observation:
    """A raw observation as an adapter or a caller gives it."""

    subject: str
    attribute: str
    value: Any
    source: str | None = None
    #: the observation's own time (a pulled sample's timestamp); None: the batch's
    observed_at: datetime | None = None
    #: where a pulled value came from (source, query or pointer, sample time)
    provenance: Mapping[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class TypedFact:
    """An observation whose subject resolved and whose value has the declared type."""

    subject: str
    attribute: str
    value: TypedValue
    vtype: ValueType
    observed_at: datetime
    source: str | None
    provenance: Mapping[str, Any] | None = field(default=None, hash=False)


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
        out.append(
            TypedFact(
                subject,
                obs.attribute,
                value,
                spec.vtype,
                obs.observed_at or observed_at,
                obs.source,
                obs.provenance,
            )
        )
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
    _insert(session=session, world=world, facts=facts, now=now)
    return facts


def _value_json(value: TypedValue, vtype: ValueType) -> str:
    """``json.dumps(encode(value, vtype))`` for a value ``coerce`` made: a float or an int
    (what a pull stores, thousands at a time) written as ``json.dumps`` writes it, its
    ``repr``, without building the mapping; every other type through ``encode``."""
    name = vtype.name
    if name == "float" and type(value) is float:
        return '{"t": "float", "v": ' + float.__repr__(value) + "}"
    if name == "int" and type(value) is int:
        return '{"t": "int", "v": ' + int.__repr__(value) + "}"
    return json.dumps(encode(value, vtype))


def _insert(*, session: Session, world: World, facts: Sequence[TypedFact], now: datetime) -> None:
    q.insert_facts(
        session=session,
        tenant=world.tenant,
        recorded_at=now,
        rows=[
            (
                f.subject,
                f.attribute,
                _value_json(f.value, f.vtype),
                f.observed_at,
                f.source,
                f.provenance,  # encoded once per distinct mapping
            )
            for f in facts
        ],
    )


@dataclass(frozen=True)
class Refusal:
    """An observation refused on its own (a pulled sample): its code and why."""

    observation: Observation
    code: str
    message: str


def observe_each(
    *,
    session: Session,
    world: World,
    actor: Actor,
    observations: Sequence[Observation],
    observed_at: datetime,
    now: datetime,
) -> tuple[list[TypedFact], list[Refusal]]:
    """Type every observation on its own and store those that type, as one batch; the
    rest are refused with their code (``subject_unresolved``, ``fact_unknown_attribute``,
    ``fact_type_mismatch``, ``event_in_future`` for an observation dated beyond the
    tenant's ``event_clock_skew``), never stored under a guess. An observation a little
    ahead of ``now`` (a source's clock), within the tolerance, is stored as observed
    ``now``. What a fact source's
    pull does: one bad sample does not cost the others (``observe`` action)."""
    actor.require("observe")
    typed: list[TypedFact] = []
    refused: list[Refusal] = []
    horizon = now + world.policy.event_clock_skew
    lookup = world.resolver.lookup
    specs: dict[str, AttributeSpec | None] = {}  # one schema lookup per attribute
    for given in observations:
        obs = given
        when = obs.observed_at or observed_at
        if when > horizon:
            refused.append(
                Refusal(
                    obs, "event_in_future", f"observed at {when.isoformat()}, ahead of the clock"
                )
            )
            continue
        if when > now:  # ahead within the tolerance: counted from now (recall reads up to
            # now, and would not see it yet); the sample's own time stays in the provenance
            when = now
            obs = replace(obs, observed_at=now)
        # the happy path: the subject resolves through the aliases, the attribute is
        # declared, the value coerces; anything else goes the one way that words the
        # refusal (type_observations), so a refused sample reads as it always did
        subject = lookup(obs.subject)
        attribute = obs.attribute
        try:
            spec = specs[attribute]
        except KeyError:
            spec = specs[attribute] = world.schema.get(attribute)
        if subject is not None and spec is not None:
            vtype = spec.vtype
            try:
                value = coerce(obs.value, vtype)
            except ValueTypeError:
                pass
            else:
                typed.append(
                    TypedFact(subject, attribute, value, vtype, when, obs.source, obs.provenance)
                )
                continue
        try:
            typed.extend(type_observations(world, [obs], observed_at))
        except CaveatError as exc:
            refused.append(Refusal(obs, exc.code, exc.message))
    _insert(session=session, world=world, facts=typed, now=now)
    return typed, refused
