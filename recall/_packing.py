"""Packing: a recall result rendered for a prompt within a token budget (model §6).

The text is one header line, then one block per item, a blank line between blocks::

    Precedents from caveat (2 of 3, conditions checked at recall):

    [1] skill: Drain the node, then restart it.
        id=7 · subject=api · scope=tenant:* · evidence=none · verified by bo · 2026-11-03 · pinned

    [2] Retries on the ledger call caused the 502 storm.
        id=9 · subject=db · scope=team:a · evidence=E-1 · unverified · 2026-10-30 · confidence 0.72

A block's first line is ``[n]``, ``skill: `` for a skill, and the item's text (or
``subject attribute = object`` when it has none); further lines of a multi-line text
follow indented by four spaces; the last line of every block is its provenance, indented
by four spaces: id, subject, scope, evidence ids, verified-by, the recording date (UTC),
then the confidence when known and ``pinned`` for a pinned item. When nothing fits (or
nothing was recalled) the text is empty: no header.

Selection, in order of priority: pinned items and released skills; then, for each
anchor in play in turn, entries anchored there (scope or facet) chosen one at a time by
MMR among that anchor's entries (``recall._fusion.mmr``, redundancy against the entries
already packed on it) until the anchor has ``floor`` packed entries; then everything
else in rank order (an entry on no anchor in play, such as a knowledge passage, takes
part in this last phase only). An item is
wholly in or wholly out; one that does not fit is skipped and the next ones are tried.
The final text is counted whole (and items taken last are dropped while it is over), so
the result never exceeds the budget even when the counter is not additive. Output order:
pinned items and released skills first, then the rest, each group in rank order.
"""

from __future__ import annotations

import functools
import math
import pathlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from predicates.errors import InputError
from recall._embedders import tokenizer_path
from recall._fusion import MmrCandidate, mmr

__all__ = [
    "HEADER",
    "PackEntry",
    "Packed",
    "default_counter",
    "fits_alone",
    "load_tokenizer",
    "pack",
    "render",
    "reserved",
]

#: the header line; ``n`` items packed of ``m`` recalled
HEADER = "Precedents from caveat ({n} of {m}, conditions checked at recall):"
_INDENT = "    "
_SEP = " · "


@dataclass(frozen=True)
class PackEntry:
    """One recalled item as packing sees it: its text, its provenance, its place."""

    id: int
    kind: str  # "episode", "fact" or "skill"
    text: str  # the item's human text; empty: rendered as subject attribute = object
    subject: str
    attribute: str
    object: str  # the rendered value
    scope: tuple[str, str]  # (axis, id)
    facets: tuple[tuple[str, str], ...]
    evidence: tuple[str, ...]
    verified_by: str | None
    recorded_at: datetime  # timezone-aware
    score: float
    pinned: bool = False
    released_skill: bool = False
    confidence: float | None = None
    #: a knowledge passage's ref (``doc:<id>#<fragment>``; model §6): its provenance
    #: line is ``[knowledge <ref>]``, its date and URI; None for an item
    ref: str | None = None

    def __post_init__(self) -> None:
        if self.recorded_at.tzinfo is None or self.recorded_at.utcoffset() is None:
            raise InputError(
                f"recorded_at of item {self.id} must be timezone-aware",
                attribute="recorded_at",
            )

    @property
    def packed_first(self) -> bool:
        """Packed before everything else: pinned, or a released skill."""
        return self.pinned or self.released_skill

    def anchored(self, anchor: tuple[str, str]) -> bool:
        """The entry's scope or one of its facets is ``anchor``."""
        return self.scope == anchor or anchor in self.facets


@dataclass(frozen=True)
class Packed:
    """The packed text, what went in (in output order), what did not (in rank order)."""

    text: str
    ids: tuple[int, ...]
    omitted: tuple[int, ...]
    tokens: int  # the counter's count of ``text`` (0 for the empty text)
    budget: int
    #: core blocks (item ids) packed before everything else, and those that did not fit
    #: (recall/_blocks.py; docs/blocks.md)
    blocks: tuple[int, ...] = ()
    blocks_omitted: tuple[int, ...] = ()
    #: knowledge passages (refs) packed, in output order, and those left out
    knowledge: tuple[str, ...] = ()
    knowledge_omitted: tuple[str, ...] = ()


def _clean(value: str) -> str:
    """``value`` on one line, whitespace runs collapsed."""
    return " ".join(value.split())


def _text_lines(entry: PackEntry) -> list[str]:
    if entry.text.strip():
        lines = [line.rstrip() for line in entry.text.splitlines() if line.strip()]
        lines[0] = lines[0].lstrip()
        return lines
    return [f"{_clean(entry.subject)} {_clean(entry.attribute)} = {_clean(entry.object)}"]


def _provenance(entry: PackEntry) -> str:
    if entry.ref is not None:  # a knowledge passage: its ref, what an item would cite
        return _SEP.join(
            [
                f"[knowledge {_clean(entry.ref)}]",
                entry.recorded_at.astimezone(UTC).date().isoformat(),
            ]
        )
    axis, scope_id = entry.scope
    verifier = _clean(entry.verified_by or "")
    parts = [
        f"id={entry.id}",
        f"subject={_clean(entry.subject)}",
        f"scope={_clean(axis)}:{_clean(scope_id)}",
        "evidence=" + (",".join(_clean(e) for e in entry.evidence) or "none"),
        f"verified by {verifier}" if verifier else "unverified",
        entry.recorded_at.astimezone(UTC).date().isoformat(),
    ]
    if entry.confidence is not None and math.isfinite(entry.confidence):
        parts.append(f"confidence {entry.confidence:.2f}")
    if entry.pinned:
        parts.append("pinned")
    return _SEP.join(parts)


def _body(entry: PackEntry) -> str:
    """A block without its ``[n] `` number."""
    first, *rest = _text_lines(entry)
    marker = "skill: " if entry.kind == "skill" else ""
    lines = [f"{marker}{first}", *(_INDENT + line for line in rest)]
    lines.append(_INDENT + _provenance(entry))
    return "\n".join(lines)


def render(entries: Sequence[PackEntry], *, total: int) -> str:
    """The packed text of ``entries`` in the given order, ``total`` being how many were
    recalled; the empty string (no header) for no entries."""
    if not entries:
        return ""
    header = HEADER.format(n=len(entries), m=total)
    return "\n\n".join([header, *(f"[{n}] {_body(e)}" for n, e in enumerate(entries, 1))])


def _unique(entries: Sequence[PackEntry]) -> list[PackEntry]:
    seen: set[tuple[str | None, int]] = set()  # a passage's id is not an item's
    out: list[PackEntry] = []
    for entry in entries:
        key = (entry.ref, entry.id)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _output_order(unique: Sequence[PackEntry], chosen: Iterable[int]) -> list[PackEntry]:
    """Chosen ranks as entries: pinned and released skills first, each group by rank."""
    return [unique[i] for i in sorted(chosen, key=lambda i: (not unique[i].packed_first, i))]


def reserved(
    entries: Sequence[PackEntry], anchors: Sequence[tuple[str, str]] = (), floor: int = 1
) -> tuple[int, ...]:
    """The ids packing reserves before the rest, in priority order: pinned items and
    released skills (rank order); then, for each anchor in turn, entries anchored there
    chosen by MMR among the anchor's entries (``_floor_picks``) until the anchor has
    ``floor`` reserved entries (entries reserved earlier count: a pinned item anchored
    there fills part of its floor).

    Duplicate ids count once (the first occurrence)."""
    unique = _unique(entries)
    return tuple(unique[i].id for i in _reserved(unique, anchors, floor))


def _relevance(unique: Sequence[PackEntry]) -> list[float]:
    """Each rank's relevance for MMR: its score over the top score, in ``[0, 1]`` and
    made non-increasing along the ranks (as ``_recall._diversify`` does). Pinned items
    and released skills (listed first, never an MMR choice, only ``already``) neither
    set the top nor cap the ranks after them."""
    scores = [max(e.score, 0.0) if math.isfinite(e.score) else 0.0 for e in unique]
    ranked = [x for x, e in zip(scores, unique, strict=True) if not e.packed_first]
    top = max((x for x in ranked if x > 0), default=1.0)
    out: list[float] = []
    rel = 1.0
    for x, e in zip(scores, unique, strict=True):
        if e.packed_first:
            out.append(min(x / top, 1.0))
            continue
        rel = min(rel, x / top)
        out.append(rel)
    return out


def _floor_picks(
    unique: Sequence[PackEntry],
    relevance: Sequence[float],
    anchor: tuple[str, str],
    floor: int,
    taken: Collection[int],
    take: Callable[[int], bool],
) -> list[int]:
    """The ranks taken for ``anchor``'s floor, in the order taken: while fewer than
    ``floor`` of the entries taken so far (``taken``, then these) are anchored there,
    the MMR choice among the anchor's entries not tried yet (redundancy against the
    anchor's entries taken), taken if ``take`` says so (it fits), else passed over."""

    def candidate(i: int) -> MmrCandidate:
        return MmrCandidate(i, relevance[i], None, " ".join(_text_lines(unique[i])))

    on = [i for i in taken if unique[i].anchored(anchor)]
    pool = [i for i, e in enumerate(unique) if i not in taken and e.anchored(anchor)]
    picked: list[int] = []
    while len(on) < floor and pool:
        best = mmr([candidate(i) for i in pool], limit=1, already=[candidate(i) for i in on])
        i = best[0].id
        pool.remove(i)
        if take(i):
            on.append(i)
            picked.append(i)
    return picked


def _reserved(
    unique: Sequence[PackEntry], anchors: Sequence[tuple[str, str]], floor: int
) -> list[int]:
    picked = [i for i, e in enumerate(unique) if e.packed_first]
    relevance = _relevance(unique)
    for anchor in dict.fromkeys(anchors):
        picked += _floor_picks(unique, relevance, anchor, floor, set(picked), lambda i: True)
    return picked


def fits_alone(
    entries: Sequence[PackEntry], ids: Iterable[int], *, budget: int, count: Callable[[str], int]
) -> bool:
    """The items ``ids`` of ``entries``, rendered alone in output order (with the header
    counting every entry), take at most ``budget`` tokens. This is what "fit" means in
    ``pack``'s guarantees."""
    unique = _unique(entries)
    wanted = set(ids)
    text = render(
        _output_order(
            unique, (i for i, e in enumerate(unique) if e.ref is None and e.id in wanted)
        ),
        total=len(unique),
    )
    return (count(text) if text else 0) <= budget


@dataclass
class _Selection:
    """Ranks taken so far, in the order taken; the first ``verified`` were taken on a
    count of their whole text, later ones on an estimate that ``finish`` checks."""

    unique: Sequence[PackEntry]
    budget: int
    count: Callable[[str], int]
    chosen: dict[int, None] = field(default_factory=dict)  # an ordered set
    verified: int = 0
    _bodies: dict[int, str] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def _render(self, ranks: Iterable[int]) -> str:
        return render(_output_order(self.unique, ranks), total=len(self.unique))

    def _part(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self.count(text)
        return self._counts[text]

    def _estimate(self, ranks: Iterable[int]) -> int:
        """The text's count as the sum of its parts' counts (header, numbers, bodies):
        exact for counters additive over whitespace, such as WordPiece."""
        ordered = sorted(ranks, key=lambda i: (not self.unique[i].packed_first, i))
        total = self._part(HEADER.format(n=len(ordered), m=len(self.unique)))
        for n, i in enumerate(ordered, 1):
            if i not in self._bodies:
                self._bodies[i] = _body(self.unique[i])
            total += self._part(f"[{n}]") + self._part(self._bodies[i])
        return total

    def take_whole(self, ranks: Sequence[int]) -> bool:
        """Take ``ranks`` (nothing being taken yet) if their whole text counts within
        budget; whether they were taken."""
        assert not self.chosen
        if not ranks:
            return True
        if self.count(self._render(ranks)) > self.budget:
            return False
        self.chosen = dict.fromkeys(ranks)
        self.verified = len(self.chosen)
        return True

    def take(self, rank: int) -> bool:
        """Take ``rank`` if the estimate with it is within budget; whether it was taken."""
        if rank in self.chosen:
            return True
        if self._estimate([*self.chosen, rank]) > self.budget:
            return False
        self.chosen[rank] = None
        return True

    def finish(self) -> tuple[str, int]:
        """The final text and its count, within budget: while the whole text counts over
        (a counter that is not additive), the rank taken last is dropped."""
        while True:
            text = self._render(self.chosen)
            tokens = self.count(text) if text else 0
            if tokens <= self.budget:
                return text, tokens
            self.chosen.popitem()


def pack(
    entries: Sequence[PackEntry],
    *,
    budget: int,
    count: Callable[[str], int],
    anchors: Sequence[tuple[str, str]] = (),
    floor: int = 1,
) -> Packed:
    """``entries`` (in rank order) rendered within ``budget`` tokens as measured by
    ``count`` on the final text.

    Guarantees: ``count(text) <= budget`` (``tokens`` is that count; the empty text,
    with no header, counts 0); every item is wholly in or wholly out, and ``ids`` and
    ``omitted`` partition the distinct ids (a repeated id counts once, first
    occurrence); pinned items and released skills come first in the text; if the
    ``reserved`` items (pinned, released skills, anchor floors) fit alone they are all
    packed, and if the pinned items and released skills fit alone they are; an item
    that does not fit is skipped and later ones are tried (with a counter additive over
    whitespace, such as WordPiece or a word count, no omitted item would still fit).
    Deterministic for a deterministic ``count``.

    Items are taken one by one on an estimate (the sum of the counts of the header and
    of each block, each distinct part counted once); the whole text is counted at the
    end and, while it is over budget, the item taken last is dropped. The reserved
    items, or else the pinned items and skills, are first tried at once on a count of
    their whole text, and are never dropped by that last step."""
    if budget < 0:
        raise InputError(f"budget must be >= 0, got {budget}", attribute="budget")
    if floor < 0:
        raise InputError(f"floor must be >= 0, got {floor}", attribute="floor")
    unique = _unique(entries)
    sel = _Selection(unique, budget, count)
    firsts = [i for i, e in enumerate(unique) if e.packed_first]
    if not sel.take_whole(_reserved(unique, anchors, floor)):
        if not sel.take_whole(firsts):
            for i in firsts:
                sel.take(i)
        relevance = _relevance(unique)
        for anchor in dict.fromkeys(anchors):
            _floor_picks(unique, relevance, anchor, floor, set(sel.chosen), sel.take)
    for i in range(len(unique)):
        sel.take(i)
    text, tokens = sel.finish()
    order = _output_order(unique, sel.chosen)
    left = [e for i, e in enumerate(unique) if i not in sel.chosen]
    return Packed(
        text=text,
        ids=tuple(e.id for e in order if e.ref is None),
        omitted=tuple(e.id for e in left if e.ref is None),
        tokens=tokens,
        budget=budget,
        knowledge=tuple(e.ref for e in order if e.ref is not None),
        knowledge_omitted=tuple(e.ref for e in left if e.ref is not None),
    )


@functools.cache
def _counter(path: pathlib.Path) -> Callable[[str], int]:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception
        raise InputError(f"cannot load tokenizer {path}: {exc}", attribute="tokenizer") from exc
    # the shipped tokenizer.json truncates and pads to 128: a count needs neither
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def load_tokenizer(path: pathlib.Path) -> Callable[[str], int]:
    """A token counter for the Hugging Face ``tokenizer.json`` at ``path`` (no special
    tokens, no truncation, no padding); loaded once per path."""
    return _counter(pathlib.Path(path).resolve())


def default_counter() -> Callable[[str], int]:
    """The counter of the embedding model's own tokenizer (all-MiniLM-L6-v2), offline."""
    return load_tokenizer(tokenizer_path())
