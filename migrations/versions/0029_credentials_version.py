"""A tenant's credentials version: when a cached token's actor may still be used

``tenants.credentials_version`` takes a new value from ``world_version_seq`` (migration
0008: never handed out twice) whenever a statement inserts, updates or deletes rows
of ``principals`` or ``api_tokens`` (a token made or revoked; a principal registered,
its team set), in that statement's transaction: statement triggers, so no code path
(a future one included) can change who a token stands for without moving it.

A server keeps the actor each token authenticated as, with the version it read before
reading the token (``claims.TokenCache``, ``caveat.app.authenticate``). A request
reads ``caveat_credentials_version(tenant)``, one statement in autocommit; the cached
actor is used only while that value is unchanged. The value is the greater of this
column and ``world_version``, so a policy change (the classification levels a
clearance is read against) re-reads the token too. A revocation commits the new
value with the revoked row: the next request, to any worker, reads a value no cached
actor carries and reads the token again.

``caveat_credentials_version`` sets the transaction's tenant for its own query and
puts back what was there, as ``caveat_withdrawal_horizon`` (0015) does: row-level
security applies as ever (it is no security definer).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The tables whose rows say who a token stands for.
CREDENTIAL_TABLES = ("principals", "api_tokens")

_CHANGED = """
CREATE FUNCTION caveat_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tenants SET credentials_version = nextval('world_version_seq')
    WHERE id IN (SELECT tenant_id FROM changed_rows);
    RETURN NULL;
END $$;
"""

_VERSION = """
CREATE FUNCTION caveat_credentials_version(tenant text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    before text := current_setting('caveat.tenant', true);
    found bigint;
BEGIN
    PERFORM set_config('caveat.tenant', tenant, true);
    SELECT greatest(t.credentials_version, t.world_version) INTO found
    FROM tenants t WHERE t.id = tenant;
    PERFORM set_config('caveat.tenant', coalesce(before, ''), true);
    RETURN coalesce(found, -1);
END $$;
"""


def upgrade() -> None:
    op.add_column(
        "tenants",
        sa.Column("credentials_version", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute(_CHANGED)
    op.execute(_VERSION)
    for table in CREDENTIAL_TABLES:
        for verb, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
            op.execute(
                f"CREATE TRIGGER {table}_credentials_{verb.lower()} AFTER {verb} ON {table} "
                f"REFERENCING {ref} TABLE AS changed_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION caveat_credentials_changed()"
            )


def downgrade() -> None:
    for table in CREDENTIAL_TABLES:
        for verb in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_credentials_{verb} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS caveat_credentials_version(text)")
    op.execute("DROP FUNCTION IF EXISTS caveat_credentials_changed()")
    op.drop_column("tenants", "credentials_version")
