"""Knowledge beside memory (model §6; docs/knowledge.md): runbooks and postmortems as
documents, split at their headings into passages, read like evidence.

A document is stored by version: re-importing the same text changes nothing, a changed
text is a new version whose passages replace the old ones (withdrawn ``superseded``).
Each passage keeps its document, heading path, fragment (the GitHub anchor of its
heading) and the access of its document, and is an evidence source of its own,
``doc:<document id>#<fragment>``, so that an item may cite it.

Who imports, revokes and redacts: a role with ``docs`` (SME, admin); an agent reads
documents but never imports them (a runbook is the team's, not an agent's lesson).
Reads answer only what the caller may read: a document whose readers, deny list or
classification exclude it is ``NotFound``, as if it did not exist.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token
from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q
from claims._access import Actor, acl_from_readers
from claims._registry import tenant_levels
from factgen._classification import check_level, parse_deny
from predicates.errors import Conflict, InputError, NotFound

__all__ = [
    "DOCUMENT_REF_PREFIX",
    "DocumentDetail",
    "DocumentInput",
    "DocumentOutcome",
    "DocumentRecord",
    "ImportReport",
    "PassageRecord",
    "Section",
    "document_ref",
    "get_document",
    "import_documents",
    "list_documents",
    "passage_ref",
    "passage_uri",
    "redact_document",
    "revoke_document",
    "split_markdown",
]

#: Evidence ids of passages begin so: ``doc:<document id>#<fragment>``.
DOCUMENT_REF_PREFIX = "doc:"
#: The fragment of the text before a document's first heading.
TOP_FRAGMENT = "top"
_PURPOSE = re.compile(r"^[a-z][a-z0-9_.-]*$")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


# --- splitting -------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One section of a Markdown document: its heading path (the texts of the headings
    it sits under, its own last; empty for the text before the first heading), its
    heading ``level`` (0 for that text), its ``fragment`` (unique within the document),
    its ``text`` (the heading line or lines and the body up to the next heading, verbatim)
    the source lines ``[start, end)`` it spans, and how many of them its heading takes."""

    heading_path: tuple[str, ...]
    level: int
    fragment: str
    text: str
    start: int
    end: int
    #: How many of the lines are the heading's: 1 (ATX), 2 (setext), 0 (no heading).
    heading_lines: int = 1

    @property
    def body(self) -> str:
        """The section's text without its heading line(s)."""
        return "".join(_lines(self.text)[self.heading_lines :])

    @property
    def empty(self) -> bool:
        """Nothing but its heading and blank lines."""
        return not self.body.strip()


def _lines(text: str) -> list[str]:
    """Lines as markdown-it counts them (``\\n``, ``\\r\\n``, ``\\r``), ends kept."""
    return _LINE.findall(text)


def slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case; letters, digits, ``-``, ``_`` and
    spaces kept (spaces become ``-``); everything else dropped."""
    kept = []
    for ch in text.strip().lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN" or cat == "Mn":
            kept.append(ch)
        elif ch == " ":
            kept.append("-")
    return "".join(kept)


def _plain(inline: Token) -> str:
    """The text of a heading's inline token, without its markup."""
    if not inline.children:
        return inline.content.strip()
    parts = [
        c.content
        for c in inline.children
        if c.type in ("text", "code_inline", "image", "softbreak", "hardbreak")
    ]
    return " ".join("".join(p if p else " " for p in parts).split())


_MD = MarkdownIt("commonmark")


def split_markdown(text: str) -> list[Section]:
    """Split ``text`` at its headings (ATX ``#`` and setext underlines, every level; only
    top-level ones: a heading inside a fenced block, a list or a quote is body text).

    Every line belongs to exactly one section, in order, so joining the sections' texts
    gives ``text`` back. The text before the first heading is a section with an empty
    heading path and fragment ``top`` (none when there is no such text). A heading's
    path is the path of the nearest heading above it of a lower level, plus its own
    text. Fragments are GitHub's anchors (the heading's own slug; ``section`` when it
    slugs to nothing), made unique in document order with ``-1``, ``-2``... Sections
    with no body are kept here (``Section.empty``); importing skips them.
    """
    lines = _lines(text)
    tokens = _MD.parse(text)
    heads: list[tuple[int, int, int, str]] = []  # start, end, level, text
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.level == 0 and tok.map is not None:
            heads.append((tok.map[0], tok.map[1], int(tok.tag[1:]), _plain(tokens[i + 1])))
    sections: list[Section] = []
    used: set[str] = set()

    def unique(base: str) -> str:
        name, n = base, 0
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        return name

    first = heads[0][0] if heads else len(lines)
    if first > 0:
        sections.append(Section((), 0, unique(TOP_FRAGMENT), "".join(lines[:first]), 0, first, 0))
    stack: list[tuple[int, str]] = []
    for n, (start, head_end, level, title) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append(
            Section(
                tuple(t for _, t in stack),
                level,
                unique(slug(title) or "section"),
                "".join(lines[start:end]),
                start,
                end,
                head_end - start,
            )
        )
    return sections


# --- records -----------------------------------------------------------------------------


def document_ref(document_id: str) -> str:
    """A document's reference: ``doc:<id>``."""
    return f"{DOCUMENT_REF_PREFIX}{document_id}"


def passage_ref(document_id: str, fragment: str) -> str:
    """A passage's evidence id: ``doc:<document id>#<fragment>``."""
    return f"{document_ref(document_id)}#{fragment}"


def passage_uri(uri: str | None, fragment: str) -> str | None:
    """A passage's link: its document's ``uri`` with the passage's fragment (None: the
    document has no URI)."""
    return None if uri is None else f"{uri.split('#', 1)[0]}#{fragment}"


@dataclass(frozen=True)
class DocumentInput:
    """A document to import: its id (unique in the tenant, e.g. its path in the
    repository of runbooks), its Markdown ``text``, and optionally a ``uri`` (where it
    lives) and ``title`` (default: its first heading, else its id)."""

    id: str
    text: str
    uri: str | None = None
    title: str | None = None


Outcome = Literal["imported", "updated", "unchanged", "revoked"]


@dataclass(frozen=True)
class DocumentOutcome:
    """What importing one document did: ``imported`` (its first version), ``updated``
    (a new version superseding ``superseded_version``), ``unchanged`` (the same text as
    its current version) or ``revoked`` (it was revoked: skipped); ``passage_ids``: the
    passages written (none unless imported or updated)."""

    id: str
    outcome: Outcome
    version: int
    passage_ids: tuple[int, ...] = ()
    superseded_version: int | None = None


@dataclass(frozen=True)
class ImportReport:
    """Per document, in the order given."""

    documents: tuple[DocumentOutcome, ...]

    @property
    def passage_ids(self) -> list[int]:
        """Every passage written by the import."""
        return [p for d in self.documents for p in d.passage_ids]

    def count(self, outcome: Outcome) -> int:
        return sum(1 for d in self.documents if d.outcome == outcome)


@dataclass(frozen=True)
class DocumentRecord:
    """One version of a document."""

    id: str
    version: int
    title: str | None
    uri: str | None
    readers: tuple[str, ...]
    deny: tuple[str, ...]
    classification: str | None
    purposes: tuple[str, ...]
    digest: str
    imported_at: datetime
    imported_by: str
    superseded_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    passages: int = 0

    @property
    def ref(self) -> str:
        return document_ref(self.id)

    @property
    def state(self) -> Literal["current", "superseded", "revoked"]:
        if self.revoked_at is not None:
            return "revoked"
        return "superseded" if self.superseded_at is not None else "current"


@dataclass(frozen=True)
class PassageRecord:
    """One passage of a document version, with its evidence ``ref`` and ``uri``."""

    id: int
    document_id: str
    document_version: int
    ordinal: int
    heading_path: tuple[str, ...]
    fragment: str
    text: str
    uri: str | None
    recorded_at: datetime
    withdrawn_at: datetime | None
    withdrawn_reason: str | None

    @property
    def ref(self) -> str:
        return passage_ref(self.document_id, self.fragment)


@dataclass(frozen=True)
class DocumentDetail:
    """A document's current version, its passages (none once revoked), and every version
    it has had, oldest first."""

    document: DocumentRecord
    passages: tuple[PassageRecord, ...]
    history: tuple[DocumentRecord, ...]


def _record(row: Any, passages: int = 0) -> DocumentRecord:
    return DocumentRecord(
        id=row.id,
        version=int(row.version),
        title=row.title,
        uri=row.uri,
        readers=tuple(row.readers or ()),
        deny=tuple(row.deny or ()),
        classification=row.classification,
        purposes=tuple(row.purposes or ()),
        digest=row.digest,
        imported_at=row.imported_at,
        imported_by=row.imported_by,
        superseded_at=row.superseded_at,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
        passages=passages,
    )


def _passage(row: Any, uri: str | None) -> PassageRecord:
    return PassageRecord(
        id=int(row.id),
        document_id=row.document_id,
        document_version=int(row.document_version),
        ordinal=int(row.ordinal),
        heading_path=tuple(row.heading_path or ()),
        fragment=row.fragment,
        text=row.text,
        uri=passage_uri(uri, row.fragment),
        recorded_at=row.recorded_at,
        withdrawn_at=row.withdrawn_at,
        withdrawn_reason=row.withdrawn_reason,
    )


def _readable(actor: Actor, row: Any) -> bool:
    return actor.can_read_acl(
        acl_from_readers([row.readers or ()]),
        deny=list(row.deny or ()),
        classification=row.classification,
    )


# --- import ------------------------------------------------------------------------------


def _check_input(doc: Any, seen: set[str]) -> None:
    ident = getattr(doc, "id", None)
    name = repr(ident)
    if not isinstance(ident, str) or not ident.strip():
        raise InputError(f"document {name}: the id must be a non-empty string", document=ident)
    if any(ch.isspace() for ch in ident) or "#" in ident:
        raise InputError(
            f"document {name}: an id holds no whitespace and no '#' (it is the part of "
            "a passage's reference doc:<id>#<fragment> before the '#')",
            document=ident,
        )
    if ident in seen:
        raise InputError(f"document {name} is given twice", document=ident)
    seen.add(ident)
    text = getattr(doc, "text", None)
    if not isinstance(text, str):
        raise InputError(
            f"document {name}: the text must be a string, not {type(text).__name__}",
            document=ident,
        )
    if "\x00" in text:
        raise InputError(
            f"document {name} holds a NUL byte (\\x00) at position {text.index(chr(0))}, "
            "which PostgreSQL text cannot store",
            document=ident,
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"document {name} holds {exc.reason} at position {exc.start}", document=ident
        ) from None
    for field in ("uri", "title"):
        value = getattr(doc, field, None)
        if value is not None and not isinstance(value, str):
            raise InputError(f"document {name}: {field} must be a string", document=ident)


def _check_purposes(purposes: Sequence[str]) -> list[str]:
    out = set()
    for raw in purposes:
        p = raw.strip().lower() if isinstance(raw, str) else raw
        if not isinstance(p, str) or not _PURPOSE.match(p):
            raise InputError(
                f"purpose {raw!r}: a lower-case letter, then letters, digits, _ . or -",
                field="purposes",
                given=raw,
            )
        out.add(p)
    return sorted(out)


def _access_of(row: Any) -> tuple[tuple[str, ...], tuple[str, ...], str | None, tuple[str, ...]]:
    return (
        tuple(sorted(set(row.readers or ()))),
        tuple(sorted(set(row.deny or ()))),
        row.classification,
        tuple(sorted(set(row.purposes or ()))),
    )


def _passages_of(sections: Sequence[Section]) -> list[tuple[int, tuple[str, ...], str, str]]:
    """``(ordinal, heading path, fragment, text)`` of the sections that have a body; the
    stored text is the section's without the blank lines around it."""
    out: list[tuple[int, tuple[str, ...], str, str]] = []
    for section in sections:
        if section.empty:
            continue
        out.append((len(out), section.heading_path, section.fragment, section.text.strip("\r\n")))
    return out


def import_documents(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    now: datetime,
    documents: Sequence[DocumentInput],
    readers: Sequence[str] = (),
    deny: Sequence[str] = (),
    classification: str | None = None,
    purposes: Sequence[str] = (),
) -> ImportReport:
    """Import ``documents`` (requires ``docs``), all or nothing, in the caller's
    transaction.

    The access applies to every document given: ``readers`` (capabilities, any one of
    which reads it; empty: the whole tenant), ``deny`` entries, a ``classification``
    level, and ``purposes`` (empty: every purpose). A document whose text is that of its
    current version is ``unchanged``; a changed one is a new version, the old one's
    passages withdrawn ``superseded``; a revoked one is skipped (``revoked``). Each
    passage is registered as the evidence ``doc:<id>#<fragment>`` (once: a later
    version's passage under the same heading keeps the reference). A document's access
    is fixed at its first import: a different one is a ``Conflict`` (import it under a
    new id). Bad input is an ``InputError`` naming the document; nothing is written.
    One audit row (``docs_import``) per document imported or updated.
    """
    actor.require("docs")
    seen: set[str] = set()
    for doc in documents:
        _check_input(doc, seen)
    wanted_readers = tuple(sorted({r.strip() for r in readers}))
    if any(not r for r in wanted_readers):
        raise InputError("a reader capability must not be empty", field="readers")
    denied = tuple(parse_deny(deny))
    if classification is not None:
        check_level(classification, tenant_levels(session=session, tenant=tenant))
    wanted_purposes = tuple(_check_purposes(purposes))
    access = (wanted_readers, denied, classification, wanted_purposes)
    q.lock_documents(session=session, tenant=tenant)
    current = {
        r.id: r
        for r in q.current_documents(session=session, tenant=tenant, ids=[d.id for d in documents])
    }
    # each document to write, split once (an unchanged or revoked one is not split)
    plans: list[tuple[DocumentInput, str, Any, list[Section] | None]] = []
    for doc in documents:
        digest = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
        row = current.get(doc.id)
        live = row is not None and row.redacted_at is None and row.revoked_at is None
        if row is not None and live and _access_of(row) != access:
            raise Conflict(
                f"document {doc.id!r} was imported with other access "
                f"(readers {list(row.readers)}, deny {list(row.deny)}, classification "
                f"{row.classification}, purposes {list(row.purposes)}); a document's "
                "access is fixed at its first import: revoke it and import it under "
                "a new id",
                document=doc.id,
            )
        writes = row is None or (row.digest != digest and live)
        plans.append((doc, digest, row, split_markdown(doc.text) if writes else None))
    evidence_refs = {
        passage_ref(doc.id, frag): doc
        for doc, _, _, sections in plans
        if sections is not None
        for _, _, frag, _ in _passages_of(sections)
    }
    existing = q.evidence_access(session=session, tenant=tenant, ids=list(evidence_refs))
    for ref, ev in existing.items():
        if (tuple(sorted(ev.readers or ())), tuple(sorted(ev.deny or ())), ev.classification) != (
            wanted_readers,
            denied,
            classification,
        ):
            raise Conflict(
                f"document {evidence_refs[ref].id!r}: evidence {ref!r} is registered with "
                "other access; a passage's reference keeps the access it was first given",
                document=evidence_refs[ref].id,
                evidence=ref,
            )
    outcomes: list[DocumentOutcome] = []
    for doc, digest, row, sections in plans:
        outcomes.append(
            _import_one(session, tenant, actor, now, doc, digest, row, sections, access, existing)
        )
    return ImportReport(tuple(outcomes))


def _import_one(
    session: Session,
    tenant: str,
    actor: Actor,
    now: datetime,
    doc: DocumentInput,
    digest: str,
    row: Any,
    split: list[Section] | None,
    access: tuple[tuple[str, ...], tuple[str, ...], str | None, tuple[str, ...]],
    existing: dict[str, Any],
) -> DocumentOutcome:
    readers, deny, classification, purposes = access
    if row is not None and (row.revoked_at is not None or row.redacted_at is not None):
        return DocumentOutcome(doc.id, "revoked", int(row.version))
    if row is not None and row.digest == digest:
        return DocumentOutcome(doc.id, "unchanged", int(row.version))
    assert split is not None  # every document written was split (import_documents)
    version = 1 if row is None else int(row.version) + 1
    if row is not None:
        q.supersede_document(
            session=session, tenant=tenant, document_id=doc.id, version=row.version, at=now
        )
    sections = _passages_of(split)
    first = next((s.heading_path for s in split if s.heading_path), ())
    title = doc.title or (first[-1] if first else doc.id)
    q.insert_document(
        session=session,
        tenant=tenant,
        document_id=doc.id,
        version=version,
        title=title,
        uri=doc.uri,
        readers=readers,
        deny=deny,
        classification=classification,
        purposes=purposes,
        digest=digest,
        at=now,
        actor=actor.id,
    )
    ids = q.insert_passages(
        session=session,
        tenant=tenant,
        document_id=doc.id,
        version=version,
        rows=sections,
        acl=acl_from_readers([readers]),
        deny=deny,
        classification=classification,
        purposes=purposes,
        at=now,
    )
    registered = q.insert_evidence_rows(
        session=session,
        tenant=tenant,
        rows=[
            (passage_ref(doc.id, frag), " / ".join(path) or title, passage_uri(doc.uri, frag))
            for _, path, frag, _ in sections
            if passage_ref(doc.id, frag) not in existing
        ],
        readers=readers,
        deny=deny,
        classification=classification,
        at=now,
        actor=actor.id,
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="docs_import",
        at=now,
        detail={
            "document": doc.id,
            "version": version,
            "digest": digest,
            "passages": len(ids),
            "evidence_registered": len(registered),
            **({"superseded_version": int(row.version)} if row is not None else {}),
            **({"readers": list(readers)} if readers else {}),
            **({"deny": list(deny)} if deny else {}),
            **({"classification": classification} if classification else {}),
            **({"purposes": list(purposes)} if purposes else {}),
        },
    )
    return DocumentOutcome(
        doc.id,
        "imported" if row is None else "updated",
        version,
        tuple(ids),
        None if row is None else int(row.version),
    )


# --- reads -------------------------------------------------------------------------------


def list_documents(*, session: Session, tenant: str, actor: Actor) -> list[DocumentRecord]:
    """The current version of every document ``actor`` may read (revoked ones included,
    redacted ones never), by id, each with its number of live passages."""
    actor.require("read")
    counts = q.passage_counts(session=session, tenant=tenant)
    return [
        _record(r, counts.get((r.id, int(r.version)), 0))
        for r in q.current_documents(session=session, tenant=tenant)
        if r.redacted_at is None and _readable(actor, r)
    ]


def _visible_versions(session: Session, tenant: str, actor: Actor, document_id: str) -> list[Any]:
    rows = q.document_versions(session=session, tenant=tenant, document_id=document_id)
    if not rows or rows[-1].redacted_at is not None or not _readable(actor, rows[-1]):
        raise NotFound(f"no document {document_id!r}", document=document_id)
    return rows


def get_document(
    *, session: Session, tenant: str, actor: Actor, document_id: str
) -> DocumentDetail:
    """A document ``actor`` may read, with the passages of its current version (none
    once revoked) and its versions; ``NotFound`` otherwise (a redacted document, or one
    its access excludes ``actor`` from, is unknown)."""
    actor.require("read")
    rows = _visible_versions(session, tenant, actor, document_id)
    last = rows[-1]
    passages = [
        _passage(p, last.uri)
        for p in q.document_passages(
            session=session, tenant=tenant, document_id=document_id, version=last.version
        )
        if p.withdrawn_at is None
    ]
    return DocumentDetail(
        _record(last, len(passages)), tuple(passages), tuple(_record(r) for r in rows)
    )


# --- withdrawal --------------------------------------------------------------------------


def _reason(reason: str) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InputError("a reason is required", field="reason")
    return reason.strip()


def revoke_document(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    document_id: str,
    reason: str,
    now: datetime,
) -> DocumentRecord:
    """Revoke a document (requires ``docs``): its current version is marked revoked and
    its passages withdrawn ``revoked``; it stays listed, with its history. A later
    import of the same id is skipped. ``NotFound`` for a document ``actor`` may not read;
    ``Conflict`` when it is revoked already. Audited (``docs_revoke``)."""
    actor.require("docs")
    why = _reason(reason)
    q.lock_documents(session=session, tenant=tenant)
    last = _visible_versions(session, tenant, actor, document_id)[-1]
    if last.revoked_at is not None:
        raise Conflict(f"document {document_id!r} is revoked already", document=document_id)
    q.revoke_document(
        session=session,
        tenant=tenant,
        document_id=document_id,
        version=last.version,
        at=now,
        actor=actor.id,
    )
    withdrawn = q.withdraw_passages(
        session=session,
        tenant=tenant,
        document_id=document_id,
        version=last.version,
        reason="revoked",
        at=now,
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="docs_revoke",
        at=now,
        detail={
            "document": document_id,
            "version": int(last.version),
            "passages": withdrawn,
            "reason": why,
        },
    )
    [row] = [
        r
        for r in q.document_versions(session=session, tenant=tenant, document_id=document_id)
        if r.version == last.version
    ]
    return _record(row)


def redact_document(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    document_id: str,
    reason: str,
    now: datetime,
) -> int:
    """Redact a document (requires ``docs``): every version is marked redacted and every
    passage of every version withdrawn ``redacted``; from then on no read shows it, not
    its history either, and a later import of the id is skipped. The number of passages
    withdrawn. ``NotFound`` for a document ``actor`` may not read. Audited
    (``docs_redact``)."""
    actor.require("docs")
    why = _reason(reason)
    q.lock_documents(session=session, tenant=tenant)
    rows = _visible_versions(session, tenant, actor, document_id)
    q.redact_document(session=session, tenant=tenant, document_id=document_id, at=now)
    withdrawn = q.withdraw_passages(
        session=session,
        tenant=tenant,
        document_id=document_id,
        version=None,
        reason="redacted",
        at=now,
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="docs_redact",
        at=now,
        detail={
            "document": document_id,
            "versions": len(rows),
            "passages": withdrawn,
            "reason": why,
        },
    )
    return withdrawn
