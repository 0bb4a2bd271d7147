"""The client's error tree: the server's (``predicates.errors``, ``caveat.errors``),
class for class, rebuilt from a refusal's problem details, plus what only a client
meets (the server could not be reached, or answered what the client cannot read)::

    CaveatError                      code, status, detail, extra (the problem's other fields)
    ├── InputError                   invalid_input, text_invalid, proposal_invalid, ...
    │   ├── PredicateSyntaxError     condition_unparsable
    │   ├── PredicateTypeError       condition_type_mismatch / condition_unknown_attribute
    │   ├── ValueTypeError           fact_type_mismatch
    │   ├── UnknownAttribute         fact_unknown_attribute
    │   ├── DocumentError            document_invalid (source, line, column)
    │   ├── ScenarioError            scenario_invalid
    │   └── EventInFuture            event_in_future
    ├── SubjectUnresolved            subject_unresolved
    ├── GateRejection                a write-gate reason code (evidence_missing, ...)
    ├── NotFound                     not_found
    ├── Conflict                     conflict (and content_type_in_use)
    ├── Forbidden                    forbidden
    ├── Unauthenticated              unauthenticated
    ├── IllegalTransition            illegal_transition
    ├── PromotionNeedsConditions     promotion_needs_conditions
    ├── CaseNotOpen                  case_not_open
    ├── SkillTestRequired            skill_test_required
    ├── NotInContext                 not_in_context
    ├── DatabaseError                database_unavailable
    │   (the client's own:)
    ├── TransportError               transport: no answer (refused, reset, timed out)
    └── UnexpectedAnswer             unexpected_answer: an answer that is not what the route
                                     documents (not JSON, not its model, not a problem)

A refusal's class is chosen by its ``code`` (``CODES``); a code the client does not
know yet (a newer server) gets the class of its HTTP status, so ``except NotFound``
still catches it. tests/caveat/test_client.py fails when the server's tree or its code
table gains something this module does not mirror.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

__all__ = [
    "CODES",
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
    "SubjectUnresolved",
    "TransportError",
    "Unauthenticated",
    "UnexpectedAnswer",
    "UnknownAttribute",
    "ValueTypeError",
    "from_problem",
]

#: The fields of every problem; the rest of a problem is the error's ``extra``.
_PROBLEM_FIELDS = frozenset({"type", "title", "status", "detail", "code"})


class CaveatError(Exception):
    """Root of every error the client raises: the refusal's stable ``code``, its HTTP
    ``status`` (0: no answer), its ``detail`` (one line) and the problem's other fields
    (``extra``: a document error's source, line and column, a policy key's ...)."""

    code: str = "error"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        status: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        self.status = status
        self.extra: dict[str, Any] = dict(extra or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


class InputError(CaveatError):
    code = "invalid_input"


class PredicateSyntaxError(InputError):
    code = "condition_unparsable"


class PredicateTypeError(InputError):
    code = "condition_type_mismatch"


class ValueTypeError(InputError):
    code = "fact_type_mismatch"


class UnknownAttribute(InputError):
    code = "fact_unknown_attribute"


class DocumentError(InputError):
    code = "document_invalid"


class ScenarioError(InputError):
    code = "scenario_invalid"


class EventInFuture(InputError):
    code = "event_in_future"


class SubjectUnresolved(CaveatError):
    code = "subject_unresolved"


class GateRejection(CaveatError):
    code = "rejected"


class NotFound(CaveatError):
    code = "not_found"


class Conflict(CaveatError):
    code = "conflict"


class Forbidden(CaveatError):
    code = "forbidden"


class Unauthenticated(CaveatError):
    code = "unauthenticated"


class IllegalTransition(CaveatError):
    code = "illegal_transition"


class PromotionNeedsConditions(CaveatError):
    code = "promotion_needs_conditions"


class CaseNotOpen(CaveatError):
    code = "case_not_open"


class SkillTestRequired(CaveatError):
    code = "skill_test_required"


class NotInContext(CaveatError):
    code = "not_in_context"


class DatabaseError(CaveatError):
    code = "database_unavailable"


class TransportError(CaveatError):
    """No answer: the connection was refused or reset, or the request timed out."""

    code = "transport"


class UnexpectedAnswer(CaveatError):
    """An answer the route does not document: not JSON, not its model, or an error
    status without problem details."""

    code = "unexpected_answer"


_CLASSES: tuple[type[CaveatError], ...] = (
    InputError,
    PredicateSyntaxError,
    PredicateTypeError,
    ValueTypeError,
    UnknownAttribute,
    DocumentError,
    ScenarioError,
    EventInFuture,
    SubjectUnresolved,
    NotFound,
    Conflict,
    Forbidden,
    Unauthenticated,
    IllegalTransition,
    PromotionNeedsConditions,
    CaseNotOpen,
    SkillTestRequired,
    NotInContext,
    DatabaseError,
)

#: Every code the server's table (``caveat.errors.STATUS``) knows, and the class a
#: refusal with it is raised as: the class whose own code it is; the write gate's reason
#: codes a ``GateRejection``; other bad input an ``InputError``.
CODES: MappingProxyType[str, type[CaveatError]] = MappingProxyType(
    {
        **{c.code: c for c in _CLASSES},
        "condition_unknown_attribute": PredicateTypeError,
        "text_invalid": InputError,
        "proposal_invalid": InputError,
        "method_not_allowed": InputError,
        "too_large": InputError,
        "writes_disabled": GateRejection,
        "axis_not_writable": GateRejection,
        "content_type_in_use": Conflict,
        "skill_version_frozen": GateRejection,
        "lineage_revoked": GateRejection,
        "lineage_refuted": GateRejection,
        "duplicate_no_change": GateRejection,
        "anchor_unresolved": GateRejection,
        "condition_unresolved_entity": GateRejection,
        "evidence_missing": GateRejection,
        "evidence_unresolved": GateRejection,
        "object_is_rule": GateRejection,
        "object_type_mismatch": GateRejection,
        "content_type_unknown": GateRejection,
        "valid_time_empty": GateRejection,
        "rejected": GateRejection,
        "extractor_not_configured": CaveatError,
    }
)

#: A code this client does not know: the class of its HTTP status.
_BY_STATUS: dict[int, type[CaveatError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    503: DatabaseError,
}


def from_problem(status: int, problem: dict[str, Any]) -> CaveatError:
    """The error a refusal's problem details stand for (``status``: the answer's)."""
    code = str(problem.get("code") or "error")
    cls = CODES.get(code) or _BY_STATUS.get(status) or CaveatError
    extra = {k: v for k, v in problem.items() if k not in _PROBLEM_FIELDS}
    return cls(str(problem.get("detail") or ""), code=code, status=status, extra=extra)
