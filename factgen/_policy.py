"""Tenant policy: one typed document, stored as jsonb on the tenant row."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from factgen._classification import CLASSIFICATION_LEVELS

__all__ = ["ShadowPolicy", "TenantPolicy"]


class ShadowPolicy(BaseModel):
    """Thresholds for graduating a shadow item (model §4.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_matched_cases: int = Field(default=3, ge=0)
    min_agreement: float = Field(default=0.8, ge=0.0, le=1.0)


class TenantPolicy(BaseModel):
    """Every tenant-level knob; absent keys take these defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    writes: Literal["on", "off", "incognito"] = "on"
    shadow: ShadowPolicy = ShadowPolicy()
    permission_refusal_ttl: timedelta = timedelta(hours=1)
    entity_suffixes: tuple[str, ...] = ("prod", "production")
    topology_depth: int = Field(default=1, ge=0)
    # lifecycle (docs/lifecycle.md)
    skill_enforcement_threshold: Literal["advisory", "recommended", "required"] = "required"
    salience_half_life: timedelta = timedelta(days=30)
    episode_archive_horizon: timedelta = timedelta(days=90)
    rollup_min_episodes: int = Field(default=3, ge=2)
    # the edge (docs/sources.md, docs/hooks.md): an event dated further ahead of the
    # server's clock than this is refused (event_in_future), not stored to take
    # effect later
    event_clock_skew: timedelta = timedelta(minutes=5)
    # access control (docs/claims.md, "Access control"): the classification levels of
    # evidence and principals' clearances, lowest first; evidence without a level is at
    # the lowest one
    classification_levels: tuple[str, ...] = Field(default=CLASSIFICATION_LEVELS, min_length=1)

    @field_validator("classification_levels")
    @classmethod
    def _distinct_levels(cls, levels: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name.strip() for name in levels) or len(set(levels)) != len(levels):
            raise ValueError("classification levels must be distinct, non-empty names")
        return levels
