"""Fusion weights and diversity: pure functions of data (model §6).

Reciprocal rank fusion runs in SQL (``_queries._LIVE_CTES``), with the weights
kept here; MMR runs over the fused list in Python, where its law is tested.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from predicates.errors import InputError

__all__ = [
    "DEFAULT_AXES",
    "FUSION",
    "MMR_LAMBDA",
    "Anchor",
    "Fusion",
    "MmrCandidate",
    "anchor_factor",
    "anchor_terms",
    "anchors_in_play",
    "mmr",
    "similarity",
]

#: MMR's trade-off between relevance and novelty (model §6).
MMR_LAMBDA = 0.7
#: Two results are near-duplicates when their cosine (both embedded) or the Jaccard
#: overlap of their words (otherwise) reaches these. MMR penalises near-duplicates
#: only: an item with none above it keeps its place or moves up, never down
#: (tests/recall/test_fusion.py proves it).
NEAR_COSINE = 0.9
NEAR_JACCARD = 0.6

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Fusion:
    """Reciprocal rank fusion (k = 60) weights per channel, and the bounded boosts.

    The weights were tuned on the tune split of the paraphrase set
    (docs/retrieval.md); each boost multiplies the fused score by a factor in
    ``[1 - b, 1 + b]`` (verification: ``[1, 1 + b]``), so no boost can lift an item
    more than a few ranks and none is a primary term."""

    k: int = 60
    lexical: float = 1.0
    dense: float = 1.0
    entity: float = 1.0
    salience: float = 0.1
    recency: float = 0.05
    verified: float = 0.05
    confidence: float = 0.1
    recency_half_life_s: float = 180 * 86400.0
    #: A facet match counts for this share of the anchor's weight (scope: all of it).
    facet_share: float = 0.5
    #: The most the anchors in play lift a fused score: a factor below ``1 + anchors``
    #: (``anchor_factor``; the tenant policy's ``anchors.boost``).
    anchors: float = 0.5

    def params(self) -> dict[str, float]:
        """The weights as the ranking statement's parameters."""
        return {
            "rrf_k": float(self.k),
            "w_lexical": self.lexical,
            "w_dense": self.dense,
            "w_entity": self.entity,
            "b_salience": self.salience,
            "b_recency": self.recency,
            "b_verified": self.verified,
            "b_confidence": self.confidence,
            "recency_half_life_s": self.recency_half_life_s,
            "facet_share": self.facet_share,
            "b_anchors": self.anchors,
        }


FUSION = Fusion(lexical=0.5, dense=4.0, entity=1.0)


@dataclass(frozen=True)
class Anchor:
    """A scope anchor in play: items anchored (scope) or faceted there gain from it in
    fusion (``anchor_terms``: its ``weight``, a facet ``facet_share`` of it) and get a
    packing floor. Weights are bounded to ``[0.5, 2]``: an anchor tilts the ranking,
    never decides it. ``weight`` None takes the tenant policy's ``anchors.weight``
    (default 1.5). ``origin``: ``request`` (the request named it) or ``default`` (built
    from who asks, ``anchors_in_play``)."""

    axis: str
    id: str
    weight: float | None = None
    origin: Literal["request", "default"] = "request"

    def __post_init__(self) -> None:
        if self.weight is None:
            return
        if not (0.5 <= self.weight <= 2.0) or math.isnan(self.weight):
            raise InputError(
                f"anchor weight {self.weight} out of range: expected 0.5 to 2",
                attribute="anchors.weight",
            )

    def as_json(self, default: float = 1.5) -> dict[str, str | float]:
        """The form the ranking statement reads (``default``: the weight when unsaid)."""
        return {
            "axis": self.axis,
            "id": self.id,
            "w": default if self.weight is None else self.weight,
        }


#: The axes of the default anchor set, in the order a tie in weight keeps (model §6).
DEFAULT_AXES = ("session", "case", "service", "team", "agent", "tenant")


def anchors_in_play(
    requested: Sequence[Anchor],
    mode: Literal["extend", "replace"],
    *,
    weights: Mapping[str, float],
    unsaid: float,
    agent: str | None,
    session: str | None = None,
    case: str | None = None,
    services: Sequence[str] = (),
    team: str | None = None,
) -> tuple[Anchor, ...]:
    """The anchors a recall ranks and packs with, each with its weight (model §6
    "Anchors from the context").

    ``extend``: the default set built from who asks, weights ``weights[axis]`` (the
    tenant policy's ``anchors.defaults``): ``agent:<agent>``, ``session:<session>``
    and ``case:<case>`` when named, ``service:<id>`` for each requested subject
    (canonical ids), ``team:<team>`` when the principal has one, and ``tenant:*``;
    then the request's anchors (weight unsaid: ``unsaid``), a request anchor equal to
    a default replacing its weight. ``replace``: the request's anchors only.
    Highest weight first (ties: the default set's order, then the request's); each
    ``(axis, id)`` once, the last weight given winning."""
    chosen: dict[tuple[str, str], Anchor] = {}
    if mode == "extend":
        named = {
            "session": [session] if session is not None else [],
            "case": [case] if case is not None else [],
            "service": list(dict.fromkeys(services)),
            "team": [team] if team is not None else [],
            "agent": [agent] if agent is not None else [],
            "tenant": ["*"],
        }
        for axis in DEFAULT_AXES:
            for anchor_id in named[axis]:
                chosen[axis, anchor_id] = Anchor(axis, anchor_id, weights[axis], "default")
    for a in requested:
        chosen.pop((a.axis, a.id), None)  # a request anchor replaces a default's weight
        chosen[a.axis, a.id] = replace(a, weight=unsaid if a.weight is None else a.weight)
    ordered = list(chosen.values())
    return tuple(sorted(ordered, key=lambda a: -(a.weight or 0.0)))


def anchor_terms(
    bases: Sequence[float],
    shares: Sequence[Mapping[int, float]],
    weights: Sequence[float],
    *,
    k: int = 60,
) -> list[float]:
    """Each item's anchor term (the Python twin of ``_queries._ANCHOR_TERMS``): the sum,
    over the anchors ``n`` it is on (``shares[i][n]``: 1 for its scope, the facet share
    for a facet), of ``share * weights[n] / (k + r)``, ``r`` its rank (1 + the number of
    items on ``n`` with a higher base score) among the items on ``n`` by ``bases``."""
    out = [0.0] * len(bases)
    for n, w in enumerate(weights):
        on = [i for i, s in enumerate(shares) if n in s]
        for i in on:
            rank = 1 + sum(1 for j in on if bases[j] > bases[i])
            out[i] += shares[i][n] * w / (k + rank)
    return out


def anchor_factor(term: float, boost: float, *, k: int = 60) -> float:
    """The factor an item's anchor term multiplies its fused score by: ``1 + boost *
    term / (term + 1/k)``: 1 without anchors, increasing in the term, always below
    ``1 + boost``. The term of one weight-1 anchor at rank 1 gives about ``1 + boost/2``."""
    return 1 + boost * term / (term + 1.0 / k)


@dataclass(frozen=True)
class MmrCandidate:
    """One fused result: its relevance (higher first), vector (None: not embedded) and
    text, from which similarity is judged."""

    id: int
    relevance: float
    vector: Sequence[float] | None
    text: str


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text))


def similarity(a: MmrCandidate, b: MmrCandidate) -> tuple[float, float]:
    """``(similarity, threshold)``: cosine when both are embedded (vectors are unit
    length), else the Jaccard overlap of their words, with that measure's
    near-duplicate threshold."""
    if a.vector is not None and b.vector is not None:
        return sum(x * y for x, y in zip(a.vector, b.vector, strict=True)), NEAR_COSINE
    wa, wb = _words(a.text), _words(b.text)
    if not wa or not wb:
        return 0.0, NEAR_JACCARD
    return len(wa & wb) / len(wa | wb), NEAR_JACCARD


def mmr(
    candidates: Sequence[MmrCandidate],
    *,
    limit: int,
    lam: float = MMR_LAMBDA,
    already: Sequence[MmrCandidate] = (),
) -> list[MmrCandidate]:
    """One MMR pass: the ``limit`` candidates chosen greedily by ``lam * relevance -
    (1 - lam) * redundancy``, where redundancy is the highest similarity to an
    already chosen candidate *that is a near-duplicate* (zero otherwise).

    ``candidates`` come in fused order, ``relevance`` normalised to ``[0, 1]`` and
    non-increasing. Ties go to the earlier candidate. Guarantee: a candidate with no
    near-duplicate above it is never placed lower than in the input, so one that was
    in the top ``limit`` stays there; near-copies of a higher result move down.

    ``already``: candidates chosen before this pass (packing: the items already packed
    on an anchor); they count for redundancy only, and are neither returned nor
    counted in ``limit``."""
    chosen: list[MmrCandidate] = []
    redundancy = [0.0] * len(candidates)
    for i, c in enumerate(candidates):
        for prior in already:
            sim, near = similarity(c, prior)
            if sim >= near:
                redundancy[i] = max(redundancy[i], sim)
    left = list(range(len(candidates)))
    while left and len(chosen) < limit:
        best = max(
            left,
            key=lambda i: (lam * candidates[i].relevance - (1 - lam) * redundancy[i], -i),
        )
        left.remove(best)
        pick = candidates[best]
        chosen.append(pick)
        for i in left:
            sim, near = similarity(candidates[i], pick)
            if sim >= near:
                redundancy[i] = max(redundancy[i], sim)
    return chosen
