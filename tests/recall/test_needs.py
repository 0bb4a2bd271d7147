"""What a refresh pulls (recall.needs) on the real store: the conditions of the items a
recall could return, the observations they lack (none, or older than max_age)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import claims
import factgen
import lifecycle
import recall
from predicates.errors import Forbidden, InputError
from tests.conftest import T0, Store
from tests.recall.test_recall import _activate, _write

UTIL = ("payment-api", "metrics.pool_utilisation")
MAX = ("payment-api", "config.connection_pool.max")


@pytest.fixture
def store(store: Store) -> Store:
    """The shared store with cases INC-1 and INC-9 open about payment-api, nothing
    observed (each test observes what it needs)."""
    with store.sessions.begin() as s:
        for case in ("INC-1", "INC-9"):
            lifecycle.open_case(
                session=s,
                tenant=store.tenant,
                case_id=case,
                subjects=["payment-api"],
                actor=store.agent,
                now=T0,
            )
    return store


def _needs(
    store: Store, actor: claims.Actor | None = None, at: object = T0, **kw: object
) -> list[tuple[str, str]]:
    request = recall.RecallRequest(**{"query": "pool exhausted", **kw})  # type: ignore[arg-type]
    with store.sessions.begin() as s:
        return recall.needs(
            session=s,
            tenant=store.tenant,
            actor=actor or store.agent,
            request=request,
            now=at,  # type: ignore[arg-type]
        )


def test_a_condition_nobody_observed_is_needed_and_an_observed_one_is_not(store: Store) -> None:
    store.observe(T0, ("payment-api", "config.connection_pool.max", 20))
    _activate(store, _write(store))  # requires the pool max and the utilisation
    assert _needs(store, subjects=["payment-api"]) == [UTIL]
    # an alias asks for the same subject; given inline, nothing is lacking
    assert _needs(store, subjects=["payment_api"]) == [UTIL]
    inline = [factgen.Observation(*UTIL, 0.97)]
    assert _needs(store, subjects=["payment-api"], observations=inline) == []


def test_an_observation_older_than_max_age_is_needed_again(store: Store) -> None:
    store.observe(T0, (*MAX, 20), (*UTIL, 0.97))
    _activate(store, _write(store))
    assert _needs(store, subjects=["payment-api"], at=T0 + timedelta(minutes=14)) == []
    # utilisation's max_age is 15 minutes; the pool max has none: never stale
    assert _needs(store, subjects=["payment-api"], at=T0 + timedelta(minutes=16)) == [UTIL]


def test_only_the_conditions_of_items_the_recall_could_return_are_needed(store: Store) -> None:
    # excluded conditions count, and an @entity condition needs that entity's attribute
    _activate(
        store,
        _write(
            store,
            required=["config.connection_pool.max eq 20"],
            excluded=["@payments-db:env.postgres.version gte v16"],
        ),
    )
    # a neighbour's item (payment-api depends on payments-db): the recall widens to it
    neighbour = ["lag_returned_within_s eq 1"]
    _activate(store, _write(store, subject="payments-db", attribute="a1", required=neighbour))
    # not candidates, each naming a pair no candidate names: another subject's item, a
    # shadow item, an item of another case, one for another purpose, one not valid yet,
    # one the caller may not read
    _activate(store, _write(store, subject="orders-db", attribute="a2", required=neighbour))
    shadow = _write(store, attribute="a3", required=["metrics.pool_utilisation gte 0.5"])
    with store.sessions.begin() as s:
        lifecycle.promote(
            session=s, tenant=store.tenant, item_id=shadow, to="shadow", actor=store.sme, now=T0
        )
    other_case = {"axis": "case", "id": "INC-9"}
    _write(store, attribute="a4", required=["env.postgres.version gte v1"], scope=other_case)
    purposed = _write(
        store, attribute="a5", required=["lag_returned_within_s eq 2"], purposes=["postmortem"]
    )
    _activate(store, purposed)
    later = _write(
        store,
        attribute="a6",
        required=["@payments-db:metrics.pool_utilisation gte 0.1"],
        valid_from=(T0 + timedelta(hours=1)).isoformat(),
    )
    _activate(store, later)
    insider = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
    secret = _write(
        store,
        actor=insider,
        attribute="a7",
        evidence=["E-secret"],
        object="E-secret",
        required=["@payments-db:config.connection_pool.max eq 1"],
    )
    _activate(store, secret)
    expected = [
        MAX,
        ("payments-db", "env.postgres.version"),
        ("payments-db", "lag_returned_within_s"),
    ]
    assert _needs(store, subjects=["payment-api"]) == expected
    # each left-out item is a candidate once the request admits it
    assert _needs(store, actor=insider, subjects=["payment-api"]) == sorted(
        [*expected, ("payments-db", "config.connection_pool.max")]
    )
    assert ("payment-api", "lag_returned_within_s") in _needs(
        store, subjects=["payment-api"], purpose="postmortem"
    )
    assert ("payment-api", "env.postgres.version") in _needs(
        store, subjects=["payment-api"], case_id="INC-9"
    )
    assert ("payments-db", "metrics.pool_utilisation") in _needs(
        store, subjects=["payment-api"], at=T0 + timedelta(hours=2)
    )
    assert _needs(store, subjects=["orders-db"]) == [("orders-db", "lag_returned_within_s")]


def test_an_item_waiting_for_its_check_needs_an_observation_since_then(store: Store) -> None:
    # a permission refusal's secondary TTL (1 h) runs out at T0+60m: it then waits for
    # its check, which counts only observations made since
    store.observe(T0, (*MAX, 20))
    _activate(store, _write(store, content_type="permission_refusal"))
    hour = T0 + timedelta(minutes=61)
    store.observe(hour, (*UTIL, 0.97))
    assert _needs(store, subjects=["payment-api"], at=T0 + timedelta(minutes=59)) == [UTIL]
    assert _needs(store, subjects=["payment-api"], at=hour) == [MAX]


def test_a_refresh_needs_subjects_and_now(store: Store) -> None:
    with pytest.raises(InputError, match="refresh needs subjects"):
        _needs(store)
    with pytest.raises(InputError, match="as-of"):
        _needs(store, subjects=["payment-api"], as_of=T0)
    with pytest.raises(Forbidden):
        _needs(store, actor=store.sme, subjects=["payment-api"])
