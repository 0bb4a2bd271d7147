"""Input every door parses the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

import claims
from claims import error_path
from predicates.errors import InputError

__all__ = [
    "anchor_fields",
    "first_error",
    "instant",
    "item_writes",
    "observation_fields",
    "proposal_anchor",
    "scalar",
]


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
    """The most specific of a pydantic validation's errors as ``where: what``
    (``items[3].scope: expected "axis:id" ...``, ``query.limit: ...``): the one with the
    deepest location, the first of those; so a value of a union is refused by the member
    its shape chose (an object's out-of-range ``weight``, not "should be a string")."""
    first = max(errors, key=lambda e: len(e.get("loc", ())), default={})
    loc = tuple(first.get("loc", ()))
    if first.get("type") == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int):
        # an unparsable body: its location is a character position, not a list index
        reason = (first.get("ctx") or {}).get("error", first.get("msg", default))
        return f"body: not JSON at character {loc[1]}: {reason}"
    return f"{error_path(loc)}: {first.get('msg', default)}"


def item_writes(rows: Sequence[object], root: str = "items") -> list[claims.ItemWrite]:
    """Each row of a batch as a ``claims.ItemWrite``, all or none: the first invalid row
    is refused as ``InputError`` naming its index and field (``items[3].scope: expected
    "axis:id" (e.g. "case:INC-902"), got 'INC-1'``), so nothing of the batch is written."""
    out: list[claims.ItemWrite] = []
    for i, row in enumerate(rows):
        try:
            out.append(claims.ItemWrite.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = error_path([root, i, *first["loc"]])
            raise InputError(f"{where}: {first['msg']}", attribute=where) from exc
    return out


def proposal_anchor(case: str | None, scope: str | None) -> claims.Anchor:
    """Where a door's proposals are anchored: ``case`` (an open case's id) or ``scope``
    (``"axis:id"``), exactly one of them; ``InputError`` naming the field otherwise."""
    if (case is None) == (scope is None):
        raise InputError("give exactly one of case or scope", attribute="case")
    if case is not None:
        return claims.Anchor(axis="case", id=case)
    try:
        return claims.Anchor.model_validate(scope)
    except ValidationError as exc:
        raise InputError(f"scope: {exc.errors()[0]['msg']}", attribute="scope") from exc


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
    form = "ATTRIBUTE=VALUE" if subject is not None else "SUBJECT:ATTRIBUTE=VALUE"
    head, eq, value = text.partition("=")
    if not eq or not head or not value:
        raise InputError(f"{flag} {text!r}: expected {form}", attribute=flag)
    if subject is None:
        subject, colon, attribute = head.partition(":")
        if not colon or not subject or not attribute:
            raise InputError(f"{flag} {text!r}: expected {form}", attribute=flag)
    else:
        attribute = head
    return {"subject": subject, "attribute": attribute.strip(), "value": scalar(value)}


def anchor_fields(text: str, flag: str) -> dict[str, str]:
    """A scope anchor spelled ``AXIS:ID`` (``case:INC-1``, ``service:payment-api``) as its
    fields; ``InputError`` naming ``flag`` otherwise."""
    try:
        axis, anchor_id = claims.split_anchor(text.strip())
    except ValueError as exc:  # pydantic's custom error: ANCHOR_FORM, got ...
        raise InputError(f"{flag}: {exc}", attribute=flag) from exc
    return {"axis": axis.strip(), "id": anchor_id.strip()}
