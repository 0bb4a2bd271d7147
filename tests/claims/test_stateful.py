"""The store against an in-memory model (hypothesis RuleBasedStateMachine).

Writes (new keys, duplicates, supersessions, lineage), revocations and
as-of reads run against the real store and a dictionary model; after every
step they agree on every row's state, object and currency, and no key has
more than one current row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import claims
import lifecycle
from predicates.errors import GateRejection
from tests.claims._support import current_per_key, request, rows
from tests.claims.conftest import new_tenant_store
from tests.conftest import T0

#: Items with their current state (migration 0007).
J = "items i JOIN item_states s ON s.item_id = i.id"

ATTRIBUTES = ("lag_returned_within_s", "recovery_minutes")
CONDITIONS: tuple[tuple[str, ...], ...] = ((), ("config.connection_pool.max eq 20",))
CIRCULATING = {"case", "shadow", "active", "verify_on_next_use"}
KEEP_WHEN_SUPERSEDED = {"revoked", "refuted"}

Key = tuple[str, tuple[str, ...]]


@dataclass
class ModelItem:
    key: Key
    object: int
    parent: int | None
    recorded_at: datetime
    superseded_at: datetime | None = None
    history: list[tuple[datetime, str]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.history[-1][1]

    def state_at(self, at: datetime) -> str:
        return [s for t, s in self.history if t <= at][-1]


def _plain(obj: dict[str, Any]) -> Any:
    """A stored literal: typed ``{"t": ..., "v": ...}`` for declared attributes, else bare."""
    value = obj["value"]
    return value["v"] if isinstance(value, dict) else value


class StoreMachine(RuleBasedStateMachine):
    engine: sa.Engine

    def __init__(self) -> None:
        super().__init__()
        self.store = new_tenant_store(self.engine)
        self.now = T0
        self.items: dict[int, ModelItem] = {}
        self.current: dict[Key, int] = {}
        self.times: list[datetime] = [T0]

    def _tick(self) -> datetime:
        self.now += timedelta(minutes=1)
        self.times.append(self.now)
        return self.now

    def _ancestors(self, item_id: int) -> set[int]:
        out: set[int] = set()
        todo = [item_id]
        while todo:
            i = todo.pop()
            if i in out:
                continue
            out.add(i)
            parent = self.items[i].parent
            if parent is not None:
                todo.append(parent)
        return out

    @rule(
        attribute=st.sampled_from(ATTRIBUTES),
        conditions=st.sampled_from(CONDITIONS),
        obj=st.integers(1, 3),
        parent=st.one_of(st.none(), st.integers(0, 10_000)),
    )
    def write(
        self, attribute: str, conditions: tuple[str, ...], obj: int, parent: int | None
    ) -> None:
        now = self._tick()
        ids = sorted(self.items)
        parent_id = None if parent is None or not ids else ids[parent % len(ids)]
        key: Key = (attribute, conditions)
        req = request(
            attribute=attribute,
            object=obj,
            required=list(conditions),
            derived_from=[] if parent_id is None else [parent_id],
        )
        revoked = parent_id is not None and any(
            self.items[a].state == "revoked" for a in self._ancestors(parent_id)
        )
        try:
            got = claims.write_item(
                sessions=self.store.sessions,
                tenant=self.store.tenant,
                request=req,
                actor=self.store.agent,
                now=now,
            )
        except GateRejection as exc:
            assert revoked and exc.code == "lineage_revoked", exc.code
            return
        assert not revoked
        cur = self.current.get(key)
        if cur is not None and self.items[cur].object == obj:
            assert (got.outcome, got.item_id) == ("duplicate", cur)
            return
        assert got.outcome == "accepted" and got.superseded == cur
        if cur is not None:
            old = self.items[cur]
            old.superseded_at = now
            if old.state not in KEEP_WHEN_SUPERSEDED:
                old.history.append((now, "superseded"))
        self.items[got.item_id] = ModelItem(key, obj, parent_id, now, history=[(now, "case")])
        self.current[key] = got.item_id

    @precondition(lambda self: any(i.state != "revoked" for i in self.items.values()))
    @rule(pick=st.integers(0, 10_000))
    def revoke(self, pick: int) -> None:
        now = self._tick()
        candidates = sorted(i for i, m in self.items.items() if m.state != "revoked")
        target = candidates[pick % len(candidates)]
        with self.store.sessions.begin() as s:
            lifecycle.revoke(
                session=s,
                tenant=self.store.tenant,
                item_id=target,
                reason="model says so",
                actor=self.store.sme,
                now=now,
            )
        self.items[target].history.append((now, "revoked"))
        for i, m in self.items.items():
            if i != target and target in self._ancestors(i) and m.state in CIRCULATING:
                m.history.append((now, "needs_reverification"))

    @rule(pick=st.integers(0, 10_000))
    def read_as_of(self, pick: int) -> None:
        at = self.times[pick % len(self.times)]
        with self.store.sessions.begin() as s:
            got = claims.items_as_of(
                session=s, tenant=self.store.tenant, actor=self.store.agent, at=at
            )
        expected = {
            i: (m.object, m.state_at(at))
            for i, m in self.items.items()
            if m.recorded_at <= at and (m.superseded_at is None or m.superseded_at > at)
        }
        assert {r.id: (_plain(r.object), r.state) for r in got} == expected

    @invariant()
    def store_agrees_with_model(self) -> None:
        assert current_per_key(self.store) <= 1
        stored = {
            r.id: (r.state, r.superseded_at, r.superseded_by)
            for r in rows(
                self.store,
                "SELECT i.id, s.state, i.superseded_at, i.superseded_by "
                f"FROM {J} WHERE i.tenant_id = :t",
            )
        }
        assert set(stored) == set(self.items)
        for i, m in self.items.items():
            state, superseded_at, successor = stored[i]
            assert state == m.state, (i, state, m.state)
            assert superseded_at == m.superseded_at
            assert (successor is None) == (m.superseded_at is None)
        assert {m.key: i for i, m in self.items.items() if m.superseded_at is None} == self.current


def test_store_against_model(shared_engine: sa.Engine) -> None:
    StoreMachine.engine = shared_engine
    run = StoreMachine.TestCase
    run.settings = settings(
        max_examples=35,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    run().runTest()
