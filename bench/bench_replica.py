"""Read replicas with a consistency token (issue 14, "Past one machine"), the long run.

``python -m bench replica [--runs N] [--seed S]``

Runs ``tests/caveat/test_replica.py`` (a primary of its own and a ``pg_basebackup -R``
standby; each run withdraws an item by each of the six kinds, in an order drawn from
the seed, and reads right after; from the second run on, half the steps leave replay
running instead of pausing it) with ``N`` runs instead of ``make test``'s 1, in a pytest
subprocess, and prints its figures: stale reads served by the guarded runtime (must be
0), the control's stale reads (must be more than 0), reads the standby served, and the
routes by reason. The figures are in docs/reliability.md.
"""

from __future__ import annotations

import argparse

from bench._harness import run_test

TEST = "tests/caveat/test_replica.py"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench replica")
    parser.add_argument("--runs", type=int, default=50, help="rounds of the six kinds")
    parser.add_argument("--seed", type=int, default=14009)
    args = parser.parse_args(argv)
    return run_test(
        f"{TEST}::test_a_withdrawn_item_is_never_served_stale_from_the_replica",
        "CAVEAT_REPLICA",
        {"runs": args.runs, "seed": args.seed},
    )
