"""JSON encoding of typed values and condition documents."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predicates import (
    Duration,
    ValueType,
    Version,
    coerce,
    compile_predicate,
    condition_json,
    decode,
    encode,
    parse,
)
from predicates.errors import ValueTypeError
from tests.predicates.strategies import durations, timestamps, versions

T = ValueType.parse


@pytest.mark.parametrize(
    ("raw", "spec", "expected"),
    [
        (20, "int", {"t": "int", "v": 20}),
        (20, "float", {"t": "float", "v": 20.0}),
        (0.8, "float", {"t": "float", "v": 0.8}),
        (True, "bool", {"t": "bool", "v": True}),
        ("a", "string", {"t": "string", "v": "a"}),
        ("a", "enum[a,b]", {"t": "enum", "v": "a"}),
        ("v15.10.0", "version", {"t": "version", "v": [15, 10]}),
        ("5m", "duration", {"t": "duration", "v": 300}),
        ("250ms", "duration", {"t": "duration", "v": 0.25}),
        ("1970-01-01T00:00:01.5Z", "timestamp", {"t": "timestamp", "v": 1_500_000}),
    ],
)
def test_encode(raw: Any, spec: str, expected: dict[str, Any]) -> None:
    encoded = encode(raw, T(spec))
    assert encoded == expected
    assert type(encoded["v"]) is type(expected["v"])


def test_encode_refuses_mistyped_values() -> None:
    with pytest.raises(ValueTypeError):
        encode("20", T("int"))


def _roundtrip(raw: Any, spec: str) -> None:
    vtype = T(spec)
    encoded = encode(raw, vtype)
    value, decoded_type = decode(json.loads(json.dumps(encoded)))
    assert value == coerce(raw, vtype)
    assert type(value) is type(coerce(raw, vtype))
    assert decoded_type.name == vtype.name


@given(st.integers())
def test_int_roundtrip(n: int) -> None:
    _roundtrip(n, "int")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_roundtrip(x: float) -> None:
    _roundtrip(x, "float")


@given(durations)
def test_duration_roundtrip_is_exact(d: Duration) -> None:
    _roundtrip(d, "duration")


@given(versions)
def test_version_roundtrip(v: Version) -> None:
    _roundtrip(v, "version")


@given(timestamps)
def test_timestamp_roundtrip(ts: datetime) -> None:
    _roundtrip(ts, "timestamp")


@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00")))
def test_string_roundtrip(s: str) -> None:
    _roundtrip(s, "string")


def test_decode_enum_has_no_choices() -> None:
    value, vtype = decode({"t": "enum", "v": "replica"})
    assert value == "replica"
    assert vtype == ValueType("enum")
    assert str(vtype) == "enum"


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"t": "int"},
        {"v": 1},
        {"t": "integer", "v": 1},
        {"t": "int", "v": 1.5},
        {"t": "int", "v": True},
        {"t": "float", "v": "1"},
        {"t": "version", "v": "15.4"},
        {"t": "version", "v": [15, -1]},
        {"t": "duration", "v": "5m"},
        {"t": "duration", "v": -1},
        {"t": "timestamp", "v": "2026-03-01T09:00:00Z"},
        {"t": "timestamp", "v": 10**20},
        {"t": "bool", "v": 1},
        [1, 2],
        None,
    ],
)
def test_decode_refuses_garbage(bad: Any) -> None:
    with pytest.raises(ValueTypeError):
        decode(bad)


def test_condition_json() -> None:
    c = compile_predicate(parse("@payments-db:config.max gte 200"), T("float"))
    assert condition_json(c) == {
        "op": "gte",
        "t": "float",
        "v": 200.0,
        "a": "config.max",
        "e": "payments-db",
    }
    resolved = condition_json(c, resolve_entity=lambda name: f"svc:{name}")
    assert resolved["e"] == "svc:payments-db"


def test_condition_json_lists_and_exists() -> None:
    members = compile_predicate(parse("x in [v15, v14.2]"), T("version"))
    assert condition_json(members) == {
        "op": "in",
        "t": "version",
        "v": [[14, 2], [15]],
        "a": "x",
        "e": None,
    }
    exists = compile_predicate(parse("x exists"), T("timestamp"))
    assert condition_json(exists)["v"] is None


def test_condition_json_is_json_serialisable_for_every_type() -> None:
    samples = {
        "int": "x eq 1",
        "float": "x eq 0.1",
        "bool": "x eq true",
        "string": 'x matches "^a"',
        "enum[a,b]": 'x in ["a", "b"]',
        "version": "x gt v1.2",
        "duration": "x lt 1500ms",
        "timestamp": "x gte 2026-03-01T09:00:00.5Z",
    }
    for spec, text in samples.items():
        doc = condition_json(compile_predicate(parse(text), T(spec)))
        assert json.loads(json.dumps(doc)) == doc


def test_float_literals_are_encoded_as_the_double_they_compare_as() -> None:
    c = compile_predicate(parse("x eq 0.1000000000000000000001"), T("float"))
    assert condition_json(c)["v"] == 0.1
    assert encode(Decimal("0.25"), T("float"))["v"] == 0.25
    assert encode(datetime(1, 1, 1, tzinfo=UTC), T("timestamp"))["v"] == -62135596800000000
