"""Migration 0030: a recall's lookup of the core blocks in play reads an index of blocks
alone, as the application role under row-level security."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import command

import claims
from caveat import app as use
from caveat import db
from tests.caveat._doors import world
from tests.conftest import ADMIN


def _plan(rt: use.Runtime, statement: str, params: Any) -> str:
    with rt.transaction() as s:
        conn = s.connection()
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        rows = conn.exec_driver_sql(f"EXPLAIN {statement}", params).scalars().all()
    return "\n".join(rows)


def test_the_blocks_in_play_are_found_by_their_own_index(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        sent: list[tuple[str, Any]] = []

        def keep(*a: Any) -> None:
            sent.append((a[2], a[3]))

        sa.event.listen(engine, "before_cursor_execute", keep)
        with rt.transaction() as s:
            assert claims.blocks_in_play(session=s, tenant="acme", actor=ADMIN, teams=["sre"]) == []
        sa.event.remove(engine, "before_cursor_execute", keep)
        [(statement, params)] = [x for x in sent if "'block'" in x[0]]
        plan = _plan(rt, statement, params)
        # an index scan of blocks alone, never a walk of the tenant's whole key index
        assert "ix_items_current_blocks" in plan, plan
        assert "uq_items_current_key" not in plan, plan
        command.downgrade(db.alembic_config(db_url), "0029")
        assert "ix_items_current_blocks" not in _plan(rt, statement, params)  # gone with it
        db.migrate(db_url)
        assert "ix_items_current_blocks" in _plan(rt, statement, params)
    finally:
        engine.dispose()
