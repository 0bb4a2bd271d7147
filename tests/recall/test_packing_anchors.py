"""Packing's anchor floors (model §6: "per-anchor floors so no anchor is starved"; issue 26,
"Packing gives each anchor in play a floor, MMR within each anchor, then fills by rank";
docs/packing.md): the laws over any entries, anchors, floors and budgets, and examples of
the MMR choice within an anchor."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from claims import Block
from recall._blocks import pack_blocks_first, render_blocks
from recall._packing import PackEntry, fits_alone, pack, render, reserved
from tests.recall.test_packing import (
    T,
    anchor_lists,
    budgets,
    entry,
    entry_lists,
    floors,
    jitter,
    words,
)

Anchor = tuple[str, str]


def on(entries: Sequence[PackEntry], anchor: Anchor) -> list[int]:
    return [e.id for e in entries if e.anchored(anchor)]


@settings(max_examples=300)
@given(entry_lists(), anchor_lists, floors, budgets)
def test_every_anchor_gets_its_floor_when_the_budget_allows(
    entries: list[PackEntry], anchors: list[Anchor], floor: int, budget: int
) -> None:
    p = pack(entries, budget=budget, count=words, anchors=anchors, floor=floor)
    packed = set(p.ids)
    for anchor in anchors:
        mine = on(entries, anchor)
        have = sum(1 for i in mine if i in packed)
        if fits_alone(entries, reserved(entries, anchors, floor), budget=budget, count=words):
            assert have >= min(floor, len(mine))
        if have < min(floor, len(mine)):
            # short of its floor only when none of its omitted entries would still fit
            for i in mine:
                if i not in packed:
                    assert not fits_alone(entries, [*p.ids, i], budget=budget, count=words)


@settings(max_examples=200)
@given(entry_lists(), anchor_lists, floors, budgets, st.sampled_from([words, jitter]))
def test_anchors_never_add_an_item_and_the_budget_holds(
    entries: list[PackEntry], anchors: list[Anchor], floor: int, budget: int, count: object
) -> None:
    assert callable(count)
    p = pack(entries, budget=budget, count=count, anchors=anchors, floor=floor)
    ranked = {e.id for e in entries}
    assert set(p.ids) <= ranked
    assert set(p.ids) | set(p.omitted) == ranked
    assert p.tokens == (count(p.text) if p.text else 0) <= budget
    # deterministic
    assert pack(entries, budget=budget, count=count, anchors=anchors, floor=floor) == p


@given(entry_lists(), anchor_lists, floors)
def test_anchors_never_change_which_items_may_be_packed(
    entries: list[PackEntry], anchors: list[Anchor], floor: int
) -> None:
    free = pack(entries, budget=10**9, count=words)
    anchored = pack(entries, budget=10**9, count=words, anchors=anchors, floor=floor)
    # the same items, in the same (output) order: a floor decides whether, never where
    assert anchored.ids == free.ids
    assert anchored.text == free.text


@given(entry_lists(), anchor_lists, floors)
def test_an_entry_on_no_anchor_in_play_is_never_reserved_for_a_floor(
    entries: list[PackEntry], anchors: list[Anchor], floor: int
) -> None:
    """A knowledge passage (no anchor in play) takes part in the fill by rank only."""
    ids = {e.id: e for e in entries}
    for i in reserved(entries, anchors, floor):
        e = ids[i]
        assert e.packed_first or any(e.anchored(a) for a in anchors)


BLOCKS = [
    Block("runbook", ("tenant", "*"), "Page the DBA on call.", 901, T, "sme-alice"),
    Block("style", ("agent", "agent-ir"), "Answer in five lines.", 902, T, "sme-alice"),
]


@settings(max_examples=150)
@given(entry_lists(), anchor_lists, floors, st.integers(40, 2000))
def test_the_block_prefix_is_byte_identical_whatever_the_anchors_and_floors(
    entries: list[PackEntry], anchors: list[Anchor], floor: int, budget: int
) -> None:
    def packed(anchors: Sequence[Anchor], floor: int) -> str:
        return pack_blocks_first(
            BLOCKS,
            budget=budget,
            count=words,
            pack_rest=lambda left: pack(
                entries, budget=left, count=words, anchors=anchors, floor=floor
            ),
        ).text

    prefix = render_blocks(BLOCKS)
    assert words(prefix) <= 40  # both blocks fit in every budget drawn
    for text in (packed(anchors, floor), packed((), 0), packed(list(reversed(anchors)), 3)):
        assert text.startswith(prefix)
        assert text[len(prefix) :] == "" or text[len(prefix) :].startswith("\n\nPrecedents")


# --- examples: MMR within an anchor ------------------------------------------------------

EU = ("region", "eu")


def test_floor_one_takes_the_anchors_best_ranked_entry() -> None:
    entries = [
        entry(1, "alpha " * 30),
        entry(2, "pool exhausted in eu", scope=EU),
        entry(3, "another eu lesson", scope=EU),
    ]
    assert reserved(entries, [EU], 1) == (2,)


def test_a_near_duplicate_of_the_anchors_first_pick_gives_way_to_a_distinct_entry() -> None:
    entries = [
        entry(1, "ledger retries caused the 502 storm in eu", scope=EU),
        entry(2, "ledger retries caused the 502 storm in eu again", scope=EU),
        entry(3, "cache stampede after the deploy of the payments api service", scope=EU),
        entry(4, "unrelated " * 20),
    ]
    # rank order would take 1 and 2; MMR within the anchor takes 1 and 3
    assert reserved(entries, [EU], 2) == (1, 3)
    # all three once the floor allows it, the near-copy last
    assert reserved(entries, [EU], 3) == (1, 3, 2)
    # room for 1 and 3 (3 is longer than 2), not for a third item
    budget = words(render([entries[0], entries[2]], total=4))
    p = pack(entries, budget=budget, count=words, anchors=[EU], floor=2)
    assert p.ids == (1, 3)
    assert p.omitted == (2, 4)
    # without anchors the same budget is filled by rank
    assert pack(entries, budget=budget, count=words).ids == (1, 2)


def test_an_entry_already_packed_on_the_anchor_counts_for_redundancy() -> None:
    entries = [
        entry(1, "drain the node then restart it", scope=EU, pinned=True),
        entry(2, "drain the node then restart it quickly", scope=EU),
        entry(3, "raise the pool size to forty", scope=EU),
    ]
    # the pinned item fills one place of the floor; the second goes to the distinct one
    assert reserved(entries, [EU], 2) == (1, 3)


def test_each_anchor_in_play_in_turn_an_entry_counting_for_every_anchor_it_is_on() -> None:
    svc = ("service", "payments")
    entries = [
        entry(1, "top ranked on the tenant"),
        entry(2, "on payments and eu", scope=svc, facets=(EU,)),
        entry(3, "only eu", scope=EU),
        entry(4, "only payments", scope=svc),
    ]
    # payments first: 2; eu already has 2 (a facet): nothing more at floor 1
    assert reserved(entries, [svc, EU], 1) == (2,)
    assert reserved(entries, [EU, svc], 1) == (2,)
    assert reserved(entries, [svc, EU], 2) == (2, 4, 3)


def test_a_low_scored_pinned_item_does_not_flatten_the_anchors_relevance() -> None:
    """MMR within an anchor weighs the ranked entries' own scores: a pinned item listed
    first with a low score does not cap them (else a near-copy would lose to anything)."""

    def scored(e: PackEntry, score: float) -> PackEntry:
        return PackEntry(**{**e.__dict__, "score": score})

    entries = [
        scored(entry(9, "pinned elsewhere", scope=("team", "sre"), pinned=True), 0.01),
        scored(entry(1, "ledger retries caused the 502 storm in eu", scope=EU), 1.0),
        scored(entry(2, "ledger retries caused the 502 storm in eu too", scope=EU), 0.95),
        scored(entry(3, "cache stampede after the deploy", scope=EU), 0.1),
    ]
    # 2 is a near-copy of 1 but far more relevant than 3: 0.7*0.95 - 0.3*0.89 > 0.7*0.1
    assert reserved(entries, [EU], 2) == (9, 1, 2)
