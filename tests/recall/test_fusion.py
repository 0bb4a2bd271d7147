"""MMR and anchors as functions of data: the laws the ranking relies on."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predicates.errors import InputError
from recall._fusion import (
    NEAR_COSINE,
    NEAR_JACCARD,
    Anchor,
    MmrCandidate,
    mmr,
    similarity,
)


def _unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


_WORDS = ["pool", "timeout", "deploy", "dns", "cert", "disk", "oom", "queue", "lag", "tls"]


@st.composite
def _pools(draw: st.DrawFn) -> list[MmrCandidate]:
    """Fused lists: relevance non-increasing, some candidates near-copies of others
    (the same vector or text with a small change), some embedded, some not."""
    n = draw(st.integers(1, 14))
    rels = sorted(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)), reverse=True)
    out: list[MmrCandidate] = []
    for i, rel in enumerate(rels):
        if out and draw(st.booleans()):
            src = out[draw(st.integers(0, len(out) - 1))]
            noise = draw(st.floats(0, 0.3))
            vec = None
            if src.vector is not None:
                vec = _unit(
                    [x + noise * (1 if j == i % 3 else 0) for j, x in enumerate(src.vector)]
                )
            text = src.text + (" extra" if draw(st.booleans()) else "")
            out.append(MmrCandidate(i, rel, vec, text))
            continue
        embedded = draw(st.booleans())
        vec = (
            _unit(draw(st.lists(st.floats(-1, 1), min_size=3, max_size=3)) or [1, 0, 0])
            if embedded
            else None
        )
        words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5))
        out.append(MmrCandidate(i, rel, vec, " ".join(words)))
    return out


def _near(a: MmrCandidate, b: MmrCandidate) -> bool:
    sim, threshold = similarity(a, b)
    return sim >= threshold


@settings(max_examples=400, deadline=None)
@given(_pools(), st.integers(1, 10))
def test_mmr_never_drops_an_item_without_a_near_duplicate_above_it(
    pool: list[MmrCandidate], limit: int
) -> None:
    chosen = [c.id for c in mmr(pool, limit=limit)]
    assert len(chosen) == min(limit, len(pool))
    assert len(set(chosen)) == len(chosen)
    for pos, cand in enumerate(pool):
        if any(_near(cand, above) for above in pool[:pos]):
            continue
        if pos < limit:
            # it was in the top ``limit`` and nothing above it is a near-copy: it stays,
            # no lower than it was
            assert cand.id in chosen
            assert chosen.index(cand.id) <= pos


@settings(max_examples=200, deadline=None)
@given(_pools())
def test_mmr_without_near_duplicates_keeps_the_fused_order(pool: list[MmrCandidate]) -> None:
    distinct = [c for i, c in enumerate(pool) if not any(_near(c, other) for other in pool[:i])]
    distinct = [c for c in distinct if not any(_near(c, o) for o in distinct if o is not c)]
    assert [c.id for c in mmr(distinct, limit=len(distinct))] == [c.id for c in distinct]


def test_five_near_copies_do_not_fill_the_top_five() -> None:
    base = _unit([1.0, 0.2, 0.0])
    copies = [MmrCandidate(i, 1.0 - i * 0.01, base, f"pool exhausted copy {i}") for i in range(5)]
    others = [
        MmrCandidate(10, 0.9, _unit([0.0, 1.0, 0.0]), "dns resolution failed"),
        MmrCandidate(11, 0.85, _unit([0.0, 0.0, 1.0]), "certificate expired"),
    ]
    top = [c.id for c in mmr([*copies, *others], limit=5)]
    assert top[0] == 0
    assert 10 in top and 11 in top
    assert sum(1 for i in top if i < 5) == 3


def test_similarity_falls_back_to_words_when_either_is_not_embedded() -> None:
    a = MmrCandidate(1, 1.0, [1.0, 0.0], "connection pool exhausted at peak")
    b = MmrCandidate(2, 0.9, None, "connection pool exhausted at peak traffic")
    sim, threshold = similarity(a, b)
    assert threshold == NEAR_JACCARD
    assert sim == pytest.approx(5 / 6)
    sim, threshold = similarity(a, MmrCandidate(3, 0.8, [1.0, 0.0], ""))
    assert (sim, threshold) == (pytest.approx(1.0), NEAR_COSINE)


def test_anchor_weights_are_bounded() -> None:
    unsaid = Anchor("team", "payments")  # the tenant policy's anchors.weight, 1.5 by default
    assert unsaid.weight is None and unsaid.as_json()["w"] == 1.5
    assert unsaid.as_json(1.2)["w"] == 1.2 and Anchor("team", "x", 0.7).as_json(1.2)["w"] == 0.7
    for bad in (0.4, 2.1, float("nan")):
        with pytest.raises(InputError):
            Anchor("team", "payments", bad)


def test_mmr_counts_what_was_chosen_before_for_redundancy_only() -> None:
    copy = MmrCandidate(1, 1.0, None, "drain the node then restart it")
    other = MmrCandidate(2, 0.9, None, "raise the pool size")
    prior = MmrCandidate(9, 1.0, None, "drain the node then restart it now")
    assert [c.id for c in mmr([copy, other], limit=1)] == [1]
    # a near-copy of an earlier choice gives way; the earlier one is not returned
    assert [c.id for c in mmr([copy, other], limit=1, already=[prior])] == [2]
    assert [c.id for c in mmr([copy, other], limit=5, already=[prior])] == [2, 1]
