"""The schema is owned by Alembic: upgrade head, then autogenerate finds nothing."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import lifecycle.models  # noqa: F401
from caveat import db


def test_upgrade_head_then_autogenerate_finds_no_difference(pg_server_url: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:
                diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
                assert diff == []
                tables = set(sa.inspect(conn).get_table_names())
        finally:
            engine.dispose()
    assert {"items", "facts", "audit_log", "cases", "item_transitions"} <= tables


def test_downgrade_to_base_and_up_again(pg_server_url: str) -> None:
    from alembic import command

    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        command.downgrade(db.alembic_config(url), "base")
        db.migrate(url)
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:
                assert "items" in sa.inspect(conn).get_table_names()
        finally:
            engine.dispose()
