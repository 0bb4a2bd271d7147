"""Proposals: models propose, the kernel writes (model §3.3).

A ``Proposal`` is what a language model may say about a claim, in a strict
JSON schema (``proposal_json_schema``: every field listed, no extra field
allowed) usable as a structured-output schema with any LLM. It carries no
authority: no scope, no ACL, no state. ``consolidate`` turns proposals into
writes through the one write gate, deterministically: each proposal is
recorded (``proposed``), validated against the schema (``proposal_invalid``),
then policy-gated, shape-gated, de-duplicated and applied or superseding, in
the order given, with ``applied``, ``rejected`` and ``superseded`` in the
audit log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from sqlalchemy.orm import Session, sessionmaker

from claims import _audit
from claims._access import Actor
from claims._anchors import DEFAULT_REGISTRY, ItemRegistry
from claims._audit import PendingAudit
from claims._proposal import Anchor, ItemWrite, error_path
from claims._write import (
    PROPOSAL_ACTIONS,
    AfterWrite,
    BatchResult,
    HiddenItems,
    ItemOutcome,
    ScopeGuard,
    _Writer,
)
from predicates.errors import CaveatError, GateRejection

__all__ = [
    "Proposal",
    "ProposalSet",
    "consolidate",
    "proposal_json_schema",
    "refuse_answer",
]

#: The most of an unusable model answer kept in its ``proposed`` audit row (its digest
#: covers the whole answer).
ANSWER_QUOTE = 2000

Scalar = str | int | float | bool

_STRICT = ConfigDict(
    extra="forbid",
    frozen=True,
    strict=True,
    json_schema_serialization_defaults_required=True,
)


def _instant_text(value: Any) -> Any:
    """An instant is RFC 3339 text (or a datetime): a number is not a timestamp here."""
    if value is None or isinstance(value, str | datetime):
        return value
    raise ValueError("an RFC 3339 instant is a string")


#: An instant with its offset, given as RFC 3339 text (parsed, not coerced from numbers).
Instant = Annotated[AwareDatetime, BeforeValidator(_instant_text)]


class Proposal(BaseModel):
    """One claim a model proposes. Every field is required in the exported schema;
    ``null`` (or ``[]``) says "none". Strings in ``required`` and ``excluded`` must
    be predicates (``attribute operator value``); prose is refused, never coerced.
    """

    model_config = _STRICT
    kind: Literal["episode", "fact", "skill"] = Field(
        description="fact: a conditional observation; episode: a trace worth replaying; "
        "skill: a procedure (versioned, released by an SME)"
    )
    subject: str = Field(min_length=1, description="the entity the claim is about, as named")
    attribute: str = Field(
        min_length=1,
        description="what is observed about the subject, snake_case, e.g. "
        "restart_restored_service_at; never a remedy (fix_*, *_procedure, should_*)",
    )
    object: Scalar = Field(
        description="the observed value (a literal), or an evidence id from `evidence`"
    )
    required: list[str] = Field(
        default_factory=list,
        description="predicates that must all hold for the claim to apply, e.g. "
        '"config.connection_pool.max eq 20"',
    )
    excluded: list[str] = Field(
        default_factory=list, description="predicates any of which stops the claim applying"
    )
    evidence: list[str] = Field(
        default_factory=list, description="ids of the evidence the claim rests on (at least one)"
    )
    derived_from: list[int] = Field(
        default_factory=list, description="ids of stored items this claim was inferred from"
    )
    epistemic: Literal["hypothesis", "observation"] = Field(
        default="hypothesis",
        description="observation only for a value observed in the evidence; "
        "anything inferred is a hypothesis",
    )
    content_type: str | None = Field(
        default=None,
        description="what the claim depends on: configuration, topology, "
        "failure_mechanism, permission_refusal (or null)",
    )
    text: str | None = Field(
        default=None, max_length=4000, description="one sentence a person can read"
    )
    entities: list[str] = Field(default_factory=list, description="other entities involved")
    purposes: list[str] = Field(
        default_factory=list, description="purposes it may serve; [] means any"
    )
    salience: float | None = Field(default=None, ge=0.0, le=1.0, description="0..1 or null")
    valid_from: Instant | None = Field(
        default=None, strict=False, description="when the claim starts to hold (RFC 3339)"
    )
    valid_to: Instant | None = Field(
        default=None, strict=False, description="when it stops holding (RFC 3339)"
    )
    version: int | None = Field(default=None, ge=1, description="skills only; null: next")
    test: str | None = Field(
        default=None, description="skills only: evidence id of a passing test run"
    )
    rationale: str | None = Field(
        default=None, max_length=2000, description="why this is proposed (audited, not stored)"
    )

    def to_write(self, scope: Anchor, facets: Sequence[Anchor] = ()) -> ItemWrite:
        """The write this proposal asks for, anchored by the caller (never by the model)."""
        return ItemWrite(
            kind=self.kind,
            subject=self.subject,
            attribute=self.attribute,
            object=self.object,
            required=list(self.required),
            excluded=list(self.excluded),
            evidence=list(self.evidence),
            derived_from=list(self.derived_from),
            epistemic=self.epistemic,
            content_type=self.content_type,
            scope=scope,
            facets=list(facets),
            purposes=list(self.purposes),
            text=self.text,
            entities=list(self.entities),
            salience=0.5 if self.salience is None else self.salience,
            valid_from=self.valid_from,
            valid_to=self.valid_to,
            version=self.version,
            test=self.test,
        )


class ProposalSet(BaseModel):
    """What an extractor returns for one agent turn: the structured-output root."""

    model_config = _STRICT
    proposals: list[Proposal] = Field(description="claims worth keeping; [] when none")


def proposal_json_schema() -> dict[str, Any]:
    """The JSON schema of ``ProposalSet`` (every property required, no extra ones)."""
    return ProposalSet.model_json_schema(mode="serialization")


def _digest(raw: Any) -> str:
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _raw(p: Proposal | Mapping[str, Any]) -> Any:
    return p.model_dump(mode="json") if isinstance(p, Proposal) else p


def consolidate(
    proposals: Sequence[Proposal | Mapping[str, Any]],
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    actor: Actor,
    scope: Anchor,
    now: datetime,
    facets: Sequence[Anchor] = (),
    source: str | None = None,
    scope_guard: ScopeGuard | None = None,
    registry: ItemRegistry = DEFAULT_REGISTRY,
    hidden: HiddenItems | None = None,
    after: AfterWrite | None = None,
) -> BatchResult:
    """Apply a model's proposals through the write gate, as ``actor``, into ``scope``.

    Deterministic: the outcome depends only on the proposals, their order and
    the store. Every proposal is audited as ``proposed`` first (in its own
    transaction, with ``source`` and a digest); then, in order, each is
    refused (``rejected`` with its reason code, ``proposal_invalid`` for one
    that does not match the schema, ``duplicate_no_change`` for a claim
    already stored), or ``applied`` (its predecessor ``superseded``). The
    result has one outcome per proposal, in order. The writes are one
    transaction (``claims.write_batch``); ``after`` runs in it.
    """
    raws = [_raw(p) for p in proposals]
    digests = [_digest(r) for r in raws]
    with sessions.begin() as session:
        seqs = _audit.append_many(
            session=session,
            tenant=tenant,
            at=now,
            rows=[
                PendingAudit(
                    actor.id,
                    "proposed",
                    None,
                    None,
                    {"proposal": raw, "source": source, "index": i, "digest": digests[i]},
                )
                for i, raw in enumerate(raws)
            ],
        )
    writes: list[tuple[int, ItemWrite]] = []
    invalid: dict[int, CaveatError] = {}
    for i, p in enumerate(proposals):
        try:
            proposal = p if isinstance(p, Proposal) else Proposal.model_validate(p)
            writes.append((i, proposal.to_write(scope, facets)))
        except ValidationError as exc:
            invalid[i] = GateRejection(
                "proposal_invalid",
                "the proposal does not match the proposal schema: " + _summary(exc, i),
                errors=_errors(exc),
            )
    extras = [{"proposal_seq": seqs[i], "digest": digests[i]} for i in range(len(raws))]
    if invalid:
        _audit_invalid(sessions, tenant, actor, now, invalid, extras)
    writer = _Writer(
        sessions,
        tenant,
        actor,
        now,
        scope_guard,
        registry,
        PROPOSAL_ACTIONS,
        audit_extra=[extras[i] for i, _ in writes],
        hidden=hidden,
    )
    written = writer.run([w for _, w in writes], chunk_size=len(writes) or 1, after=after)
    outcomes: dict[int, ItemOutcome] = {}
    for (i, _), o in zip(writes, written, strict=True):
        outcomes[i] = replace(o, index=i)
    for i, err in invalid.items():
        outcomes[i] = ItemOutcome(i, "rejected", code=err.code, message=err.message, error=err)
    return BatchResult(tuple(outcomes[i] for i in range(len(raws))))


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": ".".join(str(p) for p in e["loc"]), "type": e["type"], "msg": e["msg"]}
        for e in exc.errors()
    ]


def _summary(exc: ValidationError, index: int) -> str:
    """Each error as ``proposals[3].subject: ...``: the proposal's index in the batch and
    the field (the path a door's batch errors use)."""
    return "; ".join(
        f"{error_path(('proposals', index, *e['loc']))}: {e['msg']}" for e in exc.errors()
    )


def _audit_invalid(
    sessions: sessionmaker[Session],
    tenant: str,
    actor: Actor,
    now: datetime,
    invalid: Mapping[int, CaveatError],
    extras: Sequence[Mapping[str, Any]],
) -> None:
    rows = [
        PendingAudit(
            actor.id,
            PROPOSAL_ACTIONS.rejected,
            None,
            err.code,
            {"message": err.message, "errors": err.detail.get("errors"), **extras[i]},
        )
        for i, err in sorted(invalid.items())
    ]
    with sessions.begin() as session:
        _audit.append_many(session=session, tenant=tenant, at=now, rows=rows)


def refuse_answer(
    answer: str,
    reason: str,
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    actor: Actor,
    now: datetime,
    source: str | None = None,
) -> BatchResult:
    """A model answer that holds no proposals to judge (not JSON, not ``{"proposals":
    [...]}``, no content, a refusal) recorded as one refused proposal: a ``proposed``
    audit row (the answer's first ``ANSWER_QUOTE`` characters and its digest) and a
    ``rejected`` row with ``proposal_invalid`` and ``reason``, in one transaction of
    their own; nothing else is written. The result has that one outcome."""
    digest = hashlib.sha256(answer.encode()).hexdigest()[:16]
    raw = {"answer": answer[:ANSWER_QUOTE], "answer_chars": len(answer)}
    err = GateRejection("proposal_invalid", f"the model's answer holds no proposals: {reason}")
    with sessions.begin() as session:
        (seq,) = _audit.append_many(
            session=session,
            tenant=tenant,
            at=now,
            rows=[
                PendingAudit(
                    actor.id,
                    "proposed",
                    None,
                    None,
                    {"proposal": raw, "source": source, "index": 0, "digest": digest},
                )
            ],
        )
        _audit.append_many(
            session=session,
            tenant=tenant,
            at=now,
            rows=[
                PendingAudit(
                    actor.id,
                    PROPOSAL_ACTIONS.rejected,
                    None,
                    err.code,
                    {"message": err.message, "proposal_seq": seq, "digest": digest},
                )
            ],
        )
    return BatchResult((ItemOutcome(0, "rejected", code=err.code, message=err.message, error=err),))
