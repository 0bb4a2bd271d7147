"""What an SME reads before deciding (docs/sme.md): the re-opened items, one item's dossier,
and what an action would do before it is done.

Every read here shows only what the actor may read (model §5): an item the
actor may not read is left out of every list and every lineage, and never
counted; an unreadable or redacted item is ``not_found``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from claims import (
    DOCUMENT_REF_PREFIX,
    Access,
    Actor,
    AuditEntryRecord,
    ItemRecord,
    audit_entries,
    get_document,
    record_from_row,
)
from factgen import Snapshot, World, build_snapshot
from lifecycle import _queries as q
from lifecycle._access import readable_ids, visible_item
from lifecycle._actions import promoted_state, verified_state
from lifecycle._citations import Enforcement, binding, enforcement_of
from lifecycle._conditions import ConditionValue, _parsed, condition_values
from lifecycle._confidence import confidence_of_item
from lifecycle._forgetting import plan_forget
from lifecycle._lineage import Lineage, LineageNode, lineage
from lifecycle._states import CIRCULATING, State, decide
from predicates import Truth, duration_literal
from predicates.errors import (
    CaveatError,
    InputError,
    NotFound,
)

__all__ = [
    "OUTCOMES",
    "SME_ACTIONS",
    "ActionPreview",
    "Awaiting",
    "CitationRow",
    "ConditionNow",
    "Dossier",
    "EvidenceLinkRow",
    "EvidenceSource",
    "FalseNow",
    "Refusal",
    "RefusalGroup",
    "Reopened",
    "TransitionRow",
    "audit_as_seen",
    "available_actions",
    "awaiting_outcome",
    "dossier",
    "false_now",
    "preview_action",
    "refusal_groups",
    "reopened",
    "transitions_between",
]

#: The SME's actions on one item, in the order a page offers them, with the role-table
#: entry each one needs.
SME_ACTIONS: dict[str, str] = {
    "verify": "verify",
    "promote": "promote",  # case -> shadow
    "graduate": "promote",  # shadow -> active
    "drop": "drop",
    "refute": "refute",
    "revoke": "revoke",
    "redact": "redact",
    "forget": "forget",  # real erasure: admins only (the role table)
}


@dataclass(frozen=True)
class Reopened:
    """An item waiting for an SME: re-opened, or to be checked on its next use, and why."""

    item_id: int
    subject: str
    attribute: str
    text: str | None
    state: str
    at: datetime | None
    actor: str | None
    reason: str | None
    cause: dict[str, Any]
    check_since: datetime | None  # verify_on_next_use: observations after this count


def reopened(*, session: Session, tenant: str, actor: Actor) -> list[Reopened]:
    """Items in ``needs_reverification`` or ``verify_on_next_use`` that ``actor`` may read,
    newest first, each with the transition (event, check, revocation) behind it."""
    rows = [
        r
        for r in q.reopened_items(session=session, tenant=tenant, gate=actor.gate_params())
        if Access.of(r).readable_by(actor)
    ]
    since = q.pending_checks(
        session=session,
        tenant=tenant,
        ids=[int(r.id) for r in rows if r.state == State.VERIFY_ON_NEXT_USE],
    )
    return [
        Reopened(
            int(r.id),
            r.subject,
            r.attribute,
            r.text,
            str(r.state),
            r.at,
            r.actor,
            r.reason,
            dict(r.cause or {}),
            since.get(int(r.id)),
        )
        for r in rows
    ]


#: The outcomes a case closes with.
OUTCOMES = ("confirmed", "rejected")


@dataclass(frozen=True)
class Awaiting:
    """An open case whose incident its sender reported over without saying how (a
    PagerDuty ``incident.resolved`` without an outcome, model §2.2): since when, who
    reported it, its subjects, the items it cited that the reader may read, and the
    outcomes the reader may close it with (none when its role may not close a case)."""

    case_id: str
    subjects: tuple[str, ...]
    opened_at: datetime
    since: datetime
    reported_by: str
    cited: tuple[int, ...]
    close_as: tuple[str, ...]


def awaiting_outcome(*, session: Session, tenant: str, actor: Actor) -> list[Awaiting]:
    """The open cases waiting for their outcome, the oldest report first; a case closed
    since is not among them. Cited items are those ``actor`` may read, unredacted."""
    actor.require("read")
    rows = q.awaiting_outcome(session=session, tenant=tenant)
    cited: dict[str, list[int]] = {}
    for r in q.cited_items(
        session=session,
        tenant=tenant,
        case_ids=[str(r.id) for r in rows],
        gate=actor.gate_params(),
    ):
        if Access.of(r).readable_by(actor):
            cited.setdefault(str(r.case_id), []).append(int(r.item_id))
    close_as = OUTCOMES if actor.may("close_case") else ()
    return [
        Awaiting(
            str(r.id),
            tuple(r.subjects),
            r.opened_at,
            r.reported_at,
            str(r.reported_by),
            tuple(cited.get(str(r.id), ())),
            close_as,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class ConditionNow:
    """One condition's value now, the observation behind it and its age, and for an UNKNOWN
    value what to observe to decide it."""

    value: ConditionValue
    age: timedelta | None
    declared: bool
    max_age: timedelta | None

    @property
    def to_observe(self) -> str | None:
        """For UNKNOWN: the observation that would decide it (None when decided)."""
        if self.value.value is not Truth.UNKNOWN:
            return None
        where = f"{self.value.attribute} of {self.value.subject}"
        if not self.declared:
            return f"declare {self.value.attribute} in the schema, then observe {where}"
        if self.max_age is not None:
            return f"observe {where} (an observation counts for {duration_literal(self.max_age)})"
        return f"observe {where}"

    @property
    def against(self) -> bool:
        """Whether this value keeps the item out of recall for certain: a required
        condition FALSE or an excluded one TRUE (an UNKNOWN is not decided)."""
        return self.value.value is (Truth.FALSE if self.value.list == "required" else Truth.TRUE)

    @property
    def to_decide(self) -> str:
        """For a condition that keeps the item out: what would let the item back in."""
        where = f"{self.value.attribute} of {self.value.subject}"
        want = "true" if self.value.list == "required" else "false"
        return f"an observation of {where} on which {self.value.condition} is {want}"


def _conditions_now(
    item: ItemRecord, world: World, snapshot: Snapshot, now: datetime
) -> tuple[ConditionNow, ...]:
    out = []
    for value in condition_values(item, world, snapshot):
        spec = world.schema.get(value.attribute)
        age = None if value.observed is None else now - value.observed.observed_at
        max_age = None if spec is None else spec.max_age
        out.append(ConditionNow(value, age, spec is not None, max_age))
    return tuple(out)


def _false_now(item: ItemRecord, conditions: Sequence[ConditionNow]) -> tuple[ConditionNow, ...]:
    if item.state != State.ACTIVE:
        return ()
    return tuple(c for c in conditions if c.against)


@dataclass(frozen=True)
class FalseNow:
    """An active item whose conditions are false now, so that recall does not return it
    (it keeps its state: a condition can hold again), with the conditions that decide it
    and the observation behind each."""

    item_id: int
    subject: str
    attribute: str
    text: str | None
    at: datetime  # the instant the conditions were evaluated at
    conditions: tuple[ConditionNow, ...]


def false_now(
    *, session: Session, tenant: str, actor: Actor, world: World, now: datetime
) -> list[FalseNow]:
    """The active items ``actor`` may read whose conditions are false on what is observed
    ``now`` (a required condition FALSE or an excluded one TRUE), by subject."""
    actor.require("read")
    items = [
        record_from_row(r)
        for r in q.conditioned_active_items(session=session, tenant=tenant)
        if Access.of(r).readable_by(actor)
    ]
    if not items:
        return []
    subjects = sorted({s for i in items for s in _subjects(i)})
    snapshot = build_snapshot(session=session, world=world, subjects=subjects, at=now, current=True)
    out = []
    for item in items:
        against = _false_now(item, _conditions_now(item, world, snapshot, now))
        if against:
            out.append(FalseNow(item.id, item.subject, item.attribute, item.text, now, against))
    return out


@dataclass(frozen=True)
class CitedPassage:
    """A knowledge passage an item cites as evidence (``doc:<id>#<fragment>``; model §6),
    as the reader may read it now: its document, version, heading path, text and URI."""

    ref: str
    document_id: str
    title: str | None
    version: int
    heading_path: tuple[str, ...]
    text: str
    uri: str | None


@dataclass(frozen=True)
class EvidenceSource:
    """One evidence reference of the item and what the store knows of it; for a
    knowledge passage's ref, the passage (when the reader may read it)."""

    id: str
    title: str | None
    uri: str | None
    restricted: bool  # readable only with a capability
    test_outcome: str | None
    passage: CitedPassage | None = None


def cited_passages(
    *, session: Session, tenant: str, actor: Actor, refs: Sequence[str]
) -> dict[str, CitedPassage]:
    """The knowledge passages among evidence ``refs`` that ``actor`` may read, by ref: the
    current version's passage under that fragment (``claims.get_document``: a document
    its access excludes the reader from, a redacted or revoked one, cites nothing)."""
    by_document: dict[str, dict[str, str]] = {}  # document id -> fragment -> ref
    for ref in refs:
        if ref.startswith(DOCUMENT_REF_PREFIX) and "#" in ref:
            document_id, fragment = ref[len(DOCUMENT_REF_PREFIX) :].rsplit("#", 1)
            by_document.setdefault(document_id, {})[fragment] = ref
    out: dict[str, CitedPassage] = {}
    for document_id, wanted in by_document.items():  # each document read once
        try:
            detail = get_document(
                session=session, tenant=tenant, actor=actor, document_id=document_id
            )
        except NotFound:
            continue
        for p in detail.passages:
            if p.fragment in wanted:
                ref = wanted[p.fragment]
                out[ref] = CitedPassage(
                    ref,
                    document_id,
                    detail.document.title,
                    p.document_version,
                    p.heading_path,
                    p.text,
                    p.uri,
                )
    return out


@dataclass(frozen=True)
class EvidenceLinkRow:
    """Evidence attached for or against the item, with its strength."""

    evidence_id: str
    stance: str
    strength: float
    source_kind: str
    at: datetime
    actor: str


@dataclass(frozen=True)
class CitationRow:
    """A case that cited the item: influence, compliance and the signal its close gave."""

    case_id: str
    influence: str
    compliance: str | None
    cited_at: datetime
    cited_by: str
    signal: str | None
    expected: Any = None
    observed: Any = None
    rationale: str | None = None


@dataclass(frozen=True)
class Dossier:
    """Everything an SME reads about one item before acting on it."""

    item: ItemRecord
    at: datetime
    conditions: tuple[ConditionNow, ...]
    evidence: tuple[EvidenceSource, ...]
    links: tuple[EvidenceLinkRow, ...]
    confidence: float
    citations: tuple[CitationRow, ...]
    lineage: Lineage
    history: tuple[AuditEntryRecord, ...]
    actions: tuple[str, ...]  # the SME actions the actor may take on it now
    # a skill's enforcement level as set (None: advisory, never set) and whether it binds
    enforcement: Enforcement | None = None
    binding: bool | None = None

    @property
    def false_now(self) -> tuple[ConditionNow, ...]:
        """For an active item, the conditions false now that keep recall from returning
        it (a required one FALSE, an excluded one TRUE); empty otherwise."""
        return _false_now(self.item, self.conditions)


def _subjects(item: ItemRecord) -> list[str]:
    named = {_parsed(c).attribute.entity for c in (*item.required, *item.excluded)}
    return sorted({item.subject} | {e for e in named if e})


#: The cause keys of a transition that name another item, and what the reason says
#: instead to a reader who may not read that item: a re-opening by a withdrawn
#: ancestor (``lifecycle._bulk``), an archive by a rollup (``lifecycle._forgetting``).
_ITEM_CAUSES = {
    "revoked": "an ancestor was revoked",
    "refuted": "an ancestor was refuted",
    "rollup": "rolled up into an item",
}


def _item_cause(row: AuditEntryRecord) -> tuple[str, int] | None:
    """``(how, item)`` when ``row``'s cause names another item: an ancestor revoked or
    refuted, a rollup its episode was rolled up into."""
    cause = row.detail.get("cause")
    if not isinstance(cause, dict):
        return None
    for how in _ITEM_CAUSES:
        if isinstance(cause.get(how), int):
            return how, int(cause[how])
    return None


def _scrubbed(row: AuditEntryRecord, readable: set[int]) -> AuditEntryRecord:
    """A history row that names no item the reader may not read: a re-opening caused by
    the revocation (or refutation) of an ancestor, or an archive by a rollup into an
    item, the reader may not read (restricted, redacted, forgotten) says only that."""
    named = _item_cause(row)
    if named is None or named[1] in readable:
        return row
    detail = {**row.detail, "reason": _ITEM_CAUSES[named[0]], "cause": {}}
    return replace(row, detail=detail)


def audit_as_seen(
    *, session: Session, tenant: str, actor: Actor, rows: Sequence[AuditEntryRecord]
) -> list[AuditEntryRecord]:
    """Audit rows (already those ``actor`` may list) naming no item it may not read: a
    re-opening caused by the revocation or refutation of an ancestor, or an archive by
    a rollup into an item, it may not read says only that, and the counts of an event's
    fan-out or of an erasure are left out."""
    if actor.role == "admin":
        return list(rows)
    causes = {w[1] for r in rows if (w := _item_cause(r)) is not None}
    readable = set(readable_ids(session=session, tenant=tenant, actor=actor, ids=causes))
    return [_uncounted(_scrubbed(r, readable)) for r in rows]


#: Rows that sum up many items (an event's fan-out, an erasure): their counts include
#: items the reader may not read, so a reader who is not the operator is not given them
#: (its own listing shows the rows about the items it may read).
_COUNTS = {"event": ("matched", "affected", "verify_on_next_use"), "forget": ("items",)}


def _uncounted(row: AuditEntryRecord) -> AuditEntryRecord:
    drop = _COUNTS.get(row.action, ())
    if not any(k in row.detail for k in drop):
        return row
    return replace(row, detail={k: v for k, v in row.detail.items() if k not in drop})


def _readable_cases(
    session: Session, tenant: str, actor: Actor, rows: Sequence[AuditEntryRecord]
) -> dict[int, str]:
    """The case of each item a ``contested`` row names that the actor may read."""
    ids = {
        int(i)
        for r in rows
        if r.action == "contested"
        for held in (r.detail.get("values") or {}).values()
        for i in held
    }
    return readable_ids(session=session, tenant=tenant, actor=actor, ids=ids)


def _as_seen(row: AuditEntryRecord, cases: dict[int, str], item_id: int) -> AuditEntryRecord | None:
    """A ``contested`` row as the reader sees the key: only the values readable items
    hold, and none at all when, so seen, the key is not contested."""
    if row.action != "contested":
        return row
    values = {
        value: [i for i in held if int(i) in cases]
        for value, held in (row.detail.get("values") or {}).items()
    }
    values = {v: held for v, held in values.items() if held}
    if len(values) < 2 or item_id not in cases:
        return None
    seen = sorted({cases[int(i)] for held in values.values() for i in held})
    return replace(row, detail={**row.detail, "values": values, "cases": seen})


def dossier(
    *, session: Session, tenant: str, actor: Actor, item_id: int, world: World, now: datetime
) -> Dossier:
    """The item as ``actor`` may see it, its conditions against what is observed ``now``,
    its evidence, confidence, citations, lineage (readable items only) and its history."""
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    snapshot = build_snapshot(
        session=session, world=world, subjects=_subjects(item), at=now, current=True
    )
    conditions = _conditions_now(item, world, snapshot, now)
    passages = cited_passages(session=session, tenant=tenant, actor=actor, refs=item.evidence)
    sources = {
        r.id: EvidenceSource(
            r.id, r.title, r.uri, bool(r.readers), r.test_outcome, passages.get(r.id)
        )
        for r in q.evidence_sources(session=session, tenant=tenant, ids=item.evidence)
    }
    links = tuple(
        EvidenceLinkRow(r.evidence_id, r.stance, float(r.strength), r.source_kind, r.at, r.actor)
        for r in q.evidence_links(session=session, tenant=tenant, item_id=item_id)
    )
    citations = tuple(
        CitationRow(
            r.case_id,
            r.influence,
            r.compliance,
            r.cited_at,
            r.cited_by,
            r.signal,
            r.expected,
            r.observed,
            r.rationale,
        )
        for r in q.item_citations(session=session, tenant=tenant, item_id=item_id)
    )
    family = lineage(session=session, tenant=tenant, item_id=item_id, actor=actor)
    readable = {item_id} | {n.id for n in (*family.ancestors, *family.descendants)}
    rows = audit_entries(session=session, tenant=tenant, item_id=item_id)
    cases = _readable_cases(session, tenant, actor, rows)
    history = tuple(
        kept for h in rows if (kept := _as_seen(_scrubbed(h, readable), cases, item_id)) is not None
    )
    return Dossier(
        item,
        now,
        conditions,
        tuple(sources.get(e, EvidenceSource(e, None, None, False, None)) for e in item.evidence),
        links,
        confidence_of_item(session=session, tenant=tenant, item=item, now=now),
        citations,
        family,
        history,
        available_actions(actor, item),
        *_enforcement(session, tenant, item, world),
    )


def _enforcement(
    session: Session, tenant: str, item: ItemRecord, world: World
) -> tuple[Enforcement | None, bool | None]:
    """A skill's enforcement as set, and whether it binds at the tenant's threshold."""
    if item.kind != "skill":
        return None, None
    set_ = enforcement_of(session=session, tenant=tenant, item_id=item.id)
    level = None if set_ is None else set_.level
    return set_, binding(level, world.policy.skill_enforcement_threshold)


@dataclass(frozen=True)
class ActionPreview:
    """What an SME action would do to an item, before it is done.

    ``refusal`` (a stable code and its message) is set when the action would be refused;
    ``reopens`` lists the descendants a revocation would re-open, among those the actor
    may read.
    """

    action: str
    item_id: int
    from_state: str
    to_state: str | None
    effects: tuple[str, ...]
    reopens: tuple[LineageNode, ...] = ()
    refusal: tuple[str, str] | None = None


def _target(action: str, item: ItemRecord) -> tuple[str | None, list[str]]:
    state = item.state
    if action == "verify":
        return str(verified_state(item)), [f"epistemic status {item.epistemic} -> verified"]
    if action == "promote":
        return str(promoted_state(item, "shadow")), [
            "recalled tenant-wide in the shadow log, never into a context"
        ]
    if action == "graduate":
        return str(promoted_state(item, "active")), ["enters agents' contexts tenant-wide"]
    if action == "drop":
        return str(decide("drop", state)), ["back to its case only"]
    if action in ("refute", "revoke"):
        return str(decide(action, state)), [
            "no longer recalled; dropped from every context at the next check",
            f"a write derived from it is refused (lineage_{decide(action, state)})",
        ]
    if action == "redact":
        return None, ["hidden everywhere, history and as-of included; nothing is deleted"]
    if action == "forget":
        return None, [
            "erased for good: text, object, entities, conditions, embeddings and the detail "
            "of the audit rows about it; answered everywhere as never written"
        ]
    raise InputError(f"unknown action {action!r}; expected one of {', '.join(SME_ACTIONS)}")


def available_actions(actor: Actor, item: ItemRecord) -> tuple[str, ...]:
    """The SME actions ``actor``'s role allows that are defined from the item's state
    (promotion to shadow also needs a required condition): what a page offers."""
    out = []
    for action, right in SME_ACTIONS.items():
        if not actor.may(right):
            continue
        try:
            _target(action, item)
        except CaveatError:
            continue
        out.append(action)
    return tuple(out)


def preview_action(
    *, session: Session, tenant: str, actor: Actor, item_id: int, action: str
) -> ActionPreview:
    """What ``action`` would do to the item now, as the actor may see it: the state it
    leads to, its effects, the descendants a revocation re-opens, or why it is refused.
    Reads only; ``forbidden`` when the actor's role may not take the action at all."""
    if action not in SME_ACTIONS:
        raise InputError(f"unknown action {action!r}; expected one of {', '.join(SME_ACTIONS)}")
    actor.require(SME_ACTIONS[action])
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    try:
        to, effects = _target(action, item)
    except CaveatError as exc:
        return ActionPreview(action, item_id, item.state, None, (), (), (exc.code, exc.message))
    reopens: Sequence[LineageNode] = ()
    if action in ("refute", "revoke"):
        family = lineage(session=session, tenant=tenant, item_id=item_id, actor=actor)
        reopens = [n for n in family.descendants if n.state in CIRCULATING]
        effects.append(f"{len(reopens)} descendant(s) you can read go to needs_reverification")
    if action == "forget":
        plan = plan_forget(
            session=session, tenant=tenant, actor=actor, axis="item", item_ids=[item_id]
        )
        effects.append(
            f"{len(plan.items)} item row(s), its history included, and the detail of "
            f"{len(plan.audit_rows)} audit row(s) erased; {len(plan.descendants)} item(s) "
            "built on it are not"
        )
    return ActionPreview(action, item_id, item.state, to, tuple(effects), tuple(reopens))


@dataclass(frozen=True)
class Refusal:
    """One refused write or proposal: who, when, the code and what it was about. The
    message is the refusal's own (a collision with a hidden row is a generic conflict)."""

    seq: int
    at: datetime
    actor: str
    code: str
    gate: str | None
    message: str | None
    subject: str | None
    attribute: str | None


@dataclass(frozen=True)
class RefusalGroup:
    """The recent refusals of one reason code, newest first."""

    code: str
    gate: str | None
    refusals: tuple[Refusal, ...]

    @property
    def count(self) -> int:
        """How many refusals of this code."""
        return len(self.refusals)

    @property
    def last_at(self) -> datetime:
        """When the newest was refused."""
        return self.refusals[0].at

    @property
    def subjects(self) -> tuple[str, ...]:
        """The subjects the refused writes named, sorted."""
        return tuple(sorted({r.subject for r in self.refusals if r.subject}))

    @property
    def distinct(self) -> tuple[tuple[Refusal, int], ...]:
        """The group's identical refusals (same principal, subject, attribute and message)
        as one, newest first: the newest of each with how many there were."""
        seen: dict[tuple[str, str | None, str | None, str | None], list[Refusal]] = {}
        for r in self.refusals:
            seen.setdefault((r.actor, r.subject, r.attribute, r.message), []).append(r)
        return tuple((same[0], len(same)) for same in seen.values())


def refusal_groups(
    *, session: Session, tenant: str, actor: Actor, since: datetime, limit: int = 1000
) -> list[RefusalGroup]:
    """The newest ``limit`` refusals since ``since``, grouped by reason code, the most
    frequent code first; they are audit rows, read with the audit's right. Refused
    writes stored no item, so no item is revealed."""
    actor.require("audit_verify")
    groups: dict[str, list[Refusal]] = {}
    for r in q.refusals(session=session, tenant=tenant, since=since, limit=limit):
        groups.setdefault(r.code, []).append(
            Refusal(int(r.seq), r.at, r.actor, r.code, r.gate, r.message, r.subject, r.attribute)
        )
    out = [RefusalGroup(code, rs[0].gate, tuple(rs)) for code, rs in groups.items()]
    return sorted(out, key=lambda g: (-g.count, g.code))


@dataclass(frozen=True)
class TransitionRow:
    """One state transition of an item, as its audit row records it."""

    seq: int
    at: datetime
    item_id: int
    subject: str
    attribute: str
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None
    cause: dict[str, Any]


def transitions_between(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    since: datetime,
    until: datetime,
    limit: int = 1000,
) -> list[TransitionRow]:
    """The transitions made from ``since`` to ``until`` (both included), oldest first, the
    newest ``limit`` of them: the audit rows ``actor`` may see (none about an item it may
    not read; a re-opening by an ancestor it may not read names none), each with its
    item's subject and attribute."""
    actor.require("read")
    if since > until:
        raise InputError(
            f"a window runs forward: from ({since.isoformat()}) is after to ({until.isoformat()})"
        )
    try:
        before = until + timedelta(microseconds=1)  # audit_entries' until is exclusive
    except OverflowError:  # the last instant there is: no bound
        before = None
    rows = audit_entries(
        session=session,
        tenant=tenant,
        action="transition",
        since=since,
        until=before,
        limit=limit,
        reader=actor,
    )
    rows = audit_as_seen(session=session, tenant=tenant, actor=actor, rows=rows)
    names = q.item_names(
        session=session, tenant=tenant, ids=sorted({r.item_id for r in rows if r.item_id})
    )
    return [
        TransitionRow(
            r.seq,
            r.at,
            r.item_id,
            *names[r.item_id],
            r.detail.get("from"),
            str(r.code),
            r.actor,
            r.detail.get("reason"),
            dict(r.detail.get("cause") or {}),
        )
        for r in rows
        if r.item_id is not None and r.item_id in names
    ]
