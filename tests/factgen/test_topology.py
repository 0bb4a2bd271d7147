"""Topology neighbour queries: depth, direction, relations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factgen import Topology
from predicates.errors import InputError

EDGES = [
    ("checkout", "depends_on", "payment-api"),
    ("payment-api", "depends_on", "payments-db"),
    ("payment-api", "runs_on", "node-1"),
    ("payments-db", "runs_on", "node-2"),
    ("ledger", "depends_on", "payments-db"),
]


def test_neighbours_with_distances_in_both_directions() -> None:
    topo = Topology(EDGES)
    assert topo.neighbours("payment-api") == {"checkout": 1, "payments-db": 1, "node-1": 1}
    assert topo.neighbours("payment-api", depth=2) == {
        "checkout": 1,
        "payments-db": 1,
        "node-1": 1,
        "node-2": 2,
        "ledger": 2,
    }


def test_direction_and_relations_narrow_the_walk() -> None:
    topo = Topology(EDGES)
    assert topo.neighbours("payment-api", depth=3, direction="out") == {
        "payments-db": 1,
        "node-1": 1,
        "node-2": 2,
    }
    assert topo.neighbours("payments-db", depth=3, direction="in") == {
        "payment-api": 1,
        "ledger": 1,
        "checkout": 2,
    }
    assert topo.neighbours("checkout", depth=5, relations={"depends_on"}, direction="out") == {
        "payment-api": 1,
        "payments-db": 2,
    }
    assert topo.neighbours("unknown") == {}
    assert topo.neighbours("payment-api", depth=0) == {}
    with pytest.raises(InputError):
        topo.neighbours("payment-api", direction="up")  # type: ignore[arg-type]
    assert "payment-api" in topo and "nowhere" not in topo
    assert topo.edges()[0] == ("checkout", "depends_on", "payment-api")


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.sampled_from("xy"), st.sampled_from("abcdef")),
        max_size=12,
    ),
    st.sampled_from("abcdef"),
    st.integers(min_value=0, max_value=4),
)
def test_neighbours_agree_with_the_neighbourhood(
    edges: list[tuple[str, str, str]], start: str, depth: int
) -> None:
    topo = Topology(edges)
    found = topo.neighbours(start, depth=depth)
    assert set(found) | {start} == topo.neighbourhood([start], depth)
    assert all(1 <= d <= depth for d in found.values())
