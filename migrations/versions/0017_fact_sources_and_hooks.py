"""Fact sources, their pull status, hook deliveries, and the provenance of a fact

Model §2.1 and §2.2: facts that nobody types and events that nobody posts by hand.

- ``fact_sources``: per tenant, the loaded ``sources.yaml`` (its text as loaded and
  the validated configuration), who loaded it and when (the load is also an audit
  row).
- ``source_status``: per tenant and source, what its pulls did (last pull and last
  success, samples stored, refusals by reason, errors with the last one, latency,
  and consecutive failures, from which the server's schedule backs off).
- ``hook_deliveries``: per tenant, hook kind and the sender's delivery id, the one
  time it was acted on and what it did: a delivery seen twice is acknowledged once.
- ``facts.provenance`` and ``facts_current.provenance``: where a pulled fact came
  from (source, the query or pointer, the sample time), so explain can say
  "observed 0.97 at 11:02 from prom: max by (service) (...)". The trigger that keeps
  ``facts_current`` copies it.

Every new table is tenant-isolated and forced like every tenant table; the
application role gets its default privileges on them (0003).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_0008 = importlib.import_module("migrations.versions.0008_recall_at_scale")
_CURRENT = "current_setting('caveat.tenant', true)"

_LATEST = """
INSERT INTO facts_current AS fc (tenant_id, subject, attribute, fact_id, value,
                                 observed_at, recorded_at, source, provenance)
SELECT DISTINCT ON (tenant_id, subject, attribute)
       tenant_id, subject, attribute, id, value, observed_at, recorded_at, source, provenance
FROM {new}
ORDER BY tenant_id, subject, attribute, observed_at DESC, id DESC
ON CONFLICT (tenant_id, subject, attribute) DO UPDATE SET
    fact_id = EXCLUDED.fact_id, value = EXCLUDED.value, observed_at = EXCLUDED.observed_at,
    recorded_at = EXCLUDED.recorded_at, source = EXCLUDED.source,
    provenance = EXCLUDED.provenance
WHERE (EXCLUDED.observed_at, EXCLUDED.fact_id) > (fc.observed_at, fc.fact_id)
"""

_TRIGGER = """
CREATE OR REPLACE FUNCTION caveat_facts_current() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {latest};
    RETURN NULL;
END $$;
"""

_TABLES = ("fact_sources", "source_status", "hook_deliveries")


def _isolate(table: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {table} "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )


def upgrade() -> None:
    op.add_column("facts", sa.Column("provenance", JSONB(), nullable=True))
    op.add_column("facts_current", sa.Column("provenance", JSONB(), nullable=True))
    op.execute(_TRIGGER.format(latest=_LATEST.format(new="new_facts")))
    op.create_table(
        "fact_sources",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("config", JSONB(), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("loaded_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    op.create_table(
        "source_status",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("pulls", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_pull_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_ok_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("samples_stored", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("refused", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("errors", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_latency_ms", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "source"),
    )
    op.create_table(
        "hook_deliveries",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("delivery_id", sa.String(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "kind", "delivery_id"),
    )
    for table in _TABLES:
        _isolate(table)


def downgrade() -> None:
    for table in reversed(_TABLES):
        op.drop_table(table)
    op.execute(_TRIGGER.format(latest=_0008._LATEST.format(new="new_facts")))
    op.drop_column("facts_current", "provenance")
    op.drop_column("facts", "provenance")
