"""embeddings beside the item, an embedding queue, evidence attachments and confidence

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

- ``item_embeddings``: one vector per (tenant, item, model), written after the
  item's write commits. A model change or a backfill adds rows here and never
  rewrites ``items`` (whose unused ``embedding`` column goes). The column is an
  unsized ``vector`` (models differ in dimension); the HNSW index covers one
  dimension, 384 (all-MiniLM-L6-v2 and the test embedder), as an expression
  index on ``embedding::vector(384)`` restricted to ``dim = 384``. A model of
  another dimension is searched exactly until a revision adds its index.
- ``embed_queue``: the items that wait for an embedding, filled by a statement
  trigger on ``items`` (COPY included), drained in batches by ``caveat embed``.
- ``evidence_links``: evidence attached to an item as supporting or refuting,
  with a strength and a source kind; ``item_confidence`` keeps the folded score
  (ranking only, model §6) so recall reads one row per candidate.

Every new table is tenant-isolated like the others (migration 0006).
"""

from __future__ import annotations

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"


def _isolate(table: str) -> None:
    """The tenant policy of migration 0006, for a new table."""
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON {table} "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )


def upgrade() -> None:
    op.drop_column("items", "embedding")
    op.create_table(
        "item_embeddings",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(), nullable=False),
        sa.Column("embedded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "item_id", "model"),
    )
    op.execute(
        "CREATE INDEX ix_item_embeddings_hnsw_384 ON item_embeddings "
        "USING hnsw ((CAST(embedding AS vector(384))) vector_cosine_ops) WHERE dim = 384"
    )
    op.create_table(
        "embed_queue",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )
    op.execute(
        """
        CREATE FUNCTION caveat_items_enqueue_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO embed_queue (tenant_id, item_id, enqueued_at)
            SELECT n.tenant_id, n.id, now() FROM new_items n
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$;
        CREATE TRIGGER items_enqueue_embedding AFTER INSERT ON items
            REFERENCING NEW TABLE AS new_items
            FOR EACH STATEMENT EXECUTE FUNCTION caveat_items_enqueue_embedding();
        """
    )
    op.create_table(
        "evidence_links",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("evidence_id", sa.String(), nullable=False),
        sa.Column("stance", sa.String(), nullable=False),
        sa.Column("strength", sa.Float(), nullable=False),
        sa.Column("source_kind", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.CheckConstraint("stance IN ('supports', 'refutes')", name="ck_evidence_links_stance"),
        sa.CheckConstraint("strength >= 0 AND strength <= 1", name="ck_evidence_links_strength"),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_index("ix_evidence_links_item", "evidence_links", ["tenant_id", "item_id", "at"])
    op.create_table(
        "item_confidence",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "item_id"),
    )
    for table in ("item_embeddings", "embed_queue", "evidence_links", "item_confidence"):
        _isolate(table)
    # every item written before this revision waits for its first embedding
    op.execute(
        "INSERT INTO embed_queue (tenant_id, item_id, enqueued_at) "
        "SELECT tenant_id, id, now() FROM items"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS items_enqueue_embedding ON items")
    op.execute("DROP FUNCTION IF EXISTS caveat_items_enqueue_embedding()")
    for table in ("item_confidence", "evidence_links", "embed_queue", "item_embeddings"):
        op.drop_table(table)
    op.add_column(
        "items",
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(), nullable=True),
    )
