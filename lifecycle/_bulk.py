"""Set-based transitions: one UPDATE, one INSERT ... SELECT, one COPY of audit rows.

``transition_many`` moves many items at once with exactly what
``claims.record_transition`` writes for one: the row's state, one
``item_transitions`` row and one ``transition`` audit row per item, with the
same detail. The audit rows continue the tenant's hash chain through
``claims.append_many``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import PendingAudit, append_many
from lifecycle import _queries as q
from lifecycle._states import TRANSITIONS

__all__ = ["Move", "transition_groups", "transition_many"]


@dataclass(frozen=True)
class Move:
    """Apply ``action`` to ``item_ids``, with a reason and a cause shared by the group."""

    action: str
    item_ids: Sequence[int]
    reason: str
    cause: dict[str, Any] = field(default_factory=dict)


def transition_groups(
    *, session: Session, tenant: str, moves: Sequence[Move], at: datetime, actor: str
) -> list[list[tuple[int, str]]]:
    """Apply several moves in one UPDATE, one INSERT and one COPY; per move, what moved.

    An item named by several moves takes the first. Each moved item gets one
    transition row and one audit row, in this transaction; an item whose
    state the move's action is not defined from is skipped.
    """
    out: list[list[tuple[int, str]]] = [[] for _ in moves]
    seen: set[int] = set()
    ids: list[int] = []
    groups: list[int] = []
    targets: list[str] = []
    allowed: list[str] = []
    causes: list[dict[str, Any]] = []
    for n, move in enumerate(moves, start=1):
        sources, target = TRANSITIONS[move.action]
        allowed.extend(f"{n}:{s}" for s in sorted(sources))
        causes.append(move.cause)
        for item_id in move.item_ids:
            if item_id not in seen:
                seen.add(item_id)
                ids.append(item_id)
                groups.append(n)
                targets.append(str(target))
    if not ids:
        return out
    if len(moves) == 1:
        sources, target = TRANSITIONS[moves[0].action]
        params: dict[str, Any] = {
            "t": tenant,
            "ids": ids,
            "sources": sorted(sources),
            "target": str(target),
        }
        statement = q.MOVE_ONE
    else:
        params = {"t": tenant, "ids": ids, "groups": groups, "targets": targets, "allowed": allowed}
        statement = q.MOVE
    moved = sorted(
        (int(r[2]), int(r[0]), str(r[1])) for r in session.execute(statement, params).all()
    )
    if not moved:
        return out
    target_of = [str(TRANSITIONS[m.action][1]) for m in moves]
    session.execute(
        q.HISTORY,
        {
            "t": tenant,
            "ids": [m[1] for m in moved],
            "froms": [m[2] for m in moved],
            "groups": [m[0] for m in moved],
            "targets": target_of,
            "reasons": [m.reason for m in moves],
            "causes": [json.dumps(c, sort_keys=True, default=str) for c in causes],
            "at": at,
            "a": actor,
        },
    )
    details: dict[tuple[int, str], dict[str, Any]] = {}
    rows: list[PendingAudit] = []
    for g, item_id, src in moved:
        detail = details.get((g, src))
        if detail is None:
            move = moves[g - 1]
            detail = details[(g, src)] = {
                "from": src,
                "to": target_of[g - 1],
                "reason": move.reason,
                "cause": causes[g - 1],
            }
        rows.append(PendingAudit(actor, "transition", item_id, target_of[g - 1], detail))
        out[g - 1].append((item_id, src))
    append_many(session=session, tenant=tenant, at=at, rows=rows)
    return out


def transition_many(
    *,
    session: Session,
    tenant: str,
    item_ids: Sequence[int],
    action: str,
    at: datetime,
    actor: str,
    reason: str,
    cause: dict[str, Any] | None = None,
) -> list[tuple[int, str]]:
    """Apply ``action`` to every item of ``item_ids`` whose state allows it; skip the rest.

    Returns ``(item_id, from_state)`` for the items moved, by id. Each moved
    item gets one transition row and one audit row, in this transaction.
    """
    [moved] = transition_groups(
        session=session,
        tenant=tenant,
        moves=[Move(action, item_ids, reason, cause or {})],
        at=at,
        actor=actor,
    )
    return moved
