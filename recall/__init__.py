"""Recall: the six gates, ranking, explain, as-of, and the context guard."""

from recall._diff import BeliefDiff, DiffEntry, diff
from recall._guard import ContextCheck, check_context, record_context
from recall._recall import (
    GATES,
    ConditionValue,
    RecalledItem,
    RecallRequest,
    RecallResult,
    UseRecord,
    Withheld,
    condition_values,
    recall,
    record_use,
)

__all__ = [
    "GATES",
    "BeliefDiff",
    "ConditionValue",
    "ContextCheck",
    "DiffEntry",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "UseRecord",
    "Withheld",
    "check_context",
    "condition_values",
    "diff",
    "recall",
    "record_context",
    "record_use",
]
