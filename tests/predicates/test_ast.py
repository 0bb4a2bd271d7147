"""AST construction: validation and normalisation keep every Predicate printable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from predicates import Attribute, Duration, Op, Predicate, Version, parse, to_text
from predicates.errors import InputError

X = Attribute(None, "x")


@pytest.mark.parametrize(
    ("op", "value"),
    [
        (Op.EXISTS, 1),
        (Op.IN, 1),
        (Op.IN, ()),
        (Op.NOT_IN, "ab"),
        (Op.EQ, None),
        (Op.EQ, (1, 2)),
        (Op.EQ, [1]),
        (Op.CONTAINS, 5),
        (Op.MATCHES, Version((1,))),
        (Op.MATCHES, "\\d+"),
        (Op.EQ, float("nan")),
        (Op.EQ, Decimal("Infinity")),
        (Op.EQ, datetime(2026, 3, 1)),
        (Op.EQ, "nul\x00"),
        (Op.EQ, object()),
        (Op.IN, ((1,),)),
        (Op.EQ, 10**1000),
        (Op.EQ, "x" * 10_000),
        ("between", 1),
    ],
)
def test_invalid_shapes_are_refused(op: Any, value: Any) -> None:
    with pytest.raises(InputError) as info:
        Predicate(X, op, value)
    assert info.value.code == "condition_unparsable"


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (None, ""),
        (None, "a..b"),
        (None, "1abc"),
        (None, "a.*.b"),
        (None, "a b"),
        ("", "x"),
        ("a:b", "x"),
        ("a b", "x"),
        ("-lead", "x"),
    ],
)
def test_invalid_attributes_are_refused(entity: Any, path: Any) -> None:
    with pytest.raises(InputError):
        Attribute(entity, path)


def test_values_are_normalised() -> None:
    assert Predicate(X, "eq", 0.8).value == Decimal("0.8")
    assert Predicate(X, Op.IN, [3, 1, 3]).value == (1, 3)
    ts = Predicate(X, Op.EQ, datetime(2026, 3, 1, 10, tzinfo=timezone(timedelta(hours=1)))).value
    assert ts == datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert isinstance(ts, datetime) and ts.tzinfo is UTC
    assert Predicate(X, "eq", 1).op is Op.EQ


def test_equality_distinguishes_literal_kinds() -> None:
    assert Predicate(X, Op.EQ, 1) != Predicate(X, Op.EQ, True)
    assert Predicate(X, Op.EQ, 1) != Predicate(X, Op.EQ, Decimal(1))
    assert Predicate(X, Op.EQ, Duration(60)) == Predicate(X, Op.EQ, Duration(Decimal("60.0")))
    assert len({Predicate(X, Op.EQ, 1), Predicate(X, Op.EQ, True), Predicate(X, Op.EQ, 1)}) == 2


def test_predicates_are_immutable() -> None:
    p = Predicate(X, Op.EQ, 1)
    with pytest.raises(AttributeError):
        p.value = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Duration(1).micros = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Version((1,)).parts = (2,)  # type: ignore[misc]


def test_long_but_valid_predicates_round_trip() -> None:
    p = Predicate(X, Op.IN, tuple(range(1500)))
    assert parse(to_text(p)) == p
    big = Predicate(X, Op.EQ, 10**999)
    assert parse(to_text(big)) == big
    tiny = Predicate(X, Op.EQ, Decimal("1E-999"))
    assert parse(to_text(tiny)) == tiny


def test_str_is_the_canonical_text() -> None:
    p = parse('@db:x   in ["b",  "a"]')
    assert str(p) == to_text(p) == '@db:x in ["a", "b"]'
    assert str(Attribute("db", "x.y")) == "@db:x.y"
