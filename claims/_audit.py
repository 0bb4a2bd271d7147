"""The audit log: append-only, hash-chained per tenant (model §7)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import _queries as q

__all__ = ["GENESIS", "AuditReport", "append", "entry_hash", "verify_chain"]

GENESIS = "0" * 64


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def entry_hash(
    *,
    prev_hash: str,
    tenant: str,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    item_id: int | None,
    code: str | None,
    detail: dict[str, Any],
) -> str:
    """SHA-256 over the previous hash and every field of the row, canonically encoded."""
    body = _canonical(
        [tenant, seq, at.isoformat(timespec="microseconds"), actor, action, item_id, code, detail]
    )
    return hashlib.sha256(f"{prev_hash}|{body}".encode()).hexdigest()


def append(
    *,
    session: Session,
    tenant: str,
    actor: str,
    action: str,
    at: datetime,
    item_id: int | None = None,
    code: str | None = None,
    detail: dict[str, Any] | None = None,
) -> int:
    """Append one row to the tenant's chain (serialised per tenant); returns its seq."""
    detail = json.loads(_canonical(detail or {}))
    head_seq, head_hash = q.lock_audit_head(session=session, tenant=tenant)
    seq, prev = head_seq + 1, head_hash or GENESIS
    digest = entry_hash(
        prev_hash=prev,
        tenant=tenant,
        seq=seq,
        at=at,
        actor=actor,
        action=action,
        item_id=item_id,
        code=code,
        detail=detail,
    )
    q.insert_audit_entry(
        session=session,
        row={
            "tenant_id": tenant,
            "seq": seq,
            "at": at,
            "actor": actor,
            "action": action,
            "item_id": item_id,
            "code": code,
            "detail": detail,
            "prev_hash": prev,
            "hash": digest,
        },
    )
    q.set_audit_head(session=session, tenant=tenant, seq=seq, digest=digest)
    return seq


@dataclass(frozen=True)
class AuditReport:
    """The outcome of recomputing a tenant's chain."""

    ok: bool
    checked: int
    broken_at: int | None = None
    reason: str | None = None


def verify_chain(*, session: Session, tenant: str) -> AuditReport:
    """Recompute the tenant's chain; report the first row that does not hold.

    Detects edited, deleted, reordered and truncated rows: every row must link
    to its predecessor's hash, carry the next seq, and hash to its own value.
    """
    prev = GENESIS
    expected_seq = 1
    count = 0
    for row in q.audit_entries(session=session, tenant=tenant):
        count += 1
        if row.seq != expected_seq:
            return AuditReport(False, count, row.seq, f"seq {row.seq} where {expected_seq} due")
        if row.prev_hash != prev:
            return AuditReport(False, count, row.seq, "link to the previous row is broken")
        digest = entry_hash(
            prev_hash=prev,
            tenant=tenant,
            seq=row.seq,
            at=row.at,
            actor=row.actor,
            action=row.action,
            item_id=row.item_id,
            code=row.code,
            detail=row.detail,
        )
        if digest != row.hash:
            return AuditReport(False, count, row.seq, "row content does not match its hash")
        prev = row.hash
        expected_seq += 1
    head_seq, head_hash = q.audit_head(session=session, tenant=tenant)
    if head_seq != count or (head_hash or GENESIS) != prev:
        return AuditReport(
            False, count, count + 1, f"the chain ends at {count}, its head says {head_seq}"
        )
    return AuditReport(True, count)
