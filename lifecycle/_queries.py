"""All SQL of lifecycle. Functions take the session as a keyword; callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

__all__: list[str] = []


def insert_case(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    subjects: Sequence[str],
    at: datetime,
    actor: str,
) -> bool:
    row = session.execute(
        sa.text(
            "INSERT INTO cases (tenant_id, id, subjects, status, opened_at, opened_by) "
            "VALUES (:t, :id, :s, 'open', :at, :a) ON CONFLICT DO NOTHING RETURNING id"
        ),
        {"t": tenant, "id": case_id, "s": list(subjects), "at": at, "a": actor},
    ).first()
    return row is not None


def case(*, session: Session, tenant: str, case_id: str, lock: bool = False) -> sa.Row[Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    return session.execute(
        sa.text(
            "SELECT id, subjects, status, outcome, opened_at, opened_by, closed_at, closed_by "
            f"FROM cases WHERE tenant_id = :t AND id = :id{suffix}"
        ),
        {"t": tenant, "id": case_id},
    ).first()


def close_case(
    *, session: Session, tenant: str, case_id: str, outcome: str, at: datetime, actor: str
) -> None:
    session.execute(
        sa.text(
            "UPDATE cases SET status = 'closed', outcome = :o, closed_at = :at, closed_by = :a "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant, "id": case_id, "o": outcome, "at": at, "a": actor},
    )


def lock_items(*, session: Session, tenant: str, ids: Sequence[int]) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            "SELECT id, state FROM items WHERE tenant_id = :t AND id = ANY(:ids) "
            "ORDER BY id FOR UPDATE"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
