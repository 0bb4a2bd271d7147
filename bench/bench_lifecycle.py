"""Lifecycle benchmarks: a deploy event over 10,000 active items, a revocation over 100,000.

``python -m bench lifecycle [--items N] [--lineage N] [--repeat R] [--only X] [--as-app]``

Uses ``DATABASE_URL`` when set, else an embedded PostgreSQL in a temporary
directory. Fixture items are bulk-inserted with SQL, active, with their
history (``written``, ``shadow``, ``active``) appended to the audit chain;
only the handled event and the revocation are timed, each including its
commit. Results are in docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
from bench import bench_database
from caveat import db
from predicates import ValueType

#: Who loads a benchmark's world (schema, entities, principals, facts).
ADMIN = factgen.Actor("bench-loader", "admin")

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANT = "bench"
SME = claims.Actor("sme-bench", "sme", frozenset({"incidents"}))

_ITEMS = """
INSERT INTO items (tenant_id, kind, subject, attribute, object, required, excluded,
  conditions, cond_key, evidence, evidence_key, derived_from, epistemic, content_type,
  scope_axis, scope_id, text, entities, salience, valid_from, recorded_at, created_by)
SELECT :t, 'fact', CAST(:subject AS text), 'observed_' || g,
  CAST('{"value": {"t": "int", "v": 1}}' AS jsonb),
  ARRAY[CASE WHEN g % 2 = 0 THEN 'config.connection_pool.max eq 20'
             ELSE 'metrics.pool_utilisation gte 0.8' END],
  '{}',
  CAST(CASE WHEN g % 2 = 0
    THEN '{"required": [{"op": "eq", "t": "int", "v": 20, "a": "config.connection_pool.max",
           "e": null}], "excluded": []}'
    ELSE '{"required": [{"op": "gte", "t": "float", "v": 0.8, "a": "metrics.pool_utilisation",
           "e": null}], "excluded": []}' END AS jsonb),
  'k' || g, ARRAY['E-1'], '',
  CASE WHEN CAST(:tree AS boolean) AND g > 1 THEN ARRAY[CAST(:base + (g - 2) / 10 + 1 AS bigint)]
       ELSE CAST('{}' AS bigint[]) END,
  'observation', :ctype, 'case', 'INC-0',
  'Item ' || g || ' about the pool of ' || CAST(:subject AS text),
  ARRAY[CAST(:subject AS text)], 0.5, :at, :at, 'agent-bench'
FROM generate_series(1, :n) g
"""

_STATES = """
INSERT INTO item_states (tenant_id, item_id, state, previous)
SELECT tenant_id, id, 'active', 'shadow' FROM items
WHERE tenant_id = CAST(:t AS text) AND id > :base
"""

#: Each fixture item's history, as the lifecycle would have written it.
_HISTORY = (
    ("case", None, "written"),
    ("shadow", "case", "fixture"),
    ("active", "shadow", "fixture"),
)


def _setup(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as s:
        factgen.ensure_tenant(actor=ADMIN, session=s, tenant=TENANT, now=T0)
        claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=TENANT,
            principal=SME.id,
            role="sme",
            capabilities=["incidents"],
        )
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=TENANT,
            specs=[
                factgen.AttributeSpec(
                    "config.connection_pool.max",
                    ValueType.parse("int"),
                    content_type="configuration",
                ),
                factgen.AttributeSpec("metrics.pool_utilisation", ValueType.parse("float")),
            ],
        )
        world = factgen.load_world(session=s, tenant=TENANT)
        factgen.import_entities(
            actor=ADMIN,
            session=s,
            world=world,
            entities=[
                factgen.EntitySpec("payment-api", "service"),
                factgen.EntitySpec("orders-db", "database"),
            ],
        )
        claims.register_evidence(session=s, tenant=TENANT, evidence_id="E-1", actor=SME, now=T0)


def _insert(
    sessions: sessionmaker[Session], *, n: int, subject: str, ctype: str, tree: bool
) -> int:
    """Insert ``n`` active items; returns the id of the first."""
    with sessions.begin() as s:
        base = int(s.execute(sa.text("SELECT coalesce(max(id), 0) FROM items")).scalar_one())
        params = {"t": TENANT, "n": n, "subject": subject, "ctype": ctype, "at": T0}
        s.execute(sa.text(_ITEMS), {**params, "tree": tree, "base": base})
        s.execute(sa.text(_STATES), {"t": TENANT, "base": base})
        details = [{"from": f, "to": t, "reason": r, "cause": {}} for t, f, r in _HISTORY]
        claims.append_many(
            session=s,
            tenant=TENANT,
            at=T0,
            rows=[
                claims.PendingAudit("agent-bench", "transition", i, d["to"], d)
                for (i,) in s.execute(
                    sa.text("SELECT id FROM items WHERE id > :base ORDER BY id"), {"base": base}
                )
                for d in details
            ],
        )
    with sessions.begin() as s:
        s.execute(sa.text("SELECT 1"))
    return base + 1


def _vacuum(engine: sa.Engine) -> None:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        for table in (
            "items",
            "item_states",
            "item_ancestry",
            "audit_log",
            "expiry_checks",
        ):
            c.execute(sa.text(f"VACUUM ANALYZE {table}"))


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _timed_sessions(url: str, engine: sa.Engine, as_app: bool) -> sessionmaker[Session]:
    """Sessions for the timed call: the owner's, or the application's (``caveat_app``
    under row-level security, its tenant set per transaction, as the CLI and replay)."""
    sessions = (
        db.tenant_sessions(db.make_app_engine(url, poolclass=sa.pool.StaticPool), TENANT)
        if as_app
        else sessionmaker(engine, expire_on_commit=False)
    )
    with sessions.begin() as s:  # connected before the clock starts
        s.execute(sa.text("SELECT 1"))
    return sessions


def _dispose(sessions: sessionmaker[Session]) -> None:
    bind = sessions.kw.get("bind")
    if isinstance(bind, sa.Engine):
        bind.dispose()


def bench_deploy(url: str, n: int, as_app: bool = False) -> tuple[float, str]:
    """A deploy on a subject with ``n`` active items; returns seconds and a summary."""
    engine = db.make_engine(url)
    sessions = sessionmaker(engine, expire_on_commit=False)
    timed: sessionmaker[Session] | None = None
    try:
        _setup(sessions)
        _insert(sessions, n=n, subject="payment-api", ctype="configuration", tree=False)
        _vacuum(engine)
        at = T0 + timedelta(days=12)
        with sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=TENANT)
            event = factgen.record_event(
                actor=ADMIN,
                session=s,
                world=world,
                type="deploy",
                subjects=["payment-api"],
                changes={"config.connection_pool.max": 100},
                occurred_at=at,
                now=at,
            )
        outcome: list[lifecycle.EventOutcome] = []

        timed = _timed_sessions(url, engine, as_app)

        def handle() -> None:
            with timed.begin() as s:
                outcome.append(
                    lifecycle.handle_event(session=s, tenant=TENANT, event=event, now=at)
                )

        seconds = _timed(handle)
        res = outcome[0]
        return seconds, (
            f"{len(res.matched)} matched, {len(res.affected)} -> needs_reverification, "
            f"{len(res.unaffected)} -> verify_on_next_use"
        )
    finally:
        if timed is not None:
            _dispose(timed)
        engine.dispose()


def bench_revoke(url: str, n: int, as_app: bool = False) -> tuple[float, str]:
    """Revoke the root of a lineage tree (fan-out 10) of ``n`` descendants."""
    engine = db.make_engine(url)
    sessions = sessionmaker(engine, expire_on_commit=False)
    timed: sessionmaker[Session] | None = None
    try:
        _setup(sessions)
        root = _insert(sessions, n=n + 1, subject="orders-db", ctype="failure_mechanism", tree=True)
        _vacuum(engine)
        at = T0 + timedelta(days=1)
        result: list[lifecycle.RevokeResult] = []

        timed = _timed_sessions(url, engine, as_app)

        def run() -> None:
            with timed.begin() as s:
                result.append(
                    lifecycle.revoke(
                        session=s,
                        tenant=TENANT,
                        item_id=root,
                        reason="benchmark",
                        actor=SME,
                        now=at,
                    )
                )

        seconds = _timed(run)
        with sessions.begin() as s:
            ok = claims.verify_chain(session=s, tenant=TENANT).ok
        return seconds, f"{len(result[0].reopened)} descendants re-opened; audit chain ok={ok}"
    finally:
        if timed is not None:
            _dispose(timed)
        engine.dispose()


def main(argv: list[str]) -> int:
    """Run both benchmarks ``--repeat`` times, each in a fresh database; print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench lifecycle")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--lineage", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["deploy", "revoke"], default=None)
    parser.add_argument(
        "--as-app",
        action="store_true",
        help="time the call as caveat_app under row-level security (default: the owner)",
    )
    args = parser.parse_args(argv)
    runs: list[tuple[str, str, Callable[[str], tuple[float, str]]]] = [
        (
            "deploy",
            f"deploy event, {args.items:,} active items",
            lambda u: bench_deploy(u, args.items, args.as_app),
        ),
        (
            "revoke",
            f"revocation, lineage of {args.lineage:,}",
            lambda u: bench_revoke(u, args.lineage, args.as_app),
        ),
    ]
    if args.only:
        runs = [r for r in runs if r[0] == args.only]
    for _name, label, fn in runs:
        times = []
        summary = ""
        for _ in range(args.repeat):
            with bench_database() as url:
                db.migrate(url)
                seconds, summary = fn(url)
                times.append(seconds)
        print(
            f"{label}: median {statistics.median(times):.3f} s "
            f"(min {min(times):.3f}, max {max(times):.3f}, n={len(times)}); {summary}"
        )
    return 0
