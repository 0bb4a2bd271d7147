"""Facts and snapshots on the real store: typing, atomicity, freshness, precedence."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

import factgen
from predicates.errors import SubjectUnresolved, UnknownAttribute, ValueTypeError
from tests.conftest import T0, Store


def _count_facts(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(sa.text("SELECT count(*) FROM facts")).scalar_one())


def _snapshot(store: Store, at, inline=()):  # type: ignore[no-untyped-def]
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        typed = factgen.type_observations(world, list(inline), at)
        return factgen.build_snapshot(session=s, world=world, subjects=None, at=at, inline=typed)


def test_aliases_resolve_and_values_are_typed(store: Store) -> None:
    store.observe(T0, ("payment_api", "config.connection_pool.max", 20))
    snap = _snapshot(store, T0)
    entry = snap.get("payment-api", "config.connection_pool.max")
    assert entry is not None and entry.value == 20 and entry.source == "test"


@pytest.mark.parametrize(
    ("obs", "error"),
    [
        (("payment-api", "config.connection_pool.max", "twenty"), ValueTypeError),
        (("payment-api", "config.connection_pool.max", True), ValueTypeError),
        (("payment-api", "config.thread_pool.max", 3), UnknownAttribute),
        (("billing-gateway", "config.connection_pool.max", 3), SubjectUnresolved),
    ],
)
def test_one_bad_value_rejects_the_whole_batch(store: Store, obs, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as err:
        store.observe(T0, ("payment-api", "metrics.pool_utilisation", 0.5), obs)
    assert _count_facts(store) == 0
    if error is ValueTypeError:
        assert err.value.detail["attribute"] == "config.connection_pool.max"
        assert err.value.detail["expected"] == "int"


def test_int_widens_to_float(store: Store) -> None:
    store.observe(T0, ("payment-api", "metrics.pool_utilisation", 1))
    entry = _snapshot(store, T0).get("payment-api", "metrics.pool_utilisation")
    assert entry is not None and entry.value == 1


def test_latest_observation_wins_and_max_age_expires_it(store: Store) -> None:
    store.observe(T0, ("payment-api", "metrics.pool_utilisation", 0.97))
    store.observe(T0 + timedelta(minutes=5), ("payment-api", "metrics.pool_utilisation", 0.5))
    assert (
        _snapshot(store, T0 + timedelta(minutes=6))
        .get("payment-api", "metrics.pool_utilisation")
        .value
        == 0.5
    )  # type: ignore[union-attr]
    # 15 minutes after the latest it is stale, and the older one does not come back
    assert (
        _snapshot(store, T0 + timedelta(minutes=21)).get("payment-api", "metrics.pool_utilisation")
        is None
    )


def test_no_max_age_counts_until_replaced(store: Store) -> None:
    store.observe(T0, ("payment-api", "config.connection_pool.max", 20))
    later = _snapshot(store, T0 + timedelta(days=400))
    assert later.get("payment-api", "config.connection_pool.max").value == 20  # type: ignore[union-attr]


def test_snapshot_in_the_past_ignores_later_observations(store: Store) -> None:
    store.observe(T0, ("payment-api", "config.connection_pool.max", 20))
    store.observe(T0 + timedelta(days=12), ("payment-api", "config.connection_pool.max", 100))
    past = _snapshot(store, T0 + timedelta(days=1))
    assert past.get("payment-api", "config.connection_pool.max").value == 20  # type: ignore[union-attr]


def test_inline_observations_take_precedence(store: Store) -> None:
    store.observe(T0, ("payment-api", "config.connection_pool.max", 100))
    snap = _snapshot(
        store, T0, [factgen.Observation("payment_api", "config.connection_pool.max", 20)]
    )
    entry = snap.get("payment-api", "config.connection_pool.max")
    assert entry is not None and entry.value == 20 and entry.inline
    assert snap.to_json()["payment-api"]["config.connection_pool.max"]["t"] == "int"
