"""Read replicas: where each tenant's latest withdrawing change lies

``tenants.withdrawal_horizon`` moves by one, in the same transaction, with every
change that withdraws an item from what recall or the context guard may serve: a
state that is not ``active`` (revocation, refutation, expiry by an event or a TTL,
a failed check, demotion, a lineage re-opening, supersession, archiving, promotion
to shadow), a row taken out of the current set (supersession), a skill version
that is no longer the released one, a redaction, an item row deleted. Statement
triggers record it, so no code path (single, bulk or a future one) can withdraw
without moving the horizon.

It is a column of the tenant's row, not a table of its own, because every
withdrawing transaction already holds that row's lock for the audit chain
(``tenants.audit_seq``): the bump adds no lock, so no new wait and no new lock
order (a row of its own, locked by the trigger mid-transaction and by the audit
append at another point, could deadlock two withdrawals). Under the lock, bumps
commit in the order of their values.

A replica whose copy of the row has the primary's value has replayed the tenant's
latest withdrawal (``caveat.app``'s read routing; docs/scaling.md). The bump
over-approximates (any update of a superseded or unreleased row, a move between two
withdrawn states): a needless bump only sends a read to the primary.

``caveat_withdrawal_horizon(tenant)`` reads a tenant's horizon in one statement (the
read routing asks it before every routed read, in autocommit): it sets the
transaction's tenant for its own query and puts back what was there, so it never
changes the tenant of a transaction it is called in; row-level security applies as
ever (it is no security definer).

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

#: One bump per tenant among ``changed_rows`` that pass ``cond`` (a statement trigger).
_BUMP = """
        UPDATE tenants SET withdrawal_horizon = withdrawal_horizon + 1
        WHERE id IN (SELECT r.tenant_id FROM changed_rows r WHERE {cond});
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
    SELECT t.withdrawal_horizon INTO found FROM tenants t WHERE t.id = tenant;
    PERFORM set_config('caveat.tenant', coalesce(before, ''), true);
    RETURN coalesce(found, 0);
END $$;
"""


def upgrade() -> None:
    op.add_column(
        "tenants",
        sa.Column("withdrawal_horizon", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute(_HORIZON)
    for name, table, event, ref, cond in _TRIGGERS:
        body = _BUMP.format(cond=cond)
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
    op.drop_column("tenants", "withdrawal_horizon")
