"""G4's shape rules as pure functions: what counts as a rule."""

from __future__ import annotations

import pytest

from claims import is_rule_attribute, is_rule_text


@pytest.mark.parametrize(
    "attribute",
    [
        "fix_method",
        "fix_pool",
        "restart_method",
        "rollback_procedure",
        "how_to_recover",
        "should_restart",
        "must_page",
        "recommended_action",
        "best_practice",
        "always_drain",
        "never_scale",
        "remedy",
        "workaround",
        "action",
    ],
)
def test_rule_attributes(attribute: str) -> None:
    assert is_rule_attribute(attribute)


@pytest.mark.parametrize(
    "attribute",
    [
        "restart_restored_service_at",
        "lag_returned_within_s",
        "transaction",
        "methodology_note",
        "fixed_version",
        "actions_taken_count",
    ],
)
def test_observation_attributes(attribute: str) -> None:
    assert not is_rule_attribute(attribute)


@pytest.mark.parametrize(
    "text",
    [
        "restart",
        "Restart",
        "roll back",
        "drain node",
        "you should restart the pool",
        "always page the DBA",
        "never scale below 3",
        "do not restart",
        "must flush",
    ],
)
def test_instructions(text: str) -> None:
    assert is_rule_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "restarted at 09:14",
        "E-1041",
        "pool exhausted at max 20",
        "",
        "restart restored p99 within two minutes after the pool drained",
    ],
)
def test_observed_values(text: str) -> None:
    assert not is_rule_text(text)
