"""The SME pages' reads that have a route of their own: the transitions made inside a
window (what "What changed" lists beside its diff, docs/sme.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field, JsonValue

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.app._input import instant
from caveat.app._review import changes_window, transition_view

__all__ = ["router"]

router = APIRouter()


class TransitionOut(BaseModel):
    """One state transition of an item, from its audit row."""

    seq: int = Field(description="The audit row's chain position.")
    at: datetime
    item: int
    subject: str
    attribute: str
    from_: str | None = Field(alias="from", description="The state before (null: new).")
    to: str = Field(description="The state after.")
    actor: str
    reason: str | None
    cause: dict[str, JsonValue] = Field(description="What caused it (an event, a case, a check).")


@router.get("/v1/transitions", tags=["review"], **typed(list[TransitionOut]))
def transitions_route(
    who: Acting,
    from_: Annotated[
        str | None, Query(alias="from", description="ISO 8601; UTC without an offset.")
    ] = None,
    to: Annotated[str | None, Query(description="ISO 8601; UTC without an offset.")] = None,
    subject: Annotated[
        str | None, Query(description="A case-insensitive part of the subject's name.")
    ] = None,
) -> Any:
    """The state transitions made between two instants (both included; default: the
    last seven days up to now), oldest first, of the items the caller may read."""
    rt, actor = who
    start, end = changes_window(instant(from_, "from"), instant(to, "to"), use.utcnow())
    rows = use.transitions(rt, actor, from_=start, to=end, subject=subject)
    return [transition_view(r) for r in rows]
