"""Set-based transitions: one statement moves the states, one COPY appends the audit rows.

``transition_many`` moves many items at once with exactly what
``claims.record_transition`` writes for one: the item's state row and one
``transition`` audit row per item (its history), with the same detail. The
audit rows continue the tenant's hash chain through ``claims.append_many``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, overload

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims import PendingAudit, append_many
from lifecycle import _queries as q
from lifecycle._states import TRANSITIONS

__all__ = ["Move", "Withdrawal", "transition_groups", "transition_many", "withdraw_lineage"]

#: The SME actions that withdraw an item and re-open its lineage (model §4.4).
Withdrawal = Literal["revoke", "refute"]


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
    """Apply several moves in one statement and one COPY; per move, what moved.

    An item named by several moves takes the first. Each moved item gets its
    state row moved and one ``transition`` audit row, in this transaction; an item whose
    state the move's action is not defined from is skipped.
    """
    planned = _group_move(tenant, moves)
    if planned is None:
        return [[] for _ in moves]
    statement, params = planned
    return _record(
        session,
        tenant,
        moves,
        q.move(session=session, statement=statement, params=params),
        at,
        actor,
    )


def withdraw_lineage(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    action: Withdrawal,
    reason: str,
    at: datetime,
    actor: str,
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Withdraw ``item_id`` (``action``: ``revoke`` or ``refute``) and re-open its
    descendants still in circulation, in one statement (the lineage is walked on the
    server) and one COPY of audit rows (model §4.4).

    Returns what moved: the item (empty if its state does not allow it) and
    the descendants, each ``(id, from_state)``. Pending verify-on-next-use
    checks of every moved item are dropped.
    """
    moves, params = _lineage_move(tenant, item_id, reason, action)
    q.room_to_sort(session=session)
    rows = q.move(session=session, statement=q.MOVE_LINEAGE, params=params)
    item, reopened = _record(session, tenant, moves, rows, at, actor)
    return item, reopened


def _group_move(tenant: str, moves: Sequence[Move]) -> tuple[sa.TextClause, dict[str, Any]] | None:
    """The statement that applies ``moves`` and its parameters (``None`` when they name
    no item): each item once, in the first move naming it."""
    seen: set[int] = set()
    ids: list[int] = []
    groups: list[int] = []
    targets: list[str] = []
    for n, move in enumerate(moves, start=1):
        target = str(TRANSITIONS[move.action][1])
        for item_id in move.item_ids:
            if item_id not in seen:
                seen.add(item_id)
                ids.append(item_id)
                groups.append(n)
                targets.append(target)
    if not ids:
        return None
    params = {**_common(tenant, moves), "ids": q.int_array(ids)}
    if len(moves) == 1:
        sources, target = TRANSITIONS[moves[0].action]
        return q.MOVE_ONE, params | {"sources": sorted(sources), "target": str(target)}
    return q.MOVE, params | {"groups": groups, "targets": targets}


def _lineage_move(
    tenant: str, item_id: int, reason: str, action: Withdrawal = "revoke"
) -> tuple[list[Move], dict[str, Any]]:
    """The moves of a withdrawal of ``item_id`` (the item, then its descendants) and
    the parameters of ``MOVE_LINEAGE`` that applies them; each descendant's cause
    names the withdrawn ancestor by what happened to it (``{"revoked": id}`` or
    ``{"refuted": id}``)."""
    withdrawn = str(TRANSITIONS[action][1])
    moves = [
        Move(action, [item_id], reason),
        Move(
            "lineage_reopen",
            [],
            f"ancestor {item_id} {withdrawn}: {reason}",
            {withdrawn: item_id},
        ),
    ]
    params = {
        **_common(tenant, moves),
        "i": item_id,
        "root_target": withdrawn,
        "target": str(TRANSITIONS["lineage_reopen"][1]),
    }
    return moves, params


def _common(tenant: str, moves: Sequence[Move]) -> dict[str, Any]:
    """The parameters every move statement takes: the tenant and, per group, the
    states its action is defined from (``"<group>:<state>"``)."""
    return {
        "t": tenant,
        "allowed": [
            f"{n}:{s}"
            for n, m in enumerate(moves, start=1)
            for s in sorted(TRANSITIONS[m.action][0])
        ],
    }


def _record(
    session: Session,
    tenant: str,
    moves: Sequence[Move],
    returned: Sequence[Any],
    at: datetime,
    actor: str,
) -> list[list[tuple[int, str]]]:
    """One audit row per moved item, appended in one go; per move, what moved by id."""
    append_many(session=session, tenant=tenant, at=at, rows=_AuditRows(returned, moves, actor))
    out: list[list[tuple[int, str]]] = [[] for _ in moves]
    for item_id, src, g in returned:
        out[g - 1].append((item_id, src))
    return out


class _AuditRows(Sequence[PendingAudit]):
    """The ``transition`` audit row of each moved ``(item_id, from, group)``, made as
    the chain reaches it: a large append streams while the rows are made.

    Rows of one group moved from one state share their detail object (encoded
    once by the chain).
    """

    def __init__(self, moved: Sequence[Any], moves: Sequence[Move], actor: str) -> None:
        self._moved, self._moves, self._actor = moved, moves, actor
        self._shared: dict[tuple[int, str], tuple[str, dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._moved)

    def _row(self, item_id: int, src: str, g: int) -> PendingAudit:
        shared = self._shared.get((g, src))
        if shared is None:
            move = self._moves[g - 1]
            target = str(TRANSITIONS[move.action][1])
            detail = {"from": src, "to": target, "reason": move.reason, "cause": move.cause}
            shared = self._shared[(g, src)] = (target, detail)
        return PendingAudit(self._actor, "transition", item_id, shared[0], shared[1])

    def __iter__(self) -> Iterator[PendingAudit]:
        row = self._row
        for item_id, src, g in self._moved:  # by group, then id
            yield row(item_id, src, g)

    @overload
    def __getitem__(self, index: int) -> PendingAudit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[PendingAudit]: ...
    def __getitem__(self, index: int | slice) -> PendingAudit | Sequence[PendingAudit]:
        if isinstance(index, slice):
            return [self._row(*m) for m in self._moved[index]]
        return self._row(*self._moved[index])


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
    item gets its state row moved and one ``transition`` audit row, in this
    transaction.
    """
    [moved] = transition_groups(
        session=session,
        tenant=tenant,
        moves=[Move(action, item_ids, reason, cause or {})],
        at=at,
        actor=actor,
    )
    return moved
