"""Tables of the lifecycle engine: cases (citations and events come with their engines)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from factgen.columns import text_array, timestamp

__all__ = ["Case"]


class Case(SQLModel, table=True):
    """One incident or agent run."""

    __tablename__ = "cases"
    tenant_id: str = Field(primary_key=True)
    id: str = Field(primary_key=True)
    subjects: list[str] = text_array()
    status: str = "open"
    outcome: str | None = None
    opened_at: datetime = timestamp(nullable=False)
    opened_by: str
    closed_at: datetime | None = timestamp(nullable=True)
    closed_by: str | None = None
