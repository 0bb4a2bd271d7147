"""What the sources doors answer (``caveat sources ...``, ``/v1/sources``): the views'
JSON forms and their named models, in the style of ``caveat.app._answers`` (each model
names the fields its view sends; ``extra="allow"`` for what a newer server adds)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field

import factgen
from caveat.app._answers import Answer, Instant
from caveat.app._pulls import SourceReport
from caveat.app._sources import PullOutcome

__all__ = [
    "PullOut",
    "PullsOut",
    "SourceStatusOut",
    "SourcesOut",
    "SourcesStatusOut",
    "pulls_view",
    "sources_view",
    "status_view",
]


class SourcesOut(Answer):
    """A tenant's ``sources.yaml`` as loaded: who loaded it and when, its digest, its
    text, and the validated configuration (durations in seconds)."""

    loaded_at: Instant
    loaded_by: str
    sha256: str = Field(description="SHA-256 of the text as loaded (also in its audit row).")
    sources: list[str] = Field(description="The declared sources' names, in the file's order.")
    document: str
    config: factgen.SourcesConfig


class PullOut(Answer):
    """One pull of one source: samples stored, refused by reason code, its error."""

    source: str
    stored: int
    refused: dict[str, int]
    error: str | None
    latency_ms: float


class PullsOut(Answer):
    pulls: list[PullOut]


class SourceStatusOut(Answer):
    """What a source's pulls did so far, and when it is next pulled."""

    source: str
    kind: str | None
    declared: bool = Field(description="False: pulled before, no longer in sources.yaml.")
    every_seconds: float | None
    pulls: int
    last_pull_at: Instant | None
    last_ok_at: Instant | None
    samples_stored: int
    refused: dict[str, int] = Field(description="Samples refused, by reason code.")
    errors: int
    last_error: str | None
    last_error_at: Instant | None
    consecutive_failures: int
    last_latency_ms: float | None
    scheduled: bool = Field(description="The source has `every`: caveat serve pulls it.")
    next_pull_at: Instant | None = Field(
        description="When caveat serve pulls it next (jittered, backed off after errors)."
    )
    due: bool


class SourcesStatusOut(Answer):
    sources: list[SourceStatusOut]


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
