"""A long run of a test: the test, in a pytest subprocess, with its knobs in the
environment and its figures written to a report file, printed as JSON.

The reliability harnesses (``revocation_race``, ``replica``) are the tests of
``make test`` run longer: the test reads its knobs (runs, seed) from the environment
and writes its figures to ``<PREFIX>_REPORT``; this runs it and prints them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["run_test"]


def run_test(test: str, prefix: str, knobs: dict[str, object]) -> int:
    """Run ``test`` (a pytest node id, from the repository's root) with
    ``<prefix>_<KNOB>`` set for each knob and ``<prefix>_REPORT`` naming the report;
    print the figures and pytest's exit; its exit code (1 without a report)."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "figures.json"
        env = {
            **os.environ,
            **{f"{prefix}_{k.upper()}": str(v) for k, v in knobs.items()},
            f"{prefix}_REPORT": str(report),
        }
        started = time.monotonic()
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        done = subprocess.run(
            [*pytest, "-p", "no:randomly", test],
            cwd=root,
            env=env,
            check=False,
        )
        elapsed = time.monotonic() - started
        if not report.exists():
            print("no figures: the test did not get as far as its report", file=sys.stderr)
            return done.returncode or 1
        figures = json.loads(report.read_text())
    print(json.dumps(figures, indent=2))
    print(f"pytest exit {done.returncode}, {elapsed:.1f} s in all")
    return done.returncode
