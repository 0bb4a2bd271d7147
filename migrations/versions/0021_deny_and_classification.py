"""Access control beyond readers: deny lists and classification levels

Evidence gains ``deny`` (entries ``principal:<id>`` or ``cap:<capability>``, a deny
winning over any grant) and ``classification`` (a level name of the tenant's policy;
NULL: unclassified, the lowest level). An item keeps what it derived from its evidence
beside its ``acl``: ``deny``, the union of their deny lists, and ``classification``,
the strictest of their levels (NULL when none is classified). A principal gains its
``clearance`` (existing principals: ``internal``, so nothing they read today is
hidden: no evidence was classified before); a token may carry a lower one
(``api_tokens.clearance``; NULL: its principal's).

The read gate (``claims._queries.readable``) checks all of it in SQL. Rows existing
before this migration have no denies and no level: they stay readable as they were.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _deny() -> sa.Column[list[str]]:
    return sa.Column("deny", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False)


def upgrade() -> None:
    for table in ("evidence", "items"):
        op.add_column(table, _deny())
        op.add_column(table, sa.Column("classification", sa.String(), nullable=True))
    op.add_column(
        "principals",
        sa.Column("clearance", sa.Text(), server_default="internal", nullable=False),
    )
    op.add_column("api_tokens", sa.Column("clearance", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("api_tokens", "clearance")
    op.drop_column("principals", "clearance")
    for table in ("items", "evidence"):
        op.drop_column(table, "classification")
        op.drop_column(table, "deny")
