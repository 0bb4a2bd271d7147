"""The process-lifetime runtime: one engine, a cached world, recall as the application
role under row-level security."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

import claims
import factgen
import recall
from caveat import db
from caveat.app import Runtime
from caveat.settings import Settings
from predicates import ValueType
from tests.conftest import T0, Store
from tests.recall.test_recall import _activate, _write


@pytest.fixture
def runtime(store: Store, db_url: str) -> Any:
    engine = db.make_app_engine(db_url)
    rt = Runtime(Settings(), db_url, engine, store.tenant, db.tenant_sessions(engine, store.tenant))
    yield rt
    engine.dispose()


def test_runtime_recalls_as_the_application_role_with_a_cached_world(
    store: Store, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with runtime.sessions.begin() as s:
        assert s.execute(sa.text("SELECT current_user")).scalar() == db.APP_ROLE
    with store.sessions.begin() as s:
        from lifecycle import open_case

        open_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=store.agent,
            now=T0,
        )
    item = _write(store)
    _activate(store, item)
    store.observe(
        T0,
        ("payment-api", "config.connection_pool.max", 20),
        ("payment-api", "metrics.pool_utilisation", 0.9),
    )
    loads: list[str] = []
    real = factgen.load_world

    def counted(**kw: Any) -> factgen.World:
        loads.append(kw["tenant"])
        return real(**kw)

    monkeypatch.setattr("factgen._world.load_world", counted)
    req = recall.RecallRequest("pool exhausted", case_id="INC-1")
    first = runtime.recall(store.agent, req, T0)
    second = runtime.recall(store.agent, req, T0)
    assert [r.item.id for r in first.items] == [r.item.id for r in second.items] == [item]
    assert loads == [store.tenant]  # the second recall used the cached world
    use = runtime.record_use(store.agent, req, [item], T0)
    assert use.used == (item,)
    guard = runtime.check_context(store.agent, [item], "INC-1", T0, record=True)
    assert guard.usable == (item,)
    # another tenant's transaction sees none of it, under row-level security
    other = db.tenant_sessions(runtime.engine, "elsewhere")
    with other.begin() as s:
        assert s.execute(sa.text("SELECT count(*) FROM items")).scalar() == 0
        assert s.execute(sa.text("SELECT count(*) FROM facts_current")).scalar() == 0


def test_runtime_sessions_scan_from_the_first_page(runtime: Runtime) -> None:
    """Synchronized sequential scans are off for the application's sessions: a scan that
    joined another one midway would give recall's capped full-text candidates another
    first page, and the same question another answer."""
    with runtime.sessions.begin() as s:
        assert s.execute(sa.text("SHOW synchronize_seqscans")).scalar() == "off"
    with db.make_engine(runtime.server_url).connect() as c:  # the default is on
        assert c.execute(sa.text("SHOW synchronize_seqscans")).scalar() == "on"


def test_an_unreachable_replica_is_named_as_the_replica(db_url: str) -> None:
    """A replica that cannot be reached at start-up is refused, and the error says it is
    the replica (the primary answered), not "the database"."""
    from caveat.app import open_runtime

    unreachable = "postgresql://nobody@127.0.0.1:1/nothing"
    settings = Settings(database_url=db_url, replica_url=unreachable)
    with pytest.raises(db.DatabaseError) as info, open_runtime(settings, embedder=None):
        pass
    assert info.value.message.startswith("the replica (CAVEAT_REPLICA_URL): cannot reach")
    assert info.value.code == "database_unavailable"


def test_a_write_through_the_runtime_uses_its_cached_world_and_sees_a_new_schema(
    db_url: str,
) -> None:
    """The write path takes the runtime's world (checked against the world version in
    the write's own transaction): no world read per write, and a declaration made by
    another process is seen by the next write."""
    from caveat import app as use
    from tests.caveat._doors import world
    from tests.conftest import ADMIN

    engine, other_engine = db.make_app_engine(db_url), db.make_app_engine(db_url)
    try:
        rt, other = Runtime.over(engine, "acme"), Runtime.over(other_engine, "acme")
        world(rt)
        use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])

        def item(n: int, condition: str) -> Any:
            return claims.ItemWrite.model_validate(
                {"kind": "fact", "subject": "payment-api", "attribute": f"seen_{n}",
                 "object": n, "required": [condition], "evidence": ["E-1"],
                 "scope": {"axis": "case", "id": "INC-1"}, "text": f"seen {n}"}
            )  # fmt: skip

        use.write_batch(rt, ADMIN, [item(0, "config.connection_pool.max eq 20")])
        sent: list[str] = []

        def keep(*a: Any) -> None:
            sent.append(a[2])

        sa.event.listen(engine, "before_cursor_execute", keep)
        [ok] = use.write_batch(rt, ADMIN, [item(1, "config.connection_pool.max eq 20")]).outcomes
        assert ok.outcome == "accepted"
        assert not [s for s in sent if "FROM entity_aliases" in s]  # the cached world
        [refused] = use.write_batch(rt, ADMIN, [item(2, "metrics.new_gauge gte 1")]).outcomes
        assert refused.outcome == "rejected"
        spec = factgen.AttributeSpec("metrics.new_gauge", ValueType.parse("int"))
        use.declare_schema(other, ADMIN, [spec])  # another worker declares it
        [now_ok] = use.write_batch(rt, ADMIN, [item(3, "metrics.new_gauge gte 1")]).outcomes
        assert now_ok.outcome == "accepted", now_ok
    finally:
        engine.dispose()
        other_engine.dispose()
