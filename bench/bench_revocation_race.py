"""Revocation before next use (issue 14, figure 3), the long run.

``python -m bench revocation_race [--runs N] [--control-runs N] [--seed S]``

Runs ``tests/caveat/test_revocation_race.py`` (the agent loop racing an SME's
revocation, over HTTP and MCP on loopback as ``caveat_app``) with ``N`` guarded runs
per door instead of ``make test``'s 10, in a pytest subprocess (the test's fixtures
start the embedded PostgreSQL and the server), and prints its figures: runs,
revocations, model calls after a revocation, leaks (must be 0) and the control's leaks
(must be more than 0). The figures are in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = "tests/caveat/test_revocation_race.py"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench revocation_race")
    parser.add_argument("--runs", type=int, default=500, help="guarded runs per door")
    parser.add_argument("--control-runs", type=int, default=None, help="default: runs / 5")
    parser.add_argument("--seed", type=int, default=14003)
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "race.json"
        env = {
            **os.environ,
            "CAVEAT_RACE_RUNS": str(args.runs),
            "CAVEAT_RACE_SEED": str(args.seed),
            "CAVEAT_RACE_REPORT": str(report),
        }
        if args.control_runs is not None:
            env["CAVEAT_RACE_CONTROL_RUNS"] = str(args.control_runs)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST],
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
