"""The one error tree of caveat.

Every refusal anywhere in caveat is a ``CaveatError`` carrying a stable
``code`` (model.md §3.2 and §8), the same on every surface. The tree lives in
the leftmost package so that every layer can raise from it without importing
to its right; ``caveat.errors`` re-exports it for the delivery surfaces::

    CaveatError                      code
    ├── InputError                   (bad input: usage, files, documents)
    │   ├── PredicateSyntaxError     condition_unparsable (line, column, caret)
    │   ├── PredicateTypeError       condition_type_mismatch / condition_unknown_attribute
    │   ├── ValueTypeError           fact_type_mismatch (attribute, expected type, value)
    │   ├── UnknownAttribute         fact_unknown_attribute
    │   ├── DocumentError            document_invalid (source, line, column)
    │   ├── ScenarioError            scenario_invalid (file, line, column)
    │   └── EventInFuture            event_in_future (dated beyond the clock-skew tolerance)
    ├── SubjectUnresolved            subject_unresolved (ranked suggestions)
    ├── GateRejection                a write-gate reason code, with gate G1..G4
    ├── NotFound                     not_found
    ├── Conflict                     conflict
    ├── Forbidden                    forbidden
    ├── Unauthenticated              unauthenticated (no, a malformed, unknown or revoked token)
    ├── IllegalTransition            illegal_transition
    ├── PromotionNeedsConditions     promotion_needs_conditions
    ├── CaseNotOpen                  case_not_open
    │   (raised from the packages that own them, same root:)
    ├── claims.SkillTestRequired     skill_test_required (release without a passing test)
    ├── lifecycle.NotInContext       not_in_context (citing what the case never saw)
    └── caveat.db.DatabaseError      database_unavailable

Library errors (Lark, psycopg, YAML) are translated at the boundary with
``raise ... from exc``; nothing else leaves a public function.
"""

from __future__ import annotations

import reprlib
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "CaseNotOpen",
    "CaveatError",
    "Conflict",
    "DocumentError",
    "EventInFuture",
    "Forbidden",
    "GateRejection",
    "IllegalTransition",
    "InputError",
    "NotFound",
    "PredicateSyntaxError",
    "PredicateTypeError",
    "PromotionNeedsConditions",
    "ScenarioError",
    "SubjectUnresolved",
    "Unauthenticated",
    "UnknownAttribute",
    "ValueTypeError",
    "nul_location",
    "nul_path",
    "shown",
]


class CaveatError(Exception):
    """Root of every error caveat raises on purpose; ``code`` is stable."""

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.detail: dict[str, Any] = detail

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready rendering: code, message and detail."""
        return {"code": self.code, "message": self.message, **self.detail}


class InputError(CaveatError):
    """Malformed input: a usage error, a bad file or document."""

    code = "invalid_input"


class PredicateSyntaxError(InputError):
    """A condition that does not parse; says where, with a caret."""

    code = "condition_unparsable"

    def __init__(
        self,
        message: str,
        *,
        text: str,
        line: int,
        column: int,
        expected: list[str] | None = None,
    ) -> None:
        super().__init__(
            message, text=text, line=line, column=column, expected=sorted(expected or [])
        )
        self.text = text
        self.line = line
        self.column = column
        self.expected = sorted(expected or [])

    def caret(self) -> str:
        """The offending line with a caret under the column."""
        lines = self.text.splitlines() or [""]
        src = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        return f"{src}\n{' ' * max(self.column - 1, 0)}^"

    def __str__(self) -> str:
        return f"{self.message} at line {self.line}, column {self.column}\n{self.caret()}"


class PredicateTypeError(InputError):
    """A condition that parses but does not type-check against the schema."""

    code = "condition_type_mismatch"


class ValueTypeError(InputError):
    """A value that does not have the declared type."""

    code = "fact_type_mismatch"


class UnknownAttribute(InputError):
    """An attribute the schema does not declare."""

    code = "fact_unknown_attribute"


class DocumentError(InputError):
    """A malformed input document (YAML, JSON, exposition text); says where.

    ``line`` and ``column`` are 1-based, ``None`` when unknown; ``source``
    names the document (a file name, or ``<schema>`` and the like).
    """

    code = "document_invalid"

    def __init__(
        self,
        message: str,
        *,
        source: str = "<input>",
        line: int | None = None,
        column: int | None = None,
        **detail: Any,
    ) -> None:
        super().__init__(message, source=source, line=line, column=column, **detail)
        self.source = source
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


class ScenarioError(InputError):
    """A malformed scenario file; says file, line and column."""

    code = "scenario_invalid"


class EventInFuture(InputError):
    """An event dated further ahead of the clock than the tenant's ``event_clock_skew``:
    refused, not stored to take effect later (docs/hooks.md, "The clock-skew rule")."""

    code = "event_in_future"

    @classmethod
    def check(cls, what: str, at: datetime, *, now: datetime, skew: timedelta, cause: str) -> None:
        """Raise one when ``what``, dated ``at``, is more than ``skew`` ahead of ``now``:
        the message names both times, the tolerance and ``cause`` (what is wrong)."""
        if at > now + skew:
            raise cls(
                f"the {what} is dated {at.isoformat()}, more than {skew} ahead of the clock "
                f"({now.isoformat()}); {cause} (policy event_clock_skew)",
                occurred_at=at.isoformat(),
                now=now.isoformat(),
                tolerance_seconds=skew.total_seconds(),
            )


class SubjectUnresolved(CaveatError):
    """A name that resolves to no canonical entity; carries ranked suggestions."""

    code = "subject_unresolved"


class GateRejection(CaveatError):
    """A write refused by the gate or its surroundings; ``code`` is the reason."""

    code = "rejected"

    def __init__(self, code: str, message: str, *, gate: str | None = None, **detail: Any) -> None:
        super().__init__(message, code=code, gate=gate, **detail)
        self.gate = gate


class NotFound(CaveatError):
    """No such thing that the caller may see."""

    code = "not_found"


class Conflict(CaveatError):
    """A concurrent or colliding write; says nothing about hidden rows."""

    code = "conflict"


class Forbidden(CaveatError):
    """The principal's role may not do this."""

    code = "forbidden"


class Unauthenticated(CaveatError):
    """A bearer that is not a known, live token of the tenant."""

    code = "unauthenticated"


class IllegalTransition(CaveatError):
    """The action is not defined from the item's current state."""

    code = "illegal_transition"


class PromotionNeedsConditions(CaveatError):
    """Promoting an item that has no required condition."""

    code = "promotion_needs_conditions"


class CaseNotOpen(CaveatError):
    """Citing in, writing into or closing a case that is not open."""

    code = "case_not_open"


def nul_location(value: Any) -> tuple[str | int, ...] | None:
    """Where ``value`` (strings, mappings and lists, nested) holds a NUL byte, as the
    keys and indexes leading to it (``()``: ``value`` itself), or None. PostgreSQL text
    and jsonb cannot store one, so every door refuses it as bad input before anything
    is written."""
    if isinstance(value, str):
        return () if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                return (key,)
            found = nul_location(item)
            if found is not None:
                return (key, *found)
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            found = nul_location(item)
            if found is not None:
                return (n, *found)
    return None


def nul_path(value: Any) -> str | None:
    """``nul_location`` written as a path: ``required[1]``, ``scope.id``, ``value``."""
    found = nul_location(value)
    if found is None:
        return None
    path = ""
    for part in found:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "value"


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 4
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 200
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 8


def shown(value: Any) -> str:
    """``repr(value)`` as an error message shows a refused value: at most 200 characters
    (cut with ``...``), containers to a few levels and items, so that a value nested
    10,000 deep, a megabyte long or an int past ``str()``'s digit limit is refused with
    a message, not a ``RecursionError`` or ``ValueError``."""
    try:
        if isinstance(value, dict | list | tuple | set | frozenset):
            text = _SHOWN.repr(value)
        else:
            text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= 200 else text[:197] + "..."
