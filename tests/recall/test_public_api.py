"""The public surface of recall is pinned: changing it is a decision."""

from __future__ import annotations

import inspect
from pathlib import Path

import recall

EXPECTED = {
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
}
#: The names of knowledge beside memory (model §6), documented where recall is.
KNOWLEDGE = {"RecalledPassage", "admits_passage", "merge_sources"}


def test_public_surface_is_pinned() -> None:
    assert set(recall.__all__) == EXPECTED
    for name in EXPECTED:
        obj = getattr(recall, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), name


def test_the_knowledge_names_are_documented() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    text = (docs / "recall.md").read_text() + (docs / "knowledge.md").read_text()
    for name in KNOWLEDGE:
        assert f"recall.{name}" in text, name
