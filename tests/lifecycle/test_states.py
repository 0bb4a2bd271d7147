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


def test_docs_show_the_transition_table_of_the_code() -> None:
    from pathlib import Path

    from lifecycle import diagram

    doc = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text()
    assert diagram.generated_block() in doc
    assert diagram.replace_block(doc) == doc
    for action, (sources, target) in TRANSITIONS.items():
        for s in sources:
            assert f"    {s} --> {target}: {action}\n" in doc
    drifted = doc.replace("| `graduate` | `shadow` |", "| `graduate` | `case` |")
    assert diagram.replace_block(drifted) != drifted
    assert (
        diagram.main(
            ["--check", str(Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md")]
        )
        == 0
    )


def test_events_never_lead_to_active() -> None:
    from lifecycle import EVENT_ACTIONS

    assert EVENT_ACTIONS and all(TRANSITIONS[a][1] is not State.ACTIVE for a in EVENT_ACTIONS)


def test_illegal_transition_names_state_and_action() -> None:
    with pytest.raises(IllegalTransition) as err:
        decide("check_passed", "active")
    assert "check passed" in err.value.message and "'active'" in err.value.message
    assert err.value.detail == {"action": "check_passed", "state": "active"}
