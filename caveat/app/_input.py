"""Input every door parses the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from predicates.errors import InputError

__all__ = ["first_error", "instant"]


def instant(value: str | None, flag: str) -> datetime | None:
    """An ISO 8601 instant (UTC when it has no offset), or ``InputError`` naming ``flag``."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{flag}: not an ISO 8601 instant: {value!r}", attribute=flag) from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def first_error(errors: Sequence[Mapping[str, Any]], default: str = "invalid") -> str:
    """The first of a pydantic validation's errors as ``where: what``
    (``body.items.0: Input should be a valid integer``)."""
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', default)}"
