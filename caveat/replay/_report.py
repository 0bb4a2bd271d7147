"""Results of replaying scenarios, and their three renderings.

The runner fills ``ScenarioResult``; this module renders it for people
(``render_text``), for programs (``to_json``) and for CI (``write_junit``).
None of the renderings depend on anything but the results, so the same run
always renders the same way (durations appear only in JSON and JUnit).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from pathlib import Path

from pydantic import BaseModel

from caveat.replay._time import format_duration

__all__ = [
    "Failure",
    "ScenarioResult",
    "StepRecord",
    "exit_status",
    "render_text",
    "to_json",
    "write_junit",
]


@dataclass(frozen=True)
class Failure:
    """One expectation that did not hold (or a step that failed unexpectedly)."""

    step_index: int
    step_line: int
    action: str
    expectation: str
    expected: object
    got: object

    def describe(self) -> str:
        """``step N (line L, ACTION): EXPECTATION: expected X, got Y``; N counts from 1."""
        return (
            f"step {self.step_index + 1} (line {self.step_line}, {self.action}):"
            f" {self.expectation}: expected {show(self.expected)}, got {show(self.got)}"
        )


@dataclass(frozen=True)
class StepRecord:
    """What one step did, at which virtual time, as whom."""

    index: int
    line: int
    action: str
    at: datetime
    actor: str
    summary: str
    ok: bool
    result: dict[str, object]
    #: Wall-clock seconds the step took (its share of a JUnit report's time).
    seconds: float = 0.0


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario; ``error`` means it could not be loaded or run."""

    path: str
    name: str
    steps: tuple[StepRecord, ...]
    failures: tuple[Failure, ...]
    duration_s: float
    error: str | None = None
    #: what a scenario author should know but that fails nothing (e.g. an item an event
    #: re-opened only because its conditions name an attribute the event changes)
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every expectation held and nothing went wrong."""
        return not self.failures and self.error is None


def exit_status(results: Sequence[ScenarioResult]) -> int:
    """``caveat replay``'s exit status: 2 if any scenario errored, else 1 if any failed, else 0."""
    if any(result.error is not None for result in results):
        return 2
    return 0 if all(result.ok for result in results) else 1


def render_text(results: Sequence[ScenarioResult]) -> str:
    """A PASS/FAIL line per scenario, a line per failure, then ``N passed, N failed``."""
    lines: list[str] = []
    for result in results:
        steps = len(result.steps)
        noun = "step" if steps == 1 else "steps"
        verdict = "PASS" if result.ok else "FAIL"
        lines.append(f"{verdict} {result.name} ({result.path}, {steps} {noun})")
        if result.error is not None:
            lines.append(f"  error: {result.error}")
        lines.extend(f"  {failure.describe()}" for failure in result.failures)
        lines.extend(f"  warning: {warning}" for warning in result.warnings)
    passed = sum(result.ok for result in results)
    lines.append(f"{passed} passed, {len(results) - passed} failed")
    return "\n".join(lines) + "\n"


def to_json(results: Sequence[ScenarioResult]) -> dict[str, object]:
    """A JSON-ready report (``json.dumps`` accepts it): scenarios, steps, failures, totals."""
    passed = sum(result.ok for result in results)
    return {
        "scenarios": [_scenario_json(result) for result in results],
        "totals": {
            "scenarios": len(results),
            "passed": passed,
            "failed": len(results) - passed,
            "errors": sum(result.error is not None for result in results),
            "failures": sum(len(result.failures) for result in results),
            "steps": sum(len(result.steps) for result in results),
            "duration_s": round(sum(result.duration_s for result in results), 6),
        },
        "exit_status": exit_status(results),
    }


def _scenario_json(result: ScenarioResult) -> dict[str, object]:
    return {
        "path": result.path,
        "name": result.name,
        "ok": result.ok,
        "error": result.error,
        "warnings": list(result.warnings),
        "duration_s": round(result.duration_s, 6),
        "steps": [
            {
                "index": step.index,
                "line": step.line,
                "action": step.action,
                "at": jsonable(step.at),
                "actor": step.actor,
                "summary": step.summary,
                "ok": step.ok,
                "result": jsonable(step.result),
            }
            for step in result.steps
        ],
        "failures": [
            {
                "step_index": failure.step_index,
                "step_line": failure.step_line,
                "action": failure.action,
                "expectation": failure.expectation,
                "expected": jsonable(failure.expected),
                "got": jsonable(failure.got),
                "message": failure.describe(),
            }
            for failure in result.failures
        ],
    }


def write_junit(results: Sequence[ScenarioResult], path: Path) -> None:
    """Write JUnit XML: one ``<testsuite>`` for the run, one ``<testcase>`` per scenario."""
    failed = sum(bool(result.failures) and result.error is None for result in results)
    errors = sum(result.error is not None for result in results)
    total_time = f"{sum(result.duration_s for result in results):.3f}"
    counts = {
        "tests": str(len(results)),
        "failures": str(failed),
        "errors": str(errors),
        "skipped": "0",
        "time": total_time,
    }
    root = ET.Element("testsuites", {"name": "caveat replay", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "caveat replay", **counts})
    for result in results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": "caveat.replay",
                "name": _xml_text(result.name),
                "file": _xml_text(result.path),
                "time": f"{result.duration_s:.3f}",
            },
        )
        if result.error is not None:
            error = ET.SubElement(
                case, "error", {"type": "scenario_error", "message": _xml_text(result.error)}
            )
            error.text = _xml_text(result.error)
        elif result.failures:
            count = len(result.failures)
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "type": "expectation",
                    "message": _xml_text(
                        f"{count} expectation{'s' if count != 1 else ''} failed:"
                        f" {result.failures[0].describe()}"
                    ),
                },
            )
            failure.text = _xml_text("\n".join(f.describe() for f in result.failures))
        if result.steps:
            out = ET.SubElement(case, "system-out")
            out.text = _xml_text("\n".join(_step_line(step) for step in result.steps))
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _step_line(step: StepRecord) -> str:
    mark = "ok" if step.ok else "FAILED"
    return (
        f"step {step.index + 1} (line {step.line}, {step.action}) at {_iso(step.at)}"
        f" as {step.actor}: {step.summary} [{mark}]"
    )


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot carry."""
    return _XML_ILLEGAL.sub("\ufffd", text)


def _iso(value: datetime) -> str:
    if value.tzinfo is not None and value.utcoffset() == timedelta(0):
        value = value.astimezone(UTC)
        return value.isoformat().replace("+00:00", "Z")
    return value.isoformat()


def jsonable(value: object) -> object:
    """``value`` as JSON-ready data: datetimes ISO, durations as ``15m``, models as dicts."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        try:
            return format_duration(value)
        except ValueError:
            return value.total_seconds()
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(by_alias=True))
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [jsonable(item) for item in value]
        if isinstance(value, set | frozenset):
            items.sort(key=repr)
        return items
    return str(value)


def show(value: object) -> str:
    """A compact, YAML-like rendering of an expected or actual value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, datetime | date | timedelta | Enum | BaseModel):
        return show(jsonable(value))
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        items = [show(item) for item in value]
        if isinstance(value, set | frozenset):
            items.sort()
        return "[" + ", ".join(items) + "]"
    return str(value)
