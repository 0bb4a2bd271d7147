"""A tenant's registry: its own scope axes and content types (model §1, §4.3)

- ``tenant_registry``: per tenant, the registry as loaded (``caveat registry load``,
  ``PUT /v1/registry``, or the ``registry:`` section of a schema file): the text as
  loaded, the validated declarations (axes; content types with their expiry triggers
  and secondary TTL), who loaded it and when. The load is also an audit row.

The table is part of the tenant's world: a change bumps ``tenants.world_version``
(0008's trigger function), so a cached world (``factgen.WorldCache``) sees a new
registry at its next use. Tenant-isolated and forced like every tenant table; the
application role may read, insert and update it (a load replaces the row), nothing else.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"
_TABLE = "tenant_registry"


def upgrade() -> None:
    op.create_table(
        _TABLE,
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("declared", JSONB(), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("loaded_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    op.execute(f"ALTER TABLE {_TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {_TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {_TABLE} "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    for verb, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        op.execute(
            f"CREATE TRIGGER {_TABLE}_world_{verb.lower()} AFTER {verb} ON {_TABLE} "
            f"REFERENCING {ref} TABLE AS changed_rows "
            "FOR EACH STATEMENT EXECUTE FUNCTION caveat_world_changed()"
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
