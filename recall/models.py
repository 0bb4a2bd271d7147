"""Tables of recall: embeddings kept beside the item, and the queue that fills them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector
from sqlmodel import Field, SQLModel

from factgen.columns import timestamp

__all__ = ["EmbedQueue", "ItemEmbedding", "PassageEmbedding"]


class ItemEmbedding(SQLModel, table=True):
    """One item's vector under one embedding model (model §1: beside the item, not in it).

    ``embedding`` is an unsized ``vector`` (models differ in dimension); the HNSW
    index is an expression index on ``embedding::vector(384)`` where ``dim = 384``
    (migration 0010)."""

    __tablename__ = "item_embeddings"
    __table_args__ = (
        sa.Index(
            "ix_item_embeddings_hnsw_384",
            sa.text("(CAST(embedding AS vector(384))) vector_cosine_ops"),
            postgresql_using="hnsw",
            postgresql_where=sa.text("dim = 384"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    item_id: int = Field(
        sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False, nullable=False)
    )
    model: str = Field(primary_key=True)
    dim: int
    embedding: Any = Field(sa_column=sa.Column(Vector(), nullable=False))
    embedded_at: datetime = timestamp(nullable=False)


class EmbedQueue(SQLModel, table=True):
    """An item waiting for its embedding (filled by a trigger on ``items``)."""

    __tablename__ = "embed_queue"
    tenant_id: str = Field(primary_key=True)
    item_id: int = Field(
        sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False, nullable=False)
    )
    enqueued_at: datetime = timestamp(nullable=False)


class PassageEmbedding(SQLModel, table=True):
    """A knowledge passage's vector under one embedding model (migration 0027), in the
    same space as the items' so that one query vector ranks both."""

    __tablename__ = "passage_embeddings"
    __table_args__ = (
        sa.Index(
            "ix_passage_embeddings_hnsw_384",
            sa.text("(CAST(embedding AS vector(384))) vector_cosine_ops"),
            postgresql_using="hnsw",
            postgresql_where=sa.text("dim = 384"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    passage_id: int = Field(
        sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False, nullable=False)
    )
    model: str = Field(primary_key=True)
    dim: int
    embedding: Any = Field(sa_column=sa.Column(Vector(), nullable=False))
    embedded_at: datetime = timestamp(nullable=False)
