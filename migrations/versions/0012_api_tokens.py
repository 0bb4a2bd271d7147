"""API tokens: stored hashed, each naming its tenant's principal and capabilities

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

``api_tokens`` keeps, per tenant, a token's id, the principal it acts for, the
capabilities it carries (never more than the principal's), the SHA-256 of its
secret (the secret itself is shown once and never stored), and when it was
created and revoked. Tenant-isolated and forced like every tenant table; the
application role may insert and read tokens and set only ``revoked_at`` and
``revoked_by`` (never rewrite a secret, a principal or capabilities, never delete).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("principal", sa.String(), nullable=False),
        sa.Column("capabilities", ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("secret_sha256", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.execute("ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE api_tokens FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON api_tokens "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    op.execute(
        """
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                REVOKE ALL ON api_tokens FROM caveat_app;
                GRANT SELECT, INSERT ON api_tokens TO caveat_app;
                GRANT UPDATE (revoked_at, revoked_by) ON api_tokens TO caveat_app;
            END IF;
        END $$;
        """
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
