"""Cases: one incident or agent run; items are written into an open case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from claims import Actor, ItemWrite, ScopeGuard, WriteResult, append, write_item
from factgen import load_world
from lifecycle import _queries as q
from predicates.errors import CaseNotOpen, Conflict, InputError, NotFound

__all__ = ["CaseRecord", "close_case", "get_case", "open_case", "write"]

Outcome = Literal["confirmed", "rejected"]


@dataclass(frozen=True)
class CaseRecord:
    """A case as stored."""

    id: str
    subjects: tuple[str, ...]
    status: str
    outcome: str | None
    opened_at: datetime
    closed_at: datetime | None


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
) -> CaseRecord:
    """Close an open case with its outcome. Audited."""
    actor.require("close_case")
    case = get_case(session=session, tenant=tenant, case_id=case_id, lock=True)
    if case.status != "open":
        raise CaseNotOpen(f"case {case_id!r} is {case.status}", case=case_id)
    q.close_case(
        session=session, tenant=tenant, case_id=case_id, outcome=outcome, at=now, actor=actor.id
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="close_case",
        at=now,
        code=outcome,
        detail={"case": case_id, "outcome": outcome},
    )
    return get_case(session=session, tenant=tenant, case_id=case_id)


def _case_guard(tenant: str) -> ScopeGuard:
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


def write(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
) -> WriteResult:
    """Write an item through the gate; a case-scoped item needs its case open."""
    return write_item(
        sessions=sessions,
        tenant=tenant,
        request=request,
        actor=actor,
        now=now,
        scope_guard=_case_guard(tenant),
    )
