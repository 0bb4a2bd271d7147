"""as-of history of release and verification: read from the audit log, through an index

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

An as-of recall sees a skill's release state and an item's verification as
they were at that instant. Both already have a history: every release and
retirement appends a ``release`` / ``retire`` audit row (the new release
state in ``code``) and every verification a ``verify`` row (its actor and
instant), in the hash-chained log, with the instant it happened. So there is
no new table: this revision adds the partial index that reads those rows per
item, ``(tenant_id, item_id, at, seq)`` like ``ix_audit_log_transitions``,
so the latest row at an instant is one index probe per candidate.

A re-verification (from ``needs_reverification``) appended only its
``transition`` row before this revision; from here on it also appends a
``verify`` row, so the verification history is the ``verify`` rows alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_audit_log_item_history",
        "audit_log",
        ["tenant_id", "item_id", "at", "seq"],
        postgresql_where=sa.text("action IN ('release', 'retire', 'verify')"),
    )


def downgrade() -> None:
    op.drop_index("ix_audit_log_item_history", table_name="audit_log")
