"""The routes of tenant policy (model §7.1; docs/http.md, docs/policy.md): read it, now or
as of an instant, and change keys of it (admin), all or nothing, with a dry run that
previews what the change would do."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.app._input import instant
from caveat.app._policy import (
    PolicyChangeOut,
    PolicyChangesIn,
    PolicyOut,
    change_view,
    policy_view,
)

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/policy", tags=["policy"], **typed(PolicyOut))
def policy_show_route(
    who: Acting,
    as_of: Annotated[
        str | None,
        Query(description="The policy in force then (ISO 8601; UTC without an offset)."),
    ] = None,
) -> Any:
    """The tenant's policy: the version in force now (or at ``as_of``), who set it and
    when, the document, and every key with its value, default and type (any principal
    that may read; 404 for an instant before the tenant's first policy)."""
    rt, actor = who
    return policy_view(use.policy_show(rt, actor, as_of=instant(as_of, "as_of")))


@router.put("/v1/policy", tags=["policy"], **typed(PolicyChangeOut))
def policy_set_route(
    who: Acting,
    body: PolicyChangesIn,
    dry_run: Annotated[
        bool, Query(description="Only preview what the change would do; store nothing.")
    ] = False,
) -> Any:
    """Change policy keys (admin), all or nothing: a bad value is 422 problem details
    naming the ``key``, what it ``expected`` and what was ``given``, and nothing is
    stored. Each changed key is one ``policy_set`` audit row and the whole a new policy
    version; the answer previews what the change does to the shadow items and the
    promotion candidates (with ``dry_run``, that preview alone)."""
    rt, actor = who
    return change_view(use.policy_set(rt, actor, body.as_changes(), dry_run=dry_run))
