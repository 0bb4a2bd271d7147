"""Evaluation semantics of compiled predicates, and item applicability."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predicates import (
    Applicability,
    CompiledPredicate,
    Observed,
    Truth,
    ValueType,
    applicability,
    compile_predicate,
    parse,
)
from predicates.errors import PredicateTypeError, ValueTypeError

T, F, U = Truth.TRUE, Truth.FALSE, Truth.UNKNOWN


def cp(text: str, spec: str) -> CompiledPredicate:
    return compile_predicate(parse(text), ValueType.parse(spec))


def obs(raw: Any, spec: str) -> Observed:
    return Observed(raw, ValueType.parse(spec))


TABLE: list[tuple[str, str, Any, Truth]] = [
    # ints and floats, with int -> float widening and numeric equality
    ("x gte 200", "int", 200, T),
    ("x gte 200", "int", 199, F),
    ("x eq 20", "float", 20.0, T),
    ("x eq 20", "float", 20, T),
    ("x eq 20.0", "float", 20, T),
    ("x in [20, 30]", "float", 20.0, T),
    ("x in [20.0, 30]", "float", 30, T),
    ("x not_in [20.0]", "float", 20, F),
    ("x not_in [20.0]", "float", 21, T),
    ("x lt 0.8", "float", 0.79, T),
    ("x lt 0.8", "float", 0.8, F),
    ("x lte 0.8", "float", 0.8, T),
    ("x gt -1", "float", -0.5, T),
    ("x ne 0.0", "float", -0.0, F),
    ("x eq 0.1", "float", 0.1, T),
    ("x eq 0.30000000000000004", "float", 0.1 + 0.2, T),
    ("x eq 0.3", "float", 0.1 + 0.2, F),
    # bool
    ("x eq true", "bool", True, T),
    ("x eq true", "bool", False, F),
    ("x ne true", "bool", False, T),
    # strings: code point order, substring, regex search
    ('x eq "a"', "string", "a", T),
    ('x lt "b"', "string", "a", T),
    ('x lt "b"', "string", "B", T),
    ('x gt "z"', "string", "é", T),
    ('x contains "pool"', "string", "connection pool exhausted", T),
    ('x contains "Pool"', "string", "connection pool exhausted", F),
    ('x contains ""', "string", "", T),
    ('x matches "^pg-[0-9]+$"', "string", "pg-15", T),
    ('x matches "^pg-[0-9]+$"', "string", "pg-15\n", F),
    ('x matches "pool"', "string", "the pool is full", T),
    ('x matches "a.b"', "string", "a\nb", T),
    ('x in ["a", "b"]', "string", "b", T),
    # enums
    ('x eq "replica"', "enum[primary,replica]", "replica", T),
    ('x ne "replica"', "enum[primary,replica]", "primary", T),
    ('x in ["primary"]', "enum[primary,replica]", "replica", F),
    # versions
    ("x gt v15.9", "version", "v15.10", T),
    ("x lt v15.10", "version", "15.9", T),
    ("x eq v15", "version", "15.0", T),
    ("x eq v15.0.0", "version", "v15", T),
    ("x gte v15.0.1", "version", "15", F),
    ("x in [v14, v15]", "version", "15.0", T),
    # durations
    ("x gt 5m", "duration", "301s", T),
    ("x gt 5m", "duration", 300, F),
    ("x gte 5m", "duration", 300, T),
    ("x lt 1s", "duration", 0.25, T),
    ("x eq 250ms", "duration", 0.25, T),
    ("x in [1h, 2h]", "duration", "60m", T),
    # timestamps
    ("x gt 2026-03-01T09:00:00Z", "timestamp", "2026-03-01T09:00:00.000001Z", T),
    ("x eq 2026-03-01T09:00:00Z", "timestamp", "2026-03-01T10:00:00+01:00", T),
    ("x lt 2026-03-01T09:00:00Z", "timestamp", datetime(2026, 3, 1, 8, 59, tzinfo=UTC), T),
    # exists
    ("x exists", "int", 0, T),
    ("x exists", "string", "", T),
    ("x exists", "bool", False, T),
]


@pytest.mark.parametrize(("text", "spec", "raw", "expected"), TABLE)
def test_semantics_table(text: str, spec: str, raw: Any, expected: Truth) -> None:
    assert cp(text, spec)(obs(raw, spec)) is expected


@pytest.mark.parametrize(("text", "spec", "raw", "expected"), TABLE)
def test_missing_observation_is_unknown_except_exists(
    text: str, spec: str, raw: Any, expected: Truth
) -> None:
    compiled = cp(text, spec)
    result = compiled(None)
    if compiled.predicate.op.value == "exists":
        assert result is F
    else:
        assert result is U


MISTYPED = [
    ("x gte 200", "int", 200.0, "float"),
    ("x gte 200", "float", 200, "int"),
    ('x eq "a"', "string", "a", "enum[a,b]"),
    ("x eq v15", "version", "15", "string"),
    ("x exists", "int", "1", "string"),
    ("x in [1, 2]", "int", True, "bool"),
    ('x matches "a"', "string", 1, "int"),
    ('x contains "a"', "string", "a", "enum[a]"),
]


@pytest.mark.parametrize(("text", "spec", "raw", "obs_spec"), MISTYPED)
def test_observation_of_another_type_is_unknown(
    text: str, spec: str, raw: Any, obs_spec: str
) -> None:
    assert cp(text, spec)(obs(raw, obs_spec)) is U


def test_enum_types_compare_by_name_only() -> None:
    compiled = cp('x eq "b"', "enum[a,b]")
    assert compiled(obs("b", "enum[b,c]")) is T
    assert compiled(Observed("b", ValueType("enum"))) is T


@dataclass
class Loose:
    """A duck-typed observation carrying a value of the wrong Python type."""

    value: Any
    vtype: ValueType


@pytest.mark.parametrize(
    ("text", "spec", "value"),
    [
        ("x gte 200", "int", "many"),
        ("x gt 5m", "duration", 5),
        ("x gt v1", "version", [1]),
        ('x matches "a"', "string", ["a"]),
        ('x contains "a"', "string", None),
        ("x in [1]", "int", {"unhashable": 1}),
    ],
)
def test_malformed_duck_typed_observations_never_raise(text: str, spec: str, value: Any) -> None:
    result = cp(text, spec)(Loose(value, ValueType.parse(spec)))
    assert result is U


def test_objects_without_vtype_are_unknown() -> None:
    assert cp("x eq 1", "int")(object()) is U  # type: ignore[arg-type]
    assert cp("x exists", "int")(object()) is U  # type: ignore[arg-type]


def test_compile_type_checks_first() -> None:
    with pytest.raises(PredicateTypeError):
        cp('x matches "a"', "int")


def test_compiled_predicate_carries_its_parts() -> None:
    compiled = cp("@db:x  gte   200", "float")
    assert compiled.text == "@db:x gte 200"
    assert compiled.vtype == ValueType("float")
    assert compiled.predicate == parse("@db:x gte 200")
    assert compiled.attribute.entity == "db"
    with pytest.raises(AttributeError):
        compiled.text = "x"  # type: ignore[misc]


def test_observed_coerces_and_refuses() -> None:
    assert obs(20, "float").value == 20.0
    assert isinstance(obs(20, "float").value, float)
    with pytest.raises(ValueTypeError):
        obs("20", "int")
    with pytest.raises(ValueTypeError):
        Observed(1, "int")  # type: ignore[arg-type]


@given(st.integers(-50, 50), st.integers(-50, 50))
def test_int_comparisons_agree_with_python(a: int, b: int) -> None:
    o = obs(a, "int")
    results = {op: cp(f"x {op} {b}", "int")(o) for op in ("eq", "ne", "lt", "lte", "gt", "gte")}
    assert results == {
        "eq": Truth.of(a == b),
        "ne": Truth.of(a != b),
        "lt": Truth.of(a < b),
        "lte": Truth.of(a <= b),
        "gt": Truth.of(a > b),
        "gte": Truth.of(a >= b),
    }


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**6), 10**6))
def test_not_in_is_the_negation_of_in(x: float, n: int) -> None:
    o = obs(x, "float")
    assert cp(f"x in [{n}, 0.5]", "float")(o) is cp(f"x not_in [{n}, 0.5]", "float")(o).not_()


def test_regex_evaluation_is_linear_even_for_catastrophic_patterns() -> None:
    compiled = cp('x matches "^(a+)+$"', "string")
    assert compiled(obs("a" * 5000 + "b", "string")) is F
    assert compiled(obs("a" * 5000, "string")) is T
    compiled = cp('x matches "(a|a)*(a|a)*(a|a)*c"', "string")
    assert compiled(obs("a" * 3000, "string")) is F


def test_simple_comparisons_are_fast() -> None:
    import time

    compiled = cp("x gte 0.8", "float")
    o = obs(0.9, "float")
    n = 200_000
    start = time.perf_counter()
    for _ in range(n):
        compiled(o)
    rate = n / (time.perf_counter() - start)
    assert rate > 150_000, f"{rate:.0f} evaluations/s"


# --- applicability ----------------------------------------------------------------


def _lookup(snapshot: dict[str, Any]) -> Any:
    def lookup(c: CompiledPredicate) -> Observed | None:
        return snapshot.get(str(c.attribute))

    return lookup


def test_applies_when_required_true_and_excluded_false() -> None:
    required = [cp("pool.max gte 200", "int"), cp("@db:version gte v15", "version")]
    excluded = [cp('region eq "eu"', "string")]
    snapshot = {
        "pool.max": obs(250, "int"),
        "@db:version": obs("15.4", "version"),
        "region": obs("us", "string"),
    }
    result = applicability(required, excluded, _lookup(snapshot))
    assert result == Applicability(
        applies=True,
        required=(("pool.max gte 200", T), ("@db:version gte v15", T)),
        excluded=(('region eq "eu"', F),),
        unknown=(),
    )


def test_unknown_required_is_never_granted() -> None:
    result = applicability([cp("pool.max gte 200", "int")], [], _lookup({}))
    assert result.applies is False
    assert result.required == (("pool.max gte 200", U),)
    assert result.unknown == ("pool.max",)


def test_unknown_excluded_is_never_granted() -> None:
    result = applicability(
        [cp("pool.max gte 200", "int")],
        [cp('@db:region eq "eu"', "string")],
        _lookup({"pool.max": obs(300, "int")}),
    )
    assert result.applies is False
    assert result.excluded == (('@db:region eq "eu"', U),)
    assert result.unknown == ("@db:region",)


def test_no_conditions_apply() -> None:
    assert applicability([], [], _lookup({})).applies is True


def test_exists_in_excluded_is_false_on_missing() -> None:
    result = applicability([], [cp("incident.open exists", "bool")], _lookup({}))
    assert result.applies is True
    assert result.unknown == ()


def test_unknown_attributes_are_deduplicated_in_order() -> None:
    required = [cp("b gte 1", "int"), cp("a gte 1", "int"), cp("b lte 9", "int")]
    result = applicability(required, [cp("a eq 5", "int")], _lookup({}))
    assert result.unknown == ("b", "a")


truths = st.sampled_from(list(Truth))


@given(st.lists(truths, max_size=5), st.lists(truths, max_size=5))
def test_applies_iff_all_required_true_and_all_excluded_false(
    req: list[Truth], exc: list[Truth]
) -> None:
    """Drive conditions to chosen truth values and check the fold."""
    values = {T: 1, F: 0}

    def make(i: int, prefix: str) -> CompiledPredicate:
        return cp(f"{prefix}{i} eq 1", "int")

    required = [make(i, "r") for i in range(len(req))]
    excluded = [make(i, "e") for i in range(len(exc))]
    snapshot = {
        f"{prefix}{i}": obs(values[t], "int")
        for prefix, ts in (("r", req), ("e", exc))
        for i, t in enumerate(ts)
        if t is not U
    }
    result = applicability(required, excluded, _lookup(snapshot))
    assert [t for _, t in result.required] == req
    assert [t for _, t in result.excluded] == exc
    assert result.applies == (all(t is T for t in req) and all(t is F for t in exc))
    assert result.applies == (Truth.all(req).and_(Truth.any(exc).not_()) is T)
    if U in req or U in exc:
        assert result.applies is False
        assert result.unknown
