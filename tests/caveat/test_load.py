"""Load (issue 14, figure 6), small: a few agents for a few seconds over loopback HTTP.

The harness is ``bench/bench_load.py`` (``python -m bench load`` runs it long on a
generated store of thousands of items); here it runs on a small world written through
the application layer, on an embedded PostgreSQL of the test's own (the lock watch
turns on ``log_lock_waits`` with a 1 ms ``deadlock_timeout``, a server setting the
suite's shared server must not get). ``caveat serve`` runs as a subprocess logged in
as ``caveat_app``. The test asserts the four properties, not timings: zero errors, no
lost write, no recall that waited on a lock, and every call measured; and that each
check can fail: the control's recall behind an ``ACCESS EXCLUSIVE`` lock is reported
by the watch, and a write acknowledged but never made is reported lost.

``CAVEAT_LOAD_AGENTS``, ``CAVEAT_LOAD_SECONDS`` and ``CAVEAT_LOAD_SEED`` change the
run (default 3 agents, 4 s, seed 14006).
"""

from __future__ import annotations

import json
import os

import sqlalchemy as sa

from bench import bench_load as bl
from caveat import app as use
from caveat import db

AGENTS = int(os.environ.get("CAVEAT_LOAD_AGENTS", "3"))
SECONDS = float(os.environ.get("CAVEAT_LOAD_SECONDS", "4"))
SEED = int(os.environ.get("CAVEAT_LOAD_SEED", "14006"))


def test_agents_under_load_lose_nothing_and_no_recall_waits_on_a_lock() -> None:
    with db.temporary_server() as server, db.with_database(server, prefix="caveat_load") as url:
        db.migrate(url)
        world = bl.small_world(url, seed=SEED)
        toks = bl.tokens(url, AGENTS)
        watch = bl.LockWatch(url)
        watch.arm()
        with bl.serving(url) as base:
            # the watch can fail: a recall behind a held lock is reported as such
            control_waits = bl.control(watch, base, toks.agents[0], world.subjects[0])
            watch.start()
            rec, wall = bl.drive(
                base,
                toks,
                world,
                seconds=SECONDS,
                seed=SEED,
                revoke_every=0.4,
                deploy_every=0.7,
            )
            waits = watch.stop()
            writes = bl.read_back(base, toks, rec)
            # the read-back can fail: an acknowledgement of a write that was never made
            forged = bl.Record()
            forged.acks.append(bl.Ack(10**9, 0, world.subjects[0], "error_count_peaked", 1))
            assert bl.read_back(base, toks, forged)["lost"], "a forged ack was not reported"
        r = bl.report(rec, wall, writes, waits, control_waits, watch)
    print("\nfigure 6 (small):", json.dumps(r))
    assert r["control_recall_waits"]["log"] >= 1 and r["control_recall_waits"]["sample"] >= 1, r
    assert watch.log_available and watch.sampled > 0, r
    assert bl.check(r) == [], bl.check(r)
    assert r["errors"] == 0 and r["writes"]["lost"] == [] and r["recall_lock_waits"] == 0
    assert r["writes"]["acknowledged"] >= AGENTS and r["writes"]["audited"] == len(rec.acks)
    assert r["revocations"] >= 1 and r["deploys"] >= 1, r
    assert set(r["calls"]) == set(bl.CALLS), r["calls"]


def test_a_transaction_names_its_use_case(db_url: str) -> None:
    """The runtime tags a use case's transaction (``application_name``), which the lock
    watch reads; an untagged one is plain ``caveat``, and the tag ends with it."""
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    name = sa.text("SELECT current_setting('application_name')")
    try:
        with rt.transaction("recall") as s:
            assert s.execute(name).scalar() == "caveat:recall"
        with rt.transaction() as s:
            assert s.execute(name).scalar() == "caveat"
    finally:
        engine.dispose()
