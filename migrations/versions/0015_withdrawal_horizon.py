"""Read replicas: where each tenant's latest withdrawing change lies

``withdrawal_horizons`` holds one row per tenant whose ``seq`` moves, in the
same transaction, with every change that withdraws an item from what recall or
the context guard may serve: a state that is not ``active`` (revocation,
refutation, expiry by an event or a TTL, a failed check, demotion, a lineage
re-opening, supersession, archiving, promotion to shadow), a row taken out of
the current set (supersession), a skill version that is no longer the released
one, a redaction, an item row deleted. Statement triggers record it, so no code
path (single, bulk or a future one) can withdraw without moving the horizon.

A replica whose copy of the row has the primary's ``seq`` has replayed the
tenant's latest withdrawal (``caveat.app``'s read routing; docs/scaling.md).
The bump over-approximates (any update of a superseded or unreleased row, a
move between two withdrawn states): a needless bump only sends a read to the
primary.

``caveat_withdrawal_horizon(tenant)`` reads a tenant's horizon in one statement
(the read routing asks it before every routed read, in autocommit): it sets the
transaction's tenant for its own query and puts back what was there, so it never
changes the tenant of a transaction it is called in; row-level security applies
as ever (it is no security definer).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"

#: One bump per tenant among ``rows`` that pass ``cond`` (a statement trigger's body).
#: The tenants are made distinct before the clock is read: ``clock_timestamp()`` moves
#: between rows, so ``DISTINCT`` over it gave one tenant several rows once a statement
#: moved enough of them (a revocation re-opening 2,000 descendants), and the upsert
#: refused to touch its row twice.
_BUMP = """
        INSERT INTO withdrawal_horizons AS h (tenant_id, seq, changed_at)
        SELECT t.tenant_id, 1, clock_timestamp()
        FROM (SELECT DISTINCT r.tenant_id FROM {rows} r WHERE {cond}) t
        ON CONFLICT (tenant_id) DO UPDATE SET seq = h.seq + 1, changed_at = clock_timestamp();
"""

#: (trigger, table, event, transition table, condition on its rows)
_TRIGGERS = (
    ("item_states_withdrawn", "item_states", "UPDATE", "NEW", "r.state <> 'active'"),
    (
        "items_withdrawn",
        "items",
        "UPDATE",
        "NEW",
        "r.superseded_at IS NOT NULL OR coalesce(r.release_state, 'released') <> 'released'",
    ),
    ("items_deleted", "items", "DELETE", "OLD", "TRUE"),
    ("redactions_withdrawn", "redactions", "INSERT", "NEW", "TRUE"),
)


#: The horizon of one tenant, in one round trip (see the docstring).
_HORIZON = """
CREATE FUNCTION caveat_withdrawal_horizon(tenant text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    before text := current_setting('caveat.tenant', true);
    found bigint;
BEGIN
    PERFORM set_config('caveat.tenant', tenant, true);
    SELECT h.seq INTO found FROM withdrawal_horizons h WHERE h.tenant_id = tenant;
    PERFORM set_config('caveat.tenant', coalesce(before, ''), true);
    RETURN coalesce(found, 0);
END $$;
"""


def upgrade() -> None:
    op.create_table(
        "withdrawal_horizons",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id"),
    )
    op.execute("ALTER TABLE withdrawal_horizons ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE withdrawal_horizons FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON withdrawal_horizons "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    # the application moves a horizon (through the triggers) but never deletes one
    op.execute(
        """
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                REVOKE ALL ON withdrawal_horizons FROM caveat_app;
                GRANT SELECT, INSERT, UPDATE ON withdrawal_horizons TO caveat_app;
            END IF;
        END $$;
        """
    )
    op.execute(_HORIZON)
    for name, table, event, ref, cond in _TRIGGERS:
        body = _BUMP.format(rows="changed_rows", cond=cond)
        op.execute(
            f"""
            CREATE FUNCTION caveat_{name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                {body}
                RETURN NULL;
            END $$;
            CREATE TRIGGER {name} AFTER {event} ON {table}
                REFERENCING {ref} TABLE AS changed_rows
                FOR EACH STATEMENT EXECUTE FUNCTION caveat_{name}();
            """
        )


def downgrade() -> None:
    for name, table, _, _, _ in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS caveat_{name}()")
    op.execute("DROP FUNCTION IF EXISTS caveat_withdrawal_horizon(text)")
    op.drop_table("withdrawal_horizons")
