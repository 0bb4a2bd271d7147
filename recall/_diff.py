"""Belief diff: what became and what stopped being recallable between two instants (model §6).

"Recallable at t" is recall's rule as of ``t`` for one principal, purpose and
set of subjects, with no query text and no limit, outside any case: the row
was current then, its state then was ``active`` (or ``verify_on_next_use``
with a check that passes on the observations of then, or ``case`` on the
caller's own ``agent`` anchor: its lesson), a skill was released
then, the purpose fits, its conditions applied on the fact snapshot of then
and its validity window held then. The gates at both instants are computed
in one SQL statement over the as-of history (``_queries.diff_rows``); only
the verify-on-next-use check and the choice of a cause run in Python.

Items the caller may not read (tenant, capability) and redacted items are
never mentioned, as in recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, record_from_row
from factgen import Snapshot, World, build_snapshot
from factgen import load_world as _load_world
from lifecycle import check_item, condition_values
from predicates.errors import InputError
from recall import _queries as q

__all__ = [
    "CAUSES",
    "BeliefDiff",
    "Cause",
    "Change",
    "DiffEntry",
    "GateVerdicts",
    "cause_of",
    "diff",
]

Change = Literal["became", "stopped"]
Cause = Literal["transition", "supersession", "fact_change", "validity_window"]
#: The causes, in the order a change is attributed to them (see ``cause_of``).
CAUSES: tuple[Cause, ...] = ("supersession", "transition", "validity_window", "fact_change")
_ADMITTING = frozenset({"active", "verify_on_next_use"})


@dataclass(frozen=True)
class GateVerdicts:
    """One item's gates at one instant, outside any case (the purpose gate is the same at
    every instant and is applied before). ``check`` is the verify-on-next-use check's
    outcome then, ``None`` when the state then was not ``verify_on_next_use``."""

    recorded: bool
    current: bool
    state: str | None
    released: bool
    applicability: bool
    validity_window: bool
    check: bool | None = None
    #: a ``case`` or ``shadow`` item the private rule admits then (the caller's own
    #: agent lesson)
    private: bool = False

    @property
    def state_admits(self) -> bool:
        """The state then admits the item, its verify-on-next-use check aside."""
        return self.state in _ADMITTING or (self.state in ("case", "shadow") and self.private)

    @property
    def admitted(self) -> bool:
        """The state part of ``activated_version``: active, a check that passed, or the
        caller's own lesson."""
        if self.state == "verify_on_next_use":
            return self.check is True
        return self.state_admits

    @property
    def recallable(self) -> bool:
        """All gates pass: a no-query, no-limit recall outside any case would return it."""
        return (
            self.recorded
            and self.current
            and self.admitted
            and self.released
            and self.applicability
            and self.validity_window
        )


def cause_of(before: GateVerdicts, after: GateVerdicts) -> Cause:
    """Why an item's recallability differs between ``before`` and ``after``.

    The cause is read at the instant where the item is *not* recallable: the
    gates that fail there are exactly the ones whose verdict changed. Among
    them, in this order: the row stopped being current (``supersession``);
    its state, its release or a state change that left it awaiting a failing
    check (``transition``); its validity window (``validity_window``); its
    conditions, or the check of an item in ``verify_on_next_use`` at both
    instants, on the facts of each instant (``fact_change``).
    """
    if before.recallable == after.recallable:
        raise ValueError("recallability did not change")
    end = after if before.recallable else before
    if not end.current:
        return "supersession"
    if not end.recorded or not end.state_admits or not end.released:
        return "transition"
    if not end.admitted and before.state != after.state:
        return "transition"  # a state change left it awaiting a check that fails
    if not end.validity_window:
        return "validity_window"
    return "fact_change"  # its conditions, or its check in the same state at both


@dataclass(frozen=True)
class DiffEntry:
    """One item that became or stopped being recallable, with the cause and its detail.

    ``detail`` is JSON-ready: for ``transition`` the ``actor``, ``reason``, ``at``,
    ``from`` and ``to`` of the transition (or release/retirement) that set the state
    at ``to``; for ``supersession`` the ``successor`` (None when the caller may not
    read it) and ``at``; for
    ``validity_window`` the window and whether it ``opened`` or ``closed``; for
    ``fact_change`` the ``conditions`` whose value changed (and the ``check``
    outcomes of a verify-on-next-use item).
    """

    item_id: int
    change: Change
    cause: Cause
    detail: dict[str, Any]
    item: ItemRecord


@dataclass(frozen=True)
class BeliefDiff:
    """What a principal could recall at ``to`` and not at ``from_``, and the reverse."""

    from_: datetime
    to: datetime
    subjects: tuple[str, ...] | None
    purpose: str | None
    entries: tuple[DiffEntry, ...]

    @property
    def became(self) -> tuple[DiffEntry, ...]:
        """Items recallable at ``to`` that were not at ``from_``."""
        return tuple(e for e in self.entries if e.change == "became")

    @property
    def stopped(self) -> tuple[DiffEntry, ...]:
        """Items recallable at ``from_`` that are not at ``to``."""
        return tuple(e for e in self.entries if e.change == "stopped")


def diff(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    from_: datetime,
    to: datetime,
    subjects: Sequence[str] | None = None,
    purpose: str | None = None,
    now: datetime,
    world: World | None = None,
) -> BeliefDiff:
    """The items that became recallable and those that stopped being recallable for
    ``actor`` between ``from_`` and ``to`` (``from_ <= to <= now``), each with its cause.

    Same rule as an as-of recall with no query text and no limit, outside any
    case; ``subjects`` are resolved and widened over topology as recall does
    (None: the whole tenant). A read: it changes nothing. Needs the ``diff``
    right (agents, SMEs and admins have it). Items hidden from the caller or
    redacted are never mentioned.
    ``world`` is the tenant's world model when the caller holds a current one.
    """
    actor.require("diff")
    if from_ > to:
        raise InputError(
            f"a diff runs forward: from ({from_.isoformat()}) is after to ({to.isoformat()})"
        )
    if to > now:
        raise InputError(f"to ({to.isoformat()}) is in the future (now is {now.isoformat()})")
    if world is None:
        world = _load_world(session=session, tenant=tenant)
    widened: tuple[str, ...] | None = None
    if subjects is not None:
        direct = {world.resolver.resolve(s) for s in subjects}
        widened = tuple(sorted(world.topology.neighbourhood(direct, world.policy.topology_depth)))
    snapshots = (
        build_snapshot(session=session, world=world, subjects=None, at=from_, known_at=from_),
        build_snapshot(session=session, world=world, subjects=None, at=to, known_at=to),
    )
    rows = q.diff_rows(
        session=session,
        params={
            "tenant": tenant,
            **actor.gate_params("capabilities"),
            "purpose": purpose,
            # the private rule outside any case and session: the caller's own lessons
            "case_id": None,
            "session": None,
            "wm_ttl_s": world.policy.working_memory_ttl.total_seconds(),
            "t0": from_,
            "t1": to,
            "snapshot_0": snapshots[0].to_json(),
            "snapshot_1": snapshots[1].to_json(),
            "all_subjects": widened is None,
            "subjects": list(widened or ()),
        },
    )
    entries = []
    for row in rows:
        entry = _entry(row, world, snapshots)
        if entry is not None:
            entries.append(entry)
    return BeliefDiff(from_, to, widened, purpose, tuple(entries))


def _verdicts(
    row: sa.Row[Any], k: str, item: ItemRecord, world: World, snap: Snapshot
) -> GateVerdicts:
    g = row._mapping
    state = g[f"state_{k}"]
    check = None
    if state == "verify_on_next_use":
        check = check_item(item, world, snap, g[f"state_at_{k}"]).passed
    return GateVerdicts(
        recorded=bool(g[f"g_recorded_{k}"]),
        current=bool(g[f"g_current_{k}"]),
        state=state,
        released=bool(g[f"g_released_{k}"]),
        applicability=bool(g[f"g_applicability_{k}"]),
        validity_window=bool(g[f"g_validity_window_{k}"]),
        check=check,
        private=bool(g[f"g_private_{k}"]),
    )


def _entry(
    row: sa.Row[Any], world: World, snapshots: tuple[Snapshot, Snapshot]
) -> DiffEntry | None:
    item = record_from_row(row)
    before = _verdicts(row, "0", item, world, snapshots[0])
    after = _verdicts(row, "1", item, world, snapshots[1])
    if before.recallable == after.recallable:
        return None
    change: Change = "became" if after.recallable else "stopped"
    cause = cause_of(before, after)
    return DiffEntry(
        item.id, change, cause, _detail(cause, row, item, world, snapshots, before, after), item
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _detail(
    cause: Cause,
    row: sa.Row[Any],
    item: ItemRecord,
    world: World,
    snapshots: tuple[Snapshot, Snapshot],
    before: GateVerdicts,
    after: GateVerdicts,
) -> dict[str, Any]:
    g = row._mapping
    end = after if before.recallable else before
    if cause == "supersession":
        # a successor the caller may not read is not named
        return {"successor": g["visible_successor"], "at": _iso(item.superseded_at)}
    if cause == "transition":
        if end.recorded and end.state in _ADMITTING and not end.released:
            return {
                "actor": g["release_actor_1"],
                "reason": g["release_reason_1"],
                "at": _iso(g["release_at_1"]),
                "from": g["release_0"] or "draft",
                "to": g["release_1"] or "draft",
                "release": True,
            }
        return {
            "actor": g["state_actor_1"],
            "reason": g["state_reason_1"],
            "at": _iso(g["state_at_1"]),
            "from": g["state_from_1"],
            "to": g["state_1"],
        }
    if cause == "validity_window":
        return {
            "valid_from": _iso(item.valid_from),
            "valid_to": _iso(item.valid_to),
            "window": "opened" if after.recallable else "closed",
        }
    values = [condition_values(item, world, s) for s in snapshots]
    changed = [
        {
            "condition": b.condition,
            "list": b.list,
            "subject": b.subject,
            "attribute": b.attribute,
            "before": b.value.name,
            "after": a.value.name,
        }
        for b, a in zip(*values, strict=True)
        if b.value is not a.value
    ]
    out: dict[str, Any] = {"conditions": changed}
    if before.check is not None or after.check is not None:
        out["check"] = {"before": before.check, "after": after.check}
    return out
