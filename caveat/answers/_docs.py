"""What the document doors answer (``/v1/docs``)."""

from __future__ import annotations

from datetime import datetime

from caveat.answers._answers import Answer as _Out


class DocumentOutcomeOut(_Out):
    """What importing one document did: imported, updated, unchanged or revoked."""

    id: str
    outcome: str
    version: int
    passages: int
    superseded_version: int | None


class DocsImportOut(_Out):
    documents: list[DocumentOutcomeOut]
    imported: int
    updated: int
    unchanged: int
    revoked: int
    passages: int


class DocumentOut(_Out):
    """One version of a document: its access, digest, state and live passages."""

    id: str
    ref: str
    version: int
    title: str | None
    uri: str | None
    readers: list[str]
    deny: list[str]
    classification: str | None
    purposes: list[str]
    digest: str
    state: str
    passages: int
    imported_at: datetime
    imported_by: str
    superseded_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None


class DocumentsOut(_Out):
    documents: list[DocumentOut]


class PassageOut(_Out):
    """One passage: its evidence ref, heading path, fragment, uri and text."""

    id: int
    ref: str
    ordinal: int
    heading_path: list[str]
    fragment: str
    uri: str | None
    text: str


class DocumentDetailOut(_Out):
    document: DocumentOut
    passages: list[PassageOut]
    history: list[DocumentOut]


class RedactOut(_Out):
    id: str
    redacted: bool
    passages: int
