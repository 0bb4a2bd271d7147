"""Cases: one incident or agent run; items are written into an open case.

Closing a case (model §4.2) turns its citations into signals: ``confirmed``
gives every cited item a ``support`` signal, ``rejected`` a ``counter``
signal, and each cited item an evidence link of source kind ``citation`` with
the strength of its influence, so its confidence moves (``lifecycle._outcomes``).
Counter beats support: an item with a counter signal from a decisive or
contributing citation goes to ``needs_reverification`` (a reason to look, never a
revocation), whatever support it has elsewhere.
The same close concludes the case in the shadow log and applies the shadow
thresholds (``lifecycle._shadow``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session, sessionmaker

from claims import (
    DEFAULT_REGISTRY,
    Actor,
    Anchor,
    BatchResult,
    HiddenItems,
    ItemOutcome,
    ItemRegistry,
    ItemWrite,
    Proposal,
    ScopeGuard,
    WorldOf,
    WriteResult,
    append,
    write_item,
)
from claims import consolidate as claims_consolidate
from claims import write_batch as claims_write_batch
from factgen import load_world
from lifecycle import _queries as q
from lifecycle._bulk import transition_many
from lifecycle._outcomes import citation_evidence
from lifecycle._promotion import log_if_contested
from lifecycle._shadow import evaluate_shadow
from lifecycle._states import SYSTEM_ACTOR
from predicates.errors import CaseNotOpen, Conflict, InputError, NotFound

__all__ = [
    "FOLLOWED",
    "INFLUENCES",
    "CaseRecord",
    "CloseResult",
    "case_guard",
    "close_case",
    "consolidate",
    "get_case",
    "open_case",
    "write",
    "write_batch",
]

Outcome = Literal["confirmed", "rejected"]
INFLUENCES: tuple[str, ...] = ("decisive", "contributing", "considered", "ignored")
#: Influences that count as following the item; their counter signal demotes it.
FOLLOWED = frozenset({"decisive", "contributing"})


@dataclass(frozen=True)
class CaseRecord:
    """A case as stored."""

    id: str
    subjects: tuple[str, ...]
    status: str
    outcome: str | None
    opened_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True)
class CloseResult:
    """A closed case and what its close did."""

    case: CaseRecord
    signals: dict[int, str] = field(default_factory=dict)
    demoted: tuple[int, ...] = ()
    graduated: tuple[int, ...] = ()
    dropped: tuple[int, ...] = ()
    #: item id -> (confidence before, after) the outcome's citation evidence moved it
    confidence: dict[int, tuple[float, float]] = field(default_factory=dict)


def get_case(*, session: Session, tenant: str, case_id: str, lock: bool = False) -> CaseRecord:
    """The case; ``NotFound`` otherwise."""
    row = q.case(session=session, tenant=tenant, case_id=case_id, lock=lock)
    if row is None:
        raise NotFound(f"no case {case_id!r}", case=case_id)
    return CaseRecord(
        row.id, tuple(row.subjects), row.status, row.outcome, row.opened_at, row.closed_at
    )


def open_case(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    subjects: Sequence[str],
    actor: Actor,
    now: datetime,
) -> CaseRecord:
    """Open a case about ``subjects`` (resolved to canonical ids). Audited."""
    actor.require("open_case")
    if not case_id.strip():
        raise InputError("a case id must not be empty")
    world = load_world(session=session, tenant=tenant)
    canonical = sorted({world.resolver.resolve(s) for s in subjects})
    if not q.insert_case(
        session=session,
        tenant=tenant,
        case_id=case_id,
        subjects=canonical,
        at=now,
        actor=actor.id,
    ):
        raise Conflict(f"case {case_id!r} already exists", case=case_id)
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="open_case",
        at=now,
        detail={"case": case_id, "subjects": canonical},
    )
    return get_case(session=session, tenant=tenant, case_id=case_id)


def close_case(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    outcome: Outcome,
    actor: Actor,
    now: datetime,
) -> CloseResult:
    """Close an open case with its outcome: signals, demotions, shadow thresholds. Audited."""
    actor.require("close_case")
    if outcome not in ("confirmed", "rejected"):
        raise InputError(f"unknown outcome {outcome!r}; expected confirmed or rejected")
    case = get_case(session=session, tenant=tenant, case_id=case_id, lock=True)
    if case.status != "open":
        raise CaseNotOpen(f"case {case_id!r} is {case.status}", case=case_id)
    q.close_case(
        session=session, tenant=tenant, case_id=case_id, outcome=outcome, at=now, actor=actor.id
    )
    signal = "support" if outcome == "confirmed" else "counter"
    cited = q.signal_citations(
        session=session, tenant=tenant, case_id=case_id, signal=signal, at=now
    )
    signals = {int(r.item_id): signal for r in cited}
    moved = citation_evidence(
        session=session,
        tenant=tenant,
        case_id=case_id,
        outcome=outcome,
        signal=signal,
        cited=cited,
        closed_by=actor.id,
        now=now,
    )
    to_demote = sorted(
        int(r.item_id) for r in cited if signal == "counter" and r.influence in FOLLOWED
    )
    demoted = transition_many(
        session=session,
        tenant=tenant,
        item_ids=to_demote,
        action="demote",
        at=now,
        actor=SYSTEM_ACTOR,
        reason=f"case {case_id} closed {outcome}: counter signal on a decisive or "
        "contributing citation",
        cause={"case": case_id, "outcome": outcome, "closed_by": actor.id},
    )
    q.drop_expiry_checks(session=session, tenant=tenant, ids=[d[0] for d in demoted])
    decisions = evaluate_shadow(
        session=session, tenant=tenant, case_id=case_id, outcome=outcome, now=now
    )
    result = CloseResult(
        get_case(session=session, tenant=tenant, case_id=case_id),
        signals,
        tuple(d[0] for d in demoted),
        tuple(d.item_id for d in decisions if d.action == "graduate"),
        tuple(d.item_id for d in decisions if d.action == "drop"),
        {i: (a.confidence_before, a.confidence_after) for i, a in moved.items()},
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="close_case",
        at=now,
        code=outcome,
        detail={
            "case": case_id,
            "outcome": outcome,
            "signals": {str(k): v for k, v in sorted(signals.items())},
            "demoted": list(result.demoted),
            "graduated": list(result.graduated),
            "dropped": list(result.dropped),
        },
    )
    return result


def case_guard(tenant: str) -> ScopeGuard:
    """The lifecycle's check of every write, before the gate: an item anchored to a
    case needs that case open. (A redacted ``derived_from`` is the gate's: see
    ``redacted_ids``.)
    """

    def guard(session: Session, request: ItemWrite) -> None:
        if request.scope.axis != "case":
            return
        case = q.case(session=session, tenant=tenant, case_id=request.scope.id)
        if case is None:
            raise NotFound(f"no case {request.scope.id!r}", case=request.scope.id)
        if case.status != "open":
            raise CaseNotOpen(
                f"case {request.scope.id!r} is {case.status}; items are written into open cases",
                case=request.scope.id,
            )

    return guard


def redacted_ids(tenant: str) -> HiddenItems:
    """What the write gate treats as never written: redacted items (redaction hides an
    item everywhere, so a ``derived_from`` naming one is ``not_found``, in the gate's
    lineage check, exactly as an unknown id; a redacted revoked ancestor is never named).
    """

    def hidden(session: Session, ids: Sequence[int]) -> set[int]:
        return q.redacted(session=session, tenant=tenant, ids=ids)

    return hidden


def write(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
    registry: ItemRegistry | None = None,
    world: WorldOf | None = None,
) -> WriteResult:
    """Write an item through the gate; a case-scoped item needs its case open.

    ``registry`` (axes and content types; claims' default without one) is
    handed to the gate.

    After an accepted write, a key that the new item makes contested across
    cases is logged (an audit row with the distinct values).
    """
    result = write_item(
        sessions=sessions,
        tenant=tenant,
        request=request,
        actor=actor,
        now=now,
        scope_guard=case_guard(tenant),
        registry=registry or DEFAULT_REGISTRY,
        hidden=redacted_ids(tenant),
        after=_contested_logger(tenant, actor, now),
        world=world,
    )
    return result


def write_batch(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    requests: Sequence[ItemWrite],
    actor: Actor,
    now: datetime,
    registry: ItemRegistry | None = None,
    progress: Callable[[int], None] | None = None,
    world: WorldOf | None = None,
) -> BatchResult:
    """``write`` for many items, in one transaction: one outcome per item, as
    ``claims.write_batch`` decides them (``progress``: told the size of each chunk;
    ``world``: the tenant's world as the batch's session sees it, None: read it)."""
    return claims_write_batch(
        sessions=sessions,
        tenant=tenant,
        requests=requests,
        actor=actor,
        now=now,
        scope_guard=case_guard(tenant),
        registry=registry or DEFAULT_REGISTRY,
        hidden=redacted_ids(tenant),
        progress=progress,
        after=_contested_logger(tenant, actor, now),
        world=world,
    )


def consolidate(
    proposals: Sequence[Proposal | Mapping[str, Any]],
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    actor: Actor,
    scope: Anchor,
    now: datetime,
    source: str | None = None,
    registry: ItemRegistry | None = None,
) -> BatchResult:
    """``claims.consolidate`` with the lifecycle's write check and contested-key logging."""
    return claims_consolidate(
        proposals,
        sessions=sessions,
        tenant=tenant,
        actor=actor,
        scope=scope,
        now=now,
        source=source,
        scope_guard=case_guard(tenant),
        registry=registry or DEFAULT_REGISTRY,
        hidden=redacted_ids(tenant),
        after=_contested_logger(tenant, actor, now),
    )


def _contested_logger(
    tenant: str, actor: Actor, now: datetime
) -> Callable[[Session, Sequence[ItemOutcome]], None]:
    """The write's ``after``: log, in the write's transaction, every key that its new
    case-scoped facts and skills make contested across cases."""

    def after(session: Session, outcomes: Sequence[ItemOutcome]) -> None:
        written = [o.item_id for o in outcomes if o.outcome == "accepted" and o.item_id]
        _log_contested(session, tenant, written, actor, now)

    return after


def _log_contested(
    session: Session,
    tenant: str,
    written: Sequence[int],
    actor: Actor,
    now: datetime,
) -> None:
    """Log every key that the new case-scoped facts and skills make contested across cases.

    One row per contested key, however many of the written items share it.
    """
    if not written:
        return
    # one statement narrows a batch to the items another case shares a key with
    written = sorted(q.sharing_a_key(session=session, tenant=tenant, ids=written))
    if not written:
        return
    logged: set[int] = set()
    for item_id in written:  # case-scoped facts and skills only (sharing_a_key)
        if item_id in logged:
            continue
        key = log_if_contested(
            session=session, tenant=tenant, item_id=item_id, actor=actor.id, now=now
        )
        if key is not None:
            logged.update(i.id for i in key.items)
