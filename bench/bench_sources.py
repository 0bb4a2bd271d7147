"""Fact sources against a real Prometheus (issue 24), side by side in one run.

``python -m bench sources [--subjects 1000] [--rounds 15] [--stale 10]``

Starts an exporter with ``--subjects`` services (pool in use and pool max) and
Debian's Prometheus scraping it (``tests.stack``, as the connector tests do), and a
store (``DATABASE_URL`` or a throwaway embedded PostgreSQL) whose tenant declares the
services and five float attributes, each answered by one PromQL query over all the
services. Then, alternating in each round (so the store's growth and the machine's
load fall on both sides alike):

- ``pull``: ``connectors.pull_sources`` of that source: the five queries fetched at
  once, ``subjects x 5`` samples mapped and stored in one ``store_pull`` (as the
  application role), against ``raw``: the same five queries issued one after the other
  with one ``httpx.Client``, their JSON decoded and discarded;
- ``refresh``: ``connectors.refresh`` of ``--stale`` needs, against ``raw1``: one raw
  query, decoded and discarded; the needs are ``--stale`` subjects of one attribute
  (``refresh_one_query``: one query, ``--stale`` facts stored) and the same number
  spread over the five attributes (``refresh_five_queries``: five queries at once).

Medians (and the 90th percentile) over ``--rounds`` rounds, after one warm-up round
each; the ratios are pull/raw and each refresh/raw1. ``refresh_round`` is the piece the
recall benchmark (``refresh: true``) extends. Results in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

import factgen
from bench import bench_database
from caveat import app as use
from caveat import connectors, db
from predicates import ValueType
from tests.stack import Exporter, Prometheus

TENANT = "bench"
ADMIN = use.LOCAL_ADMIN
QUERIES = {
    "metrics.pool_utilisation": "max by (service) (db_pool_in_use / db_pool_max)",
    "metrics.pool_in_use": "max by (service) (db_pool_in_use)",
    "metrics.pool_max": "max by (service) (db_pool_max)",
    "metrics.pool_free": "max by (service) (db_pool_max - db_pool_in_use)",
    "metrics.pool_doubled": "max by (service) (db_pool_in_use * 2)",
}


def services(n: int) -> list[str]:
    return [f"svc-{i:04d}" for i in range(n)]


def sources_yaml(url: str) -> str:
    lines = ["sources:", "  - name: prom", "    kind: prometheus", f"    url: {url}"]
    lines.append("    attributes:")
    for attribute, query in QUERIES.items():
        lines += [
            f"      - attribute: {attribute}",
            f"        query: '{query}'",
            "        subject_label: service",
        ]
    return "\n".join(lines) + "\n"


def setup(rt: use.Runtime, names: Sequence[str], prom_url: str) -> None:
    """The tenant: five float attributes, the services, the Prometheus source."""
    use.declare_tenant(rt, ADMIN)
    use.declare_schema(
        rt, ADMIN, [factgen.AttributeSpec(a, ValueType.parse("float")) for a in QUERIES]
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec(n, "service") for n in names])
    use.load_sources(rt, ADMIN, sources_yaml(prom_url))


def raw_queries(client: httpx.Client, prom_url: str, queries: Sequence[str]) -> int:
    """Issue ``queries`` one after the other, decode each answer, keep nothing."""
    samples = 0
    for query in queries:
        answer = client.get(f"{prom_url}/api/v1/query", params={"query": query}, timeout=10)
        answer.raise_for_status()
        samples += len(answer.json()["data"]["result"])
    return samples


def pull_round(rt: use.Runtime, fetched_ms: list[float] | None = None) -> int:
    """One pull of the source; the samples stored. Its fetch-and-map time (the outcome's
    latency: what is not the store) goes into ``fetched_ms``."""
    [outcome] = connectors.pull_sources(rt, ["prom"])
    if outcome.error is not None:
        raise RuntimeError(outcome.error)
    if fetched_ms is not None:
        fetched_ms.append(outcome.latency_ms)
    return len(outcome.stored)


def refresh_round(
    rt: use.Runtime, needs: Sequence[tuple[str, str]], failures: list[str] | None = None
) -> int:
    """One refresh of ``needs`` (each must have a source); the facts it stored. A source
    that failed (timed out under load) goes into ``failures``."""
    report = connectors.refresh(rt, needs)
    if report.skipped:
        raise RuntimeError(f"no source answers {report.skipped}")
    if failures is not None:
        failures.extend(f"{f.source}: {f.error}" for f in report.failures)
    return sum(len(o.stored) for o in report.outcomes)


def stats(times: list[float]) -> dict[str, float]:
    """The median and 90th percentile of ``times`` (ms), to two decimals."""
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))], 2),
    }


def side_by_side(
    sides: dict[str, Callable[[], object]], rounds: int
) -> dict[str, dict[str, float]]:
    """Each side once to warm up, then ``rounds`` rounds, the sides alternating (their
    order flipped every other round); per side the median and p90 in ms."""
    for fn in sides.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(rounds):
        for name in order if r % 2 == 0 else reversed(order):
            started = time.perf_counter()
            sides[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: stats(t) for name, t in times.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench sources")
    parser.add_argument("--subjects", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stale", type=int, default=10)
    args = parser.parse_args(argv)
    names = services(args.subjects)
    with Exporter() as exporter:
        for i, name in enumerate(names):
            exporter.set(name, in_use=i % 20, max=20)
        with Prometheus([exporter.address]) as prometheus, bench_database() as url:
            started = time.monotonic()
            prometheus.wait_for(
                next(iter(QUERIES.values())), lambda r: len(r) == len(names), timeout=60
            )
            first_sample_s = time.monotonic() - started
            db.migrate(url)
            engine = db.make_app_engine(url)
            try:
                rt = use.Runtime.over(engine, TENANT)
                setup(rt, names, prometheus.url)
                attributes = list(QUERIES)
                # the stale needs: --stale subjects of one attribute (one query), and
                # the same number spread over the five attributes (five queries)
                one_query = [(names[i], attributes[0]) for i in range(args.stale)]
                five_queries = [
                    (names[i // len(attributes)], attributes[i % len(attributes)])
                    for i in range(args.stale)
                ]
                failures: list[str] = []
                fetched: list[float] = []
                with httpx.Client() as client:
                    results: dict[str, Any] = {
                        "pull": side_by_side(
                            {
                                "raw": lambda: raw_queries(
                                    client, prometheus.url, list(QUERIES.values())
                                ),
                                "pull": lambda: pull_round(rt, fetched),
                            },
                            args.rounds,
                        ),
                        "refresh": side_by_side(
                            {
                                "raw1": lambda: raw_queries(
                                    client, prometheus.url, [QUERIES[attributes[0]]]
                                ),
                                "refresh_one_query": lambda: refresh_round(rt, one_query, failures),
                                "refresh_five_queries": lambda: refresh_round(
                                    rt, five_queries, failures
                                ),
                            },
                            args.rounds,
                        ),
                    }
            finally:
                engine.dispose()
    pull, refresh = results["pull"], results["refresh"]
    figures = {
        "python": platform.python_version(),
        "subjects": args.subjects,
        "attributes": len(QUERIES),
        "samples_per_pull": args.subjects * len(QUERIES),
        "stale_needs": args.stale,
        "rounds": args.rounds,
        "prometheus_first_sample_s": round(first_sample_s, 1),
        **results,
        "pull_fetch_and_map_median_ms": round(statistics.median(fetched), 2),
        "refresh_failures": failures,
        "pull_over_raw": round(pull["pull"]["median_ms"] / pull["raw"]["median_ms"], 2),
        "refresh_one_query_over_raw1": round(
            refresh["refresh_one_query"]["median_ms"] / refresh["raw1"]["median_ms"], 2
        ),
        "refresh_five_queries_over_raw1": round(
            refresh["refresh_five_queries"]["median_ms"] / refresh["raw1"]["median_ms"], 2
        ),
    }
    print(json.dumps(figures, indent=2))
    return 0
