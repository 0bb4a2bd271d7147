"""``caveat serve --workers N``: real worker processes on one port, ``/metrics`` summed
over them, one worker at a time in a tenant's background round, a clean stop."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

import claims
import recall
from caveat import app as use
from caveat import db
from caveat.api._background import Background, round_key
from predicates.errors import InputError
from tests.caveat._doors import caveat_serve, world
from tests.caveat.test_sources_doors import Recorder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """``caveat serve --workers 2`` as a subprocess over a migrated database; its base
    URL, the process and its log."""
    log = tmp_path / "serve.log"
    with caveat_serve(
        db_url, tmp_path / "home", log, "--workers", "2", "--every", "0.5",
        ready_within=90, stop_within=60,
    ) as (base, proc):  # fmt: skip
        yield base, proc, log


def _refusals(text: str) -> float:
    for line in text.splitlines():
        if line.startswith('caveat_refusals_total{code="unauthenticated"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_two_workers_serve_one_port_and_metrics_sum_them(
    served: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    base, proc, log = served

    def ask(_: int) -> tuple[int, int]:
        with httpx.Client(timeout=10) as c:  # a connection of its own each time
            health = c.get(f"{base}/healthz").json()
            refused = c.get(f"{base}/v1/recall", params={"query": "pool"})
            return int(health["worker"]), refused.status_code

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(120)))
    workers = {w for w, _ in answers}
    assert {code for _, code in answers} == {401}
    assert len(workers) == 2 and proc.pid not in workers  # two processes, not the parent
    # whichever worker answers /metrics, it counts every worker's refusals
    for _ in range(6):
        text = httpx.get(f"{base}/metrics", timeout=10).text
        assert _refusals(text) == 120
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    out = log.read_text()
    assert "Traceback" not in out
    assert out.count("Finished server process") == 2  # each worker shut down cleanly


def test_a_tenants_round_is_left_to_the_worker_holding_its_lock(db_url: str) -> None:
    """Two workers never run one tenant's round at once: while another session holds the
    tenant's round lock, a round skips that tenant and embeds nothing; once released,
    the next round drains the queue."""
    engine = db.make_app_engine(db_url)
    owner = db.make_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme", embedder=recall.HashingEmbedder())
        world(rt)
        use.open_case(rt, use.LOCAL_ADMIN, "INC-1", subjects=["payment-api"])
        use.write(
            rt,
            use.LOCAL_ADMIN,
            claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": "payment-api",
                    "attribute": "pool_saturated",
                    "object": True,
                    "evidence": ["E-1"],
                    "scope": {"axis": "case", "id": "INC-1"},
                    "text": "The pool saturated at peak.",
                }
            ),
        )
        assert rt.queue_depth() > 0
        worker = Background(rt, 5.0, puller=Recorder())
        with owner.connect() as held:
            assert held.execute(
                sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": round_key("acme")}
            ).scalar_one()
            worker.run_once()
            assert (worker.rounds, worker.skipped) == (1, 1)
            assert rt.queue_depth() > 0  # left to the holder
            held.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": round_key("acme")})
        worker.run_once()
        assert (worker.rounds, worker.skipped) == (2, 1)
        assert rt.queue_depth() == 0
    finally:
        engine.dispose()
        owner.dispose()


def test_a_request_in_flight_when_the_server_is_told_to_stop_is_answered(
    served: tuple[str, subprocess.Popen[bytes], Path], db_url: str
) -> None:
    """SIGTERM drains: a write held up in the database when the signal arrives still
    commits and is answered, then every worker exits cleanly."""
    base, proc, log = served
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        use.declare_tenant(rt, use.LOCAL_ADMIN)
        token = use.create_token(rt, use.LOCAL_ADMIN, "agent-drain", role="agent").token
    finally:
        engine.dispose()
    waiting = sa.text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND application_name LIKE 'caveat%'"
    )
    owner = db.make_engine(db_url)
    try:
        with owner.connect() as watch, owner.connect() as holder:
            # an audited write appends to the tenant's chain, under its row's lock: hold it
            holder.execute(sa.text("SELECT 1 FROM tenants WHERE id = 'acme' FOR UPDATE"))
            with ThreadPoolExecutor(1) as pool:
                answer = pool.submit(
                    httpx.post,
                    f"{base}/v1/evidence",
                    json={"id": "E-DRAIN"},
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=60,
                )
                deadline = time.monotonic() + 30
                while not watch.execute(waiting).scalar():
                    assert time.monotonic() < deadline, "the write never waited on the lock"
                    time.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
                time.sleep(1.0)  # the signal has reached the workers; the write still waits
                assert proc.poll() is None and not answer.done()
                holder.rollback()
                assert answer.result().status_code == 201, answer.result().text
        assert proc.wait(timeout=60) == 0
        with owner.connect() as c:
            kept = c.execute(sa.text("SELECT count(*) FROM evidence WHERE id = 'E-DRAIN'"))
            assert kept.scalar() == 1
    finally:
        owner.dispose()
    out = log.read_text()
    assert "Traceback" not in out and out.count("Finished server process") == 2


def test_the_workers_pools_fit_the_servers_connections() -> None:
    from caveat.api._workers import SPARE_CONNECTIONS, Pools, pools_for

    # room for everything asked: as configured
    assert pools_for(usable=97, workers=2, size=10, overflow=10) == Pools(10, 10)
    # eight workers on 97 connections: 10 each at their fullest, the burst gives way first
    eight = pools_for(usable=97, workers=8, size=10, overflow=10)
    assert eight == Pools(10, 0) and 8 * (eight.size + eight.overflow) <= 97 - SPARE_CONNECTIONS
    assert pools_for(usable=97, workers=20, size=10, overflow=10) == Pools(4, 0)
    for workers in range(1, 44):
        p = pools_for(usable=97, workers=workers, size=10, overflow=10)
        assert workers * (p.size + p.overflow) <= 97 - SPARE_CONNECTIONS and p.size >= 2
    with pytest.raises(InputError, match="lower --workers"):
        pools_for(usable=97, workers=44, size=10, overflow=10)


def test_a_runtimes_pool_is_the_one_the_settings_give(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_POOL_SIZE", "3")
    monkeypatch.setenv("CAVEAT_POOL_OVERFLOW", "1")
    with use.open_runtime(tenant="acme") as rt:
        pool = rt.engine.pool
        assert isinstance(pool, sa.pool.QueuePool)
        assert (pool.size(), pool._max_overflow) == (3, 1)
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as c:
            limit = int(c.exec_driver_sql("SHOW max_connections").scalar_one())
            kept = int(c.exec_driver_sql("SHOW superuser_reserved_connections").scalar_one())
    finally:
        engine.dispose()
    assert db.usable_connections(db_url) == limit - kept  # reserved_connections: 0 here
