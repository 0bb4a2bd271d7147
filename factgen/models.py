"""Tables of the typed world model (the schema itself is owned by migrations)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

from factgen.columns import bigint_id, jsonb, text_array, timestamp

__all__ = [
    "Entity",
    "EntityAlias",
    "EntityEdge",
    "EventRecord",
    "Fact",
    "FactAttribute",
    "FactCurrent",
    "FactSources",
    "HookDelivery",
    "SourceStatus",
    "Tenant",
    "TenantPolicyVersion",
]


class Tenant(SQLModel, table=True):
    """A tenant and its policy (shadow thresholds, write policy, TTLs)."""

    __tablename__ = "tenants"
    id: str = Field(primary_key=True)
    policy: dict[str, Any] = jsonb("{}")
    created_at: datetime = timestamp(nullable=False)
    audit_seq: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    audit_hash: str | None = None
    world_version: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    #: Moved by every withdrawing change, in its transaction (migration 0015): a replica
    #: whose copy has the primary's value has replayed the tenant's latest withdrawal.
    withdrawal_horizon: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    #: Moved by every change of the tenant's principals or tokens (migration 0029): a
    #: cached token's actor is used while it is unchanged (``claims.TokenCache``).
    credentials_version: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )


class TenantPolicyVersion(SQLModel, table=True):
    """One version of a tenant's policy (migration 0019): the whole document, when and by
    whom it was set; ``tenants.policy`` is the newest."""

    __tablename__ = "tenant_policy_versions"
    __table_args__ = (
        sa.Index("tenant_policy_versions_at", "tenant_id", "set_at"),
        sa.CheckConstraint("version >= 1", name="tenant_policy_versions_from_one"),
    )
    tenant_id: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    policy: dict[str, Any] = jsonb()
    set_at: datetime = timestamp(nullable=False)
    set_by: str


class FactAttribute(SQLModel, table=True):
    """One declared fact attribute: type, unit, max_age, content type."""

    __tablename__ = "fact_schema"
    tenant_id: str = Field(primary_key=True)
    attribute: str = Field(primary_key=True)
    type: str
    unit: str | None = None
    max_age: timedelta | None = Field(default=None, sa_column=sa.Column(sa.Interval))
    content_type: str | None = None


class Entity(SQLModel, table=True):
    """A canonical entity."""

    __tablename__ = "entities"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    kind: str


class EntityAlias(SQLModel, table=True):
    """A normalised alias of an entity (the canonical id is an alias of itself)."""

    __tablename__ = "entity_aliases"
    tenant_id: str = Field(primary_key=True)
    alias: str = Field(primary_key=True)
    entity_id: str


class EntityEdge(SQLModel, table=True):
    """A topology edge: ``src -relation-> dst``."""

    __tablename__ = "entity_edges"
    tenant_id: str = Field(primary_key=True)
    src: str = Field(primary_key=True)
    relation: str = Field(primary_key=True)
    dst: str = Field(primary_key=True)


class Fact(SQLModel, table=True):
    """A typed, timestamped observation (bi-temporal: observed_at / recorded_at)."""

    __tablename__ = "facts"
    __table_args__ = (
        sa.Index(
            "ix_facts_lookup",
            "tenant_id",
            "subject",
            "attribute",
            sa.text("observed_at DESC"),
        ),
    )
    tenant_id: str = Field(primary_key=True)
    id: int | None = bigint_id()
    subject: str
    attribute: str
    value: dict[str, Any] = jsonb()
    observed_at: datetime = timestamp(nullable=False)
    recorded_at: datetime = timestamp(nullable=False)
    source: str | None = None
    #: where a pulled fact came from: source, query or pointer, sample time (0017)
    provenance: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(JSONB))


class FactCurrent(SQLModel, table=True):
    """The latest observation of each (tenant, subject, attribute), kept by a trigger on
    ``facts`` (migration 0008): what a live recall reads, one probe per condition."""

    __tablename__ = "facts_current"
    tenant_id: str = Field(primary_key=True)
    subject: str = Field(primary_key=True)
    attribute: str = Field(primary_key=True)
    fact_id: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    value: dict[str, Any] = jsonb()
    observed_at: datetime = timestamp(nullable=False)
    recorded_at: datetime = timestamp(nullable=False)
    source: str | None = None
    provenance: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(JSONB))


class EventRecord(SQLModel, table=True):
    """A deploy, config-change, version-change or authorisation event (model §4.3).

    ``external_id`` is the producer's id (CloudEvents ``id``), unique per
    tenant when given; ``changes`` maps attributes to encoded typed values.
    """

    __tablename__ = "events"
    __table_args__ = (
        sa.Index(
            "uq_events_external_id",
            "tenant_id",
            "external_id",
            unique=True,
            postgresql_where=sa.text("external_id IS NOT NULL"),
        ),
        sa.Index("ix_events_tenant_occurred", "tenant_id", "occurred_at"),
        sa.Index("ix_events_subjects", "subjects", postgresql_using="gin"),
    )
    tenant_id: str = Field(primary_key=True)
    id: int | None = bigint_id()
    external_id: str | None = None
    type: str
    subjects: list[str] = text_array()
    changes: dict[str, Any] = jsonb("{}")
    principal: str | None = None
    occurred_at: datetime = timestamp(nullable=False)
    recorded_at: datetime = timestamp(nullable=False)
    source: str | None = None


class FactSources(SQLModel, table=True):
    """A tenant's loaded ``sources.yaml`` (model §2.1): its text and validated config."""

    __tablename__ = "fact_sources"
    tenant_id: str = Field(primary_key=True)
    document: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    config: dict[str, Any] = jsonb()
    loaded_at: datetime = timestamp(nullable=False)
    loaded_by: str


class SourceStatus(SQLModel, table=True):
    """What a fact source's pulls did: counts, the last error, latency, back-off."""

    __tablename__ = "source_status"
    tenant_id: str = Field(primary_key=True)
    source: str = Field(primary_key=True)
    pulls: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    last_pull_at: datetime | None = timestamp(nullable=True)
    last_ok_at: datetime | None = timestamp(nullable=True)
    samples_stored: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    refused: dict[str, Any] = jsonb("{}")
    errors: int = Field(
        default=0, sa_column=sa.Column(sa.BigInteger, nullable=False, server_default="0")
    )
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    last_error_at: datetime | None = timestamp(nullable=True)
    consecutive_failures: int = Field(
        default=0, sa_column=sa.Column(sa.Integer, nullable=False, server_default="0")
    )
    last_latency_ms: float | None = None


class HookDelivery(SQLModel, table=True):
    """A hook delivery acted on once (model §2.2): the sender's id and what it did."""

    __tablename__ = "hook_deliveries"
    tenant_id: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)
    delivery_id: str = Field(primary_key=True)
    received_at: datetime = timestamp(nullable=False)
    outcome: dict[str, Any] = jsonb("{}")
