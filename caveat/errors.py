"""The error tree, re-exported for the delivery surfaces (see ``predicates.errors``), and
the one table of what each code means at a door: its HTTP status and its CLI exit
status (``STATUS``). Replay's expectations name the codes themselves; the write
gate's codes know their gate in ``claims.REASON_GATES``."""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

from caveat.db import DatabaseError
from claims import SkillTestRequired
from lifecycle import NotInContext
from predicates.errors import (
    CaseNotOpen,
    CaveatError,
    Conflict,
    DocumentError,
    EventInFuture,
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
    Unauthenticated,
    UnknownAttribute,
    ValueTypeError,
)

__all__ = [
    "STATUS",
    "CaseNotOpen",
    "CaveatError",
    "Conflict",
    "DatabaseError",
    "DocumentError",
    "EventInFuture",
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
    "Status",
    "SubjectUnresolved",
    "Unauthenticated",
    "UnknownAttribute",
    "ValueTypeError",
    "status_of",
]


class Status(NamedTuple):
    """What a code is at a door: the HTTP status of its problem details, and the CLI's
    exit status (1 a refusal, 2 bad input)."""

    http: int
    exit: int


_INPUT = Status(422, 2)
_REFUSED = Status(422, 1)  # a well-formed request the store refuses as filed
_FORBIDDEN = Status(403, 1)
_NOT_FOUND = Status(404, 1)
_CONFLICT = Status(409, 1)

#: Every code caveat raises, with its status at the doors. A test checks that every
#: code of the error tree and every write reason code has an entry.
STATUS = MappingProxyType(
    {
        # bad input: usage, files, documents, values (InputError and its family)
        "invalid_input": _INPUT,
        "condition_unparsable": _INPUT,
        "condition_type_mismatch": _INPUT,
        "condition_unknown_attribute": _INPUT,
        "fact_type_mismatch": _INPUT,
        "fact_unknown_attribute": _INPUT,
        "document_invalid": _INPUT,
        "scenario_invalid": _INPUT,
        "text_invalid": _INPUT,
        "proposal_invalid": _INPUT,
        "event_in_future": _INPUT,
        # who may do what
        "forbidden": _FORBIDDEN,
        "writes_disabled": _FORBIDDEN,
        "axis_not_writable": _FORBIDDEN,
        "unauthenticated": Status(401, 1),
        # what the caller may not see is not there
        "not_found": _NOT_FOUND,
        "subject_unresolved": _NOT_FOUND,
        # the state of the store refuses it
        "conflict": _CONFLICT,
        "illegal_transition": _CONFLICT,
        "case_not_open": _CONFLICT,
        "promotion_needs_conditions": _CONFLICT,
        "not_in_context": _CONFLICT,
        "skill_test_required": _CONFLICT,
        "skill_version_frozen": _CONFLICT,
        "lineage_revoked": _CONFLICT,
        "lineage_refuted": _CONFLICT,
        "content_type_in_use": _CONFLICT,  # a registry load that removes a used one
        "duplicate_no_change": Status(200, 0),  # not an error: nothing to write
        # the write gate refuses a claim as filed
        "anchor_unresolved": _REFUSED,
        "condition_unresolved_entity": _REFUSED,
        "evidence_missing": _REFUSED,
        "evidence_unresolved": _REFUSED,
        "object_is_rule": _REFUSED,
        "object_type_mismatch": _REFUSED,
        "content_type_unknown": _REFUSED,
        "valid_time_empty": _REFUSED,
        "rejected": _REFUSED,
        # the database
        "database_unavailable": Status(503, 1),
        # the server has no extractor for agent turns (CAVEAT_EXTRACTOR_URL unset)
        "extractor_not_configured": Status(503, 1),
        # the HTTP framework's own refusals (caveat.api)
        "method_not_allowed": Status(405, 2),
        "too_large": Status(413, 2),
    }
)


def status_of(exc: CaveatError) -> Status:
    """The status of ``exc``'s code (an unlisted code: its class's, else a refusal)."""
    found = STATUS.get(exc.code)
    if found is not None:
        return found
    return _INPUT if isinstance(exc, InputError) else _REFUSED
