"""Knowledge passages for the recall tests (model §6), inserted as the import stores
them (migration 0027: a document version, its passages with the document's access, an
English full-text vector of heading path and text), with their withdrawals. A test
helper: the import itself is ``claims.import_documents``, tested in tests/claims."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

import recall
from recall._embed import vector_text


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]
    fragment: str
    text: str


def add_document(
    s: Session,
    tenant: str,
    doc_id: str,
    sections: Sequence[Section],
    *,
    at: datetime,
    readers: Sequence[str] = (),
    deny: Sequence[str] = (),
    classification: str | None = None,
    purposes: Sequence[str] = (),
    version: int = 1,
    uri: str | None = None,
    embedder: recall.Embedder | None = None,
) -> list[int]:
    """One document version with its passages; their ids in section order."""
    s.execute(
        sa.text(
            "INSERT INTO documents (tenant_id, id, version, title, uri, readers, deny, "
            "classification, purposes, digest, imported_at, imported_by) VALUES "
            "(:t, :d, :v, :title, :uri, :r, :deny, :cl, :p, :dg, :at, 'test')"
        ),
        {
            "t": tenant,
            "d": doc_id,
            "v": version,
            "title": doc_id,
            "uri": uri,
            "r": list(readers),
            "deny": list(deny),
            "cl": classification,
            "p": list(purposes),
            "dg": f"{doc_id}-{version}",
            "at": at,
        },
    )
    acl = json.dumps([sorted(readers)] if readers else [])
    ids = []
    for n, sec in enumerate(sections):
        pid = s.execute(
            sa.text(
                "INSERT INTO passages (tenant_id, document_id, document_version, ordinal, "
                "heading_path, fragment, text, acl, deny, classification, purposes, fts, "
                "recorded_at) VALUES (:t, :d, :v, :o, :hp, :f, :x, CAST(:acl AS jsonb), "
                ":deny, :cl, :p, to_tsvector('english', array_to_string(CAST(:hp AS text[]), "
                "' ') || ' ' || :x), :at) RETURNING id"
            ),
            {
                "t": tenant,
                "d": doc_id,
                "v": version,
                "o": n,
                "hp": list(sec.heading_path),
                "f": sec.fragment,
                "x": sec.text,
                "acl": acl,
                "deny": list(deny),
                "cl": classification,
                "p": list(purposes),
                "at": at,
            },
        ).scalar_one()
        ids.append(int(pid))
        if embedder is not None:
            [vec] = embedder.embed([" ".join(sec.heading_path) + " " + sec.text])
            s.execute(
                sa.text(
                    "INSERT INTO passage_embeddings (tenant_id, passage_id, model, dim, "
                    "embedding, embedded_at) VALUES (:t, :i, :m, :dim, CAST(:e AS vector), :at)"
                ),
                {
                    "t": tenant,
                    "i": pid,
                    "m": embedder.name,
                    "dim": embedder.dimension,
                    "e": vector_text(vec),
                    "at": at,
                },
            )
    return ids


def withdraw(s: Session, tenant: str, doc_id: str, reason: str, at: datetime) -> None:
    """Withdraw a document's current passages (``superseded``, ``revoked``, ``redacted``)."""
    s.execute(
        sa.text(
            "UPDATE passages SET withdrawn_at = :at, withdrawn_reason = :r "
            "WHERE tenant_id = :t AND document_id = :d AND withdrawn_at IS NULL"
        ),
        {"t": tenant, "d": doc_id, "r": reason, "at": at},
    )
