"""Lifecycle states and the transition table (model §4), as pure data and functions.

``docs/lifecycle.md`` shows this table and a diagram generated from it by
``python -m lifecycle.diagram``; a test keeps the two identical.
"""

from __future__ import annotations

from enum import StrEnum

from predicates.errors import IllegalTransition

__all__ = [
    "ACTION_TRIGGERS",
    "CIRCULATING",
    "EVENT_ACTIONS",
    "SYSTEM_ACTOR",
    "TRANSITIONS",
    "State",
    "decide",
]

#: The actor recorded for transitions the engine makes by rule (events, TTLs, thresholds).
SYSTEM_ACTOR = "caveat:lifecycle"


class State(StrEnum):
    """Where an item is in its life."""

    CASE = "case"
    SHADOW = "shadow"
    ACTIVE = "active"
    NEEDS_REVERIFICATION = "needs_reverification"
    VERIFY_ON_NEXT_USE = "verify_on_next_use"
    SUPERSEDED = "superseded"
    REFUTED = "refuted"
    REVOKED = "revoked"
    ARCHIVED = "archived"


S = State
_ALL = frozenset(State)
#: States in which an item still takes part in recall (in some scope).
CIRCULATING = frozenset({S.CASE, S.SHADOW, S.ACTIVE, S.VERIFY_ON_NEXT_USE})

#: action -> (states it is defined from, state it leads to)
TRANSITIONS: dict[str, tuple[frozenset[State], State]] = {
    "promote_shadow": (frozenset({S.CASE}), S.SHADOW),
    "graduate": (frozenset({S.SHADOW}), S.ACTIVE),
    "drop": (frozenset({S.SHADOW}), S.CASE),
    "reverify": (frozenset({S.NEEDS_REVERIFICATION}), S.ACTIVE),
    "expire_affected": (frozenset({S.ACTIVE, S.VERIFY_ON_NEXT_USE}), S.NEEDS_REVERIFICATION),
    "expire_unaffected": (frozenset({S.ACTIVE}), S.VERIFY_ON_NEXT_USE),
    "expire_ttl": (frozenset({S.ACTIVE}), S.VERIFY_ON_NEXT_USE),
    "check_passed": (frozenset({S.VERIFY_ON_NEXT_USE}), S.ACTIVE),
    "check_failed": (frozenset({S.VERIFY_ON_NEXT_USE}), S.NEEDS_REVERIFICATION),
    "demote": (frozenset({S.ACTIVE, S.VERIFY_ON_NEXT_USE}), S.NEEDS_REVERIFICATION),
    "lineage_reopen": (CIRCULATING, S.NEEDS_REVERIFICATION),
    "refute": (_ALL - {S.REVOKED, S.REFUTED, S.SUPERSEDED}, S.REFUTED),
    "revoke": (_ALL - {S.REVOKED}, S.REVOKED),
    "archive": (frozenset({S.CASE, S.ACTIVE, S.NEEDS_REVERIFICATION}), S.ARCHIVED),
}

#: Who or what performs each action (rendered into docs/lifecycle.md).
ACTION_TRIGGERS: dict[str, str] = {
    "promote_shadow": "SME `promote to: shadow` (needs a required condition)",
    "graduate": "shadow thresholds met when a case closes, or SME `promote to: active`",
    "drop": "shadow agreement below threshold when a case closes, or SME `drop`",
    "reverify": "SME `verify`",
    "expire_affected": "event: the judge or the rules say the item is affected",
    "expire_unaffected": "event: matched, judged not affected",
    "expire_ttl": "secondary TTL of a `permission_refusal` item ran out",
    "check_passed": "verify-on-next-use check at context entry: every condition decided",
    "check_failed": "verify-on-next-use check at context entry: anything else",
    "demote": "case closed with a counter signal on a decisive or contributing citation",
    "lineage_reopen": "an ancestor was revoked or refuted",
    "refute": "SME `refute`",
    "revoke": "SME `revoke`",
    "archive": "unused episode past the tenant horizon, rolled up into a semantic item, "
    "or working memory past its `working_memory_ttl` (sweep)",
}

#: Actions an event may cause: none of them leads to ``active``.
EVENT_ACTIONS = frozenset({"expire_affected", "expire_unaffected"})


def decide(action: str, current: str) -> State:
    """The state ``action`` leads to from ``current``; ``IllegalTransition`` if undefined."""
    try:
        sources, target = TRANSITIONS[action]
    except KeyError:
        raise IllegalTransition(f"unknown lifecycle action {action!r}", action=action) from None
    if State(current) not in sources:
        allowed = ", ".join(sorted(sources))
        raise IllegalTransition(
            f"{action.replace('_', ' ')} is not defined from state {current!r} "
            f"(only from {allowed})",
            action=action,
            state=current,
        )
    return target
