"""lifecycle engine

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Tables of the lifecycle engine (``lifecycle/models.py``), each keyed by
tenant and item or case id, so that items keep no lifecycle columns of
their own: the items that entered a case's context, citations with their
support/counter signals, the shadow log, pending verify-on-next-use checks,
last use (salience decay), skill enforcement levels, redactions and
erasures.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "case_context",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("case_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("entered_at", _TS, nullable=False),
        sa.Column("via", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "case_id", "item_id"),
    )
    op.create_table(
        "citations",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("case_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("influence", sa.String(), nullable=False),
        sa.Column("compliance", sa.String(), nullable=False),
        sa.Column("cited_at", _TS, nullable=False),
        sa.Column("cited_by", sa.String(), nullable=False),
        sa.Column("signal", sa.String(), nullable=True),
        sa.Column("signalled_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "case_id", "item_id"),
    )
    op.create_index("ix_citations_item", "citations", ["tenant_id", "item_id"], unique=False)
    op.create_table(
        "shadow_log",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("case_id", sa.String(), nullable=False),
        sa.Column("first_at", _TS, nullable=False),
        sa.Column("last_at", _TS, nullable=False),
        sa.Column("recalls", sa.Integer(), nullable=False),
        sa.Column("matched_recalls", sa.Integer(), nullable=False),
        sa.Column("matched", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("agreed", sa.Boolean(), nullable=True),
        sa.Column("concluded_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "item_id", "case_id"),
    )
    op.create_table(
        "expiry_checks",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("since", _TS, nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "cause",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )
    op.create_table(
        "item_usage",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("last_used_at", _TS, nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )
    op.create_table(
        "skill_enforcement",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("set_at", _TS, nullable=False),
        sa.Column("set_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )
    op.create_table(
        "erasures",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("target_axis", sa.String(), nullable=False),
        sa.Column("target_id", sa.String(), nullable=False),
        sa.Column("at", _TS, nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "redactions",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("at", _TS, nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("erasure_id", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )


def downgrade() -> None:
    op.drop_table("redactions")
    op.drop_table("erasures")
    op.drop_table("skill_enforcement")
    op.drop_table("item_usage")
    op.drop_table("expiry_checks")
    op.drop_table("shadow_log")
    op.drop_index("ix_citations_item", table_name="citations")
    op.drop_table("citations")
    op.drop_table("case_context")
