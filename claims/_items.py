"""Reading items: the typed record of a stored row."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims import _queries as q
from claims._access import Actor, may_read_block, private_visible
from claims._registry import team_of
from predicates import decode, typed_literal
from predicates.errors import NotFound

__all__ = [
    "ItemRecord",
    "get_item",
    "get_items",
    "items_as_of",
    "object_text",
    "record_from_row",
]


@dataclass(frozen=True)
class ItemRecord:
    """One stored item row (model §1)."""

    id: int
    tenant_id: str
    kind: str
    subject: str
    attribute: str
    object: dict[str, Any]
    required: tuple[str, ...]
    excluded: tuple[str, ...]
    conditions: dict[str, Any]
    evidence: tuple[str, ...]
    derived_from: tuple[int, ...]
    epistemic: str
    content_type: str | None
    scope_axis: str
    scope_id: str
    purposes: tuple[str, ...]
    acl: tuple[tuple[str, ...], ...]
    text: str | None
    entities: tuple[str, ...]
    salience: float
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None
    state: str
    verified_by: str | None
    verified_at: datetime | None
    version: int | None
    release_state: str | None
    created_by: str
    facets: tuple[tuple[str, str], ...] = ()
    test_evidence: str | None = None
    #: The union of its evidence's deny lists and the strictest of their levels
    #: (docs/claims.md, "Access control"), beside ``acl``.
    deny: tuple[str, ...] = ()
    classification: str | None = None

    def readable_by(self, actor: Actor) -> bool:
        """Whether ``actor`` may read it (``Actor.can_read_acl``; redaction aside)."""
        return actor.can_read_acl(self.acl, deny=self.deny, classification=self.classification)

    @property
    def object_display(self) -> str:
        """The object as a person (or a prompt) reads it (``object_text``)."""
        return object_text(self.object)


def object_text(stored: Mapping[str, Any]) -> str:
    """A stored object as a person (or a prompt) reads it: the predicate literal of a
    typed value (``0.12``, ``v3.1``, ``15m``, ``true``, ``"canary"``), ``evidence E-901``
    for an evidence reference, JSON for the value of an undeclared attribute."""
    if "evidence" in stored:
        return f"evidence {stored['evidence']}"
    value = stored.get("value")
    if isinstance(value, dict) and "t" in value:
        return typed_literal(decode(value)[0])
    return json.dumps(value, ensure_ascii=False)


def record_from_row(row: sa.Row[Any]) -> ItemRecord:
    """Build the record from a row selected with ``ITEM_COLUMNS`` (a row without the
    columns added later, ``facets`` and ``test_evidence``, reads them as empty)."""
    return record_from_mapping(row._mapping)


def record_from_mapping(m: Mapping[Any, Any]) -> ItemRecord:
    """``record_from_row`` for a mapping of the same columns (a driver's dict row)."""
    return ItemRecord(
        id=int(m["id"]),
        tenant_id=m["tenant_id"],
        kind=m["kind"],
        subject=m["subject"],
        attribute=m["attribute"],
        object=dict(m["object"]),
        required=tuple(m["required"]),
        excluded=tuple(m["excluded"]),
        conditions=dict(m["conditions"]),
        evidence=tuple(m["evidence"]),
        derived_from=tuple(int(x) for x in m["derived_from"]),
        epistemic=m["epistemic"],
        content_type=m["content_type"],
        scope_axis=m["scope_axis"],
        scope_id=m["scope_id"],
        purposes=tuple(m["purposes"]),
        acl=tuple(tuple(r) for r in m["acl"]),
        text=m["text"],
        entities=tuple(m["entities"]),
        salience=float(m["salience"]),
        valid_from=m["valid_from"],
        valid_to=m["valid_to"],
        recorded_at=m["recorded_at"],
        superseded_at=m["superseded_at"],
        superseded_by=m["superseded_by"],
        state=m["state"],
        verified_by=m["verified_by"],
        verified_at=m["verified_at"],
        version=m["version"],
        release_state=m["release_state"],
        created_by=m["created_by"],
        facets=tuple((f["axis"], f["id"]) for f in m.get("facets") or ()),
        test_evidence=m.get("test_evidence"),
        deny=tuple(m["deny"]),
        classification=m["classification"],
    )


def _teams(session: Session, tenant: str, actor: Actor) -> list[str]:
    """The actor's team, when it is a stored principal with one (``team_of``)."""
    team = team_of(session=session, tenant=tenant, actor=actor)
    return [team] if team else []


def get_item(
    *, session: Session, tenant: str, item_id: int, actor: Actor, lock: bool = False
) -> ItemRecord:
    """The item as ``actor`` may see it; ``NotFound`` if absent or unreadable, or another
    principal's working memory (a ``session`` item whose session ``actor`` does not own;
    the operator sees it: docs/agents.md, "Private memory")."""
    row = q.item(session=session, tenant=tenant, item_id=item_id, lock=lock)
    if row is None:
        raise NotFound(f"no item {item_id}", item=item_id)
    rec = record_from_row(row)
    if not rec.readable_by(actor) or (
        rec.kind == "block"
        and not may_read_block(
            actor, (rec.scope_axis, rec.scope_id), _teams(session, tenant, actor)
        )
    ):
        raise NotFound(f"no item {item_id}", item=item_id)
    if rec.scope_axis == "session" and actor.role != "admin":
        owners = q.session_owners(session=session, tenant=tenant, ids=[rec.scope_id])
        if not private_visible(actor, rec.scope_axis, owners.get(rec.scope_id)):
            raise NotFound(f"no item {item_id}", item=item_id)
    return rec


def get_items(*, session: Session, tenant: str, ids: Sequence[int]) -> dict[int, ItemRecord]:
    """Items by id (no access check: for kernel-internal use)."""
    return {
        r.id: r
        for r in map(record_from_row, q.items_by_id(session=session, tenant=tenant, ids=ids))
    }


def items_as_of(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    at: datetime,
    subject: str | None = None,
    attribute: str | None = None,
    kind: str | None = None,
) -> list[ItemRecord]:
    """What the store believed at ``at``: the rows current then, each in its state then.

    Transaction time only (``recorded_at``, ``superseded_at``, the transition
    history, and the release and verification history of the audit log);
    rows the actor may not read are left out (another principal's working memory, and
    blocks it may not read, too). ``subject`` is a canonical entity id.
    """
    out = []
    for row in q.items_as_of(
        session=session,
        tenant=tenant,
        at=at,
        subject=subject,
        attribute=attribute,
        kind=kind,
        gate=actor.gate_params("capabilities"),
    ):
        rec = record_from_row(row)
        if rec.readable_by(actor) and (
            rec.kind != "block" or may_read_block(actor, (rec.scope_axis, rec.scope_id))
        ):
            out.append(replace(rec, state=row.state_then or rec.state))
    return out
