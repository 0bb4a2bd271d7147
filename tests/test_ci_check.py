"""CI's own check against ../shared (.ci/check_shared.py, run by .ci/run before
``make test``): the bundled scenarios are the shared ones byte for byte, and the project's
corpus is its own words. Run here on made-up layouts, so it needs nothing beside the
project."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "check_shared.py"
SUMMARY = "The edge routers all crashed after one malformed rule reached every one of them."


def _layout(tmp_path: Path, ours: str = SUMMARY) -> tuple[Path, Path]:
    root, shared = tmp_path / "project", tmp_path / "shared"
    for d in (root / "scenarios", root / "bench" / "data", shared / "scenarios", shared / "data"):
        d.mkdir(parents=True)
    for name, text in (("a.yaml", "name: a\n"), ("b.yaml", "name: b\r\nsteps: []\n")):
        (shared / "scenarios" / name).write_bytes(text.encode())
        (root / "scenarios" / name).write_bytes(text.encode())
    (root / "scenarios" / "ours-only.yaml").write_text("name: ours\n")  # allowed
    row = {"id": "pm-002", "organisation": "C", "summary": ""}
    (shared / "data" / "postmortems.jsonl").write_text(
        json.dumps(row | {"summary": "A bad router rule took every edge router down at once."})
        + "\n"
    )
    (root / "bench" / "data" / "incidents.jsonl").write_text(
        json.dumps(row | {"summary": ours}) + "\n"
    )
    return root, shared


def _check(root: Path, shared: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), "--shared", str(shared)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_same_scenarios_and_a_corpus_in_its_own_words_pass(tmp_path: Path) -> None:
    done = _check(*_layout(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.unlink(), "scenarios/b.yaml is missing"),
        (lambda s: s.write_bytes(b"name: b\nsteps: []\n"), "scenarios/b.yaml differs from"),
    ],
    ids=["missing", "line-endings"],
)
def test_a_missing_or_changed_scenario_fails_ci_by_name(
    tmp_path: Path, change: Callable[[Path], object], message: str
) -> None:
    root, shared = _layout(tmp_path)
    change(root / "scenarios" / "b.yaml")
    done = _check(root, shared)
    assert done.returncode == 1
    assert message in done.stderr
    assert "a.yaml" not in done.stderr


def test_a_summary_copied_from_the_shared_one_fails_ci_with_its_line(tmp_path: Path) -> None:
    root, shared = _layout(tmp_path, ours="A bad router rule took every edge router down.")
    done = _check(root, shared)
    assert done.returncode == 1
    assert "bench/data/incidents.jsonl:1: pm-002 copies 7 words running" in done.stderr


def test_without_shared_beside_it_the_check_fails_and_says_why(tmp_path: Path) -> None:
    root, _ = _layout(tmp_path)
    done = _check(root, tmp_path / "nowhere")
    assert done.returncode == 1
    assert "no scenarios to compare (is ../shared beside it?)" in done.stderr


def test_ci_runs_the_check_before_make_test() -> None:
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines.index("python3 .ci/check_shared.py") < lines.index("make test")
