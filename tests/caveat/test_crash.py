"""Figure 5 of issue 14, crash safety, the fast version: six kills on a server of the
test's own (``bench.bench_crash``; ``python -m bench crash`` runs it long).

Each job (a batch of 2,500 items through ``caveat write``, an SME's revocation over a
lineage of 1,000 descendants, ``caveat embed --backfill`` of 600 items) is killed
once with PostgreSQL SIGKILLed and once with the ``caveat`` process SIGKILLed, at a
seeded moment after it began writing; after the restart the batch is whole or
absent, the cascade complete or not begun, the embedding queue resumes, and
``caveat audit verify`` passes. A second test breaks each of those states by hand
(as the owner) and asserts that the checks say so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import claims
from bench import bench_crash as bc
from caveat import app as use

SEED = int(os.environ.get("CAVEAT_CRASH_SEED", "14005"))
SIZES = bc.Sizes(ingest=2500, cascade=1000, backfill=600)
#: The span the kills' delays are drawn from (counted from the job's first write),
#: and the kill waits (up to a second) for a moment when a write of the job is open, so
#: that the six kills land mid-job; the long run measures the spans instead (a run of
#: each job without a kill) and does not wait.
SPANS = {"ingest": 0.5, "cascade": 0.01, "backfill": 0.2}


@pytest.fixture(scope="module")
def harness() -> Iterator[bc.Harness]:
    with bc.Harness.open(SIZES, SEED) as h:
        h.guess = dict(SPANS)
        h.aim = True
        yield h


def test_a_killed_job_is_whole_or_absent_after_the_restart(harness: bc.Harness) -> None:
    runs = [harness.run(job, kill) for job, kill in bc.schedule(6)]  # raises on a bad state
    for r in runs:
        print(f"{r.job}/{r.kill}: {r.landed}, {r.outcome}, {r.seconds} s {r.phases} {r.detail}")
    assert [(r.job, r.kill) for r in runs] == [(j, k) for k in bc.KILLS for j in bc.JOBS]
    assert all(r.acknowledged or r.exit_status != 0 for r in runs)
    # a kill after the job finished proves nothing: they must land in an open write
    mid = [r for r in runs if r.landed == "mid"]
    assert len(mid) >= 5, [(r.job, r.kill, r.landed) for r in runs]


def _owner(h: bc.Harness, sql: str, **params: object) -> None:
    with h.owner() as conn:
        # as the superuser, with the triggers off (the audit log's refuses any UPDATE)
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text(sql), params)


def test_the_checks_catch_a_torn_state(harness: bc.Harness) -> None:
    """Each check fails on the state it exists to refuse, made by hand (no kill)."""
    h = harness
    # a batch of which half was stored
    run = bc.Run(101, "ingest", "none", "torn_ingest")
    job = h.prepare(run)
    half = [
        claims.ItemWrite.model_validate(h._item(a, v))
        for a, v in list(job.batch.items())[: len(job.batch) // 2]
    ]
    with h.runtime(run.tenant) as rt:
        use.write_batch(rt, bc.ADMIN, half)
    with pytest.raises(bc.CrashFailure, match="a torn batch: 1250 of 2500"):
        h.check(run, job)

    # a cascade of which ten descendants moved without their root
    run = bc.Run(102, "cascade", "none", "torn_cascade")
    job = h.prepare(run)
    _owner(
        h,
        "UPDATE item_states s SET state = 'needs_reverification' FROM (SELECT descendant_id "
        "FROM item_ancestry WHERE tenant_id = :t AND ancestor_id = :r LIMIT 10) d "
        "WHERE s.tenant_id = :t AND s.item_id = d.descendant_id",
        t=run.tenant,
        r=job.root,
    )
    with pytest.raises(bc.CrashFailure, match="a torn cascade"):
        h.check(run, job)

    # a backfill that lost queue entries
    run = bc.Run(103, "backfill", "none", "lost_queue")
    job = h.prepare(run)
    with h.runtime(run.tenant) as rt:
        with rt.transaction() as s:
            from recall import enqueue_missing

            enqueue_missing(session=s, tenant=run.tenant, model=h.model)
        assert rt.embed_pending(batch=100) == 600  # then put a part back in the queue
    _owner(
        h,
        "DELETE FROM item_embeddings WHERE tenant_id = :t AND item_id IN "
        "(SELECT item_id FROM item_embeddings WHERE tenant_id = :t LIMIT 300)",
        t=run.tenant,
    )
    _owner(
        h,
        "INSERT INTO embed_queue (tenant_id, item_id, enqueued_at) SELECT i.tenant_id, i.id, "
        "now() FROM items i WHERE i.tenant_id = :t AND NOT EXISTS (SELECT 1 FROM "
        "item_embeddings e WHERE e.tenant_id = i.tenant_id AND e.item_id = i.id) LIMIT 295",
        t=run.tenant,
    )
    with pytest.raises(bc.CrashFailure, match="5 items neither embedded nor queued"):
        h.check(run, job)

    # an audit chain with a row changed
    run = bc.Run(104, "ingest", "none", "tampered")
    job = h.prepare(run)
    with h.runtime(run.tenant) as rt:
        use.write_batch(
            rt,
            bc.ADMIN,
            [claims.ItemWrite.model_validate(h._item(a, v)) for a, v in job.batch.items()],
        )
    _owner(
        h,
        "UPDATE audit_log SET actor = 'someone-else' WHERE tenant_id = :t AND seq = 3",
        t=run.tenant,
    )
    with pytest.raises(bc.CrashFailure, match="caveat audit verify"):
        h.check(run, job)
