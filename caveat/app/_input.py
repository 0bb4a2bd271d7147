"""Input every door parses the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from predicates.errors import InputError

__all__ = ["anchor_fields", "first_error", "instant", "observation_fields", "scalar"]


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


def scalar(text: str) -> object:
    """A value as typed on a command line or in a query string: JSON where it parses as
    a JSON scalar (``20``, ``0.97``, ``true``, ``"20"``), else the text itself
    (``v15.4``, ``5m``, ``eu-west``); the schema then types it, and refuses a value of
    the wrong type."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str | int | float | bool) else text


def observation_fields(text: str, flag: str, subject: str | None = None) -> dict[str, Any]:
    """``SUBJECT:ATTRIBUTE=VALUE`` (or ``ATTRIBUTE=VALUE`` about ``subject``) as an
    observation's fields; ``InputError`` naming ``flag`` otherwise."""
    head, eq, value = text.partition("=")
    if not eq or not head or not value:
        raise InputError(f"{flag} {text!r}: expected ATTRIBUTE=VALUE", attribute=flag)
    if subject is None:
        subject, colon, attribute = head.partition(":")
        if not colon or not subject or not attribute:
            raise InputError(f"{flag} {text!r}: expected SUBJECT:ATTRIBUTE=VALUE", attribute=flag)
    else:
        attribute = head
    return {"subject": subject, "attribute": attribute.strip(), "value": scalar(value)}


def anchor_fields(text: str, flag: str) -> dict[str, str]:
    """A scope anchor spelled ``AXIS:ID`` (``case:INC-1``, ``service:payment-api``) as its
    fields; ``InputError`` naming ``flag`` otherwise."""
    axis, colon, anchor_id = text.partition(":")
    if not colon or not axis.strip() or not anchor_id.strip():
        raise InputError(f"{flag} {text!r}: expected AXIS:ID", attribute=flag)
    return {"axis": axis.strip(), "id": anchor_id.strip()}
