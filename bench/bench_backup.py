"""Backup and restore of a large store (issue 14, figure 8, beyond the test's world).

``python -m bench backup [--items N] [--seed S]``

Loads N items (default 100,000) over 20 tenants with ``bench.bench_recall.load`` (the
recall benchmark's bulk loader, as the owner: no embeddings, so the HNSW index is
empty) into a database on a throwaway embedded server, dumps it with
``caveat.backup.dump`` (``pg_dump --format=custom``, the server's own version),
restores it with ``caveat.backup.restore`` into a second throwaway embedded server
(creating ``caveat_app`` there), and verifies every tenant's audit chain on the
restored server as ``caveat_app``, checking that each ends at the head it had.
Both servers are stopped and deleted afterwards. Prints a Markdown block (recorded
in docs/operations.md).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

import claims
from bench import bench_recall
from caveat import app as use
from caveat import backup, db

OPERATOR = claims.Actor("bench-operator", "admin")


def _heads(url: str, tenants: list[str]) -> dict[str, claims.AuditReport]:
    engine = db.make_app_engine(url)
    try:
        rt = use.Runtime.over(engine, tenants[0])
        return {t: use.audit_verify(rt.for_tenant(t), OPERATOR) for t in tenants}
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    """Run the round trip and print its figures; exit 1 if a chain does not verify."""
    parser = argparse.ArgumentParser(prog="python -m bench backup")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with db.temporary_server() as server, tempfile.TemporaryDirectory() as tmp:
        source = db.create_database(server, "caveat_backup_bench")
        db.migrate(source)
        started = time.monotonic()
        corpus = bench_recall.load(source, args.items, args.seed, show=False)
        loaded = time.monotonic() - started
        owner = db.make_engine(source)
        with owner.connect() as conn:
            size = int(
                conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
            )
            tenants = sorted(
                str(r[0]) for r in conn.execute(sa.text("SELECT DISTINCT tenant_id FROM items"))
            )
        owner.dispose()
        before = _heads(source, tenants)
        dump = Path(tmp) / "caveat.dump"
        started = time.monotonic()
        dumped = backup.dump(source, dump)
        dump_s = time.monotonic() - started
        with db.temporary_server() as fresh:
            started = time.monotonic()
            created = backup.restore(fresh, dump)
            restore_s = time.monotonic() - started
            started = time.monotonic()
            after = _heads(fresh, tenants)
            verify_s = time.monotonic() - started
    same = all(
        after[t].ok and (after[t].head, after[t].checked) == (before[t].head, before[t].checked)
        for t in tenants
    )
    rows = sum(r.checked for r in after.values())
    print(f"### Backup and restore: {corpus.items:,} items, {len(tenants)} tenants\n")
    print(f"- store: {size / 1e6:.1f} MB, {rows:,} audit rows, loaded in {loaded:.1f} s")
    print(f"- `caveat db dump` (pg_dump -Fc): {dumped / 1e6:.1f} MB in {dump_s:.1f} s")
    print(
        f"- `caveat db restore` (role created: {created}): {restore_s:.1f} s,"
        " indexes rebuilt included"
    )
    print(
        f"- audit verify of every tenant as caveat_app: {verify_s:.1f} s;"
        f" every chain at its old head: {same}"
    )
    return 0 if same else 1
