"""Recall: six gates in SQL before any ranking, then ranking over the survivors (model §6)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from opentelemetry import trace
from sqlalchemy.orm import Session

import lifecycle
from claims import (
    Actor,
    Block,
    ItemRecord,
    blocks_in_play,
    passage_ref,
    passage_uri,
    record_from_mapping,
    record_from_row,
    team_of,
)
from factgen import (
    Observation,
    Snapshot,
    SnapshotEntry,
    TypedFact,
    World,
    build_snapshot,
    decode_text,
    type_observations,
)
from factgen import load_world as _load_world
from lifecycle import ConditionValue, condition_values
from predicates import Truth, encode
from predicates.errors import InputError
from recall import _queries as q
from recall._blocks import pack_blocks_first
from recall._embed import vector_text
from recall._embedders import Embedder
from recall._fusion import FUSION, Anchor, Fusion, MmrCandidate, anchors_in_play, mmr
from recall._packing import Packed, PackEntry, default_counter, pack

__all__ = [
    "GATES",
    "SOURCES",
    "ConditionValue",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "RecalledPassage",
    "UseRecord",
    "Withheld",
    "admits_passage",
    "condition_values",
    "merge_sources",
    "needs",
    "recall",
    "record_use",
]

#: Spans of the recall stages (caveat._tracing: exported only when configured).
_tracer = trace.get_tracer("caveat.recall")

#: The six gates, in the order they run. The first two are never reported.
GATES = (
    "tenant_scope",
    "capability",
    "activated_version",
    "purpose",
    "applicability",
    "validity_window",
)
_REPORTED = GATES[2:]
#: A recall's sources (model §6 "Knowledge beside memory"), default memory only.
Source = Literal["memory", "knowledge"]
SOURCES: tuple[Source, ...] = ("memory", "knowledge")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class RecallRequest:
    """What an agent asks. ``subjects`` None means every subject."""

    query: str
    subjects: Sequence[str] | None = None
    purpose: str | None = None
    case_id: str | None = None
    observations: Sequence[Observation] = ()
    as_of: datetime | None = None
    limit: int | None = None  # None: the tenant policy's recall.limit
    explain: bool = False
    anchors: Sequence[Anchor] = ()
    pinned: Sequence[int] = ()
    budget: int | None = None
    min_confidence: float | None = None
    #: the session asking (model §4: its working memory is recalled for its owner)
    session: str | None = None
    #: where answers come from (model §6): ``memory`` (items), ``knowledge`` (passages)
    sources: tuple[Source, ...] = ("memory",)
    #: ``extend``: ``anchors`` join the default set built from who asks (model §6
    #: "Anchors from the context"); ``replace``: only ``anchors``
    anchors_mode: Literal["extend", "replace"] = "extend"

    def __post_init__(self) -> None:
        if not self.sources or any(s not in SOURCES for s in self.sources):
            raise InputError(
                f"sources must be a non-empty subset of {', '.join(SOURCES)}, "
                f"got {list(self.sources)}",
                attribute="sources",
            )
        if len(set(self.sources)) != len(self.sources):
            raise InputError(f"sources repeat: {list(self.sources)}", attribute="sources")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"limit must be at least 1, got {self.limit}", attribute="limit")
        if self.budget is not None and self.budget < 0:
            raise InputError(f"budget must be >= 0, got {self.budget}", attribute="budget")
        if self.min_confidence is not None and not 0 <= self.min_confidence <= 1:
            raise InputError(
                f"min_confidence must be between 0 and 1, got {self.min_confidence}",
                attribute="min_confidence",
            )


@dataclass(frozen=True)
class RecalledItem:
    """A result: the item, its score parts, and the condition values that let it through."""

    item: ItemRecord
    score: float
    parts: dict[str, float]
    conditions: tuple[ConditionValue, ...]
    checked: bool = False  # it was in verify_on_next_use and passed its check here
    pinned: bool = False


@dataclass(frozen=True)
class RecalledPassage:
    """A knowledge passage a recall returned (model §6 "Knowledge beside memory"): its
    ref (``doc:<document id>#<fragment>``, what an item cites as evidence), its
    document, version, heading path and URI, its text, its fused score and the score
    parts (``lexical``, ``lexical_rank``, ``dense``, ``dense_rank``: no entity channel,
    no boost). It states no conditions: it never passed, nor faced, applicability."""

    id: int
    ref: str
    document_id: str
    version: int
    heading_path: tuple[str, ...]
    fragment: str
    uri: str | None
    title: str | None
    text: str
    score: float
    parts: dict[str, float]
    recorded_at: datetime
    source: Literal["knowledge"] = "knowledge"
    #: the items the caller may see that cite this passage as evidence (model §6: a
    #: passage an item cites is linked both ways), by id
    cited_by: tuple[int, ...] = ()


def admits_passage(
    *,
    actor: Actor,
    acl: Sequence[Sequence[str]],
    deny: Sequence[str],
    classification: str | None,
    purposes: Sequence[str],
    recorded_at: datetime,
    withdrawn_at: datetime | None,
    withdrawn_reason: str | None,
    purpose: str | None,
    at: datetime,
) -> str | None:
    """The Python twin of the passage gates in ``_queries.PASSAGES_RANKED``: None when a
    recall by ``actor`` for ``purpose`` at ``at`` may return the passage; ``hidden``
    when the caller may not know it exists (the capability gate, as
    ``Actor.can_read_acl`` reads an item's access; not yet recorded, withdrawn by
    ``at``, or redacted ever), never mentioned nor counted; ``purpose`` when the
    purpose gate withholds it. There is no applicability gate: a passage states no
    conditions."""
    if (
        not actor.can_read_acl(acl, deny=deny, classification=classification)
        or recorded_at > at
        or (withdrawn_at is not None and withdrawn_at <= at)
        or withdrawn_reason == "redacted"
    ):
        return "hidden"
    if purposes and purpose not in purposes:
        return "purpose"
    return None


def merge_sources(
    items: Sequence[RecalledItem], passages: Sequence[RecalledPassage], limit: int
) -> tuple[tuple[Source, int], ...]:
    """The merged order of a recall with both sources: the two ranked lists, each kept in
    its own order (the items' after MMR, the passages' by score), merged by the score of
    their heads (an item first on a tie), cut at ``limit``. ``(source, id)`` pairs."""
    out: list[tuple[Source, int]] = []
    i = j = 0
    while len(out) < limit and (i < len(items) or j < len(passages)):
        if j >= len(passages) or (i < len(items) and items[i].score >= passages[j].score):
            out.append(("memory", items[i].item.id))
            i += 1
        else:
            out.append(("knowledge", passages[j].id))
            j += 1
    return tuple(out)


@dataclass(frozen=True)
class Withheld:
    """An item the caller may see that a gate withheld (explain only)."""

    item: ItemRecord
    gate: str
    state: str | None
    conditions: tuple[ConditionValue, ...] = ()
    verdicts: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class RecallResult:
    """Ranked items; with explain, what was withheld and which observations are missing."""

    items: tuple[RecalledItem, ...]
    at: datetime
    subjects: tuple[str, ...] | None
    withheld: tuple[Withheld, ...] = ()
    missing_observations: tuple[str, ...] = ()
    snapshot: Snapshot | None = field(default=None, repr=False)
    checks: dict[int, bool] = field(default_factory=dict)  # verify-on-next-use: passed?
    #: pinned items that pass the gates (packed first; not repeated in ``items``)
    pinned: tuple[RecalledItem, ...] = ()
    #: the channels that ran: ``lexical``, ``dense``, ``entity``
    channels: tuple[str, ...] = ()
    #: candidates ranked without a vector because they are not embedded yet
    not_embedded: int = 0
    #: how the dense candidates were found: ``exact``, ``hnsw``, ``hnsw+exact`` or None
    dense_search: str | None = None
    #: the result rendered for a prompt within ``budget`` (requests with a budget)
    packed: Packed | None = None
    #: the core blocks in play, in packing order (model §4; never ranked: recall/_blocks.py)
    blocks: tuple[Block, ...] = ()
    #: the anchors the ranking and packing ran with, weights resolved, highest first
    #: (``in_play``; none for an as-of recall, which ranks without anchors)
    anchors: tuple[Anchor, ...] = ()
    #: knowledge passages returned (``sources`` with ``knowledge``), in rank order
    knowledge: tuple[RecalledPassage, ...] = ()
    #: the merged ranked list of both sources, ``(source, id)``, best first
    order: tuple[tuple[Source, int], ...] = ()
    #: passages the caller may see that the query's channels found (before purpose)
    knowledge_considered: int = 0

    def ranked(self) -> list[RecalledItem | RecalledPassage]:
        """Items and passages in the merged order (``order``; the items alone when a
        recall predates it)."""
        if not self.order:
            return list(self.items)
        items = {r.item.id: r for r in self.items}
        passages = {p.id: p for p in self.knowledge}
        return [items[i] if src == "memory" else passages[i] for src, i in self.order]


def _tsquery(text: str) -> str:
    """Free text as an OR query: a paraphrase still ranks, no term is required."""
    words = {w.lower() for w in _WORD.findall(text)}
    return " | ".join(sorted(words))


def _blocking_unknowns(item: ItemRecord, values: Sequence[ConditionValue]) -> list[str]:
    """Attributes (``@entity:`` for another subject) whose observation would decide."""
    return [
        v.attribute if v.subject == item.subject else f"@{v.subject}:{v.attribute}"
        for v in values
        if v.value is Truth.UNKNOWN
    ]


#: Candidates a live recall ranks per stage before it widens (model §6: a gate
#: never silently shortens the answer, so an under-filled stage widens by
#: ``_WIDEN`` until its source is exhausted).
CANDIDATE_CAP = 1000
_WIDEN = 8
_ALL = 2**31 - 1


def recall(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    now: datetime,
    world: World | None = None,
    embedder: Embedder | None = None,
    fusion: Fusion = FUSION,
    counter: Callable[[str], int] | None = None,
) -> RecallResult:
    """Items whose every gate passes, ranked. A pure read: it changes nothing and
    takes no lock a write waits on; ``record_use`` records what using them leaves.

    Live (no ``as_of``): candidates come from indexes (the subjects' items, or
    the items a query term matches, then the rest by recency), tenant,
    capability and redaction filtering them before any is ranked or capped;
    the other gates run in rank order until ``limit`` pass, and an
    under-filled stage widens. A ``verify_on_next_use`` item (or an active
    one whose secondary TTL ran out, which reads as expired at once) passes
    only when its check passes on observations made since.

    ``as_of`` evaluates every gate as of that instant: the rows current then,
    their state then, the validity window then and the fact snapshot then.
    Items hidden by ``tenant_scope`` or ``capability``, and redacted items,
    are never mentioned.

    Ranking (live): reciprocal rank fusion of the lexical, dense (with an
    ``embedder``: the query is embedded once) and entity channels, weighted by
    ``fusion`` and by the request's anchors, with bounded boosts; then one MMR
    pass. ``min_confidence`` filters before the top-k cut (never a gate); pinned
    items that pass every gate come back in ``pinned``; with a ``budget`` the
    result is packed for a prompt, tokens counted by ``counter`` (default: the
    embedding model's own tokenizer).
    """
    actor.require("recall")
    world = world or _load_world(session=session, tenant=tenant)
    if request.as_of is not None and (
        request.min_confidence is not None or request.pinned or request.anchors
    ):
        raise InputError(
            "min_confidence, pinned and anchors apply to a live recall, not to as_of",
            attribute="as_of",
        )
    # the query's vector, embedded once for both sources (live only: as-of is lexical)
    qvec = None
    if request.as_of is None and embedder is not None and request.query.strip():
        with _tracer.start_as_current_span("recall.embed"):
            qvec = vector_text(embedder.embed([request.query])[0])
    if "memory" not in request.sources:
        result = RecallResult((), request.as_of or now, _subjects(world, request))
    elif request.as_of is not None:
        result = _recall_as_of(session, tenant, actor, request, world, now)
    else:
        # the asking principal's team (model §4 "Core blocks"), read once: the anchors in
        # play (``in_play``) take it from the actor
        own = team_of(session=session, tenant=tenant, actor=actor)
        actor = replace(actor, team=own)
        result = _recall_live(session, tenant, actor, request, world, now, embedder, qvec, fusion)
        # its blocks, and those of the teams the request names
        member_of = [own] if own else []
        teams = [*member_of, *(a.id for a in request.anchors if a.axis == "team")]
        with _tracer.start_as_current_span("recall.blocks") as span:
            blocks = blocks_in_play(
                session=session, tenant=tenant, actor=actor, teams=teams, member_of=member_of
            )
            _count(span, len(blocks))
        result = replace(result, blocks=tuple(blocks))
    if "knowledge" in request.sources:
        with _tracer.start_as_current_span("recall.knowledge") as span:
            result = _with_knowledge(
                session, tenant, actor, request, world, now, embedder, qvec, result
            )
            _count(span, len(result.knowledge))
    else:
        result = replace(result, order=tuple(("memory", r.item.id) for r in result.items))
    if request.budget is None:
        return result
    count = counter or default_counter()
    with _tracer.start_as_current_span("recall.packing"):
        return replace(
            result,
            packed=pack_blocks_first(
                result.blocks,
                budget=request.budget,
                count=count,
                pack_rest=lambda left: _pack(
                    result, replace(request, budget=left), count, floor=world.policy.anchors.floor
                ),
            ),
        )


def _with_knowledge(
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    world: World,
    now: datetime,
    embedder: Embedder | None,
    qvec: str | None,
    result: RecallResult,
    fusion: Fusion = FUSION,
) -> RecallResult:
    """``result`` with the knowledge passages fused in (model §6): the passages that pass
    the tenant, capability and purpose gates as of the recall's instant, ranked by the
    same reciprocal rank fusion (full text and, live with an embedder, the dense
    channel on the same query vector), merged with the items by score, the ``limit``
    applying to the merged list."""
    limit = top(request, world)
    live = request.as_of is None
    params = {
        **fusion.params(),
        "tenant": tenant,
        **actor.gate_params("caps"),
        "at": request.as_of or now,
        "purpose": request.purpose,
        "tsquery": _tsquery(request.query),
        "qvec": qvec,
        "model": None if embedder is None else embedder.name,
        "k": DENSE_K,
        "cutover": DENSE_CUTOVER,
        "wide": DENSE_K * PASSAGE_WIDEN,
        "cap": CANDIDATE_CAP,
        "limit": limit,
        "dense_ids": None,
        "dense_scores": None,
    }
    if qvec is not None and embedder is not None and embedder.dimension == 384:
        # past the cut-over, the HNSW index; under-filled (or at most the cut-over
        # embedded), the exact scan inside the ranking statement: never shortened
        near = q.passages_dense_hnsw(session=session, params=params)
        if len(near) >= DENSE_K:
            params["dense_ids"] = [i for i, _ in near]
            params["dense_scores"] = [d for _, d in near]
    rows, considered = q.passages_ranked(session=session, params=params)
    passages = [
        RecalledPassage(
            id=int(r["id"]),
            ref=passage_ref(r["document_id"], r["fragment"]),
            document_id=r["document_id"],
            version=int(r["document_version"]),
            heading_path=tuple(r["heading_path"] or ()),
            fragment=r["fragment"],
            uri=passage_uri(r["uri"], r["fragment"]),
            title=r["title"],
            text=r["text"],
            score=float(r["score"]),
            parts={
                "lexical": float(r["lexical"]),
                "lexical_rank": float(r["lexical_rank"]),
                **(
                    {}
                    if r["dense"] is None
                    else {"dense": float(r["dense"]), "dense_rank": float(r["dense_rank"])}
                ),
                "fused": float(r["score"]),
            },
            recorded_at=r["recorded_at"],
        )
        for r in rows
    ]
    order = merge_sources(result.items, passages, limit)
    if passages and live:  # the items citing them now (an as-of recall lists none)
        citing = q.passages_cited_by(
            session=session,
            params={
                "tenant": tenant,
                **actor.gate_params("caps"),
                "refs": sorted({p.ref for p in passages}),
            },
        )
        passages = [replace(p, cited_by=tuple(citing.get(p.ref, ()))) for p in passages]
    kept = {i for src, i in order if src == "memory"}
    shown = {i for src, i in order if src == "knowledge"}
    channels = result.channels
    if qvec is not None and "dense" not in channels:
        channels = (*channels, "dense")
    if request.query.strip() and _tsquery(request.query) and "lexical" not in channels:
        channels = ("lexical", *channels)
    return replace(
        result,
        items=tuple(r for r in result.items if r.item.id in kept),
        knowledge=tuple(p for p in passages if p.id in shown),
        order=order,
        knowledge_considered=considered,
        channels=channels,
    )


def in_play(
    session: Session, tenant: str, actor: Actor, request: RecallRequest, world: World
) -> tuple[Anchor, ...]:
    """The anchors a live recall with ``request`` ranks and packs with (model §6,
    "Anchors from the context"): ``recall._fusion.anchors_in_play`` over who asks (the
    actor, its principal's team, the request's session, case and subjects as canonical
    ids), weights from the tenant policy. Built here for every door: a recall,
    ``record_use`` and ``needs`` re-evaluate the same request with the same anchors."""
    policy = world.policy.anchors
    replacing = request.anchors_mode == "replace"
    return anchors_in_play(
        request.anchors,
        request.anchors_mode,
        weights=policy.defaults.model_dump(),
        unsaid=policy.weight,
        agent=actor.id,
        session=request.session,
        case=request.case_id,
        services=sorted({world.resolver.resolve(s) for s in request.subjects or ()}),
        team=None if replacing else team_of(session=session, tenant=tenant, actor=actor),
    )


def top(request: RecallRequest, world: World) -> int:
    """How many items the request asks for: its ``limit``, else the tenant policy's
    ``recall.limit``."""
    return world.policy.recall.limit if request.limit is None else request.limit


def _subjects(world: World, request: RecallRequest) -> tuple[str, ...] | None:
    if request.subjects is None:
        return None
    direct = {world.resolver.resolve(s) for s in request.subjects}
    return tuple(sorted(world.topology.neighbourhood(direct, world.policy.topology_depth)))


def _declared(world: World) -> dict[str, Any]:
    """The schema as ``caveat_observed`` reads it: max_age in seconds (or null) per
    exact attribute, and ``*`` patterns as anchored regular expressions."""
    exact: dict[str, float | None] = {}
    patterns: list[list[Any]] = []
    for spec in world.schema:
        age = None if spec.max_age is None else spec.max_age.total_seconds()
        if "*" in spec.attribute:
            rx = r"\.".join(
                "[^.]+" if part == "*" else re.escape(part) for part in spec.attribute.split(".")
            )
            patterns.append([f"^{rx}$", age])
        else:
            exact[spec.attribute] = age
    return {"exact": exact, "patterns": patterns}


def _inline_json(inline: Sequence[TypedFact]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in inline:
        out.setdefault(f.subject, {})[f.attribute] = encode(f.value, f.vtype)
    return out


def _private_params(request: RecallRequest, world: World) -> dict[str, Any]:
    """The private state gate's parameters beside the actor's (``principal``): the
    request's session and the tenant's working-memory TTL in seconds."""
    return {
        "session": request.session,
        "wm_ttl_s": world.policy.working_memory_ttl.total_seconds(),
    }


def admits_private(
    *,
    state: str,
    scope_axis: str,
    scope_id: str,
    recorded_at: datetime,
    case_id: str | None,
    principal: str,
    session: str | None,
    session_owner: str | None,
    at: datetime,
    ttl: timedelta,
) -> bool:
    """The Python twin of ``_queries.admits_private``: a ``case``-state item is admitted
    without promotion in its own case, on the caller's own agent anchor, or as working
    memory of the request's session that the caller owns, until ``recorded_at + ttl``
    (expired at exactly that instant); a ``shadow`` one only as the caller's own agent
    lesson (its promotion started, it stays its agent's)."""
    own_lesson = scope_axis == "agent" and scope_id == principal
    if state == "shadow":
        return own_lesson
    if state != "case":
        return False
    if scope_axis == "case":
        return scope_id == case_id
    if scope_axis == "agent":
        return own_lesson
    if scope_axis == "session":
        return scope_id == session and session_owner == principal and at < recorded_at + ttl
    return False


def _live_params(
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    world: World,
    subjects: tuple[str, ...] | None,
    inline: Sequence[TypedFact],
    now: datetime,
    *,
    qvec: str | None = None,
    model: str | None = None,
    fusion: Fusion = FUSION,
    anchors: Sequence[Anchor] = (),
) -> dict[str, Any]:
    policy = world.policy.anchors
    return {
        **fusion.params(),
        # the tenant's anchors.facet_share and boost, unless the caller tuned its fusion
        **(
            {"facet_share": policy.facet_share, "b_anchors": policy.boost}
            if fusion is FUSION
            else {}
        ),
        **lifecycle.confidence_params(lifecycle.confidence_policy(world.policy.confidence)),
        "qvec": qvec,
        "model": model,
        "anchors": [a.as_json(policy.weight) for a in anchors],
        "min_confidence": request.min_confidence or 0.0,
        "tenant": tenant,
        **actor.gate_params("caps"),
        "at": now,
        "case_id": request.case_id,
        **_private_params(request, world),
        "purpose": request.purpose,
        "tsquery": _tsquery(request.query),
        "query_entities": list(subjects or ()),
        "subjects": list(subjects or ()),
        "all_subjects": subjects is None,
        "ids": [],
        "limit": top(request, world),
        "cap": CANDIDATE_CAP,
        "walked": 0,
        "half_life_s": max(world.policy.salience_half_life.total_seconds(), 1.0),
        "inline": _inline_json(inline),
        "declared": _declared(world),
        "ttl": lifecycle.ttl_seconds(world),
    }


@dataclass
class _Stage:
    """One candidate source as a live recall walked it: the source and parameters its
    ranking query ran with (a text stage runs as the ``ids`` it selected)."""

    source: str
    params: dict[str, Any]
    walked: int
    rows: list[dict[str, Any]]
    not_embedded: int = 0


def _walk(
    session: Session, source: str, params: dict[str, Any], need: int, dense: Sequence[int] = ()
) -> _Stage:
    """The top ``need`` rows of ``source`` that pass every gate, widening the candidate
    cap while the source has more candidates than were ranked and too few pass.

    The text source is two statements: its candidates, planned for the query's terms
    (common terms walk the recency index, rare ones read the GIN index), then the
    ranking and the gates over those ids, a prepared statement: planned for each
    call, the gates cost more to plan (6 ms) than to run. The ``dense`` ids (the dense
    channel's nearest) join the full-text candidates."""
    cap = CANDIDATE_CAP
    while True:
        run, run_params = source, {**params, "cap": cap}
        exhausted: bool | None = None
        if source == "text":
            with _tracer.start_as_current_span("recall.candidates") as span:
                ids = (
                    q.text_candidates(session=session, params=run_params)
                    if params["tsquery"]
                    else []
                )
                _count(span, len(ids), channel="text")
            union = sorted({*ids, *dense})
            exhausted = len(ids) < cap
            run, run_params = "ids", {**run_params, "ids": union, "cap": max(len(union), 1)}
        # the six gates run in this statement before any rank is taken (model §5)
        with _tracer.start_as_current_span("recall.gates") as span:
            got = q.live_ranked(session=session, source=run, params=run_params)
            n = int(got[-1]["n_candidates"]) if got else 0
            rows = [r for r in got if r["id"] is not None]
            _count(span, len(rows), source=run, candidates=n)
        if exhausted is None:
            exhausted = n < cap
        if len(rows) >= need or exhausted or cap >= _ALL:
            walked = int(rows[-1]["pos"]) if len(rows) >= need else n
            return _Stage(run, run_params, walked, rows, int(got[-1]["n_unembedded"] or 0))
        cap = _ALL if cap >= 64 * CANDIDATE_CAP else cap * _WIDEN


def _count(span: Any, n: int, **more: str | int) -> None:
    """A recall stage's counts on its span (never an item's text or the query)."""
    if span.is_recording():
        span.set_attribute("caveat.count", n)
        for key, value in more.items():
            span.set_attribute(f"caveat.{key}", value)


def _conditions_subjects(records: Sequence[ItemRecord]) -> list[str]:
    """The subjects of ``records`` and every entity their conditions name."""
    out = {r.subject for r in records}
    for r in records:
        for which in ("required", "excluded"):
            for c in r.conditions.get(which) or ():
                if isinstance(c, dict) and c.get("e"):
                    out.add(str(c["e"]))
    return sorted(out)


_TRUTH = {True: Truth.TRUE, False: Truth.FALSE, None: Truth.UNKNOWN}


def _values(
    record: ItemRecord,
    detail: list[list[Any]] | None,
    inline: dict[tuple[str, str], TypedFact],
    at: datetime,
) -> tuple[ConditionValue, ...] | None:
    """The item's condition values as the ranking query evaluated them (``detail``, see
    ``_queries._condition_detail``), or None when it has none to give."""
    if detail is None:
        return None
    texts = {True: record.required, False: record.excluded}
    out = []
    for req, n, ok, subject, attribute, tag, kind, text, observed_at, source, given, prov in detail:
        entry = None
        if given:
            f = inline[subject, attribute]
            entry = SnapshotEntry(
                subject, attribute, f.value, f.vtype, at, f.source or "inline", inline=True
            )
        elif tag is not None:
            value, vtype = decode_text(tag, kind, text)
            entry = SnapshotEntry(
                subject,
                attribute,
                value,
                vtype,
                datetime.fromisoformat(observed_at),
                source,
                provenance=prov,
            )
        out.append(
            ConditionValue(
                texts[req][n - 1],
                "required" if req else "excluded",
                _TRUTH[ok],
                subject,
                attribute,
                entry,
            )
        )
    return tuple(out)


#: Dense candidates a no-subject recall takes from the vector channel.
DENSE_K = 100
#: Up to this many passing embedded items, the dense channel scans them exactly; above,
#: it asks the HNSW index. Measured where the two cross (docs/performance.md, "Dense
#: channel"): an exact scan of 500 passing items costs about one HNSW search, of 1,000
#: about two.
DENSE_CUTOVER = 1000
#: How many of the tenant's embedded items (the first by id) the plan checks for
#: visibility, to tell a selective filter from one that keeps most rows.
DENSE_SAMPLE = 200
#: Below this share of the sample visible, the filter is selective: HNSW would walk
#: far past the caller's items and miss some (field notes: recall 0.57-0.85 under a 1%
#: filter), so the passing set is counted and, when small, scanned exactly.
DENSE_SELECTIVE = 0.1
#: The passages' HNSW channel reads this many times ``DENSE_K`` nearest before their
#: gates; when the gates pass fewer than ``DENSE_K`` of them, the passing set is
#: scanned exactly instead (the channel never silently shortens).
PASSAGE_WIDEN = 4
#: Gated results MMR chooses from: ``limit`` plus this many (at least ``limit`` more).
MMR_EXTRA = 10


def _dense_candidates(
    session: Session, params: dict[str, Any], dimension: int
) -> tuple[list[int], str | None]:
    """The dense channel's nearest ``DENSE_K`` among the items the caller may see, and how
    they were found (docs/retrieval.md):

    - ``exact``: the tenant has at most ``DENSE_CUTOVER`` items embedded under the
      model, or the filter is selective and the passing set is that small, or the model
      has no HNSW index: a scan of the passing set, nothing missed;
    - ``hnsw``: the HNSW index with iterative scan, filters applied in the scan;
    - ``hnsw+exact``: HNSW returned fewer than ``DENSE_K`` (it under-filled), so the
      passing set was scanned exactly instead; the channel never silently shortens."""
    if params["qvec"] is None:
        return [], None
    run = {**params, "k": DENSE_K, "cutover": DENSE_CUTOVER, "sample": DENSE_SAMPLE}
    n, seen = q.dense_plan(session=session, params=run)
    if n <= DENSE_CUTOVER or seen < DENSE_SELECTIVE * min(n, DENSE_SAMPLE):
        ids = q.dense_exact(session=session, params=run)
        if ids is not None:
            return ids, "exact"
    if dimension != 384:
        return q.dense_search(session=session, params=run, exact=True), "exact"
    ids = q.dense_search(session=session, params=run, exact=False)
    if len(ids) >= DENSE_K:
        return ids, "hnsw"
    return q.dense_search(session=session, params=run, exact=True), "hnsw+exact"


def _parts(r: dict[str, Any], record: ItemRecord) -> dict[str, float]:
    def num(key: str) -> float:
        return float("nan") if r[key] is None else float(r[key])

    return {
        "lexical": num("lexical"),
        "lexical_rank": num("lexical_rank"),
        "dense": num("dense"),
        "dense_rank": num("dense_rank"),
        "entity_overlap": num("entity_overlap"),
        "entity_rank": num("entity_rank"),
        "anchor_weight": num("anchor_weight"),
        "anchor_term": num("anchor_term"),
        "confidence": num("confidence"),
        "recency": num("recency"),
        "salience": record.salience,
        "effective_salience": num("effective_salience"),
        "fused": num("score"),
    }


def _diversify(ranked: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """One MMR pass over the gated pool, in stage order (an earlier stage's rows stay
    ahead in relevance: it is made non-increasing along the pool)."""
    if not ranked:
        return []
    top = max(float(r["score"]) for r in ranked) or 1.0
    pool: list[MmrCandidate] = []
    rel = 1.0
    for r in ranked:
        rel = min(rel, max(float(r["score"]), 0.0) / top)
        pool.append(MmrCandidate(int(r["id"]), rel, r["vector"], r["text"] or ""))
    by_id = {int(r["id"]): r for r in ranked}
    return [by_id[c.id] for c in mmr(pool, limit=limit)]


def _recall_live(
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    world: World,
    now: datetime,
    embedder: Embedder | None,
    qvec: str | None,
    fusion: Fusion,
) -> RecallResult:
    subjects = _subjects(world, request)
    inline = type_observations(world, list(request.observations), now)
    anchors = in_play(session, tenant, actor, request, world)
    params = _live_params(
        tenant,
        actor,
        request,
        world,
        subjects,
        inline,
        now,
        qvec=qvec,
        model=None if embedder is None else embedder.name,
        fusion=fusion,
        anchors=anchors,
    )
    dense: list[int] = []
    dense_path = None
    if subjects is None and embedder is not None:
        with _tracer.start_as_current_span("recall.candidates") as span:
            dense, dense_path = _dense_candidates(session, params, embedder.dimension)
            _count(span, len(dense), channel="dense")
    pool_size = top(request, world) + max(top(request, world), MMR_EXTRA)
    sources = ("subject",) if subjects is not None else ("text", "recent")
    stages: list[_Stage] = []
    taken: set[int] = set()
    for source in sources:
        need = pool_size - len(taken)
        if need <= 0:
            break
        if source == "text" and not params["tsquery"] and not dense:
            continue
        # without subjects the dense channel is its list of nearest items (docs/retrieval.md)
        listed = {"dense_ids": dense} if dense_path is not None else {}
        # the recent stage leaves out what a term matches, not the dense channel's
        # nearest: those the text stage took come again, so it walks as many more rows
        # and drops them (an item is ranked, and withheld, once)
        again = len(taken.intersection(dense)) if source == "recent" else 0
        stage = _walk(
            session, source, {**params, **listed, "limit": need + again}, need + again, dense
        )
        stage.rows = [r for r in stage.rows if int(r["id"]) not in taken][:need]
        taken.update(int(r["id"]) for r in stage.rows)
        stages.append(stage)
    with _tracer.start_as_current_span("recall.ranking") as span:
        ranked = _diversify([r for s in stages for r in s.rows], top(request, world))
        _count(span, len(ranked))
    records = {int(r["id"]): record_from_mapping(r) for r in ranked}
    pinned_rows: list[dict[str, Any]] = []
    if request.pinned:
        ids = sorted({int(i) for i in request.pinned})
        pinned_rows = q.live_ranked(
            session=session,
            source="ids",
            params={
                **params,
                "ids": ids,
                "cap": len(ids),
                "limit": len(ids),
                "min_confidence": 0.0,
            },
        )
        pinned_rows = [r for r in pinned_rows if r["id"] is not None]
        records.update((int(r["id"]), record_from_mapping(r)) for r in pinned_rows)
        pinned_ids = {int(r["id"]) for r in pinned_rows}
        ranked = [r for r in ranked if int(r["id"]) not in pinned_ids]
    withheld_rows: list[dict[str, Any]] = []
    if request.explain:
        returned = set(records)
        for stage in stages:
            with _tracer.start_as_current_span("recall.explain"):
                verdicts = q.live_verdicts(
                    session=session,
                    source=stage.source,
                    params={**stage.params, "walked": stage.walked},
                )
            fresh = [v for v in verdicts if int(v["id"]) not in returned]
            withheld_rows.extend(fresh)
            returned.update(int(v["id"]) for v in fresh)
    withheld_records = [record_from_mapping(v) for v in withheld_rows]
    given = {(f.subject, f.attribute): f for f in inline}
    values_of = {
        int(r["id"]): _values(records[int(r["id"])], r["condition_values"], given, now)
        for r in [*pinned_rows, *ranked]
    }
    snapshot = None
    if withheld_records or any(v is None for v in values_of.values()):
        snapshot = build_snapshot(
            session=session,
            world=world,
            subjects=_conditions_subjects([*records.values(), *withheld_records]),
            at=now,
            inline=inline,
            current=True,
        )
    checks: dict[int, bool] = {}

    def result_item(r: dict[str, Any], *, pinned: bool = False) -> RecalledItem:
        record = records[int(r["id"])]
        if r["checked"]:
            checks[record.id] = True
        given_values = values_of[record.id]
        if given_values is None:
            assert snapshot is not None
            given_values = tuple(condition_values(record, world, snapshot))
        return RecalledItem(
            record, float(r["score"]), _parts(r, record), given_values, bool(r["checked"]), pinned
        )

    items = [result_item(r) for r in ranked]
    pinned_items = [result_item(r, pinned=True) for r in pinned_rows]
    channels = ["lexical"] if params["tsquery"] else []
    if qvec is not None:
        channels.append("dense")
    if params["query_entities"]:
        channels.append("entity")
    withheld: list[Withheld] = []
    missing: list[str] = []
    for row, record in zip(withheld_rows, withheld_records, strict=True):
        gate = next((g for g in _REPORTED if not row[f"g_{g}"]), None)
        if gate is None:
            continue
        if _checked(row):
            checks[record.id] = bool(row["g_activated_version"])
        values: tuple[ConditionValue, ...] = ()
        if gate in {"applicability", "validity_window"}:
            assert snapshot is not None
            values = tuple(condition_values(record, world, snapshot))
            missing.extend(_blocking_unknowns(record, values))
        gate_verdicts = tuple((g, bool(row[f"g_{g}"])) for g in _REPORTED)
        withheld.append(Withheld(record, gate, record.state, values, gate_verdicts))
    return RecallResult(
        tuple(items),
        now,
        subjects,
        tuple(withheld),
        tuple(dict.fromkeys(missing)),
        snapshot,
        checks,
        tuple(pinned_items),
        tuple(channels),
        sum(st.not_embedded for st in stages),
        dense_path,
        anchors=anchors,
    )


def _known(value: float | None) -> float | None:
    """A score part, None when it is unknown (NaN or absent)."""
    return None if value is None or math.isnan(value) else value


def _pack(
    result: RecallResult, request: RecallRequest, counter: Callable[[str], int], *, floor: int
) -> Packed:
    """The result rendered for a prompt within ``request.budget`` tokens, each anchor in
    play (``result.anchors``, highest weight first) given ``floor`` entries
    (``anchors.floor``)."""
    entries = [
        PackEntry(
            id=r.item.id,
            kind=r.item.kind,
            text=r.item.text or "",
            subject=r.item.subject,
            attribute=r.item.attribute,
            object=r.item.object_display,
            scope=(r.item.scope_axis, r.item.scope_id),
            facets=r.item.facets,
            evidence=r.item.evidence,
            verified_by=r.item.verified_by,
            recorded_at=r.item.recorded_at,
            score=r.score,
            pinned=r.pinned,
            released_skill=r.item.kind == "skill" and r.item.release_state == "released",
            confidence=_known(r.parts.get("confidence")),
        )
        for r in (*result.pinned, *result.items)
    ]
    if result.knowledge:
        entries = _knowledge_entries(result, entries)
    assert request.budget is not None
    return pack(
        entries,
        budget=request.budget,
        count=counter,
        anchors=[(a.axis, a.id) for a in result.anchors],
        floor=floor,
    )


def _knowledge_entries(result: RecallResult, entries: list[PackEntry]) -> list[PackEntry]:
    """The pack entries in the merged order (pinned items first), passages among them,
    each tagged ``[knowledge <ref>]`` (``PackEntry.ref``)."""
    by_item = {e.id: e for e in entries[len(result.pinned) :]}
    out = entries[: len(result.pinned)]
    for r in result.ranked():
        if isinstance(r, RecalledItem):
            out.append(by_item[r.item.id])
            continue
        out.append(
            PackEntry(
                id=r.id,
                kind="passage",
                text=r.text,
                subject=r.document_id,
                attribute=" / ".join(r.heading_path),
                object="",
                scope=("knowledge", r.document_id),
                facets=(),
                evidence=(),
                verified_by=None,
                recorded_at=r.recorded_at,
                score=r.score,
                ref=r.ref,
            )
        )
    return out


def _recall_as_of(
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    world: World,
    now: datetime,
) -> RecallResult:
    """The history-reading path: every gate as of ``request.as_of``."""
    at = request.as_of or now
    subjects = _subjects(world, request)
    inline = type_observations(world, list(request.observations), at)
    snapshot = build_snapshot(
        session=session, world=world, subjects=None, at=at, known_at=at, inline=inline
    )
    params: dict[str, Any] = {
        "tenant": tenant,
        **actor.gate_params("capabilities"),
        "as_of": at,
        "at": at,
        "case_id": request.case_id,
        **_private_params(request, world),
        "purpose": request.purpose,
        "snapshot": snapshot.to_json(),
        "tsquery": _tsquery(request.query),
        "query_entities": list(subjects or ()),
        "all_subjects": subjects is None,
        "subjects": list(subjects or ()),
        "limit": top(request, world),
        "half_life_s": max(world.policy.salience_half_life.total_seconds(), 1.0),
        "blocked": [],
    }
    checks = lifecycle.run_checks(
        session=session,
        tenant=tenant,
        items=[record_from_row(r) for r in q.to_check(session=session, params=params)],
        world=world,
        snapshot=snapshot,
        now=now,
        actor=actor.id,
        record=False,
    )
    params["blocked"] = sorted(i for i, c in checks.items() if not c.passed)
    rows = q.gated_ranked(session=session, params=params)
    items = []
    for row in rows:
        record = record_from_row(row)
        items.append(
            RecalledItem(
                record,
                float(row.score),
                {
                    "lexical": float(row.lexical),
                    "lexical_rank": float(row.lexical_rank),
                    "entity_overlap": float(row.entity_overlap),
                    "entity_rank": float(row.entity_rank),
                    "salience": record.salience,
                    "effective_salience": float(row.effective_salience),
                },
                tuple(condition_values(record, world, snapshot)),
                record.id in checks,
            )
        )
    withheld: list[Withheld] = []
    missing: list[str] = []
    if request.explain:
        returned = {r.item.id for r in items}
        for row in q.candidates(session=session, params=params):
            if int(row.id) in returned:
                continue
            gate = next((g for g in _REPORTED if not getattr(row, f"g_{g}")), None)
            if gate is None:
                continue  # passed every gate; fell below the limit
            record = record_from_row(row)
            values: tuple[ConditionValue, ...] = ()
            if gate in {"applicability", "validity_window"}:
                values = tuple(condition_values(record, world, snapshot))
                missing.extend(_blocking_unknowns(record, values))
            verdicts = tuple((g, bool(getattr(row, f"g_{g}"))) for g in _REPORTED)
            withheld.append(Withheld(record, gate, row.state_then, values, verdicts))
    return RecallResult(
        tuple(items),
        at,
        subjects,
        tuple(withheld),
        tuple(dict.fromkeys(missing)),
        snapshot,
        {i: c.passed for i, c in checks.items()},
    )


def needs(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    now: datetime,
    world: World | None = None,
) -> list[tuple[str, str]]:
    """What a refresh would pull before this live recall (model §2.1): each
    ``(canonical subject, attribute)`` that a condition (required or excluded) of an
    item the recall could return names and that has no observation counting at
    ``now``: none, one older than the attribute's ``max_age``, or, for an item waiting
    for its verify-on-next-use check, one older than the check's instant. Attributes
    given inline, and undeclared ones (no source could store them), are not needed.

    The items are those of the request's subjects, widened by topology as the recall
    widens them, and its pinned items, that the caller may see and that pass every
    gate but applicability (the one a pull decides). One read; a recall without
    subjects, or as of an instant, has no needs a pull could meet (``InputError``:
    a refresh pulls for named subjects, now).
    """
    actor.require("recall")
    if request.as_of is not None:
        raise InputError(
            "refresh pulls what is observed now; an as-of recall reads the past",
            attribute="refresh",
        )
    if request.subjects is None:
        raise InputError(
            "refresh needs subjects: it pulls what their items' conditions lack",
            attribute="refresh",
        )
    world = world or _load_world(session=session, tenant=tenant)
    subjects = _subjects(world, request)
    inline = type_observations(world, list(request.observations), now)
    anchors = in_play(session, tenant, actor, request, world)
    params = _live_params(tenant, actor, request, world, subjects, inline, now, anchors=anchors)
    params["ids"] = sorted({int(i) for i in request.pinned})
    return q.needs(session=session, params=params)


@dataclass(frozen=True)
class UseRecord:
    """What ``record_use`` recorded: the used items the request admits (they entered the
    context), those it refused with the reason, and the verify-on-next-use checks run."""

    used: tuple[int, ...]
    refused: dict[int, str]
    checks: dict[int, bool] = field(default_factory=dict)


def record_use(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    request: RecallRequest,
    used: Sequence[int],
    now: datetime,
    world: World | None = None,
) -> UseRecord:
    """Record the use of ``used`` items from a recall made with ``request`` (model §6).

    Nothing the client says about results is trusted: each used item is checked
    here against every gate of the same request, and only those the request
    admits enter the case's context and get their last use. A secondary TTL that
    ran out is persisted first; every verify-on-next-use check among the used
    items is run and recorded (passed: ``active``; failed:
    ``needs_reverification``), and so is every failed check of the request: a
    verify-on-next-use item of its subjects (all of them without subjects) that
    passes the request's other gates and fails its check goes to
    ``needs_reverification`` (model §4.3). With a case, the request's shadow log is
    recorded too. Items the caller may not see are refused as ``not_found``; items
    below the request's ``min_confidence`` as ``min_confidence``.
    """
    actor.require("recall")
    if request.as_of is not None:
        raise InputError("an as-of recall is a look at the past: its results are not used")
    world = world or _load_world(session=session, tenant=tenant)
    ids = sorted({int(i) for i in used})
    subjects = _subjects(world, request)
    inline = type_observations(world, list(request.observations), now)
    anchors = in_play(session, tenant, actor, request, world)
    params = _live_params(tenant, actor, request, world, subjects, inline, now, anchors=anchors)
    lifecycle.expire_ttl(
        session=session, tenant=tenant, world=world, now=now, actor=lifecycle.SYSTEM_ACTOR, ids=ids
    )
    point = q.live_verdicts(
        session=session,
        source="ids",
        params={**params, "ids": ids, "cap": max(len(ids), 1), "walked": _ALL},
    )
    rows = {int(r["id"]): r for r in point}
    refused: dict[int, str] = {}
    admitted: list[int] = []
    to_check: list[ItemRecord] = []
    for item_id in ids:
        row = rows.get(item_id)
        if row is None:
            refused[item_id] = "not_found"
            continue
        if subjects is not None and row["subject"] not in subjects:
            refused[item_id] = "subject"
            continue
        gate = next((g for g in _REPORTED if not row[f"g_{g}"]), None)
        if _checked(row):
            to_check.append(record_from_mapping(row))
        if gate is None and float(row["confidence"]) < params["min_confidence"]:
            refused[item_id] = "min_confidence"  # the request filtered it out
        elif gate is None:
            admitted.append(item_id)
        else:
            refused[item_id] = gate
    # the verify-on-next-use items of the request's subjects that it checked (they pass
    # every other gate) and withheld because the check failed: recorded too (§4.3)
    pending = q.live_verdicts(
        session=session,
        source="pending",
        params={**params, "cap": _ALL, "walked": _ALL},
    )
    failing = [
        record_from_mapping(r)
        for r in pending
        if int(r["id"]) not in rows and _checked(r) and not r["g_activated_version"]
    ]
    checks: dict[int, bool] = {}
    if to_check or failing:
        snapshot = build_snapshot(
            session=session,
            world=world,
            subjects=_conditions_subjects([*to_check, *failing]),
            at=now,
            inline=inline,
            current=True,
        )
        outcome = lifecycle.run_checks(
            session=session,
            tenant=tenant,
            items=[*to_check, *failing],
            world=world,
            snapshot=snapshot,
            now=now,
            actor=actor.id,
            record=False,
        )
        used_ids = {r.id for r in to_check}
        checks = {i: c.passed for i, c in outcome.items() if i in used_ids or not c.passed}
        # a failing item whose secondary TTL ran out is still stored as active: persist
        # the expiry first, so its failed check is recorded from verify_on_next_use
        # (expire_ttl moves only those: an item stored as waiting is left as it is)
        expired = [r.id for r in failing if not checks.get(r.id, True)]
        if expired:
            lifecycle.expire_ttl(
                session=session,
                tenant=tenant,
                world=world,
                now=now,
                actor=lifecycle.SYSTEM_ACTOR,
                ids=expired,
            )
        lifecycle.record_checks(
            session=session, tenant=tenant, outcomes=checks, now=now, actor=actor.id
        )
        for i, passed in checks.items():
            if i not in used_ids:
                continue
            if passed and i not in admitted and refused.get(i) != "min_confidence":
                admitted.append(i)
                refused.pop(i, None)
            elif not passed and i in admitted:
                admitted.remove(i)
                refused[i] = "activated_version"
    admitted.sort()
    _record(session, tenant, request, admitted, params, now)
    return UseRecord(tuple(admitted), refused, checks)


def _checked(row: dict[str, Any]) -> bool:
    """A verdict row (``LIVE_VERDICTS``) of a verify-on-next-use item whose check ran:
    it passes every other gate (model §4.3), so ``g_activated_version`` is the check."""
    return bool(
        row["checked"]
        and row["g_released"]
        and row["g_purpose"]
        and row["g_applicability"]
        and row["g_validity_window"]
    )


def _record(
    session: Session,
    tenant: str,
    request: RecallRequest,
    used: list[int],
    params: dict[str, Any],
    now: datetime,
) -> None:
    """What using recalled items leaves behind: last use, context entries, the shadow log."""
    lifecycle.record_use(session=session, tenant=tenant, ids=used, at=now)
    if request.case_id is None:
        return
    lifecycle.enter_context(
        session=session, tenant=tenant, case_id=request.case_id, ids=used, at=now, via="recall"
    )
    shadow = q.live_verdicts(
        session=session, source="shadow", params={**params, "cap": _ALL, "walked": _ALL}
    )
    lifecycle.log_shadow(
        session=session,
        tenant=tenant,
        case_id=request.case_id,
        entries=[
            (int(r["id"]), bool(r["g_applicability"]))
            for r in shadow
            if r["stored_state"] == "shadow"
            and r["g_released"]
            and r["g_purpose"]
            and r["g_validity_window"]
            and not (r["scope_axis"] == "case" and r["scope_id"] == request.case_id)
            # the owner's own lesson in shadow is admitted to it: in its context, not
            # a shadow candidate of its recall
            and not (r["scope_axis"] == "agent" and r["scope_id"] == params["principal"])
        ],
        now=now,
    )
