"""Declared value types and the one coercion from observed raw values."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import NoReturn

from predicates._values import (
    Duration,
    Version,
    check_string,
    parse_duration_literal,
    parse_timestamp_literal,
)
from predicates.errors import InputError, ValueTypeError, shown

__all__ = ["TYPE_NAMES", "TypedValue", "ValueType", "coerce"]

TYPE_NAMES: tuple[str, ...] = (
    "int",
    "float",
    "bool",
    "string",
    "enum",
    "version",
    "duration",
    "timestamp",
)

#: What ``coerce`` returns: the canonical Python value of each type.
TypedValue = int | float | bool | str | Version | Duration | datetime

_CHOICE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_ENUM_SPEC_RE = re.compile(r"enum\[(.*)\]", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ValueType:
    """A declared value type: ``name`` is one of ``TYPE_NAMES``.

    ``choices`` is the ordered tuple of allowed values of an ``enum`` (empty
    for every other type; an enum with no choices stands for "some enum",
    e.g. after ``decode``, and accepts any string).
    """

    name: str
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.name not in TYPE_NAMES:
            raise InputError(
                f"unknown value type {self.name!r}; expected one of {', '.join(TYPE_NAMES)}",
                code="invalid_value_type",
                spec=self.name,
            )
        if not isinstance(self.choices, tuple):
            object.__setattr__(self, "choices", tuple(self.choices))
        if self.name != "enum" and self.choices:
            raise InputError(
                f"only enum types have choices, not {self.name}",
                code="invalid_value_type",
                spec=self.name,
            )
        seen: set[str] = set()
        for choice in self.choices:
            if not isinstance(choice, str) or not _CHOICE_RE.fullmatch(choice):
                raise InputError(
                    f"invalid enum choice {choice!r}: use letters, digits, '_', '-', '.'",
                    code="invalid_value_type",
                    spec=str(choice),
                )
            if choice in seen:
                raise InputError(
                    f"duplicate enum choice {choice!r}", code="invalid_value_type", spec=choice
                )
            seen.add(choice)

    @classmethod
    def parse(cls, spec: str) -> ValueType:
        """``int|float|bool|string|version|duration|timestamp|enum[a,b,c]`` -> ValueType.

        Raises ``InputError`` (code ``invalid_value_type``) for anything else,
        including an enum without choices.
        """
        if not isinstance(spec, str):
            raise InputError(f"a type spec is a string, not {spec!r}", code="invalid_value_type")
        text = spec.strip()
        m = _ENUM_SPEC_RE.fullmatch(text)
        if m is not None:
            choices = tuple(c.strip() for c in m.group(1).split(","))
            if choices == ("",):
                raise InputError(
                    "an enum needs at least one choice: enum[a,b]",
                    code="invalid_value_type",
                    spec=spec,
                )
            return cls("enum", choices)
        if text == "enum" or text not in TYPE_NAMES:
            raise InputError(
                f"unknown value type {spec!r}; expected one of "
                "int, float, bool, string, enum[a,b,...], version, duration, timestamp",
                code="invalid_value_type",
                spec=spec,
            )
        return cls(text)

    def __str__(self) -> str:
        if self.name == "enum":
            return f"enum[{','.join(self.choices)}]" if self.choices else "enum"
        return self.name


def _refuse(raw: object, vtype: ValueType, why: str) -> NoReturn:
    text = shown(raw)
    if len(text) > 200:
        text = text[:197] + "..."
    raise ValueTypeError(f"{why}: expected {vtype}, got {text}", expected=str(vtype), value=text)


def coerce(raw: object, vtype: ValueType) -> TypedValue:
    """Turn an observed raw value into the canonical typed value of ``vtype``.

    Guarantees: the result's Python type is fixed per type name (int, float,
    bool, str, Version, Duration, aware UTC datetime); the only silent
    conversion is int -> float (widening) and finite Decimal -> float. Version,
    duration and timestamp also accept their text forms (``"v15.6"`` or
    ``"15.6"``, ``"5m"``, ISO-8601 with ``Z`` or an offset); a duration accepts a
    non-negative number of seconds. Anything else raises ``ValueTypeError``
    with ``expected`` and ``value``.
    """
    name = vtype.name
    if name == "int":
        if isinstance(raw, int) and not isinstance(raw, bool):
            return int(raw)
        _refuse(raw, vtype, "not an int")
    if name == "float":
        if isinstance(raw, bool):
            _refuse(raw, vtype, "a bool is not a number")
        if isinstance(raw, float):
            if not math.isfinite(raw):
                _refuse(raw, vtype, "not a finite number")
            return float(raw)
        if isinstance(raw, int | Decimal):
            try:
                value = float(raw)
            except (OverflowError, ValueError):
                _refuse(raw, vtype, "out of float range")
            if not math.isfinite(value):
                _refuse(raw, vtype, "out of float range")
            return value
        _refuse(raw, vtype, "not a number")
    if name == "bool":
        if isinstance(raw, bool):
            return raw
        _refuse(raw, vtype, "not a bool")
    if name in ("string", "enum"):
        if not isinstance(raw, str):
            _refuse(raw, vtype, "not a string")
        problem = check_string(raw)
        if problem is not None:
            _refuse(raw, vtype, problem)
        if name == "enum" and vtype.choices and raw not in vtype.choices:
            _refuse(raw, vtype, "not one of the enum's choices")
        return str(raw)
    if name == "version":
        if isinstance(raw, Version):
            return raw
        if isinstance(raw, str):
            try:
                return Version.parse(raw)
            except ValueTypeError:
                _refuse(raw, vtype, "not a version (like v15.4 or 15.4)")
        _refuse(raw, vtype, "not a version")
    if name == "duration":
        if isinstance(raw, Duration):
            return raw
        if isinstance(raw, str):
            try:
                return parse_duration_literal(raw)
            except ValueTypeError:
                _refuse(raw, vtype, "not a duration (like 30s, 5m, 2h, 7d, 250ms)")
        if isinstance(raw, int | float | Decimal) and not isinstance(raw, bool):
            try:
                return Duration(raw)
            except ValueTypeError as exc:
                _refuse(raw, vtype, exc.message.split(":")[0])
        _refuse(raw, vtype, "not a duration")
    if name == "timestamp":
        if isinstance(raw, datetime):
            if raw.tzinfo is None or raw.utcoffset() is None:
                _refuse(raw, vtype, "a naive datetime has no time zone")
            try:
                return raw.astimezone(UTC)
            except (OverflowError, ValueError):
                _refuse(raw, vtype, "not a valid UTC instant")
        if isinstance(raw, str):
            try:
                return parse_timestamp_literal(raw)
            except ValueTypeError:
                _refuse(raw, vtype, "not an ISO-8601 timestamp with Z or an offset")
        _refuse(raw, vtype, "not a timestamp")
    raise AssertionError(f"unhandled type {name}")  # pragma: no cover
