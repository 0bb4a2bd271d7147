"""Every version of a tenant's policy, so that a read as of an instant sees the policy
of then (model §7.1; docs/policy.md)

- ``tenant_policy_versions``: per tenant, each policy it has had (the whole document),
  numbered from 1, with when it was set and by whom. ``tenants.policy`` stays the
  current one (what every use reads); a change writes both in one transaction, and is
  also one audit row per changed key (``policy_set``).
- Existing tenants get their current policy as version 1, set at their
  ``created_at`` by ``migration``.

The table is tenant-isolated and forced like every tenant table. It is history: the
application role may read it and append to it, never update or delete a version.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"


def upgrade() -> None:
    op.create_table(
        "tenant_policy_versions",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("policy", JSONB(), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("set_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "version"),
        sa.CheckConstraint("version >= 1", name="tenant_policy_versions_from_one"),
    )
    op.create_index("tenant_policy_versions_at", "tenant_policy_versions", ["tenant_id", "set_at"])
    op.execute(
        "INSERT INTO tenant_policy_versions (tenant_id, version, policy, set_at, set_by) "
        "SELECT id, 1, policy, created_at, 'migration' FROM tenants"
    )
    op.execute("ALTER TABLE tenant_policy_versions ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE tenant_policy_versions FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON tenant_policy_versions "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    op.execute(
        """
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                REVOKE ALL ON tenant_policy_versions FROM caveat_app;
                GRANT SELECT, INSERT ON tenant_policy_versions TO caveat_app;
            END IF;
        END $$;
        """
    )


def downgrade() -> None:
    op.drop_table("tenant_policy_versions")
