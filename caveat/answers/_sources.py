"""What the sources doors answer (``/v1/sources``): ``config`` is the validated
configuration as JSON here; the server's subclass (``caveat.app._sources_out``) types it
with ``factgen.SourcesConfig`` for its OpenAPI document."""

from __future__ import annotations

from pydantic import Field, JsonValue

from caveat.answers._answers import Answer, Instant


class SourcesOut(Answer):
    """A tenant's ``sources.yaml`` as loaded: who loaded it and when, its digest, its
    text, and the validated configuration (durations in seconds)."""

    loaded_at: Instant
    loaded_by: str
    sha256: str = Field(description="SHA-256 of the text as loaded (also in its audit row).")
    sources: list[str] = Field(description="The declared sources' names, in the file's order.")
    document: str
    config: dict[str, JsonValue]


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
