"""The snapshot's fast path (type tag + text from PostgreSQL) decodes exactly like ``decode``."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

import factgen
from factgen._snapshot import decode_text
from predicates import TYPE_NAMES, ValueType, coerce, decode, encode
from predicates.errors import ValueTypeError
from tests.conftest import ADMIN, T0, Store
from tests.predicates.strategies import random_value


def test_every_type_round_trips_through_the_store(store: Store) -> None:
    rng = random.Random(20261130)
    specs, expected = [], {}
    for name in TYPE_NAMES:
        vtype = ValueType("enum", ("a", "b-c", "d.e")) if name == "enum" else ValueType(name)
        for i in range(60):
            attribute = f"roundtrip.{name}.v{i}"
            specs.append(factgen.AttributeSpec(attribute, vtype))
            raw = rng.choice(["a", "b-c", "d.e"]) if name == "enum" else random_value(rng, name)
            expected[attribute] = (coerce(raw, vtype), name)
    with store.sessions.begin() as s:
        factgen.declare_attributes(actor=ADMIN, session=s, tenant=store.tenant, specs=specs)
    store.observe(T0, *[("payment-api", a, v) for a, (v, _) in expected.items()])
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        snap = factgen.build_snapshot(
            session=s, world=world, subjects=["payment-api"], at=T0 + timedelta(seconds=1)
        )
    for attribute, (value, name) in expected.items():
        entry = snap.get("payment-api", attribute)
        assert entry is not None, attribute
        assert entry.vtype.name == name
        assert entry.value == value and type(entry.value) is type(value), (attribute, value)
        assert decode(encode(entry.value, entry.vtype))[0] == value


@pytest.mark.parametrize(
    ("tag", "kind", "text"),
    [
        ("int", "number", "20.5"),
        ("int", "string", "20"),
        ("string", "number", "20"),
        ("bool", "string", "true"),
        ("version", "string", "15.4"),
        ("float", "string", "NaN"),
        ("timestamp", "number", "1e300"),
        ("nope", "number", "1"),
        (None, None, None),
    ],
)
def test_what_decode_refuses_the_fast_path_refuses(
    tag: str | None, kind: str | None, text: str | None
) -> None:
    with pytest.raises(ValueTypeError):
        decode_text(tag, kind, text)


def test_the_fast_path_agrees_on_well_formed_text() -> None:
    assert decode_text("int", "number", "20") == (20, ValueType("int"))
    assert decode_text("float", "number", "20") == (20.0, ValueType("float"))
    assert decode_text("version", "array", "[15, 10]") == decode({"t": "version", "v": [15, 10]})
    assert decode_text("duration", "number", "0.000123") == decode({"t": "duration", "v": 0.000123})
    assert decode_text("enum", "string", "x") == (("x"), ValueType("enum"))
