"""Input every door parses the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

import claims
from claims import error_path
from predicates.errors import InputError

__all__ = ["first_error", "instant", "item_writes", "proposal_anchor"]


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
    (``items[3].scope: expected "axis:id" ...``, ``query.limit: ...``)."""
    first = errors[0] if errors else {}
    return f"{error_path(first.get('loc', ()))}: {first.get('msg', default)}"


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
