"""The core-block prefix of a packed recall (recall/_blocks.py; docs/blocks.md), as a
pure function: the order it is given, blocks wholly in or out, the whole text within
the budget even for a counter that is not additive."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from claims import Block
from recall._blocks import pack_blocks_first, render_blocks
from recall._packing import Packed, PackEntry, pack

T = datetime(2026, 12, 1, tzinfo=UTC)


def _block(n: int, text: str, scope: tuple[str, str] = ("tenant", "*")) -> Block:
    return Block(f"b{n}", scope, text, 100 + n, T, "sme-alice")


def _entry(n: int) -> PackEntry:
    return PackEntry(
        id=n, kind="fact", text=f"precedent number {n} " * 3, subject="api",
        attribute="a", object="1", scope=("case", "INC-1"), facets=(), evidence=("E-1",),
        verified_by=None, recorded_at=T, score=1.0 / n,
    )  # fmt: skip


def _words(text: str) -> int:
    return len(text.split())


def _lumpy(text: str) -> int:
    """Not additive: a text counts more than its parts."""
    return len(text.split()) + text.count("\n") // 2


ENTRIES = [_entry(n) for n in range(1, 6)]
BLOCKS = [_block(1, "Page the DBA on call."), _block(2, "A long block " * 20), _block(3, "Short.")]


def _packed(budget: int, count: Callable[[str], int] = _words) -> Packed:
    return pack_blocks_first(
        BLOCKS,
        budget=budget,
        count=count,
        pack_rest=lambda left: pack(ENTRIES, budget=left, count=count),
    )


def test_blocks_come_first_in_the_given_order_and_the_rest_after() -> None:
    done = _packed(1000)
    assert done.text.startswith(render_blocks(BLOCKS) + "\n\nPrecedents from caveat")
    assert done.blocks == (101, 102, 103) and done.blocks_omitted == ()
    assert done.ids == (1, 2, 3, 4, 5)


def test_a_block_that_does_not_fit_is_omitted_whole_and_the_next_tried() -> None:
    fits = _words(render_blocks([BLOCKS[0], BLOCKS[2]]))
    done = _packed(fits)
    assert done.blocks == (101, 103) and done.blocks_omitted == (102,)
    assert done.text == render_blocks([BLOCKS[0], BLOCKS[2]]) and done.ids == ()
    assert _packed(0).text == "" and _packed(0).blocks_omitted == (101, 102, 103)


@given(st.integers(min_value=0, max_value=300))
def test_the_whole_text_is_within_budget_for_any_counter(budget: int) -> None:
    for count in (_words, _lumpy):
        done = _packed(budget, count)
        assert done.tokens == (count(done.text) if done.text else 0) <= budget
        prefix = render_blocks([b for b in BLOCKS if b.item_id in done.blocks])
        assert done.text.startswith(prefix)
        assert set(done.blocks) | set(done.blocks_omitted) == {101, 102, 103}
