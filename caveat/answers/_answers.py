"""The schemas of what every door answers: one named model per answer, as the JSON forms
of ``caveat.app.views`` are (the HTTP API documents them in /openapi.json; the MCP
tools return them as structured content, with them as their output schemas).

Each model names the fields its view sends, field for field (tests/caveat/
test_door_parity.py checks the answers of both doors against them, as extra="forbid"
would); ``extra="allow"`` stays so that a client built on them ignores what a newer
server adds. A door sends the view's dict as it is (HTTP as the response; MCP as
the structured content, which the SDK checks against the model), never a model's
dump, so no default a model fills in reaches an answer. Values whose encoding is the
predicate language's own (an item's object, an observed value, a fact's value, an
audit row's detail) are ``JsonValue``: any JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer

#: An item's object, a condition's shown value: a JSON scalar.
JSONScalar = int | float | bool | str

__all__ = [
    "AnchorOut",
    "AttachmentOut",
    "AuditPage",
    "AuditReportOut",
    "AwaitingOut",
    "BlockOut",
    "BlockSetOut",
    "BlocksOut",
    "CaseOut",
    "CitationOut",
    "ClosedOut",
    "ContextOut",
    "DiffOut",
    "DossierOut",
    "EventsOut",
    "EvidenceOut",
    "FactsOut",
    "HealthOut",
    "ItemView",
    "KeyPage",
    "LineageOut",
    "OutcomeOut",
    "OutcomesOut",
    "PassageOut",
    "PreviewOut",
    "RecallOut",
    "RedactedOut",
    "ReviewOut",
    "RevokedOut",
    "ShadowPage",
    "SourceErrorOut",
    "SweepOut",
    "TokenIssued",
    "TokenOut",
    "TokenPage",
    "TurnOut",
    "TurnsOut",
    "UseOut",
]


def _iso(value: datetime) -> str:
    return value.isoformat()


#: An ISO 8601 instant as ``datetime.isoformat`` spells it (``+00:00``): a case's, a
#: citation's, an audit row's. An observation's instant is a timestamp literal (``Z``).
Instant = Annotated[datetime, PlainSerializer(_iso, return_type=str)]


class Answer(BaseModel):
    """An answer's object: the fields named, and possibly more."""

    model_config = ConfigDict(extra="allow")


class ItemView(BaseModel):
    """One item as a caller sees it (model §1), with its provenance."""

    model_config = ConfigDict(frozen=True)

    id: int
    kind: str
    subject: str
    attribute: str
    object: JSONScalar
    object_type: str | None
    required: list[str]
    excluded: list[str]
    evidence: list[str]
    derived_from: list[int]
    epistemic: str
    content_type: str | None
    scope: str
    facets: list[str]
    purposes: list[str]
    text: str | None
    salience: float
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None
    state: str
    verified_by: str | None
    verified_at: datetime | None
    version: int | None
    release_state: str | None
    created_by: str


class Observed(Answer):
    """The observation behind a condition: its typed value (``views.typed_value``), when
    it was observed (a timestamp literal), its source, whether it was given inline, and
    where a pulled one came from."""

    type: str
    value: JsonValue
    literal: str
    observed_at: str = Field(description='A timestamp literal: "2026-12-03T10:00:00Z".')
    source: str | None
    inline: bool
    provenance: dict[str, JsonValue] | None = Field(
        description="Where a fact source's pull found it (docs/sources.md): the source, "
        'its query or pointer, the sample\'s time: {"source": "prom", "query": "...", '
        '"sample_time": "..."}; null for an observation typed or given inline.'
    )


class ConditionOut(Answer):
    """A condition with its value now and the observation behind it."""

    condition: str
    list: Literal["required", "excluded"] | str
    value: str = Field(description="TRUE, FALSE or UNKNOWN.")
    subject: str | None
    attribute: str | None
    observed: Observed | None


class RecalledOut(Answer):
    source: Literal["memory"] = Field(description="An item of memory (model §6).")
    item: ItemView
    score: float
    parts: dict[str, float]
    conditions: list[ConditionOut]
    checked: bool
    pinned: bool


class PassageOut(Answer):
    """A knowledge passage a recall returned (model §6 "Knowledge beside memory"): a
    section of a runbook or postmortem, through the tenant, capability and purpose gates,
    never applicability (it states no conditions). ``ref`` is what an item cites as
    evidence."""

    source: Literal["knowledge"]
    id: int
    ref: str = Field(description='"doc:<document id>#<fragment>"')
    document_id: str
    version: int
    heading_path: list[str]
    fragment: str
    uri: str | None
    title: str | None
    text: str
    score: float
    parts: dict[str, float] = Field(
        description="lexical, lexical_rank, dense, dense_rank (when found), fused."
    )
    recorded_at: str
    cited_by: list[int] = Field(
        default_factory=list,
        description="The items you may see that cite this passage as evidence (ids).",
    )


class OrderOut(Answer):
    """One place of the merged ranked list: an item (memory) or a passage (knowledge)."""

    source: Literal["memory", "knowledge"]
    id: int


class KnowledgeCountsOut(Answer):
    """Passages the caller may see that the query's channels found (before the purpose
    gate), and how many were returned. A passage hidden from the caller is never counted."""

    considered: int
    returned: int


class WithheldOut(Answer):
    """An item a gate withheld (explain), compactly (model §6, ``views.withheld_view``):
    id, subject, attribute, text, the gate; for ``activated_version`` the state that
    withheld it (and ``scope``, for an item of another case, or ``release_state``, for an
    unreleased skill); the conditions that failed or were UNKNOWN. The three
    ``activated_version`` fields are sent only when they apply."""

    id: int
    subject: str
    attribute: str
    text: str | None
    gate: str
    state: str | None = None
    scope: str | None = None
    release_state: str | None = None
    conditions: list[ConditionOut]


class PackedBlockOut(Answer):
    """A core block packed first (or left out for the budget)."""

    label: str
    scope: str
    item_id: int


class PackedOut(Answer):
    text: str
    tokens: int
    budget: int
    items: list[int]
    omitted: list[int]
    blocks: list[PackedBlockOut] = Field(
        default_factory=list, description="The core blocks packed first, in order."
    )
    blocks_omitted: list[PackedBlockOut] = Field(
        default_factory=list, description="Core blocks that did not fit (never cut)."
    )
    knowledge: list[str] = Field(
        default_factory=list, description="Knowledge passages packed (refs), in order."
    )
    knowledge_omitted: list[str] = Field(
        default_factory=list, description="Knowledge passages that did not fit (refs)."
    )


class SourceErrorOut(Answer):
    """A fact source a recall's refresh asked that failed or timed out."""

    source: str = Field(description="The source's name in sources.yaml.")
    error: str = Field(description='What went wrong: "timed out", "connection refused", ...')
    attributes: list[str] = Field(description="The attributes it was asked for.")


class AnchorOut(Answer):
    """An anchor the ranking and packing ran with (docs/retrieval.md, "Anchors")."""

    axis: str
    id: str
    weight: float
    origin: Literal["default", "request"] = Field(
        description="default: built from who asks; request: the request named it"
    )


class RecallOut(Answer):
    """A recall's answer: ranked items, pinned items, with explain what was withheld, and
    for a refresh the sources that failed (``source_errors``; empty without one)."""

    items: list[RecalledOut]
    pinned: list[RecalledOut]
    knowledge: list[PassageOut] = Field(
        default_factory=list,
        description="Knowledge passages (sources with knowledge), in rank order.",
    )
    order: list[OrderOut] = Field(
        default_factory=list,
        description="The merged ranked list of items and passages, best first; the "
        "limit applies to it.",
    )
    knowledge_counts: KnowledgeCountsOut | None = None
    withheld: list[WithheldOut]
    missing_observations: list[str]
    source_errors: list[SourceErrorOut]
    channels: list[str]
    not_embedded: int
    dense_search: str | None
    anchors: list[AnchorOut] = Field(
        description="The anchors in play, highest weight first (none for an as-of recall)."
    )
    packed: PackedOut | None
    blocks: list[BlockOut] = Field(
        default_factory=list,
        description="The core blocks in play (docs/blocks.md), packed or not.",
    )


class UseOut(Answer):
    """What record_use recorded: the ids used, and the refused ones with the reason."""

    used: list[int]
    refused: dict[str, str]


class ContextOut(Answer):
    """The context guard: usable ids, dropped ids with the reason, checks run."""

    usable: list[int]
    dropped: dict[str, str]
    checked: dict[str, bool]
    conditions: dict[str, list[ConditionOut]] = Field(
        description="By id, the condition values of each item dropped as applicability."
    )


class CaseOut(Answer):
    id: str
    subjects: list[str]
    status: str
    outcome: str | None
    opened_at: Instant
    closed_at: Instant | None


class ConfidenceMove(Answer):
    before: float
    after: float


class ClosedOut(CaseOut):
    """A closed case, the signal each cited item got and, by item id, the confidence its
    citation evidence moved (docs/lifecycle.md)."""

    signals: dict[str, str]
    confidence: dict[str, ConfidenceMove]


class CitationOut(Answer):
    """A citation: how the item influenced the case, what it expected and what was
    observed (both or neither), why, the derived compliance, and the signal its case's
    close gave (``kind``, ``subject``, ``attribute``: the item's)."""

    case: str
    item: int
    influence: str
    compliance: str | None
    cited_at: Instant
    cited_by: str
    expected: JsonValue = None
    observed: JsonValue = None
    rationale: str | None = None
    signal: str | None = None
    signalled_at: Instant | None = None
    kind: str | None = None
    subject: str | None = None
    attribute: str | None = None


class CitationPage(Answer):
    """A page of citations, oldest first; ``next`` is the cursor of the next page."""

    items: list[CitationOut]
    next: str | None


class EnforcementOut(Answer):
    """A skill's enforcement level as an SME set it."""

    item: int
    level: Literal["advisory", "recommended", "required"]
    previous: str | None = None
    set_at: Instant
    set_by: str
    reason: str | None


class FactOut(Answer):
    """A stored fact: its typed value (``views.typed_value``), when it was observed (a
    timestamp literal) and its source."""

    subject: str
    attribute: str
    type: str
    value: JsonValue
    literal: str
    observed_at: str = Field(description='A timestamp literal: "2026-12-03T10:00:00Z".')
    source: str | None


class FactsOut(Answer):
    facts: list[FactOut]


class OutcomeOut(Answer):
    """What became of one item of a batch (``index``: its position in the request)."""

    index: int
    outcome: Literal["accepted", "duplicate", "rejected"]
    item_id: int | None
    state: str | None
    superseded: int | None
    code: str | None
    message: str | None
    gate: str | None


class OutcomesOut(Answer):
    outcomes: list[OutcomeOut]


class DiffEntryOut(Answer):
    item: int
    cause: str
    detail: dict[str, JsonValue]


class DiffOut(Answer):
    """What became and stopped being recallable between two instants, with causes."""

    from_: Instant = Field(alias="from")
    to: Instant
    subjects: list[str] | None
    purpose: str | None
    became: list[DiffEntryOut]
    stopped: list[DiffEntryOut]

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class HealthOut(Answer):
    status: str


class EvidenceOut(Answer):
    evidence: str
    readers: list[str]
    deny: list[str] = []
    classification: str | None = None


class AttachmentOut(Answer):
    link_id: int
    item_id: int
    evidence_id: str
    stance: str
    strength: float
    source_kind: str
    at: Instant
    confidence_before: float
    confidence_after: float


class RevokedOut(Answer):
    item: ItemView
    reopened: list[int]


class RedactedOut(Answer):
    item: int
    redacted: bool


class NodeOut(Answer):
    """One item of a lineage (depth < 0: ancestors, 0: the item, > 0: descendants)."""

    id: int
    state: str
    depth: int
    kind: str
    subject: str
    attribute: str
    text: str | None
    redacted: bool


class LineageOut(Answer):
    item: NodeOut
    ancestors: list[NodeOut]
    descendants: list[NodeOut]


class EventOut(Answer):
    id: int
    type: str
    subjects: list[str]
    changes: dict[str, JsonValue]
    principal: str | None
    occurred_at: Instant
    source: str | None
    external_id: str | None
    matched: list[int]
    needs_reverification: list[int]
    verify_on_next_use: list[int]


class SkippedOut(Answer):
    key: str
    reason: str
    line: int | None


class EventsOut(Answer):
    events: list[EventOut]
    facts: list[FactOut] = Field(default_factory=list)
    skipped: list[SkippedOut] = Field(default_factory=list)


class AuditRow(Answer):
    seq: int
    at: Instant
    actor: str
    action: str
    item_id: int | None
    code: str | None
    detail: dict[str, JsonValue]
    hash: str
    #: The detail was erased by ``forget`` (``detail`` is then empty; the digest stays).
    erased: bool = False


class AuditPage(Answer):
    items: list[AuditRow]
    next: str | None


class AuditReportOut(Answer):
    ok: bool
    checked: int
    broken_at: int | None
    reason: str | None
    head: str | None
    #: Rows whose detail an erasure (``forget``) removed, each verified by its digest.
    erased: int = 0


class SweepOut(Answer):
    archived: list[int]
    expired: list[int]
    #: working memory whose ``working_memory_ttl`` ran out, archived
    working_memory: list[int] = []


class PolicyOut(Answer):
    min_matched_cases: int
    min_agreement: float


class ShadowStatsOut(Answer):
    item_id: int
    subject: str
    attribute: str
    text: str | None
    cases: int
    matched: int
    pending: int
    agreed: int


class ShadowPage(Answer):
    items: list[ShadowStatsOut]
    next: str | None
    policy: PolicyOut
    would_graduate: list[int]
    would_drop: list[int]


class KeyItemOut(Answer):
    id: int
    case_id: str
    state: str
    value: str


class KeyOut(Answer):
    """A promotion key: its cases, each distinct value with its holders, and the items."""

    subject: str
    attribute: str
    kind: str
    required: list[str]
    excluded: list[str]
    cases: list[str]
    values: dict[str, list[int]]
    items: list[KeyItemOut]


class KeyPage(Answer):
    items: list[KeyOut]
    next: str | None


class TokenOut(Answer):
    id: str
    principal: str
    role: str
    capabilities: list[str]
    created_at: Instant
    created_by: str
    revoked_at: Instant | None
    clearance: str


class TokenIssued(TokenOut):
    """A new token: ``token`` is in this answer once."""

    token: str


class TokenPage(Answer):
    items: list[TokenOut]
    next: str | None


class ShadowRowOut(ShadowStatsOut):
    agreement: float | None
    next_close: str | None


class ReopenedOut(Answer):
    item_id: int
    subject: str
    attribute: str
    text: str | None
    state: str
    at: Instant | None
    actor: str | None
    reason: str | None
    cause: dict[str, JsonValue]
    check_since: Instant | None


class RefusalOut(Answer):
    seq: int
    at: Instant
    actor: str
    code: str
    gate: str | None
    message: str | None
    subject: str | None
    attribute: str | None


class RefusalGroupOut(Answer):
    code: str
    gate: str | None
    count: int
    last_at: Instant
    subjects: list[str]
    recent: list[RefusalOut]


class AwaitingOut(Answer):
    """An open case its sender reported over without an outcome: ``close_as`` are the
    outcomes the caller may close it with (``POST /v1/cases/{id}/close``)."""

    case_id: str
    subjects: list[str]
    opened_at: Instant
    since: Instant
    reported_by: str
    cited: list[int]
    close_as: list[Literal["confirmed", "rejected"]]


class FalseNowOut(Answer):
    """An active item whose conditions are false now, with the conditions that decide it."""

    item_id: int
    subject: str
    attribute: str
    text: str | None
    at: Instant
    conditions: list[DossierConditionOut]


class ReviewOut(Answer):
    """The review queue."""

    shadow: list[ShadowRowOut]
    policy: PolicyOut
    reopened: list[ReopenedOut]
    contested: list[KeyOut]
    candidates: list[KeyOut]
    refusals: list[RefusalGroupOut]
    refusals_since: Instant | None
    awaiting: list[AwaitingOut]
    refusals_total: int = Field(description="Refused writes in the window (not codes).")
    false_now: list[FalseNowOut] = Field(
        description="Active items whose conditions are false now (recall leaves them out)."
    )


class DossierConditionOut(ConditionOut):
    age_seconds: float | None
    to_observe: str | None


class CitedPassageOut(Answer):
    """The knowledge passage an evidence ref ``doc:<id>#<fragment>`` names (model §6), as
    the reader may read it now."""

    ref: str
    document_id: str
    title: str | None
    version: int
    heading_path: list[str]
    text: str
    uri: str | None


class EvidenceSourceOut(Answer):
    id: str
    title: str | None
    uri: str | None
    restricted: bool
    test_outcome: str | None
    passage: CitedPassageOut | None = Field(
        default=None,
        description="For a knowledge passage's ref: the passage, when the reader may read it.",
    )


class EvidenceLinkOut(Answer):
    evidence_id: str
    stance: str
    strength: float
    source_kind: str
    at: Instant
    actor: str


class CitationRowOut(Answer):
    case_id: str
    influence: str
    compliance: str | None
    cited_at: Instant
    cited_by: str
    signal: str | None
    expected: JsonValue = None
    observed: JsonValue = None
    rationale: str | None = None


class DossierLineage(Answer):
    ancestors: list[NodeOut]
    descendants: list[NodeOut]
    edges: list[list[int]]


class HistoryOut(Answer):
    seq: int
    at: Instant
    actor: str
    action: str
    code: str | None
    detail: dict[str, JsonValue]


class DossierOut(Answer):
    """An item with its conditions now, evidence, confidence, citations, lineage, history."""

    item: ItemView
    at: Instant
    conditions: list[DossierConditionOut]
    evidence: list[EvidenceSourceOut]
    links: list[EvidenceLinkOut]
    confidence: float
    citations: list[CitationRowOut]
    lineage: DossierLineage
    actions: list[str]
    enforcement: EnforcementOut | None = None
    binding: bool | None = None
    history: list[HistoryOut]
    false_now: list[str] = Field(
        description="For an active item: its conditions false now (recall leaves it out)."
    )


class RefusalPreview(Answer):
    code: str
    detail: str


class PreviewOut(Answer):
    """What an SME action would do, before it is done."""

    action: str
    item: int
    from_state: str
    to_state: str | None
    effects: list[str]
    reopens: list[NodeOut]
    refusal: RefusalPreview | None


class BlockOut(Answer):
    """One row of a block: label, anchor, text, the item holding it, when and by whom."""

    label: str
    scope: str
    text: str
    item_id: int
    recorded_at: datetime
    created_by: str
    superseded_at: datetime | None


class BlocksOut(Answer):
    blocks: list[BlockOut]


class BlockSetOut(Answer):
    """What a set did: ``accepted`` (a new row; ``superseded`` the one before) or
    ``duplicate`` (the same text: nothing new)."""

    outcome: str
    item_id: int
    superseded: int | None
    label: str
    scope: str


class TurnOut(Answer):
    """An agent turn for the server-side extractor and where it stands: ``queued`` (with
    when it is next due), ``done`` (with its proposals' outcomes) or ``failed`` (with the
    last error)."""

    id: str
    state: Literal["queued", "done", "failed"]
    principal: str
    case: str | None
    scope: str
    evidence: list[str]
    subjects: list[str]
    attempts: int
    next_attempt_at: Instant | None
    last_error: str | None
    outcomes: list[OutcomeOut] | None
    submitted_at: Instant
    updated_at: Instant
    done_at: Instant | None


class TurnsOut(Answer):
    """Turns, newest first."""

    turns: list[TurnOut]
