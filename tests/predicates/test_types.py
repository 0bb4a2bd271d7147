"""Value types, coercion of observed values, and type checking of predicates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predicates import (
    OPS_BY_TYPE,
    TYPE_NAMES,
    Duration,
    Op,
    ValueType,
    Version,
    check_type,
    coerce,
    parse,
)
from predicates.errors import InputError, PredicateTypeError, ValueTypeError

# --- ValueType -------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["int", "float", "bool", "string", "version", "duration", "timestamp"]
)
def test_simple_type_specs_round_trip(spec: str) -> None:
    vtype = ValueType.parse(spec)
    assert vtype.name == spec
    assert vtype.choices == ()
    assert str(vtype) == spec


def test_enum_spec() -> None:
    vtype = ValueType.parse("enum[primary, replica,standby]")
    assert vtype.name == "enum"
    assert vtype.choices == ("primary", "replica", "standby")
    assert str(vtype) == "enum[primary,replica,standby]"
    assert ValueType.parse(str(vtype)) == vtype


@pytest.mark.parametrize(
    "spec",
    ["integer", "Int", "enum", "enum[]", "enum[a,a]", "enum[a b]", "enum[a,]", "list[int]", ""],
)
def test_unknown_specs_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError) as info:
        ValueType.parse(spec)
    assert info.value.code == "invalid_value_type"


def test_ops_by_type_table() -> None:
    ordered = {"eq", "ne", "lt", "lte", "gt", "gte", "in", "not_in", "exists"}
    for name in ("int", "float", "duration", "version", "timestamp"):
        assert {op.value for op in OPS_BY_TYPE[name]} == ordered
    assert {op.value for op in OPS_BY_TYPE["string"]} == ordered | {"contains", "matches"}
    assert {op.value for op in OPS_BY_TYPE["enum"]} == {"eq", "ne", "in", "not_in", "exists"}
    assert {op.value for op in OPS_BY_TYPE["bool"]} == {"eq", "ne", "exists"}
    assert set(OPS_BY_TYPE) == set(TYPE_NAMES)
    with pytest.raises(TypeError):
        OPS_BY_TYPE["int"] = frozenset()  # type: ignore[index]


# --- coerce ----------------------------------------------------------------------

T = ValueType.parse


@pytest.mark.parametrize(
    ("raw", "spec", "expected"),
    [
        (20, "int", 20),
        (-(10**30), "int", -(10**30)),
        (20, "float", 20.0),
        (0.8, "float", 0.8),
        (Decimal("0.25"), "float", 0.25),
        (True, "bool", True),
        ("eu-west-1", "string", "eu-west-1"),
        ("", "string", ""),
        ("replica", "enum[primary,replica]", "replica"),
        ("v15.6", "version", Version((15, 6))),
        ("15.6", "version", Version((15, 6))),
        ("15", "version", Version((15, 0))),
        (Version((1, 2)), "version", Version((1, 2))),
        ("5m", "duration", Duration(300)),
        ("250ms", "duration", Duration(Decimal("0.25"))),
        (300, "duration", Duration(300)),
        (0.25, "duration", Duration(Decimal("0.25"))),
        (Duration(3), "duration", Duration(3)),
        ("2026-03-01T09:00:00Z", "timestamp", datetime(2026, 3, 1, 9, tzinfo=UTC)),
        ("2026-03-01T10:00:00+01:00", "timestamp", datetime(2026, 3, 1, 9, tzinfo=UTC)),
        (
            datetime(2026, 3, 1, 10, tzinfo=timezone(timedelta(hours=1))),
            "timestamp",
            datetime(2026, 3, 1, 9, tzinfo=UTC),
        ),
    ],
)
def test_coerce_accepts(raw: object, spec: str, expected: object) -> None:
    value = coerce(raw, T(spec))
    assert value == expected
    assert type(value) is type(expected)


def test_coerced_timestamps_are_utc() -> None:
    value = coerce("2026-03-01T10:00:00+01:00", T("timestamp"))
    assert isinstance(value, datetime)
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    ("raw", "spec"),
    [
        (True, "int"),
        (False, "float"),
        ("20", "int"),
        (20.0, "int"),
        ("0.8", "float"),
        (float("nan"), "float"),
        (float("inf"), "float"),
        (10**400, "float"),
        (1, "bool"),
        ("true", "bool"),
        (5, "string"),
        ("a\x00b", "string"),
        ("\ud800", "string"),
        ("master", "enum[primary,replica]"),
        (1, "enum[primary,replica]"),
        (15.6, "version"),
        (15, "version"),
        ("15.x", "version"),
        ("v15.6-rc1", "version"),
        ("", "version"),
        ("5 minutes", "duration"),
        (-1, "duration"),
        (True, "duration"),
        (float("nan"), "duration"),
        (10**10, "duration"),
        ("-5m", "duration"),
        (datetime(2026, 3, 1, 9), "timestamp"),
        ("2026-03-01T09:00:00", "timestamp"),
        ("2026-03-01", "timestamp"),
        (1772355600, "timestamp"),
        (None, "int"),
        ([1], "int"),
    ],
)
def test_coerce_refuses(raw: object, spec: str) -> None:
    vtype = T(spec)
    with pytest.raises(ValueTypeError) as info:
        coerce(raw, vtype)
    err = info.value
    assert err.code == "fact_type_mismatch"
    assert err.detail["expected"] == str(vtype)
    assert err.detail["value"] == repr(raw)[:200] or err.detail["value"].endswith("...")
    assert str(vtype) in err.message


@given(st.integers())
def test_an_int_is_a_valid_float_but_a_float_is_never_an_int(n: int) -> None:
    try:
        as_float = float(n)
    except OverflowError:
        return
    assert coerce(n, T("float")) == as_float
    with pytest.raises(ValueTypeError):
        coerce(as_float, T("int"))


@given(st.booleans())
def test_bool_is_not_a_number(b: bool) -> None:
    for spec in ("int", "float", "duration"):
        with pytest.raises(ValueTypeError):
            coerce(b, T(spec))


# --- versions ----------------------------------------------------------------------


def test_version_ordering_is_numeric_per_segment() -> None:
    assert Version((15, 10)) > Version((15, 9))
    assert Version((15,)) == Version((15, 0)) == Version((15, 0, 0))
    assert hash(Version((15,))) == hash(Version((15, 0)))
    assert Version((15, 0, 1)) > Version((15,))
    assert Version((2,)) < Version((10,))
    assert str(Version((15, 10, 2))) == "v15.10.2"


@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=4),
    st.lists(st.integers(0, 30), min_size=1, max_size=4),
)
def test_version_order_matches_zero_padded_tuples(a: list[int], b: list[int]) -> None:
    width = max(len(a), len(b))
    pa, pb = tuple(a + [0] * (width - len(a))), tuple(b + [0] * (width - len(b)))
    assert (Version(a) < Version(b)) == (pa < pb)
    assert (Version(a) == Version(b)) == (pa == pb)


@pytest.mark.parametrize("bad", [(), (-1,), (1.5,), (True,), "15.4"])
def test_invalid_versions(bad: Any) -> None:
    with pytest.raises(ValueTypeError):
        Version(bad)


# --- check_type ----------------------------------------------------------------------


def _check(text: str, spec: str) -> None:
    check_type(parse(text), T(spec))


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("x gte 200", "int"),
        ("x in [1, 2]", "int"),
        ("x gte 0.8", "float"),
        ("x gte 200", "float"),
        ("x in [1, 2.5]", "float"),
        ("x eq true", "bool"),
        ("x ne false", "bool"),
        ('x eq "a"', "string"),
        ('x lt "a"', "string"),
        ('x contains "a"', "string"),
        ('x matches "^a[0-9]+$"', "string"),
        ('x eq "replica"', "enum[primary,replica]"),
        ('x in ["replica", "primary"]', "enum[primary,replica]"),
        ("x lt v15.10", "version"),
        ("x gte 5m", "duration"),
        ("x in [5m, 1h]", "duration"),
        ("x gt 2026-03-01T09:00:00Z", "timestamp"),
        ("x exists", "int"),
        ("x exists", "bool"),
        ("x exists", "enum[a]"),
    ],
)
def test_well_typed_predicates_pass(text: str, spec: str) -> None:
    _check(text, spec)


@pytest.mark.parametrize(
    ("text", "spec", "fragment"),
    [
        ('x matches "a"', "int", "operator `matches` is not defined"),
        ('x contains "a"', "enum[a]", "operator `contains` is not defined"),
        ("x lt true", "bool", "operator `lt` is not defined"),
        ("x in [true]", "bool", "operator `in` is not defined"),
        ("x lt 3", "enum[a]", "operator `lt` is not defined"),
        ('x eq "20"', "int", 'the value "20"'),
        ("x eq 2.5", "int", "the value 2.5"),
        ("x eq 2.0", "int", "a decimal"),
        ("x eq true", "int", "a bool"),
        ("x in [1, 2.5]", "int", "the value 2.5"),
        ('x eq "0.8"', "float", "a quoted string"),
        ("x eq true", "float", "a bool"),
        ("x eq 1", "bool", "an int"),
        ("x eq 1", "string", "an int"),
        ('x eq "master"', "enum[primary,replica]", "not one of the choices"),
        ('x in ["primary", "master"]', "enum[primary,replica]", '"master"'),
        ('x eq "v15"', "version", "unquoted"),
        ("x eq 15", "version", "an int"),
        ("x gte 300", "duration", "need a unit"),
        ('x gte "5m"', "duration", "a quoted string"),
        ('x gt "2026-03-01T09:00:00Z"', "timestamp", "unquoted"),
        ("x gt 5m", "timestamp", "a duration"),
        ("x eq " + "9" * 400, "float", "out of the range"),
    ],
)
def test_ill_typed_predicates_fail_with_a_clear_message(
    text: str, spec: str, fragment: str
) -> None:
    with pytest.raises(PredicateTypeError) as info:
        _check(text, spec)
    err = info.value
    assert err.code == "condition_type_mismatch"
    assert fragment in err.message
    assert "`x" in err.message
    assert err.detail["attribute"] == "x"
    assert err.detail["operator"] == parse(text).op.value
    assert err.detail["expected"] == str(T(spec))
    assert str(T(spec)) in err.message


def test_type_error_names_the_entity_attribute() -> None:
    with pytest.raises(PredicateTypeError) as info:
        _check('@payments-db:config.max_connections gte "many"', "int")
    assert "@payments-db:config.max_connections" in info.value.message
    assert info.value.detail["value"] == '"many"'


def test_every_op_type_pair_is_either_accepted_or_a_type_error() -> None:
    samples = {
        "int": "1",
        "float": "1.5",
        "bool": "true",
        "string": '"a"',
        "enum": '"a"',
        "version": "v1",
        "duration": "1s",
        "timestamp": "2026-03-01T09:00:00Z",
    }
    for name, literal in samples.items():
        vtype = T("enum[a]") if name == "enum" else T(name)
        for op in Op:
            if op is Op.EXISTS:
                text = "x exists"
            elif op in (Op.IN, Op.NOT_IN):
                text = f"x {op.value} [{literal}]"
            elif op in (Op.CONTAINS, Op.MATCHES):
                text = f'x {op.value} "a"'
            else:
                text = f"x {op.value} {literal}"
            if op in OPS_BY_TYPE[name]:
                check_type(parse(text), vtype)
            else:
                with pytest.raises(PredicateTypeError):
                    check_type(parse(text), vtype)
