"""The bundled scenarios of issue 23: the guard agrees with recall, failed checks are
recorded, and replay warns about items an event re-opens only through their conditions."""

from __future__ import annotations

from pathlib import Path

import pytest

from caveat.replay import ScenarioResult, load_scenario, render_text, run_scenario, to_json

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def _replay(name: str, pg_server_url: str, template_db: str) -> ScenarioResult:
    path = SCENARIOS / f"{name}.yaml"
    return run_scenario(
        load_scenario(path),
        path=str(path),
        server_url=pg_server_url,
        template=template_db,
        embedder=None,
    )


@pytest.mark.parametrize("name", ["guard-agrees-with-recall", "verify-on-next-use"])
def test_the_scenario_passes(name: str, pg_server_url: str, template_db: str) -> None:
    res = _replay(name, pg_server_url, template_db)
    assert res.ok, [f.describe() for f in res.failures] or res.error


def test_replay_warns_about_an_item_reopened_only_through_its_conditions(
    pg_server_url: str, template_db: str
) -> None:
    res = _replay("guard-agrees-with-recall", pg_server_url, template_db)
    [warning] = res.warnings
    assert "deploy event re-opened precedent" in warning
    assert "failure_mechanism" in warning and "through its conditions" in warning
    assert "config.connection_pool.max of payment-api" in warning
    [event] = [s for s in res.steps if s.action == "event"]
    assert event.result["by_conditions"] == ["precedent"]
    assert f"  warning: {warning}" in render_text([res]).splitlines()
    [scenario] = to_json([res])["scenarios"]  # type: ignore[index, misc]
    assert scenario["warnings"] == [warning]
    assert res.ok  # a warning fails nothing


def test_no_warning_for_what_the_content_type_triggers(
    pg_server_url: str, template_db: str
) -> None:
    """expiry-by-deploy: the deploy re-opens a configuration item, which it triggers."""
    res = _replay("expiry-by-deploy", pg_server_url, template_db)
    assert res.ok and res.warnings == ()
