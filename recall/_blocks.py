"""The core-block prefix of a packed recall (model §4 "Core blocks"; docs/blocks.md).

The blocks in play (the tenant's, the asking principal's teams', the asking agent's) are
rendered before everything else, in a stable order (anchor: tenant, team, agent; then
label), as a text that depends on the blocks alone: the same blocks give the same bytes
whatever was recalled, so a prompt's prefix stays byte-identical between calls::

    Core blocks from caveat:

    [tenant:* block:escalation]
    Page the DBA on call for payments-db.

    [agent:agent-ir block:style]
    Answer in five lines or fewer.

    Precedents from caveat (2 of 3, conditions checked at recall):
    ...

The prefix counts against the budget. Blocks are taken in order while the prefix fits;
a block that does not fit is omitted whole (``Packed.blocks_omitted``, never cut
mid-block) and the next ones are tried. The precedents are packed in what is left, and
the whole text is counted again: with a counter that is not additive, the precedents
are packed again in less until the whole fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from claims import Block
from recall._packing import Packed

__all__ = ["BLOCKS_HEADER", "pack_blocks_first", "render_blocks"]

BLOCKS_HEADER = "Core blocks from caveat:"
_JOIN = "\n\n"


def render_blocks(blocks: Sequence[Block]) -> str:
    """The prefix of ``blocks`` in the given order; the empty string for none."""
    if not blocks:
        return ""
    parts = [BLOCKS_HEADER, *(f"[{b.anchor} block:{b.label}]\n{b.text}" for b in blocks)]
    return _JOIN.join(parts)


def _joined(prefix: str, rest: str) -> str:
    return _JOIN.join(p for p in (prefix, rest) if p)


def pack_blocks_first(
    blocks: Sequence[Block],
    *,
    budget: int,
    count: Callable[[str], int],
    pack_rest: Callable[[int], Packed],
) -> Packed:
    """The blocks' prefix within ``budget``, then ``pack_rest(tokens left)`` after it:
    ``count(text) <= budget`` holds for the whole text (see the module's docstring)."""
    taken: list[Block] = []
    omitted: list[Block] = []
    for block in blocks:
        text = render_blocks([*taken, block])
        (taken if count(text) <= budget else omitted).append(block)
    prefix = render_blocks(taken)
    used = count(prefix + _JOIN) if prefix else 0
    left = max(budget - used, 0)
    while True:
        rest = pack_rest(left)
        text = _joined(prefix, rest.text)
        tokens = count(text) if text else 0
        if tokens <= budget or not rest.text:
            break
        left = max(min(left - 1, left - (tokens - budget)), 0)
    return replace(
        rest,
        text=text,
        tokens=tokens,
        budget=budget,
        blocks=tuple(b.item_id for b in taken),
        blocks_omitted=tuple(b.item_id for b in omitted),
    )
