"""Recall: the six gates, ranking, explain, as-of, and the context guard."""

from recall._diff import BeliefDiff, DiffEntry, diff
from recall._embed import embed_pending, enqueue_missing, queue_depth
from recall._embedders import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    make_embedder,
    tokenizer_path,
)
from recall._fusion import FUSION, Anchor, Fusion
from recall._guard import ContextCheck, check_context, record_context
from recall._packing import Packed, PackEntry, default_counter, load_tokenizer, pack
from recall._recall import (
    GATES,
    ConditionValue,
    RecalledItem,
    RecallRequest,
    RecallResult,
    UseRecord,
    Withheld,
    condition_values,
    needs,
    recall,
    record_use,
)

__all__ = [
    "FUSION",
    "GATES",
    "Anchor",
    "BeliefDiff",
    "ConditionValue",
    "ContextCheck",
    "DiffEntry",
    "Embedder",
    "Fusion",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "PackEntry",
    "Packed",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "UseRecord",
    "Withheld",
    "check_context",
    "condition_values",
    "default_counter",
    "diff",
    "embed_pending",
    "enqueue_missing",
    "load_tokenizer",
    "make_embedder",
    "needs",
    "pack",
    "queue_depth",
    "recall",
    "record_context",
    "record_use",
    "tokenizer_path",
]
