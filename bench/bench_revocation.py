"""Revocation at the application role (issue 14, figure 7): a 100,000 lineage, side by side.

``python -m bench revocation [--lineage N] [--repeat R] [--variants owner,app,app-staging]
[--others M]``

Each repeat is a fresh database on ``DATABASE_URL`` or a throwaway embedded
PostgreSQL, holding one lineage tree (fan-out 10) of ``N`` descendants per variant,
built as ``python -m bench lifecycle`` builds its one; then each tree's root is
revoked with ``lifecycle.revoke``, timed with its commit, after a ``CHECKPOINT``, in
an order that rotates between repeats (the audit log grows by each revocation):

- ``owner``: the table owner (no row-level security: the audit rows go in by ``COPY``);
- ``app``: ``caveat_app`` under forced row-level security, its tenant set per
  transaction, as the doors run it (the audit rows go through ``caveat_append_audit``,
  migration 0014);
- ``app-staging``: ``caveat_app`` with that function bypassed: the rows go through a
  temporary staging table and one ``INSERT … SELECT`` (the path before 0014, still the
  one for bulk writes of items), for the before/after in the same run.

``--others M`` adds ``M`` active items outside every lineage to the tenant first (a
larger tenant around the same lineages: the revocation's time should follow the
lineage, not the tenant).

After each repeat every tree must have re-opened its ``N`` descendants, and the
tenant's audit chain must verify as ``caveat_app``. The figures are in
docs/reliability.md (section 7) and docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import ModuleType
from typing import Any
from unittest import mock

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
import lifecycle
from bench import bench_database
from bench.bench_lifecycle import SME, T0, TENANT, _insert, _setup, _timed_sessions, _vacuum
from caveat import db
from claims import _audit
from claims import _queries as claim_queries

VARIANTS = ("owner", "app", "app-staging")


class _Staged(ModuleType):
    """``claims._queries`` as ``append_many`` sees it before migration 0014: row-level
    security never taken as binding there, so the rows go to ``copy_binary``, whose
    ``COPY`` (which does see it) takes the staging table."""

    def __init__(self) -> None:
        super().__init__("claims._queries")

    def __getattr__(self, name: str) -> Any:
        return getattr(claim_queries, name)

    @staticmethod
    def row_security_active(*, session: Session, table: str) -> bool:
        return False


@contextmanager
def _path(variant: str) -> Iterator[None]:
    if variant != "app-staging":
        yield
        return
    with mock.patch.object(_audit, "q", _Staged()):
        yield


def _revoke(
    url: str, engine: sa.Engine, variant: str, root: int, at_offset: int
) -> tuple[float, int]:
    timed = _timed_sessions(url, engine, as_app=variant != "owner")
    result: list[lifecycle.RevokeResult] = []
    try:
        with _path(variant):
            started = time.perf_counter()
            with timed.begin() as s:
                result.append(
                    lifecycle.revoke(
                        session=s,
                        tenant=TENANT,
                        item_id=root,
                        reason="benchmark",
                        actor=SME,
                        now=T0 + timedelta(days=1, minutes=at_offset),
                    )
                )
            seconds = time.perf_counter() - started
    finally:
        bind = timed.kw.get("bind")
        if isinstance(bind, sa.Engine):
            bind.dispose()
    return seconds, len(result[0].reopened)


def _checkpoint(engine: sa.Engine) -> None:
    """Write out what the setup and the revocation before dirtied, so that no timed
    revocation pays for another's writes (needs a superuser or ``pg_checkpoint``; on a
    server that refuses, nothing is done)."""
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("CHECKPOINT"))
    except sa.exc.DBAPIError:
        pass


def run_once(
    url: str, n: int, variants: list[str], order: int, others: int = 0
) -> dict[str, float]:
    """One repeat: ``others`` items outside any lineage, then a tree per variant, each
    revoked once (the order rotated by ``order``); the seconds of each. Raises if a
    revocation re-opened fewer than ``n`` items or the chain does not verify afterwards."""
    engine = db.make_engine(url)
    sessions = sessionmaker(engine, expire_on_commit=False)
    try:
        _setup(sessions)
        if others:
            _insert(sessions, n=others, subject="payment-api", ctype="configuration", tree=False)
        roots = {  # a subject per tree: the trees' items have keys of their own
            v: _insert(
                sessions, n=n + 1, subject=f"orders-db-{v}", ctype="failure_mechanism", tree=True
            )
            for v in variants
        }
        _vacuum(engine)
        seconds: dict[str, float] = {}
        rotated = variants[order % len(variants) :] + variants[: order % len(variants)]
        for k, variant in enumerate(rotated):
            _checkpoint(engine)
            seconds[variant], reopened = _revoke(url, engine, variant, roots[variant], k)
            if reopened != n:
                raise SystemExit(f"{variant}: {reopened} re-opened, {n} expected")
        app = db.tenant_sessions(db.make_app_engine(url, poolclass=sa.pool.NullPool), TENANT)
        try:
            with app.begin() as s:
                report = claims.verify_chain(session=s, tenant=TENANT)
        finally:
            bind = app.kw.get("bind")
            if isinstance(bind, sa.Engine):
                bind.dispose()
        if not report.ok:
            raise SystemExit(f"the audit chain does not verify: {report}")
        return seconds
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    """Run ``--repeat`` fresh databases; print each repeat and each variant's median."""
    parser = argparse.ArgumentParser(prog="python -m bench revocation")
    parser.add_argument("--lineage", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--others", type=int, default=0, help="items outside the lineages")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        parser.error(f"variants are {', '.join(VARIANTS)}; not {', '.join(unknown)}")
    times: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(args.repeat):
        with bench_database() as url:
            db.migrate(url)
            got = run_once(url, args.lineage, variants, r, args.others)
        for v in variants:
            times[v].append(got[v])
        print(f"repeat {r + 1}: " + ", ".join(f"{v} {got[v]:.3f} s" for v in variants), flush=True)
    print(
        f"revocation, lineage of {args.lineage:,} in a tenant of "
        f"{args.others + len(variants) * (args.lineage + 1):,} items, {args.repeat} repeats "
        "(chains verified):"
    )
    for v in variants:
        t = times[v]
        print(f"  {v:12} median {statistics.median(t):.3f} s (min {min(t):.3f}, max {max(t):.3f})")
    if "owner" in times and "app" in times:
        ratios = [a / o for a, o in zip(times["app"], times["owner"], strict=True)]
        print(f"  app / owner, per repeat: median {statistics.median(ratios):.2f}")
    return 0
