"""The embedding queue: items get their vectors after their write commits (model §1)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy.orm import Session

from recall import _queries as q

if TYPE_CHECKING:
    from recall._embedders import Embedder

__all__ = ["embed_passages", "embed_pending", "enqueue_missing", "queue_depth", "vector_text"]


def vector_text(vector: object) -> str:
    """A vector in pgvector's text form, ``[x,y,...]`` (float32 precision is kept)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"  # type: ignore[attr-defined]


def embed_pending(
    *, session: Session, tenant: str, embedder: Embedder, now: datetime, batch: int = 256
) -> int:
    """Embed up to ``batch`` queued items of ``tenant`` under ``embedder`` and take them
    off the queue, in the caller's transaction; the number taken (0: the queue is empty).

    Concurrent drains share the queue (locked rows are skipped). A redacted or
    missing item leaves the queue without an embedding. Re-embedding an item under the
    same model replaces its vector; items rows are never written."""
    taken = q.embed_batch(session=session, tenant=tenant, batch=batch)
    if not taken:
        return 0
    live = [(i, text) for i, text, gone in taken if not gone]
    vectors = embedder.embed([text for _, text in live]) if live else np.zeros((0, 1))
    q.store_embeddings(
        session=session,
        tenant=tenant,
        model=embedder.name,
        dim=embedder.dimension,
        rows=[(i, vector_text(v)) for (i, _), v in zip(live, vectors, strict=True)],
        done=[i for i, _, _ in taken],
        at=now,
    )
    return len(taken)


def queue_depth(*, session: Session, tenant: str) -> int:
    """Items of ``tenant`` waiting for an embedding."""
    return q.queue_depth(session=session, tenant=tenant)


def enqueue_missing(*, session: Session, tenant: str, model: str) -> int:
    """Queue every current item of ``tenant`` that has no vector under ``model`` (after a
    model change, or to backfill); the number queued."""
    return q.enqueue_missing(session=session, tenant=tenant, model=model)


def embed_passages(
    *,
    session: Session,
    tenant: str,
    embedder: Embedder,
    now: datetime,
    passage_ids: Sequence[int] | None = None,
    batch: int = 256,
) -> int:
    """Embed up to ``batch`` live knowledge passages of ``tenant`` (of ``passage_ids``;
    None: any) that have no vector under ``embedder``, in the caller's transaction; the
    number embedded (0: none is missing). The text embedded is the heading path, then
    the passage's text, in the same space as the items' (one query vector ranks both).
    Passages need no queue: a missing vector is found by the passage_embeddings key."""
    rows = q.passages_to_embed(
        session=session, tenant=tenant, model=embedder.name, passage_ids=passage_ids, batch=batch
    )
    if not rows:
        return 0
    vectors = embedder.embed([text for _, text in rows])
    q.store_passage_embeddings(
        session=session,
        tenant=tenant,
        model=embedder.name,
        dim=embedder.dimension,
        rows=[(i, vector_text(v)) for (i, _), v in zip(rows, vectors, strict=True)],
        at=now,
    )
    return len(rows)
