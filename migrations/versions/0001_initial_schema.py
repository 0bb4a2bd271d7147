"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Tables of the walking skeleton: tenants, fact schema, entities, aliases,
topology, facts, principals, evidence, items (with the partial unique index
that makes at most one row per supersession key current), item transitions,
cases, and the append-only, hash-chained audit log.
"""

from __future__ import annotations

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AUDIT_APPEND_ONLY = """
CREATE FUNCTION caveat_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION caveat_audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION caveat_audit_append_only();
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=True),
        sa.Column("code", sa.String(), nullable=True),
        sa.Column(
            "detail",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("prev_hash", sa.String(), nullable=False),
        sa.Column("hash", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "seq", name="uq_audit_tenant_seq"),
    )
    op.create_table(
        "cases",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("subjects", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("opened_by", sa.String(), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("closed_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "entities",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "entity_aliases",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("alias", sa.String(), nullable=False),
        sa.Column("entity_id", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "alias"),
    )
    op.create_table(
        "entity_edges",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("src", sa.String(), nullable=False),
        sa.Column("relation", sa.String(), nullable=False),
        sa.Column("dst", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "src", "relation", "dst"),
    )
    op.create_table(
        "evidence",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=True),
        sa.Column("uri", sa.String(), nullable=True),
        sa.Column("readers", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "fact_schema",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=True),
        sa.Column("max_age", sa.Interval(), nullable=True),
        sa.Column("content_type", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "attribute"),
    )
    op.create_table(
        "facts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_facts_lookup",
        "facts",
        ["tenant_id", "subject", "attribute", sa.literal_column("observed_at DESC")],
        unique=False,
    )
    op.create_table(
        "item_transitions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=True),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column(
            "cause",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_item_transitions_item_at", "item_transitions", ["item_id", "at"], unique=False
    )
    op.create_table(
        "items",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("object", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("required", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("excluded", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("conditions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("cond_key", sa.String(), nullable=False),
        sa.Column("evidence", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("evidence_key", sa.String(), nullable=False),
        sa.Column(
            "derived_from", postgresql.ARRAY(sa.BigInteger()), server_default="{}", nullable=False
        ),
        sa.Column("epistemic", sa.String(), nullable=False),
        sa.Column("content_type", sa.String(), nullable=True),
        sa.Column("scope_axis", sa.String(), nullable=False),
        sa.Column("scope_id", sa.String(), nullable=False),
        sa.Column(
            "facets",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("purposes", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "acl",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("text", sa.String(), nullable=True),
        sa.Column("entities", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(), nullable=True),
        sa.Column("salience", sa.Float(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_by", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("verified_by", sa.String(), nullable=True),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("release_state", sa.String(), nullable=True),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column(
            "fts",
            postgresql.TSVECTOR(),
            sa.Computed(
                "to_tsvector('english'::regconfig, coalesce(text, '') || ' ' || subject || ' ' || replace(attribute, '_', ' '))",
                persisted=True,
            ),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_items_derived_from", "items", ["derived_from"], unique=False, postgresql_using="gin"
    )
    op.create_index("ix_items_fts", "items", ["fts"], unique=False, postgresql_using="gin")
    op.create_index("ix_items_tenant_subject", "items", ["tenant_id", "subject"], unique=False)
    op.create_index(
        "uq_items_current_key",
        "items",
        [
            "tenant_id",
            "scope_axis",
            "scope_id",
            "subject",
            "attribute",
            "kind",
            "cond_key",
            "evidence_key",
        ],
        unique=True,
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.create_table(
        "principals",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("capabilities", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column(
            "policy",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("audit_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("audit_hash", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute(AUDIT_APPEND_ONLY)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS caveat_audit_append_only() CASCADE")
    op.drop_table("tenants")
    op.drop_table("principals")
    op.drop_index(
        "uq_items_current_key",
        table_name="items",
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.drop_index("ix_items_tenant_subject", table_name="items")
    op.drop_index("ix_items_fts", table_name="items", postgresql_using="gin")
    op.drop_index("ix_items_derived_from", table_name="items", postgresql_using="gin")
    op.drop_table("items")
    op.drop_index("ix_item_transitions_item_at", table_name="item_transitions")
    op.drop_table("item_transitions")
    op.drop_index("ix_facts_lookup", table_name="facts")
    op.drop_table("facts")
    op.drop_table("fact_schema")
    op.drop_table("evidence")
    op.drop_table("entity_edges")
    op.drop_table("entity_aliases")
    op.drop_table("entities")
    op.drop_table("cases")
    op.drop_table("audit_log")
