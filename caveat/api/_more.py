"""The routes of the remaining use cases: items and evidence, an SME's review, events,
proposals, the belief diff, lineage, audit, the shadow report, promotion keys and
tokens. Each validates, calls one ``caveat.app`` function and renders."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request
from pydantic import BaseModel, ConfigDict, Field

import claims
import factgen
from caveat import app as use
from caveat.answers._answers import (
    AttachmentOut,
    AuditPage,
    AuditReportOut,
    DiffOut,
    EventsOut,
    EvidenceOut,
    ItemView,
    KeyPage,
    LineageOut,
    OutcomeOut,
    RedactedOut,
    RevokedOut,
    ShadowPage,
    SweepOut,
    TokenIssued,
    TokenOut,
    TokenPage,
)
from caveat.api._deps import Acting, typed
from caveat.app._input import proposal_anchor
from caveat.app._requests import CloudEventIn, ProposalIn
from caveat.app.views import (
    audit_view,
    diff_view,
    event_view,
    item_view,
    key_view,
    sweep_view,
)
from predicates.errors import InputError

__all__ = ["router"]

router = APIRouter()


class Strict(BaseModel):
    """A request body: no unknown keys, and no coercion (``"1"`` is not an id)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Reason(Strict):
    reason: str = Field(min_length=1)


class PromoteIn(Strict):
    to: Literal["shadow", "active"]
    rationale: str | None = None


class RationaleIn(Strict):
    rationale: str | None = None


class EvidenceIn(Strict):
    id: str = Field(min_length=1)
    title: str | None = None
    uri: str | None = None
    readers: list[str] = Field(default_factory=list)
    deny: list[str] = Field(
        default_factory=list,
        description='who may never read it: "principal:<id>" or "cap:<capability>"',
    )
    classification: str | None = Field(
        default=None, description="a level of the tenant's policy; none: the lowest"
    )


class AttachIn(Strict):
    evidence: str = Field(min_length=1)
    stance: Literal["supports", "refutes"]
    strength: float = Field(ge=0, le=1)
    source_kind: Literal["human_confirm", "citation", "repeat_observation", "agent_judge"]


class ProposalsIn(Strict):
    proposals: list[ProposalIn]
    case: str | None = Field(default=None, min_length=1)
    scope: str | None = Field(
        default=None, description='"axis:id" (e.g. "session:s-1") instead of a case'
    )
    source: str | None = None


class TokenIn(Strict):
    principal: str = Field(min_length=1)
    role: Literal["agent", "sme", "admin", "source"]
    capabilities: list[str] | None = None
    clearance: str | None = Field(
        default=None,
        description="the highest level it may read; none: the principal's (new: internal)",
    )
    team: str | None = Field(
        default=None,
        min_length=1,
        description="the principal's team (recall's default team:<id> anchor); none: keep it",
    )


def _page(rows: list[Any], cursor: str | None, limit: int) -> dict[str, Any]:
    """Cursor pagination over a list in its stable order: ``cursor`` is opaque (the
    position after the last row of the previous page); ``next`` is None on the last."""
    start = 0
    if cursor:
        try:
            start = int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise InputError("cursor: not a cursor this API gave", attribute="cursor") from exc
        if start < 0:
            raise InputError("cursor: not a cursor this API gave", attribute="cursor")
    chunk = rows[start : start + limit]
    after = start + len(chunk)
    token = base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()
    return {"items": chunk, "next": token if after < len(rows) else None}


Cursor = Annotated[str | None, Query(description="From the previous page's `next`.")]
Limit = Annotated[int, Query(ge=1, le=500)]


@router.post("/v1/items", tags=["items"], **typed(list[OutcomeOut]))
def write_route(
    request: Request,
    who: Acting,
    body: Annotated[list[claims.ItemWrite], Body(min_length=1, max_length=1000)],
) -> Any:
    """Items through the write gate (a list of `ItemWrite` objects, `scope` and `facets`
    as `"axis:id"`), one outcome each: accepted, duplicate, or rejected with its reason
    code and gate. An item that is not an `ItemWrite` refuses the batch, naming its
    index and field (`items[3].scope: ...`)."""
    rt, actor = who
    outcomes = use.write_batch(rt, actor, body).outcomes
    for o in outcomes:
        if o.outcome == "rejected" and o.code is not None:
            request.app.state.metrics.refusals.labels(o.code).inc()
    return [o.to_dict() for o in outcomes]


@router.get("/v1/items/{item_id}", tags=["items"], **typed(ItemView))
def item_route(who: Acting, item_id: int) -> Any:
    """One item as the caller may see it (404 otherwise)."""
    rt, actor = who
    return item_view(use.item(rt, actor, item_id)).model_dump(mode="json")


@router.post("/v1/evidence", status_code=201, tags=["items"], **typed(EvidenceOut, 201))
def evidence_route(who: Acting, body: EvidenceIn) -> Any:
    """Register an evidence source (`readers`: capabilities, none: tenant-readable;
    `deny`: principals or capabilities that never read it; `classification`: a level)."""
    rt, actor = who
    use.add_evidence(
        rt,
        actor,
        body.id,
        title=body.title,
        uri=body.uri,
        readers=body.readers,
        deny=body.deny,
        classification=body.classification,
    )
    return {
        "evidence": body.id,
        "readers": body.readers,
        "deny": factgen.parse_deny(body.deny),
        "classification": body.classification,
    }


@router.post("/v1/items/{item_id}/evidence", tags=["items"], **typed(AttachmentOut))
def attach_route(who: Acting, item_id: int, body: AttachIn) -> Any:
    """Attach evidence for or against an item: its confidence moves (ranking only)."""
    rt, actor = who
    att = use.attach_evidence(
        rt,
        actor,
        item_id,
        body.evidence,
        stance=body.stance,
        strength=body.strength,
        source_kind=body.source_kind,
    )
    return {**asdict(att), "at": att.at.isoformat()}


def _item(record: claims.ItemRecord) -> dict[str, Any]:
    return item_view(record).model_dump(mode="json")


def _moved(request: Request, record: claims.ItemRecord) -> dict[str, Any]:
    """The item after a transition, counted by the state it led to."""
    request.app.state.metrics.transitions.labels(record.state).inc()
    return _item(record)


@router.post("/v1/items/{item_id}/verify", tags=["review"], **typed(ItemView))
def verify_route(request: Request, who: Acting, item_id: int) -> Any:
    """Verify an item (SME)."""
    rt, actor = who
    return _moved(request, use.verify(rt, actor, item_id))


@router.post("/v1/items/{item_id}/promote", tags=["review"], **typed(ItemView))
def promote_route(request: Request, who: Acting, item_id: int, body: PromoteIn) -> Any:
    """Scope expansion: case -> shadow, shadow -> active (SME)."""
    rt, actor = who
    return _moved(request, use.promote(rt, actor, item_id, to=body.to, rationale=body.rationale))


@router.post("/v1/items/{item_id}/graduate", tags=["review"], **typed(ItemView))
def graduate_route(request: Request, who: Acting, item_id: int, body: RationaleIn) -> Any:
    """Graduate a shadow item early (SME)."""
    rt, actor = who
    return _moved(request, use.graduate(rt, actor, item_id, rationale=body.rationale))


@router.post("/v1/items/{item_id}/drop", tags=["review"], **typed(ItemView))
def drop_route(request: Request, who: Acting, item_id: int, body: Reason) -> Any:
    """Drop a shadow item back to its case (SME)."""
    rt, actor = who
    return _moved(request, use.drop(rt, actor, item_id, rationale=body.reason))


@router.post("/v1/items/{item_id}/refute", tags=["review"], **typed(ItemView))
def refute_route(request: Request, who: Acting, item_id: int, body: Reason) -> Any:
    """Refute an item (SME)."""
    rt, actor = who
    return _moved(request, use.refute(rt, actor, item_id, reason=body.reason))


@router.post("/v1/items/{item_id}/revoke", tags=["review"], **typed(RevokedOut))
def revoke_route(request: Request, who: Acting, item_id: int, body: Reason) -> Any:
    """Revoke an item (SME); its lineage is re-opened."""
    rt, actor = who
    res = use.revoke(rt, actor, item_id, reason=body.reason)
    request.app.state.metrics.transitions.labels("needs_reverification").inc(len(res.reopened))
    return {"item": _moved(request, res.item), "reopened": list(res.reopened)}


@router.post("/v1/items/{item_id}/redact", tags=["review"], **typed(RedactedOut))
def redact_route(who: Acting, item_id: int, body: Reason) -> Any:
    """Redact an item (SME): hidden everywhere; nothing is deleted."""
    rt, actor = who
    use.redact(rt, actor, item_id, reason=body.reason)
    return {"item": item_id, "redacted": True}


@router.post("/v1/skills/{item_id}/release", tags=["review"], **typed(ItemView))
def release_route(who: Acting, item_id: int, test: str | None = None) -> Any:
    """Release a skill version on a passing test run (SME)."""
    rt, actor = who
    return _item(use.release_skill(rt, actor, item_id, test=test))


@router.post("/v1/skills/{item_id}/retire", tags=["review"], **typed(ItemView))
def retire_route(who: Acting, item_id: int, body: RationaleIn) -> Any:
    """Retire a skill version (SME)."""
    rt, actor = who
    return _item(use.retire_skill(rt, actor, item_id, reason=body.rationale))


@router.get("/v1/items/{item_id}/lineage", tags=["items"], **typed(LineageOut))
def lineage_route(who: Acting, item_id: int) -> Any:
    """Ancestors and descendants over `derived_from`, each with its state and depth."""
    rt, actor = who
    res = use.lineage(rt, actor, item_id)
    return {
        "item": asdict(res.item),
        "ancestors": [asdict(n) for n in res.ancestors],
        "descendants": [asdict(n) for n in res.descendants],
    }


@router.post("/v1/events", tags=["world"], **typed(EventsOut))
def events_route(who: Acting, body: Annotated[CloudEventIn | list[CloudEventIn], Body()]) -> Any:
    """CloudEvents (one or a batch), recorded with the lifecycle's event handling."""
    rt, actor = who
    given = [e.model_dump(mode="json", exclude_unset=True) for e in _each(body)]
    text = json.dumps(given[0] if isinstance(body, CloudEventIn) else given)
    done = use.import_facts(rt, actor, format="cloudevents", text=text, source_name="<http>")
    return event_view(done)


@router.post("/v1/proposals", tags=["items"], **typed(list[OutcomeOut]))
def proposals_route(who: Acting, body: ProposalsIn) -> Any:
    """A model's proposals consolidated through the gate (they carry no authority)."""
    rt, actor = who
    anchor = proposal_anchor(body.case, body.scope)
    if not body.proposals:
        raise InputError("proposals: at least one", attribute="proposals")
    result = use.propose(rt, actor, body.proposals, scope=anchor, source=body.source or "http")
    return [o.to_dict() for o in result.outcomes]


def _each(body: CloudEventIn | list[CloudEventIn]) -> list[CloudEventIn]:
    return [body] if isinstance(body, CloudEventIn) else body


@router.get("/v1/diff", tags=["recall"], **typed(DiffOut))
def diff_route(
    who: Acting,
    from_: Annotated[datetime, Query(alias="from")],
    to: datetime,
    subject: Annotated[list[str] | None, Query()] = None,
    purpose: str | None = None,
) -> Any:
    """What became and stopped being recallable between two instants, with causes."""
    rt, actor = who
    if from_.tzinfo is None or to.tzinfo is None:
        raise InputError("from and to need a UTC offset (e.g. Z)", attribute="from")
    res = use.diff(rt, actor, from_=from_, to=to, subjects=subject or None, purpose=purpose)
    return diff_view(res)


def _keyset(filters: list[Any], seq: int) -> str:
    """An audit cursor: the chain position of the last row given, bound to the filters."""
    digest = hashlib.sha256(json.dumps(filters).encode()).hexdigest()[:16]
    raw = json.dumps({"audit": seq, "f": digest}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _position(filters: list[Any], cursor: str | None) -> int:
    """The chain position an audit cursor encodes (0 without one); ``invalid_input`` for
    anything this API did not give for the same filters."""
    if not cursor:
        return 0
    try:
        seen = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        seq = seen["audit"]
        ok = type(seq) is int and seq >= 0 and _keyset(filters, seq) == cursor
    except (ValueError, KeyError, TypeError, binascii.Error):
        ok = False
    if not ok:
        raise InputError("cursor: not a cursor this API gave", attribute="cursor")
    return int(seq)


@router.get("/v1/audit", tags=["audit"], **typed(AuditPage))
def audit_route(
    who: Acting,
    item: int | None = None,
    actor_id: Annotated[str | None, Query(alias="actor")] = None,
    code: str | None = None,
    action: str | None = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Any:
    """Audit rows in chain order, filtered; paginated by a keyset cursor (the chain
    position of the last row given), so a page reads only its own rows."""
    rt, actor = who
    filters = [item, actor_id, code, action]
    after = _position(filters, cursor)
    rows = use.audit_entries(
        rt, actor, item_id=item, by=actor_id, code=code, action=action, after=after, limit=limit + 1
    )
    page = rows[:limit]
    more = len(rows) > limit
    return {
        "items": [audit_view(r) for r in page],
        "next": _keyset(filters, page[-1].seq) if more else None,
    }


@router.post("/v1/audit/verify", tags=["audit"], **typed(AuditReportOut))
def audit_verify_route(request: Request, who: Acting) -> Any:
    """Recompute the tenant's audit hash chain (``caveat_audit_chain_ok`` in /metrics
    says how it went)."""
    rt, actor = who
    report = use.audit_verify(rt, actor)
    request.app.state.metrics.chain_verified(rt.tenant, report)
    return asdict(report)


@router.post("/v1/sweep", tags=["review"], **typed(SweepOut))
def sweep_route(who: Acting) -> Any:
    """Persist what time did now: secondary TTLs that ran out, unused case episodes past
    the horizon and working memory past its TTL archived (the server also runs it in
    the background; SME or admin)."""
    rt, actor = who
    return sweep_view(use.sweep(rt, actor))


@router.get("/v1/shadow", tags=["review"], **typed(ShadowPage))
def shadow_route(who: Acting, cursor: Cursor = None, limit: Limit = 100) -> Any:
    """Shadow items against the tenant's graduation thresholds; paginated."""
    rt, actor = who
    report = use.shadow_report(rt, actor)
    page = _page([asdict(st) for st in report.items], cursor, limit)
    return {
        **page,
        "policy": report.policy.model_dump(mode="json"),
        "would_graduate": list(report.would_graduate),
        "would_drop": list(report.would_drop),
    }


def _keys(keys: list[Any], cursor: str | None, limit: int) -> dict[str, Any]:
    return _page([key_view(k) for k in keys], cursor, limit)


@router.get("/v1/promotion/candidates", tags=["review"], **typed(KeyPage))
def candidates_route(who: Acting, cursor: Cursor = None, limit: Limit = 100) -> Any:
    """Keys held by several cases that agree on the object; paginated."""
    rt, actor = who
    return _keys(use.promotion_candidates(rt, actor), cursor, limit)


@router.get("/v1/promotion/contested", tags=["review"], **typed(KeyPage))
def contested_route(who: Acting, cursor: Cursor = None, limit: Limit = 100) -> Any:
    """Keys whose cases disagree on the object (never voted on); paginated."""
    rt, actor = who
    return _keys(use.contested_keys(rt, actor), cursor, limit)


def _token(t: claims.TokenInfo) -> dict[str, Any]:
    return {
        **asdict(t),
        "capabilities": list(t.capabilities),
        "created_at": t.created_at.isoformat(),
        "revoked_at": None if t.revoked_at is None else t.revoked_at.isoformat(),
    }


@router.post("/v1/tokens", status_code=201, tags=["tokens"], **typed(TokenIssued, 201))
def token_create_route(who: Acting, body: TokenIn) -> Any:
    """Create an API token (admin); the token is in this answer once."""
    rt, actor = who
    issued = use.create_token(
        rt,
        actor,
        body.principal,
        role=body.role,
        capabilities=body.capabilities,
        clearance=body.clearance,
        team=body.team,
    )
    return {"token": issued.token, **_token(issued.info)}


@router.get("/v1/tokens", tags=["tokens"], **typed(TokenPage))
def token_list_route(who: Acting, cursor: Cursor = None, limit: Limit = 100) -> Any:
    """The tenant's tokens, never their secrets (admin); paginated."""
    rt, actor = who
    return _page([_token(t) for t in use.list_tokens(rt, actor)], cursor, limit)


@router.delete("/v1/tokens/{token_id}", tags=["tokens"], **typed(TokenOut))
def token_revoke_route(who: Acting, token_id: str) -> Any:
    """Revoke an API token (admin)."""
    rt, actor = who
    return _token(use.revoke_token(rt, actor, token_id))
