"""Several connections racing to supersede one key: one current row, typed losers."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

import claims
from caveat import db
from predicates.errors import Conflict
from tests.claims._support import chain_ok, count, current_per_key, request
from tests.conftest import T0, Store

WRITERS = 4
ROUNDS = 25


def test_racing_supersessions_leave_one_current_row(store: Store, db_url: str) -> None:
    engines = [db.make_engine(db_url, pool_size=1, max_overflow=0) for _ in range(WRITERS)]
    outcomes: Counter[str] = Counter()
    unexpected: list[BaseException] = []
    lock = threading.Lock()
    try:
        for round_ in range(ROUNDS):
            barrier = threading.Barrier(WRITERS)

            def race(n: int, round_: int = round_, barrier: Any = barrier) -> None:
                sessions = sessionmaker(engines[n], expire_on_commit=False)
                req = request(attribute="lag_returned_within_s", object=round_ * 100 + n)
                barrier.wait()
                try:
                    res = claims.write_item(
                        sessions=sessions,
                        tenant=store.tenant,
                        request=req,
                        actor=store.agent,
                        now=T0,
                    )
                    with lock:
                        outcomes[res.outcome] += 1
                except Conflict:
                    with lock:
                        outcomes["conflict"] += 1
                except BaseException as exc:  # anything else is a failure of the test
                    with lock:
                        unexpected.append(exc)

            threads = [threading.Thread(target=race, args=(n,)) for n in range(WRITERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert unexpected == []
            assert current_per_key(store) == 1
    finally:
        for e in engines:
            e.dispose()
    assert sum(outcomes.values()) == WRITERS * ROUNDS
    assert outcomes["conflict"] > 0  # the race was real
    accepted = outcomes["accepted"]
    items = count(store, "SELECT count(*) FROM items WHERE tenant_id = :t")
    superseded = count(
        store, "SELECT count(*) FROM items WHERE tenant_id = :t AND superseded_at IS NOT NULL"
    )
    assert items == accepted and superseded == accepted - 1
    # every loser's refusal is on the record, in a chain that still holds
    refusals = count(
        store,
        "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND action = 'reject' "
        "AND code = 'conflict'",
    )
    assert refusals == outcomes["conflict"]
    assert chain_ok(store)
    with store.engine.connect() as c:
        linked = c.execute(
            sa.text(
                "SELECT count(*) FROM items o JOIN items n ON n.id = o.superseded_by "
                "JOIN item_states os ON os.item_id = o.id "
                "WHERE o.tenant_id = :t AND os.state = 'superseded'"
            ),
            {"t": store.tenant},
        ).scalar_one()
    assert linked == superseded
