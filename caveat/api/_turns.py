"""The routes of agent turns for the server-side extractor (docs/proposals.md, "The
server-side extractor"; docs/http.md): submit a turn (answered at once, 202), show one,
list them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response

from caveat import app as use
from caveat.answers._answers import TurnOut, TurnsOut
from caveat.api._deps import Acting, typed
from caveat.app._input import proposal_anchor
from caveat.app._requests import TurnIn

__all__ = ["router"]

router = APIRouter()

#: 202 for a turn queued by this call, 200 for the same turn submitted before.
_SUBMITTED = typed(TurnOut, 202)
_SUBMITTED["responses"][200] = {"model": TurnOut, "description": "Submitted before: as it stands"}


@router.post("/v1/turns", tags=["items"], status_code=202, **_SUBMITTED)
def turn_submit_route(who: Acting, body: TurnIn, response: Response) -> Any:
    """Queue an agent turn for the server's extractor and answer at once: 202 with the
    turn's id and state (``queued``); the proposals land later, as the caller, through
    the gate. The same id with the same body again is 200 with the turn as it stands;
    another body 409. 503 ``extractor_not_configured`` when the server has none."""
    rt, actor = who
    anchor = proposal_anchor(body.case, body.scope)
    done = use.submit_turn(rt, actor, body.agent_turn(), scope=anchor)
    if not done.created:
        response.status_code = 200
    return done.record.to_json()


@router.get("/v1/turns", tags=["items"], **typed(TurnsOut))
def turns_list_route(
    who: Acting,
    state: Literal["queued", "done", "failed"] | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Any:
    """The newest turns first: an agent's own, an SME's or admin's every one."""
    rt, actor = who
    return {"turns": [t.to_json() for t in use.turns_list(rt, actor, state=state, limit=limit)]}


@router.get("/v1/turns/{turn_id}", tags=["items"], **typed(TurnOut))
def turn_show_route(who: Acting, turn_id: Annotated[str, Path(min_length=1)]) -> Any:
    """One turn and where it stands: attempts, next attempt, last error, and once
    ``done`` its proposals' outcomes (404 for another agent's)."""
    rt, actor = who
    return use.turn_show(rt, actor, turn_id).to_json()
