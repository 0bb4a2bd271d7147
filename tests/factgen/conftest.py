"""Fixtures of the factgen tests: the shared ``store`` with a richer schema."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import factgen
from predicates import ValueType
from tests.conftest import ADMIN, T0, Store

EXTRA = [
    ("config.pgbouncer.pool_mode", "enum[session,transaction,statement]", None),
    ("config.connection_pool.timeout", "duration", None),
    ("config.pools.*.size", "int", None),
    ("config.debug", "bool", None),
    ("config.owner", "string", None),
    ("metrics.up", "bool", None),
    ("metrics.started_at", "timestamp", None),
    ("metrics.p99_latency", "duration", timedelta(minutes=5)),
]


@pytest.fixture
def world_store(store: Store) -> Store:
    """``store`` plus attributes of every type the adapters must handle."""
    with store.sessions.begin() as s:
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=store.tenant,
            specs=[factgen.AttributeSpec(a, ValueType.parse(t), max_age=m) for a, t, m in EXTRA],
        )
    return store


def count(store: Store, table: str) -> int:
    """Rows in ``table``."""
    with store.engine.connect() as c:
        return int(c.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


@pytest.fixture
def run(world_store: Store) -> Callable[..., Any]:
    """``run(fn, **kwargs)``: call a factgen import in its own transaction with the world."""

    def call(fn: Callable[..., Any], **kwargs: Any) -> Any:
        with world_store.sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=world_store.tenant)
            kwargs.setdefault("now", T0 + timedelta(seconds=1))
            kwargs.setdefault("actor", ADMIN)
            return fn(session=s, world=world, **kwargs)

    return call
