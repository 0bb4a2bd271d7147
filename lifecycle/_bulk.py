"""Set-based transitions: one UPDATE, one INSERT ... SELECT, one COPY of audit rows.

``transition_many`` moves many items at once with exactly what
``claims.record_transition`` writes for one: the row's state, one
``item_transitions`` row and one ``transition`` audit row per item, with the
same detail. The audit rows continue the tenant's hash chain; their hashes
are claims' ``entry_hash`` over claims' canonical encoding. Because every row
of a batch differs only in its seq, item id and from-state, the canonical
body is built once per from-state (by claims' own encoder, with sentinel
numbers) and spliced; the first row of every template is re-hashed with
``claims._audit.entry_hash`` and the batch refuses to run if they differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as claims_q
from lifecycle._states import TRANSITIONS

__all__ = ["AuditRow", "Move", "append_audit_rows", "transition_groups", "transition_many"]

_SEQ = 7_341_597_218_093_361_123
_ITEM = 5_917_230_184_470_021_877

AuditRow = tuple[int, str, dict[str, Any]]  # item_id, code, detail


class _Template:
    """The canonical body of an audit row with the seq and item id left open."""

    def __init__(
        self,
        tenant: str,
        at: datetime,
        actor: str,
        action: str,
        code: str,
        detail: dict[str, Any],
    ) -> None:
        body = _audit._canonical(
            [
                tenant,
                _SEQ,
                at.isoformat(timespec="microseconds"),
                actor,
                action,
                _ITEM,
                code,
                detail,
            ]
        )
        head, rest = body.split(str(_SEQ), 1)
        middle, tail = rest.split(str(_ITEM), 1)
        self.parts = (head, middle, tail)
        self.checked = False
        self.copy_tail = ""

    def body(self, seq: int, item_id: int) -> str:
        head, middle, tail = self.parts
        return f"{head}{seq}{middle}{item_id}{tail}"


def _copy_text(value: str) -> str:
    """A value in COPY's text format."""
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def append_audit_rows(
    *,
    session: Session,
    tenant: str,
    at: datetime,
    actor: str,
    action: str,
    rows: Iterable[AuditRow],
) -> int:
    """Append one audit row per ``(item_id, code, detail)`` to the tenant's chain, by COPY.

    Rows with equal ``(code, detail)`` share one canonical template (pass the
    same dict object for rows that share a detail). ``at`` must be UTC, as
    for ``claims.append``. Returns the number of rows appended.
    """
    rows = list(rows)
    if not rows:
        return 0
    head_seq, head_hash = claims_q.lock_audit_head(session=session, tenant=tenant)
    prev = head_hash or _audit.GENESIS
    seq = head_seq
    templates: dict[str, _Template] = {}
    # Rows of a batch usually share a handful of detail objects: encode each once.
    encoded: dict[int, str] = {}
    lines: list[str] = []
    pre = _copy_text(tenant)
    post = "\t".join(_copy_text(v) for v in (at.isoformat(), actor, action))
    for item_id, code, detail in rows:
        detail_json = encoded.get(id(detail))
        if detail_json is None:
            detail_json = encoded[id(detail)] = _audit._canonical(detail)
        key = f"{code}\x00{detail_json}"
        tpl = templates.get(key)
        if tpl is None:
            tpl = templates[key] = _Template(
                tenant, at, actor, action, code, json.loads(detail_json)
            )
            tpl.copy_tail = f"{_copy_text(code)}\t{_copy_text(detail_json)}"
        seq += 1
        digest = hashlib.sha256(f"{prev}|{tpl.body(seq, item_id)}".encode()).hexdigest()
        if not tpl.checked:
            reference = _audit.entry_hash(
                prev_hash=prev,
                tenant=tenant,
                seq=seq,
                at=at,
                actor=actor,
                action=action,
                item_id=item_id,
                code=code,
                detail=json.loads(detail_json),
            )
            if reference != digest:  # claims changed its encoding: refuse, never mis-chain
                raise RuntimeError("bulk audit template disagrees with claims' entry_hash")
            tpl.checked = True
        lines.append(f"{pre}\t{seq}\t{post}\t{item_id}\t{tpl.copy_tail}\t{prev}\t{digest}\n")
        prev = digest
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with (
        raw.cursor() as cur,
        cur.copy(
            "COPY audit_log (tenant_id, seq, at, actor, action, item_id, code, detail, "
            "prev_hash, hash) FROM STDIN"
        ) as copy,
    ):
        copy.write("".join(lines))
    claims_q.set_audit_head(session=session, tenant=tenant, seq=seq, digest=prev)
    return len(lines)


# One UPDATE for every group: each row moves to its group's target when its
# state is one its group's action is defined from. The UPDATE locks the rows
# itself; re-checking ``i.state = x.old`` on the latest row version skips an
# item whose state changed concurrently.
_MOVE = sa.text(
    "UPDATE items i SET state = x.target FROM ("
    "  SELECT u.id, u.g, u.target, it.state AS old FROM unnest("
    "    CAST(:ids AS bigint[]), CAST(:groups AS int[]), CAST(:targets AS text[])"
    "  ) AS u(id, g, target) JOIN items it ON it.id = u.id "
    "  WHERE it.tenant_id = :t AND (u.g || ':' || it.state) = ANY(:allowed)"
    ") x WHERE i.id = x.id AND i.state = x.old "
    "RETURNING i.id, x.old, x.g"
)

# The same for a single move: a plain filter lets the planner scan once.
_MOVE_ONE = sa.text(
    "UPDATE items i SET state = :target FROM ("
    "  SELECT id, state FROM items WHERE tenant_id = :t AND id = ANY(:ids) "
    "  AND state = ANY(:sources)"
    ") x WHERE i.id = x.id AND i.state = x.state "
    "RETURNING i.id, x.state, 1"
)

_HISTORY = sa.text(
    "INSERT INTO item_transitions (tenant_id, item_id, from_state, to_state, at, actor, "
    "reason, cause) SELECT :t, u.id, u.f, g.target, :at, :a, g.reason, g.cause "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:froms AS text[]), CAST(:groups AS int[])) "
    "  AS u(id, f, g) "
    "JOIN unnest(CAST(:targets AS text[]), CAST(:reasons AS text[]), CAST(:causes AS jsonb[])) "
    "  WITH ORDINALITY AS g(target, reason, cause, n) ON g.n = u.g "
    "ORDER BY u.g, u.id"
)


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
        causes.append(json.loads(_audit._canonical(move.cause)))
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
        statement = _MOVE_ONE
    else:
        params = {"t": tenant, "ids": ids, "groups": groups, "targets": targets, "allowed": allowed}
        statement = _MOVE
    moved = sorted(
        (int(r[2]), int(r[0]), str(r[1])) for r in session.execute(statement, params).all()
    )
    if not moved:
        return out
    target_of = [str(TRANSITIONS[m.action][1]) for m in moves]
    session.execute(
        _HISTORY,
        {
            "t": tenant,
            "ids": [m[1] for m in moved],
            "froms": [m[2] for m in moved],
            "groups": [m[0] for m in moved],
            "targets": target_of,
            "reasons": [m.reason for m in moves],
            "causes": [json.dumps(c) for c in causes],
            "at": at,
            "a": actor,
        },
    )
    details: dict[tuple[int, str], dict[str, Any]] = {}
    rows: list[AuditRow] = []
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
        rows.append((item_id, target_of[g - 1], detail))
        out[g - 1].append((item_id, src))
    append_audit_rows(
        session=session, tenant=tenant, at=at, actor=actor, action="transition", rows=rows
    )
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
