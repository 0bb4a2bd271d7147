"""What the service's other routes answer: a hook delivery (``/v1/hooks/{kind}``),
the transitions (``/v1/transitions``) and the index (``GET /``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HookFactOut(_Out):
    subject: str
    attribute: str


class HookSkippedOut(_Out):
    subject: str
    attribute: str
    code: str


class HookDoneOut(_Out):
    """One thing a delivery did: ``open_case``, ``join_case``, ``observe``, ``event``,
    ``close_case``, ``awaiting_outcome`` or ``ignored``, with what it touched."""

    action: str
    case: str | None = None
    subjects: list[str] | None = None
    status: str | None = None
    facts: list[HookFactOut] | None = None
    skipped: list[HookSkippedOut] | None = None
    event: int | None = None
    type: str | None = None
    affected: list[int] | None = None
    outcome: str | None = None
    reason: str | None = None


class DeliveryOut(_Out):
    """What a delivery did; a repeat of a delivery id answers the first time's, with
    ``duplicate`` true."""

    kind: str
    delivery_id: str | None
    duplicate: bool
    done: list[HookDoneOut]


class TransitionOut(BaseModel):
    """One state transition of an item, from its audit row."""

    seq: int = Field(description="The audit row's chain position.")
    at: datetime
    item: int
    subject: str
    attribute: str
    from_: str | None = Field(alias="from", description="The state before (null: new).")
    to: str = Field(description="The state after.")
    actor: str
    reason: str | None
    cause: dict[str, JsonValue] = Field(description="What caused it (an event, a case, a check).")


class ServiceLinks(BaseModel):
    """Where things are on this server (paths on it)."""

    openapi: str = Field(description="The OpenAPI document of the HTTP API.")
    docs: str | None = Field(description="Its interactive documentation (null: disabled).")
    v1: list[str] = Field(description="Every path of the HTTP API (as in its OpenAPI), sorted.")
    mcp: str = Field(description="The MCP tools over streamable HTTP (same tokens).")
    ui: str = Field(description="The SME review pages.")
    metrics: str = Field(description="Prometheus metrics (no token).")
    healthz: str = Field(description="Liveness and the database's answer (no token).")


class ServiceIndex(BaseModel):
    """The answer of ``GET /`` to an API client."""

    service: str = Field(description="Always `caveat`.")
    version: str = Field(description="The installed caveat's version.")
    links: ServiceLinks
