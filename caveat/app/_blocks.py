"""Core blocks from every door (model §4 "Core blocks"; docs/blocks.md): set one (a new
row under its key, the one before kept as history), list those in force, show one with
its history. The answer models every door shares live here too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import claims
from caveat.answers._answers import BlockOut, BlockSetOut, BlocksOut
from caveat.app._errors import mapped
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase

__all__ = [
    "BlockIn",
    "BlockOut",
    "BlockSetOut",
    "BlocksOut",
    "block_list",
    "block_set",
    "block_show",
    "block_view",
]


def block_set(
    rt: Runtime,
    actor: claims.Actor,
    label: str,
    text: str,
    *,
    scope: str | None = None,
    now: datetime | None = None,
) -> claims.WriteResult:
    """Set the block ``label`` on ``scope`` (``tenant``, the default; ``team:ID``;
    ``agent:ID``) to ``text``. Like ``write``, the write path owns its transactions: a
    refusal is audited in one of its own."""
    with mapped():
        return claims.write_block(
            sessions=rt.sessions,
            tenant=rt.tenant,
            label=label,
            text=text,
            scope=claims.block_scope(scope),
            actor=actor,
            now=clock(now),
        )


def _member_of(u: Unit) -> list[str]:
    """The actor's team (``claims.team_of``), as recall packs its blocks: a member
    reads its team's blocks at every door."""
    team = claims.team_of(session=u.session, tenant=u.tenant, actor=u.actor)
    return [team] if team else []


@usecase(require="read")
def block_list(u: Unit, *, scope: str | None = None) -> list[claims.Block]:
    """The blocks in force that the actor may read, in packing order (on ``scope`` only,
    when given)."""
    return claims.list_blocks(
        **u.scope(),
        scope=None if scope is None else claims.block_scope(scope),
        teams=_member_of(u),
    )


@usecase(require="read")
def block_show(
    u: Unit, label: str, *, scope: str | None = None, history: bool = False
) -> list[claims.Block]:
    """The block in force (a list of one), or with ``history`` every text it has had,
    oldest first."""
    where = claims.block_scope(scope)
    teams = _member_of(u)
    if history:
        return claims.block_history(**u.scope(), label=label, scope=where, teams=teams)
    return [claims.get_block(**u.scope(), label=label, scope=where, teams=teams)]


# --- what the doors take and answer ----------------------------------------------------


class BlockIn(BaseModel):
    """A block's new text."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(
        description=f"The block's text (non-empty, at most {claims.MAX_BLOCK_CHARS} "
        "characters, no NUL)."
    )


def block_view(block: claims.Block) -> dict[str, Any]:
    return {
        "label": block.label,
        "scope": block.anchor,
        "text": block.text,
        "item_id": block.item_id,
        "recorded_at": block.recorded_at.isoformat(),
        "created_by": block.created_by,
        "superseded_at": None if block.superseded_at is None else block.superseded_at.isoformat(),
    }


def set_view(result: claims.WriteResult, label: str, scope: str | None) -> dict[str, Any]:
    axis, ident = claims.block_scope(scope)
    return {
        "outcome": result.outcome,
        "item_id": result.item_id,
        "superseded": result.superseded,
        "label": label,
        "scope": f"{axis}:{ident}",
    }
