"""The write path: policy, the gate, lineage, dedup and supersession, all audited."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import sqlalchemy.exc
from sqlalchemy.orm import Session, sessionmaker

from claims import _audit
from claims import _queries as q
from claims._access import AGENT_WRITABLE_AXES, Actor, acl_from_readers
from claims._gate import PreparedItem, check_shape
from claims._proposal import ItemWrite
from claims._transitions import record_transition
from factgen import load_world
from predicates.errors import CaveatError, Conflict, GateRejection

__all__ = ["ScopeGuard", "WriteResult", "write_item"]

#: Checks a write's anchor before the gate (e.g. that its case is open); raises to refuse.
ScopeGuard = Callable[[Session, ItemWrite], None]


@dataclass(frozen=True)
class WriteResult:
    """What became of an accepted write."""

    outcome: Literal["accepted", "duplicate"]
    item_id: int
    state: str
    superseded: int | None = None


def write_item(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
    scope_guard: ScopeGuard | None = None,
) -> WriteResult:
    """Store ``request`` as a new current item, or refuse it with a stable reason.

    Refusals raise (``GateRejection`` and the rest of the error tree) and are
    recorded in the audit log in a transaction of their own, so a refused
    write leaves its record and nothing else. A write with the key and object
    of the current row is ``duplicate``; a new object supersedes that row.
    """
    try:
        with sessions.begin() as session:
            return _write(session, tenant, request, actor, now, scope_guard)
    except sqlalchemy.exc.IntegrityError as exc:
        refusal: CaveatError = Conflict(
            "the item collided with a concurrent write", detail_hidden=True
        )
        _audit_refusal(sessions, tenant, request, actor, now, refusal, {"db": str(exc.orig)})
        raise refusal from exc
    except sqlalchemy.exc.OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) not in {"40001", "40P01"}:
            raise
        refusal = Conflict("the item collided with a concurrent write")
        _audit_refusal(sessions, tenant, request, actor, now, refusal, {"db": str(exc.orig)})
        raise refusal from exc
    except _HiddenConflict as exc:
        refusal = Conflict("the item collides with an existing claim")
        _audit_refusal(sessions, tenant, request, actor, now, refusal, exc.detail)
        raise refusal from None
    except CaveatError as exc:
        _audit_refusal(sessions, tenant, request, actor, now, exc, {})
        raise


class _HiddenConflict(CaveatError):
    """A collision with a row the writer may not read; the detail goes to audit only."""


def _audit_refusal(
    sessions: sessionmaker[Session],
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
    exc: CaveatError,
    extra: dict[str, object],
) -> None:
    with sessions.begin() as session:
        _audit.append(
            session=session,
            tenant=tenant,
            actor=actor.id,
            action="reject",
            at=now,
            code=exc.code,
            detail={
                "message": exc.message,
                "gate": exc.detail.get("gate"),
                "request": request.model_dump(mode="json"),
                **extra,
            },
        )


def _write(
    session: Session,
    tenant: str,
    request: ItemWrite,
    actor: Actor,
    now: datetime,
    scope_guard: ScopeGuard | None,
) -> WriteResult:
    actor.require("write")
    world = load_world(session=session, tenant=tenant)
    if world.policy.writes != "on":
        raise GateRejection(
            "writes_disabled", f"writes are {world.policy.writes} for tenant {tenant}"
        )
    if request.scope.axis not in AGENT_WRITABLE_AXES and not actor.may("write_any_axis"):
        raise GateRejection(
            "axis_not_writable",
            f"agents write to {', '.join(sorted(AGENT_WRITABLE_AXES))} anchors only; "
            f"{request.scope.axis!r} scope is reached through the lifecycle",
            axis=request.scope.axis,
        )
    if scope_guard is not None:
        scope_guard(session, request)
    readers = q.evidence_readers(session=session, tenant=tenant, ids=request.evidence)
    visible = {eid: actor.can_read(r) for eid, r in readers.items()}
    prepared = check_shape(request, world, visible_evidence=visible)
    _check_lineage(session, tenant, request)
    acl = acl_from_readers(readers[e] for e in request.evidence)
    return _store(session, tenant, prepared, acl, actor, now)


def _check_lineage(session: Session, tenant: str, request: ItemWrite) -> None:
    if not request.derived_from:
        return
    found = q.existing_ids(session=session, tenant=tenant, ids=request.derived_from)
    missing = sorted(set(request.derived_from) - found)
    if missing:
        raise GateRejection("not_found", f"derived_from names no item: {missing}", missing=missing)
    revoked = q.revoked_ancestors(session=session, tenant=tenant, ids=request.derived_from)
    if revoked:
        raise GateRejection(
            "lineage_revoked",
            f"derived from revoked item(s) {revoked}; re-verify the lineage first",
            revoked=revoked,
        )


def _store(
    session: Session,
    tenant: str,
    item: PreparedItem,
    acl: list[list[str]],
    actor: Actor,
    now: datetime,
) -> WriteResult:
    req = item.request
    key = {
        "scope_axis": req.scope.axis,
        "scope_id": req.scope.id,
        "subject": item.subject,
        "attribute": req.attribute,
        "kind": req.kind,
        "cond_key": item.cond_key,
        "evidence_key": item.evidence_key,
    }
    current = q.current_by_key(session=session, tenant=tenant, key=key)
    superseded: int | None = None
    if current is not None:
        if not actor.can_read_acl(current.acl):
            raise _HiddenConflict("hidden collision", existing=int(current.id), key=key)
        if current.object == item.object:
            _audit.append(
                session=session,
                tenant=tenant,
                actor=actor.id,
                action="duplicate",
                at=now,
                item_id=int(current.id),
                code="duplicate_no_change",
                detail={"key": key},
            )
            return WriteResult("duplicate", int(current.id), current.state)
        superseded = int(current.id)
        if not q.mark_superseded(session=session, item_id=superseded, at=now):
            raise Conflict("the current row changed under this write")
    state = "case"  # every new item starts in its own scope (model §4.1)
    new_id = q.insert_item(
        session=session,
        row={
            "tenant_id": tenant,
            "kind": req.kind,
            "subject": item.subject,
            "attribute": req.attribute,
            "object": item.object,
            "required": item.required_text,
            "excluded": item.excluded_text,
            "conditions": item.conditions_json(),
            "cond_key": item.cond_key,
            "evidence": sorted(set(req.evidence)),
            "evidence_key": item.evidence_key,
            "derived_from": sorted(set(req.derived_from)),
            "epistemic": req.epistemic,
            "content_type": req.content_type,
            "scope_axis": req.scope.axis,
            "scope_id": req.scope.id,
            "facets": [f.model_dump() for f in req.facets],
            "purposes": sorted(set(req.purposes)),
            "acl": acl,
            "text": req.text,
            "entities": list(item.entities),
            "salience": req.salience,
            "valid_from": req.valid_from or now,
            "valid_to": req.valid_to,
            "recorded_at": now,
            "state": state,
            "version": req.version,
            "release_state": "draft" if req.kind == "skill" else None,
            "created_by": actor.id,
        },
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="write",
        at=now,
        item_id=new_id,
        code="accepted",
        detail={"key": key, "object": item.object, "superseded": superseded},
    )
    record_transition(
        session=session,
        tenant=tenant,
        item_id=new_id,
        from_state=None,
        to_state=state,
        at=now,
        actor=actor.id,
        reason="written",
    )
    if superseded is not None:
        q.link_successor(session=session, item_id=superseded, successor=new_id)
        q.insert_transition(
            session=session,
            tenant=tenant,
            item_id=superseded,
            from_state=current.state if current is not None else None,
            to_state="superseded",
            at=now,
            actor=actor.id,
            reason="superseded",
            cause={"successor": new_id},
        )
        _audit.append(
            session=session,
            tenant=tenant,
            actor=actor.id,
            action="supersede",
            at=now,
            item_id=superseded,
            code="superseded",
            detail={"successor": new_id},
        )
    return WriteResult("accepted", new_id, state, superseded)
