"""The routes of knowledge beside memory (model §6; docs/knowledge.md, docs/http.md):
import documents, list them, show one with its passages and versions, revoke or redact
one. A document id may hold ``/`` (``db/failover.md``): the routes take it as a path."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.app._docs import (
    DocsImportIn,
    DocsImportOut,
    DocumentDetailOut,
    DocumentOut,
    DocumentsOut,
    RedactOut,
    WithdrawIn,
    detail_view,
    document_view,
    import_view,
    redact_view,
)

__all__ = ["router"]

router = APIRouter()

DocId = Annotated[str, Path(description="The document's id; it may contain '/'.")]


@router.post("/v1/docs", tags=["docs"], **typed(DocsImportOut))
def docs_import_route(who: Acting, body: DocsImportIn) -> Any:
    """Import documents (an SME or admin: 403 otherwise), all with the access given,
    all or nothing: a bad document (an empty id, one with whitespace or '#', a NUL in
    its text) is 422 naming it and imports nothing; a document imported before with
    other access is 409. Unchanged texts stay as they are, changed ones get a new
    version, revoked documents are skipped."""
    rt, actor = who
    report = use.docs_import(
        rt,
        actor,
        body.inputs(),
        readers=body.readers,
        deny=body.deny,
        classification=body.classification,
        purposes=body.purposes,
    )
    return import_view(report)


@router.get("/v1/docs", tags=["docs"], **typed(DocumentsOut))
def docs_list_route(who: Acting) -> Any:
    """The documents the caller may read (current versions, revoked ones included)."""
    rt, actor = who
    return {"documents": [document_view(d) for d in use.docs_list(rt, actor)]}


@router.post("/v1/docs/{document_id:path}/revoke", tags=["docs"], **typed(DocumentOut))
def docs_revoke_route(who: Acting, document_id: DocId, body: WithdrawIn) -> Any:
    """Revoke a document: its passages are withdrawn (409 when it is revoked already)."""
    rt, actor = who
    return document_view(use.docs_revoke(rt, actor, document_id, reason=body.reason))


@router.post("/v1/docs/{document_id:path}/redact", tags=["docs"], **typed(RedactOut))
def docs_redact_route(who: Acting, document_id: DocId, body: WithdrawIn) -> Any:
    """Redact a document: every version hidden, every passage withdrawn."""
    rt, actor = who
    return redact_view(document_id, use.docs_redact(rt, actor, document_id, reason=body.reason))


@router.get("/v1/docs/{document_id:path}", tags=["docs"], **typed(DocumentDetailOut))
def docs_show_route(who: Acting, document_id: DocId) -> Any:
    """A document with its current passages and its versions; 404 when there is none
    the caller may read."""
    rt, actor = who
    return detail_view(use.docs_show(rt, actor, document_id))
