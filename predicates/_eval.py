"""Three-valued evaluation: compiled predicates and item applicability."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Protocol

from predicates._ast import LIST_OPS, Attribute, Op, Predicate, Scalar
from predicates._check import check_type
from predicates._printer import to_text
from predicates._regex import compile_pattern
from predicates._truth import Truth
from predicates._types import TypedValue, ValueType, coerce
from predicates.errors import ValueTypeError

__all__ = [
    "Applicability",
    "CompiledPredicate",
    "Observed",
    "ObservedLike",
    "applicability",
    "compile_predicate",
]

_T, _F, _U = Truth.TRUE, Truth.FALSE, Truth.UNKNOWN
_Errors = (AttributeError, TypeError)


class ObservedLike(Protocol):
    """Anything with a typed ``value`` and its ``vtype``, like ``Observed``."""

    @property
    def value(self) -> object: ...

    @property
    def vtype(self) -> ValueType: ...


@dataclass(frozen=True, slots=True)
class Observed:
    """A fresh observation: ``value`` of type ``vtype``.

    The constructor runs ``coerce(value, vtype)`` and keeps the canonical
    typed value, so an ``Observed`` always holds a well-typed value (it raises
    ``ValueTypeError`` otherwise).
    """

    value: TypedValue
    vtype: ValueType

    def __post_init__(self) -> None:
        if not isinstance(self.vtype, ValueType):
            raise ValueTypeError(
                f"Observed needs a ValueType, not {self.vtype!r}",
                expected="ValueType",
                value=repr(self.vtype),
            )
        object.__setattr__(self, "value", coerce(self.value, self.vtype))


Evaluator = Callable[[ObservedLike | None], Truth]


class CompiledPredicate:
    """A type-checked predicate with its evaluator built once.

    ``cp(observed)`` returns a ``Truth``: UNKNOWN without an observation
    (except ``exists``, which is FALSE then) or when the observation's type
    name differs from ``vtype``'s, else the comparison. It never raises.
    """

    __slots__ = ("_fn", "predicate", "text", "vtype")

    predicate: Predicate
    vtype: ValueType
    text: str
    _fn: Evaluator

    def __init__(self, predicate: Predicate, vtype: ValueType, fn: Evaluator) -> None:
        object.__setattr__(self, "predicate", predicate)
        object.__setattr__(self, "vtype", vtype)
        object.__setattr__(self, "text", to_text(predicate))
        object.__setattr__(self, "_fn", fn)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CompiledPredicate is immutable")

    @property
    def attribute(self) -> Attribute:
        """The predicate's attribute (``entity`` is None for the item's own subject)."""
        return self.predicate.attribute

    def __call__(self, observed: ObservedLike | None) -> Truth:
        return self._fn(observed)

    def __repr__(self) -> str:
        return f"CompiledPredicate({self.text!r}, {str(self.vtype)!r})"


def _typed(value: Scalar, vtype: ValueType) -> object:
    """A literal as the evaluator compares it (floats as IEEE doubles)."""
    if vtype.name == "float":
        assert isinstance(value, int | Decimal)
        return float(value)
    return value


def compile_predicate(p: Predicate, vtype: ValueType) -> CompiledPredicate:
    """Type-check ``p`` against ``vtype`` (see ``check_type``) and build its evaluator.

    Everything that does not depend on the observation (literal conversion,
    membership sets, regex automaton) is computed here, once.
    """
    return _compile(p, vtype)


@lru_cache(maxsize=4096)
def _compile(p: Predicate, vtype: ValueType) -> CompiledPredicate:
    check_type(p, vtype)
    return CompiledPredicate(p, vtype, _evaluator(p, vtype))


def _evaluator(p: Predicate, vtype: ValueType) -> Evaluator:
    name = vtype.name
    op = p.op

    if op is Op.EXISTS:

        def exists(obs: ObservedLike | None) -> Truth:
            if obs is None:
                return _F
            try:
                return _T if obs.vtype.name == name else _U
            except _Errors:
                return _U

        return exists

    if op in LIST_OPS:
        assert isinstance(p.value, tuple)
        members = frozenset(_typed(v, vtype) for v in p.value)
        hit, miss = (_T, _F) if op is Op.IN else (_F, _T)

        def member(obs: ObservedLike | None) -> Truth:
            if obs is None:
                return _U
            try:
                if obs.vtype.name != name:
                    return _U
                return hit if obs.value in members else miss
            except _Errors:
                return _U

        return member

    assert p.value is not None and not isinstance(p.value, tuple)

    if op is Op.CONTAINS:
        needle = p.value
        assert isinstance(needle, str)

        def contains(obs: ObservedLike | None) -> Truth:
            if obs is None:
                return _U
            try:
                if obs.vtype.name != name:
                    return _U
                value = obs.value
                if type(value) is not str:
                    return _U
                return _T if needle in value else _F
            except _Errors:
                return _U

        return contains

    if op is Op.MATCHES:
        assert isinstance(p.value, str)
        search = compile_pattern(p.value).search

        def matches(obs: ObservedLike | None) -> Truth:
            if obs is None:
                return _U
            try:
                if obs.vtype.name != name:
                    return _U
                value = obs.value
                if type(value) is not str:
                    return _U
                return _T if search(value) else _F
            except _Errors:
                return _U

        return matches

    lit = _typed(p.value, vtype)
    return _COMPARATORS[op](name, lit)


def _eq(name: str, lit: object) -> Evaluator:
    def eq(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _T if obs.value == lit else _F
        except _Errors:
            return _U

    return eq


def _ne(name: str, lit: object) -> Evaluator:
    def ne(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _F if obs.value == lit else _T
        except _Errors:
            return _U

    return ne


def _lt(name: str, lit: object) -> Evaluator:
    def lt(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _T if obs.value < lit else _F  # type: ignore[operator]
        except _Errors:
            return _U

    return lt


def _lte(name: str, lit: object) -> Evaluator:
    def lte(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _T if obs.value <= lit else _F  # type: ignore[operator]
        except _Errors:
            return _U

    return lte


def _gt(name: str, lit: object) -> Evaluator:
    def gt(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _T if obs.value > lit else _F  # type: ignore[operator]
        except _Errors:
            return _U

    return gt


def _gte(name: str, lit: object) -> Evaluator:
    def gte(obs: ObservedLike | None) -> Truth:
        if obs is None:
            return _U
        try:
            if obs.vtype.name != name:
                return _U
            return _T if obs.value >= lit else _F  # type: ignore[operator]
        except _Errors:
            return _U

    return gte


_COMPARATORS: dict[Op, Callable[[str, object], Evaluator]] = {
    Op.EQ: _eq,
    Op.NE: _ne,
    Op.LT: _lt,
    Op.LTE: _lte,
    Op.GT: _gt,
    Op.GTE: _gte,
}


@dataclass(frozen=True, slots=True)
class Applicability:
    """Whether an item applies, and why.

    ``applies`` is True iff every required condition is TRUE and every
    excluded condition is FALSE (UNKNOWN is never granted). ``required`` and
    ``excluded`` pair each condition's canonical text with its value, in
    input order; ``unknown`` lists the attributes (``@entity:path`` or
    ``path``) of the UNKNOWN conditions, de-duplicated in order: the
    observations that would turn them into decisions.
    """

    applies: bool
    required: tuple[tuple[str, Truth], ...]
    excluded: tuple[tuple[str, Truth], ...]
    unknown: tuple[str, ...]


def applicability(
    required: Sequence[CompiledPredicate],
    excluded: Sequence[CompiledPredicate],
    lookup: Callable[[CompiledPredicate], ObservedLike | None],
) -> Applicability:
    """Evaluate an item's conditions, fetching each observation with ``lookup``.

    Guarantees ``applies`` only when every required condition is TRUE and
    every excluded one is FALSE; every condition is evaluated (for explain),
    each exactly once.
    """
    req = tuple((cp.text, cp(lookup(cp))) for cp in required)
    exc = tuple((cp.text, cp(lookup(cp))) for cp in excluded)
    applies = all(t is _T for _, t in req) and all(t is _F for _, t in exc)
    unknown: dict[str, None] = {}
    for cps, results in ((required, req), (excluded, exc)):
        for cp, (_, t) in zip(cps, results, strict=True):
            if t is _U:
                unknown.setdefault(str(cp.predicate.attribute), None)
    return Applicability(applies, req, exc, tuple(unknown))
