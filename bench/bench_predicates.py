"""Predicate benchmarks: parses per second, compiled evaluations per second, and the
two in-database evaluators (plpgsql ``caveat_eval`` and ``to_sql``) over a table.

``python -m bench predicates [--seconds S] [--rows N] [--no-db]``

The corpus is generated with a fixed seed: every operator and value type,
``@entity:`` references, lists, escapes. Parsing and evaluation run in this
process for about ``--seconds`` each; the SQL part uses ``DATABASE_URL`` when
set, else an embedded PostgreSQL in a temporary directory (stopped at the
end). Results are printed as a Markdown table (recorded in docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import bench_database

GOAL_PARSES = 20_000
GOAL_EVALUATIONS = 1_000_000

_PATHS = ["config.connection_pool.max", "metrics.pool_utilisation", "env.postgres.version"]
_ENTITIES = ["payments-db", "payment-api", "orders_db.eu-1"]


def corpus(n: int, seed: int = 20261130) -> list[tuple[str, str]]:
    """``n`` predicate texts with the type of their attribute, every operator and type."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for i in range(n):
        entity = f"@{rng.choice(_ENTITIES)}:" if rng.random() < 0.3 else ""
        path = f"{rng.choice(_PATHS)}{'' if i % 3 else '.x' + str(i % 17)}"
        kind = i % 8
        if kind == 0:
            op = rng.choice(["eq", "ne", "lt", "lte", "gt", "gte"])
            text, vtype = f"{path} {op} {rng.randint(-500, 5000)}", "int"
        elif kind == 1:
            op = rng.choice(["lt", "gte"])
            text, vtype = f"{path} {op} {rng.random():.3f}", "float"
        elif kind == 2:
            op = rng.choice(["lt", "gte", "eq"])
            text, vtype = f"{path} {op} v{rng.randint(9, 17)}.{rng.randint(0, 12)}", "version"
        elif kind == 3:
            regions = ", ".join(f'"eu-{rng.choice(["west", "central"])}-{j}"' for j in range(3))
            text, vtype = f"{path} {rng.choice(['in', 'not_in'])} [{regions}]", "string"
        elif kind == 4:
            text, vtype = f'{path} contains "pool \\"main\\" \\u00e9"', "string"
        elif kind == 5:
            unit = rng.choice(["ms", "s", "m", "h", "d"])
            text, vtype = f"{path} lte {rng.randint(1, 900)}{unit}", "duration"
        elif kind == 6:
            text, vtype = f"{path} gt 2026-03-{rng.randint(1, 28):02d}T09:00:00Z", "timestamp"
        else:
            text, vtype = f'{path} matches "^(pool|conn)[a-z]+$"', "string"
        out.append((entity + text, vtype))
    return out


def _rate(fn: Callable[[], int], seconds: float) -> tuple[float, int]:
    """Operations per second of ``fn`` (which returns how many it did), best of the rounds."""
    rates: list[float] = []
    total = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(rates) < 3:
        start = time.perf_counter()
        done = fn()
        elapsed = time.perf_counter() - start
        rates.append(done / elapsed)
        total += done
    return max(rates), total


def bench_parse(texts: list[str], seconds: float) -> dict[str, Any]:
    """Parses per second over the corpus (no caching of results)."""
    from predicates import parse

    parse(texts[0])  # build the parser once

    def run() -> int:
        for text in texts:
            parse(text)
        return len(texts)

    best, total = _rate(run, seconds)
    return {"parses_per_s": best, "parsed": total, "chars": statistics.mean(map(len, texts))}


def _observation(rng: random.Random, vtype: str) -> Any:
    from predicates import Duration, Observed, ValueType, Version

    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.2:
        return (
            Observed(1, ValueType("int")) if vtype != "int" else Observed(True, ValueType("bool"))
        )
    if vtype == "int":
        return Observed(rng.randint(-500, 5000), ValueType("int"))
    if vtype == "float":
        return Observed(rng.random(), ValueType("float"))
    if vtype == "version":
        return Observed(Version((rng.randint(9, 17), rng.randint(0, 12))), ValueType("version"))
    if vtype == "duration":
        return Observed(Duration(rng.randint(0, 10**6)), ValueType("duration"))
    if vtype == "timestamp":
        at = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(hours=rng.randint(0, 700))
        return Observed(at, ValueType("timestamp"))
    word = rng.choice(["eu-west-1", "pool main", 'pool "main" é', "connmax", "poolx"])
    return Observed(word, ValueType("string"))


def bench_evaluate(pairs: list[tuple[Any, Any]], seconds: float) -> dict[str, Any]:
    """Compiled evaluations per second: ``cp(observed)`` over prepared pairs."""

    def run() -> int:
        for cp, obs in pairs:
            cp(obs)
        return len(pairs)

    best, total = _rate(run, seconds)
    return {"evaluations_per_s": best, "evaluated": total}


def bench_sql(rows: int, seconds: float) -> dict[str, Any]:
    """One condition over ``rows`` snapshot rows: plpgsql ``caveat_eval`` vs ``to_sql``."""
    import psycopg

    from predicates import (
        SQL_EVALUATOR_DDL,
        ValueType,
        compile_predicate,
        condition_json,
        parse,
        to_sql,
    )

    with bench_database() as url:
        dsn = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SQL_EVALUATOR_DDL)  # type: ignore[arg-type]
            conn.execute("CREATE TABLE snaps (id int, subject text, snap jsonb)")
            conn.execute(
                "INSERT INTO snaps SELECT g, 'svc', jsonb_build_object('svc', jsonb_build_object("
                "'config.connection_pool.max', jsonb_build_object('t', 'int', 'v', g %% 400), "
                "'env.postgres.version', jsonb_build_object('t', 'version', 'v', "
                "jsonb_build_array(14 + g %% 3, g %% 12)))) FROM generate_series(1, %s) g",
                (rows,),
            )
            conn.execute("ANALYZE snaps")
            out: dict[str, Any] = {"rows": rows}
            for label, text, vtype in [
                ("int gte", "config.connection_pool.max gte 200", "int"),
                ("version lt", "env.postgres.version lt v15.10", "version"),
                ("int in", "config.connection_pool.max in [20, 100, 200, 300]", "int"),
            ]:
                cp = compile_predicate(parse(text), ValueType(vtype))
                cond = json.dumps(condition_json(cp))
                sql, params = to_sql(cp, snapshot="snap", subject="subject", paramstyle="pyformat")
                queries = {
                    "plpgsql": (
                        "SELECT count(*) FILTER (WHERE caveat_eval(%(c)s::jsonb, "
                        "snap -> subject -> %(a)s)) FROM snaps",
                        {"c": cond, "a": cp.attribute.path},
                    ),
                    "to_sql": (f"SELECT count(*) FILTER (WHERE {sql}) FROM snaps", params),
                }
                counts = {}
                timings: dict[str, list[float]] = {k: [] for k in queries}
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline or len(timings["plpgsql"]) < 3:
                    for name, (query, qparams) in queries.items():
                        start = time.perf_counter()
                        row = conn.execute(query, qparams).fetchone()  # type: ignore[arg-type]
                        timings[name].append(time.perf_counter() - start)
                        assert row is not None
                        counts[name] = row[0]
                assert counts["plpgsql"] == counts["to_sql"], (label, counts)
                out[label] = {name: rows / statistics.median(ts) for name, ts in timings.items()}
            return out


def main(argv: list[str]) -> int:
    """Run the predicate benchmarks and print a Markdown report."""
    parser = argparse.ArgumentParser(prog="python -m bench predicates")
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--rows", type=int, default=200_000, help="rows for the SQL part")
    parser.add_argument("--no-db", action="store_true", help="skip the PostgreSQL part")
    args = parser.parse_args(argv)

    from predicates import ValueType, compile_predicate, parse

    texts = corpus(2000)
    parsed = bench_parse([t for t, _ in texts], args.seconds)
    rng = random.Random(7)
    compiled = [compile_predicate(parse(t), ValueType(v)) for t, v in texts]
    pairs = [(cp, _observation(rng, v)) for cp, (_, v) in zip(compiled, texts, strict=True)]
    pairs = pairs * 5
    evaluated = bench_evaluate(pairs, args.seconds)

    print(
        f"# predicates benchmark ({platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs)\n"
    )
    print("| measure | result | goal |")
    print("|---|---|---|")
    print(
        f"| parses/s (2,000 distinct predicates, {parsed['chars']:.0f} chars on average) "
        f"| {parsed['parses_per_s']:,.0f} | ≥ {GOAL_PARSES:,} |"
    )
    print(
        f"| compiled evaluations/s (`cp(observed)`, {len(pairs):,} pairs, 10% missing, "
        f"10% mistyped) | {evaluated['evaluations_per_s']:,.0f} | ≥ {GOAL_EVALUATIONS:,} |"
    )
    status = 0
    if not args.no_db:
        sql = bench_sql(args.rows, args.seconds)
        print(
            f"\nIn PostgreSQL, one condition over {sql['rows']:,} snapshot rows "
            "(rows/s, median; both evaluators counted the same rows):\n"
        )
        print("| condition | plpgsql `caveat_eval` | `to_sql` expression | ratio |")
        print("|---|---|---|---|")
        for label in ("int gte", "version lt", "int in"):
            r = sql[label]
            print(
                f"| {label} | {r['plpgsql']:,.0f} | {r['to_sql']:,.0f} "
                f"| {r['to_sql'] / r['plpgsql']:.1f}x |"
            )
    return status
