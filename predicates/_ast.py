"""The predicate AST: ``[@entity:]attribute operator [value]``.

Construction validates and normalises, so every ``Predicate`` that exists is
printable and round-trips through the parser: decimals are ``Decimal``,
timestamps aware UTC, ``in``/``not_in`` lists non-empty tuples sorted and
de-duplicated, ``matches`` patterns inside the portable regex subset.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from predicates._values import (
    MAX_NUMBER_DIGITS,
    MAX_PREDICATE_LENGTH,
    Duration,
    Version,
    check_string,
    number_fits,
    timestamp_micros,
)
from predicates.errors import InputError

__all__ = [
    "LIST_OPS",
    "TEXT_OPS",
    "Attribute",
    "Op",
    "Predicate",
    "Scalar",
    "Value",
    "scalar_key",
]

_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"
PATH_RE = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
ENTITY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_MAX_NAME = 512

Scalar = int | Decimal | str | bool | Duration | Version | datetime
Value = Scalar | tuple[Scalar, ...]


class Op(StrEnum):
    """The eleven operators, spelled as in the language."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LTE = "lte"
    GT = "gt"
    GTE = "gte"
    IN = "in"
    NOT_IN = "not_in"
    CONTAINS = "contains"
    MATCHES = "matches"
    EXISTS = "exists"


LIST_OPS = frozenset({Op.IN, Op.NOT_IN})
TEXT_OPS = frozenset({Op.CONTAINS, Op.MATCHES})


def _malformed(message: str, **detail: Any) -> InputError:
    return InputError(message, code="condition_unparsable", **detail)


@dataclass(frozen=True, slots=True)
class Attribute:
    """What a predicate observes: a dotted ``path``, about ``entity`` if given.

    ``entity`` is the raw name written after ``@`` (resolved elsewhere);
    ``None`` means the item's own subject.
    """

    entity: str | None
    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not PATH_RE.fullmatch(self.path):
            raise _malformed(
                f"invalid attribute path {self.path!r}: dotted names like config.pool.max",
                path=repr(self.path),
            )
        if len(self.path) > _MAX_NAME:
            raise _malformed("attribute path too long", path=self.path[:80])
        if self.entity is not None and (
            not isinstance(self.entity, str)
            or not ENTITY_RE.fullmatch(self.entity)
            or len(self.entity) > _MAX_NAME
        ):
            raise _malformed(
                f"invalid entity name {self.entity!r}: letters, digits, '-', '_', '.'",
                entity=repr(self.entity),
            )

    def __str__(self) -> str:
        return self.path if self.entity is None else f"@{self.entity}:{self.path}"


def _normalise_scalar(value: object) -> Scalar:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not number_fits(value):
            raise _malformed(f"integer literal longer than {MAX_NUMBER_DIGITS} digits")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _malformed(f"a number literal must be finite, not {value!r}")
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise _malformed(f"a number literal must be finite, not {value!r}")
        if not number_fits(value):
            raise _malformed(f"decimal literal longer than {MAX_NUMBER_DIGITS} digits")
        return value
    if isinstance(value, str):
        problem = check_string(value)
        if problem is not None:
            raise _malformed(problem)
        return str(value)
    if isinstance(value, Duration | Version):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise _malformed("timestamp literals must be timezone-aware (UTC)")
        return value.astimezone(UTC)
    raise _malformed(f"not a literal value: {value!r}")


def scalar_key(value: Scalar) -> tuple[Any, ...]:
    """A total, kind-aware sort and identity key: ``1``, ``1.0`` and ``true`` differ."""
    if isinstance(value, bool):
        return (0, int(value), 0)
    if isinstance(value, int):
        return (1, value, 0)
    if isinstance(value, Decimal):
        return (1, value, 1)
    if isinstance(value, str):
        return (2, value, 0)
    if isinstance(value, Duration):
        return (3, value.micros, 0)
    if isinstance(value, Version):
        return (4, value.parts, 0)
    return (5, timestamp_micros(value), 0)


@dataclass(frozen=True, eq=False)
class Predicate:
    """One condition: ``attribute op value``; ``value is None`` only for ``exists``.

    Frozen and hashable; equality is exact per literal kind (``eq 1`` differs
    from ``eq 1.0`` and from ``eq true``). ``in``/``not_in`` take a non-empty
    tuple (stored sorted and de-duplicated); ``contains``/``matches`` take a
    string, ``matches`` a pattern of the portable subset (docs/predicates.md);
    the other operators take one scalar. Invalid shapes raise ``InputError``
    with code ``condition_unparsable``.
    """

    attribute: Attribute
    op: Op
    value: Value | None = None

    def __post_init__(self) -> None:
        attribute, op, value = self.attribute, self.op, self.value
        if not isinstance(attribute, Attribute):
            raise _malformed(f"attribute must be an Attribute, not {attribute!r}")
        try:
            op = Op(op)
        except ValueError:
            raise _malformed(f"unknown operator {op!r}") from None
        norm: Value | None
        vkey: Any
        if op is Op.EXISTS:
            if value is not None:
                raise _malformed("`exists` takes no value")
            norm = vkey = None
        elif op in LIST_OPS:
            if not isinstance(value, tuple | list | frozenset | set):
                raise _malformed(f"`{op}` takes a list like [a, b], not {value!r}")
            unique: dict[tuple[Any, ...], Scalar] = {}
            for item in value:
                scalar = _normalise_scalar(item)
                unique.setdefault(scalar_key(scalar), scalar)
            if not unique:
                raise _malformed(f"`{op}` needs at least one value")
            keys = sorted(unique)
            norm = tuple(unique[k] for k in keys)
            vkey = tuple(keys)
        else:
            if value is None or isinstance(value, tuple | list | set | frozenset):
                raise _malformed(f"`{op}` takes one value, not {value!r}")
            norm = _normalise_scalar(value)
            if op in TEXT_OPS and not isinstance(norm, str):
                raise _malformed(f"`{op}` takes a quoted string, not {value!r}")
            if op is Op.MATCHES:
                from predicates._regex import RegexError, compile_pattern

                assert isinstance(norm, str)
                try:
                    compile_pattern(norm)
                except RegexError as exc:
                    raise _malformed(
                        f"invalid pattern for `matches`: {exc.reason}", position=exc.position
                    ) from None
            vkey = scalar_key(norm)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "value", norm)
        self.__dict__["_identity"] = (attribute, op, vkey)
        from predicates._printer import render

        text = render(self)
        if len(text) > MAX_PREDICATE_LENGTH:
            raise _malformed(
                f"predicate longer than {MAX_PREDICATE_LENGTH} characters when printed"
            )
        self.__dict__["_text"] = text

    @property
    def _key(self) -> tuple[Any, ...]:
        key: tuple[Any, ...] = self.__dict__["_identity"]
        return key

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Predicate):
            return self._key == other._key
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        text: str = self.__dict__["_text"]
        return text
