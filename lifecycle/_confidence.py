"""Evidence-weighted confidence (model §6): a bounded ranking boost, never a gate.

Evidence is attached to an item as ``supports`` or ``refutes`` it, with a
``strength`` in [0, 1] and a source kind weighted by ``SOURCE_KINDS``. An
item's raw score at ``t`` is::

    S(t) = prior·d(t - recorded_at) + Σ_k sign_k·strength_k·weight(kind_k)·d(t - at_k)
    d(Δ) = 0.5 ** (max(Δ, 0) / half_life)        sign: +1 supports, -1 refutes

and its confidence ``floor + (1 - floor)·clamp(S(t), 0, 1)``: always in
[floor, 1], decaying towards the floor when no evidence comes. Every term
decays with the same half-life, so the sum folds: ``item_confidence`` keeps
``(S_at, at)``, ``S(t) = S_at·d(t - at)`` later, and attaching a link at
``t`` stores ``S_at·d(t - at) + contribution`` as of ``t``. An item with no
row reads ``prior·d(t - recorded_at)``. ``CONFIDENCE_SQL`` is the same read
in SQL, for recall.

Confidence never changes an item's state, never touches its conditions,
and never admits anything: recall's gates decide what may be returned, and
confidence only orders (or, when a caller asks, filters) what they let
through.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Protocol

from sqlalchemy.orm import Session

from claims import Actor, ItemRecord, append
from claims import _queries as claims_q
from factgen import ConfidenceSettings, current_policy
from lifecycle import _queries as q
from lifecycle._access import visible_item
from predicates.errors import Forbidden, GateRejection, InputError

__all__ = [
    "DEFAULT_CONFIDENCE",
    "HUMAN_SOURCE_KINDS",
    "SOURCE_KINDS",
    "STANCES",
    "Attachment",
    "ConfidencePolicy",
    "Link",
    "LinkLike",
    "attach_evidence",
    "confidence_at",
    "confidence_from_links",
    "confidence_of",
    "confidence_params",
    "confidence_policy",
    "contribution",
    "decay",
    "fold",
    "initial_score",
    "tenant_confidence",
]

#: Source kind -> weight of its evidence.
SOURCE_KINDS: Mapping[str, float] = MappingProxyType(
    {
        "human_confirm": 1.0,
        "repeat_observation": 0.8,
        "citation": 0.6,
        "agent_judge": 0.3,
    }
)
#: Source kinds only a principal who may verify (an SME, an admin) may attach.
HUMAN_SOURCE_KINDS = frozenset({"human_confirm"})
#: Stance -> sign of its contribution.
STANCES: Mapping[str, int] = MappingProxyType({"supports": 1, "refutes": -1})


@dataclass(frozen=True)
class ConfidencePolicy:
    """The prior of an item without evidence, the floor of confidence, the half-life of
    every term: the tenant policy's ``confidence.*`` keys (``tenant_confidence``). A
    stored score keeps its ``(S_at, at)``; after a change of half-life it decays with
    the new one from ``at`` on (docs/policy.md)."""

    prior: float = 0.5
    floor: float = 0.1
    half_life: timedelta = timedelta(days=90)

    def __post_init__(self) -> None:
        if not 0.0 <= self.prior <= 1.0:
            raise InputError(f"confidence prior must be in [0, 1], not {self.prior}")
        if not 0.0 <= self.floor < 1.0:
            raise InputError(f"confidence floor must be in [0, 1), not {self.floor}")
        if self.half_life <= timedelta(0):
            raise InputError(f"confidence half-life must be positive, not {self.half_life}")


DEFAULT_CONFIDENCE = ConfidencePolicy()


def confidence_policy(settings: ConfidenceSettings) -> ConfidencePolicy:
    """The confidence policy of a tenant policy's ``confidence`` group."""
    return ConfidencePolicy(settings.prior, settings.floor, settings.half_life)


def tenant_confidence(*, session: Session, tenant: str) -> ConfidencePolicy:
    """The tenant's confidence policy as stored now."""
    return confidence_policy(current_policy(session=session, tenant=tenant).confidence)


class LinkLike(Protocol):
    """What the from-scratch reference reads of a link (``EvidenceLink`` rows fit)."""

    @property
    def stance(self) -> str: ...
    @property
    def strength(self) -> float: ...
    @property
    def source_kind(self) -> str: ...
    @property
    def at(self) -> datetime: ...


@dataclass(frozen=True)
class Link:
    """One attachment as data: a stance, a strength, a source kind, an instant."""

    stance: str
    strength: float
    source_kind: str
    at: datetime


@dataclass(frozen=True)
class Attachment:
    """A stored evidence link and the item's confidence just before and after it."""

    link_id: int
    item_id: int
    evidence_id: str
    stance: str
    strength: float
    source_kind: str
    at: datetime
    confidence_before: float
    confidence_after: float


def decay(elapsed: timedelta, policy: ConfidencePolicy = DEFAULT_CONFIDENCE) -> float:
    """``d(Δ) = 0.5 ** (Δ / half_life)`` in (0, 1]; a negative ``Δ`` counts as zero."""
    seconds = max(elapsed.total_seconds(), 0.0)
    return float(0.5 ** (seconds / policy.half_life.total_seconds()))


def contribution(stance: str, strength: float, source_kind: str) -> float:
    """``sign·strength·weight`` of one link; ``InputError`` naming the attribute and the
    values it accepts when the stance, the strength or the source kind is not one."""
    if stance not in STANCES:
        raise InputError(
            f"unknown stance {stance!r}; expected one of {', '.join(STANCES)}",
            attribute="stance",
            expected=list(STANCES),
        )
    if source_kind not in SOURCE_KINDS:
        raise InputError(
            f"unknown source_kind {source_kind!r}; expected one of {', '.join(SOURCE_KINDS)}",
            attribute="source_kind",
            expected=list(SOURCE_KINDS),
        )
    valid = (
        isinstance(strength, int | float)
        and not isinstance(strength, bool)
        and math.isfinite(strength)
        and 0.0 <= strength <= 1.0
    )
    if not valid:
        raise InputError(
            f"strength must be a number in [0, 1], not {strength!r}",
            attribute="strength",
            expected="a number in [0, 1]",
        )
    return STANCES[stance] * float(strength) * SOURCE_KINDS[source_kind]


def initial_score(
    recorded_at: datetime, at: datetime, policy: ConfidencePolicy = DEFAULT_CONFIDENCE
) -> float:
    """The raw score at ``at`` of an item recorded at ``recorded_at`` with no evidence:
    ``prior·d(at - recorded_at)``."""
    return policy.prior * decay(at - recorded_at, policy)


def _confidence(raw: float, policy: ConfidencePolicy) -> float:
    return policy.floor + (1.0 - policy.floor) * min(1.0, max(0.0, raw))


def confidence_at(
    score: float, score_at: datetime, now: datetime, policy: ConfidencePolicy = DEFAULT_CONFIDENCE
) -> float:
    """The confidence at ``now`` of a stored score ``score`` as of ``score_at``; always in
    ``[floor, 1]``, and never rising while ``now`` moves on."""
    return _confidence(score * decay(now - score_at, policy), policy)


def fold(
    score: float,
    score_at: datetime,
    stance: str,
    strength: float,
    source_kind: str,
    at: datetime,
    policy: ConfidencePolicy = DEFAULT_CONFIDENCE,
) -> float:
    """The raw score after attaching one link at ``at``: ``score·d(at - score_at)`` plus the
    link's contribution, as of ``max(score_at, at)`` (a link dated before the stored score
    counts as attached at the score's instant: a score's time never runs backwards)."""
    return score * decay(at - score_at, policy) + contribution(stance, strength, source_kind)


def confidence_from_links(
    recorded_at: datetime,
    links: Iterable[LinkLike],
    now: datetime,
    policy: ConfidencePolicy = DEFAULT_CONFIDENCE,
) -> float:
    """The confidence at ``now`` computed from scratch, term by term (the reference the
    folded score agrees with for links given in the order of their instants)."""
    raw = initial_score(recorded_at, now, policy) + math.fsum(
        contribution(link.stance, link.strength, link.source_kind) * decay(now - link.at, policy)
        for link in links
    )
    return _confidence(raw, policy)


def confidence_params(policy: ConfidencePolicy = DEFAULT_CONFIDENCE) -> dict[str, float]:
    """The parameters of ``CONFIDENCE_SQL`` for ``policy`` (``%(at)s`` is the caller's)."""
    return {
        "conf_prior": float(policy.prior),
        "conf_floor": float(policy.floor),
        "conf_half_life_s": policy.half_life.total_seconds(),
    }


def attach_evidence(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_id: int,
    evidence_id: str,
    stance: str,
    strength: float,
    source_kind: str,
    now: datetime,
    policy: ConfidencePolicy | None = None,
) -> Attachment:
    """Attach evidence to an item as supporting or refuting it; the item's confidence moves.

    Refused, with nothing written: a role that may not attach evidence, or an agent
    attaching ``human_confirm`` (``Forbidden``); a bad stance, strength or source kind
    (``InputError``); an item absent, unreadable or redacted (``NotFound``, the same for
    all three); evidence that is not registered or the actor may not read
    (``evidence_unresolved``, as the write gate refuses it). Otherwise stores the link,
    folds it into the item's score under the score's row lock (concurrent attachments
    to one item are serialised, none is lost) and appends one ``attach_evidence`` audit
    row. The item's state and conditions are never touched. ``policy`` None: the
    tenant's (``confidence.*``).
    """
    actor.require("attach_evidence")
    contribution(stance, strength, source_kind)  # validates before anything is read
    policy = policy or tenant_confidence(session=session, tenant=tenant)
    if source_kind in HUMAN_SOURCE_KINDS and not actor.may("verify"):
        raise Forbidden(
            f"{actor.id} ({actor.role}) may not attach {source_kind} evidence; "
            "only a principal who may verify confirms an item",
            actor=actor.id,
            role=actor.role,
            action="attach_evidence",
            source_kind=source_kind,
        )
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    row = claims_q.evidence_row(session=session, tenant=tenant, evidence_id=evidence_id)
    if row is None or not actor.can_read(
        list(row.readers), deny=row.deny, classification=row.classification
    ):
        raise GateRejection(
            "evidence_unresolved",
            f"evidence does not resolve: {evidence_id}",
            gate="G3",
            evidence=[evidence_id],
        )
    return fold_link(
        session=session,
        tenant=tenant,
        item_id=item_id,
        recorded_at=item.recorded_at,
        evidence_id=evidence_id,
        stance=stance,
        strength=strength,
        source_kind=source_kind,
        actor=actor.id,
        now=now,
        policy=policy,
    )


def fold_link(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    recorded_at: datetime,
    evidence_id: str,
    stance: str,
    strength: float,
    source_kind: str,
    actor: str,
    now: datetime,
    policy: ConfidencePolicy = DEFAULT_CONFIDENCE,
    detail: Mapping[str, Any] | None = None,
) -> Attachment:
    """Store one link and fold it into the item's score, with its ``attach_evidence``
    audit row (``detail`` adds to the row's detail). The caller has checked who may
    attach what to which item (``attach_evidence``; a case's close for its citations:
    ``lifecycle._outcomes``)."""
    # A missing row reads as the prior decaying from recorded_at: store exactly that, then
    # fold under the row's lock.
    q.ensure_confidence(
        session=session, tenant=tenant, item_id=item_id, score=policy.prior, at=recorded_at
    )
    stored = q.confidence_row(session=session, tenant=tenant, item_id=item_id, lock=True)
    assert stored is not None
    score, score_at = stored
    before = confidence_at(score, score_at, now, policy)
    folded = fold(score, score_at, stance, strength, source_kind, now, policy)
    folded_at = max(score_at, now)
    after = confidence_at(folded, folded_at, now, policy)
    link_id = q.insert_evidence_link(
        session=session,
        tenant=tenant,
        item_id=item_id,
        evidence_id=evidence_id,
        stance=stance,
        strength=float(strength),
        source_kind=source_kind,
        at=now,
        actor=actor,
    )
    q.set_confidence(session=session, tenant=tenant, item_id=item_id, score=folded, at=folded_at)
    append(
        session=session,
        tenant=tenant,
        actor=actor,
        action="attach_evidence",
        at=now,
        item_id=item_id,
        code=stance,
        detail={
            "evidence": evidence_id,
            "stance": stance,
            "strength": float(strength),
            "source_kind": source_kind,
            "confidence_before": before,
            "confidence_after": after,
            **(detail or {}),
        },
    )
    return Attachment(
        link_id, item_id, evidence_id, stance, float(strength), source_kind, now, before, after
    )


def confidence_of(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    item_id: int,
    now: datetime,
    policy: ConfidencePolicy | None = None,
) -> float:
    """The item's confidence at ``now`` as ``actor`` may see it (``NotFound`` otherwise)."""
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    return confidence_of_item(session=session, tenant=tenant, item=item, now=now, policy=policy)


def confidence_of_item(
    *,
    session: Session,
    tenant: str,
    item: ItemRecord,
    now: datetime,
    policy: ConfidencePolicy | None = None,
) -> float:
    """The confidence at ``now`` of an item the caller has already read (and may see),
    under ``policy`` (None: the tenant's)."""
    policy = policy or tenant_confidence(session=session, tenant=tenant)
    stored = q.confidence_row(session=session, tenant=tenant, item_id=item.id)
    if stored is None:
        return _confidence(initial_score(item.recorded_at, now, policy), policy)
    return confidence_at(stored[0], stored[1], now, policy)
