"""The SME's reads over HTTP: the review queue, an item's dossier and an action's preview.
The SME pages (``caveat.web``) render the same use cases as HTML."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from caveat import app as use
from caveat.answers._answers import DossierOut, PreviewOut, ReviewOut
from caveat.api._deps import Acting, typed
from caveat.app.views import dossier_view, preview_view, review_view

__all__ = ["router"]

router = APIRouter()

Action = Literal["verify", "promote", "graduate", "drop", "refute", "revoke", "redact", "forget"]


@router.get("/v1/review", tags=["review"], **typed(ReviewOut))
def review_route(who: Acting) -> Any:
    """The review queue: shadow items, re-opened items, contested keys, promotion
    candidates and the last week's refusals by code, all as the caller may read them."""
    rt, actor = who
    return review_view(use.review_queue(rt, actor))


@router.get("/v1/items/{item_id}/dossier", tags=["review"], **typed(DossierOut))
def dossier_route(who: Acting, item_id: int) -> Any:
    """An item with its conditions now, evidence, confidence, citations, lineage, history."""
    rt, actor = who
    return dossier_view(use.item_dossier(rt, actor, item_id))


@router.get("/v1/items/{item_id}/preview/{action}", tags=["review"], **typed(PreviewOut))
def preview_route(who: Acting, item_id: int, action: Action) -> Any:
    """What an SME action would do to the item, before it is done (a read)."""
    rt, actor = who
    return preview_view(use.action_preview(rt, actor, item_id, action))
