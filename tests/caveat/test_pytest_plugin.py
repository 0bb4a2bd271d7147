"""The pytest plugin as a team meets it: a plain ``pytest`` run over scenario files.

Each run is a real pytest subprocess in a scratch directory, with the plugin loaded
through its ``pytest11`` entry point (nothing names it), against the suite's server.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from caveat.replay import load_scenario

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "scenarios" / "write-gate.yaml"


@pytest.fixture
def env(pytester: pytest.Pytester, pg_server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_server_url)
    monkeypatch.setenv("CAVEAT_EMBEDDER", "hashing")


def test_scenario_steps_are_test_items_and_pass(pytester: pytest.Pytester, env: None) -> None:
    pytester.makefile(".yaml", gate=GATE.read_text())
    pytester.makefile(".yaml", unrelated="just: some yaml\n")
    res = pytester.runpytest_subprocess("-v")
    steps = len(load_scenario(GATE).steps)
    res.assert_outcomes(passed=steps)
    res.stdout.fnmatch_lines(["*gate.yaml::step 1 (line *) *PASSED*"])


def test_one_failure_per_broken_expectation(pytester: pytest.Pytester, env: None) -> None:
    text = GATE.read_text()
    broken = text
    broken = re.sub("code: condition_unparsable", "code: condition_type_mismatch", broken, count=1)
    broken = re.sub(r"code: evidence_missing", "code: evidence_unresolved", broken, count=1)
    assert broken != text
    pytester.makefile(".yaml", gate=broken)
    res = pytester.runpytest_subprocess()
    steps = len(load_scenario(GATE).steps)
    res.assert_outcomes(passed=steps - 2, failed=2)
    res.stdout.fnmatch_lines(
        [
            "*code: expected condition_type_mismatch, got condition_unparsable*",
            "*code: expected evidence_unresolved, got evidence_missing*",
        ]
    )


def test_a_malformed_scenario_is_a_collection_error_with_its_line(
    pytester: pytest.Pytester, env: None
) -> None:
    pytester.makefile(".yaml", bad="caveat_scenario: 1\nname: bad\nsteps: 7\n")
    res = pytester.runpytest_subprocess()
    res.assert_outcomes(errors=1)
    res.stdout.re_match_lines([r".*bad\.yaml:1:1: scenario: missing required key 'tenant'$"])
    assert "pytest_plugin.py" not in res.stdout.str()  # no trace through the plugin


def test_each_step_carries_its_own_time_in_the_junit_file(
    pytester: pytest.Pytester, env: None
) -> None:
    """The replay runs when the first step does; its time is apportioned over the steps
    (each its own, plus an equal share of the scenario's fixed cost), so step 1 is not
    the whole replay and the later steps are not zero."""
    pytester.makefile(".yaml", gate=GATE.read_text())
    res = pytester.runpytest_subprocess("--junitxml=out.xml")
    steps = len(load_scenario(GATE).steps)
    res.assert_outcomes(passed=steps)
    cases = ElementTree.parse(pytester.path / "out.xml").getroot().iter("testcase")
    times = {c.get("name", ""): float(c.get("time", "nan")) for c in cases}
    assert len(times) == steps
    ordered = [times[n] for n in sorted(times, key=lambda n: int(n.split()[1]))]
    total = sum(ordered)
    assert total > 0
    assert all(t > 0 for t in ordered), ordered  # every step has a share
    assert ordered[0] < total / 2, ordered  # step 1 is not the replay
    assert max(ordered) < total / 2, ordered


def test_a_scenario_that_cannot_run_shows_its_error_once(
    pytester: pytest.Pytester, env: None
) -> None:
    """A scenario that loads but whose set-up the store refuses (two entities' aliases
    collide): the first step shows the error, the others point to it."""
    entity = "  - {id: payment-api, kind: service, aliases: [payment_api]}\n"
    text = GATE.read_text()
    assert entity in text
    clash = entity + "  - {id: payment-db, kind: database, aliases: [payment_api]}\n"
    pytester.makefile(".yaml", gate=text.replace(entity, clash))
    res = pytester.runpytest_subprocess("-rN")  # the failures, not pytest's own summary
    steps = len(load_scenario(GATE).steps)
    res.assert_outcomes(failed=steps)
    out = res.stdout.str()
    assert out.count("set-up failed: invalid_input: alias 'payment_api'") == 1, out
    assert out.count("not run: the scenario's error is on step 1 (line ") == steps - 1
