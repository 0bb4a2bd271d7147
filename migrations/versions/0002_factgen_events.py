"""factgen events

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

The ``events`` table: deploy, config-change, version-change and authorisation
events (model §4.3), recorded by ``factgen.record_event`` for the lifecycle
engine to act on. ``external_id`` (a CloudEvents ``id``) is unique per tenant
when given, by a partial unique index.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("external_id", sa.String(), nullable=True),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("subjects", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "changes",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("principal", sa.String(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "uq_events_external_id",
        "events",
        ["tenant_id", "external_id"],
        unique=True,
        postgresql_where=sa.text("external_id IS NOT NULL"),
    )
    op.create_index("ix_events_tenant_occurred", "events", ["tenant_id", "occurred_at"])
    op.create_index("ix_events_subjects", "events", ["subjects"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_index("ix_events_subjects", table_name="events", postgresql_using="gin")
    op.drop_index("ix_events_tenant_occurred", table_name="events")
    op.drop_index(
        "uq_events_external_id",
        table_name="events",
        postgresql_where=sa.text("external_id IS NOT NULL"),
    )
    op.drop_table("events")
