"""Kleene's strong three-valued logic."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = ["Truth"]


class Truth(StrEnum):
    """TRUE, FALSE or UNKNOWN, combined with Kleene's strong logic.

    A Truth is deliberately not usable as a Python bool (``bool(t)`` raises
    ``TypeError``): test ``t is Truth.TRUE`` so that UNKNOWN is never granted
    by accident. ``&``, ``|`` and ``~`` are ``and_``, ``or_`` and ``not_``.
    """

    TRUE = "TRUE"
    FALSE = "FALSE"
    UNKNOWN = "UNKNOWN"

    def __bool__(self) -> bool:
        raise TypeError("Truth is three-valued; compare with `is Truth.TRUE` / `is Truth.FALSE`")

    def and_(self, other: Truth) -> Truth:
        """Kleene conjunction: FALSE if either is FALSE, TRUE if both are TRUE, else UNKNOWN."""
        return _AND[self, other]

    def or_(self, other: Truth) -> Truth:
        """Kleene disjunction: TRUE if either is TRUE, FALSE if both are FALSE, else UNKNOWN."""
        return _OR[self, other]

    def not_(self) -> Truth:
        """Kleene negation: swaps TRUE and FALSE, keeps UNKNOWN."""
        return _NOT[self]

    def __and__(self, other: object) -> Truth:
        if isinstance(other, Truth):
            return _AND[self, other]
        return NotImplemented

    def __or__(self, other: object) -> Truth:
        if isinstance(other, Truth):
            return _OR[self, other]
        return NotImplemented

    def __invert__(self) -> Truth:
        return _NOT[self]

    @staticmethod
    def of(value: bool | None) -> Truth:
        """``True`` -> TRUE, ``False`` -> FALSE, ``None`` -> UNKNOWN (SQL's boolean)."""
        if value is None:
            return Truth.UNKNOWN
        return Truth.TRUE if value else Truth.FALSE

    def to_bool(self) -> bool | None:
        """Inverse of ``of``: TRUE -> True, FALSE -> False, UNKNOWN -> None."""
        return _TO_BOOL[self]

    @staticmethod
    def all(values: Iterable[Truth]) -> Truth:
        """Kleene conjunction of any number of values (TRUE for none)."""
        result = Truth.TRUE
        for v in values:
            if v is Truth.FALSE:
                return Truth.FALSE
            if v is Truth.UNKNOWN:
                result = Truth.UNKNOWN
        return result

    @staticmethod
    def any(values: Iterable[Truth]) -> Truth:
        """Kleene disjunction of any number of values (FALSE for none)."""
        result = Truth.FALSE
        for v in values:
            if v is Truth.TRUE:
                return Truth.TRUE
            if v is Truth.UNKNOWN:
                result = Truth.UNKNOWN
        return result


_T, _F, _U = Truth.TRUE, Truth.FALSE, Truth.UNKNOWN
_AND = {(a, b): (_F if _F in (a, b) else _T if a is b is _T else _U) for a in Truth for b in Truth}
_OR = {(a, b): (_T if _T in (a, b) else _F if a is b is _F else _U) for a in Truth for b in Truth}
_NOT = {_T: _F, _F: _T, _U: _U}
_TO_BOOL: dict[Truth, bool | None] = {_T: True, _F: False, _U: None}
