"""What the registry and rollup doors answer (``caveat registry ...``, ``caveat rollup``,
``/v1/registry``, ``/v1/rollup``): the views' JSON forms and their named models, in the
style of ``caveat.answers``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field

import claims
import lifecycle
from caveat.answers import _rollup as out
from caveat.app._rollup import RegistryShown

__all__ = [
    "RegistryOut",
    "RollupOut",
    "RollupsOut",
    "registry_view",
    "rollups_view",
]


RegistryOut = out.RegistryOut


class RollupOut(out.RollupOut):
    """One cluster of episodes and the item it becomes (a preview) or became."""

    item: claims.ItemWrite = Field(  # type: ignore[assignment]
        description="The write sent through the gate (POST /v1/items)."
    )


class RollupsOut(out.RollupsOut):
    rollups: list[RollupOut]  # type: ignore[assignment]


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
