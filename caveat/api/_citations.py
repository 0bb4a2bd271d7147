"""The routes of citations and enforcement levels: ``GET /v1/citations`` (filtered,
keyset-paged, as the caller may read) and ``POST /v1/items/{item_id}/enforcement``
(an SME sets a skill's level). ``POST /v1/items/{item_id}/cite`` is with the case's
routes (``caveat.api._app``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import Field

import lifecycle
from caveat import app as use
from caveat.answers._answers import CitationPage, EnforcementOut
from caveat.api._deps import Acting, typed
from caveat.app._input import instant
from caveat.app._requests import Strict
from caveat.app.views import citation_view, enforcement_view

__all__ = ["router"]

router = APIRouter()


class EnforcementIn(Strict):
    level: Literal["advisory", "recommended", "required"]
    reason: str = Field(min_length=1, description="Why (audited, shown in the dossier).")


@router.post("/v1/items/{item_id}/enforcement", tags=["review"], **typed(EnforcementOut))
def enforcement_route(who: Acting, item_id: int, body: EnforcementIn) -> Any:
    """Set a skill's enforcement level (SME): at or above the tenant's
    `skill_enforcement_threshold` the skill binds, and a citation that did not follow
    it is a `violation`. One audit row; citations already made keep their compliance."""
    rt, actor = who
    return enforcement_view(
        use.set_enforcement(rt, actor, item_id, level=body.level, reason=body.reason)
    )


Influence = Literal["decisive", "contributing", "considered", "ignored"]
Compliance = Literal["na", "complied", "discretion", "violation"]


@router.get("/v1/citations", tags=["cases"], **typed(CitationPage))
def citations_route(
    who: Acting,
    case: str | None = None,
    item: int | None = None,
    influence: Influence | None = None,
    compliance: Compliance | None = None,
    since: Annotated[
        str | None, Query(description="Cited at or after (ISO 8601; UTC without an offset).")
    ] = None,
    until: Annotated[
        str | None, Query(description="Cited before (ISO 8601; UTC without an offset).")
    ] = None,
    cursor: Annotated[str | None, Query(description="From the previous page's `next`.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    """Citations, oldest first, filtered by case, item, influence, compliance and when
    they were made, of the items the caller may read (what it may not read is neither
    listed nor counted); a keyset page, `next` the cursor of the following one."""
    rt, actor = who
    kept = lifecycle.CitationFilter(
        case, item, influence, compliance, instant(since, "since"), instant(until, "until")
    )
    page = use.list_citations(rt, actor, kept, cursor=cursor, limit=limit)
    return {"items": [citation_view(c) for c in page.items], "next": page.next}
