"""The schema registry: exact names, ``*`` segments, suggestions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from factgen import AttributeSpec, SchemaRegistry
from predicates import ValueType
from predicates.errors import InputError, UnknownAttribute


def _reg() -> SchemaRegistry:
    return SchemaRegistry(
        [
            AttributeSpec("config.connection_pool.max", ValueType.parse("int")),
            AttributeSpec(
                "metrics.*.p99_ms", ValueType.parse("float"), max_age=timedelta(minutes=5)
            ),
            AttributeSpec("metrics.pool_utilisation", ValueType.parse("float")),
        ]
    )


def test_exact_and_star_lookup() -> None:
    reg = _reg()
    assert reg.require("config.connection_pool.max").vtype.name == "int"
    assert reg.require("metrics.checkout.p99_ms").attribute == "metrics.*.p99_ms"


def test_star_matches_exactly_one_segment() -> None:
    reg = _reg()
    assert reg.get("metrics.p99_ms") is None
    assert reg.get("metrics.a.b.p99_ms") is None


def test_exact_declaration_wins_over_pattern() -> None:
    reg = _reg()
    reg.add(AttributeSpec("metrics.special.p99_ms", ValueType.parse("int")))
    assert reg.require("metrics.special.p99_ms").vtype.name == "int"
    assert reg.require("metrics.other.p99_ms").vtype.name == "float"


def test_unknown_attribute_suggests_the_near_one() -> None:
    with pytest.raises(UnknownAttribute) as err:
        _reg().require("config.conection_pool.max")
    assert err.value.code == "fact_unknown_attribute"
    assert "config.connection_pool.max" in err.value.detail["suggestions"]


@pytest.mark.parametrize("bad", ["config..max", "config.max-pool", "", "1abc.x"])
def test_invalid_attribute_names_are_refused(bad: str) -> None:
    with pytest.raises(InputError):
        AttributeSpec(bad, ValueType.parse("int"))
