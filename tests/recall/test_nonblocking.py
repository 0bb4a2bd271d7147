"""A recall does not block writes (issue 9 "Proof"; model.md §6: recall is a read).

A recall runs in one transaction that is then held open; meanwhile, on other
connections, a burst of writes on the same tenant goes through the write path
(items, facts) and the lifecycle (a promotion, a revocation), each with a 2 s
``lock_timeout`` / ``statement_timeout``. Every one of them must complete while
the recall's transaction is still open. The world gives a recall every reason to
leave something behind: a verify-on-next-use item to check, an active item whose
secondary TTL ran out, a case (context entries) and a shadow item (shadow log).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
import recall
from tests.conftest import ADMIN, T0, Store

POOL = ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"]
NOW = T0 + timedelta(hours=2)
TIMEOUT_MS = 2000


def _request(n: int, **changes: Any) -> claims.ItemWrite:
    return claims.ItemWrite.model_validate(
        {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": f"observed_{n}",
            "object": "E-1",
            "required": POOL,
            "evidence": ["E-1"],
            "scope": {"axis": "case", "id": "INC-1"},
            "text": "Tail latency spike on payment-api; pool exhausted; restart restored it.",
            **changes,
        }
    )


def _write(store: Store, n: int, at: Any, **changes: Any) -> int:
    return lifecycle.write(
        sessions=store.sessions,
        tenant=store.tenant,
        request=_request(n, **changes),
        actor=store.agent,
        now=at,
    ).item_id


def _promote(store: Store, item_id: int, at: Any, *to: str) -> None:
    with store.sessions.begin() as s:
        for target in to:
            lifecycle.promote(
                session=s, tenant=store.tenant, item_id=item_id, to=target, actor=store.sme, now=at
            )  # type: ignore[arg-type]


@pytest.fixture
def world(store: Store) -> dict[str, int]:
    """Active, verify-on-next-use, TTL-expired, shadow and case items; fresh facts."""
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=store.agent,
            now=T0,
        )
    ids = {
        "active": _write(store, 1, T0),
        "vonu": _write(store, 2, T0, content_type="configuration"),
        "ttl": _write(store, 3, T0, content_type="permission_refusal"),
        "shadow": _write(store, 4, T0),
        "case": _write(store, 5, T0),
    }
    _promote(store, ids["vonu"], T0, "shadow", "active")
    at = T0 + timedelta(minutes=10)
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        event = factgen.record_event(
            actor=ADMIN,
            session=s,
            world=world,
            type="deploy",
            subjects=["payment-api"],
            occurred_at=at,
            now=at,
        )
        out = lifecycle.handle_event(session=s, tenant=store.tenant, event=event, now=at)
    assert out.unaffected == (ids["vonu"],)
    later = T0 + timedelta(minutes=20)
    for key in ("active", "ttl"):
        _promote(store, ids[key], later, "shadow", "active")
    _promote(store, ids["shadow"], later, "shadow")
    store.observe(
        NOW - timedelta(minutes=1),
        ("payment-api", "config.connection_pool.max", 20),
        ("payment-api", "metrics.pool_utilisation", 0.97),
    )
    return ids


@pytest.fixture
def writer_sessions(engine: sa.Engine) -> Iterator[sessionmaker[Session]]:
    """Sessions on their own connections that wait at most 2 s for a lock or a statement."""
    eng = sa.create_engine(
        engine.url,
        connect_args={
            "options": f"-c timezone=UTC -c lock_timeout={TIMEOUT_MS} "
            f"-c statement_timeout={TIMEOUT_MS}"
        },
        poolclass=sa.pool.NullPool,
    )
    yield sessionmaker(eng, expire_on_commit=False)
    eng.dispose()


def _burst(
    store: Store, writers: sessionmaker[Session], ids: dict[str, int]
) -> list[tuple[str, float, str | None]]:
    """Writes and transitions on the tenant: (what, seconds, error or None) for each."""
    tenant = store.tenant

    def write(n: int) -> Callable[[], object]:
        return lambda: lifecycle.write(
            sessions=writers, tenant=tenant, request=_request(100 + n), actor=store.agent, now=NOW
        )

    def observe() -> None:
        with writers.begin() as s:
            world = factgen.load_world(session=s, tenant=tenant)
            factgen.observe(
                actor=ADMIN,
                session=s,
                world=world,
                observations=[
                    factgen.Observation("payment-api", "metrics.pool_utilisation", 0.5, "t")
                ],
                observed_at=NOW,
                now=NOW,
            )

    def promote() -> None:
        with writers.begin() as s:
            lifecycle.promote(
                session=s, tenant=tenant, item_id=ids["shadow"], to="active", actor=store.sme,
                now=NOW,
            )  # fmt: skip

    def revoke() -> None:
        with writers.begin() as s:
            for key in ("vonu", "ttl"):
                lifecycle.revoke(
                    session=s, tenant=tenant, item_id=ids[key], reason="x", actor=store.sme,
                    now=NOW,
                )  # fmt: skip

    ops: list[tuple[str, Callable[[], object]]] = [
        *((f"write {n}", write(n)) for n in range(5)),
        ("observe", observe),
        ("promote shadow->active", promote),
        ("revoke the checked items", revoke),
    ]
    done = []
    for name, op in ops:
        start = time.monotonic()
        try:
            op()
        except Exception as exc:
            done.append((name, time.monotonic() - start, f"{type(exc).__name__}: {exc}"[:200]))
            break  # the rest would wait as long: one is enough to fail
        else:
            done.append((name, time.monotonic() - start, None))
    return done


def test_writes_do_not_wait_for_an_open_recall(
    store: Store, world: dict[str, int], writer_sessions: sessionmaker[Session]
) -> None:
    request = recall.RecallRequest(
        query="tail latency on payment api", case_id="INC-1", explain=True, limit=10
    )
    with store.sessions() as held:
        try:
            res = recall.recall(
                session=held, tenant=store.tenant, actor=store.agent, request=request, now=NOW
            )
            returned = {r.item.id for r in res.items}
            assert {world["active"], world["case"], world["vonu"], world["ttl"]} <= returned
            pid = held.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            with ThreadPoolExecutor(1) as pool:
                results = pool.submit(_burst, store, writer_sessions, world).result(timeout=120)
            assert held.in_transaction()  # the recall's transaction is still open
            with writer_sessions() as probe:
                locks = probe.execute(
                    sa.text(
                        "SELECT locktype, mode, relation::regclass::text AS rel FROM pg_locks "
                        "WHERE pid = :pid AND granted AND mode <> 'AccessShareLock' "
                        "AND locktype <> 'virtualxid' ORDER BY 1, 2, 3"
                    ),
                    {"pid": pid},
                ).all()
        finally:
            held.rollback()
    blocked = [r for r in results if r[2] is not None]
    assert not blocked, (
        f"a write failed beside an open recall after {len(results) - 1} succeeded "
        f"(lock_timeout {TIMEOUT_MS} ms): {blocked}; the recall's transaction holds "
        f"{[tuple(r) for r in locks]}"
    )
    assert all(seconds < TIMEOUT_MS / 1000 for _, seconds, _ in results), results
