"""The context guard answers by recall's rule (model §4.4, issue 23 finding 1).

For the items it is given: the state, the verify-on-next-use check, applicability
(every required condition TRUE, every excluded one FALSE, UNKNOWN never granted) and
the validity window, on what is observed now, inline observations first. An item that
no longer applies is dropped as ``applicability`` with its condition values, and its
state does not change. The property at the end holds the guard to recall itself.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import claims
import factgen
import lifecycle
import recall
from tests.conftest import ADMIN, T0, Store
from tests.recall.test_recall import _activate, _write

LATER = T0 + timedelta(minutes=5)


def _guard(
    store: Store,
    ids: list[int],
    *,
    at: Any = LATER,
    observations: tuple[factgen.Observation, ...] = (),
    record: bool = False,
) -> recall.ContextCheck:
    check = recall.record_context if record else recall.check_context
    with store.sessions.begin() as s:
        return check(
            session=s,
            tenant=store.tenant,
            actor=store.agent,
            item_ids=ids,
            case_id="INC-1",
            now=at,
            observations=observations,
        )


def _state(store: Store, item: int) -> str:
    with store.sessions.begin() as s:
        return claims.get_items(session=s, tenant=store.tenant, ids=[item])[item].state


def _recalled(
    store: Store,
    ids: list[int],
    at: Any,
    observations: tuple[factgen.Observation, ...] = (),
    case: str = "INC-1",
) -> set[int]:
    """The ids among ``ids`` that a recall with the same observations admits by its
    gates (asked as pinned items: they come back when they pass every gate)."""
    req = recall.RecallRequest(query="pool", pinned=ids, case_id=case, observations=observations)
    with store.sessions.begin() as s:
        res = recall.recall(session=s, tenant=store.tenant, actor=store.agent, request=req, now=at)
    return {r.item.id for r in res.pinned}


def test_an_item_whose_condition_became_false_is_dropped_with_its_values(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    setup.observe(
        LATER,
        ("payment-api", "config.connection_pool.max", 50),
        ("payment-api", "metrics.pool_utilisation", 0.97),
    )
    res = _guard(setup, [item])
    assert res.usable == () and res.dropped == {item: "applicability"}
    values = {c.condition: c.value.name for c in res.conditions[item]}
    assert values == {
        "config.connection_pool.max eq 20": "FALSE",
        "metrics.pool_utilisation gte 0.8": "TRUE",
    }
    [pool] = [c for c in res.conditions[item] if c.attribute == "config.connection_pool.max"]
    assert pool.observed is not None and pool.observed.value == 50
    assert _recalled(setup, [item], LATER) == set()  # recall agrees
    # recorded: the state does not change (it is not wrong, it no longer applies here)
    assert _guard(setup, [item], record=True).dropped == {item: "applicability"}
    assert _state(setup, item) == "active"


def test_unknown_is_never_granted(setup: Store) -> None:
    """Utilisation has a 15-minute max_age: an hour later it is UNKNOWN, and dropped."""
    item = _write(setup)
    _activate(setup, item)
    res = _guard(setup, [item], at=T0 + timedelta(hours=1))
    assert res.dropped == {item: "applicability"}
    values = {c.condition: c.value.name for c in res.conditions[item]}
    assert values["metrics.pool_utilisation gte 0.8"] == "UNKNOWN"
    assert _guard(setup, [item]).usable == (item,)  # within max_age it applies


def test_inline_observations_take_precedence(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    fifty = (factgen.Observation("payment-api", "config.connection_pool.max", 50),)
    res = _guard(setup, [item], observations=fifty)
    assert res.dropped == {item: "applicability"}
    [pool] = [c for c in res.conditions[item] if c.attribute == "config.connection_pool.max"]
    assert pool.observed is not None and pool.observed.inline and pool.observed.value == 50
    setup.observe(LATER, ("payment-api", "config.connection_pool.max", 50))
    twenty = (factgen.Observation("payment-api", "config.connection_pool.max", 20),)
    assert _guard(setup, [item], observations=twenty).usable == (item,)
    assert _guard(setup, [item]).dropped == {item: "applicability"}


def test_an_item_past_its_validity_window_is_dropped(setup: Store) -> None:
    item = _write(setup, valid_to=(T0 + timedelta(minutes=1)).isoformat())
    _activate(setup, item)
    assert _guard(setup, [item], at=T0 + timedelta(seconds=30)).usable == (item,)
    res = _guard(setup, [item])
    assert res.dropped == {item: "validity_window"} and res.conditions == {}


def test_a_state_drop_comes_before_applicability(setup: Store) -> None:
    """Recall's gate order: a revoked item is dropped as revoked, whatever it observes."""
    item = _write(setup)
    _activate(setup, item)
    with setup.sessions.begin() as s:
        lifecycle.revoke(
            session=s, tenant=setup.tenant, item_id=item, reason="x", actor=setup.sme, now=T0
        )
    fifty = (factgen.Observation("payment-api", "config.connection_pool.max", 50),)
    assert _guard(setup, [item], observations=fifty).dropped == {item: "revoked"}


def test_an_exists_condition_observed_before_the_check_is_unknown_everywhere(
    setup: Store,
) -> None:
    """A pending check counts only observations made since its event; an attribute last
    observed before it is UNKNOWN, ``exists`` included (observed, just not since: not an
    absence). A ranked recall, the guard and the recorded check answer alike: withheld."""
    item = _write(
        setup,
        content_type="configuration",
        required=["metrics.pool_utilisation gte 0.8"],
        excluded=["config.connection_pool.max exists"],
    )
    _activate(setup, item)
    deploy = T0 + timedelta(minutes=1)
    with setup.sessions.begin() as s:
        w = factgen.load_world(session=s, tenant=setup.tenant)
        event = factgen.record_event(
            actor=ADMIN,
            session=s,
            world=w,
            type="deploy",
            subjects=["payment-api"],
            now=deploy,
            occurred_at=deploy,
        )
        lifecycle.handle_event(session=s, tenant=setup.tenant, event=event, now=deploy)
    assert _state(setup, item) == "verify_on_next_use"
    setup.observe(LATER, ("payment-api", "metrics.pool_utilisation", 0.97))  # after it
    at = LATER + timedelta(seconds=1)
    req = recall.RecallRequest(query="pool exhausted restart", case_id="INC-1")
    with setup.sessions.begin() as s:
        ranked = recall.recall(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req, now=at
        )
    assert item not in {r.item.id for r in ranked.items}
    assert item not in _guard(setup, [item], at=at).usable
    with setup.sessions.begin() as s:
        [record] = claims.get_items(session=s, tenant=setup.tenant, ids=[item]).values()
        snapshot = factgen.build_snapshot(
            session=s, world=w, subjects=["payment-api"], at=at, current=True
        )
    check = lifecycle.check_item(record, w, snapshot, deploy)
    assert not check.passed
    [exists] = [v for v in check.values if v.condition.endswith("exists")]
    assert exists.value.name == "UNKNOWN"


# --- the guard agrees with recall ------------------------------------------------

_CONDITIONS = {
    "pool20": ("required", "config.connection_pool.max eq 20"),
    "pool_ge_30": ("required", "config.connection_pool.max gte 30"),
    "hot": ("required", "metrics.pool_utilisation gte 0.8"),
    "not_tiny": ("excluded", "config.connection_pool.max lt 10"),
    # FALSE without an observation, UNKNOWN with one made before a pending check's
    # instant (lifecycle.check_item): the case where the two used to disagree
    "unobserved": ("excluded", "config.connection_pool.max exists"),
}
_STATES = ("active", "own_case", "other_case", "verify_on_next_use", "revoked")
_counter = itertools.count(1)


@st.composite
def _worlds(draw: st.DrawFn) -> dict[str, Any]:
    n_items = draw(st.integers(min_value=1, max_value=4))
    items = [
        {
            "state": draw(st.sampled_from(_STATES)),
            "conditions": draw(st.sets(st.sampled_from(sorted(_CONDITIONS)), max_size=3)),
            "expired": draw(st.booleans()),
        }
        for _ in range(n_items)
    ]
    pool = st.none() | st.sampled_from([5, 20, 30, 50])
    return {
        "items": items,
        "pool_before": draw(pool),  # observed before the deploy
        "pool_after": draw(pool),  # observed after it
        "hot_after": draw(st.none() | st.sampled_from([0.5, 0.9])),
        "inline_pool": draw(pool),
        "inline_hot": draw(st.none() | st.sampled_from([0.5, 0.9])),
    }


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=_worlds())
def test_the_guard_admits_exactly_what_recall_admits(store: Store, world: dict[str, Any]) -> None:
    """For random states, conditions, stored and inline observations: an item is usable
    by the guard iff a recall with the same observations admits it by its gates."""
    n = next(_counter)
    subject, case = f"svc-{n}", f"INC-P{n}"
    t0 = T0 + timedelta(days=n)
    with store.sessions.begin() as s:
        w = factgen.load_world(session=s, tenant=store.tenant)
        factgen.import_entities(
            actor=ADMIN, session=s, world=w, entities=[factgen.EntitySpec(subject, "service")]
        )
        for c in (case, f"{case}-other"):
            lifecycle.open_case(
                session=s,
                tenant=store.tenant,
                case_id=c,
                subjects=[subject],
                actor=store.agent,
                now=t0,
            )
    if world["pool_before"] is not None:
        store.observe(t0, (subject, "config.connection_pool.max", world["pool_before"]))
    ids: list[int] = []
    for k, spec in enumerate(world["items"]):
        required = [
            _CONDITIONS[c][1] for c in sorted(spec["conditions"]) if _CONDITIONS[c][0] == "required"
        ]
        excluded = [
            _CONDITIONS[c][1] for c in sorted(spec["conditions"]) if _CONDITIONS[c][0] == "excluded"
        ]
        own = spec["state"] == "own_case"
        item = _write(
            store,
            now=t0,
            subject=subject,
            attribute=f"fact_{k}",
            required=required or ["config.connection_pool.max exists"],
            excluded=excluded,
            scope={"axis": "case", "id": case if own else f"{case}-other"},
            # a deploy re-opens configuration items only: those meant to wait for a check
            content_type="configuration"
            if spec["state"] == "verify_on_next_use"
            else "failure_mechanism",
            **({"valid_to": (t0 + timedelta(hours=1)).isoformat()} if spec["expired"] else {}),
        )
        if spec["state"] in {"active", "verify_on_next_use", "revoked"}:
            _activate(store, item, now=t0)
        if spec["state"] == "revoked":
            with store.sessions.begin() as s:
                lifecycle.revoke(
                    session=s,
                    tenant=store.tenant,
                    item_id=item,
                    reason="x",
                    actor=store.sme,
                    now=t0,
                )
        ids.append(item)
    deploy = t0 + timedelta(hours=2)
    if any(spec["state"] == "verify_on_next_use" for spec in world["items"]):
        with store.sessions.begin() as s:
            w = factgen.load_world(session=s, tenant=store.tenant)
            event = factgen.record_event(
                actor=ADMIN,
                session=s,
                world=w,
                type="deploy",
                subjects=[subject],
                now=deploy,
                occurred_at=deploy,
            )
            lifecycle.handle_event(session=s, tenant=store.tenant, event=event, now=deploy)
    after = deploy + timedelta(minutes=1)
    if world["pool_after"] is not None:
        store.observe(after, (subject, "config.connection_pool.max", world["pool_after"]))
    if world["hot_after"] is not None:
        store.observe(after, (subject, "metrics.pool_utilisation", world["hot_after"]))
    inline = tuple(
        factgen.Observation(subject, attribute, value)
        for attribute, value in (
            ("config.connection_pool.max", world["inline_pool"]),
            ("metrics.pool_utilisation", world["inline_hot"]),
        )
        if value is not None
    )
    now = after + timedelta(minutes=1)
    with store.sessions.begin() as s:
        guard = recall.check_context(
            session=s,
            tenant=store.tenant,
            actor=store.agent,
            item_ids=ids,
            case_id=case,
            now=now,
            observations=inline,
        )
    admitted = _recalled(store, ids, now, inline, case)
    assert set(guard.usable) == admitted, (world, guard, admitted)
    assert set(guard.usable) | set(guard.dropped) == set(ids)
    for item, why in guard.dropped.items():
        assert (why == "applicability") == (item in guard.conditions)
