"""Belief diff: what became and stopped being recallable between two instants, and why."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import claims
import factgen
import lifecycle
import recall
from predicates.errors import Forbidden, InputError
from recall._diff import CAUSES, GateVerdicts, cause_of
from tests.conftest import ADMIN, T0, Store
from tests.recall.test_recall import _activate
from tests.recall.test_recall import _write as write_item

COND = ["config.connection_pool.max eq 20"]
H = timedelta(hours=1)

# --- the cause, as a pure function ---------------------------------------------------

verdicts = st.builds(
    GateVerdicts,
    recorded=st.booleans(),
    current=st.booleans(),
    state=st.sampled_from([None, "case", "shadow", "active", "verify_on_next_use", "revoked"]),
    released=st.booleans(),
    applicability=st.booleans(),
    validity_window=st.booleans(),
    check=st.sampled_from([None, True, False]),
)


def _consistent(v: GateVerdicts) -> GateVerdicts:
    """A row not recorded yet has no state; only a verify-on-next-use state has a check."""
    state = v.state if v.recorded else None
    check = v.check if state == "verify_on_next_use" else None
    return GateVerdicts(
        v.recorded, v.current, state, v.released, v.applicability, v.validity_window, check
    )


@given(verdicts, verdicts)
def test_the_cause_names_a_gate_that_fails_where_the_item_is_not_recallable(
    a: GateVerdicts, b: GateVerdicts
) -> None:
    before, after = _consistent(a), _consistent(b)
    if before.recallable == after.recallable:
        with pytest.raises(ValueError):
            cause_of(before, after)
        return
    cause = cause_of(before, after)
    end = after if before.recallable else before  # where the item is not recallable
    assert cause in CAUSES
    # a supersession exactly when the row is no longer current there
    assert (cause == "supersession") == (not end.current)
    if cause == "transition":
        assert not end.recorded or not end.admitted or not end.released
    if cause in {"validity_window", "fact_change"}:
        # state, release and currency let it through: the window or the facts did not
        assert end.recorded and end.current and end.released
        assert end.state in {"active", "verify_on_next_use"}
    if cause == "validity_window":
        assert not end.validity_window
    if cause == "fact_change":
        assert end.validity_window and (not end.applicability or not end.admitted)
        if not end.admitted:  # a check that failed, in the same state at both instants
            assert before.state == after.state == "verify_on_next_use"


def test_a_check_that_flips_in_the_same_state_is_a_fact_change() -> None:
    base = dict(recorded=True, current=True, released=True, applicability=True)
    failed = GateVerdicts(**base, state="verify_on_next_use", validity_window=True, check=False)
    passed = GateVerdicts(**base, state="verify_on_next_use", validity_window=True, check=True)
    active = GateVerdicts(**base, state="active", validity_window=True)
    assert cause_of(failed, passed) == "fact_change"
    assert cause_of(active, failed) == "transition"  # an event put it there


def test_a_closed_window_outranks_a_check_not_yet_passed() -> None:
    """Awaiting its check outside its window, then checked inside it: the window is the
    cause, as the order says (hypothesis found the case where the check won)."""
    base = dict(recorded=True, current=True, released=True, state="verify_on_next_use")
    waiting = GateVerdicts(**base, applicability=False, validity_window=False, check=None)
    passed = GateVerdicts(**base, applicability=True, validity_window=True, check=True)
    assert cause_of(waiting, passed) == "validity_window"
    assert cause_of(passed, waiting) == "validity_window"


# --- on the store ----------------------------------------------------------------------


def _write(store: Store, now: datetime, actor: claims.Actor | None = None, **kw: Any) -> int:
    return write_item(store, actor, now, required=COND, **kw)


def _diff(
    store: Store, t0: datetime, t1: datetime, actor: claims.Actor | None = None, **kw: Any
) -> recall.BeliefDiff:
    with store.sessions.begin() as s:
        return recall.diff(
            session=s,
            tenant=store.tenant,
            actor=actor or store.agent,
            from_=t0,
            to=t1,
            now=max(t1, T0 + 30 * H),
            **kw,
        )


def _changes(d: recall.BeliefDiff) -> dict[int, tuple[str, str]]:
    return {e.item_id: (e.change, e.cause) for e in d.entries}


def _recallable(store: Store, at: datetime, actor: claims.Actor | None = None) -> set[int]:
    """Recall's own answer as of ``at``: no query text, no limit to speak of, no case."""
    req = recall.RecallRequest(query="", as_of=at, limit=10_000)
    with store.sessions.begin() as s:
        res = recall.recall(
            session=s, tenant=store.tenant, actor=actor or store.agent, request=req, now=at
        )
    return {r.item.id for r in res.items}


@pytest.fixture
def setup(store: Store) -> Store:
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=store.agent,
            now=T0,
        )
    store.observe(T0, ("payment-api", "config.connection_pool.max", 20))
    return store


@pytest.fixture
def history(setup: Store) -> dict[str, int]:
    """A history with one change of each cause, an item hidden from the agent, and a case
    item; every change happens on the hour, T0 + 1h .. T0 + 6h."""
    s = setup
    ids = {
        "promoted": _write(s, T0, attribute="a_promoted"),
        "revoked": _write(s, T0, attribute="a_revoked"),
        "facts": _write(s, T0, attribute="a_facts"),
        "window": _write(s, T0, attribute="a_window", valid_to=(T0 + 4 * H).isoformat()),
        "old": _write(s, T0, attribute="a_versioned", scope={"axis": "agent", "id": "agent-ir"}),
        "case_only": _write(s, T0, attribute="a_case_only"),
    }
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    ids["secret"] = _write(
        s, T0, actor=insider, attribute="a_secret", evidence=["E-secret"], object="E-secret"
    )
    for name in ("revoked", "facts", "window", "old", "secret"):
        _activate(s, ids[name], T0)
    _activate(s, ids["promoted"], T0 + 1 * H)
    with s.sessions.begin() as sess:
        lifecycle.revoke(
            session=sess,
            tenant=s.tenant,
            item_id=ids["revoked"],
            reason="the restart was a coincidence",
            actor=s.sme,
            now=T0 + 2 * H,
        )
    s.observe(T0 + 3 * H, ("payment-api", "config.connection_pool.max", 100))
    ids["new"] = _write(
        s,
        T0 + 5 * H,
        attribute="a_versioned",
        object="E-2",
        evidence=["E-2"],
        scope={"axis": "agent", "id": "agent-ir"},
    )
    return ids


def test_each_change_has_its_cause(setup: Store, history: dict[str, int]) -> None:
    ids = history
    d = _diff(setup, T0 + H / 2, T0 + 2 * H + H / 2)
    assert _changes(d) == {
        ids["promoted"]: ("became", "transition"),
        ids["revoked"]: ("stopped", "transition"),
    }
    promoted = next(e for e in d.entries if e.item_id == ids["promoted"])
    assert promoted.detail["actor"] == "sme-alice"
    assert (promoted.detail["from"], promoted.detail["to"]) == ("shadow", "active")
    revoked = next(e for e in d.entries if e.item_id == ids["revoked"])
    assert revoked.detail["reason"] == "the restart was a coincidence"
    assert revoked.detail["actor"] == "sme-alice"

    # the pool max moves from 20 to 100 at 3h: every active item under COND stops applying
    facts = _diff(setup, T0 + 2 * H + H / 2, T0 + 3 * H + H / 2)
    assert _changes(facts) == {
        i: ("stopped", "fact_change")
        for i in (ids["promoted"], ids["facts"], ids["window"], ids["old"])
    }
    entry = next(e for e in facts.entries if e.item_id == ids["facts"])
    assert entry.detail["conditions"] == [
        {
            "condition": "config.connection_pool.max eq 20",
            "list": "required",
            "subject": "payment-api",
            "attribute": "config.connection_pool.max",
            "before": "TRUE",
            "after": "FALSE",
        }
    ]


@pytest.fixture
def steady(setup: Store) -> dict[str, int]:
    """Validity window and supersession, with the facts unchanged."""
    s = setup
    ids = {
        "window": _write(s, T0, attribute="a_window", valid_to=(T0 + 4 * H).isoformat()),
        "later": _write(s, T0, attribute="a_later", valid_from=(T0 + 2 * H).isoformat()),
        "old": _write(s, T0, attribute="a_versioned", scope={"axis": "agent", "id": "agent-ir"}),
    }
    for i in ids.values():
        _activate(s, i, T0)
    ids["new"] = _write(
        s,
        T0 + 5 * H,
        attribute="a_versioned",
        object="E-2",
        evidence=["E-2"],
        scope={"axis": "agent", "id": "agent-ir"},
    )
    return ids


def test_validity_window_and_supersession(setup: Store, steady: dict[str, int]) -> None:
    ids = steady
    d = _diff(setup, T0 + H, T0 + 6 * H)
    assert _changes(d) == {
        ids["window"]: ("stopped", "validity_window"),
        ids["later"]: ("became", "validity_window"),
        ids["old"]: ("stopped", "supersession"),
        # agent-ir's own lesson (its agent anchor, still case) is recallable for it
        # from its write on (docs/agents.md, "Private memory")
        ids["new"]: ("became", "transition"),
    }
    details = {e.item_id: e.detail for e in d.entries}
    assert details[ids["window"]]["window"] == "closed"
    assert details[ids["later"]]["window"] == "opened"
    assert details[ids["old"]] == {"successor": ids["new"], "at": (T0 + 5 * H).isoformat()}
    assert [e.item_id for e in d.became] == [ids["later"], ids["new"]]
    assert {e.item_id for e in d.stopped} == {ids["window"], ids["old"]}


def test_hidden_and_case_items_are_never_mentioned(setup: Store, history: dict[str, int]) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    setup.observe(T0 + 7 * H, ("payment-api", "config.connection_pool.max", 20))
    span = (T0 + 3 * H + timedelta(minutes=30), T0 + 7 * H + timedelta(minutes=30))
    seen = _changes(_diff(setup, *span))
    assert history["secret"] not in seen and history["case_only"] not in seen
    assert _changes(_diff(setup, *span, actor=insider))[history["secret"]] == (
        "became",
        "fact_change",
    )
    outsider = _changes(_diff(setup, *span, actor=setup.outsider))
    assert history["secret"] not in outsider


def test_subjects_bound_the_diff(setup: Store, history: dict[str, int]) -> None:
    span = (T0, T0 + 6 * H)
    assert _changes(_diff(setup, *span, subjects=["orders-db"])) == {}
    assert _changes(_diff(setup, *span, subjects=["payment_api"])) == _changes(_diff(setup, *span))


def test_the_diff_is_recall_as_of_both_instants(setup: Store, history: dict[str, int]) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    setup.observe(T0 + 7 * H, ("payment-api", "config.connection_pool.max", 20))
    instants = [T0 + k * H + timedelta(minutes=30) for k in range(-1, 8)]
    causes: set[tuple[str, str]] = set()
    for actor in (setup.agent, insider):
        at = {t: _recallable(setup, t, actor) for t in instants}
        for t0 in instants:
            for t1 in instants:
                if t0 > t1:
                    continue
                d = _diff(setup, t0, t1, actor=actor)
                assert {e.item_id for e in d.became} == at[t1] - at[t0], (t0, t1)
                assert {e.item_id for e in d.stopped} == at[t0] - at[t1], (t0, t1)
                causes |= set(_changes(d).values())
    assert causes >= {
        ("became", "transition"),
        ("stopped", "transition"),
        ("stopped", "fact_change"),
        ("became", "fact_change"),
        ("stopped", "validity_window"),
    }


def test_verify_on_next_use(setup: Store) -> None:
    item = _write(setup, T0, content_type="configuration")
    _activate(setup, item, T0)
    with setup.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=setup.tenant)
        event = factgen.record_event(
            actor=ADMIN,
            session=s,
            world=world,
            type="deploy",
            subjects=["payment-api"],
            changes={},
            occurred_at=T0 + H,
            now=T0 + H,
            source="test",
        )
        res = lifecycle.handle_event(session=s, tenant=setup.tenant, event=event, now=T0 + H)
    assert item in res.unaffected
    # no observation since the deploy: its check fails, the event's transition explains it
    d = _diff(setup, T0 + H / 2, T0 + 2 * H)
    [entry] = d.entries
    assert (entry.change, entry.cause, entry.detail["to"]) == (
        "stopped",
        "transition",
        "verify_on_next_use",
    )
    # observed afresh: the check passes, in the same state: the facts explain it
    setup.observe(T0 + 3 * H, ("payment-api", "config.connection_pool.max", 20))
    [entry] = _diff(setup, T0 + 2 * H, T0 + 4 * H).entries
    assert (entry.change, entry.cause) == ("became", "fact_change")
    assert entry.detail["check"] == {"before": False, "after": True}


def test_rights_and_instants(setup: Store) -> None:
    # an SME reviews what agents may recall: the diff is theirs too (docs/sme.md)
    assert _diff(setup, T0, T0 + H, actor=setup.sme).to == T0 + H  # answered, not refused
    with pytest.raises(Forbidden):
        _diff(setup, T0, T0 + H, actor=claims.Actor("nobody", "observer"))  # type: ignore[arg-type]
    with pytest.raises(InputError):
        _diff(setup, T0 + H, T0)
    with setup.sessions.begin() as s, pytest.raises(InputError):
        recall.diff(session=s, tenant=setup.tenant, actor=setup.agent, from_=T0, to=T0 + H, now=T0)
    assert _diff(setup, T0, T0).entries == ()


def test_a_successor_the_caller_may_not_read_is_not_named(setup: Store) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    scope = {"axis": "case", "id": "INC-1"}  # an anchor both may write to
    old = _write(setup, T0, attribute="a_versioned", scope=scope)
    _activate(setup, old, T0)
    new = _write(
        setup,
        T0 + H,
        actor=insider,
        attribute="a_versioned",
        scope=scope,
        object="E-secret",
        evidence=["E-secret"],
    )
    [entry] = _diff(setup, T0, T0 + 2 * H).entries
    assert (entry.item_id, entry.cause, entry.detail["successor"]) == (old, "supersession", None)
    [seen] = _diff(setup, T0, T0 + 2 * H, actor=insider).entries
    assert seen.detail["successor"] == new


def test_blocks_are_never_in_the_diff(setup: Store) -> None:
    """A core block is packed, never recalled (docs/blocks.md, "Never ranked"): setting,
    editing or revoking one changes nothing the diff reports, for its own agent, an SME
    or the operator."""
    own = ("agent", setup.agent.id)
    first = claims.write_block(
        sessions=setup.sessions,
        tenant=setup.tenant,
        label="style",
        text="Answer in five lines.",
        scope=own,
        actor=setup.agent,
        now=T0 + H,
    )
    claims.write_block(
        sessions=setup.sessions,
        tenant=setup.tenant,
        label="style",
        text="Answer in three lines.",
        scope=own,
        actor=setup.agent,
        now=T0 + 2 * H,
    )
    claims.write_block(
        sessions=setup.sessions,
        tenant=setup.tenant,
        label="escalation",
        text="Page the DBA on call.",
        scope=("tenant", "*"),
        actor=setup.sme,
        now=T0 + H,
    )
    with setup.sessions.begin() as s:
        state = claims.get_items(session=s, tenant=setup.tenant, ids=[first.item_id])
    assert state[first.item_id].kind == "block"
    for actor in (setup.agent, setup.sme, ADMIN):
        assert _diff(setup, T0, T0 + 3 * H, actor=actor).entries == (), actor.id
