"""``POST /v1/forget`` and ``POST /v1/forget/preview``: real erasure (model §7) over
HTTP, the operator's (admin). Each validates, calls one ``caveat.app`` function and
renders."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from caveat import app as use
from caveat.api._deps import Acting, typed

__all__ = ["router"]

router = APIRouter()


class ForgetTargetIn(BaseModel):
    """Exactly one of ``items``, ``subject`` or ``anchor`` (``axis:id``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    items: list[int] = Field(default_factory=list)
    subject: str | None = None
    anchor: str | None = None


class ForgetIn(ForgetTargetIn):
    """What to erase, and why (kept in the erasure record)."""

    reason: str = Field(min_length=1)


@router.post("/v1/forget/preview", tags=["review"], **typed(use.ErasurePlanOut))
def forget_preview_route(who: Acting, body: ForgetTargetIn) -> Any:
    """What ``POST /v1/forget`` would erase (admin): item rows with their history, audit
    rows whose detail would go, per subject and anchor. Changes nothing."""
    rt, actor = who
    plan = use.forget_preview(rt, actor, items=body.items, subject=body.subject, anchor=body.anchor)
    return use.forget_plan_view(plan)


@router.post("/v1/forget", tags=["review"], **typed(use.ForgetOut))
def forget_route(who: Acting, body: ForgetIn) -> Any:
    """Erase items, a subject's or an anchor's, for good (admin): content, embeddings,
    derived rows and the detail of the audit rows about them; then vacuum. The audit
    chain still verifies."""
    rt, actor = who
    done = use.forget(
        rt, actor, items=body.items, subject=body.subject, anchor=body.anchor, reason=body.reason
    )
    return use.forget_done_view(done)
