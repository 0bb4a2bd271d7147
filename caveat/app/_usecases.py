"""The application layer: one function per use case, shared by every door.

Replay, the CLI (and the HTTP API, MCP server and SME pages that stand on this
layer) call these and only render what they return, so a rule holds at every door
or at none. Each function:

- owns its transaction (``Runtime.transaction``: committed on success, database
  errors translated into the error tree by ``caveat.app._errors.mapped``), opened by
  ``caveat.app._unit.usecase`` around the body;
- acts for an ``actor`` whose permission the domain checks through the one role
  table (``factgen.ROLE_ACTIONS``, re-exported by ``claims``; every data-changing
  domain function takes the actor);
- takes ``now`` (default: the wall clock; replay passes its virtual clock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

import claims
import factgen
import lifecycle
import recall
from caveat.app._errors import mapped
from caveat.app._runtime import Runtime, known_case
from caveat.app._unit import Unit, clock, usecase
from predicates.errors import InputError

__all__ = [
    "EventResult",
    "ImportOutcome",
    "add_evidence",
    "attach_evidence",
    "audit_entries",
    "audit_verify",
    "authenticate",
    "check_context",
    "cite",
    "close_case",
    "contested_keys",
    "create_token",
    "declare_schema",
    "declare_tenant",
    "diff",
    "drop",
    "graduate",
    "import_entities",
    "import_facts",
    "item",
    "lineage",
    "list_tokens",
    "observe",
    "open_case",
    "promote",
    "promotion_candidates",
    "propose",
    "recall_items",
    "recall_needs",
    "record_event",
    "record_use",
    "redact",
    "refute",
    "register_principal",
    "release_skill",
    "retire_skill",
    "revoke",
    "revoke_token",
    "shadow_report",
    "sweep",
    "verify",
    "write",
    "write_batch",
]

FactFormat = Literal["config", "prometheus", "cloudevents"]


# --- the tenant: policy, principals, schema, entities ------------------------------


@usecase()
def declare_tenant(
    u: Unit,
    *,
    policy: factgen.TenantPolicy | None = None,
    now: datetime | None = None,
) -> str:
    """Create the tenant if it is new; with ``policy``, set its policy (admin only)."""
    factgen.ensure_tenant(**u.at(now), policy=policy)
    return u.tenant


@usecase()
def register_principal(
    u: Unit,
    principal: str,
    *,
    role: str,
    capabilities: Sequence[str] = (),
    clearance: str | None = None,
    team: str | None = None,
) -> claims.Actor:
    """Register (or update) a principal of the tenant with its role, capabilities,
    clearance (a classification level; None: keep it, or ``internal`` for a new one) and
    team (recall's ``team:<id>`` anchor; None: keep it) (admin only: it is the
    permission table)."""
    return claims.register_principal(
        **u.scope(),
        principal=principal,
        role=role,
        capabilities=list(capabilities),
        clearance=clearance,
        team=team,
    )


@usecase()
def declare_schema(
    u: Unit,
    specs: Sequence[factgen.AttributeSpec],
    *,
    now: datetime | None = None,
) -> int:
    """Declare (or redeclare) fact attributes; creates the tenant if new (admin only)."""
    factgen.ensure_tenant(**u.at(now))
    return factgen.declare_attributes(**u.scope(), specs=list(specs))


@usecase()
def import_entities(
    u: Unit,
    entities: Sequence[factgen.EntitySpec],
    *,
    now: datetime | None = None,
) -> int:
    """Import entities, aliases and topology edges, all or nothing; creates the tenant
    if new (admin only)."""
    factgen.ensure_tenant(**u.at(now))
    return factgen.import_entities(
        session=u.session, actor=u.actor, world=u.world(), entities=list(entities)
    )


@usecase(require="audit_verify")
def audit_entries(
    u: Unit,
    *,
    item_id: int | None = None,
    by: str | None = None,
    code: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
    after: int | None = None,
) -> list[claims.AuditEntryRecord]:
    """Audit rows in chain order, filtered, as ``actor`` may see them (every role may
    verify the chain; an admin lists every row, an SME none about an item it may not
    read, an agent its own such rows: docs/reliability.md, section 2). With ``limit``
    alone, the last ``limit`` rows; with ``after``, the first ``limit`` rows past that
    chain position (a keyset page, read from there on)."""
    rows = claims.audit_entries(
        session=u.session,
        tenant=u.tenant,
        item_id=item_id,
        actor=by,
        code=code,
        action=action,
        since=since,
        until=until,
        limit=limit,
        after=after,
        reader=u.actor,
    )
    return lifecycle.audit_as_seen(**u.scope(), rows=rows)


@usecase()
def create_token(
    u: Unit,
    principal: str,
    *,
    role: str,
    capabilities: Sequence[str] | None = None,
    clearance: str | None = None,
    team: str | None = None,
    now: datetime | None = None,
) -> claims.IssuedToken:
    """An API token for ``principal`` (admin only); the secret is in the result once.
    ``clearance``: a new principal's (default ``internal``), or at most an existing
    one's (None: its own); ``team``: sets the principal's team (None: keeps it)."""
    return claims.create_token(
        **u.at(now),
        principal=principal,
        role=role,
        capabilities=capabilities,
        clearance=clearance,
        team=team,
    )


@usecase()
def list_tokens(u: Unit) -> list[claims.TokenInfo]:
    """The tenant's API tokens, never their secrets (admin only)."""
    return claims.list_tokens(**u.scope())


@usecase()
def revoke_token(u: Unit, token_id: str, *, now: datetime | None = None) -> claims.TokenInfo:
    """Revoke an API token (admin only): it authenticates no more."""
    return claims.revoke_token(**u.at(now), token_id=token_id)


def authenticate(rt: Runtime, token: str) -> tuple[Runtime, claims.Actor]:
    """The runtime of the tenant a bearer token names and the actor it stands for
    (``unauthenticated`` otherwise): what every door that takes tokens calls first.

    The actor comes from the runtime's ``TokenCache`` while the tenant's credentials
    version is the one it was read under (one statement); otherwise the token is read
    again, in a transaction of its own, and kept under the version read before it."""
    scoped = rt.for_tenant(claims.token_tenant(token))
    version = scoped.credentials_version()
    cached = scoped.tokens.get(token, version)
    if cached is not None:
        return scoped, cached
    with scoped.transaction("authenticate") as s:
        actor = claims.authenticate(session=s, tenant=scoped.tenant, token=token)
    scoped.tokens.put(token, version, actor)
    return scoped, actor


@usecase(require="audit_verify")
def audit_verify(u: Unit) -> claims.AuditReport:
    """Recompute the tenant's audit hash chain."""
    return claims.verify_chain(session=u.session, tenant=u.tenant)


# --- the world: facts and events -------------------------------------------------


@usecase()
def observe(
    u: Unit,
    observations: Sequence[factgen.Observation],
    *,
    at: datetime | None = None,
    now: datetime | None = None,
) -> list[factgen.TypedFact]:
    """Record typed facts observed ``at`` (default now); one value of the wrong type
    stores nothing (``fact_type_mismatch``)."""
    now = clock(now)
    return factgen.observe(
        session=u.session,
        actor=u.actor,
        world=u.world(),
        observations=list(observations),
        observed_at=at or now,
        now=now,
    )


@dataclass(frozen=True)
class EventResult:
    """A recorded event and what the lifecycle's handling did with it."""

    event: factgen.Event
    outcome: lifecycle.EventOutcome


@usecase()
def record_event(
    u: Unit,
    *,
    type: str,
    subjects: Sequence[str],
    changes: dict[str, object] | None = None,
    principal: str | None = None,
    occurred_at: datetime | None = None,
    source: str | None = None,
    judge: lifecycle.Judge | None = None,
    now: datetime | None = None,
) -> EventResult:
    """Record a deploy, config-change, version-change or authorisation event and run
    the lifecycle's event handling in the same transaction (model §4.3): what depended
    on what changed is re-opened, atomically with the event (the answer names only the
    items ``actor`` may read: ``lifecycle.event_as_seen``). ``judge`` replaces the
    default rule-based judge (model §4.3: it may narrow and flag, never clear)."""
    now = clock(now)
    event = factgen.record_event(
        session=u.session,
        actor=u.actor,
        world=u.world(),
        type=type,
        subjects=subjects,
        changes=changes,
        principal=principal,
        occurred_at=occurred_at or now,
        now=now,
        source=source,
    )
    outcome = lifecycle.handle_event(
        session=u.session, tenant=u.tenant, event=event, now=now, judge=judge
    )
    return EventResult(event, lifecycle.event_as_seen(**u.scope(), outcome=outcome))


@dataclass(frozen=True)
class ImportOutcome:
    """What an import stored and skipped, and for events, what their handling did."""

    result: factgen.ImportResult
    handled: tuple[lifecycle.EventOutcome, ...] = ()


@usecase(use="import_facts")
def import_facts(
    u: Unit,
    *,
    format: FactFormat,
    text: str,
    source_name: str,
    subject: str | None = None,
    prefix: str = "config.",
    rules: list[factgen.MetricRule] | None = None,
    now: datetime | None = None,
) -> ImportOutcome:
    """Import a config document, a Prometheus exposition or CloudEvents, atomically:
    one bad value stores nothing. Imported events run the lifecycle's event handling,
    as ``record_event`` does, in the same transaction."""
    now = clock(now)
    world = u.world()
    if format == "config":
        if subject is None:
            raise InputError("a config document needs the subject it describes")
        result = factgen.import_config(
            session=u.session,
            actor=u.actor,
            world=world,
            text=text,
            subject=subject,
            prefix=prefix,
            observed_at=now,
            now=now,
            source_name=source_name,
        )
    elif format == "prometheus":
        if rules is None:
            raise InputError("a Prometheus import needs its mapping rules")
        result = factgen.import_prometheus(
            session=u.session,
            actor=u.actor,
            world=world,
            text=text,
            rules=rules,
            subject=subject,
            observed_at=now,
            now=now,
            source_name=source_name,
        )
    else:
        result = factgen.import_cloudevents(
            session=u.session,
            actor=u.actor,
            world=world,
            text=text,
            subject=subject,
            now=now,
            source_name=source_name,
        )
    handled = tuple(
        lifecycle.event_as_seen(
            **u.scope(),
            outcome=lifecycle.handle_event(session=u.session, tenant=u.tenant, event=e, now=now),
        )
        for e in result.events
    )
    return ImportOutcome(result, handled)


# --- items, evidence and proposals -------------------------------------------------


@usecase()
def add_evidence(
    u: Unit,
    evidence_id: str,
    *,
    title: str | None = None,
    uri: str | None = None,
    readers: Sequence[str] = (),
    deny: Sequence[str] = (),
    classification: str | None = None,
    now: datetime | None = None,
) -> str:
    """Register an evidence source; ``readers`` (capabilities) absent: tenant-readable;
    ``deny`` (``principal:<id>``, ``cap:<capability>``) never read it; ``classification``
    a level of the tenant's policy (None: the lowest)."""
    claims.register_evidence(
        **u.at(now),
        evidence_id=evidence_id,
        title=title,
        uri=uri,
        readers=list(readers),
        deny=list(deny),
        classification=classification,
    )
    return evidence_id


def write(
    rt: Runtime, actor: claims.Actor, request: claims.ItemWrite, *, now: datetime | None = None
) -> claims.WriteResult:
    """One item through the write gate; a case-scoped item needs its case open (the
    gate owns its transactions: it audits a refusal in one of its own)."""
    with mapped():
        return lifecycle.write(
            sessions=rt.sessions,
            tenant=rt.tenant,
            request=request,
            actor=actor,
            now=clock(now),
            world=rt.world,
        )


def write_batch(
    rt: Runtime,
    actor: claims.Actor,
    requests: Sequence[claims.ItemWrite],
    *,
    progress: Callable[[int], None] | None = None,
    now: datetime | None = None,
) -> claims.BatchResult:
    """Many items through the gate, one outcome each (``progress``: items per chunk)."""
    with mapped():
        return lifecycle.write_batch(
            sessions=rt.sessions,
            tenant=rt.tenant,
            requests=requests,
            actor=actor,
            now=clock(now),
            progress=progress,
            world=rt.world,
        )


def propose(
    rt: Runtime,
    actor: claims.Actor,
    proposals: Sequence[claims.Proposal | dict[str, object]],
    *,
    scope: claims.Anchor,
    source: str | None = None,
    now: datetime | None = None,
) -> claims.BatchResult:
    """A model's proposals consolidated through the gate (proposals carry no authority)."""
    with mapped():
        return lifecycle.consolidate(
            proposals,
            sessions=rt.sessions,
            tenant=rt.tenant,
            actor=actor,
            scope=scope,
            now=clock(now),
            source=source,
        )


@usecase()
def attach_evidence(
    u: Unit,
    item_id: int,
    evidence_id: str,
    *,
    stance: str,
    strength: float,
    source_kind: str,
    now: datetime | None = None,
) -> lifecycle.Attachment:
    """Evidence for or against an item: its confidence moves (ranking only)."""
    return lifecycle.attach_evidence(
        **u.at(now),
        item_id=item_id,
        evidence_id=evidence_id,
        stance=stance,
        strength=strength,
        source_kind=source_kind,
    )


@usecase(require="read")
def item(u: Unit, item_id: int) -> claims.ItemRecord:
    """One item as ``actor`` may see it; ``not_found`` otherwise (a redacted item too)."""
    return lifecycle.visible_item(**u.scope(), item_id=item_id)


@usecase()
def release_skill(
    u: Unit, item_id: int, *, test: str | None = None, now: datetime | None = None
) -> claims.ItemRecord:
    """Release a skill version on a passing test run; the one released before retires."""
    return claims.release_skill(**u.at(now), item_id=item_id, test=test)


@usecase()
def retire_skill(
    u: Unit, item_id: int, *, reason: str | None = None, now: datetime | None = None
) -> claims.ItemRecord:
    """Retire a skill version: it is no longer recalled."""
    return claims.retire_skill(**u.at(now), item_id=item_id, reason=reason)


# --- cases and the lifecycle ---------------------------------------------------------


@usecase()
def open_case(
    u: Unit, case_id: str, *, subjects: Sequence[str] = (), now: datetime | None = None
) -> lifecycle.CaseRecord:
    """Open a case (an incident or an agent run) about ``subjects``."""
    return lifecycle.open_case(**u.at(now), case_id=case_id, subjects=list(subjects))


@usecase()
def close_case(
    u: Unit,
    case_id: str,
    *,
    outcome: Literal["confirmed", "rejected"],
    now: datetime | None = None,
) -> lifecycle.CloseResult:
    """Close a case as confirmed or rejected: citations become support or counter
    signals, and shadow items graduate or drop by the tenant's thresholds."""
    at = clock(now)
    closed = lifecycle.close_case(**u.at(at), case_id=case_id, outcome=outcome)
    lifecycle.auto_promote(session=u.session, tenant=u.tenant, now=at)  # promotion.auto_apply
    return lifecycle.close_as_seen(**u.scope(), result=closed)


@usecase()
def cite(
    u: Unit,
    case_id: str,
    item_id: int,
    *,
    influence: str,
    expected: Any = None,
    observed: Any = None,
    rationale: str | None = None,
    now: datetime | None = None,
) -> lifecycle.Citation:
    """Record that an item in the case's context influenced it: how, what it expected and
    what was observed (both or neither; a skill's compliance is derived from them), why."""
    return lifecycle.cite(
        **u.at(now),
        case_id=case_id,
        item_id=item_id,
        influence=influence,
        expected=expected,
        observed=observed,
        rationale=rationale,
    )


@usecase()
def verify(
    u: Unit, item_id: int, *, rationale: str | None = None, now: datetime | None = None
) -> claims.ItemRecord:
    """An SME verifies an item (epistemic status ``verified``), with an optional rationale."""
    return lifecycle.verify(**u.at(now), item_id=item_id, rationale=rationale)


@usecase()
def promote(
    u: Unit,
    item_id: int,
    *,
    to: Literal["shadow", "active"],
    rationale: str | None = None,
    now: datetime | None = None,
) -> claims.ItemRecord:
    """Scope expansion: case -> shadow, shadow -> active (early graduation)."""
    return lifecycle.promote(**u.at(now), item_id=item_id, to=to, rationale=rationale)


def graduate(
    rt: Runtime,
    actor: claims.Actor,
    item_id: int,
    *,
    rationale: str | None = None,
    now: datetime | None = None,
) -> claims.ItemRecord:
    """Graduate a shadow item to ``active`` before its thresholds are met."""
    return promote(rt, actor, item_id, to="active", rationale=rationale, now=now)


@usecase()
def drop(
    u: Unit, item_id: int, *, rationale: str | None = None, now: datetime | None = None
) -> claims.ItemRecord:
    """Drop a shadow item back to its case."""
    return lifecycle.drop(**u.at(now), item_id=item_id, rationale=rationale)


@usecase(use="refute")
def refute(u: Unit, item_id: int, *, reason: str, now: datetime | None = None) -> claims.ItemRecord:
    """An SME refutes an item; everything derived from it is re-opened."""
    return lifecycle.refute(**u.at(now), item_id=item_id, reason=reason)


@usecase(use="revoke")
def revoke(
    u: Unit, item_id: int, *, reason: str, now: datetime | None = None
) -> lifecycle.RevokeResult:
    """Revoke an item; everything derived from it is re-opened."""
    return lifecycle.revoke(**u.at(now), item_id=item_id, reason=reason)


@usecase()
def redact(u: Unit, item_id: int, *, reason: str, now: datetime | None = None) -> int:
    """Redact an item: hidden everywhere, history included; nothing is deleted."""
    lifecycle.redact(**u.at(now), item_id=item_id, reason=reason)
    return item_id


@usecase(require="read")
def lineage(u: Unit, item_id: int) -> lifecycle.Lineage:
    """An item's ancestors and descendants over ``derived_from``."""
    return lifecycle.lineage(**u.scope(), item_id=item_id)


@usecase(require="read")
def shadow_report(u: Unit) -> lifecycle.ShadowReport:
    """The shadow items against the tenant's graduation thresholds."""
    return lifecycle.shadow_report(**u.scope())


@usecase(require="read")
def promotion_candidates(u: Unit) -> list[lifecycle.PromotionKey]:
    """Keys held by items of several cases that agree on the object."""
    return lifecycle.candidates(**u.scope())


@usecase(require="read")
def contested_keys(u: Unit) -> list[lifecycle.PromotionKey]:
    """Keys whose cases disagree on the object (never majority-voted)."""
    return lifecycle.contested(**u.scope())


@usecase(require="sweep")
def sweep(u: Unit, *, now: datetime | None = None) -> lifecycle.SweepResult:
    """Persist what time did: TTLs that ran out, unused case items archived (the
    server's periodic job and replay's clock run it as the local admin)."""
    at = clock(now)
    swept = lifecycle.sweep(session=u.session, tenant=u.tenant, now=at)
    lifecycle.auto_promote(session=u.session, tenant=u.tenant, now=at)  # promotion.auto_apply
    return swept


# --- recall ----------------------------------------------------------------------------


def recall_items(
    rt: Runtime,
    actor: claims.Actor,
    request: recall.RecallRequest,
    *,
    now: datetime | None = None,
    token: str | None = None,
) -> recall.RecallResult:
    """Recall: the six gates, then ranking; a pure read, served by a replica only when
    it has replayed the tenant's latest withdrawal and ``token`` (a consistency token)."""
    return rt.recall(actor, request, now, token=token)


def recall_needs(
    rt: Runtime,
    actor: claims.Actor,
    request: recall.RecallRequest,
    *,
    now: datetime | None = None,
    token: str | None = None,
) -> list[tuple[str, str]]:
    """What a refresh pulls before this recall (``recall.needs``): the ``(canonical
    subject, attribute)`` pairs its candidates' conditions lack. A read, routed as the
    recall is; the pull and the recall are the caller's (``caveat.connectors.recall``)."""
    at = clock(now)

    def read(s: Session) -> list[tuple[str, str]]:
        known_case(s, rt.tenant, request.case_id)
        return recall.needs(
            session=s, tenant=rt.tenant, actor=actor, request=request, now=at, world=rt.world(s)
        )

    return rt.routed("recall_needs", token, read)


def record_use(
    rt: Runtime,
    actor: claims.Actor,
    request: recall.RecallRequest,
    used: Sequence[int],
    *,
    now: datetime | None = None,
) -> recall.UseRecord:
    """Record the use of what a recall returned (re-checked on the server)."""
    return rt.record_use(actor, request, used, now)


def check_context(
    rt: Runtime,
    actor: claims.Actor,
    item_ids: Sequence[int],
    *,
    case_id: str | None = None,
    record: bool = False,
    now: datetime | None = None,
    token: str | None = None,
    observations: Sequence[factgen.Observation] = (),
    session: str | None = None,
) -> recall.ContextCheck:
    """The context guard: which of these items may still be used, by recall's rule, on
    what is observed now (``observations`` inline), in ``session`` (its working memory)
    (read from a replica only when it is fresh, as recall; what it records, on the
    primary)."""
    return rt.check_context(
        actor,
        item_ids,
        case_id,
        now,
        record=record,
        token=token,
        observations=observations,
        session=session,
    )


@usecase()
def diff(
    u: Unit,
    *,
    from_: datetime,
    to: datetime,
    subjects: Sequence[str] | None = None,
    purpose: str | None = None,
    now: datetime | None = None,
) -> recall.BeliefDiff:
    """What became and stopped being recallable between two instants, with causes."""
    return recall.diff(
        **u.at(now), from_=from_, to=to, subjects=subjects, purpose=purpose, world=u.world()
    )
