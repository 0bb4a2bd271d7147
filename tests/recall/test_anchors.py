"""Anchors from the context (model §6): the default anchor set, ``anchors_mode``, and the
law of anchor-weighted fusion on the real store: anchors only reorder (the gated set is
the same with and without them), an anchor an item is on never lowers it against items
not on it, and the lift is bounded (a factor below ``1 + anchors.boost``).

The pure laws are in tests/recall/test_fusion.py; here the SQL is held to them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import claims
import lifecycle
import recall
from recall._fusion import anchor_factor, anchor_terms
from recall._packing import render
from tests.conftest import Store
from tests.lifecycle.helpers import Life
from tests.recall.test_ranking import (
    DB_SETTINGS,
    Slot,
    Spec,
    _entry,
    ask,
    build_gate_world,
    by_id,
    fresh,
    gate_request,
    ids,
    rolled_back,
    truths,
)


@pytest.fixture
def life(store: Store) -> Life:
    """The acme store with cases INC-1 and INC-2 open, its clock at T0."""
    driver = Life(store)
    driver.open("INC-1")
    driver.open("INC-2")
    return driver


@pytest.fixture
def gate_world(life: Life) -> tuple[Life, dict[int, Spec]]:
    return life, build_gate_world(life)


@pytest.fixture
def anchored(life: Life) -> tuple[Life, int, int, int]:
    """Three items alike in every ranked respect but where they are anchored, written so
    that on the tie (by id) the plain item ranks first and the scoped one last: the plain
    one in INC-2, then one in INC-2 with an INC-1 facet, then one scoped to INC-1."""
    life.hot()
    plain = life.write(case_id="INC-2")
    facet = life.write(case_id="INC-2", facets=[{"axis": "case", "id": "INC-1"}])
    scoped = life.write(case_id="INC-1")
    life.activate(plain, facet, scoped)
    return life, scoped, facet, plain


BOOST = recall.FUSION.anchors
SHARE = recall.FUSION.facet_share


def anchor_keys(res: recall.RecallResult) -> list[tuple[str, str, float | None, str]]:
    return [(a.axis, a.id, a.weight, a.origin) for a in res.anchors]


def on(item: claims.ItemRecord, anchor: recall.Anchor) -> bool:
    """The item is anchored (scope) or faceted at ``anchor``."""
    key = (anchor.axis, anchor.id)
    return (item.scope_axis, item.scope_id) == key or key in item.facets


# --- the default set ------------------------------------------------------------------


def test_the_default_set_is_built_from_who_asks(life: Life) -> None:
    """Agent, session, case, each subject as a service (canonical id), the tenant;
    weights from the policy, highest first."""
    res = fresh(life, case_id="INC-1", session="s-1", subjects=["payment-api"])
    agent = life.store.agent.id
    assert anchor_keys(res) == [
        ("session", "s-1", 1.0, "default"),
        ("case", "INC-1", 1.0, "default"),
        ("service", "payment-api", 0.9, "default"),
        ("agent", agent, 0.7, "default"),
        ("tenant", "*", 0.6, "default"),
    ]
    # nothing named: the agent and the tenant only
    assert anchor_keys(fresh(life)) == [
        ("agent", agent, 0.7, "default"),
        ("tenant", "*", 0.6, "default"),
    ]


def test_the_principals_team_is_a_default_anchor(life: Life) -> None:
    with life.sessions.begin() as s:
        claims.register_principal(
            session=s,
            tenant=life.tenant,
            actor=claims.Actor("root", "admin"),
            principal=life.store.agent.id,
            role="agent",
            capabilities=sorted(life.store.agent.capabilities),
            team="payments",
        )
    assert ("team", "payments", 0.8, "default") in anchor_keys(fresh(life))
    # another principal has no team: no team anchor
    assert not any(a.axis == "team" for a in fresh(life, actor=life.store.outsider).anchors)


def test_extend_replaces_a_defaults_weight_and_replace_drops_the_defaults(life: Life) -> None:
    extended = fresh(life, case_id="INC-1", anchors=[recall.Anchor("case", "INC-1", 1.8)])
    assert anchor_keys(extended)[0] == ("case", "INC-1", 1.8, "request")
    assert [(a.axis, a.id) for a in extended.anchors].count(("case", "INC-1")) == 1
    # unsaid weight: the policy's anchors.weight
    unsaid = fresh(life, anchors=[recall.Anchor("team", "sre")])
    assert ("team", "sre", 1.5, "request") in anchor_keys(unsaid)
    replaced = fresh(
        life, case_id="INC-1", anchors=[recall.Anchor("team", "sre")], anchors_mode="replace"
    )
    assert anchor_keys(replaced) == [("team", "sre", 1.5, "request")]
    assert fresh(life, case_id="INC-1", anchors_mode="replace").anchors == ()


def test_the_default_weights_are_tenant_policy(life: Life) -> None:
    import factgen

    with life.sessions.begin() as s:
        policy = factgen.changed_policy(
            factgen.current_policy(session=s, tenant=life.tenant),
            {"anchors.defaults.case": 1.7, "anchors.defaults.tenant": 0.5},
        )
        factgen.store_policy(session=s, tenant=life.tenant, policy=policy, at=life.now, by="root")
    weights = {(a.axis, a.id): a.weight for a in fresh(life, case_id="INC-1").anchors}
    assert weights[("case", "INC-1")] == 1.7 and weights[("tenant", "*")] == 0.5


# --- fusion on the store ------------------------------------------------------------


@settings(DB_SETTINGS, max_examples=15)
@given(weight=st.floats(0.5, 2.0))
def test_the_store_ranks_by_the_anchor_law(
    anchored: tuple[Life, int, int, int], weight: float
) -> None:
    """Three items alike but where they are anchored: a scope match outranks a facet
    match, which outranks neither, by exactly ``anchor_factor(anchor_terms(...))``."""
    life, scoped, facet, plain = anchored
    base = by_id(fresh(life, anchors_mode="replace"))
    assert [*base] == [plain, facet, scoped]  # the tie, by id
    assert base[plain].score == base[facet].score == base[scoped].score
    res = fresh(life, anchors=[recall.Anchor("case", "INC-1", weight)], anchors_mode="replace")
    got = by_id(res)
    assert [*got] == [scoped, facet, plain]
    order = [scoped, facet, plain]
    terms = anchor_terms([base[i].score for i in order], [{0: 1.0}, {0: SHARE}, {}], [weight], k=60)
    for i, term in zip(order, terms, strict=True):
        assert got[i].parts["anchor_term"] == pytest.approx(term)
        assert got[i].parts["anchor_weight"] == pytest.approx(anchor_factor(term, BOOST))
        assert got[i].score == pytest.approx(base[i].score * anchor_factor(term, BOOST))
    assert got[plain].score == pytest.approx(base[plain].score)


def test_a_cases_items_rank_above_otherwise_equal_items_by_default(
    anchored: tuple[Life, int, int, int],
) -> None:
    """A recall in INC-1 needs no anchor from the request: the case is a default."""
    life, scoped, _, plain = anchored
    assert ids(fresh(life, case_id="INC-1"))[:1] == [scoped]
    assert ids(fresh(life, case_id="INC-1", anchors_mode="replace"))[0] == plain


anchor_st = st.builds(
    recall.Anchor,
    st.sampled_from(["case", "team", "tenant", "service", "agent"]),
    st.sampled_from(["INC-1", "INC-2", "sre", "*", "payment-api", "agent-ir"]),
    st.floats(0.5, 2.0),
)
anchor_lists = st.lists(anchor_st, max_size=3, unique_by=lambda a: (a.axis, a.id))
modes = st.sampled_from(["extend", "replace"])


@settings(DB_SETTINGS, max_examples=25)
@given(truth=truths, anchors=anchor_lists, mode=modes)
def test_anchors_never_change_the_gated_set(
    gate_world: tuple[Life, dict[int, Spec]],
    truth: dict[Slot, str],
    anchors: list[recall.Anchor],
    mode: Any,
) -> None:
    """(a) With a limit above the tenant's items, the items that pass the gates are the
    same with no anchors at all and with any anchors, defaults or not."""
    life, _ = gate_world
    with rolled_back(life) as s:
        bare = ask(s, life, **gate_request(truth, anchors_mode="replace"))
        tilted = ask(s, life, **gate_request(truth, anchors=anchors, anchors_mode=mode))
    assert bare.anchors == ()
    assert sorted(ids(tilted)) == sorted(ids(bare))
    assert {w.item.id for w in tilted.withheld} == {w.item.id for w in bare.withheld}


@settings(DB_SETTINGS, max_examples=25)
@given(truth=truths, anchors=anchor_lists, extra=anchor_st)
def test_an_anchor_never_lowers_an_item_on_it_and_the_lift_is_bounded(
    gate_world: tuple[Life, dict[int, Spec]],
    truth: dict[Slot, str],
    anchors: list[recall.Anchor],
    extra: recall.Anchor,
) -> None:
    """(b) Adding an anchor (beside the request's, defaults aside: one equal to a default
    would change its weight, not add it): every item on it keeps or raises its factor, every other
    item keeps its score exactly, so none on it falls against one not on it.
    (c) Every factor lies in ``[1, 1 + boost)`` and the score is the anchor-free score
    times it: an item passes another only when their anchor-free scores are within
    that factor."""
    life, _ = gate_world
    before_list = [a for a in anchors if (a.axis, a.id) != (extra.axis, extra.id)]
    with rolled_back(life) as s:
        bare = by_id(ask(s, life, **gate_request(truth, anchors_mode="replace")))
        before = by_id(
            ask(s, life, **gate_request(truth, anchors=before_list, anchors_mode="replace"))
        )
        after = by_id(
            ask(
                s,
                life,
                **gate_request(truth, anchors=[*before_list, extra], anchors_mode="replace"),
            )
        )
    assert set(before) == set(after) == set(bare)
    for i, r in after.items():
        if on(r.item, extra):
            assert r.score >= before[i].score * (1 - 1e-9)
        else:
            assert r.score == pytest.approx(before[i].score)
        for res in (before, after):
            factor = res[i].parts["anchor_weight"]
            assert 1.0 <= factor < 1 + BOOST
            assert res[i].score == pytest.approx(bare[i].score * factor)
    for x in after:
        for y in after:
            if bare[y].score > bare[x].score * (1 + BOOST):
                assert after[y].score > after[x].score


# --- packing: the policy's floor --------------------------------------------------------


def test_the_policy_floor_reaches_recalls_packing(life: Life) -> None:
    """With room for one item, ``anchors.floor`` 1 (the default) packs the first anchor
    in play's best entry over a higher-ranked one; ``anchors.floor`` 0 fills by rank."""
    life.hot()
    first = life.write(case_id="INC-2")
    second = life.write(case_id="INC-2")
    other = life.write(case_id="INC-1")
    life.activate(first, second, other)
    asked: dict[str, Any] = {
        "anchors": [recall.Anchor("case", "INC-1", 1.0), recall.Anchor("case", "INC-2", 1.0)],
        "anchors_mode": "replace",
    }
    probe = fresh(life, **asked)
    assert ids(probe)[0] == first  # the tie goes to the earlier id
    room = recall.default_counter()(render([_entry(probe.items[0])], total=3))
    floored = fresh(life, budget=room, **asked).packed
    assert floored is not None and floored.ids == (other,)
    life.do(lifecycle.set_policy, actor=claims.Actor("root", "admin"), changes={"anchors.floor": 0})
    by_rank = fresh(life, budget=room, **asked).packed
    assert by_rank is not None and by_rank.ids == (first,)
