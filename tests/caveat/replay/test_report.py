"""Text, JSON and JUnit renderings of replay results."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from caveat.replay import (
    Failure,
    ScenarioResult,
    StepRecord,
    exit_status,
    render_text,
    to_json,
    write_junit,
)

AT = datetime(2026, 3, 22, 11, tzinfo=UTC)


def _step(index: int, line: int, action: str, *, ok: bool = True) -> StepRecord:
    return StepRecord(
        index=index,
        line=line,
        action=action,
        at=AT,
        actor="agent-ir",
        summary=f"{action} happened",
        ok=ok,
        result={"items": ["pool-restart"], "at": AT, "ttl": timedelta(hours=1), "n": 1.5},
    )


PASSED = ScenarioResult(
    path="scenarios/write-gate.yaml",
    name="write-gate",
    steps=(_step(0, 14, "open_case"), _step(1, 15, "evidence")),
    failures=(),
    duration_s=0.25,
)
FAILED = ScenarioResult(
    path="scenarios/pool-max-change.yaml",
    name="pool-max-change",
    steps=(_step(0, 20, "open_case"), _step(12, 61, "recall", ok=False)),
    failures=(
        Failure(12, 61, "recall", "exclude", ["pool-restart"], ["pool-restart", "other"]),
        Failure(12, 61, "recall", "withheld[pool-restart]", "applicability", None),
    ),
    duration_s=1.5,
)
BROKEN = ScenarioResult(
    path="scenarios/broken.yaml",
    name="broken",
    steps=(),
    failures=(),
    duration_s=0.0,
    error="scenarios/broken.yaml:3:1: scenario: unknown key 'colour'\x00",
)


def test_ok() -> None:
    assert PASSED.ok
    assert not FAILED.ok
    assert not BROKEN.ok


def test_exit_status() -> None:
    assert exit_status([PASSED]) == 0
    assert exit_status([PASSED, FAILED]) == 1
    assert exit_status([PASSED, FAILED, BROKEN]) == 2
    assert exit_status([]) == 0


def test_render_text() -> None:
    text = render_text([PASSED, FAILED, BROKEN])
    lines = text.splitlines()
    assert lines[0] == "PASS write-gate (scenarios/write-gate.yaml, 2 steps)"
    assert lines[1] == "FAIL pool-max-change (scenarios/pool-max-change.yaml, 2 steps)"
    assert lines[2] == (
        "  step 13 (line 61, recall): exclude: expected [pool-restart], got [pool-restart, other]"
    )
    assert lines[3] == (
        "  step 13 (line 61, recall): withheld[pool-restart]: expected applicability, got null"
    )
    assert lines[4] == "FAIL broken (scenarios/broken.yaml, 0 steps)"
    assert lines[5].startswith("  error: scenarios/broken.yaml:3:1: scenario: unknown key")
    assert lines[-1] == "1 passed, 2 failed"
    assert text.endswith("\n")


def test_render_text_counts() -> None:
    assert render_text([]).splitlines() == ["0 passed, 0 failed"]
    assert render_text([PASSED, PASSED]).splitlines()[-1] == "2 passed, 0 failed"
    one = ScenarioResult("a.yaml", "a", (_step(0, 1, "observe"),), (), 0.1)
    assert render_text([one]).splitlines()[0] == "PASS a (a.yaml, 1 step)"


def test_failure_describe_renders_values() -> None:
    failure = Failure(3, 26, "write", "outcome", "accepted", {"code": "G1", "ok": False})
    assert failure.describe() == (
        "step 4 (line 26, write): outcome: expected accepted, got {code: G1, ok: false}"
    )


def test_to_json_round_trips_through_json() -> None:
    report = to_json([PASSED, FAILED, BROKEN])
    loaded = json.loads(json.dumps(report, allow_nan=False))
    assert loaded == report
    assert loaded["totals"] == {
        "scenarios": 3,
        "passed": 1,
        "failed": 2,
        "errors": 1,
        "failures": 2,
        "steps": 4,
        "duration_s": 1.75,
    }
    assert loaded["exit_status"] == 2
    pool = loaded["scenarios"][1]
    assert pool["name"] == "pool-max-change" and pool["ok"] is False
    assert pool["steps"][1] == {
        "index": 12,
        "line": 61,
        "action": "recall",
        "at": "2026-03-22T11:00:00Z",
        "actor": "agent-ir",
        "summary": "recall happened",
        "ok": False,
        "result": {"items": ["pool-restart"], "at": "2026-03-22T11:00:00Z", "ttl": "1h", "n": 1.5},
    }
    assert pool["failures"][0]["expectation"] == "exclude"
    assert pool["failures"][0]["expected"] == ["pool-restart"]
    assert pool["failures"][1]["got"] is None
    assert loaded["scenarios"][2]["error"].startswith("scenarios/broken.yaml:3:1:")


def test_to_json_makes_odd_values_json_ready() -> None:
    odd = ScenarioResult(
        "odd.yaml",
        "odd",
        (),
        (Failure(0, 1, "recall", "count", {1, 2}, float("nan")),),
        0.0,
    )
    failure = to_json([odd])["scenarios"][0]["failures"][0]  # type: ignore[index]
    assert failure["expected"] == [1, 2]
    assert failure["got"] == "nan"
    json.dumps(to_json([odd]), allow_nan=False)


def test_write_junit(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit([PASSED, FAILED, BROKEN], path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["write-gate", "pool-max-change", "broken"]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("2 expectations failed: step 13 (line 61")
    assert failure.text is not None and len(failure.text.splitlines()) == 2
    assert "withheld[pool-restart]: expected applicability, got null" in failure.text
    assert cases[1].get("time") == "1.500"
    error = cases[2].find("error")
    assert error is not None and "unknown key 'colour'" in error.get("message", "")
    assert "\x00" not in (error.text or "")
    out = cases[1].find("system-out")
    assert out is not None and out.text is not None
    assert "step 13 (line 61, recall) at 2026-03-22T11:00:00Z as agent-ir" in out.text


@pytest.mark.parametrize("results", [[], [PASSED]])
def test_write_junit_small_runs(tmp_path: Path, results: list[ScenarioResult]) -> None:
    path = tmp_path / "junit.xml"
    write_junit(results, path)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == str(len(results)) and suite.get("failures") == "0"
