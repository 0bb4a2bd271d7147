"""Knowledge beside memory (model §6): documents, their passages, the passages' vectors

- ``documents``: one row per imported version of a document (a runbook, a postmortem),
  keyed by tenant, document id and version. ``readers``, ``deny`` and
  ``classification`` work as an evidence source's do; ``purposes`` as an item's (empty:
  every purpose). ``digest`` is the sha256 of the imported text: re-importing the same
  text is a no-op, a changed text is a new version that supersedes the old one
  (``superseded_at``). ``revoked_at`` / ``redacted_at`` withdraw the document.
- ``passages``: one row per section of a document version (split at headings), with its
  heading path, its fragment (the anchor slug, unique within the version), its text and
  the access it inherits from the document (``acl`` as an item's: one reader list, or
  ``[]``; ``deny``; ``classification``; ``purposes``). ``fts`` is filled by the insert.
  ``withdrawn_at`` / ``withdrawn_reason`` (``superseded``, ``revoked``, ``redacted``)
  end it; ``as_of`` reads the passages recorded before and not withdrawn by then, and a
  redacted one never.
- ``passage_embeddings``: a passage's vector per model, as ``item_embeddings``.

Tenant-isolated and forced like every tenant table. The application role reads and
inserts all three, updates only the columns that withdraw (never a passage's text).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"
_TABLES = ("documents", "passages", "passage_embeddings")
_GRANTS = {
    "documents": "GRANT SELECT, INSERT ON documents TO caveat_app; "
    "GRANT UPDATE (superseded_at, revoked_at, revoked_by, redacted_at) ON documents TO caveat_app;",
    "passages": "GRANT SELECT, INSERT ON passages TO caveat_app; "
    "GRANT UPDATE (withdrawn_at, withdrawn_reason) ON passages TO caveat_app;",
    "passage_embeddings": "GRANT SELECT, INSERT, DELETE ON passage_embeddings TO caveat_app;",
}


def _text_array(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False)


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(), nullable=True),
        sa.Column("uri", sa.String(), nullable=True),
        _text_array("readers"),
        _text_array("deny"),
        sa.Column("classification", sa.String(), nullable=True),
        _text_array("purposes"),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("imported_by", sa.String(), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(), nullable=True),
        sa.Column("redacted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", "version"),
    )
    op.create_index(
        "uq_documents_current",
        "documents",
        ["tenant_id", "id"],
        unique=True,
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.create_table(
        "passages",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("document_id", sa.String(), nullable=False),
        sa.Column("document_version", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        _text_array("heading_path"),
        sa.Column("fragment", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column(
            "acl", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False
        ),
        _text_array("deny"),
        sa.Column("classification", sa.String(), nullable=True),
        _text_array("purposes"),
        sa.Column("fts", postgresql.TSVECTOR(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("withdrawn_reason", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
        sa.UniqueConstraint(
            "tenant_id", "document_id", "document_version", "fragment", name="uq_passages_fragment"
        ),
    )
    op.create_index("ix_passages_fts", "passages", ["fts"], unique=False, postgresql_using="gin")
    op.create_index(
        "ix_passages_current",
        "passages",
        ["tenant_id", "document_id"],
        unique=False,
        postgresql_where=sa.text("withdrawn_at IS NULL"),
    )
    op.create_table(
        "passage_embeddings",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("passage_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(), nullable=False),
        sa.Column("embedded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "passage_id", "model"),
    )
    op.execute(
        "CREATE INDEX ix_passage_embeddings_hnsw_384 ON passage_embeddings "
        "USING hnsw ((CAST(embedding AS vector(384))) vector_cosine_ops) WHERE dim = 384"
    )
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
        )
        op.execute(
            f"""
            DO $$ BEGIN
                IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                    REVOKE ALL ON {table} FROM caveat_app;
                    {_GRANTS[table]}
                END IF;
            END $$;
            """
        )


def downgrade() -> None:
    for table in reversed(_TABLES):
        op.drop_table(table)
