"""The transition table as pure data."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle import TRANSITIONS, State, decide
from predicates.errors import IllegalTransition


def test_active_only_from_shadow() -> None:
    assert decide("graduate", "shadow") is State.ACTIVE
    with pytest.raises(IllegalTransition) as err:
        decide("graduate", "case")
    assert err.value.code == "illegal_transition"
    assert err.value.detail == {"action": "graduate", "state": "case"}


@given(st.sampled_from(sorted(TRANSITIONS)), st.sampled_from(list(State)))
def test_decide_is_total_over_the_table(action: str, state: State) -> None:
    sources, target = TRANSITIONS[action]
    if state in sources:
        assert decide(action, state) is target
    else:
        with pytest.raises(IllegalTransition):
            decide(action, state)


def test_nothing_leaves_revoked() -> None:
    for action, (sources, _) in TRANSITIONS.items():
        assert State.REVOKED not in sources, action


def test_no_event_action_returns_to_active() -> None:
    for action in ("expire_affected", "expire_unaffected"):
        assert TRANSITIONS[action][1] is not State.ACTIVE
