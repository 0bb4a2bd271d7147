"""Agent turns queued for the server-side extractor (docs/proposals.md, "The server-side
extractor")

- ``agent_turns``: per tenant and turn id, the principal that submitted it and the
  actor it submitted as (role, capabilities, clearance: the worker never acts wider),
  the turn as given, its body's digest (a resubmission with the same id and body is
  the same turn; another body is a conflict), ``state`` (``queued``, ``done``,
  ``failed``), ``attempts``, ``next_attempt_at`` (when the worker may take it: the
  back-off after a failure, and the lease while a call is in flight), the last error,
  the outcomes of its proposals, and when it was submitted, last changed and finished.
- ``ix_agent_turns_due``: the queued turns by tenant and due instant (partial), which
  the worker's claim reads.

Tenant-isolated and forced like every tenant table; the application role may read,
insert and update it (the worker moves a turn along), never delete.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"
_TABLE = "agent_turns"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("turn_id", sa.String(), nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("actor", JSONB(), nullable=False),
        sa.Column("turn", JSONB(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("outcomes", JSONB(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('queued', 'done', 'failed')", name="ck_agent_turns_state"),
        sa.PrimaryKeyConstraint("tenant_id", "turn_id"),
    )
    op.create_index(
        "ix_agent_turns_due",
        _TABLE,
        ["tenant_id", "next_attempt_at"],
        postgresql_where=sa.text("state = 'queued'"),
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
                GRANT SELECT, INSERT, UPDATE ON {_TABLE} TO caveat_app;
            END IF;
        END $$;
        """
    )


def downgrade() -> None:
    op.drop_table(_TABLE)
