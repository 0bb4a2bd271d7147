"""Agent turns for the server-side extractor (docs/proposals.md, "The server-side
extractor"): an agent submits a turn and gets an answer at once; the server's worker
sends it to a model and consolidates the model's answer through the gate as that agent.

``submit_turn``, ``turn_show`` and ``turns_list`` are what a caller asks;
``process_turns`` is the worker's step (the server's background round, or ``caveat turns
run``). The call to the model is the edge's (``caveat.connectors.ChatExtractor``): the
door hands it in as ``extract``, as it hands a puller to ``pull_sources``, and no
transaction is open while it runs: a turn is claimed (an attempt, leased) in one
transaction, the model is called, and the answer is consolidated and the turn settled
after.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import claims
from caveat._tracing import annotate, tracer
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase
from caveat.app._usecases import propose
from predicates.errors import CaveatError

__all__ = [
    "BACKOFF_CAP",
    "Extract",
    "ExtractorDown",
    "TurnDone",
    "TurnSubmitted",
    "UnusableAnswer",
    "extractor_not_configured",
    "process_turns",
    "retry_delay",
    "submit_turn",
    "turn_depth",
    "turn_message",
    "turn_show",
    "turns_list",
]

#: The longest back-off between two calls for one turn.
BACKOFF_CAP = timedelta(minutes=5)


class ExtractorDown(Exception):
    """The model could not be asked: a transport error, a timeout or an error answer;
    ``retry`` is False for a 4xx other than 429 (asking again changes nothing)."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry


class UnusableAnswer(Exception):
    """The model answered, but with nothing to judge: a choice with no content, a
    refusal, or a body that is not a chat completion. ``answer`` is what it said."""

    def __init__(self, message: str, answer: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.answer = answer


#: What asks the model: ``(system prompt, user message) -> the answer's content``,
#: raising ``ExtractorDown`` or ``UnusableAnswer``.
Extract = Callable[[str, str], str]


def extractor_not_configured() -> CaveatError:
    """The refusal of a turn on a server with no ``CAVEAT_EXTRACTOR_URL``."""
    return CaveatError(
        "this server has no extractor (CAVEAT_EXTRACTOR_URL is not set): run the "
        "extraction yourself and POST /v1/proposals",
        code="extractor_not_configured",
    )


@dataclass(frozen=True)
class TurnSubmitted:
    """A submission's answer: the turn as queued, and whether this call queued it
    (False: the same turn was already submitted)."""

    record: claims.TurnRecord
    created: bool


@dataclass(frozen=True)
class TurnDone:
    """What one worker step did with one turn: ``done`` (its proposals consolidated),
    ``refused`` (an unusable answer, recorded as a refused proposal), ``retried`` (queued
    again after a back-off) or ``failed``; the call's seconds and the error, if any."""

    turn_id: str
    outcome: Literal["done", "refused", "retried", "failed"]
    seconds: float
    error: str | None = None


@usecase(require="write", use="submit_turn")
def submit_turn(
    u: Unit,
    turn: claims.AgentTurn,
    *,
    scope: claims.Anchor,
    now: datetime | None = None,
) -> TurnSubmitted:
    """Queue ``turn`` for the server-side extractor as the caller (who must be allowed to
    write), its proposals anchored at ``scope``; answers at once. The same turn id with
    the same body answers the turn already queued; another body is a ``conflict``.
    ``extractor_not_configured`` when the server has no ``CAVEAT_EXTRACTOR_URL``."""
    if not u.rt.settings.extractor_url:  # after the permission: a caller who may not
        raise extractor_not_configured()  # write is told that first
    record, created = claims.submit_turn(**u.at(now), turn=turn, scope=scope)
    return TurnSubmitted(record, created)


def _own(actor: claims.Actor) -> str | None:
    """Whose turns ``actor`` may see: an agent its own, an SME or admin every one."""
    return actor.id if actor.role == "agent" else None


@usecase(require="read", use="turn_show")
def turn_show(u: Unit, turn_id: str) -> claims.TurnRecord:
    """One turn and where it stands (an agent sees its own turns only)."""
    return claims.get_turn(
        session=u.session, tenant=u.tenant, turn_id=turn_id, principal=_own(u.actor)
    )


@usecase(require="read", use="turns_list")
def turns_list(
    u: Unit, *, state: Literal["queued", "done", "failed"] | None = None, limit: int = 50
) -> list[claims.TurnRecord]:
    """The newest turns first (an agent's own; an SME's or admin's every one)."""
    return claims.list_turns(
        session=u.session, tenant=u.tenant, principal=_own(u.actor), state=state, limit=limit
    )


def retry_delay(attempts: int, base: float, *, rng: Callable[[], float] = random.random) -> float:
    """Seconds before attempt ``attempts + 1``: ``base`` doubled for each attempt made
    after the first, at most ``BACKOFF_CAP``, then jittered by ±25%."""
    delay = min(base * 2 ** min(max(attempts - 1, 0), 32), BACKOFF_CAP.total_seconds())
    return float(delay * (0.75 + 0.5 * rng()))


def turn_message(turn: claims.AgentTurn) -> str:
    """The user message a turn is sent as: the turn as JSON (its id, case, subjects,
    evidence ids and text)."""
    return json.dumps(
        {
            "turn": turn.id,
            "case": turn.case_id,
            "subjects": list(turn.subjects),
            "evidence": list(turn.evidence),
            "text": turn.text,
        },
        ensure_ascii=False,
    )


def process_turns(
    rt: Runtime,
    actor: claims.Actor,
    *,
    extract: Extract,
    limit: int = 10,
    now: Callable[[], datetime] | None = None,
) -> list[TurnDone]:
    """One worker step over the tenant's due turns (``sources`` action: admins and the
    server): up to ``limit`` times, claim the next due turn (an attempt, leased for the
    call's timeout and a minute) and, with no transaction open, ask the model
    (``extract``) with the reference prompt and the turn; then as the turn's submitter: a
    usable answer's
    proposals go through ``propose`` (every proposal audited, its outcome kept on the
    turn: ``done``); an unusable one (not JSON, not ``{"proposals": [...]}``, no content,
    a refusal) is one refused proposal (``proposal_invalid``) and the turn is ``done``;
    the model unreachable, slow or answering 429/5xx puts the turn back after a back-off
    (``retry_delay``) until ``CAVEAT_EXTRACTOR_ATTEMPTS`` calls were made, then ``failed``;
    any other error answer, or a refusal of the consolidation itself, ``failed`` at
    once."""
    actor.require("sources")
    wall = now or (lambda: clock(None))
    settings = rt.settings
    lease = timedelta(seconds=settings.extractor_timeout + 60)
    done: list[TurnDone] = []
    while len(done) < limit:
        start = wall()  # one at a time: each lease starts when its own call is near
        with rt.transaction("process_turns") as s:
            claimed = claims.claim_due_turns(
                session=s, tenant=rt.tenant, now=start, lease_until=start + lease, limit=1
            )
            if not claimed:
                break
            attributes = sorted({spec.attribute for spec in rt.world(s).schema})
        (record,) = claimed
        turn = record.turn
        with tracer.start_as_current_span("caveat.extract_turn") as span:
            annotate(span, {"caveat.tenant": rt.tenant, "caveat.turn.attempt": record.attempts})
            t0 = time.perf_counter()
            answer: str | UnusableAnswer | ExtractorDown
            try:
                answer = extract(
                    claims.reference_prompt(attributes, turn.evidence), turn_message(turn)
                )
            except (UnusableAnswer, ExtractorDown) as exc:
                answer = exc
            seconds = time.perf_counter() - t0
            at = wall()
            if isinstance(answer, ExtractorDown):
                outcome = _back_off(rt, record, answer.message, answer.retry, at, seconds)
            else:
                try:
                    with rt.transaction("process_turns") as s:
                        agent = claims.turn_actor(session=s, tenant=rt.tenant, record=record)
                    source = f"turn:{turn.id}"
                    parsed = _proposals(answer)
                    if isinstance(parsed, UnusableAnswer):
                        result = claims.refuse_answer(
                            parsed.answer,
                            parsed.message,
                            sessions=rt.sessions,
                            tenant=rt.tenant,
                            actor=agent,
                            now=at,
                            source=source,
                        )
                    else:
                        result = propose(
                            rt, agent, parsed, scope=record.scope, source=source, now=at
                        )
                    error = parsed.message if isinstance(parsed, UnusableAnswer) else None
                    with rt.transaction("process_turns") as s:
                        claims.settle_turn(
                            session=s,
                            tenant=rt.tenant,
                            turn_id=turn.id,
                            state="done",
                            now=at,
                            last_error=error,
                            outcomes=[o.to_dict() for o in result.outcomes],
                        )
                    outcome = TurnDone(turn.id, "refused" if error else "done", seconds, error)
                except CaveatError as exc:  # the database went away: again; else failed
                    retry = exc.code == "database_unavailable"
                    outcome = _back_off(
                        rt, record, f"{exc.code}: {exc.message}", retry, at, seconds
                    )
            annotate(
                span,
                {
                    "caveat.turn.outcome": outcome.outcome,
                    "caveat.extractor.seconds": round(seconds, 4),
                },
            )
            done.append(outcome)
    return done


def _proposals(answer: str | UnusableAnswer) -> list[dict[str, object]] | UnusableAnswer:
    """The raw proposals of a usable answer, or the answer as unusable with its reason."""
    if isinstance(answer, UnusableAnswer):
        return answer
    try:
        return claims.parse_model_output(answer)
    except CaveatError as exc:
        return UnusableAnswer(exc.message, answer)


def _back_off(
    rt: Runtime,
    record: claims.TurnRecord,
    message: str,
    retry: bool,
    at: datetime,
    seconds: float,
) -> TurnDone:
    """Queue the turn again after ``retry_delay``, or fail it with ``message`` when it
    may not be retried or has had its calls."""
    settings = rt.settings
    last = not retry or record.attempts >= settings.extractor_attempts
    delay = timedelta(seconds=retry_delay(record.attempts, settings.extractor_backoff))
    with rt.transaction("process_turns") as s:
        claims.settle_turn(
            session=s,
            tenant=rt.tenant,
            turn_id=record.turn.id,
            state="failed" if last else "queued",
            now=at,
            next_attempt_at=None if last else at + delay,
            last_error=message,
        )
    return TurnDone(record.turn.id, "failed" if last else "retried", seconds, message)


def turn_depth(rt: Runtime) -> dict[str, int]:
    """How many of the tenant's turns are in each state (no actor: the server's metrics
    read it, as they read the embedding queue's depth)."""
    with rt.transaction() as s:
        return claims.turn_counts(session=s, tenant=rt.tenant)
