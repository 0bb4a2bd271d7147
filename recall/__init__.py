"""Recall: the six gates, ranking, explain, as-of, and the context guard."""

from recall._diff import BeliefDiff, DiffEntry, diff
from recall._embed import embed_passages, embed_pending, enqueue_missing, queue_depth
from recall._embedders import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OnnxMiniLMEmbedder,
    make_embedder,
    tokenizer_path,
)
from recall._fusion import FUSION, Anchor, Fusion
from recall._guard import ContextCheck, check_context, record_context
from recall._packing import Packed, PackEntry, default_counter, load_tokenizer, pack
from recall._recall import (
    GATES,
    SOURCES,
    ConditionValue,
    RecalledItem,
    RecalledPassage,
    RecallRequest,
    RecallResult,
    UseRecord,
    Withheld,
    admits_passage,
    condition_values,
    merge_sources,
    needs,
    recall,
    record_use,
)

__all__ = [
    "FUSION",
    "GATES",
    "SOURCES",
    "Anchor",
    "BeliefDiff",
    "ConditionValue",
    "ContextCheck",
    "DiffEntry",
    "Embedder",
    "Fusion",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "PackEntry",
    "Packed",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "RecalledPassage",
    "UseRecord",
    "Withheld",
    "admits_passage",
    "check_context",
    "condition_values",
    "default_counter",
    "diff",
    "embed_passages",
    "embed_pending",
    "enqueue_missing",
    "load_tokenizer",
    "make_embedder",
    "merge_sources",
    "needs",
    "pack",
    "queue_depth",
    "recall",
    "record_context",
    "record_use",
    "tokenizer_path",
]
