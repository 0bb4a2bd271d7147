"""What a call costs over HTTP beyond the work itself (issue 27, per-call overhead).

``python -m bench http [--calls 300] [--seed S] [--base REV] [--rounds 2] [--json]``

A throwaway embedded PostgreSQL (or ``DATABASE_URL``'s server) gets a database of its
own, migrated to head, with ``bench load``'s small world (5 services, 60 active items
written through the application layer; the recalls ask about four, the writes are
about the fifth, so what a recall ranks does not grow as the runs write). One agent's
token. Then, one call at a time
(no concurrency: the fixed cost per call is what shows), after 20 warm-up calls each:

- **in-process**: ``--calls`` recalls (a query and a subject, as ``bench load``'s
  agents ask) and ``--calls`` one-item writes (an observation in an open case)
  through a runtime as a server holds one (``caveat.app``, the application role, the
  agent's actor authenticated once);
- **over HTTP**: the same calls, with the same token on every call, to ``caveat serve
  --workers 1`` on loopback (``GET /v1/recall``, ``POST /v1/items``), over one
  keep-alive connection.

It reports p50 and p95 per call and the ratios HTTP p50 / in-process p50. With
``--base REV`` the server of REV (a git worktree, as ``bench load --base`` runs it;
single-process, as it was) is measured over HTTP too, alternating with this
checkout's for ``--rounds`` rounds on the same store, so the change in per-call cost
is a ratio of one run. Figures in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

import claims
import recall
from bench import bench_load as bl
from caveat import app as use
from caveat import db

WARM = 20


def _timed(n: int, call: Callable[[int], object]) -> dict[str, float]:
    times = bl.timed_calls(n, call, WARM)
    return {"p50_ms": bl._ms(times, 0.5, 2), "p95_ms": bl._ms(times, 0.95, 2)}


def _asks(world: bl.World, n: int, seed: int) -> list[tuple[str, str]]:
    """Queries and subjects, the written subject left out: what the recalls see does not
    grow as the runs write."""
    rng = random.Random(seed)
    asked = world.subjects[:-1]
    return [(rng.choice(world.queries), rng.choice(asked)) for _ in range(n + WARM)]


def _write(world: bl.World, case: str, i: int) -> dict[str, Any]:
    subject = world.subjects[-1]
    return {
        "kind": "fact",
        "subject": subject,
        "attribute": f"{bl.WRITE_ATTRIBUTES[i % len(bl.WRITE_ATTRIBUTES)]}_{case}_{i}",
        "object": i,
        "required": ["config.connection_pool.max gte 10"],
        "evidence": [world.evidence[i % len(world.evidence)]],
        "epistemic": "observation",
        "scope": {"axis": "case", "id": case},
        "text": f"{subject} during {case}: observation {i}",
    }


def in_process(url: str, world: bl.World, token: str, *, calls: int, seed: int) -> dict[str, Any]:
    """The calls through a runtime, the actor authenticated once."""
    engine = db.make_app_engine(url)
    try:
        rt, actor = use.authenticate(use.Runtime.over(engine, bl.TENANT), token)
        asks = _asks(world, calls, seed)
        case = "HTTP-INPROC"
        use.open_case(rt, actor, case, subjects=world.subjects)

        def ask(i: int) -> None:
            query, subject = asks[i]
            use.recall_items(rt, actor, recall.RecallRequest(query=query, subjects=[subject]))

        def write(i: int) -> None:
            item = claims.ItemWrite.model_validate(_write(world, case, i))
            [o] = use.write_batch(rt, actor, [item]).outcomes
            assert o.item_id is not None, o

        return {"recall": _timed(calls, ask), "write": _timed(calls, write)}
    finally:
        engine.dispose()


def over_http(
    url: str, world: bl.World, token: str, *, calls: int, seed: int, tag: str, code: Path | None
) -> dict[str, Any]:
    """The calls to a one-worker server (``code``'s: None, this checkout's)."""
    asks = _asks(world, calls, seed)
    case = f"HTTP-{tag}"
    with (
        bl.serving(url, workers=None if code is not None else 1, code=code) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c,
    ):
        c.post("/v1/cases", json={"id": case, "subjects": world.subjects}).raise_for_status()

        def ask(i: int) -> None:
            query, subject = asks[i]
            c.get("/v1/recall", params={"query": query, "subject": subject}).raise_for_status()

        def write(i: int) -> None:
            res = c.post("/v1/items", json=[_write(world, case, i)])
            res.raise_for_status()
            assert res.json()[0]["outcome"] != "rejected", res.text

        return {"recall": _timed(calls, ask), "write": _timed(calls, write)}


def run(calls: int, seed: int, base: str | None, rounds: int) -> dict[str, Any]:
    """The store, then in-process and over HTTP (and ``base``'s server, alternating)."""
    with (
        db.temporary_server(os.environ.get("DATABASE_URL")) as server,
        db.with_database(server, prefix="caveat_http") as url,
    ):
        db.migrate(url)
        # four subjects recalled, a fifth written to
        world = bl.small_world(url, subjects=5, seed=seed)
        token = bl.tokens(url, 1).agents[0]
        out: dict[str, Any] = {"calls": calls, "seed": seed, "items": world.items}
        out["in_process"] = in_process(url, world, token, calls=calls, seed=seed)
        if base is None:
            out["http"] = [over_http(url, world, token, calls=calls, seed=seed, tag="0", code=None)]
        else:
            out["base"] = base
            out["http"], out["http_base"] = [], []
            with bl.worktree(base) as code:
                for r in range(rounds):
                    sides = (("http_base", code), ("http", None))
                    for key, where in sides if r % 2 == 0 else sides[::-1]:
                        tag = f"{key}{r}"
                        got = over_http(
                            url, world, token, calls=calls, seed=seed, tag=tag, code=where
                        )
                        out[key].append(got)
    return out | ratios(out)


def ratios(out: dict[str, Any]) -> dict[str, Any]:
    """HTTP p50 (the median over runs) / in-process p50, per call; with a base, also this
    checkout's HTTP p50 / the base's."""

    def p50(key: str, call: str) -> float:
        return float(statistics.median(r[call]["p50_ms"] for r in out[key]))

    got: dict[str, Any] = {}
    for call in ("recall", "write"):
        got[f"{call}_http_over_in_process"] = round(
            p50("http", call) / out["in_process"][call]["p50_ms"], 2
        )
        if "http_base" in out:
            got[f"{call}_base_http_over_in_process"] = round(
                p50("http_base", call) / out["in_process"][call]["p50_ms"], 2
            )
            got[f"{call}_http_over_base"] = round(p50("http", call) / p50("http_base", call), 2)
    return got


def markdown(r: dict[str, Any]) -> str:
    """The table of docs/performance.md."""
    lines = ["| where | recall p50 / p95 ms | write p50 / p95 ms |", "|---|---|---|"]

    def row(name: str, x: dict[str, Any]) -> str:
        rc, w = x["recall"], x["write"]
        return f"| {name} | {rc['p50_ms']} / {rc['p95_ms']} | {w['p50_ms']} / {w['p95_ms']} |"

    lines.append(row("in-process", r["in_process"]))
    for key, name in (("http_base", f"HTTP, {r.get('base')}"), ("http", "HTTP, this checkout")):
        for i, x in enumerate(r.get(key, [])):
            lines.append(row(f"{name} ({i + 1})", x))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench http")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--base", default=None, help="a commit whose server to measure beside")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    r = run(args.calls, args.seed, args.base, args.rounds)
    print(json.dumps(r, indent=2))
    if not args.json:
        print(markdown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
