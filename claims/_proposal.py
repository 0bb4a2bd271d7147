"""What a writer asks for: the strict, schema-exported shape of a write."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Anchor", "ItemWrite", "Kind"]

Kind = Literal["episode", "fact", "skill"]


class Anchor(BaseModel):
    """A scope anchor ``(axis_type, axis_id)``, e.g. ``("case", "INC-1041")``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    axis: str = Field(min_length=1)
    id: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.axis}:{self.id}"


class ItemWrite(BaseModel):
    """A proposed item. Carries no authority: only the write gate creates items."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Kind
    subject: str
    attribute: str = Field(min_length=1)
    object: Any
    required: list[str] = Field(default_factory=list)
    excluded: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    derived_from: list[int] = Field(default_factory=list)
    epistemic: Literal["hypothesis", "observation"] = "observation"
    content_type: str | None = None
    scope: Anchor
    facets: list[Anchor] = Field(default_factory=list)
    purposes: list[str] = Field(default_factory=list)
    text: str | None = None
    entities: list[str] = Field(default_factory=list)
    salience: float = Field(default=0.5, ge=0.0, le=1.0)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    version: int | None = Field(default=None, ge=1)
