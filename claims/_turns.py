"""Agent turns queued for the server-side extractor (docs/proposals.md, "The server-side
extractor"): the durable queue's records and the rules of a submission.

A turn is queued once per (tenant, turn id): the same id with the same body is the same
turn (a client's retry), another body is a ``conflict``. The worker claims due turns
(``claim_due``: counted as an attempt and leased, with no transaction left open while
the model answers), then ``settle``s each: ``done`` with its outcomes, ``queued`` again
after a back-off, or ``failed`` with its last error. The actor a turn was submitted as
is kept with it, and the worker acts as that principal, never wider than it was then
(``turn_actor``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from claims import _queries as q
from claims._access import Actor
from claims._extractor import AgentTurn
from claims._proposal import Anchor
from claims._registry import get_actor
from predicates.errors import Conflict, InputError, NotFound

__all__ = [
    "MAX_TURN_CHARS",
    "MAX_TURN_REFS",
    "TURN_STATES",
    "TurnRecord",
    "claim_due_turns",
    "get_turn",
    "list_turns",
    "settle_turn",
    "submit_turn",
    "turn_actor",
    "turn_counts",
]

#: The most characters a turn's text may have (a turn is one step of a run, not a log).
MAX_TURN_CHARS = 32_000
#: The most evidence ids, and the most subjects, a turn may name.
MAX_TURN_REFS = 100
TurnState = Literal["queued", "done", "failed"]
TURN_STATES: tuple[TurnState, ...] = ("queued", "done", "failed")


@dataclass(frozen=True)
class TurnRecord:
    """A queued turn as stored: the turn, where its proposals go, who submitted it, and
    where it stands."""

    turn: AgentTurn
    scope: Anchor
    principal: str
    actor: dict[str, Any]
    state: TurnState
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    outcomes: list[dict[str, Any]] | None
    submitted_at: datetime
    updated_at: datetime
    done_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """What a door shows of it (never the actor snapshot; the text is the caller's)."""

        def iso(at: datetime | None) -> str | None:
            return None if at is None else at.isoformat()

        return {
            "id": self.turn.id,
            "state": self.state,
            "principal": self.principal,
            "case": self.turn.case_id,
            "scope": f"{self.scope.axis}:{self.scope.id}",
            "evidence": list(self.turn.evidence),
            "subjects": list(self.turn.subjects),
            "attempts": self.attempts,
            "next_attempt_at": iso(self.next_attempt_at) if self.state == "queued" else None,
            "last_error": self.last_error,
            "outcomes": self.outcomes,
            "submitted_at": iso(self.submitted_at),
            "updated_at": iso(self.updated_at),
            "done_at": iso(self.done_at),
        }


def _refs(values: Sequence[str], field: str) -> tuple[str, ...]:
    if len(values) > MAX_TURN_REFS:
        raise InputError(f"{field}: at most {MAX_TURN_REFS}, got {len(values)}", attribute=field)
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v.strip():
            raise InputError(f"{field}[{i}]: a non-empty string", attribute=f"{field}[{i}]")
    return tuple(values)


def _checked(turn: AgentTurn) -> AgentTurn:
    if not turn.id or len(turn.id) > 200:
        raise InputError("id: 1 to 200 characters", attribute="id")
    if not turn.text.strip():
        raise InputError("text: the turn's text is empty", attribute="text")
    if len(turn.text) > MAX_TURN_CHARS:
        raise InputError(
            f"text: at most {MAX_TURN_CHARS} characters, got {len(turn.text)}", attribute="text"
        )
    return replace(
        turn,
        evidence=_refs(turn.evidence, "evidence"),
        subjects=_refs(turn.subjects, "subjects"),
    )


def _body(turn: AgentTurn, scope: Anchor) -> dict[str, Any]:
    return {
        "text": turn.text,
        "case": turn.case_id,
        "scope": f"{scope.axis}:{scope.id}",
        "evidence": list(turn.evidence),
        "subjects": list(turn.subjects),
    }


def _record(row: Any) -> TurnRecord:
    body = row.turn
    return TurnRecord(
        turn=AgentTurn(
            id=row.turn_id,
            text=body["text"],
            case_id=body["case"],
            evidence=tuple(body["evidence"]),
            subjects=tuple(body["subjects"]),
        ),
        scope=Anchor.model_validate(body["scope"]),
        principal=row.principal,
        actor=row.actor,
        state=row.state,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        last_error=row.last_error,
        outcomes=row.outcomes,
        submitted_at=row.submitted_at,
        updated_at=row.updated_at,
        done_at=row.done_at,
    )


def submit_turn(
    *, session: Session, tenant: str, actor: Actor, turn: AgentTurn, scope: Anchor, now: datetime
) -> tuple[TurnRecord, bool]:
    """Queue ``turn`` for extraction as ``actor`` (who must be allowed to ``write``), its
    proposals to be anchored at ``scope``; ``(record, created)``. The same id with the
    same body (and the same submitter) answers the turn already queued, with ``created``
    False; another body is a ``conflict``. ``InputError`` names a field too long, too
    many or empty."""
    actor.require("write")
    turn = _checked(turn)
    body = _body(turn, scope)
    digest = hashlib.sha256(
        json.dumps({"principal": actor.id, **body}, sort_keys=True).encode()
    ).hexdigest()
    snapshot = {
        "role": actor.role,
        "capabilities": sorted(actor.capabilities),
        "clearance": actor.clearance,
    }
    row = q.insert_turn(
        session=session,
        tenant=tenant,
        turn_id=turn.id,
        principal=actor.id,
        actor=snapshot,
        turn=body,
        digest=digest,
        now=now,
    )
    if row is not None:
        return _record(row), True
    found = q.turn_row(session=session, tenant=tenant, turn_id=turn.id)
    if found is None or found.digest != digest:
        raise Conflict(f"turn {turn.id!r} was already submitted with another body", turn=turn.id)
    return _record(found), False


def get_turn(*, session: Session, tenant: str, turn_id: str, principal: str | None) -> TurnRecord:
    """A turn of the tenant (of ``principal`` only, unless None); ``NotFound`` when there
    is none the caller may see."""
    row = q.turn_row(session=session, tenant=tenant, turn_id=turn_id)
    if row is None or (principal is not None and row.principal != principal):
        raise NotFound(f"no turn {turn_id!r}", turn=turn_id)
    return _record(row)


def list_turns(
    *,
    session: Session,
    tenant: str,
    principal: str | None,
    state: TurnState | None = None,
    limit: int = 50,
) -> list[TurnRecord]:
    """The tenant's turns, newest first (``principal``'s only, unless None)."""
    rows = q.turn_rows(session=session, tenant=tenant, principal=principal, state=state,
                       limit=limit)  # fmt: skip
    return [_record(r) for r in rows]


def turn_counts(*, session: Session, tenant: str) -> dict[str, int]:
    """How many of the tenant's turns are in each state (every state named, 0 for none)."""
    found = q.turn_counts(session=session, tenant=tenant)
    return {s: found.get(s, 0) for s in TURN_STATES}


def claim_due_turns(
    *, session: Session, tenant: str, now: datetime, lease_until: datetime, limit: int
) -> list[TurnRecord]:
    """Up to ``limit`` queued turns due at ``now`` that no other worker holds, each
    counted as an attempt and leased until ``lease_until``."""
    rows = q.claim_turns(session=session, tenant=tenant, now=now, lease_until=lease_until,
                         limit=limit)  # fmt: skip
    return [_record(r) for r in rows]


def settle_turn(
    *,
    session: Session,
    tenant: str,
    turn_id: str,
    state: TurnState,
    now: datetime,
    next_attempt_at: datetime | None = None,
    last_error: str | None = None,
    outcomes: list[dict[str, Any]] | None = None,
) -> None:
    """Record where a claimed turn stands: ``done`` (with its outcomes), ``queued`` again
    (due at ``next_attempt_at``) or ``failed`` (with ``last_error``)."""
    q.settle_turn(session=session, tenant=tenant, turn_id=turn_id, state=state, now=now,
                  next_attempt_at=next_attempt_at, last_error=last_error,
                  outcomes=outcomes)  # fmt: skip


def turn_actor(*, session: Session, tenant: str, record: TurnRecord) -> Actor:
    """The actor the worker consolidates ``record``'s proposals as: its principal as
    stored now, never wider than it was submitted as (the capabilities both hold, and
    the lower of the two clearances); ``NotFound`` when the principal is gone."""
    now_actor = get_actor(session=session, tenant=tenant, principal=record.principal)
    then = record.actor
    if then.get("role") != now_actor.role:
        raise NotFound(
            f"principal {record.principal!r} no longer has the role it submitted as",
            principal=record.principal,
        )
    caps = now_actor.capabilities & frozenset(then.get("capabilities", ()))
    clearance, levels, given = now_actor.clearance, now_actor.levels, then.get("clearance")
    if given in levels and clearance in levels and levels.index(given) < levels.index(clearance):
        clearance = str(given)
    return replace(now_actor, capabilities=caps, clearance=clearance)
