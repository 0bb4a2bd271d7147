"""Knowledge beside memory from every door (model §6; docs/knowledge.md): import
Markdown runbooks and postmortems (one transaction: the documents, their passages and
the passages' vectors), list them, show one with its passages and versions, revoke or
redact one. The answer models every door shares live here too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import claims
import recall
from caveat.answers._docs import (
    DocsImportOut,
    DocumentDetailOut,
    DocumentOut,
    DocumentsOut,
    RedactOut,
)
from caveat.app._unit import Unit, usecase
from predicates.errors import InputError

__all__ = [
    "DocsImportIn",
    "DocsImportOut",
    "DocumentDetailOut",
    "DocumentIn",
    "DocumentOut",
    "DocumentsOut",
    "RedactOut",
    "WithdrawIn",
    "detail_view",
    "docs_import",
    "docs_list",
    "docs_redact",
    "docs_revoke",
    "docs_show",
    "document_view",
    "documents_from_paths",
    "import_view",
    "redact_view",
]

#: The file names a directory import reads (case-insensitive).
MARKDOWN_SUFFIXES = (".md", ".markdown")


@usecase(require="docs", use="docs_import")
def docs_import(
    u: Unit,
    documents: Sequence[claims.DocumentInput],
    *,
    readers: Sequence[str] = (),
    deny: Sequence[str] = (),
    classification: str | None = None,
    purposes: Sequence[str] = (),
    now: datetime | None = None,
) -> claims.ImportReport:
    """Import ``documents`` with one access (``claims.import_documents``) and embed the
    passages written with the runtime's embedder, all in one transaction: nothing is
    stored unless everything is."""
    at = u.at(now)
    report = claims.import_documents(
        **at,
        documents=documents,
        readers=readers,
        deny=deny,
        classification=classification,
        purposes=purposes,
    )
    ids = report.passage_ids
    if ids and u.rt.embedder is not None:
        recall.embed_passages(
            session=u.session,
            tenant=u.tenant,
            embedder=u.rt.embedder,
            now=at["now"],
            passage_ids=ids,
            batch=len(ids),
        )
    return report


@usecase(require="read")
def docs_list(u: Unit) -> list[claims.DocumentRecord]:
    """The documents the actor may read (their current versions), by id."""
    return claims.list_documents(**u.scope())


@usecase(require="read")
def docs_show(u: Unit, document_id: str) -> claims.DocumentDetail:
    """A document with its current passages and its versions; ``NotFound`` when the
    actor may not read it."""
    return claims.get_document(**u.scope(), document_id=document_id)


@usecase(require="docs", use="docs_revoke")
def docs_revoke(
    u: Unit, document_id: str, *, reason: str, now: datetime | None = None
) -> claims.DocumentRecord:
    """Revoke a document: its passages are withdrawn, it stays listed as revoked."""
    return claims.revoke_document(**u.at(now), document_id=document_id, reason=reason)


@usecase(require="docs", use="docs_redact")
def docs_redact(u: Unit, document_id: str, *, reason: str, now: datetime | None = None) -> int:
    """Redact a document: every version hidden, every passage withdrawn; the number of
    passages withdrawn."""
    return claims.redact_document(**u.at(now), document_id=document_id, reason=reason)


# --- Markdown files ----------------------------------------------------------------------


def _is_markdown(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in MARKDOWN_SUFFIXES


def _read(path: Path, shown: str) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{shown} is not UTF-8: byte {data[exc.start]:#04x} at offset {exc.start}",
            file=shown,
            offset=exc.start,
        ) from None
    return text.removeprefix("\ufeff")


def _uri(ident: str, uri_base: str | None) -> str:
    if uri_base is None:
        return f"file:{ident}"
    return f"{uri_base.rstrip('/')}/{ident}"


def documents_from_paths(
    paths: Sequence[str | Path], *, uri_base: str | None = None
) -> list[claims.DocumentInput]:
    """The Markdown documents under ``paths``: a file is one document whose id is its
    file name; a directory, every ``*.md`` / ``*.markdown`` under it (recursively,
    hidden directories skipped), each with the id of its path relative to that
    directory (``/``-separated). The uri is ``file:<id>``, or ``<uri_base>/<id>`` (e.g.
    the repository's web address). An ``InputError`` names a missing path, a directory
    without Markdown, or a file that is not UTF-8 (with the offset of the first bad
    byte); the ids are checked by the import."""
    if not paths:
        raise InputError("no path given: name Markdown files or directories")
    out: list[claims.DocumentInput] = []
    for raw in paths:
        given = Path(raw)
        if given.is_file():
            out.append(
                claims.DocumentInput(given.name, _read(given, str(raw)), _uri(given.name, uri_base))
            )
            continue
        if not given.is_dir():
            raise InputError(f"{raw}: no such file or directory", path=str(raw))
        found = sorted(
            p
            for p in given.rglob("*")
            if _is_markdown(p)
            and not any(part.startswith(".") for part in p.relative_to(given).parts)
        )
        if not found:
            raise InputError(
                f"{raw}: no Markdown file (*.md, *.markdown) in the directory", path=str(raw)
            )
        for p in found:
            ident = p.relative_to(given).as_posix()
            out.append(claims.DocumentInput(ident, _read(p, str(p)), _uri(ident, uri_base)))
    return out


# --- what the doors take and answer ----------------------------------------------------


class DocumentIn(BaseModel):
    """A document to import."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(
        description="The document's id in the tenant (no whitespace, no '#'), e.g. its "
        "path in the runbook repository."
    )
    text: str = Field(description="Its Markdown text.")
    uri: str | None = Field(default=None, description="Where it lives (its web address).")
    title: str | None = Field(default=None, description="Default: its first heading.")


class DocsImportIn(BaseModel):
    """Documents to import, all with the same access."""

    model_config = ConfigDict(extra="forbid")
    documents: list[DocumentIn] = Field(min_length=1)
    readers: list[str] = Field(
        default_factory=list,
        description="Capabilities any one of which reads them; empty: the whole tenant.",
    )
    deny: list[str] = Field(
        default_factory=list, description="principal:<id> / cap:<capability> never reading."
    )
    classification: str | None = Field(default=None, description="One of the tenant's levels.")
    purposes: list[str] = Field(default_factory=list, description="Empty: every purpose.")

    def inputs(self) -> list[claims.DocumentInput]:
        return [claims.DocumentInput(d.id, d.text, d.uri, d.title) for d in self.documents]


class WithdrawIn(BaseModel):
    """Why a document is revoked or redacted (on the audit record)."""

    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1)


def _when(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def document_view(doc: claims.DocumentRecord) -> dict[str, Any]:
    return {
        "id": doc.id,
        "ref": doc.ref,
        "version": doc.version,
        "title": doc.title,
        "uri": doc.uri,
        "readers": list(doc.readers),
        "deny": list(doc.deny),
        "classification": doc.classification,
        "purposes": list(doc.purposes),
        "digest": doc.digest,
        "state": doc.state,
        "passages": doc.passages,
        "imported_at": doc.imported_at.isoformat(),
        "imported_by": doc.imported_by,
        "superseded_at": _when(doc.superseded_at),
        "revoked_at": _when(doc.revoked_at),
        "revoked_by": doc.revoked_by,
    }


def passage_view(p: claims.PassageRecord) -> dict[str, Any]:
    return {
        "id": p.id,
        "ref": p.ref,
        "ordinal": p.ordinal,
        "heading_path": list(p.heading_path),
        "fragment": p.fragment,
        "uri": p.uri,
        "text": p.text,
    }


def detail_view(detail: claims.DocumentDetail) -> dict[str, Any]:
    return {
        "document": document_view(detail.document),
        "passages": [passage_view(p) for p in detail.passages],
        "history": [document_view(v) for v in detail.history],
    }


def redact_view(document_id: str, withdrawn: int) -> dict[str, Any]:
    """What redacting a document answers: its id and the passages it withdrew."""
    return {"id": document_id, "redacted": True, "passages": withdrawn}


def import_view(report: claims.ImportReport) -> dict[str, Any]:
    return {
        "documents": [
            {
                "id": d.id,
                "outcome": d.outcome,
                "version": d.version,
                "passages": len(d.passage_ids),
                "superseded_version": d.superseded_version,
            }
            for d in report.documents
        ],
        **{o: report.count(o) for o in ("imported", "updated", "unchanged", "revoked")},
        "passages": len(report.passage_ids),
    }
