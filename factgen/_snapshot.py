"""Snapshots: what is observed about a set of subjects at an instant."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._facts import TypedFact
from factgen._world import World
from predicates import Observed, TypedValue, ValueType, decode, encode

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


def build_snapshot(
    *,
    session: Session,
    world: World,
    subjects: Sequence[str] | None,
    at: datetime,
    known_at: datetime | None = None,
    inline: Iterable[TypedFact] = (),
) -> Snapshot:
    """The snapshot of ``subjects`` (None: all) at ``at``, as known at ``known_at``.

    An observation counts when it is the latest one observed by ``at`` and is
    within its attribute's ``max_age``; a stale latest observation means no
    observation. Attributes no longer declared are left out. ``inline`` facts
    count as observed at ``at`` and take precedence.
    """
    snap = Snapshot(at=at)
    rows = q.latest_facts(
        session=session,
        tenant=world.tenant,
        subjects=subjects,
        at=at,
        recorded_by=known_at or at,
    )
    for r in rows:
        spec = world.schema.get(r.attribute)
        if spec is None:
            continue
        if spec.max_age is not None and at - r.observed_at > spec.max_age:
            continue
        value, vtype = decode(r.value)
        snap.entries[(r.subject, r.attribute)] = SnapshotEntry(
            r.subject, r.attribute, value, vtype, r.observed_at, r.source
        )
    for f in inline:
        snap.entries[(f.subject, f.attribute)] = SnapshotEntry(
            f.subject, f.attribute, f.value, f.vtype, at, f.source or "inline", inline=True
        )
    return snap
