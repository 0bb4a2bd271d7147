"""The set-based moves' work follows what moves, not the tenant (docs/reliability.md, §7).

A revocation's move and an event's fan-out find their ``item_states`` rows by probing
the moved ids through the primary key. Joined to the id list alone, the planner
hashed every state row of the tenant: a 100,000 lineage's move grew with the tenant
(0.87 to 0.92 s in a tenant of 800,000 items, 0.38 to 0.51 s probed). Timing lives in
``python -m bench revocation --others M``; this pins the plan, as the application role
plans it, in a tenant far larger than what moves. The control plans the earlier join
in the same world and must scan the whole table, or the world proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

from bench.bench_lifecycle import TENANT, _insert, _setup, _vacuum
from caveat import db
from lifecycle import _queries as q
from lifecycle._bulk import Move, _group_move, _lineage_move

LINEAGE = 3_000
OTHERS = 30_000

#: The moves as they were: the ids joined to ``item_states`` with nothing else to
#: narrow it (the control).
JOINED_LINEAGE = sa.text(
    "WITH d(id) AS (SELECT descendant_id FROM item_ancestry WHERE tenant_id = :t "
    "AND ancestor_id = :i), u(id, g, target) AS ("
    "  SELECT CAST(:i AS bigint), 1, CAST(:root_target AS text)"
    "  UNION ALL SELECT id, 2, CAST(:target AS text) FROM d WHERE id <> :i"
    "), moved AS ("
    "  UPDATE item_states s SET previous = s.state, state = u.target FROM u"
    "  WHERE s.item_id = u.id AND s.tenant_id = :t AND (u.g || ':' || s.state) = ANY(:allowed)"
    "  RETURNING s.item_id, s.previous, u.g"
    ") SELECT item_id, previous, g FROM moved ORDER BY g, item_id"
)
JOINED_IDS = sa.text(
    "WITH moved AS ("
    "  UPDATE item_states s SET previous = s.state, state = u.target"
    "  FROM unnest(CAST(:ids AS bigint[]), CAST(:groups AS int[]), CAST(:targets AS text[]))"
    "    AS u(id, g, target)"
    "  WHERE s.item_id = u.id AND s.tenant_id = :t AND (u.g || ':' || s.state) = ANY(:allowed)"
    "  RETURNING s.item_id, s.previous, u.g"
    ") SELECT item_id, previous, g FROM moved ORDER BY g, item_id"
)


@pytest.fixture(scope="module")
def world(pg_server_url: str) -> Iterator[tuple[str, int, list[int]]]:
    """A tenant of ``OTHERS`` items around one lineage tree of ``LINEAGE``
    descendants, analysed; its owner URL, the tree's root and the tree's ids."""
    with db.with_database(pg_server_url, prefix="caveat_plans") as url:
        db.migrate(url)
        engine = db.make_engine(url)
        try:
            sessions = sessionmaker(engine, expire_on_commit=False)
            _setup(sessions)
            _insert(sessions, n=OTHERS, subject="payment-api", ctype="configuration", tree=False)
            root = _insert(
                sessions, n=LINEAGE + 1, subject="orders-db", ctype="failure_mechanism", tree=True
            )
            _vacuum(engine)
        finally:
            engine.dispose()
        yield url, root, list(range(root, root + LINEAGE + 1))


def _plan(url: str, statement: sa.TextClause, params: dict[str, Any]) -> str:
    """The plan of ``statement`` as ``caveat_app`` plans it, its tenant set (not run)."""
    engine = db.make_app_engine(url, poolclass=sa.pool.NullPool)
    try:
        with db.tenant_sessions(engine, TENANT).begin() as s:
            connection = s.connection()
            assert s.execute(sa.text("SELECT current_user")).scalar_one() == db.APP_ROLE
            sql = str(statement.compile(dialect=connection.dialect))
            raw = connection.connection.driver_connection
            assert raw is not None
            with raw.cursor() as cur:
                cur.execute("EXPLAIN " + sql, params)
                return "\n".join(str(r[0]) for r in cur.fetchall())
    finally:
        engine.dispose()


def _moves(ids: list[int]) -> dict[sa.TextClause, dict[str, Any]]:
    """The fan-out statements over ``ids`` with their parameters, as ``transition_many``
    makes them: one move (``MOVE_ONE``) and the same ids in a deploy's two (``MOVE``)."""
    half = len(ids) // 2
    out = {}
    for moves in (
        [Move("expire_affected", ids, "deploy")],
        [
            Move("expire_affected", ids[:half], "deploy"),
            Move("expire_unaffected", ids[half:], "deploy"),
        ],
    ):
        planned = _group_move(TENANT, moves)
        assert planned is not None
        out[planned[0]] = planned[1]
    return out


def test_a_revocation_probes_its_lineage_and_never_scans_the_tenant(
    world: tuple[str, int, list[int]],
) -> None:
    url, root, _ = world
    _, params = _lineage_move(TENANT, root, "coincidence")
    plan = _plan(url, q.MOVE_LINEAGE, params)
    assert "Seq Scan on item_states" not in plan, plan
    assert "item_states_pkey" in plan, plan
    control = _plan(url, JOINED_LINEAGE, params)
    assert "Seq Scan on item_states" in control, control


def test_an_event_fan_out_probes_its_ids_and_never_scans_the_tenant(
    world: tuple[str, int, list[int]],
) -> None:
    url, _, ids = world
    moves = _moves(ids)
    assert set(moves) == {q.MOVE, q.MOVE_ONE}
    for statement, params in moves.items():
        plan = _plan(url, statement, params)
        assert "Seq Scan on item_states" not in plan, plan
        assert "item_states_pkey" in plan, plan
    control = _plan(url, JOINED_IDS, moves[q.MOVE])
    assert "Seq Scan on item_states" in control, control
