"""Revocation before next use (issue 14, figure 3), the long run.

``python -m bench revocation_race [--runs N] [--control-runs N] [--seed S]``

Runs ``tests/caveat/test_revocation_race.py`` (the agent loop racing an SME's
revocation, over HTTP and MCP on loopback as ``caveat_app``, and its applicability
variant: the pool max observed or deployed at 50 between two model calls) with ``N``
guarded runs per door instead of ``make test``'s 10, in a pytest subprocess (the test's
fixtures start the embedded PostgreSQL and the server), and prints its figures: runs,
revocations (or world changes, under ``applicability``), model calls after one, leaks
(must be 0) and the control's leaks (must be more than 0). The figures are in
docs/reliability.md.
"""

from __future__ import annotations

import argparse

from bench._harness import run_test

TEST = "tests/caveat/test_revocation_race.py"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench revocation_race")
    parser.add_argument("--runs", type=int, default=500, help="guarded runs per door")
    parser.add_argument("--control-runs", type=int, default=None, help="default: runs / 5")
    parser.add_argument("--seed", type=int, default=14003)
    args = parser.parse_args(argv)
    knobs: dict[str, object] = {"runs": args.runs, "seed": args.seed}
    if args.control_runs is not None:
        knobs["control_runs"] = args.control_runs
    return run_test(TEST, "CAVEAT_RACE", knobs)
