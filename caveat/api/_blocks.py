"""The routes of core blocks (model §4 "Core blocks"; docs/blocks.md, docs/http.md): list
the blocks in force, show one (with its history), set one. ``scope`` is a query
parameter everywhere: ``tenant`` (the default), ``team:ID`` or ``agent:ID``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.app._blocks import BlockIn, BlockSetOut, BlocksOut, block_view, set_view

__all__ = ["router"]

router = APIRouter()

Scope = Annotated[
    str | None,
    Query(description='tenant (the default), "team:ID" or "agent:ID".'),
]
Label = Annotated[str, Path(description="The block's label: [a-z][a-z0-9_-]*, at most 64.")]


@router.get("/v1/blocks", tags=["blocks"], **typed(BlocksOut))
def block_list_route(who: Acting, scope: Scope = None) -> Any:
    """The blocks in force that the caller may read, in packing order (anchor: tenant,
    team, agent; then label); on ``scope`` only when given."""
    rt, actor = who
    return {"blocks": [block_view(b) for b in use.block_list(rt, actor, scope=scope)]}


@router.get("/v1/blocks/{label}", tags=["blocks"], **typed(BlocksOut))
def block_show_route(
    who: Acting,
    label: Label,
    scope: Scope = None,
    history: Annotated[
        bool, Query(description="Every text the block has had, oldest first.")
    ] = False,
) -> Any:
    """The block in force (a list of one), or with ``history`` all its rows; 404 when
    there is none the caller may read."""
    rt, actor = who
    rows = use.block_show(rt, actor, label, scope=scope, history=history)
    return {"blocks": [block_view(b) for b in rows]}


@router.put("/v1/blocks/{label}", tags=["blocks"], **typed(BlockSetOut))
def block_set_route(who: Acting, label: Label, body: BlockIn, scope: Scope = None) -> Any:
    """Set the block: a new row under its key, the one before superseded and kept as
    history (``duplicate`` for the same text). An agent sets its own ``agent:<id>``
    blocks; a team's and the tenant's need an SME or admin (403). Bad input (an unknown
    scope axis, an empty text, a NUL, a text too long, a bad label) is 422 and writes
    nothing."""
    rt, actor = who
    return set_view(use.block_set(rt, actor, label, body.text, scope=scope), label, scope)
