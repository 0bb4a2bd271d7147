"""Lifecycle states and the transition table (model §4), as pure data and functions."""

from __future__ import annotations

from enum import StrEnum

from predicates.errors import IllegalTransition

__all__ = ["CIRCULATING", "TRANSITIONS", "State", "decide"]


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
    "expire_affected": (frozenset({S.ACTIVE}), S.NEEDS_REVERIFICATION),
    "expire_unaffected": (frozenset({S.ACTIVE}), S.VERIFY_ON_NEXT_USE),
    "check_passed": (frozenset({S.VERIFY_ON_NEXT_USE}), S.ACTIVE),
    "check_failed": (frozenset({S.VERIFY_ON_NEXT_USE}), S.NEEDS_REVERIFICATION),
    "demote": (frozenset({S.ACTIVE, S.VERIFY_ON_NEXT_USE}), S.NEEDS_REVERIFICATION),
    "lineage_reopen": (CIRCULATING, S.NEEDS_REVERIFICATION),
    "refute": (_ALL - {S.REVOKED, S.REFUTED, S.SUPERSEDED}, S.REFUTED),
    "revoke": (_ALL - {S.REVOKED}, S.REVOKED),
    "archive": (frozenset({S.CASE, S.ACTIVE, S.NEEDS_REVERIFICATION}), S.ARCHIVED),
}


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
