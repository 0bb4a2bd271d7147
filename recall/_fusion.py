"""Fusion weights and diversity: pure functions of data (model §6).

Reciprocal rank fusion runs in SQL (``_queries._LIVE_CTES``), with the weights
kept here; MMR runs over the fused list in Python, where its law is tested.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from predicates.errors import InputError

__all__ = [
    "FUSION",
    "MMR_LAMBDA",
    "Anchor",
    "Fusion",
    "MmrCandidate",
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
        }


FUSION = Fusion(lexical=0.5, dense=4.0, entity=1.0)


@dataclass(frozen=True)
class Anchor:
    """A scope anchor the request weights: items anchored (scope) or faceted there rank
    with ``weight`` (facets: ``facet_share`` of the step from 1) and get a packing floor.
    Weights are bounded to ``[0.5, 2]``: an anchor tilts the ranking, never decides it.
    ``weight`` None takes the tenant policy's ``anchors.weight`` (default 1.5)."""

    axis: str
    id: str
    weight: float | None = None

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
    candidates: Sequence[MmrCandidate], *, limit: int, lam: float = MMR_LAMBDA
) -> list[MmrCandidate]:
    """One MMR pass: the ``limit`` candidates chosen greedily by ``lam * relevance -
    (1 - lam) * redundancy``, where redundancy is the highest similarity to an
    already chosen candidate *that is a near-duplicate* (zero otherwise).

    ``candidates`` come in fused order, ``relevance`` normalised to ``[0, 1]`` and
    non-increasing. Ties go to the earlier candidate. Guarantee: a candidate with no
    near-duplicate above it is never placed lower than in the input, so one that was
    in the top ``limit`` stays there; near-copies of a higher result move down."""
    chosen: list[MmrCandidate] = []
    redundancy = [0.0] * len(candidates)
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
