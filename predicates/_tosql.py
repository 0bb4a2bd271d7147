"""Compilation of a predicate into a plain SQL boolean expression (NULL = UNKNOWN).

``to_sql(cp)`` gives the same three-valued answer as ``cp(observed)`` and as
the plpgsql ``caveat_eval``, but as an expression PostgreSQL plans inline: no
function call per row, no condition document to interpret. It reads the
observation from a jsonb snapshot ``{subject: {attribute: {"t", "v"}}}`` (the
form ``encode`` and ``Snapshot.to_json`` produce), given as a SQL expression
by the caller, and the subject from another SQL expression.

Only constants that cannot carry a quote, a colon or a percent sign are
written into the text (attribute paths, type names, numbers); strings and
entity names travel as bind parameters, so the text is safe for SQLAlchemy
``text()`` (``:name``) or psycopg (``%(name)s``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from predicates._ast import LIST_OPS, Op, Scalar
from predicates._encoding import encode
from predicates._eval import CompiledPredicate
from predicates._types import ValueType, coerce
from predicates.errors import InputError

__all__ = ["applicability_sql", "to_sql"]

ParamStyle = Literal["named", "pyformat"]

_NUMERIC = frozenset({"int", "float", "duration", "timestamp"})
_JSON_KIND = {
    "int": "number",
    "float": "number",
    "duration": "number",
    "timestamp": "number",
    "string": "string",
    "enum": "string",
    "bool": "boolean",
    "version": "array",
}
_CMP = {Op.EQ: "=", Op.NE: "<>", Op.LT: "<", Op.LTE: "<=", Op.GT: ">", Op.GTE: ">="}


class _Builder:
    def __init__(self, paramstyle: ParamStyle, prefix: str) -> None:
        if paramstyle not in ("named", "pyformat"):
            raise InputError(f"unknown paramstyle {paramstyle!r}: named or pyformat")
        if not prefix.isidentifier():
            raise InputError(f"parameter prefix {prefix!r} is not an identifier")
        self.style = paramstyle
        self.prefix = prefix
        self.params: dict[str, Any] = {}

    def param(self, value: str) -> str:
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        marker = f":{name}" if self.style == "named" else f"%({name})s"
        return f"CAST({marker} AS text)"


def _encoded(value: Scalar, vtype: ValueType) -> Any:
    return encode(coerce(value, vtype), vtype)["v"]


def _number(value: Scalar, vtype: ValueType) -> str:
    v = _encoded(value, vtype)
    assert isinstance(v, int | float) and not isinstance(v, bool)
    return f"({json.dumps(v)})"


def _version_cmp(v: str, parts: Sequence[int]) -> str:
    """Three-way comparison (-1, 0, 1) of the jsonb array ``v`` with the literal ``parts``.

    Missing segments read as 0, on either side, as in ``caveat_version_cmp``.
    """
    whens = []
    for i, part in enumerate(parts):
        seg = f"coalesce(CAST(({v} ->> {i}) AS numeric), 0)"
        whens.append(f"WHEN {seg} < {part} THEN -1 WHEN {seg} > {part} THEN 1")
    tail = (
        f"coalesce((SELECT sign(CAST(x.e AS numeric)) FROM jsonb_array_elements_text({v}) "
        f"WITH ORDINALITY AS x(e, i) WHERE x.i > {len(parts)} AND CAST(x.e AS numeric) <> 0 "
        f"ORDER BY x.i LIMIT 1), 0)"
    )
    return f"(CASE {' '.join(whens)} ELSE {tail} END)"


def _compare(b: _Builder, op: Op, name: str, v: str, lit: Scalar, vtype: ValueType) -> str:
    """The boolean comparison of a well-typed jsonb value ``v`` with one literal."""
    sym = _CMP[op]
    if name in _NUMERIC:
        return f"(CAST({v} AS numeric) {sym} {_number(lit, vtype)})"
    if name in ("string", "enum"):
        assert isinstance(lit, str)
        text = f"({v} #>> '{{}}')"
        if op in (Op.EQ, Op.NE):
            return f"({text} {sym} {b.param(lit)})"
        return f'({text} COLLATE "C" {sym} {b.param(lit)} COLLATE "C")'
    if name == "bool":
        assert isinstance(lit, bool)
        return f"(({v} #>> '{{}}') {sym} '{'true' if lit else 'false'}')"
    assert name == "version"
    parts = _encoded(lit, vtype)
    return f"({_version_cmp(v, parts)} {sym} 0)"


def _expression(
    b: _Builder,
    cp: CompiledPredicate,
    snapshot: str,
    subject: str,
    resolve_entity: Callable[[str], str] | None,
) -> str:
    p = cp.predicate
    name = cp.vtype.name
    entity = p.attribute.entity
    if entity is not None and resolve_entity is not None:
        entity = resolve_entity(entity)
    key = subject if entity is None else b.param(entity)
    obs = f"(({snapshot}) -> ({key}) -> '{p.attribute.path}')"
    v = f"({obs} -> 'v')"
    wrong_type = f"({obs} ->> 't') IS DISTINCT FROM '{name}'"
    if p.op is Op.EXISTS:
        return (
            f"(CASE WHEN jsonb_typeof({obs}) IS DISTINCT FROM 'object' THEN false "
            f"WHEN {wrong_type} OR coalesce(jsonb_typeof({v}), 'null') = 'null' THEN NULL "
            f"ELSE true END)"
        )
    guard = f"{wrong_type} OR jsonb_typeof({v}) IS DISTINCT FROM '{_JSON_KIND[name]}'"
    if p.op in LIST_OPS:
        assert isinstance(p.value, tuple)
        hits = " OR ".join(_compare(b, Op.EQ, name, v, lit, cp.vtype) for lit in p.value)
        test = f"({hits})" if p.op is Op.IN else f"(NOT ({hits}))"
    elif p.op is Op.CONTAINS:
        assert isinstance(p.value, str)
        test = f"(strpos({v} #>> '{{}}', {b.param(p.value)}) > 0)"
    elif p.op is Op.MATCHES:
        assert isinstance(p.value, str)
        test = f"(({v} #>> '{{}}') ~ {b.param(p.value)})"
    else:
        assert p.value is not None and not isinstance(p.value, tuple)
        test = _compare(b, p.op, name, v, p.value, cp.vtype)
    return f"(CASE WHEN {guard} THEN NULL ELSE {test} END)"


def to_sql(
    cp: CompiledPredicate,
    *,
    snapshot: str = "snapshot",
    subject: str = "subject",
    resolve_entity: Callable[[str], str] | None = None,
    paramstyle: ParamStyle = "named",
    prefix: str = "p",
) -> tuple[str, dict[str, Any]]:
    """``cp`` as a SQL boolean expression and its bind parameters.

    The expression is TRUE, FALSE or NULL (UNKNOWN) exactly when ``cp`` is,
    for the observation ``(snapshot) -> (subject) -> attribute`` (or
    ``-> entity ->`` for an ``@entity:`` predicate, the entity mapped through
    ``resolve_entity``). ``snapshot`` and ``subject`` are SQL expressions
    supplied by the caller (a column, a bind parameter such as
    ``CAST(:snap AS jsonb)``); they are pasted in verbatim, up to three times.
    Parameters are named ``<prefix>0``, ``<prefix>1``...; ``paramstyle`` is
    ``named`` (``:p0``, SQLAlchemy) or ``pyformat`` (``%(p0)s``, psycopg).
    """
    b = _Builder(paramstyle, prefix)
    return _expression(b, cp, snapshot, subject, resolve_entity), b.params


def applicability_sql(
    required: Sequence[CompiledPredicate],
    excluded: Sequence[CompiledPredicate],
    *,
    snapshot: str = "snapshot",
    subject: str = "subject",
    resolve_entity: Callable[[str], str] | None = None,
    paramstyle: ParamStyle = "named",
    prefix: str = "p",
) -> tuple[str, dict[str, Any]]:
    """A whole item as one SQL boolean that is never NULL (like ``caveat_applies``).

    TRUE iff every required expression IS TRUE and every excluded one IS
    FALSE: an UNKNOWN condition is turned into "does not apply" before the
    fold, so it is never granted. No conditions at all is ``true``.
    """
    b = _Builder(paramstyle, prefix)
    parts = [
        f"({_expression(b, cp, snapshot, subject, resolve_entity)} IS TRUE)" for cp in required
    ]
    parts += [
        f"({_expression(b, cp, snapshot, subject, resolve_entity)} IS FALSE)" for cp in excluded
    ]
    return ("(" + " AND ".join(parts) + ")" if parts else "true"), b.params
