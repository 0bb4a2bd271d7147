"""Tables of the claim store: principals, evidence, items and their states, lineage, audit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlmodel import Field, SQLModel

from factgen.columns import bigint_id, jsonb, text_array, timestamp

__all__ = [
    "AgentTurnRow",
    "ApiToken",
    "AuditEntry",
    "Document",
    "Evidence",
    "Item",
    "ItemAncestry",
    "ItemPassageRef",
    "ItemState",
    "Passage",
    "Principal",
    "TenantRegistry",
]


class Principal(SQLModel, table=True):
    """Who acts: a role (agent, sme, admin) and opaque capabilities."""

    __tablename__ = "principals"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    role: str
    capabilities: list[str] = text_array()
    #: The highest classification level it may read (docs/claims.md, "Access control").
    clearance: str = Field(
        default="internal", sa_column=sa.Column(sa.Text, nullable=False, server_default="internal")
    )
    #: Its team (recall's default ``team:<id>`` anchor, docs/retrieval.md); None: none.
    team: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))


class ApiToken(SQLModel, table=True):
    """An API token of a tenant's principal: the secret's SHA-256, never the secret."""

    __tablename__ = "api_tokens"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    principal: str
    capabilities: list[str] = text_array()
    secret_sha256: str
    created_at: datetime = timestamp(nullable=False)
    created_by: str
    revoked_at: datetime | None = timestamp(nullable=True)
    revoked_by: str | None = None
    #: A clearance below its principal's; None: the principal's.
    clearance: str | None = None


class Evidence(SQLModel, table=True):
    """An evidence source; ``readers`` empty means tenant-readable."""

    __tablename__ = "evidence"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    title: str | None = None
    uri: str | None = None
    readers: list[str] = text_array()
    recorded_at: datetime = timestamp(nullable=False)
    recorded_by: str
    #: For a test run of a skill: ``passed`` or ``failed``; None for other evidence.
    test_outcome: str | None = None
    #: ``principal:<id>`` / ``cap:<capability>`` entries that may never read it.
    deny: list[str] = text_array()
    #: A level of the tenant's ``classification_levels``; None: the lowest.
    classification: str | None = None


class ItemPassageRef(SQLModel, table=True):
    """An evidence id naming a knowledge passage (``doc:<document>#<fragment>``) that an
    item cites: filled by a trigger on every insert into ``items`` (migration 0028), so
    a passage finds the items citing it by an index row-level security lets the planner
    use (the array operators on ``items.evidence`` are not leakproof)."""

    __tablename__ = "item_passage_refs"
    tenant_id: str = Field(primary_key=True)
    ref: str = Field(primary_key=True)
    item_id: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))


class Item(SQLModel, table=True):
    """One claim (model.md §1). Rows are never updated in content; the lifecycle
    state lives in ``item_states`` and the closure of ``derived_from`` in
    ``item_ancestry``.

    ``evidence_key`` is the key's discriminator: an episode's sorted evidence,
    a skill's version (``v3``), else empty. At most one version of a skill is
    released (``uq_items_released_skill``).
    """

    __tablename__ = "items"
    __table_args__ = (
        sa.Index(
            "uq_items_current_key",
            "tenant_id",
            "scope_axis",
            "scope_id",
            "subject",
            "attribute",
            "kind",
            "cond_key",
            "evidence_key",
            unique=True,
            postgresql_where=sa.text("superseded_at IS NULL"),
        ),
        sa.Index(
            "uq_items_released_skill",
            "tenant_id",
            "scope_axis",
            "scope_id",
            "subject",
            "attribute",
            "cond_key",
            unique=True,
            postgresql_where=sa.text(
                "kind = 'skill' AND release_state = 'released' AND superseded_at IS NULL"
            ),
        ),
        sa.Index(
            "ix_items_current_digest",
            "key_digest",
            postgresql_where=sa.text("superseded_at IS NULL"),
        ),
        # the core blocks a recall packs first (migration 0030)
        sa.Index(
            "ix_items_current_blocks",
            "tenant_id",
            "scope_axis",
            "scope_id",
            "attribute",
            postgresql_where=sa.text("kind = 'block' AND superseded_at IS NULL"),
        ),
        sa.Index("ix_items_tenant_subject", "tenant_id", "subject"),
        sa.Index(
            "ix_items_current_recent",
            "tenant_id",
            sa.text("recorded_at DESC"),
            "id",
            postgresql_where=sa.text("superseded_at IS NULL"),
        ),
        sa.Index("ix_items_fts", "fts", postgresql_using="gin"),
    )
    tenant_id: str = Field(primary_key=True)
    id: int | None = bigint_id()
    kind: str
    subject: str
    attribute: str
    object: Any = jsonb()
    required: list[str] = text_array()
    excluded: list[str] = text_array()
    conditions: dict[str, Any] = jsonb()
    cond_key: str
    evidence: list[str] = text_array()
    evidence_key: str = ""
    derived_from: list[int] = Field(
        default_factory=list,
        sa_column=sa.Column(ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
    )
    epistemic: str
    content_type: str | None = None
    scope_axis: str
    scope_id: str
    facets: list[dict[str, str]] = jsonb("[]")
    purposes: list[str] = text_array()
    acl: list[list[str]] = jsonb("[]")
    #: The union of its evidence's deny lists, and the strictest of their levels.
    deny: list[str] = text_array()
    classification: str | None = None
    text: str | None = None
    entities: list[str] = text_array()
    salience: float = 0.5
    valid_from: datetime = timestamp(nullable=False)
    valid_to: datetime | None = timestamp(nullable=True)
    recorded_at: datetime = timestamp(nullable=False)
    superseded_at: datetime | None = timestamp(nullable=True)
    superseded_by: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    verified_by: str | None = None
    verified_at: datetime | None = timestamp(nullable=True)
    version: int | None = None
    release_state: str | None = None
    created_by: str
    #: A skill's test: the evidence id of a passing run of the procedure.
    test_evidence: str | None = None
    #: md5 of the tenant and the supersession key: the write path's lookup.
    #: Filled on insert by the ``items_derived`` trigger (migration 0005), as is
    #: ``fts``; ``claims._queries.key_digest`` computes the same in Python.
    key_digest: str | None = None
    #: The full-text vector of text, subject and attribute (filled on insert).
    fts: Any = Field(default=None, sa_column=sa.Column(TSVECTOR))


class ItemState(SQLModel, table=True):
    """The current lifecycle state of one item (migration 0007): a narrow row, so a
    move of many items rewrites 40 bytes each instead of the whole item.

    ``previous`` is the state the last transition came from: a move sets
    ``previous = state`` and returns it. The history of transitions is the
    item's ``transition`` rows in the audit log.
    """

    __tablename__ = "item_states"
    tenant_id: str = Field(primary_key=True)
    item_id: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))
    state: str
    previous: str | None = None


class ItemAncestry(SQLModel, table=True):
    """One (ancestor, descendant) pair of the transitive closure of ``derived_from``,
    filled by the ``items_ancestry`` trigger when the descendant is inserted: an
    item's descendants are one range scan of the key."""

    __tablename__ = "item_ancestry"
    tenant_id: str = Field(primary_key=True)
    ancestor_id: int = Field(
        sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False)
    )
    descendant_id: int = Field(
        sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False)
    )


class AuditEntry(SQLModel, table=True):
    """One append-only, hash-chained audit row, keyed by its place in the tenant's chain.

    The ``transition`` rows are the items' state history (from, to, reason and
    cause in ``detail``), read through ``ix_audit_log_transitions``; the
    ``release``/``retire`` and ``verify`` rows are the history of a skill's
    release state and of an item's verification, read through
    ``ix_audit_log_item_history`` (migration 0009).
    """

    __tablename__ = "audit_log"
    __table_args__ = (
        sa.Index(
            "ix_audit_log_transitions",
            "tenant_id",
            "item_id",
            "at",
            "seq",
            postgresql_where=sa.text("action = 'transition'"),
        ),
        sa.Index(
            "ix_audit_log_item_history",
            "tenant_id",
            "item_id",
            "at",
            "seq",
            postgresql_where=sa.text("action IN ('release', 'retire', 'verify')"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))
    at: datetime = timestamp(nullable=False)
    actor: str
    action: str
    item_id: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    code: str | None = None
    #: The erasable part of the row (reasons, rationales, requests, objects): NULL once
    #: an erasure (``forget``) removed it. The chain hashes ``detail_digest`` instead
    #: (migration 0023), so the row still verifies.
    detail: dict[str, Any] | None = Field(
        default=None,
        sa_column=sa.Column(JSONB, nullable=True, server_default=sa.text("'{}'::jsonb")),
    )
    #: SHA-256 of the detail's canonical JSON (``claims.detail_digest``), kept when the
    #: detail is erased.
    detail_digest: str
    prev_hash: str
    hash: str


class TenantRegistry(SQLModel, table=True):
    """A tenant's loaded registry (migration 0022): its text and validated declarations."""

    __tablename__ = "tenant_registry"
    tenant_id: str = Field(primary_key=True)
    document: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    declared: dict[str, Any] = jsonb()
    loaded_at: datetime = timestamp(nullable=False)
    loaded_by: str


class MemorySession(SQLModel, table=True):
    """Who owns a working-memory session (migration 0024): the principal that first
    wrote to its ``("session", id)`` anchor, and when."""

    __tablename__ = "memory_sessions"
    tenant_id: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    principal: str
    claimed_at: datetime = timestamp(nullable=False)


class Document(SQLModel, table=True):
    """One imported version of a document (migration 0027; model §6 "Knowledge beside
    memory"): a runbook or a postmortem, read like an evidence source (``readers``,
    ``deny``, ``classification``) and for ``purposes`` like an item. A changed text is a
    new version; the old one is ``superseded_at``. ``revoked_at`` / ``redacted_at``
    withdraw it and its passages."""

    __tablename__ = "documents"
    __table_args__ = (
        sa.Index(
            "uq_documents_current",
            "tenant_id",
            "id",
            unique=True,
            postgresql_where=sa.text("superseded_at IS NULL"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    title: str | None = None
    uri: str | None = None
    readers: list[str] = text_array()
    deny: list[str] = text_array()
    classification: str | None = None
    purposes: list[str] = text_array()
    #: sha256 of the imported text: the same text again is no new version.
    digest: str
    imported_at: datetime = timestamp(nullable=False)
    imported_by: str
    superseded_at: datetime | None = timestamp(nullable=True)
    revoked_at: datetime | None = timestamp(nullable=True)
    revoked_by: str | None = None
    redacted_at: datetime | None = timestamp(nullable=True)


class Passage(SQLModel, table=True):
    """One section of a document version, split at its headings (migration 0027), with
    the access of its document. ``fts`` is filled by the insert; ``withdrawn_at`` and
    ``withdrawn_reason`` (``superseded``, ``revoked``, ``redacted``) end it."""

    __tablename__ = "passages"
    __table_args__ = (
        sa.UniqueConstraint(
            "tenant_id", "document_id", "document_version", "fragment", name="uq_passages_fragment"
        ),
        sa.Index("ix_passages_fts", "fts", postgresql_using="gin"),
        sa.Index(
            "ix_passages_current",
            "tenant_id",
            "document_id",
            postgresql_where=sa.text("withdrawn_at IS NULL"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    id: int | None = bigint_id()
    document_id: str
    document_version: int
    ordinal: int
    heading_path: list[str] = text_array()
    #: The heading path's anchor slug, unique within the document version.
    fragment: str
    text: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    acl: list[list[str]] = jsonb("[]")
    deny: list[str] = text_array()
    classification: str | None = None
    purposes: list[str] = text_array()
    fts: Any = Field(sa_column=sa.Column(TSVECTOR, nullable=False))
    recorded_at: datetime = timestamp(nullable=False)
    withdrawn_at: datetime | None = timestamp(nullable=True)
    withdrawn_reason: str | None = None


class AgentTurnRow(SQLModel, table=True):
    """An agent turn waiting for, or done with, the server-side extractor (migration
    0031; docs/proposals.md, "The server-side extractor"): who submitted it, the turn as
    given, its state (``queued``, ``done``, ``failed``), attempts, when it is next due,
    the last error and the outcomes of its proposals."""

    __tablename__ = "agent_turns"
    __table_args__ = (
        sa.CheckConstraint("state IN ('queued', 'done', 'failed')", name="ck_agent_turns_state"),
        sa.Index(
            "ix_agent_turns_due",
            "tenant_id",
            "next_attempt_at",
            postgresql_where=sa.text("state = 'queued'"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    turn_id: str = Field(primary_key=True)
    principal: str
    actor: dict[str, Any] = jsonb()
    turn: dict[str, Any] = jsonb()
    digest: str
    state: str
    attempts: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    next_attempt_at: datetime = timestamp(nullable=False)
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    outcomes: list[Any] | None = Field(default=None, sa_column=sa.Column(JSONB))
    submitted_at: datetime = timestamp(nullable=False)
    updated_at: datetime = timestamp(nullable=False)
    done_at: datetime | None = timestamp(nullable=True)
