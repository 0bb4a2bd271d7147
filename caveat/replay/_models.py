"""Typed models of a format-1 scenario file (docs/scenarios.md).

Every model is frozen, forbids unknown keys and validates strictly: a YAML
string is never coerced into a number, a boolean or a list. Cross-field and
cross-step rules (refs, the clock, principals, contradictory expectations)
live in ``_format``, where the position of each offending node is known.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    model_validator,
)

import claims
import factgen
from caveat.app._requests import AnchorObject
from caveat.replay._time import parse_duration, parse_instant

__all__ = [
    "ACTION_MODELS",
    "EXPECT_MODELS",
    "WRAPPED_ACTIONS",
    "Action",
    "ActionName",
    "AdvanceArgs",
    "AttachEvidenceArgs",
    "AuditVerifyArgs",
    "AuditVerifyExpect",
    "BlockArgs",
    "CheckContextArgs",
    "CheckContextExpect",
    "CiteArgs",
    "CloseCaseArgs",
    "DiffArgs",
    "DiffCause",
    "DiffExpect",
    "DiffInstant",
    "DocsArgs",
    "Duration",
    "EntitySpec",
    "EventArgs",
    "EvidenceArgs",
    "Expect",
    "ExpectStateArgs",
    "HookArgs",
    "HookExpect",
    "ItemState",
    "Observation",
    "ObserveArgs",
    "OpenCaseArgs",
    "Policy",
    "Principal",
    "PromoteArgs",
    "RecallAnchor",
    "RecallArgs",
    "RecallExpect",
    "RecallGate",
    "RefuteArgs",
    "RevokeArgs",
    "Role",
    "Scenario",
    "SchemaEntry",
    "Scope",
    "ShadowPolicy",
    "SourceKind",
    "Stance",
    "Step",
    "UtcDateTime",
    "VerifyArgs",
    "WriteArgs",
    "WriteExpect",
    "WriteGate",
]


def _duration_input(value: object) -> object:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return parse_duration(value)
    raise ValueError(f"expected a duration such as 30s, 15m, 1h or 12d, got {_kind(value)}")


def _instant_input(value: object) -> datetime:
    return parse_instant(value)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


Duration = Annotated[timedelta, BeforeValidator(_duration_input)]
"""A duration: ``30s``, ``15m``, ``1h``, ``12d`` (one unit, whole number)."""


def _diff_instant_input(value: object) -> object:
    if isinstance(value, str) and value.startswith(("-", "+")):
        if value.startswith("+"):
            raise ValueError(
                f"{value!r} is in the future; a diff looks back: write -DURATION, e.g. -10d"
            )
        try:
            return -parse_duration(value[1:])
        except ValueError:
            raise ValueError(
                f"{value!r} is not an offset; write - and a whole number with a unit"
                " s, m, h or d, e.g. -30m, -10d"
            ) from None
    return parse_instant(value)


def _only_true(value: object) -> object:
    if value is not True:
        got = "false" if value is False else _kind(value)
        raise ValueError(f"only true can be expected (leave the key out), got {got}")
    return value


OnlyTrue = Annotated[bool, BeforeValidator(_only_true)]
"""An expectation that can only be ``true`` (its opposite would expect a bug)."""


DiffInstant = Annotated[datetime | timedelta, BeforeValidator(_diff_instant_input)]
"""A diff bound: an absolute UTC instant, or an offset back from the step's time
(``-10d``), kept as a negative ``timedelta``."""

UtcDateTime = Annotated[datetime, BeforeValidator(_instant_input)]
"""A timezone-aware instant, normalised to UTC."""

Name = Annotated[str, StringConstraints(min_length=1)]
Ref = Annotated[str, StringConstraints(min_length=1)]
Code = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
AttributeName = Annotated[
    str, StringConstraints(pattern=r"^(?:[A-Za-z0-9_-]+|\*)(?:\.(?:[A-Za-z0-9_-]+|\*))*$")
]
TypeSpec = Annotated[
    str,
    StringConstraints(
        pattern=(
            r"^(?:int|float|bool|string|version|duration|timestamp"
            r"|enum\[\s*[^\[\],\s][^\[\],]*(?:,\s*[^\[\],\s][^\[\],]*)*\])$"
        )
    ),
]

Role = Literal["agent", "sme", "admin", "source"]
ItemState = Literal[
    "case",
    "shadow",
    "active",
    "needs_reverification",
    "verify_on_next_use",
    "superseded",
    "refuted",
    "revoked",
    "archived",
]
RecallGate = Literal[
    "tenant_scope", "capability", "activated_version", "purpose", "applicability", "validity_window"
]
WriteGate = Literal["G1", "G2", "G3", "G4"]
DiffCause = Literal["transition", "supersession", "fact_change", "validity_window"]
Stance = Literal["supports", "refutes"]
SourceKind = Literal["human_confirm", "citation", "repeat_observation", "agent_judge"]
ActionName = Literal[
    "observe",
    "evidence",
    "write",
    "open_case",
    "close_case",
    "cite",
    "verify",
    "refute",
    "promote",
    "revoke",
    "event",
    "advance",
    "recall",
    "check_context",
    "audit_verify",
    "expect_state",
    "diff",
    "attach_evidence",
    "hook",
    "block",
    "docs",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# --- top level -------------------------------------------------------------


class Principal(_Model):
    """Who acts: a role and opaque capabilities matched against evidence readers, and a
    clearance (a classification level; None: ``internal``)."""

    role: Role
    capabilities: list[str] = []
    clearance: str | None = None
    #: its team: recall's default ``team:<id>`` anchor (docs/retrieval.md)
    team: str | None = None


class ShadowPolicy(_Model):
    """Graduation thresholds for shadow items; ``None`` keeps the tenant default."""

    min_matched_cases: int | None = Field(default=None, ge=0)
    min_agreement: float | None = Field(default=None, ge=0.0, le=1.0)


class Policy(_Model):
    """Tenant policy overrides; every ``None`` keeps the store's default."""

    shadow: ShadowPolicy | None = None
    permission_refusal_ttl: Duration | None = None
    working_memory_ttl: Duration | None = None
    writes: Literal["on", "off", "incognito"] | None = None


class SchemaEntry(_Model):
    """One fact attribute declared in the schema registry."""

    attribute: AttributeName
    type: TypeSpec
    unit: str | None = None
    max_age: Duration | None = None
    content_type: str | None = None


class EntitySpec(_Model):
    """A canonical entity with its aliases and topology edges."""

    id: Name
    kind: Name
    aliases: list[Name] = []
    depends_on: list[Name] = []
    runs_on: list[Name] = []


# --- actions ---------------------------------------------------------------


class Observation(_Model):
    """One typed fact: ``subject``'s ``attribute`` is ``value``."""

    subject: str
    attribute: str
    value: Any
    source: str | None = None


class ObserveArgs(_Model):
    """``observe: [...]``: record facts at the step's time."""

    observations: list[Observation] = Field(min_length=1)


class EvidenceArgs(_Model):
    """``evidence:``: register a source; ``readers=None`` means tenant-readable; ``deny``
    entries (``principal:<id>``, ``cap:<capability>``) never read it; ``classification``
    a level (None: the lowest)."""

    id: Name
    title: str | None = None
    uri: str | None = None
    readers: list[str] | None = None
    deny: list[str] = []
    classification: str | None = None


class Scope(_Model):
    """An anchor ``(axis, id)``; written ``"axis:id"`` (the spelling every answer prints),
    ``"tenant"`` (``"tenant:*"``), or ``{axis, id}`` (accepted, as at every door)."""

    axis: Name
    id: Name

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        axis, ident = claims.split_anchor("tenant:*" if value == "tenant" else value)
        return {"axis": axis, "id": ident}


class WriteArgs(_Model):
    """``write:``: a proposed item, through the write gate."""

    ref: Ref
    kind: Literal["episode", "fact", "skill"]
    subject: str
    attribute: str
    object: Any
    required: list[str] = []
    excluded: list[str] = []
    evidence: list[str]
    derived_from: list[Ref] = []
    epistemic: Literal["hypothesis", "observation"] | None = None
    content_type: str | None = None
    scope: Scope | None = None
    text: str | None = None
    purposes: list[str] = []
    valid_from: UtcDateTime | None = None
    valid_to: UtcDateTime | None = None


class OpenCaseArgs(_Model):
    """``open_case:``: later writes and recalls happen inside it until it closes."""

    id: Name
    subjects: list[str] = []


class CloseCaseArgs(_Model):
    """``close_case:``: citations become support or counter signals."""

    id: Name
    outcome: Literal["confirmed", "rejected"]


class CiteArgs(_Model):
    """``cite:``: an item influenced the open case."""

    item: Ref
    influence: Literal["decisive", "contributing", "considered", "ignored"]
    #: what the skill or rule prescribes and what was observed (both or neither)
    expected: JsonValue = None
    observed: JsonValue = None
    rationale: str | None = None


class VerifyArgs(_Model):
    """``verify:``: an SME verifies an item."""

    item: Ref


class RefuteArgs(_Model):
    """``refute:``: an SME refutes an item."""

    item: Ref
    reason: Name


class PromoteArgs(_Model):
    """``promote:``: scope expansion (``active`` only from ``shadow``)."""

    item: Ref
    to: Literal["shadow", "active"]


class RevokeArgs(_Model):
    """``revoke:``: revocation with lineage propagation."""

    item: Ref
    reason: Name


class EventArgs(_Model):
    """``event:``: a deploy, config change, version change or authorisation event."""

    type: Literal["deploy", "config_change", "version_change", "authorisation"]
    subjects: list[str]
    changes: dict[str, Any] = {}
    principal: str | None = None


class AdvanceArgs(_Model):
    """``advance: 12d``: move the virtual clock forward by ``by``."""

    by: Duration


class RecallAnchor(AnchorObject):
    """A scope anchor a recall boosts, as every door's recall takes it: ``"axis:id"``
    (weight 1.5) or ``{axis, id, weight?}`` (weight 0.5..2)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: object) -> object:
        if isinstance(value, str):
            axis, ident = claims.split_anchor(value)
            return {"axis": axis, "id": ident}
        if not isinstance(value, dict):
            raise ValueError(
                f'expected "axis:id" (e.g. "service:payment-api") or {{axis, id, weight?}},'
                f" got {_kind(value)}"
            )
        return value


class RecallArgs(_Model):
    """``recall:``: a recall as the acting principal. Its fields are the doors' recall
    request's (``caveat.app._requests.RecallIn``), under the same names; ``pinned`` names
    items by ref, and the open case (if any) is the request's ``case``."""

    query: str
    subjects: list[str] | None = None
    purpose: str | None = None
    observations: list[Observation] = []
    anchors: list[RecallAnchor] = []
    pinned: list[Ref] = []
    as_of: UtcDateTime | None = None
    explain: bool = False
    limit: int | None = Field(default=None, ge=1)
    budget: int | None = Field(default=None, ge=0)
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    session: str | None = None
    sources: list[Literal["memory", "knowledge"]] | None = None
    anchors_mode: Literal["extend", "replace"] | None = None
    record: bool = True


class CheckContextArgs(_Model):
    """``check_context:``: which of these items may still be used, by recall's rule, on
    what is observed now (``observations`` inline, as a recall's)."""

    items: list[Ref] = Field(min_length=1)
    observations: list[Observation] = []
    session: str | None = None


class AuditVerifyArgs(_Model):
    """``audit_verify: {}``: recompute the audit chain."""


class DiffArgs(_Model):
    """``diff:``: the belief diff, as the acting principal, between two instants."""

    from_: DiffInstant = Field(alias="from")
    to: DiffInstant
    subjects: list[str] | None = None
    purpose: str | None = None


class AttachEvidenceArgs(_Model):
    """``attach_evidence:``: evidence that supports or refutes an item; moves its confidence."""

    item: Ref
    evidence: Name
    stance: Stance
    strength: float = Field(ge=0.0, le=1.0)
    source_kind: SourceKind


class HookArgs(_Model):
    """``hook:``: a webhook delivery as ``POST /v1/hooks/{kind}`` receives it (model §2.2),
    mapped by the scenario's ``hooks:``, as the implicit principal ``source-{kind}`` (role
    ``source``), trusted as signed. ``payload`` is the body (JSON written as YAML);
    ``headers`` the sender's (GitHub's ``X-GitHub-Event`` defaults to
    ``deployment_status``, a CloudEvent to structured mode); ``delivery`` the sender's
    delivery id, in place of the one the payload gives."""

    kind: Literal["alertmanager", "github", "cloudevents", "pagerduty"]
    payload: dict[str, Any]
    delivery: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = {}


class BlockArgs(_Model):
    """``block:``: set a core block (model §4; docs/blocks.md) as the acting principal;
    ``scope`` is ``tenant`` (the default), ``team:ID`` or ``agent:ID``."""

    label: str = Field(min_length=1)
    text: str
    scope: str | None = None


class DocsArgs(_Model):
    """``docs:``: import a Markdown document as knowledge passages (model §6; docs/
    knowledge.md) as the acting principal, through the doors' use case: ``id`` the
    document's id, ``text`` its Markdown (split at headings), ``uri`` where it lives,
    ``readers`` the capabilities that read it (absent: the whole tenant)."""

    id: Name
    text: str = Field(min_length=1)
    uri: str | None = None
    readers: list[str] | None = None


class ExpectStateArgs(_Model):
    """``expect_state: {ref: state}``: the lifecycle state of items at this point."""

    states: dict[Ref, ItemState] = Field(min_length=1)


Action = (
    ObserveArgs
    | EvidenceArgs
    | WriteArgs
    | OpenCaseArgs
    | CloseCaseArgs
    | CiteArgs
    | VerifyArgs
    | RefuteArgs
    | PromoteArgs
    | RevokeArgs
    | EventArgs
    | AdvanceArgs
    | RecallArgs
    | CheckContextArgs
    | AuditVerifyArgs
    | ExpectStateArgs
    | DiffArgs
    | AttachEvidenceArgs
    | HookArgs
    | BlockArgs
    | DocsArgs
)

# --- expectations ----------------------------------------------------------


class Expect(_Model):
    """Expectations every step may carry: ``error`` names the code it must fail with."""

    error: Code | None = None


class WriteExpect(Expect):
    """What a write must do; ``None`` means not checked."""

    outcome: Literal["accepted", "rejected", "duplicate"] | None = None
    code: Code | None = None
    gate: WriteGate | None = None
    state: ItemState | None = None


class RecallExpect(Expect):
    """What a recall must return; ``None`` means not checked."""

    include: list[Ref] | None = None
    exclude: list[Ref] | None = None
    order: list[Ref] | None = None
    count: int | None = Field(default=None, ge=0)
    withheld: dict[Ref, RecallGate] | None = None
    missing_observations: list[str] | None = None
    unknown_to_caller: list[Ref] | None = None
    packed_include: list[Ref] | None = None
    packed_exclude: list[Ref] | None = None
    packed_within_budget: OnlyTrue | None = None
    #: the packed text starts with these core blocks (labels), in this order
    packed_first: list[str] | None = None
    #: documents (ids) a passage of which is in the result / of none of which
    knowledge_include: list[Name] | None = None
    knowledge_exclude: list[Name] | None = None
    #: how many passages the caller may see the query considered (explain's count; a
    #: passage hidden from the caller is never counted)
    knowledge_considered: int | None = Field(default=None, ge=0)


class DiffExpect(Expect):
    """What a belief diff must report; ``None`` means not checked."""

    became: list[Ref] | None = None
    stopped: list[Ref] | None = None
    causes: dict[Ref, DiffCause] | None = None
    unknown_to_caller: list[Ref] | None = None


class CheckContextExpect(Expect):
    """Which items the context guard keeps and drops; ``None`` means not checked."""

    usable: list[Ref] | None = None
    dropped: list[Ref] | None = None
    #: the reason each listed item is dropped for (``applicability``, a state, ...)
    reasons: dict[Ref, str] | None = None


class HookExpect(Expect):
    """What a hook delivery must do; ``None`` means not checked."""

    #: the actions done, in order (``open_case``, ``join_case``, ``observe``, ``event``,
    #: ``close_case``, ``awaiting_outcome``, ``ignored``)
    done: list[str] | None = None
    duplicate: bool | None = None
    #: the case the delivery opened or joined
    case: str | None = None


class AuditVerifyExpect(Expect):
    """Whether the audit chain verifies; ``None`` means not checked."""

    ok: bool | None = None


ACTION_MODELS: dict[str, type[_Model]] = {
    "observe": ObserveArgs,
    "evidence": EvidenceArgs,
    "write": WriteArgs,
    "open_case": OpenCaseArgs,
    "close_case": CloseCaseArgs,
    "cite": CiteArgs,
    "verify": VerifyArgs,
    "refute": RefuteArgs,
    "promote": PromoteArgs,
    "revoke": RevokeArgs,
    "event": EventArgs,
    "advance": AdvanceArgs,
    "recall": RecallArgs,
    "check_context": CheckContextArgs,
    "audit_verify": AuditVerifyArgs,
    "expect_state": ExpectStateArgs,
    "diff": DiffArgs,
    "attach_evidence": AttachEvidenceArgs,
    "hook": HookArgs,
    "block": BlockArgs,
    "docs": DocsArgs,
}
"""The model of each action's value, by action key."""

WRAPPED_ACTIONS: dict[str, str] = {
    "observe": "observations",
    "advance": "by",
    "expect_state": "states",
}
"""Actions whose YAML value is not a mapping: the model field that holds it."""

EXPECT_MODELS: dict[str, type[Expect]] = {
    "write": WriteExpect,
    "recall": RecallExpect,
    "check_context": CheckContextExpect,
    "audit_verify": AuditVerifyExpect,
    "diff": DiffExpect,
    "hook": HookExpect,
}
"""The expectation model of each action; any other action takes ``Expect``."""


# --- the scenario ----------------------------------------------------------


class Step(_Model):
    """One step, resolved: its action, typed arguments, absolute time and actor."""

    index: int = Field(ge=0)
    line: int = Field(ge=1)
    action: ActionName
    args: Action
    at: UtcDateTime
    actor: Name
    expect: Expect | None = None

    @model_validator(mode="after")
    def _args_fit_action(self) -> Step:
        expected = ACTION_MODELS[self.action]
        if type(self.args) is not expected:
            raise ValueError(f"a {self.action} step takes {expected.__name__}")
        expect_model = EXPECT_MODELS.get(self.action, Expect)
        if self.expect is not None and type(self.expect) is not expect_model:
            raise ValueError(f"a {self.action} step is checked with {expect_model.__name__}")
        return self


class _ScenarioBase(_Model):
    caveat_scenario: Literal[1]
    name: Name
    description: str = ""
    tenant: Name
    start: UtcDateTime
    principals: dict[Name, Principal] = Field(min_length=1)
    policy: Policy = Policy()
    schema_: list[SchemaEntry] = Field(default=[], alias="schema")
    entities: list[EntitySpec] = []
    #: how hook payloads name subjects: sources.yaml's ``hooks:`` (model §2.2)
    hooks: factgen.HooksConfig | None = None


class ScenarioHeader(_ScenarioBase):
    """Everything above ``steps``, validated before the steps are read."""

    steps: list[Any] = Field(min_length=1)


class Scenario(_ScenarioBase):
    """A whole validated scenario; ``schema_`` is the YAML ``schema`` list."""

    steps: list[Step] = Field(min_length=1)
