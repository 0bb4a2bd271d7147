"""A first write to a session that another principal claims under it (docs/claims.md,
"Private anchors"): the loser's write is the gate's refusal, ``axis_not_writable``
with its audit row, never a ``Conflict``; for one item as for a batch. Forced by a
hook that claims the session between the ownership check and the claim, and raced
for real by two threads."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
from caveat import db
from claims import _queries as cq
from claims._write import _Writer
from predicates.errors import GateRejection
from tests.claims._support import request
from tests.conftest import T0, Store

OTHER = claims.Actor("agent-y", "agent", frozenset({"incidents"}))


def _claim_between_check_and_insert(
    store: Store, monkeypatch: pytest.MonkeyPatch, session_id: str
) -> None:
    """After the writer read the session's owner (none yet), another principal claims
    the session and commits: once, as a concurrent first write would."""
    own: Callable[..., Any] = _Writer._own_sessions
    done: list[bool] = []

    def hooked(self: _Writer, session: Session, *args: Any) -> Any:
        out = own(self, session, *args)
        if not done:
            done.append(True)
            with store.sessions.begin() as other:
                cq.claim_sessions(
                    session=other, tenant=store.tenant, ids=[session_id], principal=OTHER.id, at=T0
                )
        return out

    monkeypatch.setattr(_Writer, "_own_sessions", hooked)


def _refusals(store: Store) -> list[Any]:
    with store.sessions.begin() as s:
        return list(
            s.execute(
                sa.text(
                    "SELECT actor, code, detail FROM audit_log WHERE tenant_id = :t "
                    "AND action = 'reject' ORDER BY seq"
                ),
                {"t": store.tenant},
            ).all()
        )


def test_a_single_write_that_lost_the_session_is_refused_by_the_gate(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _claim_between_check_and_insert(store, monkeypatch, "run-9")
    with pytest.raises(GateRejection) as err:
        claims.write_item(
            sessions=store.sessions,
            tenant=store.tenant,
            request=request(scope="session:run-9", attribute="current_hypothesis"),
            actor=store.agent,
            now=T0,
        )
    assert err.value.code == "axis_not_writable"
    assert err.value.detail["anchor"] == "session:run-9"
    assert OTHER.id not in err.value.message  # names the anchor, never the owner
    [row] = _refusals(store)
    assert (row.actor, row.code) == (store.agent.id, "axis_not_writable")
    with store.sessions.begin() as s:
        assert cq.session_owners(session=s, tenant=store.tenant, ids=["run-9"]) == {
            "run-9": OTHER.id
        }
        n = s.execute(
            sa.text("SELECT count(*) FROM items WHERE tenant_id = :t AND scope_id = 'run-9'"),
            {"t": store.tenant},
        ).scalar_one()
    assert n == 0


def test_a_batch_that_lost_the_session_is_refused_item_by_item(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _claim_between_check_and_insert(store, monkeypatch, "run-9")
    result = claims.write_batch(
        sessions=store.sessions,
        tenant=store.tenant,
        requests=[
            request(scope="session:run-9", attribute="current_hypothesis"),
            request(scope="session:run-9", attribute="next_step"),
            request(attribute="restart_restored_service_at"),  # case:INC-1, unaffected
        ],
        actor=store.agent,
        now=T0,
    )
    assert [(o.outcome, o.code) for o in result.outcomes] == [
        ("rejected", "axis_not_writable"),
        ("rejected", "axis_not_writable"),
        ("accepted", None),
    ]
    assert [r.code for r in _refusals(store)] == ["axis_not_writable"] * 2


ROUNDS = 8


def test_two_principals_racing_for_a_new_session_one_wins_the_other_is_refused(
    store: Store, db_url: str
) -> None:
    engines = [db.make_engine(db_url, pool_size=1, max_overflow=0) for _ in range(2)]
    seen: Counter[tuple[str, str | None]] = Counter()
    unexpected: list[BaseException] = []
    lock = threading.Lock()
    writers = (store.agent, OTHER)
    try:
        for round_ in range(ROUNDS):
            barrier = threading.Barrier(2)

            def race(n: int, round_: int = round_, barrier: Any = barrier) -> None:
                sessions = sessionmaker(engines[n], expire_on_commit=False)
                req = request(scope=f"session:race-{round_}", attribute=f"hypothesis_{n}")
                barrier.wait()
                try:
                    res = claims.write_item(
                        sessions=sessions,
                        tenant=store.tenant,
                        request=req,
                        actor=writers[n],
                        now=T0,
                    )
                    with lock:
                        seen[(res.outcome, None)] += 1
                except GateRejection as exc:
                    with lock:
                        seen[("rejected", exc.code)] += 1
                except BaseException as exc:  # a Conflict included: the defect
                    with lock:
                        unexpected.append(exc)

            threads = [threading.Thread(target=race, args=(n,)) for n in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        assert unexpected == []
        assert seen == {("accepted", None): ROUNDS, ("rejected", "axis_not_writable"): ROUNDS}
    finally:
        for e in engines:
            e.dispose()
