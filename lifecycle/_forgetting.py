"""Forgetting (ranking only, never truth): last use, archiving, redaction, erasure, rollup.

- **Last use**: a live recall that returns an item, and a citation, record
  its use (``item_usage``). Recall ranks with the salience decayed by the
  time since the last use (half-life: tenant policy ``salience_half_life``),
  as a bounded boost; it never decides whether an item applies.
- **Archive**: an episode unused (and unwritten) for the tenant's
  ``episode_archive_horizon`` is archived by ``sweep``, outside open cases.
- **Redact**: hides one item everywhere (recall, explain, as-of, the context
  guard, lineage, reports, actions), its history included, with a record
  (``redactions``) and an audit row. The row itself stays: nothing is deleted.
- **Forget**: real erasure (model §7) of items by id, a subject's or an anchor's:
  their content and derived rows are removed, the detail of the audit rows about
  them too (the chain hashes each detail's digest, so it still verifies), under one
  ``erasures`` record; the rows left are redacted, so every read answers as if the
  items had never been written. ``redact`` keeps the bytes; ``forget`` removes them.
- **Rollup**: related episodes are clustered deterministically (only
  episodes of one access class together, then by shared entities, then by
  a token signature: Jaccard >= 0.4 over the words of their text), and each
  cluster of at least ``rollup_min_episodes`` becomes one semantic item,
  written through the normal gate as a ``hypothesis`` with the episodes as
  lineage; the episodes are then archived. ``plan_rollup`` is the
  preview (the same clusters and requests, nothing written); both may keep one
  subject's episodes, and take a ``Summariser`` for the item's text.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa
from rapidfuzz import process
from sqlalchemy.orm import Session, sessionmaker

from claims import (
    ERASURE_ACTION,
    ROLLUP_AGENT_PREFIX,
    Access,
    Actor,
    Anchor,
    DeclaredRegistry,
    ItemRecord,
    ItemRegistry,
    ItemWrite,
    append,
    erase_details,
    record_from_row,
)
from factgen import load_world
from lifecycle import _queries as q
from lifecycle._access import visible_item
from lifecycle._bulk import transition_many
from lifecycle._cases import write
from lifecycle._checks import expire_ttl
from lifecycle._states import SYSTEM_ACTOR
from predicates import duration_literal
from predicates.errors import CaveatError, InputError, NotFound

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "ERASED_TABLES",
    "REWRITTEN_TABLES",
    "STATISTICS",
    "Erasure",
    "ErasurePlan",
    "RecordedSummariser",
    "Rollup",
    "RollupPlan",
    "Summariser",
    "SweepResult",
    "cluster_episodes",
    "forget",
    "plan_forget",
    "plan_rollup",
    "redact",
    "rollup",
    "signature",
    "sweep",
    "vacuum_erased",
]

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the and for with from that this was were are its has had have not but into onto after "
    "before then than when what which while all any can could should must always never would "
    "did does done out off our their there".split()
)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did."""

    archived: tuple[int, ...]
    expired: tuple[int, ...]
    #: working-memory items whose TTL ran out, archived (reason ``working_memory_ttl``)
    working_memory: tuple[int, ...] = ()


def sweep(*, session: Session, tenant: str, now: datetime) -> SweepResult:
    """Archive unused episodes past the horizon; run out secondary TTLs; archive working
    memory whose TTL ran out (``working_memory_ttl`` from its own last write: one audited
    ``archive`` transition per item, reason ``working_memory_ttl``). Deterministic."""
    world = load_world(session=session, tenant=tenant)
    before = now - world.policy.episode_archive_horizon
    moved = transition_many(
        session=session,
        tenant=tenant,
        item_ids=q.unused_episodes(session=session, tenant=tenant, before=before),
        action="archive",
        at=now,
        actor=SYSTEM_ACTOR,
        reason=f"episode unused for {duration_literal(world.policy.episode_archive_horizon)}",
        cause={"horizon": duration_literal(world.policy.episode_archive_horizon)},
    )
    expired = expire_ttl(session=session, tenant=tenant, world=world, now=now, actor=SYSTEM_ACTOR)
    ttl = world.policy.working_memory_ttl
    working = transition_many(
        session=session,
        tenant=tenant,
        item_ids=q.expired_working_memory(session=session, tenant=tenant, before=now - ttl),
        action="archive",
        at=now,
        actor=SYSTEM_ACTOR,
        reason="working_memory_ttl",
        cause={"working_memory_ttl": duration_literal(ttl)},
    )
    return SweepResult(tuple(m[0] for m in moved), tuple(expired), tuple(m[0] for m in working))


def redact(
    *, session: Session, tenant: str, item_id: int, reason: str, actor: Actor, now: datetime
) -> None:
    """Hide one item everywhere, history and as-of included. Recorded and audited."""
    actor.require("redact")
    if not reason.strip():
        raise InputError("a redaction needs a reason")
    visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    q.insert_redactions(
        session=session,
        tenant=tenant,
        ids=[item_id],
        at=now,
        actor=actor.id,
        reason=reason,
        erasure_id=None,
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="redact",
        at=now,
        item_id=item_id,
        code="redacted",
        detail={"reason": reason},
    )


#: An item's text, or an object that is a string, at least this long is looked for in the
#: audit rows about no item (requests, refusals) when the item is forgotten: shorter
#: strings (``E-1``, ``true``) are too common to be the item's own.
QUOTED_FROM = 8


@dataclass(frozen=True)
class ErasurePlan:
    """What a ``forget`` would erase (its preview): the item rows (history included),
    the audit rows whose detail goes, the rows per subject and per anchor, and the
    items built on them (not erased: forget them by id if they carry the content)."""

    axis: str
    target: str
    items: tuple[int, ...]
    audit_rows: tuple[int, ...]
    by_subject: dict[str, int]
    by_anchor: dict[str, int]
    descendants: tuple[int, ...]


@dataclass(frozen=True)
class Erasure:
    """The record of a ``forget``: ids and counts, never the content."""

    id: int
    axis: str
    target: str
    items: tuple[int, ...]
    audit_rows: tuple[int, ...] = ()
    deleted: dict[str, int] = field(default_factory=dict)


def _target_key(axis: str, target: str) -> str:
    """What the erasure record keeps of its target: an anchor's id as it is (structural);
    a subject's name as its SHA-256 (the name may be the personal data erased); for
    items, nothing (their ids are in the record's audit row)."""
    if axis == "subject":
        return "sha256:" + hashlib.sha256(target.encode()).hexdigest()
    return "" if axis == "item" else target


def plan_forget(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    axis: str,
    target: str = "",
    item_ids: Sequence[int] = (),
) -> ErasurePlan:
    """What ``forget`` would erase, read only (admin). ``axis`` is ``item`` (``item_ids``),
    ``subject`` (``target`` resolved through the alias resolver) or an anchor axis
    (``target`` its id: the items scoped or faceted there). Every row of an item's
    history (the rows it superseded) goes with it."""
    actor.require("forget")
    if axis == "item":
        if not item_ids:
            raise InputError("forget by item needs at least one item id", attribute="items")
        found = set(q.erasure_closure(session=session, tenant=tenant, ids=item_ids))
        missing = sorted(set(item_ids) - found)
        if missing:
            raise NotFound(f"no item {missing[0]}", item=missing[0])
        roots: Sequence[int] = sorted(set(item_ids))
        target = ""
    else:
        if not target.strip():
            raise InputError(f"forget by {axis} needs a target", attribute="target")
        world = load_world(session=session, tenant=tenant)
        if axis == "subject":
            target = world.resolver.resolve(target)
        roots = q.items_of_target(session=session, tenant=tenant, axis=axis, target=target)
        if axis != "subject" and not roots:
            _known_axis(DeclaredRegistry.of(world).items(), axis)
    ids = q.erasure_closure(session=session, tenant=tenant, ids=roots)
    texts = q.erasure_texts(session=session, tenant=tenant, ids=ids, shortest=QUOTED_FROM)
    seqs = q.erasure_audit_rows(
        session=session,
        tenant=tenant,
        ids=ids,
        texts=texts,
        subject=target if axis == "subject" else None,
    )
    subjects: Counter[str] = Counter()
    anchors: Counter[str] = Counter()
    for row in q.erasure_breakdown(session=session, tenant=tenant, ids=ids):
        subjects[row.subject] += int(row.n)
        anchors[row.anchor] += int(row.n)
    return ErasurePlan(
        axis,
        target,
        tuple(ids),
        tuple(seqs),
        dict(sorted(subjects.items())),
        dict(sorted(anchors.items())),
        tuple(q.erasure_descendants(session=session, tenant=tenant, ids=ids)),
    )


def _known_axis(registry: ItemRegistry, axis: str) -> None:
    """An ``InputError`` naming ``axis`` when the tenant's registry does not know it (an
    axis no item row uses: one that rows still use may be erased after it left)."""
    if registry.axis(axis) is not None:
        return
    known = sorted(registry.axes)
    hints = [m[0] for m in process.extract(axis, known, limit=3, score_cutoff=60)]
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    raise InputError(
        f"anchor: no axis {axis!r} in this tenant's registry{hint}",
        attribute="anchor",
        given=axis,
        expected="an axis of the registry (caveat registry show)",
        suggestions=hints,
    )


def forget(
    *,
    session: Session,
    tenant: str,
    reason: str,
    actor: Actor,
    now: datetime,
    axis: str,
    target: str = "",
    item_ids: Sequence[int] = (),
) -> Erasure:
    """Erase items (``item_ids``), a subject's or an anchor's (model §7): admin only, with
    a reason. The plan is ``plan_forget``'s. In this transaction:

    - the item rows lose their content (``scrub_items``: text, object, entities,
      conditions and their key, the full-text vector) and are redacted under one
      ``erasures`` record, so every read answers as if they had never been written;
    - their derived rows go (embeddings, their queue, use, context, citations, shadow
      and expiry bookkeeping, evidence links, confidence, enforcement);
    - the audit rows about them (``plan.audit_rows``) lose their detail (NULL; the
      digest the chain hashes stays), and one ``forget`` row records the erasure: its
      id, the axis, the items, the audit rows, the reason; a subject by its digest.

    The dead row versions are still in the table files until they are vacuumed: the
    caller does that after commit (``caveat.app.forget``).
    """
    if not reason.strip():
        raise InputError("forget needs a reason", attribute="reason")
    plan = plan_forget(
        session=session, tenant=tenant, actor=actor, axis=axis, target=target, item_ids=item_ids
    )
    if not plan.items:
        raise NotFound(
            f"forget by {axis}: no item {'of' if axis == 'subject' else 'at'} "
            f"{plan.target if axis == 'subject' else f'{axis}:{plan.target}'} to erase",
            axis=axis,
        )
    kept = _target_key(axis, plan.target)
    erasure_id = q.insert_erasure(
        session=session,
        tenant=tenant,
        axis=axis,
        target=kept,
        at=now,
        actor=actor.id,
        reason=reason,
    )
    ids = list(plan.items)
    q.insert_redactions(
        session=session,
        tenant=tenant,
        ids=ids,
        at=now,
        actor=actor.id,
        reason=reason,
        erasure_id=erasure_id,
    )
    q.scrub_items(session=session, tenant=tenant, ids=ids, at=now)
    deleted = q.delete_item_copies(session=session, tenant=tenant, ids=ids)
    q.set_erasure_count(session=session, tenant=tenant, erasure_id=erasure_id, items=len(ids))
    erase_details(session=session, tenant=tenant, erasure=erasure_id, seqs=plan.audit_rows)
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action=ERASURE_ACTION,
        at=now,
        code="erased",
        detail={
            "erasure": erasure_id,
            "axis": axis,
            "target": kept,
            "items": ids,
            "audit_rows": list(plan.audit_rows),
            "reason": reason,
        },
    )
    return Erasure(erasure_id, axis, plan.target, tuple(ids), plan.audit_rows, deleted)


#: The tables an erasure changes (its dead row versions are there until vacuumed); those
#: that held the content itself are rewritten (``VACUUM FULL``: a plain ``VACUUM``
#: frees a dead row version but leaves its bytes in the page's free space, and a GIN
#: index keeps the keys of removed rows), the others (ids and numbers) vacuumed.
ERASED_TABLES = ("items", "audit_log", *q.ITEM_COPIES)
REWRITTEN_TABLES = (
    "items",
    "audit_log",
    "item_embeddings",
    "citations",
    "case_context",
    "evidence_links",
)
#: The catalog of the planner's statistics: ``ANALYZE`` samples column values into it.
STATISTICS = "pg_statistic"
#: How long the rewrite of one table waits for its lock before it gives up (and says so).
LOCK_TIMEOUT_MS = 30_000


def vacuum_erased(
    *, connection: sa.Connection, only: Sequence[str] | None = None
) -> dict[str, str]:
    """Remove what an erasure left in the table files: rewrite the tables that held the
    content (``REWRITTEN_TABLES``: each locked while it is rewritten, so reads and writes
    of it wait, seconds per 100,000 rows), ``VACUUM`` the others, ``ANALYZE`` each (its
    new statistics replace the sampled values in ``pg_statistic``), then rewrite
    ``pg_statistic`` (``VACUUM FULL``: the replaced samples are dead row versions there)
    when this role may (its owner, the superuser, or ``pg_maintain``). Runs on
    ``connection`` in autocommit (``VACUUM`` cannot run in a transaction), as a role that
    owns the tables or holds ``MAINTAIN`` on them (migration 0023 grants it to the
    application role on PostgreSQL 17 and later). Returns the tables left as they were,
    each with why: this role may not vacuum it, its lock was not had within
    ``LOCK_TIMEOUT_MS``, or the server's error (logged); the erasure stays committed
    (docs/operations.md, "Erasure"). ``only``: those of the tables (a second pass, as
    another role, of what a first one left)."""
    tables = tuple(t for t in (*ERASED_TABLES, STATISTICS) if only is None or t in only)
    left = {
        t: "this role may not vacuum it"
        for t in q.may_maintain(connection=connection, tables=tables)
    }
    for table in tables:
        if table in left:
            continue
        stats = table == STATISTICS
        why = q.vacuum(
            connection=connection,
            table=table,
            full=stats or table in REWRITTEN_TABLES,
            analyze=not stats,
            lock_timeout_ms=LOCK_TIMEOUT_MS,
        )
        if why is not None:
            log.warning("erasure: %s not vacuumed: %s", table, why)
            left[table] = why
    return left


def _tokens(item: ItemRecord) -> frozenset[str]:
    words = _WORD.findall((item.text or "").lower())
    return frozenset(w for w in words if len(w) >= 3 and w not in _STOP)


def cluster_episodes(
    episodes: Sequence[ItemRecord], *, min_size: int, threshold: float = 0.4
) -> list[list[ItemRecord]]:
    """Deterministic clusters: shared entities first, then Jaccard of text tokens >= threshold.

    Clusters smaller than ``min_size`` are left out; members are ordered by
    id and clusters by their first member.
    """
    import networkx as nx

    by_entity: nx.Graph[int] = nx.Graph()
    items = {e.id: e for e in episodes}
    by_entity.add_nodes_from(sorted(items))
    owners: dict[str, list[int]] = {}
    for e in sorted(episodes, key=lambda x: x.id):
        for name in sorted({e.subject, *e.entities}):
            owners.setdefault(name, []).append(e.id)
    for ids in owners.values():
        by_entity.add_edges_from(itertools.pairwise(ids))
    out: list[list[ItemRecord]] = []
    for component in nx.connected_components(by_entity):
        members = sorted(component)
        tokens = {i: _tokens(items[i]) for i in members}
        similar: nx.Graph[int] = nx.Graph()
        similar.add_nodes_from(members)
        for n, a in enumerate(members):
            for b in members[n + 1 :]:
                union = tokens[a] | tokens[b]
                if union and len(tokens[a] & tokens[b]) / len(union) >= threshold:
                    similar.add_edge(a, b)
        for cluster in nx.connected_components(similar):
            if len(cluster) >= min_size:
                out.append([items[i] for i in sorted(cluster)])
    return sorted(out, key=lambda c: c[0].id)


def signature(cluster: Sequence[ItemRecord], size: int = 6) -> tuple[str, ...]:
    """The words shared by at least half of the cluster, most frequent first (ties by word)."""
    counts = Counter(t for e in cluster for t in _tokens(e))
    common = [w for w, c in counts.items() if c * 2 >= len(cluster)]
    return tuple(sorted(common, key=lambda w: (-counts[w], w))[:size])


class Summariser(Protocol):
    """Writes a rolled-up item's text from its cluster's episodes (any LLM client may
    be one). Its text is the item's ``text`` only: the object, conditions, evidence and
    lineage stay the deterministic ones, and the item still goes through the gate."""

    def __call__(self, episodes: Sequence[ItemRecord]) -> str:
        """The summary of ``episodes`` (ordered by id); empty: the deterministic text."""
        ...


class RecordedSummariser:
    """A ``Summariser`` that replays recorded answers, by the episodes' ids (tests, and
    a recording of a model's summaries); every call is kept in ``calls``."""

    def __init__(self, answers: Mapping[tuple[int, ...], str]) -> None:
        self._answers = dict(answers)
        self.calls: list[tuple[int, ...]] = []

    def __call__(self, episodes: Sequence[ItemRecord]) -> str:
        """The recorded summary of these episodes; ``NotFound`` when none was recorded."""
        ids = tuple(e.id for e in episodes)
        self.calls.append(ids)
        answer = self._answers.get(ids)
        if answer is None:
            raise NotFound(f"no recorded summary for episodes {list(ids)}", episodes=list(ids))
        return answer


@dataclass(frozen=True)
class RollupPlan:
    """One cluster and the item a rollup would write for it (nothing is written)."""

    episodes: tuple[int, ...]
    signature: tuple[str, ...]
    request: ItemWrite


@dataclass(frozen=True)
class Rollup:
    """One cluster rolled up: the new item (None if the gate refused it) and its episodes."""

    item_id: int | None
    episodes: tuple[int, ...]
    signature: tuple[str, ...]
    refused: str | None = None
    #: the gate's message when it refused
    message: str | None = None
    #: what was sent through the gate (``plan_rollup``'s request)
    request: ItemWrite | None = None


def _shared(lists: Sequence[Sequence[str]]) -> list[str]:
    first, *rest = lists
    return sorted(set(first).intersection(*map(set, rest)))


def _most_common(values: Sequence[str]) -> str:
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


def _plan(cluster: Sequence[ItemRecord], summariser: Summariser | None) -> RollupPlan:
    sig = signature(cluster)
    ids = tuple(e.id for e in cluster)
    digest = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:10]
    subject = _most_common([e.subject for e in cluster])
    content_types = [e.content_type for e in cluster if e.content_type]
    text = f"Recurring on {subject}, {len(cluster)} episodes: {' '.join(sig)}"
    if summariser is not None:
        text = summariser(list(cluster)).strip() or text
    request = ItemWrite(
        kind="fact",
        subject=subject,
        attribute="recurring_pattern",
        object=f"{len(cluster)} similar episodes ({' '.join(sig) or 'no shared words'})",
        required=_shared([e.required for e in cluster]),
        excluded=_shared([e.excluded for e in cluster]),
        evidence=sorted({ev for e in cluster for ev in e.evidence}),
        derived_from=list(ids),
        epistemic="hypothesis",
        content_type=_most_common(content_types) if content_types else None,
        scope=Anchor(axis="agent", id=f"{ROLLUP_AGENT_PREFIX}{digest}"),
        text=text,
        entities=sorted({n for e in cluster for n in e.entities}),
    )
    return RollupPlan(ids, sig, request)


def plan_rollup(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    subject: str | None = None,
    summariser: Summariser | None = None,
) -> list[RollupPlan]:
    """What ``rollup`` would write, cluster by cluster, and nothing written: the
    episodes ``actor`` may read (of ``subject`` only, resolved through the aliases,
    when given), clustered deterministically within each access class (the same
    readers, deny list and level: ``_access_class``), each cluster of at least the
    tenant's ``rollup_min_episodes`` with the item it becomes."""
    actor.require("rollup")
    world = load_world(session=session, tenant=tenant)
    episodes = [record_from_row(r) for r in q.rollup_episodes(session=session, tenant=tenant)]
    episodes = [e for e in episodes if e.readable_by(actor)]
    if subject is not None:
        wanted = world.resolver.resolve(subject)
        episodes = [e for e in episodes if e.subject == wanted]
    classes: dict[tuple[object, ...], list[ItemRecord]] = {}
    for e in episodes:
        classes.setdefault(_access_class(e), []).append(e)
    clusters = sorted(
        (
            cluster
            for same in classes.values()
            for cluster in cluster_episodes(same, min_size=world.policy.rollup_min_episodes)
        ),
        key=lambda c: c[0].id,
    )
    return [_plan(cluster, summariser) for cluster in clusters]


def _access_class(episode: ItemRecord) -> tuple[object, ...]:
    """Who may read ``episode`` (``claims.Access``: its reader lists, deny list and
    level), as a key: a rollup clusters episodes of one class only, so the item it
    writes (whose access is derived from the union of their evidence) is readable by
    exactly those who read each of its episodes, and archiving them hides nothing from
    anyone."""
    access = Access.of(episode)
    return (
        tuple(sorted(tuple(sorted(r)) for r in access.acl)),
        tuple(sorted(set(access.deny))),
        access.classification,
    )


def rollup(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    actor: Actor,
    now: datetime,
    registry: ItemRegistry | None = None,
    subject: str | None = None,
    summariser: Summariser | None = None,
) -> list[Rollup]:
    """Roll related episodes up into semantic items; archive the episodes that were rolled up.

    The clusters and requests are ``plan_rollup``'s (read in one transaction). Each
    rollup is then an ordinary write through the gate (so it may be refused, e.g.
    ``lineage_revoked``: reported with its code and message, its episodes left as
    they are), scoped at the ``agent`` anchor ``rollup:<hash>`` and starting in
    ``case`` state like every new item: it reaches the tenant only through the
    lifecycle. Its required and excluded conditions are those every episode shares;
    its evidence is the union of theirs; its text the ``summariser``'s when given.
    """
    actor.require("rollup")
    with sessions.begin() as s:
        plans = plan_rollup(
            session=s, tenant=tenant, actor=actor, subject=subject, summariser=summariser
        )
    out: list[Rollup] = []
    for plan in plans:
        try:
            result = write(
                sessions=sessions,
                tenant=tenant,
                request=plan.request,
                actor=actor,
                now=now,
                registry=registry,
            )
        except CaveatError as exc:
            out.append(
                Rollup(None, plan.episodes, plan.signature, exc.code, exc.message, plan.request)
            )
            continue
        with sessions.begin() as s:
            transition_many(
                session=s,
                tenant=tenant,
                item_ids=list(plan.episodes),
                action="archive",
                at=now,
                actor=actor.id,
                reason=f"rolled up into item {result.item_id}",
                cause={"rollup": result.item_id},
            )
        out.append(Rollup(result.item_id, plan.episodes, plan.signature, request=plan.request))
    return out
