"""The JSON encoding of typed values, shared by storage and the SQL evaluator.

``{"t": type_name, "v": ...}`` where ``v`` is exactly comparable in SQL:

========== ======================================================
int        JSON integer (exact)
float      JSON number, shortest repr of the IEEE double
bool       JSON boolean
string     JSON string
enum       JSON string (the choices are not carried: ``t`` is ``enum``)
version    JSON array of ints, trailing zeros removed (``[15, 10, 2]``)
duration   JSON number of seconds (integer when whole; exact to the µs)
timestamp  JSON integer, microseconds since 1970-01-01T00:00:00Z
========== ======================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NoReturn

from predicates._ast import LIST_OPS, Scalar
from predicates._eval import CompiledPredicate
from predicates._types import TYPE_NAMES, TypedValue, ValueType, coerce
from predicates._values import (
    Duration,
    Version,
    timestamp_from_micros,
    timestamp_micros,
)
from predicates.errors import ValueTypeError

__all__ = ["condition_json", "decode", "encode"]

JSONScalar = int | float | bool | str | list[int]


def _encode_v(typed: TypedValue, name: str) -> JSONScalar:
    if name == "version":
        assert isinstance(typed, Version)
        return list(typed.parts)
    if name == "duration":
        assert isinstance(typed, Duration)
        whole, frac = divmod(typed.micros, 1_000_000)
        return whole if frac == 0 else typed.micros / 1_000_000
    if name == "timestamp":
        assert isinstance(typed, datetime)
        return timestamp_micros(typed)
    assert isinstance(typed, int | float | bool | str)
    return typed


def encode(value: object, vtype: ValueType) -> dict[str, Any]:
    """``{"t": vtype.name, "v": ...}``: the JSON form of ``coerce(value, vtype)``.

    Guarantees ``decode(encode(x, t)) == (coerce(x, t), t)`` up to enum
    choices, and that ``json.dumps`` of the result is exact (no precision lost).
    Raises ``ValueTypeError`` when ``value`` does not have type ``vtype``.
    """
    return {"t": vtype.name, "v": _encode_v(coerce(value, vtype), vtype.name)}


def _bad(d: object, why: str, expected: str = "an encoded value {t, v}") -> NoReturn:
    text = repr(d)
    if len(text) > 200:
        text = text[:197] + "..."
    raise ValueTypeError(f"{why}: {text}", expected=expected, value=text)


def decode(d: Mapping[str, Any]) -> tuple[TypedValue, ValueType]:
    """Inverse of ``encode``: the typed value and its type (an enum's choices are empty).

    Raises ``ValueTypeError`` for anything that ``encode`` cannot produce.
    """
    if not isinstance(d, Mapping) or "t" not in d or "v" not in d:
        _bad(d, "not an encoded value")
    name = d["t"]
    if not isinstance(name, str) or name not in TYPE_NAMES:
        _bad(d, "unknown type tag")
    vtype = ValueType(name)
    v = d["v"]
    raw: object
    if name == "version":
        if not isinstance(v, list):
            _bad(d, "a version is a list of ints", name)
        raw = Version(v)
    elif name == "duration":
        if isinstance(v, bool) or not isinstance(v, int | float):
            _bad(d, "a duration is a number of seconds", name)
        raw = Duration(v)
    elif name == "timestamp":
        if isinstance(v, bool) or not isinstance(v, int):
            _bad(d, "a timestamp is integer microseconds since the epoch", name)
        raw = timestamp_from_micros(v)
    elif name == "float" and isinstance(v, int) and not isinstance(v, bool):
        raw = float(v)
    else:
        raw = v
    return coerce(raw, vtype), vtype


def _literal_v(value: Scalar, vtype: ValueType) -> JSONScalar:
    return _encode_v(coerce(value, vtype), vtype.name)


def condition_json(
    cp: CompiledPredicate, *, resolve_entity: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """The condition document read by the SQL evaluator (``caveat_eval``/``caveat_applies``).

    ``{"op": op, "t": type name, "v": encoded literal | [encoded, ...] | null,
    "a": attribute path, "e": entity or null}``. ``resolve_entity`` maps the
    raw ``@entity`` name to the subject id used as snapshot key (identity when
    omitted). Python and SQL give the same Truth for the same observation.
    """
    p = cp.predicate
    value: Any
    if p.value is None:
        value = None
    elif p.op in LIST_OPS:
        assert isinstance(p.value, tuple)
        value = [_literal_v(v, cp.vtype) for v in p.value]
    else:
        assert not isinstance(p.value, tuple)
        value = _literal_v(p.value, cp.vtype)
    entity = p.attribute.entity
    if entity is not None and resolve_entity is not None:
        entity = resolve_entity(entity)
    return {"op": p.op.value, "t": cp.vtype.name, "v": value, "a": p.attribute.path, "e": entity}
