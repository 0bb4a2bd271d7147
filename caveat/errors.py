"""The error tree, re-exported for the delivery surfaces (see ``predicates.errors``)."""

from __future__ import annotations

from caveat.db import DatabaseError
from claims import SkillTestRequired
from lifecycle import NotInContext
from predicates.errors import (
    CaseNotOpen,
    CaveatError,
    Conflict,
    DocumentError,
    Forbidden,
    GateRejection,
    IllegalTransition,
    InputError,
    NotFound,
    PredicateSyntaxError,
    PredicateTypeError,
    PromotionNeedsConditions,
    ScenarioError,
    SubjectUnresolved,
    UnknownAttribute,
    ValueTypeError,
)

__all__ = [
    "CaseNotOpen",
    "CaveatError",
    "Conflict",
    "DatabaseError",
    "DocumentError",
    "Forbidden",
    "GateRejection",
    "IllegalTransition",
    "InputError",
    "NotFound",
    "NotInContext",
    "PredicateSyntaxError",
    "PredicateTypeError",
    "PromotionNeedsConditions",
    "ScenarioError",
    "SkillTestRequired",
    "SubjectUnresolved",
    "UnknownAttribute",
    "ValueTypeError",
]
