"""Column helpers shared by the table classes of every package."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field

__all__ = ["bigint_id", "jsonb", "text_array", "timestamp"]


def timestamp(*, nullable: bool) -> Any:
    """A timezone-aware timestamp column."""
    return Field(
        default=None if nullable else ...,
        sa_column=sa.Column(sa.DateTime(timezone=True), nullable=nullable),
    )


def text_array() -> Any:
    """A non-null ``text[]`` column defaulting to empty."""
    return Field(
        default_factory=list,
        sa_column=sa.Column(ARRAY(sa.Text), nullable=False, server_default="{}"),
    )


def jsonb(default: str | None = None) -> Any:
    """A non-null ``jsonb`` column, with a server default when given (e.g. ``'[]'``)."""
    kw: dict[str, Any] = {}
    if default is not None:
        kw["server_default"] = sa.text(f"'{default}'::jsonb")
    return Field(sa_column=sa.Column(JSONB, nullable=False, **kw))


def bigint_id() -> Any:
    """A ``bigint`` identity primary key."""
    return Field(default=None, sa_column=sa.Column(sa.BigInteger, sa.Identity(), primary_key=True))
