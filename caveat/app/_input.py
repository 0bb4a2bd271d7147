"""Input every door parses the same way."""

from __future__ import annotations

from datetime import UTC, datetime

from predicates.errors import InputError

__all__ = ["instant"]


def instant(value: str | None, flag: str) -> datetime | None:
    """An ISO 8601 instant (UTC when it has no offset), or ``InputError`` naming ``flag``."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{flag}: not an ISO 8601 instant: {value!r}", attribute=flag) from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
