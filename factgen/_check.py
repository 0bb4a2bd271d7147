"""One predicate checked against the world: parse, type, value, and the fact behind it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._schema import AttributeSpec
from factgen._snapshot import SnapshotEntry, build_snapshot
from factgen._world import World
from predicates import Duration, Predicate, Truth, compile_predicate, decode, parse, to_text
from predicates.errors import InputError, PredicateTypeError

__all__ = ["PredicateCheck", "check_predicate"]


@dataclass(frozen=True)
class PredicateCheck:
    """What ``check_predicate`` found: the parse, the declared type, the value and why."""

    text: str
    predicate: Predicate
    canonical: str
    subject: str
    spec: AttributeSpec
    truth: Truth
    entry: SnapshotEntry | None
    age: timedelta | None
    at: datetime
    note: str


def _duration(span: timedelta | None) -> str:
    return "none" if span is None else str(Duration.from_micros(span // timedelta(microseconds=1)))


def check_predicate(
    *, session: Session, world: World, text: str, subject: str | None, at: datetime
) -> PredicateCheck:
    """Parse ``text``, type-check it against the schema and evaluate it at ``at``.

    The attribute is read from the ``@entity:`` of the predicate if it has
    one, else from ``subject``; either must resolve (``SubjectUnresolved``).
    Raises ``PredicateSyntaxError`` for text that does not parse,
    ``PredicateTypeError`` (``condition_unknown_attribute`` with suggestions,
    or ``condition_type_mismatch``) for one that does not type-check, and
    ``InputError`` when there is no subject to read from. ``note`` says why
    the value is UNKNOWN (no observation, stale, another type), or which
    observation decided it.
    """
    predicate = parse(text)
    target = predicate.attribute.entity or subject
    if target is None:
        raise InputError(
            f"{to_text(predicate)!r} is about the item's subject: name one (--subject)",
            field="subject",
        )
    canonical_subject = world.resolver.resolve(target)
    path = predicate.attribute.path
    spec = world.schema.get(path)
    if spec is None:
        hints = world.schema.suggest(path)
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise PredicateTypeError(
            f"no fact source declares {path!r}{hint}",
            code="condition_unknown_attribute",
            attribute=path,
            suggestions=hints,
        )
    compiled = compile_predicate(predicate, spec.vtype)
    snapshot = build_snapshot(session=session, world=world, subjects=[canonical_subject], at=at)
    entry = snapshot.get(canonical_subject, path)
    truth = compiled(snapshot.observed(canonical_subject, path))
    age = None if entry is None else at - entry.observed_at
    if entry is not None:
        note = "decided by this observation"
        if truth is Truth.UNKNOWN:
            note = f"the observation is a {entry.vtype.name}, the condition compares a {spec.vtype}"
    else:
        note = f"no observation of {path} for {canonical_subject}"
        for row in q.latest_facts(
            session=session,
            tenant=world.tenant,
            subjects=[canonical_subject],
            at=at,
            recorded_by=at,
        ):
            if row.attribute == path:
                value, _ = decode(row.value)
                note = (
                    f"the latest observation ({value} at {row.observed_at.isoformat()}) is older "
                    f"than max_age {_duration(spec.max_age)}"
                )
    return PredicateCheck(
        text=text,
        predicate=predicate,
        canonical=to_text(predicate),
        subject=canonical_subject,
        spec=spec,
        truth=truth,
        entry=entry,
        age=age,
        at=at,
        note=note,
    )
