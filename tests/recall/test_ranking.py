"""Ranking end to end on the real store (model §6): confidence, ``min_confidence``,
anchors, pinned items, MMR, packing and determinism.

Items go through the write path and the lifecycle (``tests.lifecycle.helpers.Life``).
Property examples that attach evidence do it in a transaction that is rolled back, so
every example starts from the same store.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

import claims
import factgen
import lifecycle
import recall
import recall._recall as recall_module
from predicates.errors import InputError
from recall._fusion import MmrCandidate, similarity
from recall._packing import fits_alone
from tests.conftest import Store
from tests.lifecycle.helpers import Life

QUERY = "tail latency on payment api"
NOTHING = "zyzzyva quokka"
TEXT = "Tail latency spike on payment-api; pool exhausted; restart restored it."
#: The agent ``insider`` may read ``E-secret``; the store's agent may not.
INSIDER = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
KINDS = sorted(lifecycle.SOURCE_KINDS)

DB_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def life(store: Store) -> Life:
    """The acme store with cases INC-1 and INC-2 open, its clock at T0."""
    driver = Life(store)
    driver.open("INC-1")
    driver.open("INC-2")
    return driver


@contextmanager
def rolled_back(life: Life) -> Iterator[Session]:
    """A session whose work is rolled back at the end, whatever it did."""
    with life.sessions() as s:
        try:
            yield s
        finally:
            s.rollback()


def ask(
    s: Session,
    life: Life,
    actor: claims.Actor | None = None,
    embedder: recall.Embedder | None = None,
    **kw: Any,
) -> recall.RecallResult:
    """A live recall at the driver's clock, in ``s``."""
    request = recall.RecallRequest(**{"query": QUERY, **kw})
    return recall.recall(
        session=s,
        tenant=life.tenant,
        actor=actor or life.store.agent,
        request=request,
        now=life.now,
        embedder=embedder,
    )


def fresh(life: Life, **kw: Any) -> recall.RecallResult:
    """A live recall in a transaction of its own, rolled back."""
    with rolled_back(life) as s:
        return ask(s, life, **kw)


def attach(
    s: Session,
    life: Life,
    item_id: int,
    stance: str,
    strength: float,
    kind: str,
    evidence: str = "E-2",
) -> lifecycle.Attachment:
    return lifecycle.attach_evidence(
        session=s,
        tenant=life.tenant,
        actor=life.store.sme,  # an SME may attach every source kind
        item_id=item_id,
        evidence_id=evidence,
        stance=stance,
        strength=strength,
        source_kind=kind,
        now=life.now,
    )


def ids(res: recall.RecallResult) -> list[int]:
    return [r.item.id for r in res.items]


def by_id(res: recall.RecallResult) -> dict[int, recall.RecalledItem]:
    return {r.item.id: r for r in (*res.pinned, *res.items)}


def confidence(s: Session, life: Life, item_id: int) -> float:
    return lifecycle.confidence_of(
        session=s, tenant=life.tenant, actor=life.store.sme, item_id=item_id, now=life.now
    )


links = st.tuples(
    st.sampled_from(["supports", "refutes"]),
    st.floats(0.0, 1.0),
    st.sampled_from(KINDS),
    st.sampled_from(["E-1", "E-2", "E-secret"]),
)


# --- a world of gates: conditions TRUE, FALSE or UNKNOWN by inline observations ---------

#: attribute -> (predicate, a value that makes it TRUE, one that makes it FALSE)
CHECKS: dict[str, tuple[str, Any, Any]] = {
    "lag_returned_within_s": ("lag_returned_within_s eq 5", 5, 7),
    "config.connection_pool.max": ("config.connection_pool.max gte 50", 100, 20),
    "env.postgres.version": ("env.postgres.version lt v16.0", "v15.4", "v16.2"),
    "metrics.pool_utilisation": ("metrics.pool_utilisation gte 0.8", 0.9, 0.1),
}
PA, PDB, ODB = "payment-api", "payments-db", "orders-db"
LAG, CFG, VER, UTIL = CHECKS
Slot = tuple[str, str]  # (entity, attribute)
SLOTS: list[Slot] = [(e, a) for e in (PA, PDB, ODB) for a in CHECKS]


@dataclass(frozen=True)
class Spec:
    """One item of the gate world: its conditions, where it is written, where it ends."""

    name: str
    required: tuple[Slot, ...]
    excluded: tuple[Slot, ...]
    end: str = "active"  # active | case (left in its case) | shadow | hidden (E-secret)
    case: str = "INC-1"
    facets: tuple[tuple[str, str], ...] = ()


GATE_SPECS = (
    Spec("a1", ((PA, LAG),), ()),
    Spec("a2", ((PA, CFG),), ((PDB, LAG),), facets=(("team", "sre"),)),
    Spec("a3", ((PDB, VER),), (), case="INC-2"),
    Spec("a4", ((ODB, UTIL), (PA, VER)), (), case="INC-2", facets=(("case", "INC-1"),)),
    Spec("a5", ((ODB, CFG),), ((PA, UTIL),), case="INC-2"),
    Spec("a6", ((PDB, CFG),), ((ODB, VER),), facets=(("team", "sre"),)),
    Spec("a7", ((PA, LAG), (PDB, UTIL)), ((ODB, LAG),)),
    Spec("own-case", ((PA, LAG),), ((ODB, LAG),), end="case"),
    Spec("other-case", ((PA, LAG),), (), end="case", case="INC-2"),
    Spec("shadow", ((PDB, UTIL),), (), end="shadow"),
    Spec("hidden", ((PA, LAG),), (), end="hidden"),
)


def condition(slot: Slot) -> str:
    entity, attribute = slot
    predicate = CHECKS[attribute][0]
    return predicate if entity == PA else f"@{entity}:{predicate}"


def build_gate_world(life: Life) -> dict[int, Spec]:
    """The items of ``GATE_SPECS`` through the write path, in the state each names."""
    out: dict[int, Spec] = {}
    for spec in GATE_SPECS:
        hidden = spec.end == "hidden"
        item = life.write(
            case_id=spec.case,
            actor=INSIDER if hidden else None,
            required=[condition(c) for c in spec.required],
            excluded=[condition(c) for c in spec.excluded],
            evidence=["E-secret"] if hidden else ["E-1"],
            object="E-secret" if hidden else "E-1",
            facets=[{"axis": a, "id": i} for a, i in spec.facets],
        )
        if spec.end in ("active", "hidden"):
            life.activate(item)
        elif spec.end == "shadow":
            life.do(lifecycle.promote, item_id=item, to="shadow", actor=life.store.sme)
        out[item] = spec
    return out


#: Each slot's predicate TRUE, FALSE or UNKNOWN (TRUE more often, so more items pass).
truths = st.fixed_dictionaries(
    {slot: st.sampled_from(["true", "true", "false", "absent"]) for slot in SLOTS}
)


def observations(truth: dict[Slot, str]) -> list[factgen.Observation]:
    """Inline observations that make each slot's predicate TRUE, FALSE, or (absent) UNKNOWN:
    the store holds no facts of its own in the gate world."""
    out = []
    for (entity, attribute), value in truth.items():
        if value != "absent":
            _, yes, no = CHECKS[attribute]
            out.append(factgen.Observation(entity, attribute, yes if value == "true" else no))
    return out


def admissible(world: dict[int, Spec], truth: dict[Slot, str]) -> set[int]:
    """The items a request in case INC-1 by the store's agent may be given (model §6)."""
    return {
        i
        for i, spec in world.items()
        if (spec.end == "active" or (spec.end == "case" and spec.case == "INC-1"))
        and all(truth[c] == "true" for c in spec.required)
        and all(truth[c] == "false" for c in spec.excluded)
    }


@pytest.fixture
def gate_world(life: Life) -> tuple[Life, dict[int, Spec]]:
    return life, build_gate_world(life)


def gate_request(truth: dict[Slot, str], **kw: Any) -> dict[str, Any]:
    return {
        "case_id": "INC-1",
        "observations": observations(truth),
        "limit": 50,
        "explain": True,
        **kw,
    }


# --- 1. confidence ------------------------------------------------------------------


@pytest.fixture
def pair(life: Life) -> tuple[Life, int, int]:
    """Two active items alike in every ranked respect; the first ranks first on the tie."""
    life.hot()
    a, b = life.write(), life.write()
    life.activate(a, b)
    return life, a, b


@settings(DB_SETTINGS, max_examples=25)
@given(
    stance=st.sampled_from(["refutes", "supports"]),
    steps=st.lists(st.tuples(st.floats(0.05, 1.0), st.sampled_from(KINDS)), min_size=1, max_size=3),
)
def test_refuting_evidence_lowers_an_item_below_its_equal_and_support_lifts_one(
    pair: tuple[Life, int, int], stance: str, steps: list[tuple[float, str]]
) -> None:
    life, a, b = pair
    with rolled_back(life) as s:
        before = by_id(ask(s, life))
        assert [*before] == [a, b]
        assert before[a].score == before[b].score  # equal: the tie is broken by id
        # refute the first, or support the second: either way they change places
        target, other = (a, b) if stance == "refutes" else (b, a)
        for strength, kind in steps:
            attach(s, life, target, stance, strength, kind)
        after = by_id(ask(s, life))
        assert [*after] == [b, a]
        moved = after[target].score - before[target].score
        assert moved < 0 if stance == "refutes" else moved > 0
        assert after[other].score == before[other].score
        assert after[target].parts["confidence"] == pytest.approx(confidence(s, life, target))


@settings(DB_SETTINGS, max_examples=30)
@given(truth=truths, attachments=st.lists(st.tuples(st.integers(0, 10), links), max_size=10))
def test_evidence_never_moves_an_item_past_a_gate(
    gate_world: tuple[Life, dict[int, Spec]],
    truth: dict[Slot, str],
    attachments: list[tuple[int, tuple[str, float, str, str]]],
) -> None:
    """Whatever evidence is attached (supporting or refuting, any strength and source
    kind, many times, to gated items too), the returned set is the one returned with
    no attachment at all, and that is exactly the admissible items: confidence only
    orders what the gates let through (no ``min_confidence`` given)."""
    life, world = gate_world
    items = sorted(world)
    expected = admissible(world, truth)
    with rolled_back(life) as s:
        plain = ask(s, life, **gate_request(truth))
        assert set(ids(plain)) == expected
        for n, (stance, strength, kind, evidence) in attachments:
            attach(s, life, items[n], stance, strength, kind, evidence)
        res = ask(s, life, **gate_request(truth))
        assert sorted(ids(res)) == sorted(ids(plain))
        hidden = {i for i, spec in world.items() if spec.end == "hidden"}
        assert hidden.isdisjoint(w.item.id for w in res.withheld)


# --- 2. min_confidence ----------------------------------------------------------------


@pytest.fixture
def confidence_world(
    life: Life, monkeypatch: pytest.MonkeyPatch
) -> tuple[Life, list[int], list[int]]:
    """Twelve items that pass every gate and five that a gate withholds (a FALSE
    condition twice, another case, shadow, hidden), all matching the query; the
    candidate cap is 2, so a stage holds two candidates before it widens."""
    life.hot()
    passing = []
    for n in range(12):
        item = life.write(text=f"Tail latency spike on payment-api, run {n}; pool exhausted.")
        life.activate(item)
        passing.append(item)
    false = [life.write(required=["config.connection_pool.max gte 50"]) for _ in range(2)]
    life.activate(*false)
    other = life.write(case_id="INC-2")
    shadow = life.write()
    life.do(lifecycle.promote, item_id=shadow, to="shadow", actor=life.store.sme)
    hidden = life.write(actor=INSIDER, evidence=["E-secret"], object="E-secret")
    life.activate(hidden)
    monkeypatch.setattr(recall_module, "CANDIDATE_CAP", 2)
    return life, passing, [*false, other, shadow, hidden]


def _check_min_confidence(
    s: Session, life: Life, res: recall.RecallResult, passing: list[int], floor: float, limit: int
) -> None:
    tol = 1e-9
    conf = {i: confidence(s, life, i) for i in passing}
    sure = {i for i, c in conf.items() if c >= floor + tol}
    maybe = sure | {i for i, c in conf.items() if abs(c - floor) < tol}
    got = ids(res)
    assert len(got) == len(set(got))
    assert set(got) <= maybe, {i: conf.get(i) for i in set(got) - maybe}
    # never under-filled: as many as the limit allows of those that qualify
    assert min(limit, len(sure)) <= len(got) <= min(limit, len(maybe))
    for r in res.items:
        assert r.parts["confidence"] == pytest.approx(conf[r.item.id], abs=tol)
        assert r.parts["confidence"] >= floor - tol


@settings(DB_SETTINGS, max_examples=30)
@given(
    attachments=st.lists(st.tuples(st.integers(0, 16), links), max_size=14),
    floor=st.floats(0.0, 1.0),
    limit=st.integers(1, 6),
    subjects=st.sampled_from([None, ["payment-api"]]),
    query=st.sampled_from([QUERY, NOTHING]),
)
def test_min_confidence_filters_before_the_cut_and_never_under_fills(
    confidence_world: tuple[Life, list[int], list[int]],
    attachments: list[tuple[int, tuple[str, float, str, str]]],
    floor: float,
    limit: int,
    subjects: list[str] | None,
    query: str,
) -> None:
    life, passing, gated = confidence_world
    everything = [*passing, *gated]
    with rolled_back(life) as s:
        for n, (stance, strength, kind, evidence) in attachments:
            attach(s, life, everything[n], stance, strength, kind, evidence)
        res = ask(s, life, query=query, subjects=subjects, limit=limit, min_confidence=floor)
        assert set(ids(res)).isdisjoint(gated)
        _check_min_confidence(s, life, res, passing, floor, limit)


def test_min_confidence_finds_the_few_that_qualify_deep_in_the_candidates(
    confidence_world: tuple[Life, list[int], list[int]],
) -> None:
    """Only the four items written last qualify (and every gated item, supported to the
    top, would): with two candidates per stage the walk must widen to fill the limit."""
    life, passing, gated = confidence_world
    strong = passing[-4:]
    with rolled_back(life) as s:
        for i in passing:
            if i not in strong:
                attach(s, life, i, "refutes", 0.5, "citation")
        for i in [*strong, *gated]:
            attach(s, life, i, "supports", 1.0, "human_confirm")
        for subjects in (None, ["payment-api"]):
            for query in (QUERY, NOTHING):
                res = ask(s, life, query=query, subjects=subjects, limit=4, min_confidence=0.9)
                assert sorted(ids(res)) == sorted(strong), (subjects, query)
                _check_min_confidence(s, life, res, passing, 0.9, 4)
                short = ask(s, life, query=query, subjects=subjects, limit=3, min_confidence=0.9)
                assert len(ids(short)) == 3 and set(ids(short)) <= set(strong)
        # without the filter, the refuted items still come back: confidence is no gate
        assert set(ids(ask(s, life, limit=20))) == set(passing)


def test_min_confidence_out_of_range_is_refused() -> None:
    for bad in (-0.01, 1.01):
        with pytest.raises(InputError):
            recall.RecallRequest(query=QUERY, min_confidence=bad)


# --- 3. anchors -----------------------------------------------------------------------


@given(
    weight=st.one_of(
        st.floats(max_value=0.5, exclude_max=True, allow_nan=False),
        st.floats(min_value=2.0, exclude_min=True),
        st.just(math.nan),
    )
)
def test_an_anchor_weight_outside_half_to_two_is_refused(weight: float) -> None:
    with pytest.raises(InputError) as err:
        recall.Anchor("case", "INC-1", weight)
    assert err.value.detail["attribute"] == "anchors.weight"


anchor_lists = st.lists(
    st.builds(
        recall.Anchor,
        st.sampled_from(["case", "team", "tenant", "service"]),
        st.sampled_from(["INC-1", "INC-2", "sre", "*", "payment-api"]),
        st.floats(0.5, 2.0),
    ),
    max_size=3,
)


@settings(DB_SETTINGS, max_examples=25)
@given(truth=truths, anchors=anchor_lists)
def test_anchors_never_change_the_returned_set(
    gate_world: tuple[Life, dict[int, Spec]], truth: dict[Slot, str], anchors: list[recall.Anchor]
) -> None:
    life, world = gate_world
    with rolled_back(life) as s:
        plain = ask(s, life, **gate_request(truth))
        tilted = ask(s, life, **gate_request(truth, anchors=anchors))
    assert sorted(ids(tilted)) == sorted(ids(plain))
    assert set(ids(plain)) == admissible(world, truth)


# --- 4. pinned ------------------------------------------------------------------------


#: Texts that match ``QUERY`` well, none a near-duplicate of another (MMR leaves them be).
RANKED_TEXTS = (
    "Tail latency on payment api after the connection pool filled.",
    "Payment api tail latency doubled during the flash sale.",
    "Latency on the payment api tail: retries amplified a slow ledger.",
    "Tail latency alarms for payment api traced to a noisy neighbour.",
    "Payment api latency tail grew when TLS session caching was off.",
)


@pytest.fixture
def pins(life: Life) -> tuple[Life, list[int], dict[str, int]]:
    """Five items matching the query; one that passes every gate but shares no word of its
    text with it (its subject still matches); and three that a gate withholds: a FALSE
    condition, another case, hidden."""
    life.hot()
    ranked = [life.write(text=t) for t in RANKED_TEXTS]
    low = life.write(text="Quarterly ledger reconciliation drifted by one cent.")
    false = life.write(required=["config.connection_pool.max gte 50"])
    other = life.write(case_id="INC-2")
    hidden = life.write(
        actor=INSIDER,
        evidence=["E-secret"],
        object="E-secret",
        text="Tail latency on payment api: the secret marker qxjvwk.",
    )
    life.activate(*ranked, low, false, hidden)
    return life, ranked, {"low": low, "false": false, "other": other, "hidden": hidden}


def test_a_pinned_item_that_passes_the_gates_comes_back_even_below_the_limit(
    pins: tuple[Life, list[int], dict[str, int]],
) -> None:
    life, ranked, named = pins
    low = named["low"]
    unpinned = fresh(life, limit=len(ranked) + 1)
    assert ids(unpinned)[-1] == low  # it ranks last of all
    assert low not in ids(fresh(life, limit=2))
    res = fresh(life, limit=2, pinned=[low])
    assert [p.item.id for p in res.pinned] == [low]
    assert res.pinned[0].pinned and not any(r.pinned for r in res.items)
    assert low not in ids(res) and len(ids(res)) == 2
    # one that ranks in the top limit anyway: returned once, as pinned
    top = ids(unpinned)[0]
    res = fresh(life, limit=2, pinned=[top, low])
    assert sorted(p.item.id for p in res.pinned) == sorted([top, low])
    assert top not in ids(res) and low not in ids(res)


def test_a_pinned_item_a_gate_withholds_is_not_returned_and_a_hidden_one_never_mentioned(
    pins: tuple[Life, list[int], dict[str, int]],
) -> None:
    life, ranked, named = pins
    hidden = named["hidden"]
    everyone = [*ranked, *named.values()]
    insider = fresh(life, actor=INSIDER, limit=20, pinned=[hidden])
    assert [p.item.id for p in insider.pinned] == [hidden]  # it passes for a reader of it
    res = fresh(life, case_id="INC-1", limit=20, explain=True, budget=10_000, pinned=everyone)
    returned = {*ids(res), *(p.item.id for p in res.pinned)}
    assert returned == {*ranked, named["low"]}
    for gated in (named["false"], named["other"], hidden):
        assert gated not in returned
    # the ones the caller may see can be explained; the hidden one exists nowhere
    assert res.packed is not None
    mentioned = {
        *returned,
        *(w.item.id for w in res.withheld),
        *res.checks,
        *res.packed.ids,
        *res.packed.omitted,
    }
    assert hidden not in mentioned
    assert "qxjvwk" not in repr(res) and "qxjvwk" not in res.packed.text
    assert named["false"] in {w.item.id for w in res.withheld}  # explain does run


# --- 5. MMR, 6. packing and 7. determinism, on postmortems ---------------------------

POSTMORTEM = (
    "Checkout latency spike: the payments-db connection pool was exhausted after the "
    "deploy, and restarting the pool restored service."
)
COPIES = [
    POSTMORTEM,
    POSTMORTEM.replace("spike", "surge"),
    POSTMORTEM + " Again.",
    POSTMORTEM.replace("restored service", "restored the service"),
    POSTMORTEM.replace("Checkout", "Checkout API"),
]
DISTINCT = [
    "Checkout latency rose when DNS resolution failed after a config push.",
    "Connection pool limits on payments-db were raised after load testing.",
    "Deploy of the ledger service stalled: a migration held a lock for an hour.",
    "Latency alerts on checkout were a dashboard bug; nothing was exhausted.",
    "Restarting the cache cluster restored checkout after an eviction storm.",
]
MMR_QUERY = "checkout latency connection pool exhausted after deploy"


@pytest.fixture
def postmortems(life: Life) -> tuple[Life, list[int], list[int]]:
    """Five near-copies of one postmortem (same subject, light edits) and five distinct
    items sharing some of the query's words; all embedded by the hashing embedder."""
    life.hot()
    copies = [life.write(text=t) for t in COPIES]
    distinct = [life.write(text=t) for t in DISTINCT]
    life.activate(*copies, *distinct)
    with life.sessions.begin() as s:
        while recall.embed_pending(
            session=s, tenant=life.tenant, embedder=recall.HashingEmbedder(), now=life.now
        ):
            pass
    return life, copies, distinct


def _near(a: str, b: str) -> bool:
    """Near-duplicates as MMR judges them, on the vectors the hashing embedder stores."""
    va, vb = recall.HashingEmbedder().embed([a, b])
    sim, threshold = similarity(
        MmrCandidate(0, 1.0, [float(x) for x in va], a),
        MmrCandidate(1, 1.0, [float(x) for x in vb], b),
    )
    return sim >= threshold


def test_mmr_keeps_near_copies_from_filling_the_top(
    postmortems: tuple[Life, list[int], list[int]],
) -> None:
    life, copies, distinct = postmortems
    emb = recall.HashingEmbedder()
    assert all(_near(COPIES[0], c) for c in COPIES[1:])
    assert not any(_near(a, b) for a in [*COPIES, *DISTINCT] for b in DISTINCT if a != b)
    everything = fresh(life, query=MMR_QUERY, embedder=emb, limit=len(copies) + len(distinct))
    assert "dense" in everything.channels
    # fused order: by score, then the newest, then the lowest id (the ranking's tie order)
    fused = sorted(
        everything.items, key=lambda r: (-r.score, -r.item.recorded_at.timestamp(), r.item.id)
    )
    assert {r.item.id for r in fused[:5]} == set(copies)  # relevance alone: five copies
    top = ids(fresh(life, query=MMR_QUERY, embedder=emb, limit=5))
    assert not set(top) <= set(copies)
    assert top[0] == fused[0].item.id
    # an item with no near-duplicate above it in the fused order keeps its place or rises
    place = {i: n for n, i in enumerate(ids(everything))}
    for n, r in enumerate(fused):
        if not any(_near(above.item.text or "", r.item.text or "") for above in fused[:n]):
            assert place[r.item.id] <= n, (r.item.text, place[r.item.id], n)
            if n < 5:
                assert r.item.id in top


def test_without_subjects_the_dense_term_counts_only_for_the_nearest_list(
    postmortems: tuple[Life, list[int], list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reciprocal rank fusion over lists: without subjects the dense channel is its
    nearest ``DENSE_K``; an item outside that list gets no dense term (as an item no
    query term matches gets no lexical term), and the candidates still waiting for a
    vector are counted, not scored."""
    life, _, _ = postmortems
    emb = recall.HashingEmbedder()
    monkeypatch.setattr(recall_module, "DENSE_K", 3)
    late = life.write(text="Checkout latency after the pool deploy, written after the drain.")
    life.activate(late)
    found: list[tuple[list[int], str | None]] = []
    plan = recall_module._dense_candidates

    def spy(*args: Any) -> tuple[list[int], str | None]:
        found.append(plan(*args))
        return found[-1]

    monkeypatch.setattr(recall_module, "_dense_candidates", spy)
    res = fresh(life, query=MMR_QUERY, embedder=emb, limit=20)
    [(nearest, how)] = found
    assert how == "exact" and len(nearest) == 3
    scored = {r.item.id for r in res.items if not math.isnan(r.parts["dense"])}
    assert scored == set(nearest)
    assert late in ids(res)  # a full-text match, ranked without a vector
    assert late not in scored
    assert res.not_embedded == 1


@settings(DB_SETTINGS, max_examples=20)
@given(
    budget=st.one_of(st.integers(0, 120), st.integers(120, 700)),
    pinned=st.lists(st.integers(0, 9), max_size=3, unique=True),
    limit=st.integers(1, 10),
)
def test_packing_within_budget_pinned_first_items_whole(
    postmortems: tuple[Life, list[int], list[int]],
    budget: int,
    pinned: list[int],
    limit: int,
) -> None:
    life, copies, distinct = postmortems
    everyone = [*copies, *distinct]
    pins = [everyone[n] for n in pinned]
    res = fresh(life, query=MMR_QUERY, limit=limit, pinned=pins, budget=budget)
    packed = res.packed
    assert packed is not None
    count = recall.default_counter()
    assert packed.budget == budget
    assert packed.tokens <= budget
    assert packed.tokens == (count(packed.text) if packed.text else 0)
    recalled = by_id(res)
    assert set(recalled) >= set(pins)
    assert sorted([*packed.ids, *packed.omitted]) == sorted(recalled)
    for i in packed.ids:
        text = recalled[i].item.text
        assert text and text in packed.text  # whole, on one line
        assert f"id={i} · " in packed.text
    for i in packed.omitted:
        assert f"id={i} · " not in packed.text
    # pinned first in the text, and all packed when they fit alone
    flags = [recalled[i].pinned for i in packed.ids]
    assert flags == sorted(flags, reverse=True)
    if pins and fits_alone(
        [_entry(r) for r in (*res.pinned, *res.items)], pins, budget=budget, count=count
    ):
        assert set(pins) <= set(packed.ids)


def _entry(r: recall.RecalledItem) -> recall.PackEntry:
    return recall.PackEntry(
        id=r.item.id,
        kind=r.item.kind,
        text=r.item.text or "",
        subject=r.item.subject,
        attribute=r.item.attribute,
        object=r.item.object_display,
        scope=(r.item.scope_axis, r.item.scope_id),
        facets=r.item.facets,
        evidence=r.item.evidence,
        verified_by=r.item.verified_by,
        recorded_at=r.item.recorded_at,
        score=r.score,
        pinned=r.pinned,
        confidence=r.parts["confidence"],
    )


def test_the_same_request_gives_the_same_answer(
    postmortems: tuple[Life, list[int], list[int]],
) -> None:
    life, _, distinct = postmortems
    emb = recall.HashingEmbedder()
    requests: Sequence[dict[str, Any]] = (
        {"query": MMR_QUERY, "embedder": emb, "limit": 5},
        {"query": MMR_QUERY, "limit": 7, "anchors": [recall.Anchor("case", "INC-1", 1.7)]},
        {"query": QUERY, "limit": 3, "pinned": [distinct[2]], "budget": 200},
        {"query": NOTHING, "limit": 4, "subjects": ["payment-api"]},
        {"query": "", "limit": 10, "min_confidence": 0.2},
    )
    for kw in requests:
        first, second = fresh(life, **kw), fresh(life, **kw)
        assert ids(first) == ids(second), kw
        assert [r.score for r in first.items] == [r.score for r in second.items]
        assert [p.item.id for p in first.pinned] == [p.item.id for p in second.pinned]
        assert first.packed == second.packed
        assert ids(first)  # the request returns something to compare
