"""Event-triggered expiry, the verify-on-next-use check and the secondary TTL (model §4.3)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import claims
import factgen
import lifecycle
import recall
from claims._queries import TRANSITIONS
from factgen import Event
from tests.conftest import ADMIN
from tests.lifecycle.helpers import Life, ids, withheld

UTIL = ["metrics.pool_utilisation gte 0.8"]


def _active(life: Life, **changes: Any) -> int:
    item = life.write(**{"content_type": "configuration", **changes})
    life.activate(item)
    return item


class NeverAffected:
    """A judge that answers "not affected" for everything."""

    def __call__(
        self, event: Event, items: Sequence[claims.ItemRecord]
    ) -> Mapping[int, lifecycle.Verdict]:
        return {i.id: lifecycle.Verdict(False, "looks fine to me") for i in items}


class FlagsText:
    """A judge that flags items whose text mentions a word."""

    def __init__(self, word: str) -> None:
        self.word = word

    def __call__(
        self, event: Event, items: Sequence[claims.ItemRecord]
    ) -> Mapping[int, lifecycle.Verdict]:
        return {i.id: lifecycle.Verdict(self.word in (i.text or ""), "semantic") for i in items}


def test_match_judge_act_by_content_type_and_rule(life: Life) -> None:
    mentions = _active(life)  # conditions mention the pool max
    other_attr = _active(life, required=UTIL)
    wrong_type = _active(life, content_type="failure_mechanism", required=UTIL)
    other_subject = _active(
        life, subject="orders-db", required=["config.connection_pool.max eq 20"]
    )
    in_case = life.write(content_type="configuration")
    life.tick(days=1)
    out = life.event("deploy", ["payment_api"], {"config.connection_pool.max": 100})
    assert sorted(out.matched) == sorted([mentions, other_attr])
    assert out.affected == (mentions,) and out.unaffected == (other_attr,)
    assert "config.connection_pool.max" in out.reasons[mentions]
    assert out.by_conditions == ()
    assert life.states(mentions, other_attr, wrong_type, other_subject, in_case) == [
        "needs_reverification",
        "verify_on_next_use",
        "active",
        "active",
        "case",
    ]
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'event'") == 1
    assert life.history_holds() and life.audit_ok()


def test_a_judge_never_returns_an_item_to_active_nor_clears_a_rule_flag(life: Life) -> None:
    flagged = _active(life)
    quiet = _active(life, required=UTIL)
    life.tick(hours=1)
    out = life.event(
        "config_change", ["payment-api"], {"config.connection_pool.max": 50}, judge=NeverAffected()
    )
    assert out.affected == (flagged,)
    assert life.states(flagged, quiet) == ["needs_reverification", "verify_on_next_use"]
    life.tick(hours=1)  # a second event: still nothing goes back to active
    life.event("deploy", ["payment-api"], judge=NeverAffected())
    assert life.states(flagged, quiet) == ["needs_reverification", "verify_on_next_use"]
    assert (
        life.scalar(
            f"SELECT count(*) FROM {TRANSITIONS} h WHERE to_state = 'active' AND cause ? 'event'"
        )
        == 0
    )


def test_a_judge_may_raise_flags(life: Life) -> None:
    plain = _active(life, required=UTIL, text="pool saturation")
    semantic = _active(life, required=UTIL, text="rollback after deploy")
    out = life.event("deploy", ["payment-api"], judge=FlagsText("rollback"))
    assert out.affected == (semantic,)
    assert life.states(plain, semantic) == ["verify_on_next_use", "needs_reverification"]


def test_dependents_and_principal_reach(life: Life) -> None:
    api = _active(
        life,
        content_type="failure_mechanism",
        required=["@payments-db:env.postgres.version lt v16.0"],
    )
    unrelated = _active(life, subject="orders-db", content_type="failure_mechanism")
    refusal = _active(life, content_type="permission_refusal", required=UTIL, entities=["agent-ir"])
    out = life.event("version_change", ["payments-db"], {"env.postgres.version": "v16.2"})
    assert out.matched == (api,) and out.affected == (api,)
    assert life.state(unrelated) == "active"
    out = life.event("authorisation", [], principal="agent-ir")
    assert out.matched == (refusal,) and life.state(refusal) == "verify_on_next_use"


def test_verify_on_next_use_at_recall_both_ways(life: Life) -> None:
    fresh = _active(life, required=UTIL)
    stale = _active(life, required=["config.connection_pool.max eq 20"])
    life.hot()
    life.tick(minutes=5)
    life.event("deploy", ["payment-api"])
    assert life.states(fresh, stale) == ["verify_on_next_use"] * 2
    # as-of recalls evaluate the check but record nothing
    life.tick(minutes=5)
    life.observe(("payment-api", "metrics.pool_utilisation", 0.9))
    res = life.recall(as_of=life.now)
    assert ids(res) == [fresh] and withheld(res) == {stale: "activated_version"}
    assert res.checks == {fresh: True, stale: False}
    assert life.states(fresh, stale) == ["verify_on_next_use"] * 2
    res = life.recall(record=False)  # the read records nothing
    assert ids(res) == [fresh] and res.items[0].checked
    assert withheld(res) == {stale: "activated_version"}
    assert life.states(fresh, stale) == ["verify_on_next_use"] * 2
    # a client claiming it used the stale item is not trusted: the server re-runs the
    # check, refuses the item and records the failure (fresh, checked by the same
    # request and passing, was not used: it keeps waiting)
    with life.sessions.begin() as s:
        use = recall.record_use(
            session=s,
            tenant=life.tenant,
            actor=life.store.agent,
            request=recall.RecallRequest("tail latency on payment api"),
            used=[stale],
            now=life.now,
        )
    assert use.used == () and use.refused == {stale: "activated_version"}
    assert use.checks == {stale: False}
    assert life.states(fresh, stale) == ["verify_on_next_use", "needs_reverification"]
    life.recall()  # record_use of what it returned: the check that passed is recorded
    assert life.states(fresh, stale) == ["active", "needs_reverification"]
    assert life.scalar("SELECT count(*) FROM expiry_checks") == 0
    assert life.history_holds() and life.audit_ok()


def test_only_items_passing_the_other_gates_are_checked(life: Life) -> None:
    item = _active(life, required=UTIL, purposes=["postmortem"])
    life.event("deploy", ["payment-api"])
    life.tick(minutes=1)
    life.observe(("payment-api", "metrics.pool_utilisation", 0.9))
    res = life.recall(purpose="incident_diagnosis")
    assert withheld(res) == {item: "purpose"} and res.checks == {}
    assert life.state(item) == "verify_on_next_use"


def test_the_context_guard_checks_too(life: Life) -> None:
    passes, fails = _active(life, required=UTIL), _active(life, required=UTIL, subject="orders-db")
    not_now = _active(life, required=UTIL, subject="payments-db")
    life.hot()
    life.observe(("orders-db", "metrics.pool_utilisation", 0.9))
    life.tick(minutes=1)
    life.event("deploy", ["payment-api", "orders-db", "payments-db"])
    life.tick(minutes=1)
    life.observe(
        ("payment-api", "metrics.pool_utilisation", 0.85),
        ("payments-db", "metrics.pool_utilisation", 0.2),
    )
    res = life.guard([passes, fails, not_now])
    assert res.usable == (passes,)
    # orders-db's utilisation was last observed before the deploy: the check fails;
    # payments-db's, observed since, is low: the item does not apply, and by recall's
    # rule only an item that passes the other gates is checked (model §4.3)
    assert res.dropped == {fails: "needs_reverification", not_now: "applicability"}
    assert res.checked == {passes: True, fails: False}
    assert life.states(passes, fails, not_now) == [
        "active",
        "needs_reverification",
        "verify_on_next_use",
    ]


def test_secondary_ttl_for_permission_refusals(life: Life) -> None:
    refusal = _active(life, content_type="permission_refusal", required=UTIL)
    life.hot()
    life.tick(minutes=59)
    life.hot()  # utilisation has a 15-minute max_age: observed again, it applies
    assert life.guard([refusal]).usable == (refusal,)
    life.tick(minutes=2)  # the default TTL is one hour
    res = life.guard([refusal])
    assert res.dropped == {refusal: "needs_reverification"}  # utilisation observed before expiry
    other = _active(life, content_type="permission_refusal", required=UTIL)
    life.tick(hours=2)
    life.observe(("payment-api", "metrics.pool_utilisation", 0.9))
    life.recall()  # a live recall runs TTLs out and checks in the same breath
    assert life.state(other) == "active"
    assert (
        life.scalar(
            f"SELECT count(*) FROM {TRANSITIONS} h WHERE item_id = :i AND to_state = "
            "'verify_on_next_use'",
            i=other,
        )
        == 1
    )


def test_an_event_matches_every_item_whose_conditions_name_what_it_changes(life: Life) -> None:
    """Model §4.3: whatever its content type, an item whose conditions name an attribute
    the event changes, for the event's subject or through an ``@entity:`` reference, is
    matched and, by the rule, affected (issue 23: a deploy does not trigger
    ``failure_mechanism``, yet the precedent requiring the old pool max is re-opened)."""
    precedent = _active(life, content_type="failure_mechanism")  # pool max eq 20
    via_ref = _active(
        life,
        subject="orders-db",
        content_type="failure_mechanism",
        required=["@payment-api:config.connection_pool.max eq 20"],
    )
    unrelated = _active(life, content_type="failure_mechanism", required=UTIL)
    own_pool = _active(
        life,
        subject="orders-db",
        content_type="failure_mechanism",
        required=["config.connection_pool.max eq 20"],
    )
    waiting = _active(life, content_type="permission_refusal", entities=["agent-ir"])
    life.event("authorisation", [], principal="agent-ir")
    assert life.state(waiting) == "verify_on_next_use"
    life.tick(hours=1)
    out = life.event("deploy", ["payment-api"], {"config.connection_pool.max": 50})
    assert out.affected == tuple(sorted([precedent, via_ref, waiting]))
    assert out.by_conditions == out.affected and out.unaffected == ()
    assert "config.connection_pool.max of payment-api" in out.reasons[via_ref]
    assert life.states(precedent, via_ref, unrelated, own_pool, waiting) == [
        "needs_reverification",
        "needs_reverification",
        "active",
        "active",
        "needs_reverification",
    ]
    assert life.scalar("SELECT count(*) FROM expiry_checks") == 0
    # the guard and recall agree: the precedent is out of every context
    assert life.guard([precedent, unrelated], record=False).dropped == {
        precedent: "needs_reverification",
        unrelated: "applicability",  # utilisation never observed: UNKNOWN
    }
    assert life.history_holds() and life.audit_ok()


@given(
    condition=st.lists(st.sampled_from(["a", "b", "*", "c_d"]), min_size=1, max_size=3),
    changed=st.lists(st.sampled_from(["a", "b", "*", "c_d"]), min_size=1, max_size=3),
)
def test_the_condition_prefilter_matches_as_the_rule_does(
    condition: list[str], changed: list[str]
) -> None:
    """The SQL prefilter's patterns select exactly the attributes ``rule_flags`` matches."""
    from lifecycle._events import _change_patterns, _path_matches

    [pattern] = _change_patterns([".".join(changed)])
    got = re.fullmatch(pattern, ".".join(condition)) is not None
    assert got == _path_matches(".".join(condition), ".".join(changed))


def test_record_use_records_the_failed_checks_of_the_request(life: Life) -> None:
    """Model §4.3: every verify-on-next-use item the request checked and withheld because
    its check failed goes to needs_reverification; one it did not check keeps waiting."""
    fresh = _active(life, required=UTIL)
    stale = _active(life, required=["config.connection_pool.max eq 20"])
    elsewhere = _active(life, subject="orders-db", required=["config.connection_pool.max eq 20"])
    life.hot()
    life.observe(("orders-db", "config.connection_pool.max", 20))
    life.tick(minutes=5)
    life.event("deploy", ["payment-api", "orders-db"])
    life.tick(minutes=5)
    life.observe(("payment-api", "metrics.pool_utilisation", 0.9))
    res = life.recall(subjects=["payment-api"], record=False)
    assert ids(res) == [fresh] and withheld(res) == {stale: "activated_version"}
    life.recall(subjects=["payment-api"])  # the read, then record_use of what it returned
    assert life.states(fresh, stale, elsewhere) == [
        "active",
        "needs_reverification",  # checked by the request, failed: recorded
        "verify_on_next_use",  # not a subject of the request: not checked by it
    ]
    [(reason, cause)] = (
        life.store.engine.connect()
        .execute(
            sa.text(
                f"SELECT reason, cause FROM {TRANSITIONS} h WHERE item_id = :i "
                "AND to_state = 'needs_reverification'"
            ),
            {"i": stale},
        )
        .all()
    )
    assert "check failed" in reason and cause == {"check": "verify_on_next_use"}
    assert life.history_holds() and life.audit_ok()


def test_record_use_records_a_failed_check_whose_ttl_ran_out(life: Life) -> None:
    """An item whose secondary TTL ran out is still stored as active, but the request reads
    it as waiting and checks it: its failed check is recorded too (model §4.3), after the
    expiry is persisted, not left for a later sweep and request."""
    refusal = _active(
        life, content_type="permission_refusal", required=["config.connection_pool.max eq 20"]
    )
    life.observe(("payment-api", "config.connection_pool.max", 20))
    life.tick(hours=2)  # past the 1 h TTL; the pool was last observed before it ran out
    life.observe(("payment-api", "metrics.pool_utilisation", 0.9))
    res = life.recall(subjects=["payment-api"], record=False)
    assert refusal not in ids(res)
    assert life.states(refusal) == ["active"]  # the read changed nothing
    life.recall(subjects=["payment-api"])
    assert life.states(refusal) == ["needs_reverification"]
    assert life.history_holds() and life.audit_ok()


def test_trigger_table_is_extensible(life: Life) -> None:
    table = lifecycle.DEFAULT_TRIGGERS.with_trigger(
        lifecycle.Trigger("dashboards", frozenset({"deploy"}))
    )
    registry = claims.ItemRegistry.build(content_types=["dashboards"])
    item = _active(life, content_type="dashboards", required=UTIL, registry=registry)
    with life.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=life.tenant)
        event = factgen.record_event(
            actor=ADMIN,
            session=s,
            world=world,
            type="deploy",
            subjects=["payment-api"],
            occurred_at=life.now,
            now=life.now,
        )
        assert (
            lifecycle.handle_event(session=s, tenant=life.tenant, event=event, now=life.now).matched
            == ()
        )
        out = lifecycle.handle_event(
            session=s, tenant=life.tenant, event=event, now=life.now, triggers=table
        )
    assert out.unaffected == (item,)
    assert [t.content_type for t in table.for_event("deploy")] == [
        "configuration",
        "dashboards",
        "topology",
    ]


@pytest.mark.parametrize(
    ("condition", "changed", "hit"),
    [
        ("config.pool.max", "config.pool.max", True),
        ("config.*.max", "config.pool.max", True),
        ("config.pool.max", "config.pool", False),
        ("config.pool.min", "config.pool.max", False),
    ],
)
def test_rule_path_matching(condition: str, changed: str, hit: bool) -> None:
    from lifecycle._events import _path_matches

    assert _path_matches(condition, changed) is hit


def test_check_item_is_pure(life: Life) -> None:
    item_id = _active(life, required=UTIL)
    life.hot()
    with life.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=life.tenant)
        snap = factgen.build_snapshot(session=s, world=world, subjects=None, at=life.now)
        item = claims.get_items(session=s, tenant=life.tenant, ids=[item_id])[item_id]
    assert lifecycle.check_item(item, world, snap, life.now).passed
    later = life.now + timedelta(seconds=1)
    assert not lifecycle.check_item(item, world, snap, later).passed
