"""Rendering a replay for a person: one line a step, then why a precedent was withheld."""

from __future__ import annotations

from typing import Any, cast

from caveat.app.views import condition_line
from caveat.replay import ScenarioResult, StepRecord

__all__ = ["explain_withheld", "step_line"]


def step_line(record: StepRecord) -> str:
    """``[2026-03-01 09:00] agent-ir  opens case INC-1041 about payment-api``."""
    mark = "" if record.ok else "   <-- expectation failed"
    return f"[{record.at:%Y-%m-%d %H:%M}] {record.actor:<10} {record.summary}{mark}"


def explain_withheld(result: ScenarioResult) -> list[str]:
    """For every recall that withheld items, which gate stopped them and the conditions
    that did not hold (FALSE, or UNKNOWN: never granted), with their values."""
    lines: list[str] = []
    for record in result.steps:
        detail = cast(dict[str, Any], record.result.get("withheld_detail", {}))
        for ref, w in detail.items():
            lines.append(
                f"At {record.at:%Y-%m-%d %H:%M} (step {record.index + 1}) {ref} was withheld "
                f"by the {w['gate']} gate."
            )
            if w.get("text"):
                lines.append(f"    {w['text']}")
            passed = ["tenant_scope", "capability"] + [g for g, ok in w["gates"].items() if ok]
            failed = [g for g, ok in w["gates"].items() if not ok]
            lines.append(
                f"    {len(passed)} gates passed ({', '.join(passed)}); "
                f"{len(failed)} failed ({', '.join(failed)})."
            )
            if w["conditions"]:
                lines.append("    The conditions that did not hold, against what is observed now:")
            for c in w["conditions"]:
                lines.append(condition_line(c, "      "))
    return lines
