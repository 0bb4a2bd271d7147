"""The request models every door takes: one recall request, validated the same way at
HTTP (``GET /v1/recall``'s query, ``POST /v1/recall``'s and ``POST /v1/record-use``'s
bodies), at MCP (the ``recall``, ``explain``, ``record_use`` and ``check_context``
tools' inputs) and at the CLI (``caveat recall``'s options).

``RecallIn`` has a field for every field of ``recall.RecallRequest`` a caller may set
(``case`` is the request's ``case_id``), and the door-level ``refresh`` and
``refresh_deadline_ms`` (a pull before the read: ``caveat.connectors.recall``; the
recall itself stays a pure read); ``tests/caveat/test_doors.py`` enumerates them and
fails when a door lacks one. ``RecordUseIn`` takes the recall's request as it was made,
``refresh`` included, and pulls nothing: it re-checks on what is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, field_validator

import claims
import factgen
import recall
from caveat.app._input import anchor_fields

__all__ = [
    "AnchorObject",
    "CiteIn",
    "CiteToolIn",
    "ContextIn",
    "ObservationIn",
    "RecallIn",
    "RecordUseIn",
    "Strict",
    "TurnIn",
]


class Strict(BaseModel):
    """A request: no unknown keys, and no coercion (``"1"`` is not an id)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ObservationIn(Strict):
    """An observation: a value the tenant's schema types (a wrong type stores nothing)."""

    subject: str = Field(min_length=1, description="An entity name or alias: payment-api.")
    attribute: str = Field(min_length=1, description="A declared attribute.")
    value: str | int | float | bool = Field(description="The value, as the schema types it.")
    source: str | None = Field(default=None, description="Where it was seen.")

    def observation(self) -> factgen.Observation:
        return factgen.Observation(self.subject, self.attribute, self.value, self.source)


class AnchorObject(Strict):
    """A scope anchor to boost: items anchored (scope) or faceted there rank higher."""

    axis: str = Field(min_length=1, description="The axis: case, service, team, ...")
    id: str = Field(min_length=1, description="The anchor on that axis.")
    weight: float | None = Field(
        default=None,
        ge=0.5,
        le=2,
        description="The boost (bounded); none: the tenant policy's anchors.weight (1.5).",
    )

    def anchor(self) -> recall.Anchor:
        return recall.Anchor(self.axis, self.id, self.weight)


#: A scope anchor: ``AXIS:ID`` (as items are read), or an object with a weight.
AnchorIn = (
    Annotated[
        str,
        AfterValidator(lambda text: ":".join(claims.split_anchor(text))),
        Field(description='"axis:id" (e.g. "service:payment-api"), the policy\'s weight'),
    ]
    | AnchorObject
)

#: A case id: the open case asking (``not_found`` when there is no such case).
CaseId = Annotated[
    str | None,
    Field(min_length=1, description="The case asking (an open case's id: INC-1041)."),
]


def _memory_only() -> list[Literal["memory", "knowledge"]]:
    return ["memory"]


class RecallIn(Strict):
    """A recall: the question, who and what it is about, and what is seen now."""

    query: str = Field(description="The symptom, as an engineer types it.")
    subjects: list[str] | None = Field(
        default=None, description="Affected subjects (and their topology); none: every one."
    )
    purpose: str | None = Field(
        default=None, description="The purpose of use: an item listing purposes needs it."
    )
    case: CaseId = None
    observations: list[ObservationIn] = Field(
        default_factory=list, description="Observations made now, given inline (not stored)."
    )
    as_of: Annotated[datetime | None, Field(strict=False)] = Field(
        default=None, description="What was believed then (ISO 8601; UTC without an offset)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description="How many items (none: the tenant policy's recall.limit, 10).",
    )
    explain: bool = Field(default=False, description="Also say what was withheld and why.")
    anchors: list[AnchorIn] = Field(
        default_factory=list,
        description="Scope anchors (AXIS:ID) whose items rank higher (a bounded boost).",
    )
    pinned: list[int] = Field(
        default_factory=list, description="Item ids wanted whatever their rank (still gated)."
    )
    budget: int | None = Field(
        default=None, ge=0, le=100_000, description="Pack the answer within this many tokens."
    )
    min_confidence: float | None = Field(
        default=None, ge=0, le=1, description="Leave out items below this confidence."
    )
    session: str | None = Field(
        default=None,
        min_length=1,
        description="The session asking: its working memory (session:ID items) is "
        "recalled for the principal that owns the session.",
    )
    sources: list[Literal["memory", "knowledge"]] = Field(
        default_factory=_memory_only,
        min_length=1,
        description="Where answers come from: memory (items) and/or knowledge "
        "(imported runbook and postmortem passages).",
    )
    anchors_mode: Literal["extend", "replace"] = Field(
        default="extend",
        description="extend: the request's anchors join the default set built from who "
        "asks (agent, session, case, subjects, team, tenant); replace: only these.",
    )
    refresh: bool = Field(
        default=False,
        description="Before the read, pull from the fact sources what the candidates' "
        "conditions need and lack (missing, or older than max_age), within a deadline; "
        "needs subjects, not with as_of.",
    )
    refresh_deadline_ms: int | None = Field(
        default=None,
        ge=1,
        le=60_000,
        description="The refresh's deadline in milliseconds (default "
        "CAVEAT_REFRESH_DEADLINE_MS, 500); a source still pulling then is reported.",
    )

    @field_validator("as_of")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)

    def to_request(self) -> recall.RecallRequest:
        """The domain's request (``refresh`` is not the domain's: it is done before)."""
        return recall.RecallRequest(
            query=self.query,
            subjects=self.subjects or None,
            purpose=self.purpose,
            case_id=self.case,
            observations=[o.observation() for o in self.observations],
            as_of=self.as_of,
            limit=self.limit,
            explain=self.explain,
            anchors=[
                AnchorObject.model_validate(anchor_fields(a, "anchors")).anchor()
                if isinstance(a, str)
                else a.anchor()
                for a in self.anchors
            ],
            pinned=list(self.pinned),
            budget=self.budget,
            min_confidence=self.min_confidence,
            session=self.session,
            sources=tuple(dict.fromkeys(self.sources)),
            anchors_mode=self.anchors_mode,
        )


class RecordUseIn(RecallIn):
    """The recall request (as it was made) and the ids the agent used."""

    used: list[int] = Field(description="The ids of what went into the context.")


class ContextIn(Strict):
    """The context guard's question: the items in the context, and the case they serve."""

    items: list[int] = Field(description="The ids of the items in the agent's context.")
    case: CaseId = None
    session: str | None = Field(
        default=None,
        min_length=1,
        description="The session asking: its working memory (session:ID items) stays "
        "usable for the principal that owns the session, within its TTL.",
    )
    observations: list[ObservationIn] = Field(
        default_factory=list,
        description="Observations made now, given inline (not stored), as for a recall.",
    )

    def to_observations(self) -> list[factgen.Observation]:
        """The inline observations as the domain takes them."""
        return [o.observation() for o in self.observations]


#: A proposal as a door takes it: the strict proposal schema (``claims.Proposal``). One
#: that does not match it refuses the request (``invalid_input`` naming its index and
#: field) before anything is written or audited; the gate then judges each of the rest.
ProposalIn = claims.Proposal


class EventDataIn(BaseModel):
    """What an event did: the subjects, the attributes it changed, and who did it."""

    model_config = ConfigDict(extra="allow")

    subjects: list[str] | None = Field(default=None, description="The entities it touched.")
    changes: dict[str, JsonValue] | None = Field(
        default=None, description="attribute -> the value it set (typed by the schema)."
    )
    principal: str | None = Field(default=None, description="Who did it.")


class CloudEventIn(BaseModel):
    """A CloudEvent 1.0 (structured mode): a deploy, a config change, a failover."""

    model_config = ConfigDict(extra="allow")

    specversion: str = Field(description="1.0")
    id: str = Field(description="Unique per source (a repeat is recorded once).")
    source: str
    type: str = Field(description="deploy, config_change, ...")
    subject: str | None = Field(default=None, description="The entity, without data.subjects.")
    time: str | None = Field(default=None, description="When it happened (RFC 3339).")
    datacontenttype: str | None = None
    data: EventDataIn | None = None


class CiteIn(Strict):
    """A citation of an item in an open case (the item is the route's, or the tool's
    ``item``): how it influenced the case, and optionally what it expected and what was
    observed (both or neither: a skill's compliance is derived from them) and why."""

    case: str = Field(min_length=1, description="The open case it influenced.")
    influence: Literal["decisive", "contributing", "considered", "ignored"]
    expected: JsonValue = Field(
        default=None,
        description='What the item (a skill or rule) prescribes, e.g. 20 or "drain".',
    )
    observed: JsonValue = Field(
        default=None, description="What was observed or done instead; equal means followed."
    )
    rationale: str | None = Field(default=None, description="Why (kept with the citation).")


class CiteToolIn(CiteIn):
    """``CiteIn`` with the item cited (the MCP tool's arguments)."""

    item: int = Field(description="The item cited (it entered the case's context).")


class TurnIn(Strict):
    """One agent turn for the server-side extractor (docs/proposals.md, "The server-side
    extractor"): its id (the idempotency key), its text, where its proposals go (an open
    ``case``, or ``scope`` as ``"axis:id"``), and the evidence ids and subjects in play."""

    id: str = Field(min_length=1, max_length=200, description="The turn's id, unique per run.")
    text: str = Field(
        min_length=1,
        max_length=claims.MAX_TURN_CHARS,
        description="What the agent saw and did in this turn.",
    )
    case: str | None = Field(default=None, min_length=1, description="Its open case.")
    scope: str | None = Field(
        default=None, description='"axis:id" (e.g. "session:s-1") instead of a case'
    )
    evidence: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        max_length=claims.MAX_TURN_REFS,
        description="The evidence ids registered for this turn (what a proposal may cite).",
    )
    subjects: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=claims.MAX_TURN_REFS, description="Entities in play."
    )

    def agent_turn(self) -> claims.AgentTurn:
        return claims.AgentTurn(
            id=self.id,
            text=self.text,
            case_id=self.case,
            evidence=tuple(self.evidence),
            subjects=tuple(self.subjects),
        )
