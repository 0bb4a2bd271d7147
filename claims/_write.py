"""The write path: policy, the gate, lineage, dedup and supersession, all audited.

One implementation serves a single write and a batch. A batch is one
transaction: it commits whole or not at all, so a crash, a killed client or
an error part-way leaves none of it (docs/reliability.md, section 5). It is
cut into chunks; each chunk, in a savepoint, loads what the gate needs in a
few set-based queries (evidence readers, lineage, the current rows of every
key, locked), decides every item in order, and stores the accepted ones with
``COPY``. Every item is decided on its own, and an accepted item is stored
whole (row, transition, audit) or not at all: when the database refuses a
chunk (a concurrent writer took a key, a deadlock), the chunk is rolled back
to its savepoint and replayed one item per savepoint, and an item that still
collides is refused with a typed ``Conflict``. The audit rows of the whole
batch (its refusals too) are appended last, after every row lock, in the
batch's transaction: the tenant's chain is locked once, for the end of the
batch only. A batch that fails records its refusals in a transaction of
their own, so a rolled-back write still leaves them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import psycopg
import sqlalchemy.exc
from sqlalchemy.orm import Session, sessionmaker

from claims import _audit
from claims import _queries as q
from claims._access import ROLLUP_AGENT_PREFIX, Access, Actor, item_access
from claims._anchors import DEFAULT_REGISTRY, ItemRegistry
from claims._audit import PendingAudit
from claims._gate import ConditionCache, PreparedItem, check_shape
from claims._proposal import ItemWrite
from claims._tenant_registry import DeclaredRegistry
from factgen import World, load_world
from predicates.errors import CaveatError, Conflict, GateRejection, nul_path

__all__ = [
    "PROPOSAL_ACTIONS",
    "WRITE_ACTIONS",
    "AfterWrite",
    "AuditActions",
    "BatchResult",
    "HiddenItems",
    "ItemOutcome",
    "ScopeGuard",
    "WorldOf",
    "WriteResult",
    "write_batch",
    "write_item",
]

#: Checks a write's anchor before the gate (e.g. that its case is open); raises to refuse.
ScopeGuard = Callable[[Session, ItemWrite], None]
#: Which of the given item ids are hidden from every reader beyond their ACL (the
#: lifecycle's redactions); the write treats them as ids that never existed.
HiddenItems = Callable[[Session, Sequence[int]], set[int]]
#: Runs in a write's transaction after its rows and audit rows are stored, with the
#: outcomes (the lifecycle logs the keys the write made contested): part of the write.
AfterWrite = Callable[[Session, Sequence["ItemOutcome"]], None]
#: The tenant's world as a session sees it (a server's cache, ``factgen.WorldCache``).
WorldOf = Callable[[Session], World]
#: The one answer to a key collision the writer may not resolve (a concurrent write
#: took the key, or the current row is one it may not read): it names no row.
CONFLICT_MESSAGE = "the item collided with another write of the same key"

#: SQLSTATEs that mean "another transaction got there first": unique and exclusion
#: violations, serialization failures, deadlocks, lock timeouts.
_RACE_STATES = frozenset({"23505", "23P01", "40001", "40P01", "55P03"})
_KEEP_STATE_WHEN_SUPERSEDED = frozenset({"revoked", "refuted"})
DEFAULT_CHUNK = 1000
#: The audit detail of every item's first transition (shared: never mutated).
_WRITTEN: dict[str, Any] = {"from": None, "to": "case", "reason": "written", "cause": {}}


@dataclass(frozen=True)
class WriteResult:
    """What became of an accepted write."""

    outcome: Literal["accepted", "duplicate"]
    item_id: int
    state: str
    superseded: int | None = None


@dataclass(frozen=True)
class ItemOutcome:
    """What became of one item of a batch (``index`` is its position in the request)."""

    index: int
    outcome: Literal["accepted", "duplicate", "rejected"]
    item_id: int | None = None
    state: str | None = None
    superseded: int | None = None
    code: str | None = None
    message: str | None = None
    gate: str | None = None
    error: CaveatError | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready rendering (without the exception object)."""
        return {
            "index": self.index,
            "outcome": self.outcome,
            "item_id": self.item_id,
            "state": self.state,
            "superseded": self.superseded,
            "code": self.code,
            "message": self.message,
            "gate": self.gate,
        }


@dataclass(frozen=True)
class BatchResult:
    """Every item's outcome, in request order."""

    outcomes: tuple[ItemOutcome, ...]

    def count(self, outcome: str) -> int:
        """How many items ended as ``outcome`` (accepted, duplicate, rejected)."""
        return sum(1 for o in self.outcomes if o.outcome == outcome)

    def codes(self) -> dict[str, int]:
        """Rejection codes with their counts."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            if o.outcome == "rejected" and o.code is not None:
                out[o.code] = out.get(o.code, 0) + 1
        return out


@dataclass(frozen=True)
class AuditActions:
    """The audit ``action`` names a write path records (writes and proposals differ)."""

    accepted: str = "write"
    rejected: str = "reject"
    duplicate: str = "duplicate"
    superseded: str = "supersede"


WRITE_ACTIONS = AuditActions()
#: Consolidated proposals: ``applied``, ``rejected`` (a duplicate too), ``superseded``.
PROPOSAL_ACTIONS = AuditActions("applied", "rejected", "rejected", "superseded")


def write_item(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
    scope_guard: ScopeGuard | None = None,
    registry: ItemRegistry = DEFAULT_REGISTRY,
    hidden: HiddenItems | None = None,
    after: AfterWrite | None = None,
    world: WorldOf | None = None,
) -> WriteResult:
    """Store ``request`` as a new current item, or refuse it with a stable reason.

    Refusals raise (``GateRejection`` and the rest of the error tree) and are
    recorded in the audit log in a transaction of their own, so a refused
    write leaves its record and nothing else. A write with the key and object
    of the current row is ``duplicate``; a new object supersedes that row. A
    concurrent write that took the key first, or a current row of the key that
    ``actor`` may not read, makes this one a ``Conflict`` that names no row.

    A ``derived_from`` id that ``actor`` may not read (its ACL), or that ``hidden``
    hides, is answered as an id that does not exist (``not_found``), and a
    ``lineage_revoked`` (``lineage_refuted``) refusal names only revoked (refuted)
    ancestors ``actor`` may read.
    """
    writer = _Writer(
        sessions, tenant, actor, now, scope_guard, registry, WRITE_ACTIONS, hidden, world
    )
    [outcome] = writer.run([request], DEFAULT_CHUNK, after=after)
    if outcome.outcome == "rejected":
        assert outcome.error is not None
        raise outcome.error
    assert outcome.item_id is not None and outcome.state is not None
    return WriteResult(outcome.outcome, outcome.item_id, outcome.state, outcome.superseded)


def write_batch(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    requests: Sequence[ItemWrite],
    actor: Actor,
    now: datetime,
    scope_guard: ScopeGuard | None = None,
    registry: ItemRegistry = DEFAULT_REGISTRY,
    chunk_size: int = DEFAULT_CHUNK,
    progress: Callable[[int], None] | None = None,
    hidden: HiddenItems | None = None,
    after: AfterWrite | None = None,
    world: WorldOf | None = None,
) -> BatchResult:
    """Write many items through the same gate; one outcome per item, in request order.
    ``progress`` is told how many items each chunk held, as it is decided.

    The batch is one transaction: when this returns, every accepted item is
    stored, and when it raises (or the process or the database dies before),
    none is. Items are decided in order, each on its own (a later item sees
    the earlier ones: the same key again is a duplicate or a supersession).
    A refused item is audited with the batch. Nothing raises for one item's
    refusal; an unknown tenant raises ``NotFound``. Lineage and collisions are
    answered as ``write_item`` answers them. ``after`` runs in the batch's
    transaction, after its rows. ``world`` gives the tenant's world as the batch's
    session sees it (a server's cached one, ``factgen.WorldCache``); None: read it.
    """
    writer = _Writer(
        sessions, tenant, actor, now, scope_guard, registry, WRITE_ACTIONS, hidden, world
    )
    return BatchResult(tuple(writer.run(list(requests), chunk_size, progress, after)))


# --- internals -----------------------------------------------------------------


class _HiddenConflict(CaveatError):
    """A collision with a row the writer may not read (``key``: the key it holds)."""

    def __init__(self, key: Sequence[str]) -> None:
        super().__init__("hidden collision")
        self.key = tuple(key)


class _Race(Exception):
    """The database moved under a chunk: replay it one item at a time."""


class _SessionTaken(_Race):
    """Another principal claimed a session under this chunk: replayed, the gate refuses
    the write to it (``axis_not_writable``), as it refuses any write to a session that
    is already another's."""


@dataclass
class _Row:
    """A key's current row as the chunk sees it: stored, or new in this chunk."""

    id: int | None
    object: Any
    access: Access
    state: str
    release_state: str | None
    new: _New | None = None


@dataclass
class _New:
    """An accepted item, waiting for its id."""

    index: int
    prepared: PreparedItem
    key: tuple[str, ...]
    access: Access
    version: int | None
    content_type: str | None
    audit_extra: dict[str, Any]
    id: int | None = None
    supersedes: _Row | None = None
    superseded_by: _New | None = None
    digest: str = ""


@dataclass
class _Dup:
    index: int
    row: _Row
    key: tuple[str, ...]
    audit_extra: dict[str, Any]


@dataclass
class _Refusal:
    index: int
    request: ItemWrite
    error: CaveatError
    audit_extra: dict[str, Any]


_Decision = _New | _Dup | _Refusal


class _Writer:
    """One batch: its actor, clock, world and condition cache."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        tenant: str,
        actor: Actor,
        now: datetime,
        scope_guard: ScopeGuard | None,
        registry: ItemRegistry,
        actions: AuditActions,
        hidden: HiddenItems | None = None,
        world_of: WorldOf | None = None,
        audit_extra: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        self.sessions = sessions
        self.tenant = tenant
        self.actor = actor
        self.now = now
        self.scope_guard = scope_guard
        self.registry = registry
        self.actions = actions
        self.extra = audit_extra
        self.hidden = hidden
        self.world: World | None = None
        self.world_of = world_of
        self.cache: ConditionCache = {}
        self.names: dict[str, str | None] = {}
        self.json: dict[str, str] = {}

    def run(
        self,
        requests: Sequence[ItemWrite],
        chunk_size: int,
        progress: Callable[[int], None] | None = None,
        after: AfterWrite | None = None,
    ) -> list[ItemOutcome]:
        indexed = list(enumerate(requests))
        size = max(1, chunk_size)
        out: list[ItemOutcome] = []
        audit: list[PendingAudit] = []
        refusals: list[_Refusal] = []
        try:
            with self.sessions.begin() as session:
                for start in range(0, len(indexed), size):
                    chunk = indexed[start : start + size]
                    decisions = self._chunk(session, chunk, audit)
                    refusals.extend(d for d in decisions if isinstance(d, _Refusal))
                    out.extend(self._outcome(d) for d in decisions)
                    if progress is not None:
                        progress(len(chunk))
                # the chain last, after every row lock (the order every write path keeps)
                _audit.append_many(session=session, tenant=self.tenant, at=self.now, rows=audit)
                if after is not None:
                    after(session, out)
        except Exception:
            if refusals:  # the batch is gone; its refusals are still recorded
                with suppress(sqlalchemy.exc.DBAPIError, psycopg.Error):
                    self._audit_refusals(refusals)
            raise
        return out

    def _extra(self, index: int) -> dict[str, Any]:
        return dict(self.extra[index]) if self.extra is not None else {}

    def _chunk(
        self,
        session: Session,
        items: list[tuple[int, ItemWrite]],
        audit: list[PendingAudit],
        replayed: bool = False,
    ) -> list[_Decision]:
        """Decide and store ``items`` in a savepoint of the batch; their audit rows go to
        ``audit``. A chunk the database refuses is replayed one item at a time; a single
        item whose session another principal claimed under it is replayed once, so the
        gate refuses it (``axis_not_writable``) as it would have a moment later."""
        rows: list[PendingAudit] = []
        try:
            with session.begin_nested():
                decisions = self._decide_and_store(session, items, rows)
        except (sqlalchemy.exc.DBAPIError, psycopg.Error, _Race) as exc:
            orig = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc
            if not isinstance(exc, _Race) and getattr(orig, "sqlstate", None) not in _RACE_STATES:
                raise
            if len(items) > 1:
                return [d for item in items for d in self._chunk(session, [item], audit)]
            if isinstance(exc, _SessionTaken) and not replayed:
                return self._chunk(session, items, audit, replayed=True)
            index, request = items[0]
            refusal = Conflict(CONFLICT_MESSAGE)
            refusal.__cause__ = exc
            decisions = [_Refusal(index, request, refusal, {"db": str(orig)})]
        audit.extend(rows)
        audit.extend(self._refusal_rows([d for d in decisions if isinstance(d, _Refusal)]))
        return decisions

    def _outcome(self, d: _Decision) -> ItemOutcome:
        if isinstance(d, _Refusal):
            return ItemOutcome(
                d.index,
                "rejected",
                code=d.error.code,
                message=d.error.message,
                gate=d.error.detail.get("gate"),
                error=d.error,
            )
        if isinstance(d, _Dup):
            row_id = d.row.id if d.row.new is None else d.row.new.id
            return ItemOutcome(
                d.index, "duplicate", row_id, d.row.state, code="duplicate_no_change"
            )
        old = d.supersedes
        old_id = None if old is None else (old.id if old.new is None else old.new.id)
        return ItemOutcome(d.index, "accepted", d.id, "case", old_id)

    def _refusal_rows(self, refusals: Sequence[_Refusal]) -> list[PendingAudit]:
        rows = []
        for r in refusals:
            exc = r.error
            detail = {
                "message": exc.message,
                "gate": exc.detail.get("gate"),
                "request": r.request.model_dump(mode="json"),
                **r.audit_extra,
            }
            if not isinstance(exc, _HiddenConflict | Conflict):
                detail.update({k: v for k, v in exc.detail.items() if k not in detail})
            rows.append(PendingAudit(self.actor.id, self.actions.rejected, None, exc.code, detail))
        return rows

    def _audit_refusals(self, refusals: Sequence[_Refusal]) -> None:
        """The refusals of a batch that failed, in a transaction of their own."""
        with self.sessions.begin() as session:
            _audit.append_many(
                session=session, tenant=self.tenant, at=self.now, rows=self._refusal_rows(refusals)
            )

    # --- deciding ----------------------------------------------------------------

    def _decide_and_store(
        self, session: Session, items: list[tuple[int, ItemWrite]], audit: list[PendingAudit]
    ) -> list[_Decision]:
        if self.world is None:
            self.world = (
                load_world(session=session, tenant=self.tenant)
                if self.world_of is None
                else self.world_of(session)
            )
            # the tenant's own axes and content types (its stored registry) beside the
            # composition root's
            self.registry = DeclaredRegistry.of(self.world).items(self.registry)
        world = self.world
        decided: dict[int, _Decision] = {}
        alive: list[tuple[int, ItemWrite]] = []
        for index, request in items:
            try:
                self._precheck(world, request)
                if self.scope_guard is not None:
                    self.scope_guard(session, request)
            except CaveatError as exc:
                decided[index] = _Refusal(index, request, exc, self._extra(index))
                continue
            alive.append((index, request))
        alive, owned = self._own_sessions(session, alive, decided)

        evidence_ids = sorted(
            {e for _, r in alive for e in (*r.evidence, *([r.test] if r.test else []))}
        )
        sources = q.evidence_access(session=session, tenant=self.tenant, ids=evidence_ids)
        visible = {
            eid: self.actor.can_read(r.readers, deny=r.deny, classification=r.classification)
            for eid, r in sources.items()
        }
        derived = sorted({d for _, r in alive for d in r.derived_from})
        existing = self._readable(session, derived)
        withdrawn = q.withdrawn_ancestors_by_root(
            session=session, tenant=self.tenant, ids=sorted(existing)
        )
        named = self._readable(session, sorted({r for rs in withdrawn.values() for r, _ in rs}))

        shaped: list[tuple[int, PreparedItem, Access]] = []
        for index, request in alive:
            try:
                prepared = self._shape(request, world, visible)
                self._check_window(request)
                self._check_lineage(request, existing, withdrawn, named)
            except CaveatError as exc:
                decided[index] = _Refusal(index, request, exc, self._extra(index))
                continue
            refs = [*request.evidence, *([request.test] if request.test else [])]
            access = item_access((sources[e] for e in refs), world.policy.classification_levels)
            shaped.append((index, prepared, access))

        rows = self._current_rows(session, shaped)
        skills = self._skill_versions(session, shaped)
        news: list[_New] = []
        for index, prepared, access in shaped:
            try:
                d = self._decide(index, prepared, access, rows, skills)
            except CaveatError as exc:
                d = _Refusal(index, prepared.request, exc, self._extra(index))
            if isinstance(d, _Refusal) and isinstance(d.error, _HiddenConflict):
                # the audit log is every role's to read: the row names the key (as
                # its digest, which the writer's own request gives), not the row
                d = _Refusal(
                    index,
                    prepared.request,
                    Conflict(CONFLICT_MESSAGE),
                    {**d.audit_extra, "key_digest": q.key_digest(self.tenant, d.error.key)},
                )
            decided[index] = d
            if isinstance(d, _New):
                news.append(d)
        ordered = [decided[i] for i, _ in items]
        self._claim_sessions(session, news, owned)
        self._store(session, ordered, news, audit)
        return ordered

    def _shape(self, request: ItemWrite, world: World, visible: dict[str, bool]) -> PreparedItem:
        """G1-G4 (``check_shape``); the core-block writer has its own (claims._blocks)."""
        return check_shape(
            request,
            world,
            visible_evidence=visible,
            registry=self.registry,
            cache=self.cache,
            names=self.names,
        )

    def _own_sessions(
        self,
        session: Session,
        alive: list[tuple[int, ItemWrite]],
        decided: dict[int, _Decision],
    ) -> tuple[list[tuple[int, ItemWrite]], frozenset[str]]:
        """Refuse writes to a session another principal owns (model §4 "Private
        memory": a session belongs to the principal that first writes to it). The
        refusal names the anchor, never its owner. Also the sessions the writer
        already owns (an owner never changes: ``_claim_sessions`` skips them)."""
        named = sorted({r.scope.id for _, r in alive if r.scope.axis == "session"})
        owners = q.session_owners(session=session, tenant=self.tenant, ids=named)
        out = []
        for index, request in alive:
            owner = owners.get(request.scope.id) if request.scope.axis == "session" else None
            if owner is not None and owner != self.actor.id:
                exc = GateRejection(
                    "axis_not_writable",
                    f"session:{request.scope.id} is another principal's working memory; "
                    "write to a session of your own",
                    axis="session",
                    anchor=f"session:{request.scope.id}",
                )
                decided[index] = _Refusal(index, request, exc, self._extra(index))
            else:
                out.append((index, request))
        return out, frozenset(s for s, o in owners.items() if o == self.actor.id)

    def _claim_sessions(
        self, session: Session, news: Sequence[_New], owned: frozenset[str]
    ) -> None:
        """The first accepted write to a session makes the writer its owner; a
        concurrent first write by another principal replays this chunk (``_Race``),
        which then refuses it. Sessions in ``owned`` are the writer's already."""
        named = sorted(
            {
                n.prepared.request.scope.id
                for n in news
                if n.prepared.request.scope.axis == "session"
            }
            - owned
        )
        if not named:
            return
        owners = q.claim_sessions(
            session=session, tenant=self.tenant, ids=named, principal=self.actor.id, at=self.now
        )
        if any(owners.get(s) != self.actor.id for s in named):
            raise _SessionTaken("a session was claimed under this write")

    def _precheck(self, world: World, request: ItemWrite) -> None:
        self.actor.require("write")
        where = nul_path(request.model_dump(mode="json"))
        if where is not None:
            raise GateRejection(
                "text_invalid",
                f"{where}: holds a NUL byte (\\x00), which PostgreSQL text cannot store",
                attribute=where,
            )
        if world.policy.writes != "on":
            raise GateRejection(
                "writes_disabled", f"writes are {world.policy.writes} for tenant {self.tenant}"
            )
        axis = self.registry.axis(request.scope.axis)
        if axis is None:
            raise GateRejection(
                "axis_not_writable",
                f"{request.scope.axis!r} is not a registered axis type",
                axis=request.scope.axis,
            )
        if not axis.agent_writable and not self.actor.may("write_any_axis"):
            raise GateRejection(
                "axis_not_writable",
                f"agents write to {', '.join(self.registry.writable_axes())} anchors only; "
                f"{request.scope.axis!r} scope is reached through the lifecycle",
                axis=request.scope.axis,
            )
        if (
            request.scope.axis == "agent"
            and request.scope.id != self.actor.id
            and not request.scope.id.startswith(ROLLUP_AGENT_PREFIX)
            and not self.actor.may("write_any_axis")
        ):
            raise GateRejection(
                "axis_not_writable",
                f"agent:{request.scope.id} is another agent's anchor; an agent writes its "
                f"lessons to its own, agent:{self.actor.id}",
                axis="agent",
                anchor=f"agent:{request.scope.id}",
            )
        if axis.fixed_id is not None and request.scope.id != axis.fixed_id:
            raise GateRejection(
                "axis_not_writable",
                f"the {axis.name} axis has one anchor, {axis.name}:{axis.fixed_id}",
                axis=axis.name,
            )
        for facet in request.facets:
            spec = self.registry.axis(facet.axis)
            if spec is None or spec.fixed_id is not None:
                raise GateRejection(
                    "axis_not_writable",
                    f"facet {facet}: "
                    + (
                        "not a registered axis type"
                        if spec is None
                        else "a facet never widens an item's reach (reach follows its state)"
                    ),
                    axis=facet.axis,
                    facet=str(facet),
                )
        if (
            request.content_type is not None
            and request.content_type not in self.registry.content_types
        ):
            raise GateRejection(
                "content_type_unknown",
                f"content type {request.content_type!r} is not registered; known: "
                f"{', '.join(sorted(self.registry.content_types))}",
                content_type=request.content_type,
            )

    def _check_window(self, request: ItemWrite) -> None:
        start = request.valid_from or self.now
        if request.valid_to is not None and request.valid_to <= start:
            raise GateRejection(
                "valid_time_empty",
                f"valid_to {request.valid_to.isoformat()} is not after valid_from "
                f"{start.isoformat()}",
                valid_from=start.isoformat(),
                valid_to=request.valid_to.isoformat(),
            )

    def _readable(self, session: Session, ids: Sequence[int]) -> set[int]:
        """Which of ``ids`` exist as the writer sees them: its ACL lets the writer
        read the item, and ``hidden`` (redaction) does not hide it."""
        acls = q.item_acls(session=session, tenant=self.tenant, ids=ids)
        out = {i for i, r in acls.items() if Access.of(r).readable_by(self.actor)}
        if out and self.hidden is not None:
            out -= self.hidden(session, sorted(out))
        return out

    def _check_lineage(
        self,
        request: ItemWrite,
        existing: set[int],
        withdrawn: dict[int, list[tuple[int, str]]],
        readable: set[int],
    ) -> None:
        """Every ``derived_from`` id resolves as the writer sees it, and no ancestor is
        withdrawn: ``lineage_revoked`` when one is revoked, else ``lineage_refuted`` when
        one is refuted; a refusal names only ids the writer may read."""
        if not request.derived_from:
            return
        missing = sorted(set(request.derived_from) - existing)
        if missing:
            raise GateRejection(
                "not_found", f"derived_from names no item: {missing}", missing=missing
            )
        for state in ("revoked", "refuted"):
            roots = sorted(
                {
                    d
                    for d in request.derived_from
                    if any(s == state for _, s in withdrawn.get(d, ()))
                }
            )
            if not roots:
                continue
            code = f"lineage_{state}"
            hit = sorted(
                {a for d in roots for a, s in withdrawn[d] if s == state and a in readable}
            )
            detail: dict[str, Any] = {state: hit}
            message = f"derived from {state} item(s) {hit}; re-verify the lineage first"
            if not hit:  # every such ancestor is one the writer may not read: name its own ids
                detail["via"] = roots
                message = (
                    f"the lineage of item(s) {roots} holds a {state} item; "
                    "re-verify the lineage first"
                )
            raise GateRejection(code, message, **detail)

    @staticmethod
    def _key(prepared: PreparedItem, discriminator: str | None = None) -> tuple[str, ...]:
        req = prepared.request
        return (
            prepared.scope[0],
            prepared.scope[1],
            prepared.subject,
            req.attribute,
            req.kind,
            prepared.cond_key,
            prepared.evidence_key if discriminator is None else discriminator,
        )

    def _current_rows(
        self, session: Session, shaped: Sequence[tuple[int, PreparedItem, Access]]
    ) -> dict[tuple[str, ...], _Row]:
        keys = sorted(
            {
                self._key(p)
                for _, p, _ in shaped
                if not (p.request.kind == "skill" and p.request.version is None)
            }
        )
        found: dict[tuple[str, ...], _Row] = {}
        for r in q.current_by_keys(session=session, tenant=self.tenant, keys=keys):
            key = (r.scope_axis, r.scope_id, r.subject, r.attribute, r.kind, r.cond_key)
            found[(*key, r.evidence_key)] = _Row(
                int(r.id), r.object, Access.of(r), r.state, r.release_state
            )
        return found

    def _skill_versions(
        self, session: Session, shaped: Sequence[tuple[int, PreparedItem, Access]]
    ) -> dict[tuple[str, ...], tuple[int, dict[int, _Row]]]:
        """For skills written without a version: per skill, the highest version so far
        and the current row of each version (to number the next one or find a duplicate)."""
        bases = sorted(
            {
                (*self._key(p)[:4], p.cond_key)
                for _, p, _ in shaped
                if p.request.kind == "skill" and p.request.version is None
            }
        )
        out: dict[tuple[str, ...], tuple[int, dict[int, _Row]]] = {b: (0, {}) for b in bases}
        for r in q.skill_rows(session=session, tenant=self.tenant, bases=bases):
            base = (r.scope_axis, r.scope_id, r.subject, r.attribute, r.cond_key)
            top, current = out[base]
            version = int(r.version or 0)
            if r.superseded_at is None:
                current[version] = _Row(int(r.id), r.object, Access.of(r), r.state, r.release_state)
            out[base] = (max(top, version), current)
        return out

    def _decide(
        self,
        index: int,
        prepared: PreparedItem,
        access: Access,
        rows: dict[tuple[str, ...], _Row],
        skills: dict[tuple[str, ...], tuple[int, dict[int, _Row]]],
    ) -> _Decision:
        req = prepared.request
        extra = self._extra(index)
        version = req.version
        if req.kind == "skill" and version is None:
            base = (*self._key(prepared)[:4], prepared.cond_key)
            top, current = skills[base]
            if top and top in current:
                latest = current[top]
                if not latest.access.readable_by(self.actor):
                    raise _HiddenConflict(self._key(prepared, f"v{top}"))
                if latest.object == prepared.object:
                    return _Dup(index, latest, self._key(prepared, f"v{top}"), extra)
            version = top + 1
            prepared = replace(prepared, request=req.model_copy(update={"version": version}))
        key = self._key(prepared)
        cur = rows.get(key)
        if cur is not None:
            if not cur.access.readable_by(self.actor):
                raise _HiddenConflict(key)
            if cur.object == prepared.object:
                return _Dup(index, cur, key, extra)
            if req.kind == "skill" and cur.release_state in {"released", "retired"}:
                raise GateRejection(
                    "skill_version_frozen",
                    f"version {version} of this skill is {cur.release_state}; "
                    "write the change as a new version",
                    version=version,
                    release_state=cur.release_state,
                )
        new = _New(
            index,
            prepared,
            key,
            access,
            version,
            prepared.content_type,
            extra,
            supersedes=cur,
            digest=q.key_digest(self.tenant, key),
        )
        if cur is not None and cur.new is not None:
            cur.new.superseded_by = new
        row = _Row(None, prepared.object, access, "case", "draft" if req.kind == "skill" else None)
        row.new = new
        rows[key] = row
        if req.kind == "skill" and req.version is None:
            base = (*key[:4], key[5])
            top, current = skills[base]
            current[version or 0] = row
            skills[base] = (max(top, version or 0), current)
        return new

    # --- storing -----------------------------------------------------------------

    def _store(
        self,
        session: Session,
        ordered: Sequence[_Decision],
        news: Sequence[_New],
        audit: list[PendingAudit],
    ) -> None:
        """Store the chunk's new rows; its audit rows go to ``audit`` (appended by ``run``)."""
        now, actor, tenant = self.now, self.actor.id, self.tenant
        if news:
            for new, new_id in zip(
                news, q.allocate_item_ids(session=session, n=len(news)), strict=True
            ):
                new.id = new_id
        old_rows = [
            (n.supersedes.id, n.id, n.supersedes.state)
            for n in news
            if n.supersedes is not None and n.supersedes.new is None
        ]
        pairs = [
            (old_id, succ, state if state in _KEEP_STATE_WHEN_SUPERSEDED else "superseded")
            for old_id, succ, state in old_rows
            if old_id is not None and succ is not None
        ]
        superseded = q.supersede_rows(session=session, tenant=tenant, at=now, pairs=pairs)
        if len(superseded) != len(pairs):
            raise _Race("a current row changed under this write")
        items: list[tuple[Any, ...]] = []
        states: list[tuple[Any, ...]] = []
        for d in ordered:
            if isinstance(d, _Dup):
                audit.append(
                    PendingAudit(
                        actor,
                        self.actions.duplicate,
                        d.row.id if d.row.new is None else d.row.new.id,
                        "duplicate_no_change",
                        {"key_digest": q.key_digest(tenant, d.key), **d.audit_extra},
                    )
                )
            elif isinstance(d, _New):
                items.append(self._item_row(d))
                states.append(
                    (tenant, d.id, "case", None)
                    if d.superseded_by is None  # else superseded later in this batch
                    else (tenant, d.id, "superseded", "case")
                )
                old = d.supersedes
                old_id = None if old is None else (old.id if old.new is None else old.new.id)
                audit.append(
                    PendingAudit(
                        actor,
                        self.actions.accepted,
                        d.id,
                        "accepted",
                        {
                            "key_digest": d.digest,
                            "object": d.prepared.object,
                            "superseded": old_id,
                            "content_type": d.content_type,
                            **d.audit_extra,
                        },
                    )
                )
                audit.append(PendingAudit(actor, "transition", d.id, "case", _WRITTEN))
                if old is not None:
                    before = "case" if old.new is not None else old.state
                    after = before if before in _KEEP_STATE_WHEN_SUPERSEDED else "superseded"
                    audit.append(
                        PendingAudit(
                            actor,
                            self.actions.superseded,
                            old_id,
                            "superseded",
                            {"successor": d.id, **d.audit_extra},
                        )
                    )
                    if after != before:  # the state history: a transition row of its own
                        audit.append(
                            PendingAudit(
                                actor,
                                "transition",
                                old_id,
                                after,
                                {
                                    "from": before,
                                    "to": after,
                                    "reason": "superseded",
                                    "cause": {"successor": d.id},
                                },
                            )
                        )
        q.copy_rows(
            session=session,
            table="items",
            columns=q.ITEM_COPY_COLUMNS,
            rows=items,
        )
        q.copy_rows(session=session, table="item_states", columns=q.STATE_COPY_COLUMNS, rows=states)

    def _conditions_text(self, p: PreparedItem) -> str:
        text = self.json.get(p.cond_key)
        if text is None:
            text = self.json[p.cond_key] = _dumps(p.conditions_json())
        return text

    def _item_row(self, d: _New) -> tuple[Any, ...]:
        p, req = d.prepared, d.prepared.request
        later = d.superseded_by
        return (
            self.tenant,
            d.id,
            req.kind,
            p.subject,
            req.attribute,
            _dumps(p.object),
            p.required_text,
            p.excluded_text,
            self._conditions_text(p),
            p.cond_key,
            sorted(set(req.evidence)),
            d.key[6],
            sorted(set(req.derived_from)),
            req.epistemic,
            d.content_type,
            p.scope[0],
            p.scope[1],
            _dumps([{"axis": a, "id": i} for a, i in p.facets]) if p.facets else "[]",
            sorted(set(req.purposes)),
            _dumps(d.access.acl) if d.access.acl else "[]",
            req.text,
            list(p.entities),
            req.salience,
            req.valid_from or self.now,
            req.valid_to,
            self.now,
            None if later is None else self.now,
            None if later is None else later.id,
            d.version,
            "draft" if req.kind == "skill" else None,
            req.test,
            self.actor.id,
            d.access.deny,
            d.access.classification,
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
