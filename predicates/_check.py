"""Type checking of a predicate against its attribute's declared type."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType
from typing import NoReturn

from predicates._ast import LIST_OPS, Op, Predicate, Scalar
from predicates._parser import line_column
from predicates._printer import literal_text, to_text, value_text
from predicates._regex import RegexError, compile_pattern
from predicates._types import ValueType
from predicates._values import Duration, Version, quote_body
from predicates.errors import PredicateSyntaxError, PredicateTypeError

__all__ = ["OPS_BY_TYPE", "check_type", "literal_kind"]

_ORDERED = frozenset({Op.EQ, Op.NE, Op.LT, Op.LTE, Op.GT, Op.GTE, Op.IN, Op.NOT_IN, Op.EXISTS})

#: Which operators are defined for each type name.
OPS_BY_TYPE: Mapping[str, frozenset[Op]] = MappingProxyType(
    {
        "int": _ORDERED,
        "float": _ORDERED,
        "duration": _ORDERED,
        "version": _ORDERED,
        "timestamp": _ORDERED,
        "string": _ORDERED | {Op.CONTAINS, Op.MATCHES},
        "enum": frozenset({Op.EQ, Op.NE, Op.IN, Op.NOT_IN, Op.EXISTS}),
        "bool": frozenset({Op.EQ, Op.NE, Op.EXISTS}),
    }
)


def literal_kind(value: Scalar) -> str:
    """What a literal is, in words: ``an int``, ``a quoted string``, ``a version``..."""
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, Decimal):
        return "a decimal"
    if isinstance(value, str):
        return "a quoted string"
    if isinstance(value, Duration):
        return "a duration"
    if isinstance(value, Version):
        return "a version"
    return "a timestamp"


def _fits(value: Scalar, vtype: ValueType) -> str | None:
    """None when ``value`` is a literal of ``vtype``, else why not."""
    name = vtype.name
    if name == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif name == "float":
        ok = isinstance(value, int | Decimal) and not isinstance(value, bool)
        if ok:
            assert isinstance(value, int | Decimal)
            try:
                finite = math.isfinite(float(value))
            except OverflowError:
                finite = False
            if not finite:
                return "it is out of the range of a float"
    elif name == "bool":
        ok = isinstance(value, bool)
    elif name == "string":
        ok = isinstance(value, str)
    elif name == "enum":
        if not isinstance(value, str):
            ok = False
        elif vtype.choices and value not in vtype.choices:
            return f"it is not one of the choices {', '.join(vtype.choices)}"
        else:
            ok = True
    elif name == "version":
        ok = isinstance(value, Version)
        if not ok and isinstance(value, str):
            return "versions are written unquoted, like v15.4"
    elif name == "duration":
        ok = isinstance(value, Duration)
        if not ok and isinstance(value, int | Decimal) and not isinstance(value, bool):
            return "durations need a unit, like 30s, 5m, 2h, 7d or 250ms"
    else:
        ok = isinstance(value, datetime)
        if not ok and isinstance(value, str):
            return "timestamps are written unquoted, like 2026-03-01T09:00:00Z"
    return None if ok else f"it is {literal_kind(value)}"


def _mismatch(p: Predicate, vtype: ValueType, message: str, value: str) -> NoReturn:
    raise PredicateTypeError(
        message,
        attribute=str(p.attribute),
        operator=p.op.value,
        expected=str(vtype),
        value=value,
        condition=to_text(p),
    )


def check_type(p: Predicate, vtype: ValueType) -> None:
    """Check that ``p`` is meaningful for an attribute of type ``vtype``.

    Raises ``PredicateTypeError`` (code ``condition_type_mismatch``) when the
    operator is not defined for the type or a literal (each element of an
    ``in``/``not_in`` list) is not of the type; the message names the
    attribute, operator, expected type and offending value. An int literal
    is a valid float; nothing else is converted. Raises
    ``PredicateSyntaxError`` (``condition_unparsable``) for a ``matches``
    pattern outside the portable regex subset.
    """
    allowed = OPS_BY_TYPE[vtype.name]
    if p.op not in allowed:
        ops = ", ".join(op.value for op in Op if op in allowed)
        _mismatch(
            p,
            vtype,
            f"condition `{to_text(p)}`: operator `{p.op}` is not defined for `{p.attribute}` "
            f"of type {vtype} (defined: {ops})",
            value_text(p),
        )
    if p.value is None:
        return
    values = p.value if p.op in LIST_OPS and isinstance(p.value, tuple) else (p.value,)
    for value in values:
        assert not isinstance(value, tuple)
        why = _fits(value, vtype)
        if why is not None:
            shown = literal_text(value)
            _mismatch(
                p,
                vtype,
                f"condition `{to_text(p)}`: `{p.attribute}` is {vtype}, operator `{p.op}`, "
                f"but the value {shown} does not fit: {why}",
                shown,
            )
    if p.op is Op.MATCHES:
        assert isinstance(p.value, str)
        try:
            compile_pattern(p.value)
        except RegexError as exc:  # pragma: no cover - Predicate refuses these already
            text = to_text(p)
            start = len(text) - len(quote_body(p.value)) - 1
            pos = start + len(quote_body(p.value[: exc.position]))
            line, column = line_column(text, pos)
            raise PredicateSyntaxError(
                f"invalid pattern for `matches`: {exc.reason}", text=text, line=line, column=column
            ) from None
