"""Gated ingest vs a raw COPY of the same rows, and the latency of a single write.

``python -m bench claims [--items N] [--chunk N] [--singles N] [--seed S] [--corpus PATH]``

Generates N item writes (default 100,000) over a tenant with a declared
schema, entities with aliases and evidence (some of it restricted), with
text from the incident summaries (bench/corpus.py: ../shared/data/postmortems.jsonl
when present, else bench/data/incidents.jsonl, or ``--corpus PATH``), about 5%
repeats of an earlier claim (duplicates), 5% new objects for an earlier key
(supersessions) and 2% malformed writes (refused by the gate). Then, in one
run on one database:

1. gated: ``claims.write_batch`` of all N (the whole gate, audit included);
2. raw: the rows that run stored, copied out, the table truncated, and the
   same rows ``COPY``-ed back into ``items`` (its indexes included);
3. single: ``claims.write_item`` of fresh items, one transaction each.

Uses ``DATABASE_URL`` when set, else an embedded PostgreSQL in a temporary
directory. Prints a Markdown block (recorded in docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

import claims
import factgen
import recall
from bench import bench_database, corpus
from caveat import db
from claims import _queries
from predicates import ValueType
from predicates.errors import CaveatError

#: Who loads a benchmark's world (schema, entities, principals, facts).
ADMIN = factgen.Actor("bench-loader", "admin")

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANT = "bench"

SCHEMA: list[tuple[str, str, str | None]] = [
    ("config.connection_pool.max", "int", "configuration"),
    ("config.connection_pool.timeout", "duration", "configuration"),
    ("config.replicas", "int", "configuration"),
    ("config.feature_flags.new_checkout", "bool", "configuration"),
    ("config.cache.ttl", "duration", "configuration"),
    ("metrics.pool_utilisation", "float", None),
    ("metrics.error_rate", "float", None),
    ("metrics.p99_latency_ms", "int", None),
    ("metrics.cpu_utilisation", "float", None),
    ("metrics.queue_depth", "int", None),
    ("env.postgres.version", "version", "failure_mechanism"),
    ("env.kernel.version", "version", "failure_mechanism"),
    ("env.region", "string", "topology"),
    ("lag_returned_within_s", "int", None),
    ("p99_recovered_within_s", "int", None),
]
CONDITIONS = [
    "config.connection_pool.max eq {n}",
    "config.connection_pool.max lte {n}",
    "config.connection_pool.timeout gte {d}s",
    "config.replicas lt {r}",
    "config.feature_flags.new_checkout eq {b}",
    "config.cache.ttl lte {m}m",
    "metrics.pool_utilisation gte 0.{p}",
    "metrics.error_rate gt 0.0{p}",
    "metrics.p99_latency_ms gte {l}",
    "metrics.cpu_utilisation gte 0.{p}",
    "metrics.queue_depth gt {q}",
    "env.postgres.version gte v{v}",
    "env.kernel.version lt v{k}",
    'env.region eq "{g}"',
    "@{dep}:config.connection_pool.max lte {n}",
]
ATTRIBUTES = [
    "restart_restored_service_at",
    "failover_completed_at",
    "rollback_restored_service_at",
    "cache_flush_cleared_errors_at",
    "pool_saturated_at",
    "lag_returned_within_s",
    "p99_recovered_within_s",
    "oom_killed_pods",
    "dns_resolution_failed",
    "certificate_expired",
    "disk_filled_at",
    "leader_election_flapped",
    "retry_storm_observed",
    "deploy_correlated_with_errors",
    "thundering_herd_after_restart",
    "replica_lag_peaked_s",
    "connection_refused_count",
    "queue_backlog_peaked",
    "gc_pause_peaked_ms",
    "traffic_shifted_to_region",
]
KINDS = ["service", "database", "queue", "cache", "gateway"]
NAMES = [
    "payment",
    "checkout",
    "orders",
    "inventory",
    "search",
    "auth",
    "billing",
    "shipping",
    "catalog",
    "pricing",
    "ledger",
    "notify",
]


def _sentences() -> list[str]:
    out: list[str] = []
    for doc in corpus.current().docs:
        summary = doc.summary
        out.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", summary) if len(s) > 30)
    return out


class World:
    """The generated tenant: entities, evidence, and a generator of writes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sentences = _sentences()
        self.entities = [f"{n}-{k}" for n in NAMES for k in KINDS]
        self.evidence = [f"E-{i:04d}" for i in range(600)]
        self.restricted = set(self.rng.sample(self.evidence, 60))
        self.written: list[dict[str, Any]] = []

    def alias(self, entity: str) -> str:
        r = self.rng.random()
        if r < 0.5:
            return entity
        if r < 0.75:
            return entity.replace("-", "_")
        if r < 0.9:
            return entity + "-prod"
        return entity.upper()

    def condition(self, subject: str) -> str:
        rng = self.rng
        return rng.choice(CONDITIONS).format(
            n=rng.choice([10, 20, 50, 100, 200]),
            d=rng.choice([5, 10, 30]),
            r=rng.choice([2, 3, 5]),
            b=rng.choice(["true", "false"]),
            m=rng.choice([1, 5, 15]),
            p=rng.randint(5, 9),
            l=rng.choice([250, 500, 1000, 2000]),
            q=rng.choice([100, 1000, 10000]),
            v=rng.choice(["13", "14", "15.4", "16"]),
            k=rng.choice(["5.15", "6.1", "6.8"]),
            g=rng.choice(["eu-west-1", "us-east-1", "ap-south-1"]),
            dep=rng.choice([e for e in self.entities if e != subject]),
        )

    def item(self, case: int) -> dict[str, Any]:
        rng = self.rng
        subject = rng.choice(self.entities)
        evidence = rng.sample(self.evidence, rng.choice([1, 1, 1, 2]))
        public = [e for e in evidence if e not in self.restricted]
        attribute = rng.choice(ATTRIBUTES)
        if attribute in {"lag_returned_within_s", "p99_recovered_within_s"}:
            obj: Any = rng.choice([30, 60, 120, 300, 600, 900])
        elif attribute.endswith("_at") and public:
            obj = public[0]
        elif attribute.endswith(("_count", "_pods", "_ms", "_s", "_peaked")):
            obj = rng.randint(1, 5000)
        else:
            obj = rng.choice([True, False, "partial", "observed twice"])
        required = sorted({self.condition(subject) for _ in range(rng.choice([1, 2, 2, 3]))})
        excluded = [self.condition(subject)] if rng.random() < 0.2 else []
        return {
            "kind": "episode" if rng.random() < 0.1 else "fact",
            "subject": self.alias(subject),
            "attribute": attribute,
            "object": obj,
            "required": required,
            "excluded": excluded,
            "evidence": evidence,
            "epistemic": "hypothesis" if rng.random() < 0.2 else "observation",
            "scope": {"axis": "case", "id": f"INC-{case}"},
            "facets": [{"axis": "service", "id": subject}] if rng.random() < 0.3 else [],
            "purposes": ["incident_diagnosis"] if rng.random() < 0.3 else [],
            "text": " ".join(rng.sample(self.sentences, 2))[:600],
            "entities": rng.sample(self.entities, rng.choice([0, 1, 2])),
            "salience": round(rng.random(), 2),
        }

    def writes(self, n: int) -> list[claims.ItemWrite]:
        rng = self.rng
        out: list[dict[str, Any]] = []
        for i in range(n):
            r = rng.random()
            if r < 0.05 and out:  # the same claim again
                out.append(dict(rng.choice(out)))
            elif r < 0.10 and out:  # a new object for an earlier key
                again = dict(rng.choice(out))
                again["object"] = rng.randint(5001, 9999)
                out.append(again)
            elif r < 0.12:  # malformed: refused by the gate
                bad = self.item(i // 20)
                fault = rng.choice(["subject", "condition", "rule"])
                if fault == "subject":
                    bad["subject"] = "unknown-service-" + str(i)
                elif fault == "condition":
                    bad["required"] = ["when the pool is busy"]
                else:
                    bad["attribute"] = "fix_method"
                out.append(bad)
            else:
                out.append(self.item(i // 20))
        return [claims.ItemWrite.model_validate(x) for x in out]


def _setup(sessions: sessionmaker[Any], world: World) -> claims.Actor:
    admin = claims.Actor("bench-admin", "admin")
    with sessions.begin() as s:
        factgen.ensure_tenant(actor=ADMIN, session=s, tenant=TENANT, now=T0)
        agent = claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=TENANT,
            principal="agent-bench",
            role="agent",
            capabilities=["incidents", "restricted"],
        )
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=TENANT,
            specs=[
                factgen.AttributeSpec(a, ValueType.parse(t), content_type=c) for a, t, c in SCHEMA
            ],
        )
        loaded = factgen.load_world(session=s, tenant=TENANT)
        factgen.import_entities(
            actor=ADMIN,
            session=s,
            world=loaded,
            entities=[factgen.EntitySpec(e, e.rsplit("-", 1)[1]) for e in world.entities],
        )
        for eid in world.evidence:
            claims.register_evidence(
                session=s,
                tenant=TENANT,
                evidence_id=eid,
                actor=admin,
                now=T0,
                readers=["restricted"] if eid in world.restricted else [],
            )
    return agent


def _raw_copy(engine: sa.Engine) -> tuple[float, int]:
    """Copy the stored items (their rows and state rows) out, truncate, and time
    COPY-ing the same rows back in: what storing them costs with no gate."""
    tables = {
        "items": ", ".join(c.strip() for c in claims_columns()),
        "item_states": ", ".join(_queries.STATE_COPY_COLUMNS),
    }
    raw = engine.raw_connection()
    try:
        pg = raw.driver_connection
        assert pg is not None
        dumps: dict[str, bytes] = {}
        for table, columns in tables.items():
            buf = bytearray()
            with (
                pg.cursor() as cur,
                cur.copy(f"COPY (SELECT {columns} FROM {table}) TO STDOUT") as cp,
            ):
                for chunk in cp:
                    buf += chunk
            dumps[table] = bytes(buf)
        rows = pg.execute("SELECT count(*) FROM items").fetchone()
        n = int(rows[0]) if rows else 0
        pg.execute("TRUNCATE items, item_states, item_ancestry, embed_queue, item_embeddings")
        pg.commit()
        pg.execute("CHECKPOINT")
        pg.commit()
        start = time.perf_counter()
        for table, columns in tables.items():
            with pg.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as cp:
                view = memoryview(dumps[table])
                for i in range(0, len(view), 1 << 20):
                    cp.write(view[i : i + (1 << 20)])
        pg.commit()
        return time.perf_counter() - start, n
    finally:
        raw.close()


def claims_columns() -> list[str]:
    return [*_queries.ITEM_COPY_COLUMNS, "verified_by", "verified_at"]


def _drain(sessions: sessionmaker[Any], embedder: recall.Embedder, limit: int) -> tuple[int, float]:
    """Drain the queue under ``embedder`` as ``caveat embed`` does (``embed_pending`` in
    batches of 256, one transaction each) until it is empty or ``limit`` items are
    taken; ``(items, seconds)``."""
    taken, start = 0, time.perf_counter()
    while taken < limit:
        with sessions.begin() as s:
            n = recall.embed_pending(session=s, tenant=TENANT, embedder=embedder, now=T0)
        if n == 0:
            break
        taken += n
    return taken, time.perf_counter() - start


def _backfill(engine: sa.Engine, minilm: int) -> dict[str, Any]:
    """The embedding queue the gated run left (one row per accepted item, written by the
    statement trigger inside the ingest above), drained with the hashing embedder (the
    pipeline's own cost: read, vector, write, dequeue), then ``minilm`` items queued
    again by ``enqueue_missing`` (a model change) and drained with all-MiniLM-L6-v2."""
    sessions = db.tenant_sessions(db.make_app_engine(engine.url.render_as_string(False)), TENANT)
    with sessions.begin() as s:
        queued = recall.queue_depth(session=s, tenant=TENANT)
    out: dict[str, Any] = {"queued": queued}
    out["hashing"] = _drain(sessions, recall.make_embedder("hashing"), queued)
    if minilm:
        model = recall.make_embedder("minilm")
        model.embed(["load the model before the clock starts"])
        with sessions.begin() as s:
            recall.enqueue_missing(session=s, tenant=TENANT, model=model.name)
        out["minilm"] = _drain(sessions, model, minilm)
        with sessions.begin() as s:  # what is left is not this run's business
            s.execute(sa.text("DELETE FROM embed_queue"))
    return out


def run(n: int, chunk: int, singles: int, seed: int, minilm: int = 2000) -> str:
    world = World(seed)
    requests = world.writes(n)
    fresh = World(seed + 1).writes(singles)
    with bench_database() as url:
        db.migrate(url)
        engine = db.make_engine(url)
        sessions = sessionmaker(engine, expire_on_commit=False)
        agent = _setup(sessions, world)
        with engine.connect() as c:
            c.execute(sa.text("CHECKPOINT"))
        start = time.perf_counter()
        result = claims.write_batch(
            sessions=sessions,
            tenant=TENANT,
            requests=requests,
            actor=agent,
            now=T0,
            chunk_size=chunk,
        )
        gated = time.perf_counter() - start
        with engine.connect() as c:
            stored = c.execute(sa.text("SELECT count(*) FROM items")).scalar_one()
            audit = c.execute(sa.text("SELECT count(*) FROM audit_log")).scalar_one()
        backfill = _backfill(engine, minilm)
        latencies: list[float] = []
        for i, req in enumerate(fresh):
            t = time.perf_counter()
            with contextlib.suppress(CaveatError):  # a refusal is a write too
                claims.write_item(
                    sessions=sessions,
                    tenant=TENANT,
                    request=req,
                    actor=agent,
                    now=T0 + timedelta(minutes=1 + i),
                )
            latencies.append(time.perf_counter() - t)
        with engine.begin() as c:
            c.execute(
                sa.text(
                    "DELETE FROM item_states WHERE item_id IN "
                    "(SELECT id FROM items WHERE recorded_at > :t)"
                ),
                {"t": T0},
            )
            c.execute(sa.text("DELETE FROM items WHERE recorded_at > :t"), {"t": T0})
        raw, copied = _raw_copy(engine)
        engine.dispose()
    codes = ", ".join(f"{k} {v}" for k, v in sorted(result.codes().items()))
    lat = sorted(latencies)
    p50 = statistics.median(lat) * 1000
    p95 = lat[int(len(lat) * 0.95) - 1] * 1000
    return "\n".join(
        [
            f"### claims ingest, {n:,} items ({datetime.now(UTC).date()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()})",
            "",
            f"Command: `python -m bench claims --items {n} --chunk {chunk} --singles {singles}`",
            "",
            f"Corpus: {corpus.current().label}.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| gated ingest (`write_batch`, chunks of {chunk}) | {gated:.2f} s "
            f"({n / gated:,.0f} items/s) |",
            f"| outcomes | {result.count('accepted'):,} accepted "
            f"({sum(1 for o in result.outcomes if o.superseded):,} of them superseding), "
            f"{result.count('duplicate'):,} duplicate, {result.count('rejected'):,} rejected "
            f"({codes}) |",
            f"| rows written by the gated run | {stored:,} items, {audit:,} audit rows |",
            f"| raw `COPY` of the same {copied:,} items (`items` and `item_states` rows) "
            f"| {raw:.2f} s |",
            f"| **ratio gated / raw** (goal <= 4x) | **{gated / raw:.2f}x** |",
            f"| single `write_item` ({singles} writes, own transaction each) | "
            f"p50 {p50:.2f} ms, p95 {p95:.2f} ms |",
            f"| embedding queue after the gated run (statement trigger) "
            f"| {backfill['queued']:,} items |",
            *(
                f"| backfill `{name}` (`embed_pending`, batches of 256, application role) "
                f"| {backfill[name][0]:,} items in {backfill[name][1]:.1f} s "
                f"(**{backfill[name][0] / backfill[name][1]:,.0f} items/s**) |"
                for name in ("hashing", "minilm")
                if name in backfill
            ),
        ]
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and print its Markdown report."""
    parser = argparse.ArgumentParser(prog="python -m bench claims")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--minilm", type=int, default=2000, help="items to backfill with MiniLM (0: none)"
    )
    corpus.add_argument(parser)
    args = parser.parse_args(argv)
    corpus.from_args(parser, args)
    print(run(args.items, args.chunk, args.singles, args.seed, args.minilm))
    return 0
