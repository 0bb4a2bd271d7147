"""A recall with ``refresh: true`` against a real Prometheus (issue 24), side by side.

``python -m bench refresh [--stale 10] [--attributes 5] [--rounds 15] [--items 200]``

The set-up of ``bench sources`` (an exporter, Debian's Prometheus scraping it, a store
whose tenant declares the services and five float attributes, each answered by one
PromQL query), with the attributes' ``max_age`` at ``--max-age-ms`` (250 ms) so that a
pause between rounds makes every observation stale again. The recall asks about the
first ``--stale / --attributes`` services, each with one active precedent whose
conditions need the first ``--attributes`` attributes (``--stale`` needs in all: five
queries by default, one with ``--attributes 1``), among ``--items`` precedents of the
other services. Alternating in each round, after the pause (not timed):

- ``refresh``: ``caveat.connectors`` recall with ``refresh: true`` as an agent: the
  needs (one read), the pull of the ``--stale`` pairs (five queries at once, stored in
  one ``store_pull``), the recall;
- ``plain``: the same recall without refresh, plus one raw query to the same
  Prometheus with ``httpx`` (decoded, discarded): the floor a refresh can be held to.

Medians and 90th percentiles in ms over ``--rounds`` rounds after one warm-up round;
``refresh_over_plain`` is the ratio of the medians (the issue asks for at most 1.5);
``refresh_steps`` times the three steps of a refresh apart (the needs read, the pull
and within it the fetch, its source's ``latency_ms``, the recall) and one raw query, to
say where its time goes.
The refreshed recalls must return every precedent asked about (checked each round).
Results in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx

import factgen
from bench import bench_database
from bench.bench_sources import QUERIES, raw_queries, services, sources_yaml, stats
from caveat import app as use
from caveat import connectors, db
from caveat.app._requests import RecallIn
from caveat.connectors._refresh_recall import recall as refreshed_recall
from predicates import ValueType
from tests.precedents import active_episode
from tests.stack import Exporter, Prometheus

TENANT = "bench"
ADMIN = use.LOCAL_ADMIN
QUERY = "connection pool exhausted restart"


def setup(rt: use.Runtime, names: list[str], prom_url: str, max_age: timedelta) -> None:
    use.declare_tenant(rt, ADMIN)
    use.declare_schema(
        rt,
        ADMIN,
        [factgen.AttributeSpec(a, ValueType.parse("float"), max_age=max_age) for a in QUERIES],
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec(n, "service") for n in names])
    use.load_sources(rt, ADMIN, sources_yaml(prom_url))
    use.add_evidence(rt, ADMIN, "E-1")


def precedent(rt: use.Runtime, service: str, attributes: list[str]) -> int:
    """An active precedent of ``service`` with one condition per attribute of
    ``attributes`` (each holds for any observed value: the pull decides them all)."""
    return active_episode(rt, ADMIN, service, [f"{a} gte -1000000" for a in attributes])


def rounds(
    sides: dict[str, Callable[[], object]], n: int, pause: float
) -> dict[str, dict[str, float]]:
    """Each side once to warm up, then ``n`` rounds, the sides alternating (their order
    flipped every other round), each after ``pause`` seconds (not timed)."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(n + 1):
        for name in order if r % 2 == 0 else reversed(order):
            time.sleep(pause)
            started = time.perf_counter()
            sides[name]()
            if r:
                times[name].append((time.perf_counter() - started) * 1000)
    return {name: stats(t) for name, t in times.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench refresh")
    parser.add_argument("--stale", type=int, default=10, help="needs (a multiple of 5)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--items", type=int, default=200, help="precedents of other services")
    parser.add_argument("--max-age-ms", type=int, default=250)
    parser.add_argument(
        "--attributes", type=int, default=5, help="attributes per precedent (1-5: queries)"
    )
    args = parser.parse_args(argv)
    attributes = list(QUERIES)[: max(1, min(args.attributes, len(QUERIES)))]
    asked = max(1, args.stale // len(attributes))
    names = services(asked + args.items)
    max_age = timedelta(milliseconds=args.max_age_ms)
    pause = 2 * max_age.total_seconds()
    with Exporter() as exporter:
        for i, name in enumerate(names):
            exporter.set(name, in_use=i % 20, max=20)
        with Prometheus([exporter.address]) as prometheus, bench_database() as url:
            prometheus.wait_for(
                next(iter(QUERIES.values())), lambda r: len(r) == len(names), timeout=60
            )
            db.migrate(url)
            engine = db.make_app_engine(url)
            try:
                rt = use.Runtime.over(engine, TENANT)
                setup(rt, names, prometheus.url, max_age)
                wanted = {precedent(rt, n, attributes) for n in names[:asked]}
                for n in names[asked:]:
                    precedent(rt, n, list(QUERIES))
                agent = use.register_principal(rt, ADMIN, "agent-bench", role="agent")
                body = RecallIn(query=QUERY, subjects=names[:asked], refresh=True)
                connectors_deadline = timedelta(milliseconds=rt.settings.refresh_deadline_ms)
                plain = body.model_copy(update={"refresh": False}).to_request()
                problems: list[str] = []

                def refresh_side() -> None:
                    done = refreshed_recall(rt, agent, body)
                    problems.extend(f"{e.source}: {e.error}" for e in done.source_errors)
                    got = {r.item.id for r in done.result.items}
                    if got != wanted:
                        problems.append(f"returned {sorted(got)}, not {sorted(wanted)}")

                with httpx.Client() as client:

                    def plain_side() -> None:
                        use.recall_items(rt, agent, plain)
                        raw_queries(client, prometheus.url, [next(iter(QUERIES.values()))])

                    results: dict[str, Any] = rounds(
                        {"refresh": refresh_side, "plain": plain_side}, args.rounds, pause
                    )
                # where a refresh's time goes: each step alone, after the same pause
                parts: dict[str, list[float]] = {
                    "needs": [],
                    "pull": [],
                    "pull_fetch": [],
                    "recall": [],
                    "raw1": [],
                }
                request = body.to_request()
                with httpx.Client() as client:
                    for _ in range(args.rounds):
                        time.sleep(pause)
                        t0 = time.perf_counter()
                        needs = use.recall_needs(rt, agent, request)
                        t1 = time.perf_counter()
                        report = connectors.refresh(rt, needs, deadline=connectors_deadline)
                        t2 = time.perf_counter()
                        use.recall_items(rt, agent, request)
                        t3 = time.perf_counter()
                        raw_queries(client, prometheus.url, [next(iter(QUERIES.values()))])
                        t4 = time.perf_counter()
                        fetch = max((o.latency_ms for o in report.outcomes), default=0.0)
                        for name, ms in zip(
                            parts,
                            (t1 - t0, t2 - t1, fetch / 1000, t3 - t2, t4 - t3),
                            strict=True,
                        ):
                            parts[name].append(ms * 1000)
                time.sleep(pause)  # every observation stale again: what a refresh asks for
                needs = use.recall_needs(rt, agent, plain)
            finally:
                engine.dispose()
    figures = {
        "python": platform.python_version(),
        "stale_needs": args.stale,
        "attributes": len(attributes),
        "subjects_asked": asked,
        "other_precedents": args.items,
        "max_age_ms": args.max_age_ms,
        "rounds": args.rounds,
        "needs_seen": len(needs),
        **results,
        "refresh_steps": {name: stats(t) for name, t in parts.items()},
        "refresh_over_plain": round(
            results["refresh"]["median_ms"] / results["plain"]["median_ms"], 2
        ),
        "problems": problems,
    }
    print(json.dumps(figures, indent=2))
    return 0 if not problems else 1
