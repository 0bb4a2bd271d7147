"""Private memory: who owns a working-memory session (model §4 "Private memory")

- ``memory_sessions``: per tenant and session id, the principal that first wrote to
  the ``("session", id)`` anchor and when. A session belongs to that principal for
  good: another principal's write to it is refused (``axis_not_writable``) and its
  items are never mentioned to anyone else in a recall. The row is written by the
  first accepted write and never changed.

Tenant-isolated and forced like every tenant table; the application role may read and
insert it, nothing else.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"
_TABLE = "memory_sessions"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "session_id"),
    )
    op.execute(f"ALTER TABLE {_TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {_TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {_TABLE} "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    op.execute(
        f"""
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                REVOKE ALL ON {_TABLE} FROM caveat_app;
                GRANT SELECT, INSERT ON {_TABLE} TO caveat_app;
            END IF;
        END $$;
        """
    )


def downgrade() -> None:
    op.drop_table(_TABLE)
