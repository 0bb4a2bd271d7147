"""Generated recall worlds, built through the real write path and lifecycle, and a small
pure-Python reference of recall's six gates (model.md §4, §5, §6).

A world is a list of ``Row`` specs (one stored item row each) plus facts. ``build``
writes it into a fresh tenant on a fixed timeline:

| at      | what                                                                  |
|---------|-----------------------------------------------------------------------|
| T0      | every row written into its case (skills: one write per version)       |
| T0+1m   | rows headed anywhere but ``case`` promoted to ``shadow``              |
| T0+2m   | rows headed for ``verify_on_next_use`` / ``needs_reverification``      |
|         | graduated to ``active`` (their content type is ``configuration``)     |
| T0+10m  | one ``deploy`` event on every subject; a judge flags the               |
|         | ``needs_reverification`` rows, the others are judged unaffected        |
| T0+12m  | rows headed for ``active`` graduated (after the event: untouched)      |
| T0+13m  | skill versions released / retired                                     |
| T0+15m  | ``refuted`` / ``revoked`` / redacted                                  |
| T0+16m  | rewrites: same key, new object (the row becomes ``superseded``)       |
| T0+17m  | successors headed for ``active`` promoted                             |

Facts are observed at T0+5m, +20m, +28m (and +110m when the recall runs at T0+2h),
never after the recall's instant. ``Reference`` decides, from the specs alone (never
from what recall or the store answer), which rows a request may return. It uses the
project's Python evaluator only to evaluate one predicate against a snapshot that it
builds itself; the gates, their order, the ACL rule, the TTL and the
verify-on-next-use check are written out here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
import recall
from predicates import Truth, ValueType
from tests.conftest import ADMIN

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)

SUBJECTS = ("payment-api", "payments-db", "orders-db", "checkout")
#: depends_on edges (the recall widens a subjects filter over them, either direction)
EDGES = (("payment-api", "payments-db"), ("checkout", "payment-api"))
CAPS = ("c1", "c2", "c3")
EVIDENCE: dict[str, tuple[str, ...]] = {
    "E-open": (),
    "E-c1": ("c1",),
    "E-c2": ("c2",),
    "E-c12": ("c1", "c2"),
    "E-c3": ("c3",),
    # deny lists and classification levels (docs/claims.md, "Access control")
    "E-deny-reader": (),
    "E-deny-c4": ("c1",),
    "E-public": (),
    "E-confidential": (),
    "E-restricted": ("c2",),
}
#: A capability no writer holds: a reader holding it is denied ``E-deny-c4``.
DENIED_CAP = "c4"
#: Each evidence's deny list (the readers' principal is ``reader``) and level.
DENY: dict[str, tuple[str, ...]] = {
    "E-deny-reader": ("principal:reader",),
    "E-deny-c4": (f"cap:{DENIED_CAP}",),
}
LEVEL: dict[str, str] = {
    "E-public": "public",
    "E-confidential": "confidential",
    "E-restricted": "restricted",
}
#: The levels in order, as the reference knows them (the tenant's default policy).
LEVELS = ("public", "internal", "confidential", "restricted")
PURPOSES = ("incident_diagnosis", "postmortem")
CASES = ("INC-1", "INC-2")
MATCHING = "Tail latency spike; connection pool exhausted; restart restored it."
TEXTS = (
    MATCHING,
    "Connection pool saturation caused checkout latency.",
    "Disk filled on the batch host; cron cleanup freed space.",
    "Replication lag on the orders database after failover.",
)
#: matches the first two texts; NOTHING matches no text at all
QUERY_SOME = "pool latency"
MATCHED_BY_SOME = TEXTS[:2]
QUERY_NOTHING = "zyzzyva quokka"

#: attribute -> (type, content type, max_age, values observed)
ATTRIBUTES: dict[str, tuple[str, str | None, timedelta | None, tuple[Any, ...]]] = {
    "config.connection_pool.max": ("int", "configuration", None, (20, 20, 100)),
    "metrics.pool_utilisation": ("float", None, timedelta(minutes=15), (0.5, 0.95, 0.95)),
    "env.postgres.version": ("version", None, None, ("v15.4", "v15.4", "v16.2")),
    "flags.cache_enabled": ("bool", None, None, (True, True, False)),
}
PREDICATES = (
    "config.connection_pool.max eq 20",
    "config.connection_pool.max gte 50",
    "config.connection_pool.max in [20, 100]",
    "config.connection_pool.max exists",
    "metrics.pool_utilisation gte 0.8",
    "metrics.pool_utilisation lt 0.6",
    "env.postgres.version lt v16.0",
    "env.postgres.version exists",
    "flags.cache_enabled eq true",
)
FACT_TIMES = (5, 20, 28, 110)  # minutes after T0
EVENT_AT = T0 + 10 * MIN
#: model.md §6, in order; the first two are never reported by explain
GATES = (
    "tenant_scope",
    "capability",
    "activated_version",
    "purpose",
    "applicability",
    "validity_window",
)
REPORTED = GATES[2:]

#: what a row's lifecycle path leads to before its end (refute/revoke/redact/rewrite)
PATHS = ("case", "shadow", "active", "needs_reverification", "verify_on_next_use")

#: Private anchors (model §4 "Private memory") and the principal that owns each: the
#: reader's and the writer's agent anchors, and a session of each.
PRIVATE: dict[str, str] = {
    "agent:reader": "reader",
    "agent:writer": "writer",
    "session:S-r": "reader",
    "session:S-w": "writer",
}
SESSIONS = ("S-r", "S-w")


@dataclass(frozen=True)
class Row:
    """One stored row to build. Skills share ``family`` across their versions."""

    kind: str  # fact | skill
    subject: str
    case: str
    required: tuple[str, ...]
    excluded: tuple[str, ...]
    evidence: tuple[str, ...]
    purposes: tuple[str, ...]
    text: str
    content_type: str
    valid_from: int | None  # minutes after T0; None: when written
    valid_to: int | None
    path: str  # one of PATHS
    end: str | None = None  # refuted | revoked | redacted
    rewrite: str | None = None  # None, or the successor's state: case | active
    release: str | None = None  # skills: draft | released | retired
    family: int | None = None  # skills: versions of one skill share it
    #: a private anchor (``PRIVATE``) instead of ``case:<case>``, written by its owner
    anchor: str | None = None


@dataclass(frozen=True)
class Doc:
    """One knowledge document (model §6) of one passage, imported at T0 with its access;
    ``end`` withdraws it at T0+15m (``superseded``, ``revoked`` or ``redacted``)."""

    readers: tuple[str, ...]
    deny: tuple[str, ...]
    classification: str | None
    purposes: tuple[str, ...]
    text: str
    end: str | None = None


@dataclass(frozen=True)
class Fact:
    subject: str
    attribute: str
    value: Any
    minute: int


@dataclass(frozen=True)
class Request:
    """A recall request and who makes it."""

    admin: bool
    caps: tuple[str, ...]
    subjects: tuple[str, ...] | None
    purpose: str | None
    case_id: str | None
    inline: tuple[tuple[str, str, Any], ...]
    clearance: str = "internal"
    session: str | None = None
    sources: tuple[str, ...] = ("memory",)

    @property
    def principal(self) -> str:
        return "admin-1" if self.admin else "reader"

    def actor(self) -> claims.Actor:
        return claims.Actor(
            "admin-1" if self.admin else "reader",
            "admin" if self.admin else "agent",
            frozenset(self.caps),
            clearance=self.clearance,
        )

    def recall_request(self, query: str, limit: int) -> recall.RecallRequest:
        return recall.RecallRequest(
            query=query,
            subjects=None if self.subjects is None else list(self.subjects),
            purpose=self.purpose,
            case_id=self.case_id,
            observations=[factgen.Observation(s, a, v, "inline") for s, a, v in self.inline],
            limit=limit,
            explain=True,
            session=self.session,
            sources=self.sources,  # type: ignore[arg-type]
        )


@dataclass
class RefItem:
    """What the reference knows of one stored row: only what the test wrote."""

    id: int
    tenant: str
    row: Row
    subject: str
    required: tuple[str, ...]
    excluded: tuple[str, ...]
    acl: tuple[tuple[str, ...], ...]
    valid_from: datetime
    valid_to: datetime | None
    state: str
    release_state: str | None
    superseded: bool
    redacted: bool
    activated_at: datetime | None
    successor: bool = False
    written_at: datetime = T0


@dataclass
class Built:
    tenant: str
    now: datetime
    items: dict[int, RefItem] = field(default_factory=dict)
    #: knowledge passages by id, with the spec of their document
    passages: dict[int, Doc] = field(default_factory=dict)


# --- the tenant ---------------------------------------------------------------------

WRITER = claims.Actor("writer", "agent", frozenset(CAPS), clearance="restricted")
#: The reader, writing its own private items (its requests carry their own capabilities).
READER = claims.Actor("reader", "agent", frozenset(CAPS), clearance="restricted")
SME = claims.Actor("sme", "sme", frozenset(CAPS), clearance="restricted")


def setup_tenant(sessions: sessionmaker[Session], tenant: str) -> None:
    """Schema, entities and topology, principals, evidence and the two open cases."""
    with sessions.begin() as s:
        factgen.ensure_tenant(actor=ADMIN, session=s, tenant=tenant, now=T0)
        for actor in (WRITER, SME):
            claims.register_principal(
                actor=ADMIN,
                session=s,
                tenant=tenant,
                principal=actor.id,
                role=actor.role,
                capabilities=sorted(actor.capabilities),
                clearance=actor.clearance,
            )
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=tenant,
            specs=[
                factgen.AttributeSpec(
                    name, ValueType.parse(vtype), max_age=max_age, content_type=content_type
                )
                for name, (vtype, content_type, max_age, _) in ATTRIBUTES.items()
            ],
        )
        world = factgen.load_world(session=s, tenant=tenant)
        factgen.import_entities(
            actor=ADMIN,
            session=s,
            world=world,
            entities=[
                factgen.EntitySpec(
                    name,
                    "service",
                    (),
                    tuple(("depends_on", b) for a, b in EDGES if a == name),
                )
                for name in reversed(SUBJECTS)  # targets of an edge first
            ],
        )
        for eid, readers in EVIDENCE.items():
            claims.register_evidence(
                session=s,
                tenant=tenant,
                evidence_id=eid,
                actor=SME,
                now=T0,
                readers=readers,
                deny=DENY.get(eid, ()),
                classification=LEVEL.get(eid),
            )
        claims.register_evidence(
            session=s, tenant=tenant, evidence_id="T-pass", actor=SME, now=T0,
            test_outcome="passed",
        )  # fmt: skip
        for case in CASES:
            lifecycle.open_case(
                session=s, tenant=tenant, case_id=case, subjects=[SUBJECTS[0]], actor=WRITER,
                now=T0,
            )  # fmt: skip


def _request(row: Row, attribute: str, obj: Any) -> claims.ItemWrite:
    body: dict[str, Any] = {
        "kind": row.kind,
        "subject": row.subject,
        "attribute": attribute,
        "object": obj,
        "required": list(row.required),
        "excluded": list(row.excluded),
        "evidence": list(row.evidence),
        "purposes": list(row.purposes),
        "scope": row.anchor or {"axis": "case", "id": row.case},
        "text": row.text,
        "content_type": row.content_type,
        "valid_from": None if row.valid_from is None else (T0 + row.valid_from * MIN).isoformat(),
        "valid_to": None if row.valid_to is None else (T0 + row.valid_to * MIN).isoformat(),
    }
    if row.kind == "skill":
        body["test"] = "T-pass"
    return claims.ItemWrite.model_validate(body)


def _write(
    sessions: sessionmaker[Session],
    tenant: str,
    requests: Sequence[claims.ItemWrite],
    at: datetime,
) -> list[claims.ItemOutcome]:
    """One batch per writer through the write path (the gate, the case guard,
    supersession): a private item by the principal that owns its anchor, the rest by
    ``WRITER``; the outcomes in request order."""
    by_writer: dict[str, list[int]] = {}
    for n, r in enumerate(requests):
        by_writer.setdefault(PRIVATE.get(str(r.scope), WRITER.id), []).append(n)
    out: dict[int, claims.ItemOutcome] = {}
    for who, ns in by_writer.items():
        batch = [requests[n] for n in ns]
        done = lifecycle.write_batch(
            sessions=sessions,
            tenant=tenant,
            requests=batch,
            actor=READER if who == READER.id else WRITER,
            now=at,
        ).outcomes
        for o in done:
            assert o.outcome == "accepted", (batch[o.index], o)
            out[ns[o.index]] = o
    return [out[n] for n in range(len(requests))]


def _promote(s: Session, tenant: str, item_id: int, to: str, at: datetime) -> None:
    lifecycle.promote(session=s, tenant=tenant, item_id=item_id, to=to, actor=SME, now=at)  # type: ignore[arg-type]


#: When a document's ``end`` withdraws its passage.
DOC_END = T0 + 15 * MIN


def build_docs(sessions: sessionmaker[Session], built: Built, docs: Sequence[Doc]) -> None:
    """The documents, one passage each (heading ``Runbook <n>``, which no query matches),
    as the import stores them; their withdrawals at ``DOC_END``."""
    from tests.recall.knowledge import Section, add_document, withdraw

    with sessions.begin() as s:
        for n, doc in enumerate(docs):
            [pid] = add_document(
                s,
                built.tenant,
                f"doc-{n}",
                [Section((f"Runbook {n}",), f"runbook-{n}", doc.text)],
                at=T0,
                readers=doc.readers,
                deny=doc.deny,
                classification=doc.classification,
                purposes=doc.purposes,
            )
            if doc.end is not None:
                withdraw(s, built.tenant, f"doc-{n}", doc.end, DOC_END)
            built.passages[pid] = doc


def build(
    sessions: sessionmaker[Session],
    tenant: str,
    rows: Sequence[Row],
    facts: Sequence[Fact],
    now: datetime,
    docs: Sequence[Doc] = (),
) -> Built:
    """Write the world through the write path and the lifecycle; see the module docstring."""
    setup_tenant(sessions, tenant)
    built = Built(tenant, now)
    build_docs(sessions, built, docs)
    ids: list[int] = []
    written = _write(
        sessions,
        tenant,
        [
            _request(row, f"restart_procedure_{row.family}", f"runbook step {n}")
            if row.kind == "skill"
            else _request(row, f"seen_{n}", n)
            for n, row in enumerate(rows)
        ],
        T0,
    )
    for row, res in zip(rows, written, strict=True):
        assert res.item_id is not None
        ids.append(res.item_id)
        built.items[res.item_id] = RefItem(
            id=res.item_id,
            tenant=tenant,
            row=row,
            subject=row.subject,
            required=row.required,
            excluded=row.excluded,
            acl=_acl(row.evidence),
            valid_from=T0 if row.valid_from is None else T0 + row.valid_from * MIN,
            valid_to=None if row.valid_to is None else T0 + row.valid_to * MIN,
            state="case",
            release_state="draft" if row.kind == "skill" else None,
            superseded=False,
            redacted=False,
            activated_at=None,
        )
    pairs = list(zip(ids, rows, strict=True))
    with sessions.begin() as s:
        for i, row in pairs:
            if row.path != "case":
                _promote(s, tenant, i, "shadow", T0 + MIN)
                built.items[i].state = "shadow"
    early = [(i, r) for i, r in pairs if r.path in ("needs_reverification", "verify_on_next_use")]
    with sessions.begin() as s:
        for i, _ in early:
            _promote(s, tenant, i, "active", T0 + 2 * MIN)
    if early:
        flagged = {i for i, r in early if r.path == "needs_reverification"}

        def judge(
            event: factgen.Event, items: Sequence[claims.ItemRecord]
        ) -> dict[int, lifecycle.Verdict]:
            return {it.id: lifecycle.Verdict(it.id in flagged, "test") for it in items}

        with sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=tenant)
            event = factgen.record_event(
                actor=ADMIN,
                session=s,
                world=world,
                type="deploy",
                subjects=list(SUBJECTS),
                occurred_at=EVENT_AT,
                now=EVENT_AT,
            )
            out = lifecycle.handle_event(
                session=s, tenant=tenant, event=event, now=EVENT_AT, judge=judge
            )
        assert set(out.affected) == flagged, out
        assert set(out.unaffected) == {i for i, _ in early} - flagged, out
        for i, r in early:
            built.items[i].state = r.path
            built.items[i].activated_at = T0 + 2 * MIN
    with sessions.begin() as s:
        for i, row in pairs:
            if row.path == "active":
                _promote(s, tenant, i, "active", T0 + 12 * MIN)
                built.items[i].state = "active"
                built.items[i].activated_at = T0 + 12 * MIN
    at = T0 + 13 * MIN
    with sessions.begin() as s:
        for i, row in pairs:
            if row.release == "released":
                claims.release_skill(session=s, tenant=tenant, item_id=i, actor=SME, now=at)
            elif row.release == "retired":
                claims.retire_skill(session=s, tenant=tenant, item_id=i, actor=SME, now=at)
            if row.release is not None:
                built.items[i].release_state = row.release
    at = T0 + 15 * MIN
    with sessions.begin() as s:
        for i, row in pairs:
            if row.end == "refuted":
                lifecycle.refute(session=s, tenant=tenant, item_id=i, reason="x", actor=SME, now=at)
                built.items[i].state = "refuted"
            elif row.end == "revoked":
                lifecycle.revoke(session=s, tenant=tenant, item_id=i, reason="x", actor=SME, now=at)
                built.items[i].state = "revoked"
            elif row.end == "redacted":
                lifecycle.redact(session=s, tenant=tenant, item_id=i, reason="x", actor=SME, now=at)
                built.items[i].redacted = True
    at = T0 + 16 * MIN
    successors: list[tuple[int, Row]] = []
    rewrites = [(n, i, row) for n, (i, row) in enumerate(pairs) if row.rewrite is not None]
    written = _write(
        sessions, tenant, [_request(r, f"seen_{n}", n + 1000) for n, _, r in rewrites], at
    )
    for (_, i, row), res in zip(rewrites, written, strict=True):
        assert res.item_id is not None and res.superseded == i, (row, res)
        old = built.items[i]
        old.superseded = True
        if old.state not in ("revoked", "refuted"):
            old.state = "superseded"
        built.items[res.item_id] = RefItem(
            id=res.item_id,
            tenant=tenant,
            row=row,
            subject=row.subject,
            required=row.required,
            excluded=row.excluded,
            acl=_acl(row.evidence),
            valid_from=at if row.valid_from is None else T0 + row.valid_from * MIN,
            valid_to=old.valid_to,
            state="case",
            release_state=None,
            superseded=False,
            redacted=False,
            activated_at=None,
            successor=True,
            written_at=at,
        )
        successors.append((res.item_id, row))
    at = T0 + 17 * MIN
    with sessions.begin() as s:
        for i, row in successors:
            if row.rewrite == "active":
                _promote(s, tenant, i, "shadow", at)
                _promote(s, tenant, i, "active", at)
                built.items[i].state = "active"
                built.items[i].activated_at = at
    for minute, group in itertools.groupby(
        sorted(facts, key=lambda f: f.minute), key=lambda f: f.minute
    ):
        with sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=tenant)
            factgen.observe(
                actor=ADMIN,
                session=s,
                world=world,
                observations=[
                    factgen.Observation(f.subject, f.attribute, f.value, "test") for f in group
                ],
                observed_at=T0 + minute * MIN,
                now=T0 + minute * MIN,
            )
    _check_states(sessions, built)
    return built


def _acl(evidence: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """A reader must be able to read every evidence source; unrestricted ones add nothing."""
    return tuple(EVIDENCE[e] for e in evidence if EVIDENCE[e])


def _check_states(sessions: sessionmaker[Session], built: Built) -> None:
    """The world is what the specs meant (a check of this builder, not of recall)."""
    with sessions.begin() as s:
        rows = s.execute(
            sa.text(
                "SELECT i.id, st.state, i.release_state, i.superseded_at IS NOT NULL AS sup "
                "FROM items i JOIN item_states st ON st.tenant_id = i.tenant_id "
                "AND st.item_id = i.id WHERE i.tenant_id = :t"
            ),
            {"t": built.tenant},
        ).all()
    got = {int(r.id): (r.state, r.release_state, r.sup) for r in rows}
    want = {i: (it.state, it.release_state, it.superseded) for i, it in built.items.items()}
    assert got == want


# --- the reference ------------------------------------------------------------------


def neighbourhood(subjects: Sequence[str]) -> set[str]:
    """The subjects and their neighbours one hop away, either direction (policy depth 1)."""
    out = set(subjects)
    for a, b in EDGES:
        if a in subjects:
            out.add(b)
        if b in subjects:
            out.add(a)
    return out


@dataclass(frozen=True)
class _Conditioned:
    """What the predicate evaluator reads of an item."""

    subject: str
    required: tuple[str, ...]
    excluded: tuple[str, ...]


@dataclass
class Verdict:
    """The reference's answer for one item and one request."""

    gates: dict[str, bool]
    check: bool | None  # verify-on-next-use check (None: not a verify-on-next-use item)
    values: dict[str, str]  # condition -> TRUE/FALSE/UNKNOWN, on the full snapshot

    @property
    def first_failing(self) -> str | None:
        for gate in GATES:
            if not self.gates[gate]:
                return gate
        if self.check is False:
            return "activated_version"  # withheld for its state: its check failed
        return None

    @property
    def admissible(self) -> bool:
        return self.first_failing is None

    @property
    def visible(self) -> bool:
        return self.gates["tenant_scope"] and self.gates["capability"]


class Reference:
    """The six gates of model §6 over the specs, for one tenant, at one instant."""

    def __init__(
        self,
        world: factgen.World,
        built: Built,
        facts: Sequence[Fact],
        ttl: timedelta,
    ) -> None:
        self.world = world
        self.built = built
        self.now = built.now
        self.ttl = ttl
        latest: dict[tuple[str, str], Fact] = {}
        for f in facts:
            if T0 + f.minute * MIN > self.now:
                continue
            key = (f.subject, f.attribute)
            if key not in latest or latest[key].minute < f.minute:
                latest[key] = f
        self.stored = latest

    def snapshot(self, request: Request) -> factgen.Snapshot:
        """Latest observation per (subject, attribute) by now, if within max_age; inline on top."""
        snap = factgen.Snapshot(at=self.now)
        for (subject, attribute), f in self.stored.items():
            observed_at = T0 + f.minute * MIN
            max_age = ATTRIBUTES[attribute][2]
            if max_age is not None and self.now - observed_at > max_age:
                continue
            snap.entries[(subject, attribute)] = self._entry(f, observed_at, inline=False)
        for subject, attribute, value in request.inline:
            snap.entries[(subject, attribute)] = self._entry(
                Fact(subject, attribute, value, 0), self.now, inline=True
            )
        return snap

    def _entry(self, f: Fact, at: datetime, inline: bool) -> factgen.SnapshotEntry:
        [typed] = factgen.type_observations(
            self.world, [factgen.Observation(f.subject, f.attribute, f.value)], at
        )
        return factgen.SnapshotEntry(
            typed.subject, typed.attribute, typed.value, typed.vtype, at, None, inline
        )

    def private_visible(self, item: RefItem, request: Request) -> bool:
        """Another principal's working memory is hidden (never mentioned); the operator
        sees it."""
        anchor = item.row.anchor or ""
        return (
            not anchor.startswith("session:")
            or request.admin
            or PRIVATE[anchor] == request.principal
        )

    def admits_case_state(self, item: RefItem, request: Request) -> bool:
        """A ``case`` item admitted without promotion: its own case, the caller's agent
        anchor, or the caller's own session's working memory within its TTL."""
        anchor = item.row.anchor
        if anchor is None:
            return item.row.case == request.case_id
        axis, ident = anchor.split(":", 1)
        if axis == "agent":
            return ident == request.principal
        return (
            ident == request.session
            and PRIVATE[anchor] == request.principal
            and self.now < item.written_at + self.world.policy.working_memory_ttl
        )

    def effective(self, item: RefItem) -> tuple[str, datetime | None]:
        """The state recall must act on, and since when a verify-on-next-use check looks."""
        if item.state == "verify_on_next_use":
            return item.state, EVENT_AT
        if (
            item.state == "active"
            and item.row.content_type == "permission_refusal"
            and item.activated_at is not None
            and item.activated_at + self.ttl <= self.now
        ):  # the secondary TTL ran out: it reads as expired at once (model §6)
            return "verify_on_next_use", item.activated_at + self.ttl
        return item.state, None

    def verdict(
        self, item: RefItem, tenant: str, request: Request, snapshot: factgen.Snapshot
    ) -> Verdict:
        caps = set(request.caps)
        state, since = self.effective(item)
        values = lifecycle.condition_values(
            _Conditioned(item.subject, item.required, item.excluded),  # type: ignore[arg-type]
            self.world,
            snapshot,
        )
        gates = {
            "tenant_scope": item.tenant == tenant,
            # redaction hides like the ACL: before anything is ranked, never reported
            "capability": (
                request.admin
                or (
                    _cleared(item, request)
                    and _not_denied(item, request)
                    and all(caps & set(r) for r in item.acl)
                )
            )
            and not item.redacted
            and self.private_visible(item, request),
            "activated_version": not item.superseded
            and (item.row.kind != "skill" or item.release_state == "released")
            and (
                state in ("active", "verify_on_next_use")
                or (state == "case" and self.admits_case_state(item, request))
                # the caller's own lesson in shadow stays its own (promotion started)
                or (state == "shadow" and item.row.anchor == f"agent:{request.principal}")
            ),
            "purpose": not item.row.purposes
            or (request.purpose is not None and request.purpose in item.row.purposes),
            "applicability": all(
                v.value is (Truth.TRUE if v.list == "required" else Truth.FALSE) for v in values
            ),
            "validity_window": item.valid_from <= self.now
            and (item.valid_to is None or self.now < item.valid_to),
        }
        check = None
        if state == "verify_on_next_use" and since is not None:
            # model §4.3: against observations made since the event (inline ones are made now)
            recent = factgen.Snapshot(
                at=snapshot.at,
                entries={
                    k: e for k, e in snapshot.entries.items() if e.inline or e.observed_at >= since
                },
            )
            check = all(
                v.value is (Truth.TRUE if v.list == "required" else Truth.FALSE)
                for v in lifecycle.condition_values(
                    _Conditioned(item.subject, item.required, item.excluded),  # type: ignore[arg-type]
                    self.world,
                    recent,
                )
            )
        return Verdict(gates, check, {v.condition: v.value.name for v in values})

    def passage(self, doc: Doc, request: Request) -> str | None:
        """A passage's gates (model §6 "Knowledge beside memory"), written out: ``hidden``
        when the caller may not know it (its readers, deny list or level, as an item's
        evidence; withdrawn by now; redacted), ``purpose`` when the purpose gate withholds
        it, None when a recall may return it. No applicability: it states no
        conditions."""
        names = {f"principal:{request.principal}", *(f"cap:{c}" for c in request.caps)}
        level = 0 if doc.classification is None else LEVELS.index(doc.classification)
        readable = request.admin or (
            not names & set(doc.deny)
            and level <= LEVELS.index(request.clearance)
            and (not doc.readers or bool(set(request.caps) & set(doc.readers)))
        )
        withdrawn = doc.end is not None and self.now >= DOC_END
        if not readable or withdrawn or doc.end == "redacted":
            return "hidden"
        if doc.purposes and request.purpose not in doc.purposes:
            return "purpose"
        return None

    def in_scope(self, item: RefItem, request: Request) -> bool:
        """The request's subjects filter (not a gate: it decides what is asked)."""
        return request.subjects is None or item.subject in neighbourhood(request.subjects)


def _not_denied(item: RefItem, request: Request) -> bool:
    """No deny entry of the item's evidence names the reader or one of its capabilities."""
    names = {"principal:reader", *(f"cap:{c}" for c in request.caps)}
    return not any(d in names for e in item.row.evidence for d in DENY.get(e, ()))


def _cleared(item: RefItem, request: Request) -> bool:
    """The reader's clearance reaches the strictest level of the item's evidence
    (unclassified: the lowest)."""
    top = max((LEVELS.index(LEVEL[e]) for e in item.row.evidence if e in LEVEL), default=0)
    return top <= LEVELS.index(request.clearance)
