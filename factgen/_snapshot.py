"""Snapshots: what is observed about a set of subjects at an instant."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._facts import TypedFact
from factgen._world import World
from predicates import (
    TYPE_NAMES,
    Duration,
    Observed,
    TypedValue,
    ValueType,
    Version,
    decode,
    encode,
)

__all__ = ["Snapshot", "SnapshotEntry", "build_snapshot"]


@dataclass(frozen=True)
class SnapshotEntry:
    """The observation that counts for one (subject, attribute)."""

    subject: str
    attribute: str
    value: TypedValue
    vtype: ValueType
    observed_at: datetime
    source: str | None
    inline: bool = False
    #: where a pulled observation came from (``facts.provenance``: the source, its
    #: query or pointer, the sample's time), None for one typed or given inline
    provenance: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)


@dataclass
class Snapshot:
    """Latest fresh observation per (subject, attribute) at ``at``; inline values on top."""

    at: datetime
    entries: dict[tuple[str, str], SnapshotEntry] = field(default_factory=dict)

    def get(self, subject: str, attribute: str) -> SnapshotEntry | None:
        """The entry that counts, or None."""
        return self.entries.get((subject, attribute))

    def observed(self, subject: str, attribute: str) -> Observed | None:
        """The entry as the predicate evaluator takes it."""
        entry = self.entries.get((subject, attribute))
        return None if entry is None else Observed(entry.value, entry.vtype)

    def __iter__(self) -> Iterator[SnapshotEntry]:
        return iter(self.entries.values())

    def to_json(self) -> dict[str, dict[str, Any]]:
        """``{subject: {attribute: encoded value}}``, the form the SQL evaluator reads."""
        out: dict[str, dict[str, Any]] = {}
        for e in self.entries.values():
            out.setdefault(e.subject, {})[e.attribute] = encode(e.value, e.vtype)
        return out


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_VTYPES = {name: ValueType(name) for name in TYPE_NAMES}


def _version(text: str) -> TypedValue:
    return Version(json.loads(text))


def _duration(text: str) -> TypedValue:
    return Duration(Decimal(text))


_FROM_TEXT: dict[str, Callable[[str], TypedValue]] = {
    "int": int,
    "float": float,
    "bool": {"true": True, "false": False}.__getitem__,
    "string": str,
    "enum": str,
    "version": _version,
    "duration": _duration,
    "timestamp": lambda text: _EPOCH + timedelta(microseconds=int(text)),
}
_JSON_KIND = {
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "string": "string",
    "enum": "string",
    "version": "array",
    "duration": "number",
    "timestamp": "number",
}


def decode_text(
    tag: str | None, kind: str | None, text: str | None
) -> tuple[TypedValue, ValueType]:
    """``decode({"t": tag, "v": v})`` from the type tag, ``jsonb_typeof(v)`` and the
    text PostgreSQL gives for ``value ->> 'v'`` (unquoted for strings, JSON otherwise).

    The same result as ``decode``, without parsing JSON for the common case; a
    value that does not convert is handed to ``decode``, which raises
    ``ValueTypeError`` for anything ``encode`` cannot produce.
    """
    convert = _FROM_TEXT.get(tag or "")
    if convert is not None and text is not None and kind == _JSON_KIND[tag or ""]:
        try:
            value = convert(text)
        except (ValueError, KeyError, TypeError, ArithmeticError):
            pass
        else:
            if tag != "float" or math.isfinite(value):  # type: ignore[arg-type]
                return value, _VTYPES[tag]  # type: ignore[index]
    v: object = text
    if kind != "string" and text is not None:
        with contextlib.suppress(ValueError):
            v = json.loads(text)
    return decode({"t": tag, "v": v})


def build_snapshot(
    *,
    session: Session,
    world: World,
    subjects: Sequence[str] | None,
    at: datetime,
    known_at: datetime | None = None,
    inline: Iterable[TypedFact] = (),
    current: bool = False,
) -> Snapshot:
    """The snapshot of ``subjects`` (None: all) at ``at``, as known at ``known_at``.

    ``current`` (a live read of named subjects) reads the latest observations
    from ``facts_current``, one probe per subject, and the history only for a
    subject observed later than ``at``; the answer is the same.

    An observation counts when it is the latest one observed by ``at`` and is
    within its attribute's ``max_age``; a stale latest observation means no
    observation. Attributes no longer declared are left out. ``inline`` facts
    count as observed at ``at`` and take precedence.
    """
    snap = Snapshot(at=at)
    if current and subjects is not None and (known_at is None or known_at == at):
        rows, later = q.current_facts_text(
            session=session, tenant=world.tenant, subjects=subjects, at=at
        )
        if later:
            rows += q.latest_facts_text(
                session=session, tenant=world.tenant, subjects=sorted(later), at=at, recorded_by=at
            )
    else:
        rows = q.latest_facts_text(
            session=session,
            tenant=world.tenant,
            subjects=subjects,
            at=at,
            recorded_by=known_at or at,
        )
    get = world.schema.get
    entries = snap.entries
    for subject, attribute, tag, kind, text, observed_at, source, provenance in rows:
        spec = get(attribute)
        if spec is None:
            continue
        if spec.max_age is not None and at - observed_at > spec.max_age:
            continue
        value, vtype = decode_text(tag, kind, text)
        entries[(subject, attribute)] = SnapshotEntry(
            subject, attribute, value, vtype, observed_at, source, provenance=provenance
        )
    for f in inline:
        snap.entries[(f.subject, f.attribute)] = SnapshotEntry(
            f.subject, f.attribute, f.value, f.vtype, at, f.source or "inline", inline=True
        )
    return snap
