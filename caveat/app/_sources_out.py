"""What the sources doors answer (``caveat sources ...``, ``/v1/sources``): the views'
JSON forms and their named models, in the style of ``caveat.answers`` (each model
names the fields its view sends; ``extra="allow"`` for what a newer server adds)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import factgen
from caveat.answers import _sources as out
from caveat.app._pulls import SourceReport
from caveat.app._sources import PullOutcome

__all__ = [
    "PullsOut",
    "SourcesOut",
    "SourcesStatusOut",
    "pulls_view",
    "sources_view",
    "status_view",
]


class SourcesOut(out.SourcesOut):
    """A tenant's ``sources.yaml`` as loaded: who loaded it and when, its digest, its
    text, and the validated configuration (durations in seconds)."""

    config: factgen.SourcesConfig  # type: ignore[assignment]


PullsOut = out.PullsOut
SourcesStatusOut = out.SourcesStatusOut


def sources_view(loaded: factgen.LoadedSources) -> dict[str, Any]:
    """``SourcesOut``'s JSON form."""
    return {
        "loaded_at": loaded.loaded_at.isoformat(),
        "loaded_by": loaded.loaded_by,
        "sha256": hashlib.sha256(loaded.document.encode()).hexdigest(),
        "sources": [spec.name for spec in loaded.config.sources],
        "document": loaded.document,
        "config": loaded.config.to_json(),
    }


def pulls_view(outcomes: Sequence[PullOutcome]) -> dict[str, Any]:
    """``PullsOut``'s JSON form."""
    return {
        "pulls": [
            {
                "source": o.source,
                "stored": len(o.stored),
                "refused": o.refused_by_reason,
                "error": o.error,
                "latency_ms": o.latency_ms,
            }
            for o in outcomes
        ]
    }


def status_view(reports: Sequence[SourceReport]) -> dict[str, Any]:
    """``SourcesStatusOut``'s JSON form."""
    return {"sources": [r.to_json() for r in reports]}
