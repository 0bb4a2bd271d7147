"""All SQL of claims. Functions take the session as a keyword; callers own the transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from predicates.errors import NotFound

__all__: list[str] = []

ITEM_COLUMNS = (
    "id, tenant_id, kind, subject, attribute, object, required, excluded, conditions, "
    "cond_key, evidence, evidence_key, derived_from, epistemic, content_type, scope_axis, "
    "scope_id, facets, purposes, acl, text, entities, salience, valid_from, valid_to, "
    "recorded_at, superseded_at, superseded_by, state, verified_by, verified_at, version, "
    "release_state, created_by"
)


# --- audit -----------------------------------------------------------------


def lock_audit_head(*, session: Session, tenant: str) -> tuple[int, str | None]:
    row = session.execute(
        sa.text("SELECT audit_seq, audit_hash FROM tenants WHERE id = :t FOR UPDATE"),
        {"t": tenant},
    ).first()
    if row is None:
        raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
    return int(row[0]), row[1]


def audit_head(*, session: Session, tenant: str) -> tuple[int, str | None]:
    row = session.execute(
        sa.text("SELECT audit_seq, audit_hash FROM tenants WHERE id = :t"), {"t": tenant}
    ).first()
    return (0, None) if row is None else (int(row[0]), row[1])


def set_audit_head(*, session: Session, tenant: str, seq: int, digest: str) -> None:
    session.execute(
        sa.text("UPDATE tenants SET audit_seq = :s, audit_hash = :h WHERE id = :t"),
        {"s": seq, "h": digest, "t": tenant},
    )


def insert_audit_entry(*, session: Session, row: dict[str, Any]) -> None:
    session.execute(
        sa.text(
            "INSERT INTO audit_log (tenant_id, seq, at, actor, action, item_id, code, detail, "
            "prev_hash, hash) VALUES (:tenant_id, :seq, :at, :actor, :action, :item_id, :code, "
            "CAST(:detail AS jsonb), :prev_hash, :hash)"
        ),
        {**row, "detail": json.dumps(row["detail"])},
    )


def audit_entries(
    *,
    session: Session,
    tenant: str,
    item_id: int | None = None,
    actor: str | None = None,
    code: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            "SELECT seq, at, actor, action, item_id, code, detail, prev_hash, hash "
            "FROM audit_log WHERE tenant_id = :t "
            "AND (CAST(:item AS bigint) IS NULL OR item_id = :item) "
            "AND (CAST(:actor AS text) IS NULL OR actor = :actor) "
            "AND (CAST(:code AS text) IS NULL OR code = :code) "
            "AND (CAST(:since AS timestamptz) IS NULL OR at >= :since) "
            "AND (CAST(:until AS timestamptz) IS NULL OR at < :until) "
            "ORDER BY seq"
        ),
        {
            "t": tenant,
            "item": item_id,
            "actor": actor,
            "code": code,
            "since": since,
            "until": until,
        },
    ).all()


# --- principals and evidence -----------------------------------------------


def upsert_principal(
    *, session: Session, tenant: str, principal: str, role: str, capabilities: Sequence[str]
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO principals (tenant_id, id, role, capabilities) VALUES (:t, :p, :r, :c) "
            "ON CONFLICT (tenant_id, id) DO UPDATE SET role = EXCLUDED.role, "
            "capabilities = EXCLUDED.capabilities"
        ),
        {"t": tenant, "p": principal, "r": role, "c": list(capabilities)},
    )


def principal(*, session: Session, tenant: str, principal: str) -> sa.Row[Any] | None:
    return session.execute(
        sa.text("SELECT id, role, capabilities FROM principals WHERE tenant_id = :t AND id = :p"),
        {"t": tenant, "p": principal},
    ).first()


def insert_evidence(
    *,
    session: Session,
    tenant: str,
    evidence_id: str,
    title: str | None,
    uri: str | None,
    readers: Sequence[str],
    at: datetime,
    actor: str,
) -> bool:
    """Insert; False when the id already exists."""
    row = session.execute(
        sa.text(
            "INSERT INTO evidence (tenant_id, id, title, uri, readers, recorded_at, recorded_by) "
            "VALUES (:t, :id, :title, :uri, :r, :at, :by) ON CONFLICT DO NOTHING RETURNING id"
        ),
        {
            "t": tenant,
            "id": evidence_id,
            "title": title,
            "uri": uri,
            "r": list(readers),
            "at": at,
            "by": actor,
        },
    ).first()
    return row is not None


def evidence_readers(*, session: Session, tenant: str, ids: Sequence[str]) -> dict[str, list[str]]:
    rows = session.execute(
        sa.text("SELECT id, readers FROM evidence WHERE tenant_id = :t AND id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {r.id: list(r.readers) for r in rows}


# --- items -----------------------------------------------------------------


def current_by_key(*, session: Session, tenant: str, key: dict[str, str]) -> sa.Row[Any] | None:
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant_id = :t AND scope_axis = :scope_axis "
            "AND scope_id = :scope_id AND subject = :subject AND attribute = :attribute "
            "AND kind = :kind AND cond_key = :cond_key AND evidence_key = :evidence_key "
            "AND superseded_at IS NULL FOR UPDATE"
        ),
        {"t": tenant, **key},
    ).first()


def insert_item(*, session: Session, row: dict[str, Any]) -> int:
    params = dict(row)
    for k in ("object", "conditions", "facets", "acl"):
        params[k] = json.dumps(params[k])
    new_id = session.execute(
        sa.text(
            "INSERT INTO items (tenant_id, kind, subject, attribute, object, required, excluded, "
            "conditions, cond_key, evidence, evidence_key, derived_from, epistemic, content_type, "
            "scope_axis, scope_id, facets, purposes, acl, text, entities, salience, valid_from, "
            "valid_to, recorded_at, state, version, release_state, created_by) VALUES ("
            ":tenant_id, :kind, :subject, :attribute, CAST(:object AS jsonb), :required, "
            ":excluded, CAST(:conditions AS jsonb), :cond_key, :evidence, :evidence_key, "
            ":derived_from, :epistemic, :content_type, :scope_axis, :scope_id, "
            "CAST(:facets AS jsonb), :purposes, CAST(:acl AS jsonb), :text, :entities, "
            ":salience, :valid_from, :valid_to, :recorded_at, :state, :version, "
            ":release_state, :created_by) RETURNING id"
        ),
        params,
    ).scalar_one()
    return int(new_id)


def mark_superseded(*, session: Session, item_id: int, at: datetime) -> bool:
    """Take a row out of the current set (before its successor is inserted)."""
    row = session.execute(
        sa.text(
            "UPDATE items SET superseded_at = :at, state = 'superseded' "
            "WHERE id = :id AND superseded_at IS NULL RETURNING id"
        ),
        {"id": item_id, "at": at},
    ).first()
    return row is not None


def link_successor(*, session: Session, item_id: int, successor: int) -> None:
    session.execute(
        sa.text("UPDATE items SET superseded_by = :s WHERE id = :id"),
        {"id": item_id, "s": successor},
    )


def item(*, session: Session, tenant: str, item_id: int, lock: bool = False) -> sa.Row[Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    return session.execute(
        sa.text(f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant_id = :t AND id = :id{suffix}"),
        {"t": tenant, "id": item_id},
    ).first()


def items_by_id(*, session: Session, tenant: str, ids: Sequence[int]) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant_id = :t AND id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()


def set_state(
    *, session: Session, item_id: int, state: str, extra: dict[str, Any] | None = None
) -> None:
    sets = ", ".join(["state = :state", *(f"{k} = :{k}" for k in (extra or {}))])
    session.execute(
        sa.text(f"UPDATE items SET {sets} WHERE id = :id"),
        {"id": item_id, "state": state, **(extra or {})},
    )


def insert_transition(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    from_state: str | None,
    to_state: str,
    at: datetime,
    actor: str,
    reason: str | None,
    cause: dict[str, Any],
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO item_transitions (tenant_id, item_id, from_state, to_state, at, actor, "
            "reason, cause) VALUES (:t, :i, :f, :to, :at, :a, :r, CAST(:c AS jsonb))"
        ),
        {
            "t": tenant,
            "i": item_id,
            "f": from_state,
            "to": to_state,
            "at": at,
            "a": actor,
            "r": reason,
            "c": json.dumps(cause),
        },
    )


def revoked_ancestors(*, session: Session, tenant: str, ids: Sequence[int]) -> list[int]:
    """Ids among ``ids`` and their transitive ``derived_from`` ancestors that are revoked."""
    rows = session.execute(
        sa.text(
            "WITH RECURSIVE anc(id) AS ("
            "  SELECT unnest(CAST(:ids AS bigint[])) "
            "  UNION SELECT unnest(i.derived_from) FROM items i JOIN anc ON i.id = anc.id "
            "  WHERE i.tenant_id = :t"
            ") SELECT i.id FROM items i JOIN anc ON i.id = anc.id "
            "WHERE i.tenant_id = :t AND i.state = 'revoked' ORDER BY i.id"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return [int(r[0]) for r in rows]


def descendants(*, session: Session, tenant: str, item_id: int) -> list[int]:
    """Every item derived from ``item_id``, transitively (not the item itself)."""
    rows = session.execute(
        sa.text(
            "WITH RECURSIVE d(id) AS ("
            "  SELECT id FROM items WHERE tenant_id = :t "
            "  AND derived_from @> ARRAY[CAST(:i AS bigint)]"
            "  UNION SELECT i.id FROM items i JOIN d ON i.derived_from @> ARRAY[d.id] "
            "  WHERE i.tenant_id = :t"
            ") SELECT id FROM d ORDER BY id"
        ),
        {"t": tenant, "i": item_id},
    ).all()
    return [int(r[0]) for r in rows]


def existing_ids(*, session: Session, tenant: str, ids: Sequence[int]) -> set[int]:
    rows = session.execute(
        sa.text("SELECT id FROM items WHERE tenant_id = :t AND id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {int(r[0]) for r in rows}
