"""What the registry and rollup doors answer (``caveat registry ...``, ``caveat rollup``,
``/v1/registry``, ``/v1/rollup``): the views' JSON forms and their named models, in the
style of ``caveat.app._answers``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field

import claims
import lifecycle
from caveat.app._answers import Answer, Instant
from caveat.app._rollup import RegistryShown

__all__ = [
    "AxisOut",
    "ContentTypeOut",
    "RegistryOut",
    "RollupOut",
    "RollupsOut",
    "registry_view",
    "rollups_view",
]


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
    item: claims.ItemWrite = Field(description="The write sent through the gate (POST /v1/items).")
    item_id: int | None = Field(description="The item written; None in a preview or refused.")
    refused: str | None = Field(description="The gate's reason code when it refused.")
    message: str | None


class RollupsOut(Answer):
    dry_run: bool
    rollups: list[RollupOut]


def registry_view(shown: RegistryShown) -> dict[str, Any]:
    """``RegistryOut``'s JSON form."""
    loaded = shown.loaded
    return {
        "axes": [
            {
                "name": a.name,
                "agent_writable": a.agent_writable,
                "entity": a.entity,
                "fixed_id": a.fixed_id,
                "builtin": a.builtin,
            }
            for a in shown.axes
        ],
        "content_types": [
            {
                "name": c.name,
                "triggers": list(c.triggers),
                "reach": c.reach,
                "ttl_seconds": None if c.ttl is None else c.ttl.total_seconds(),
                "builtin": c.builtin,
            }
            for c in shown.content_types
        ],
        "loaded_at": None if loaded is None else loaded.loaded_at.isoformat(),
        "loaded_by": None if loaded is None else loaded.loaded_by,
        "sha256": None if loaded is None else hashlib.sha256(loaded.document.encode()).hexdigest(),
        "document": None if loaded is None else loaded.document,
    }


def _request(request: claims.ItemWrite | None) -> dict[str, Any]:
    return {} if request is None else request.model_dump(mode="json", exclude_none=True)


def rollups_view(
    done: Sequence[lifecycle.Rollup | lifecycle.RollupPlan], *, dry_run: bool
) -> dict[str, Any]:
    """``RollupsOut``'s JSON form, of a preview's plans or a rollup's outcomes."""
    out = []
    for r in done:
        done_ = r if isinstance(r, lifecycle.Rollup) else None
        out.append(
            {
                "episodes": list(r.episodes),
                "signature": list(r.signature),
                "item": _request(r.request),
                "item_id": None if done_ is None else done_.item_id,
                "refused": None if done_ is None else done_.refused,
                "message": None if done_ is None else done_.message,
            }
        )
    return {"dry_run": dry_run, "rollups": out}
