"""What every route depends on: the bearer token, turned into the tenant's runtime
and the actor it stands for."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

import claims
from caveat import app as use
from predicates.errors import Unauthenticated

__all__ = ["Acting", "acting", "typed"]

_bearer = HTTPBearer(auto_error=False)


def acting(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> tuple[use.Runtime, claims.Actor]:
    """The tenant's runtime and the actor a bearer token stands for; 401 otherwise."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated("a bearer API token is required")
    runtime: use.Runtime = request.app.state.runtime
    scoped, actor = use.authenticate(runtime, credentials.credentials)
    background = getattr(request.app.state, "background", None)
    if background is not None:
        background.touch(scoped.tenant)
    return scoped, actor


Acting = Annotated[tuple[use.Runtime, claims.Actor], Depends(acting)]


def typed(model: Any, status: int = 200) -> dict[str, Any]:
    """A route's answer documented as ``model`` (its named schema in /openapi.json), the
    view's JSON form sent as it is (``caveat.answers``: an answer may carry more).

    The response model is ``Any``, not None: FastAPI then writes the answer to JSON in
    pydantic's core (validating ``Any`` takes nothing), where with None it walks every
    value in Python first (``jsonable_encoder``: as much time as a small recall's read,
    docs/performance.md)."""
    return {"response_model": Any, "responses": {status: {"model": model, "description": "OK"}}}
