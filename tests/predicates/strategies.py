"""Hypothesis strategies and seeded generators for predicate tests."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from predicates import Attribute, Duration, Op, Predicate, Version
from predicates._values import MAX_DURATION_SECONDS

# --- ASTs --------------------------------------------------------------------

segments = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
paths = st.lists(segments, min_size=1, max_size=4).map(".".join)
entities = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,10}", fullmatch=True)
attributes = st.builds(Attribute, st.none() | entities, paths)

ints = st.integers(min_value=-(10**6), max_value=10**6) | st.integers(
    min_value=-(10**40), max_value=10**40
)
decimals = st.decimals(allow_nan=False, allow_infinity=False, max_value=10**30, min_value=-(10**30))
texts = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
durations = st.integers(min_value=0, max_value=MAX_DURATION_SECONDS * 1_000_000).map(
    Duration.from_micros
)
versions = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=5).map(Version)
timestamps = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
offset_timestamps = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.builds(
        lambda m: timezone(timedelta(minutes=m)),
        st.integers(min_value=-23 * 60, max_value=23 * 60),
    ),
)
scalars = st.one_of(
    ints, decimals, texts, st.booleans(), durations, versions, timestamps, offset_timestamps
)


def _pattern_atoms(draw: Any) -> str:
    return draw(
        st.sampled_from(
            ["a", "b", "é", ".", "[ab]", "[^a]", "[a-c]", "\\.", "\\n", "x", "\\[", "[\\]\\-]"]
        )
    )


@st.composite
def patterns(draw: Any, depth: int = 0, anchors: bool = True) -> str:
    """Random patterns inside the portable regex subset."""
    branches = []
    for _ in range(draw(st.integers(min_value=1, max_value=2 if depth < 2 else 1))):
        parts = []
        if anchors and draw(st.integers(min_value=0, max_value=3)) == 0:
            parts.append("^")
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            if depth < 2 and draw(st.integers(min_value=0, max_value=5)) == 0:
                atom = "(" + draw(patterns(depth=depth + 1, anchors=False)) + ")"
            else:
                atom = _pattern_atoms(draw)
            quant = draw(st.sampled_from(["", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}"]))
            parts.append(atom + quant)
        if anchors and draw(st.integers(min_value=0, max_value=3)) == 0:
            parts.append("$")
        branches.append("".join(parts))
    return "|".join(branches)


@st.composite
def predicates(draw: Any) -> Predicate:
    """Any valid predicate AST."""
    attr = draw(attributes)
    op = draw(st.sampled_from(list(Op)))
    value: Any
    if op is Op.EXISTS:
        value = None
    elif op in (Op.IN, Op.NOT_IN):
        value = tuple(draw(st.lists(scalars, min_size=1, max_size=4)))
    elif op is Op.MATCHES:
        value = draw(patterns())
    elif op is Op.CONTAINS:
        value = draw(texts)
    else:
        value = draw(scalars)
    return Predicate(attr, op, value)


# --- Seeded typed pools for the differential tests ----------------------------

FLOAT_POOL = [
    0.0,
    -0.0,
    0.1,
    0.2,
    0.3,
    0.30000000000000004,
    1.0,
    2.5,
    -1.5,
    1e-7,
    5e-324,
    1e16,
    1e300,
    float(2**53),
    float(2**53 + 2),
    123456789.123,
]
FLOAT_LITERALS: list[int | Decimal] = [
    *(Decimal(repr(f)) for f in FLOAT_POOL),
    0,
    1,
    -1,
    3,
    2**53,
    2**53 + 1,
    10**20,
    Decimal("0.1000000000000000000001"),
    Decimal("0.30000000000000001"),
    Decimal("2.50"),
]
INT_POOL = [-3, -2, -1, 0, 1, 2, 3, 10**20, -(10**20), 2**63]
STRING_ALPHABET = ["a", "b", "é", "\n", "Ω", "😀", "A"]
VERSION_POOL = [(15,), (15, 0), (15, 9), (15, 10), (15, 10, 0), (15, 10, 2), (16,), (0,), (0, 0, 1)]
DURATION_POOL = [
    0,
    1,
    999,
    1_000,
    1_000_000,
    1_500_000,
    60_000_000,
    300_000_000,
    86_400_000_000,
    10**15,
    123_456_789,
]
_T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TIMESTAMP_POOL = [
    _T0,
    _T0 + timedelta(microseconds=1),
    _T0 - timedelta(microseconds=1),
    _T0 + timedelta(days=1),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
]
ENUM_CHOICES = ("primary", "replica", "standby")


def random_string(rng: random.Random, max_len: int = 5) -> str:
    return "".join(rng.choice(STRING_ALPHABET) for _ in range(rng.randint(0, max_len)))


def random_pattern(rng: random.Random, depth: int = 0) -> str:
    """A random pattern inside the portable subset, over the test alphabet."""
    atoms = ["a", "b", "é", "Ω", ".", "[ab]", "[^a]", "[a-é]", "\\n", "\\.", "[\\]a]", "😀"]
    branches = []
    for _ in range(rng.randint(1, 2 if depth < 2 else 1)):
        parts = ["^"] if rng.random() < 0.2 else []
        for _ in range(rng.randint(1, 3)):
            if depth < 2 and rng.random() < 0.15:
                inner = random_pattern(rng, depth + 1)
                atom = f"({'?:' if rng.random() < 0.5 else ''}{inner})"
                if "^" in inner or "$" in inner:
                    parts.append(atom)
                    continue
            else:
                atom = rng.choice(atoms)
            parts.append(atom + rng.choice(["", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}"]))
        if rng.random() < 0.2:
            parts.append("$")
        branches.append("".join(parts))
    return "|".join(branches)


def random_value(rng: random.Random, type_name: str) -> Any:
    """A raw observed value of ``type_name`` (before coerce)."""
    if type_name == "int":
        return rng.choice(INT_POOL)
    if type_name == "float":
        return rng.choice([*FLOAT_POOL, 0, 1, 3, -1, 2**53 + 1])
    if type_name == "bool":
        return rng.random() < 0.5
    if type_name == "string":
        return random_string(rng, 3)
    if type_name == "enum":
        return rng.choice(ENUM_CHOICES)
    if type_name == "version":
        return Version(rng.choice(VERSION_POOL))
    if type_name == "duration":
        return Duration.from_micros(rng.choice(DURATION_POOL))
    return rng.choice(TIMESTAMP_POOL)


def random_literal(rng: random.Random, type_name: str) -> Any:
    """A literal of ``type_name`` as it appears in a Predicate."""
    if type_name == "float":
        return rng.choice(FLOAT_LITERALS)
    return random_value(rng, type_name)
