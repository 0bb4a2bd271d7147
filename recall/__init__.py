"""Recall: the six gates, ranking, explain, as-of, and the context guard."""

from recall._guard import ContextCheck, check_context
from recall._recall import (
    GATES,
    ConditionValue,
    RecalledItem,
    RecallRequest,
    RecallResult,
    Withheld,
    condition_values,
    recall,
)

__all__ = [
    "GATES",
    "ConditionValue",
    "ContextCheck",
    "RecallRequest",
    "RecallResult",
    "RecalledItem",
    "Withheld",
    "check_context",
    "condition_values",
    "recall",
]
