"""The shadow period (model §4.1): log, conclude, graduate or drop, report.

Every recall made in a case logs each shadow item that passed every gate but
its own state (scope, capability, superseded/skill release, purpose,
validity window and the subject filter), with whether its conditions
matched. The item's own case is not logged, and a recall outside any case is
not logged either: it has no conclusion to compare with. When the case
closes its outcome is filled in; a matched case *agrees* when it concluded
as the item's own case did (``confirmed`` when the item has no closed case
of its own).

Graduation is evaluated when a case closes, for the shadow items that case
logged: with at least ``min_matched_cases`` matched, concluded cases, the
item graduates to ``active`` when the share that agreed is at least
``min_agreement`` and drops back to ``case`` otherwise. An item whose key is
contested across cases is never graduated by the thresholds. An SME may
graduate (``promote to: active``) or drop an item at any time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from claims import Access, Actor, ItemRecord, record_transition
from factgen import ShadowPolicy, load_world
from lifecycle import _queries as q
from lifecycle._access import visible_item
from lifecycle._promotion import is_contested
from lifecycle._states import SYSTEM_ACTOR, decide

__all__ = [
    "ShadowDecision",
    "ShadowReport",
    "ShadowStats",
    "decide_shadow",
    "drop",
    "evaluate_shadow",
    "log_shadow",
    "shadow_report",
]


@dataclass(frozen=True)
class ShadowStats:
    """What the shadow log says about one shadow item."""

    item_id: int
    subject: str
    attribute: str
    text: str | None
    cases: int  # cases whose recalls logged it
    matched: int  # of those, matched and concluded
    pending: int  # matched, not concluded yet
    agreed: int

    @property
    def agreement(self) -> float | None:
        """The share of matched, concluded cases that agreed; None without any."""
        return None if self.matched == 0 else self.agreed / self.matched


def decide_shadow(stats: ShadowStats, policy: ShadowPolicy) -> str | None:
    """``graduate``, ``drop`` or None (keep watching): the thresholds as a pure function."""
    if stats.matched < policy.min_matched_cases:
        return None
    agreement = 1.0 if stats.agreement is None else stats.agreement
    return "graduate" if agreement >= policy.min_agreement else "drop"


def log_shadow(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    entries: Sequence[tuple[int, bool]],
    now: datetime,
) -> None:
    """Log one recall of ``case_id``: ``(shadow item id, conditions matched)`` pairs."""
    q.log_shadow(
        session=session,
        tenant=tenant,
        case_id=case_id,
        ids=[e[0] for e in entries],
        matched=[e[1] for e in entries],
        at=now,
    )


def _stats(session: Session, tenant: str, ids: Sequence[int] | None) -> list[ShadowStats]:
    return [
        ShadowStats(
            int(r.id),
            r.subject,
            r.attribute,
            r.text,
            int(r.cases),
            int(r.matched),
            int(r.pending),
            int(r.agreed),
        )
        for r in q.shadow_stats(session=session, tenant=tenant, ids=ids)
    ]


@dataclass(frozen=True)
class ShadowDecision:
    """A threshold decision taken when a case closed."""

    item_id: int
    action: str  # graduate or drop
    stats: ShadowStats


def evaluate_shadow(
    *, session: Session, tenant: str, case_id: str, outcome: str, now: datetime
) -> list[ShadowDecision]:
    """Conclude the case in the shadow log and apply the thresholds to the items it logged."""
    logged = q.conclude_shadow(
        session=session, tenant=tenant, case_id=case_id, outcome=outcome, at=now
    )
    if not logged:
        return []
    policy = load_world(session=session, tenant=tenant).policy.shadow
    decisions: list[ShadowDecision] = []
    for stats in _stats(session, tenant, logged):
        action = decide_shadow(stats, policy)
        if action is None:
            continue
        if action == "graduate" and is_contested(
            session=session, tenant=tenant, item_id=stats.item_id
        ):
            continue  # never majority-voted: an SME decides a contested key
        share = "n/a" if stats.agreement is None else f"{stats.agreement:.2f}"
        record_transition(
            session=session,
            tenant=tenant,
            item_id=stats.item_id,
            from_state="shadow",
            to_state=decide(action, "shadow"),
            at=now,
            actor=SYSTEM_ACTOR,
            reason=(
                f"shadow {'thresholds met' if action == 'graduate' else 'agreement too low'}: "
                f"{stats.matched} matched cases, agreement {share} (policy: "
                f"{policy.min_matched_cases} cases, {policy.min_agreement})"
            ),
            cause={
                "case": case_id,
                "matched": stats.matched,
                "agreed": stats.agreed,
                "policy": policy.model_dump(),
            },
        )
        decisions.append(ShadowDecision(stats.item_id, action, stats))
    return decisions


def drop(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    actor: Actor,
    now: datetime,
    rationale: str | None = None,
) -> ItemRecord:
    """An SME drops a shadow item back to its case, with a rationale."""
    actor.require("drop")
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    record_transition(
        session=session,
        tenant=tenant,
        item_id=item_id,
        from_state=item.state,
        to_state=decide("drop", item.state),
        at=now,
        actor=actor.id,
        reason=rationale or "dropped by SME",
    )
    return visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


_CASE_BUCKETS = ("0", "1", "2", "3", "4", "5-9", "10+")
_AGREEMENT_BUCKETS = ("n/a", "0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0")


def _case_bucket(n: int) -> str:
    return str(n) if n < 5 else ("5-9" if n < 10 else "10+")


def _agreement_bucket(a: float | None) -> str:
    if a is None:
        return "n/a"
    return _AGREEMENT_BUCKETS[1 + min(int(a * 5), 4)]


@dataclass(frozen=True)
class ShadowReport:
    """Every shadow item with its numbers, the two distributions, and the current thresholds."""

    items: tuple[ShadowStats, ...]
    policy: ShadowPolicy
    matched_distribution: dict[str, int]
    agreement_distribution: dict[str, int]
    would_graduate: tuple[int, ...]
    would_drop: tuple[int, ...]


def shadow_report(
    *, session: Session, tenant: str, actor: Actor, policy: ShadowPolicy | None = None
) -> ShadowReport:
    """The distribution of matched cases and agreement over the shadow items the actor may
    read, and what the next close would do under ``policy`` (None: the tenant's; another
    one previews a pending change of the thresholds)."""
    readable = {
        int(r.id)
        for r in q.shadow_stats(session=session, tenant=tenant, ids=None)
        if Access.of(r).readable_by(actor)
    }
    items = [s for s in _stats(session, tenant, None) if s.item_id in readable]
    if policy is None:
        policy = load_world(session=session, tenant=tenant).policy.shadow
    matched = dict.fromkeys(_CASE_BUCKETS, 0)
    agreement = dict.fromkeys(_AGREEMENT_BUCKETS, 0)
    for s in items:
        matched[_case_bucket(s.matched)] += 1
        agreement[_agreement_bucket(s.agreement)] += 1
    decisions = {s.item_id: decide_shadow(s, policy) for s in items}
    return ShadowReport(
        tuple(items),
        policy,
        matched,
        agreement,
        tuple(i for i, d in decisions.items() if d == "graduate"),
        tuple(i for i, d in decisions.items() if d == "drop"),
    )
