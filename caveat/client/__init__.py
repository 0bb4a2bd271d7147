"""A Python client of caveat's HTTP API (docs/client.md): ``Client`` (over
``httpx.Client``) and ``AsyncClient`` (over ``httpx.AsyncClient``) with one surface,
every route of ``/openapi.json`` as a method answering the server's own models
(``caveat.answers``), refusals raised as the error tree below with their code,
paginated routes as ``iter_*`` iterators, the consistency token carried from a write
to the reads after it, and the context guard (``client.context(case)``).

It imports httpx and pydantic, nothing of the server (an import-linter contract and
tests/caveat/test_client.py check it).
"""

from __future__ import annotations

from caveat.client._client import TOKEN_HEADER, AsyncClient, Client
from caveat.client._errors import (
    CODES,
    CaseNotOpen,
    CaveatError,
    Conflict,
    DatabaseError,
    DocumentError,
    EventInFuture,
    Forbidden,
    GateRejection,
    IllegalTransition,
    InputError,
    NotFound,
    NotInContext,
    PredicateSyntaxError,
    PredicateTypeError,
    PromotionNeedsConditions,
    ScenarioError,
    SkillTestRequired,
    SubjectUnresolved,
    TransportError,
    Unauthenticated,
    UnexpectedAnswer,
    UnknownAttribute,
    ValueTypeError,
)
from caveat.client._guard import AsyncContext, Context

__all__ = [
    "CODES",
    "TOKEN_HEADER",
    "AsyncClient",
    "AsyncContext",
    "CaseNotOpen",
    "CaveatError",
    "Client",
    "Conflict",
    "Context",
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
]
