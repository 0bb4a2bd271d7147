"""What the registry and rollup doors answer (``/v1/registry``, ``/v1/rollup``): a
rollup's ``item`` is the write as JSON here; the server's subclass
(``caveat.app._rollup_out``) types it with ``claims.ItemWrite``."""

from __future__ import annotations

from pydantic import Field, JsonValue

from caveat.answers._answers import Answer, Instant


class AxisOut(Answer):
    name: str
    agent_writable: bool
    entity: bool = Field(description="Anchor ids name entities, resolved through the aliases.")
    fixed_id: str | None
    builtin: bool


class ContentTypeOut(Answer):
    name: str
    triggers: list[str] = Field(description="The event types that re-open its items.")
    reach: str | None = Field(description="subject, dependents or principal; None: no trigger.")
    ttl_seconds: float | None = Field(description="Its secondary TTL; None: none.")
    builtin: bool


class RegistryOut(Answer):
    """The axes and content types every door uses for the tenant, and its last load."""

    axes: list[AxisOut]
    content_types: list[ContentTypeOut]
    loaded_at: Instant | None
    loaded_by: str | None
    sha256: str | None = Field(description="SHA-256 of the text as loaded (in its audit row).")
    document: str | None


class RollupOut(Answer):
    """One cluster of episodes and the item it becomes (a preview) or became."""

    episodes: list[int]
    signature: list[str] = Field(description="The words at least half the episodes share.")
    item: dict[str, JsonValue] = Field(
        description="The write sent through the gate (POST /v1/items)."
    )
    item_id: int | None = Field(description="The item written; None in a preview or refused.")
    refused: str | None = Field(description="The gate's reason code when it refused.")
    message: str | None


class RollupsOut(Answer):
    dry_run: bool
    rollups: list[RollupOut]
