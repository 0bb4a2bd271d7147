"""row-level security: a transaction sees only the rows of the tenant it names

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

Every tenant-scoped table gets a policy keyed on the per-transaction setting
``caveat.tenant`` (``set_config('caveat.tenant', ..., true)``, done by
``caveat.db.tenant_sessions`` at the start of every transaction). The policies
bind the application role ``caveat_app``; the owner (migrations, operators)
is not subject to them (RLS is enabled, not forced). A transaction that names
no tenant sees no rows and can write none.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Tables keyed by ``tenant_id`` as of this revision (``tenants`` is keyed by ``id``).
TENANT_TABLES = (
    "audit_log",
    "case_context",
    "cases",
    "citations",
    "entities",
    "entity_aliases",
    "entity_edges",
    "erasures",
    "events",
    "evidence",
    "expiry_checks",
    "fact_schema",
    "facts",
    "item_transitions",
    "item_usage",
    "items",
    "principals",
    "redactions",
    "shadow_log",
    "skill_enforcement",
)

_CURRENT = "current_setting('caveat.tenant', true)"


def upgrade() -> None:
    for table, column in (*((t, "tenant_id") for t in TENANT_TABLES), ("tenants", "id")):
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({column} = {_CURRENT}) WITH CHECK ({column} = {_CURRENT})"
        )


def downgrade() -> None:
    for table in (*TENANT_TABLES, "tenants"):
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
