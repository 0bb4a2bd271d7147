"""Fixtures of the recall tests (the shared ones are in tests/conftest.py)."""

from __future__ import annotations

import pytest

import lifecycle
from tests.conftest import T0, Store


@pytest.fixture
def setup(store: Store) -> Store:
    """Case INC-1 open about payment-api, its pool max observed at 20 and its pool
    utilisation at 0.97 at T0 (test_recall and test_guard; a module may define its own)."""
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=store.agent,
            now=T0,
        )
    store.observe(
        T0,
        ("payment-api", "config.connection_pool.max", 20),
        ("payment-api", "metrics.pool_utilisation", 0.97),
    )
    return store
