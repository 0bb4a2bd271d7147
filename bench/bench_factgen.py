"""factgen benchmarks on a real PostgreSQL: typed ingest and snapshot builds.

``python -m bench factgen [--subjects 50] [--attributes 200] [--history 5] [--repeat 15]``

A tenant with ``--attributes`` declared attributes (every type; a quarter
with a ``max_age``) and ``--subjects`` entities gets ``--history``
observations of every (subject, attribute), stored through
``factgen.observe`` (type-checked, one batch per round of history). Then
``build_snapshot`` runs for all subjects at once, and for one subject, with
and without ``known_at``; medians over ``--repeat`` runs, each in its own
transaction. Uses ``DATABASE_URL`` when set, else an embedded PostgreSQL in a
temporary directory, stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import bench_database
from factgen import Actor

#: Who loads a benchmark's world (schema, entities, principals, facts).
ADMIN = Actor("bench-loader", "admin")

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
_TYPES = ["int", "float", "bool", "string", "version", "duration", "timestamp", "enum[a,b,c]"]


def _value(vtype: str, i: int) -> Any:
    if vtype == "int":
        return i * 7 % 1000
    if vtype == "float":
        return (i % 100) / 100
    if vtype == "bool":
        return i % 2 == 0
    if vtype == "string":
        return f"value-{i % 13}"
    if vtype == "version":
        return f"v{14 + i % 3}.{i % 12}"
    if vtype == "duration":
        return f"{1 + i % 90}s"
    if vtype == "timestamp":
        return T0 - timedelta(minutes=i % 600)
    return "abc"[i % 3]


def _median_ms(fn: Any, repeat: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def main(argv: list[str]) -> int:
    """Build the fixture, time ingest and snapshots, print a Markdown report."""
    parser = argparse.ArgumentParser(prog="python -m bench factgen")
    parser.add_argument("--subjects", type=int, default=50)
    parser.add_argument("--attributes", type=int, default=200)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    from sqlalchemy.orm import sessionmaker

    import factgen
    from caveat import db
    from predicates import ValueType

    with bench_database() as url:
        db.migrate(url)
        engine = db.make_engine(url)
        sessions = sessionmaker(engine, expire_on_commit=False)
        tenant = "bench"
        specs = [
            factgen.AttributeSpec(
                f"bench.group_{a % 10}.attr_{a}",
                ValueType.parse(_TYPES[a % len(_TYPES)]),
                max_age=timedelta(hours=1) if a % 4 == 0 else None,
            )
            for a in range(args.attributes)
        ]
        subjects = [f"service-{s}" for s in range(args.subjects)]
        with sessions.begin() as s:
            factgen.ensure_tenant(actor=ADMIN, session=s, tenant=tenant, now=T0)
            factgen.declare_attributes(actor=ADMIN, session=s, tenant=tenant, specs=specs)
            world = factgen.load_world(session=s, tenant=tenant)
            factgen.import_entities(
                actor=ADMIN,
                session=s,
                world=world,
                entities=[factgen.EntitySpec(name, "service") for name in subjects],
            )
        ingest_times = []
        facts = 0
        for h in range(args.history):
            at = T0 - timedelta(minutes=10 * (args.history - h))
            batch = [
                factgen.Observation(
                    subject, spec.attribute, _value(str(spec.vtype), s * 31 + a + h), "bench"
                )
                for s, subject in enumerate(subjects)
                for a, spec in enumerate(specs)
            ]
            start = time.perf_counter()
            with sessions.begin() as s:
                world = factgen.load_world(session=s, tenant=tenant)
                factgen.observe(
                    actor=ADMIN, session=s, world=world, observations=batch, observed_at=at, now=at
                )
            ingest_times.append(time.perf_counter() - start)
            facts += len(batch)
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE facts")
            conn.commit()

        def snapshot(which: list[str] | None, known_at: datetime | None = None) -> Any:
            with sessions.begin() as s:
                world = factgen.load_world(session=s, tenant=tenant)
                return factgen.build_snapshot(
                    session=s, world=world, subjects=which, at=T0, known_at=known_at
                )

        def generic(which: list[str]) -> int:
            """The same snapshot through SQLAlchemy rows and ``decode`` (the path before)."""
            from factgen import _queries as q
            from predicates import decode

            with sessions.begin() as s:
                world = factgen.load_world(session=s, tenant=tenant)
                kept = 0
                for r in q.latest_facts(
                    session=s, tenant=tenant, subjects=which, at=T0, recorded_by=T0
                ):
                    spec = world.schema.get(r.attribute)
                    if spec is None or (spec.max_age and T0 - r.observed_at > spec.max_age):
                        continue
                    factgen.SnapshotEntry(
                        r.subject, r.attribute, *decode(r.value), r.observed_at, r.source
                    )
                    kept += 1
                return kept

        def world_only() -> Any:
            with sessions.begin() as s:
                return factgen.load_world(session=s, tenant=tenant)

        all_ms, snap = _median_ms(lambda: snapshot(subjects), args.repeat)
        entries = len(snap.entries)
        generic_ms, generic_entries = _median_ms(lambda: generic(subjects), args.repeat)
        assert generic_entries == entries
        one_ms, one = _median_ms(lambda: snapshot(subjects[:1]), args.repeat)
        asof_ms, _ = _median_ms(lambda: snapshot(subjects, T0 - timedelta(minutes=15)), 5)
        world_ms, _ = _median_ms(world_only, args.repeat)
        json_ms, _ = _median_ms(snap.to_json, args.repeat)
        engine.dispose()

    per_batch = args.subjects * args.attributes
    where = "from DATABASE_URL" if os.environ.get("DATABASE_URL") else "embedded"
    print(
        f"# factgen benchmark ({platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, PostgreSQL {where})\n"
    )
    print(
        f"{args.subjects} subjects x {args.attributes} attributes, {args.history} observations "
        f"each: {facts:,} facts.\n"
    )
    print("| measure | median |")
    print("|---|---|")
    print(
        f"| typed ingest, `observe` of {per_batch:,} observations in one transaction "
        f"| {statistics.median(ingest_times) * 1000:,.0f} ms "
        f"({per_batch / statistics.median(ingest_times):,.0f} facts/s) |"
    )
    print(f"| `load_world` (schema, aliases, topology) | {world_ms:,.1f} ms |")
    print(
        f"| `build_snapshot`, all {args.subjects} subjects ({entries:,} entries, incl. load_world) "
        f"| {all_ms:,.1f} ms |"
    )
    print(
        f"| the same through SQLAlchemy rows and `decode` (the generic path) "
        f"| {generic_ms:,.1f} ms ({generic_ms / all_ms:.1f}x slower) |"
    )
    print(
        f"| `build_snapshot`, one subject ({len(one.entries)} entries, incl. load_world) "
        f"| {one_ms:,.1f} ms |"
    )
    print(
        f"| `build_snapshot` as of 15 min earlier (`known_at`), all subjects | {asof_ms:,.1f} ms |"
    )
    print(f"| `Snapshot.to_json` of the full snapshot | {json_ms:,.1f} ms |")
    return 0
