"""Tables of the lifecycle engine, all keyed by tenant and item or case id.

Items themselves (and their state) belong to claims; what the lifecycle
knows about them beyond their state lives here: citations and context
entries of cases, the shadow log, pending verify-on-next-use checks, last
use (for salience decay), skill enforcement levels, redactions and erasures.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from factgen.columns import bigint_id, jsonb, text_array, timestamp

__all__ = [
    "Case",
    "CaseContext",
    "Citation",
    "Erasure",
    "EvidenceLink",
    "ExpiryCheck",
    "ItemConfidence",
    "ItemUsage",
    "Redaction",
    "ShadowLog",
    "SkillEnforcement",
]


def _item_id(*, primary_key: bool = True) -> Any:
    return Field(sa_column=sa.Column(sa.BigInteger, primary_key=primary_key, nullable=False))


class Case(SQLModel, table=True):
    """One incident or agent run."""

    __tablename__ = "cases"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    subjects: list[str] = text_array()
    status: str = "open"
    outcome: str | None = None
    opened_at: datetime = timestamp(nullable=False)
    opened_by: str
    closed_at: datetime | None = timestamp(nullable=True)
    closed_by: str | None = None


class CaseContext(SQLModel, table=True):
    """An item that entered a case's context (by recall, by the guard, or written there)."""

    __tablename__ = "case_context"
    tenant_id: str = Field(primary_key=True)
    case_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    entered_at: datetime = timestamp(nullable=False)
    via: str


class Citation(SQLModel, table=True):
    """How an item influenced a case, and the signal the case's outcome gave it."""

    __tablename__ = "citations"
    __table_args__ = (
        sa.Index("ix_citations_item", "tenant_id", "item_id"),
        sa.Index("ix_citations_cited", "tenant_id", "cited_at", "case_id", "item_id"),
    )
    tenant_id: str = Field(primary_key=True)
    case_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    influence: str
    compliance: str
    cited_at: datetime = timestamp(nullable=False)
    cited_by: str
    signal: str | None = None
    signalled_at: datetime | None = timestamp(nullable=True)
    # what a skill expected, what was observed (both or neither), and why (0020)
    expected: Any = Field(default=None, sa_column=sa.Column(JSONB, nullable=True))
    observed: Any = Field(default=None, sa_column=sa.Column(JSONB, nullable=True))
    rationale: str | None = None


class ShadowLog(SQLModel, table=True):
    """A shadow item that passed every gate but its state in a case's recalls."""

    __tablename__ = "shadow_log"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    case_id: str = Field(primary_key=True)
    first_at: datetime = timestamp(nullable=False)
    last_at: datetime = timestamp(nullable=False)
    recalls: int = 1
    matched_recalls: int = 0
    matched: bool = False
    outcome: str | None = None
    agreed: bool | None = None
    concluded_at: datetime | None = timestamp(nullable=True)


class ExpiryCheck(SQLModel, table=True):
    """A pending verify-on-next-use check: observations made since ``since`` decide it."""

    __tablename__ = "expiry_checks"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    since: datetime = timestamp(nullable=False)
    event_id: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    cause: dict[str, Any] = jsonb("{}")


class ItemUsage(SQLModel, table=True):
    """When an item was last used (returned by a recall or cited): salience decays from it."""

    __tablename__ = "item_usage"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    last_used_at: datetime = timestamp(nullable=False)
    uses: int = 1


class SkillEnforcement(SQLModel, table=True):
    """A skill's enforcement level (``advisory`` unless an SME set one)."""

    __tablename__ = "skill_enforcement"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    level: str
    set_at: datetime = timestamp(nullable=False)
    set_by: str
    reason: str | None = None  # 0020


class Erasure(SQLModel, table=True):
    """A ``forget``: every item of a subject or an anchor, redacted at once."""

    __tablename__ = "erasures"
    tenant_id: str = Field(primary_key=True)
    id: int | None = bigint_id()
    target_axis: str
    target_id: str
    at: datetime = timestamp(nullable=False)
    actor: str
    reason: str
    items: int = 0


class Redaction(SQLModel, table=True):
    """An item hidden everywhere, history and as-of included."""

    __tablename__ = "redactions"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    at: datetime = timestamp(nullable=False)
    actor: str
    reason: str
    erasure_id: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))


class EvidenceLink(SQLModel, table=True):
    """Evidence attached to an item as supporting or refuting it (ranking only, model §6)."""

    __tablename__ = "evidence_links"
    __table_args__ = (
        sa.CheckConstraint("stance IN ('supports', 'refutes')", name="ck_evidence_links_stance"),
        sa.CheckConstraint("strength >= 0 AND strength <= 1", name="ck_evidence_links_strength"),
        sa.Index("ix_evidence_links_item", "tenant_id", "item_id", "at"),
    )
    tenant_id: str = Field(primary_key=True)
    id: int | None = Field(
        default=None, sa_column=sa.Column(sa.BigInteger, sa.Identity(), primary_key=True)
    )
    item_id: int = _item_id(primary_key=False)
    evidence_id: str
    stance: str
    strength: float
    source_kind: str
    at: datetime = timestamp(nullable=False)
    actor: str


class ItemConfidence(SQLModel, table=True):
    """An item's folded evidence score ``score`` as of ``at``; confidence is read from it
    with the decay applied (``lifecycle.confidence_at``)."""

    __tablename__ = "item_confidence"
    tenant_id: str = Field(primary_key=True)
    item_id: int = _item_id()
    score: float
    at: datetime = timestamp(nullable=False)
