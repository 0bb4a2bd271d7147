"""Use cases of the edge (model §2.1, §2.2): a tenant's fact sources, what their pulls
stored, and hook deliveries acted on once and atomically.

The connectors of ``caveat.connectors`` fetch and translate; these functions are the
one transaction each that follows a fetch (architecture.md, "The edge"): nothing here
talks to the outside.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

import claims
import factgen
import lifecycle
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase
from predicates.errors import (
    CaveatError,
    Conflict,
    EventInFuture,
    Forbidden,
    InputError,
    NotFound,
)

__all__ = [
    "CloseCase",
    "Delivery",
    "HookAction",
    "HookPlan",
    "Ignore",
    "Observe",
    "OpenCase",
    "Planner",
    "PostEvent",
    "PullFrame",
    "PullOutcome",
    "deliver_hook",
    "load_sources",
    "pull_frame",
    "refuse_hook",
    "show_sources",
    "source_actor",
    "store_pull",
]


def _audit(
    s: Session,
    rt: Runtime,
    actor: str,
    action: str,
    at: datetime,
    detail: dict[str, Any],
    *,
    code: str | None = None,
) -> None:
    """One row of the tenant's audit chain, in the transaction ``s``."""
    claims.append(
        session=s, tenant=rt.tenant, actor=actor, action=action, at=at, code=code, detail=detail
    )


def source_actor(name: str) -> claims.Actor:
    """The principal a fact source or a hook acts as: ``source:<name>``, role ``source``
    (it may observe, post events and open or close cases, nothing else)."""
    return claims.Actor(f"source:{name}", "source")


# --- sources.yaml ------------------------------------------------------------------------


@usecase(require="sources", use="load_sources")
def load_sources(
    u: Unit,
    text: str,
    *,
    source_name: str = "<sources>",
    now: datetime | None = None,
) -> factgen.LoadedSources:
    """Validate a ``sources.yaml`` (``DocumentError`` with line and column, an attribute
    the schema does not declare included) and make it the tenant's sources (admin only),
    with an audit row naming the sources, the hooks and the file's digest."""
    # ``require`` is checked before the file is read: a refusal says nothing of it
    now = clock(now)
    world = u.world()
    config = factgen.load_sources_yaml(text, source=source_name, schema=world.schema)
    loaded = factgen.store_sources(
        session=u.session, actor=u.actor, world=world, config=config, document=text, now=now
    )
    _audit(
        u.session,
        u.rt,
        u.actor.id,
        "load_sources",
        now,
        {
            "sources": [spec.name for spec in config.sources],
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
    )
    return loaded


@usecase(require="sources_read")
def show_sources(u: Unit) -> factgen.LoadedSources | None:
    """The tenant's sources as loaded, or None (admins and SMEs)."""
    return factgen.loaded_sources(session=u.session, tenant=u.tenant)


@dataclass(frozen=True)
class PullFrame:
    """What a connector maps a fetch with: the tenant's sources and its world (schema
    and aliases), read together before the fetch."""

    config: factgen.SourcesConfig
    world: factgen.World


def pull_frame(rt: Runtime) -> PullFrame:
    """The tenant's sources (empty when none were loaded) and world in one short read;
    no actor: the configuration is the system's, and connectors only read it to fetch.
    The connector fetches after it, outside any transaction, and stores with
    ``store_pull``, which types everything again in its own."""
    with rt.transaction() as s:
        loaded = factgen.loaded_sources(session=s, tenant=rt.tenant)
        world = rt.world(s)
    return PullFrame(factgen.SourcesConfig() if loaded is None else loaded.config, world)


# --- what a pull stored ------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _printable(text: str, limit: int = 1000) -> str:
    """``text`` with each control character spelled as an escape, at most ``limit`` long."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)[:limit]


@dataclass(frozen=True)
class PullOutcome:
    """One pull of one source: what was stored, what was refused and why, its error."""

    source: str
    stored: tuple[factgen.TypedFact, ...]
    refused: tuple[factgen.Refusal, ...]
    error: str | None
    latency_ms: float

    @property
    def refused_by_reason(self) -> dict[str, int]:
        """Refusal counts by code."""
        return dict(Counter(r.code for r in self.refused))


def store_pull(
    rt: Runtime,
    *,
    source: str,
    observations: Sequence[factgen.Observation],
    refused: Sequence[factgen.Refusal] = (),
    error: str | None = None,
    latency_ms: float = 0.0,
    now: datetime | None = None,
    scheduled: bool = True,
) -> PullOutcome:
    """Store what a pull fetched, in one transaction, as the source's own principal:
    each observation typed on its own (a bad one is refused with its code, never stored
    under a guess), the source's status counted (``refused`` holds what the connector
    refused before typing, such as ``NaN``), and one audit row for the batch. A
    refresh's pull (``scheduled`` false) is counted but moves no schedule: its failure
    (a recall's short deadline) never backs the source's scheduled pulls off. The
    error text is kept printable (a source's answer may carry control characters)."""
    now = clock(now)
    actor = source_actor(source)
    error = None if error is None else _printable(error)
    with rt.transaction("store_pull") as s:
        stored, typed_refused = factgen.observe_each(
            session=s,
            actor=actor,
            world=rt.world(s),
            observations=list(observations),
            observed_at=now,
            now=now,
        )
        outcome = PullOutcome(source, tuple(stored), (*refused, *typed_refused), error, latency_ms)
        factgen.record_pull(
            session=s,
            tenant=rt.tenant,
            source=source,
            at=now,
            stored=len(stored),
            refused=outcome.refused_by_reason,
            error=error,
            latency_ms=latency_ms,
            scheduled=scheduled,
        )
        _audit(
            s,
            rt,
            actor.id,
            "pull",
            now,
            {
                "source": source,
                "stored": len(stored),
                "refused": outcome.refused_by_reason,
                **({"error": error} if error else {}),
            },
        )
    return outcome


# --- hooks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenCase:
    """Open the case ``case_id`` about ``subjects``, or join it when it is open."""

    case_id: str
    subjects: tuple[str, ...]


@dataclass(frozen=True)
class Observe:
    """Record these observations (each with its own time, else the delivery's). With
    ``declared_only``, an observation of an attribute the schema does not declare is
    skipped and reported (``fact_unknown_attribute``) instead of refusing the delivery
    (an alert's ``alert.<name>``: the case still opens; a source never declares)."""

    observations: tuple[factgen.Observation, ...]
    declared_only: bool = False


@dataclass(frozen=True)
class Ignore:
    """Acknowledge a delivery that asks for nothing (a GitHub ``ping``, a failed deploy,
    a CloudEvent of a type caveat does not know), with the reason."""

    reason: str


@dataclass(frozen=True)
class PostEvent:
    """Record an event and run the lifecycle's handling of it (``record_event``)."""

    type: str
    subjects: tuple[str, ...]
    occurred_at: datetime
    changes: dict[str, object] = field(default_factory=dict)
    principal: str | None = None
    external_id: str | None = None


@dataclass(frozen=True)
class CloseCase:
    """Close the case with its outcome; with none, it stays open and waits for its
    outcome in the SME queue (model §2.2)."""

    case_id: str
    outcome: Literal["confirmed", "rejected"] | None


HookAction = OpenCase | Observe | PostEvent | CloseCase | Ignore


@dataclass(frozen=True)
class Delivery:
    """What a hook delivery did (or, for a repeat, what its first time did)."""

    kind: str
    delivery_id: str | None
    duplicate: bool
    done: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "delivery_id": self.delivery_id,
            "duplicate": self.duplicate,
            "done": list(self.done),
        }


def _open(s: Any, rt: Runtime, actor: claims.Actor, a: OpenCase, now: datetime) -> dict[str, Any]:
    """Join the open case of ``a.case_id``; when that case was closed (the incident is
    over and the alert group fires again), the next incident is ``<id>-2``, ``-3``...:
    a sender's stable group id never lands a new incident in a closed case."""
    for n in range(1, 10_000):
        case_id = a.case_id if n == 1 else f"{a.case_id}-{n}"
        try:
            case = lifecycle.get_case(session=s, tenant=rt.tenant, case_id=case_id)
        except NotFound:
            case = lifecycle.open_case(
                session=s,
                tenant=rt.tenant,
                case_id=case_id,
                subjects=list(a.subjects),
                actor=actor,
                now=now,
            )
            return {"action": "open_case", "case": case.id, "subjects": list(case.subjects)}
        if case.status == "open":
            return {"action": "join_case", "case": case.id, "status": case.status}
    raise Conflict(f"case {a.case_id!r} has been reopened too many times", case=a.case_id)


def _step(
    s: Any, rt: Runtime, actor: claims.Actor, action: HookAction, now: datetime
) -> dict[str, Any]:
    if isinstance(action, OpenCase):
        return _open(s, rt, actor, action, now)
    if isinstance(action, Ignore):
        return {"action": "ignored", "reason": action.reason}
    if isinstance(action, Observe):
        world = rt.world(s)
        wanted = list(action.observations)
        skipped: list[factgen.Observation] = []
        canonical: dict[str, str] = {}
        if action.declared_only:
            skipped = [o for o in wanted if world.schema.get(o.attribute) is None]
            wanted = [o for o in wanted if o not in skipped]
            # a subject is never taken on a guess, stored or not
            canonical = {o.subject: world.resolver.resolve(o.subject) for o in skipped}
        facts = factgen.observe(
            session=s, actor=actor, world=world, observations=wanted, observed_at=now, now=now
        )
        return {
            "action": "observe",
            "facts": [{"subject": f.subject, "attribute": f.attribute} for f in facts],
            **(
                {
                    "skipped": [
                        {
                            "subject": canonical[o.subject],
                            "attribute": o.attribute,
                            "code": "fact_unknown_attribute",
                        }
                        for o in skipped
                    ]
                }
                if skipped
                else {}
            ),
        }
    if isinstance(action, PostEvent):
        event = factgen.record_event(
            session=s,
            actor=actor,
            world=rt.world(s),
            type=action.type,
            subjects=action.subjects,
            changes=action.changes,
            principal=action.principal,
            occurred_at=action.occurred_at,
            now=now,
            source=actor.id,
            external_id=action.external_id,
        )
        handled = lifecycle.event_as_seen(  # a sender reads no item: it is told of none
            session=s,
            tenant=rt.tenant,
            actor=actor,
            outcome=lifecycle.handle_event(session=s, tenant=rt.tenant, event=event, now=now),
        )
        return {
            "action": "event",
            "event": event.id,
            "type": event.type,
            "subjects": list(event.subjects),
            "affected": list(handled.affected),
        }
    if action.outcome is None:
        # the sender says it is over without saying how: an SME's to close (model §2.2);
        # the row is what lists such cases in the SME queue (lifecycle.awaiting_outcome)
        _audit(s, rt, actor.id, "awaiting_outcome", now, {"case": action.case_id})
        return {"action": "awaiting_outcome", "case": action.case_id}
    lifecycle.close_case(
        session=s,
        tenant=rt.tenant,
        case_id=action.case_id,
        outcome=action.outcome,
        actor=actor,
        now=now,
    )
    lifecycle.auto_promote(session=s, tenant=rt.tenant, now=now)  # promotion.auto_apply
    return {"action": "close_case", "case": action.case_id, "outcome": action.outcome}


@dataclass(frozen=True)
class HookPlan:
    """What a delivery asks for, as a connector translated it: the actions, the sender's
    delivery id (None: not deduplicated) and the sender's own timestamp (checked against
    the clock-skew rule), where it sends one."""

    actions: tuple[HookAction, ...]
    delivery_id: str | None = None
    sent_at: datetime | None = None


#: A connector's translation of its payload, given the tenant's ``hooks:`` mapping.
Planner = Callable[[factgen.HooksConfig], HookPlan]


def _authenticated(s: Any, rt: Runtime, token: str) -> claims.Actor:
    actor = claims.authenticate(session=s, tenant=rt.tenant, token=token)
    if actor.role != "source":
        raise Forbidden(f"hooks take a token of role source, not {actor.role}", role=actor.role)
    return actor


def deliver_hook(
    rt: Runtime,
    *,
    kind: str,
    actor: claims.Actor | None = None,
    actions: Sequence[HookAction] = (),
    delivery_id: str | None = None,
    sent_at: datetime | None = None,
    token: str | None = None,
    plan: Planner | None = None,
    now: datetime | None = None,
) -> Delivery:
    """Act on one hook delivery: every action in one transaction (a refused one writes
    nothing of the delivery), once per ``delivery_id`` (a repeat answers what the first
    did, with ``duplicate``).

    The sender is ``actor`` (role ``source``), or the principal ``token`` stands for
    (authenticated in the same transaction; a token of another role is ``forbidden``).
    With ``plan``, the actions, delivery id and timestamp are what ``plan`` makes of the
    tenant's ``hooks:`` mapping, read in the same transaction (it may refuse: a bad
    signature, a payload that is not the format). ``sent_at`` further ahead than the
    tenant's ``event_clock_skew`` refuses the delivery (``event_in_future``). What was
    done is kept with the delivery id (``hook_deliveries``) and audited by each use case
    as it is when called directly (opening a case, ...); a refusal is audited
    (``refuse_hook``) and raised."""
    now = clock(now)
    who = actor.id if actor is not None else f"source:{kind}"
    try:
        with rt.transaction(f"hook_{kind}") as s:
            if token is not None:
                actor = _authenticated(s, rt, token)
                who = actor.id
            if actor is None:
                raise InputError("a hook delivery needs its sender: an actor or a token")
            if plan is not None:
                loaded = factgen.loaded_sources(session=s, tenant=rt.tenant)
                planned = plan(factgen.HooksConfig() if loaded is None else loaded.config.hooks)
                actions, sent_at = planned.actions, planned.sent_at
                delivery_id = delivery_id or planned.delivery_id
            return _deliver(s, rt, kind, actor, actions, delivery_id, sent_at, now)
    except CaveatError as exc:
        with suppress(CaveatError):  # a tenant that does not exist keeps no audit row
            refuse_hook(rt, kind=kind, actor_id=who, error=exc, delivery_id=delivery_id, now=now)
        raise


def _deliver(
    s: Any,
    rt: Runtime,
    kind: str,
    actor: claims.Actor,
    actions: Sequence[HookAction],
    delivery_id: str | None,
    sent_at: datetime | None,
    now: datetime,
) -> Delivery:
    if sent_at is not None:
        EventInFuture.check(
            f"{kind} delivery",
            sent_at,
            now=now,
            skew=rt.world(s).policy.event_clock_skew,
            cause="the sender's clock is wrong",
        )
    if delivery_id is not None:
        seen = factgen.claim_delivery(
            session=s, tenant=rt.tenant, kind=kind, delivery_id=delivery_id, now=now
        )
        if seen is not None:
            return Delivery(kind, delivery_id, True, tuple(seen.get("done", ())))
    done = tuple(_step(s, rt, actor, action, now) for action in actions)
    if delivery_id is not None:
        factgen.settle_delivery(
            session=s,
            tenant=rt.tenant,
            kind=kind,
            delivery_id=delivery_id,
            outcome={"done": list(done)},
        )
    return Delivery(kind, delivery_id, False, done)


def refuse_hook(
    rt: Runtime,
    *,
    kind: str,
    actor_id: str,
    error: CaveatError,
    delivery_id: str | None = None,
    now: datetime | None = None,
) -> None:
    """The audit row of a refused delivery (bad signature, not the format, a subject that
    does not resolve): the code and message, never the payload."""
    now = clock(now)
    with rt.transaction("hook_refused") as s:
        _audit(
            s,
            rt,
            actor_id,
            "hook_refused",
            now,
            {
                "kind": kind,
                "message": error.message[:500],
                **({"delivery_id": delivery_id} if delivery_id else {}),
            },
            code=error.code,
        )
