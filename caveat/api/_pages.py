"""The SME pages' reads that have a route of their own: the transitions made inside a
window (what "What changed" lists beside its diff, docs/sme.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from caveat import app as use
from caveat.answers._service import TransitionOut
from caveat.api._deps import Acting, typed
from caveat.app._input import instant
from caveat.app._review import changes_window, transition_view

__all__ = ["router"]

router = APIRouter()


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
