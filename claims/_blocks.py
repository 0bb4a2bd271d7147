"""Core blocks (model §4 "Core blocks"; docs/blocks.md): a few editable, pinned texts per
tenant, team or agent, kept as items under the key ``block:<label>``.

A block is an item (``kind: block``) in the same table, written by the same write path
(the supersession key, dedup, the audit chain; its earlier rows are its history), but it
is not an observation: it states no conditions, cites no evidence, and the gate's G1-G4
(which would refuse "escalate to the DBA on call" as a rule) are replaced by its own
shape checks here. No door can write ``kind: block`` as an ordinary item (``ItemWrite``
does not take it), and recall never ranks, explains, counts or guards a block: it packs
the blocks in play before everything else.

Who sets a block: an agent its own ``agent:<self>``; a team's or the tenant's, a role
with ``set_block`` (SME, admin); the admin any. Who reads one: the tenant's, everyone in
the tenant; a team's, its members (``teams``) and SMEs and admins; an agent's, that agent
and the admin.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from claims import _queries as q
from claims._access import Actor, may_read_block
from claims._anchors import DEFAULT_REGISTRY
from claims._gate import PreparedItem
from claims._items import record_from_row
from claims._proposal import Anchor, ItemWrite
from claims._write import DEFAULT_CHUNK, WRITE_ACTIONS, WriteResult, _Writer
from factgen import World
from predicates.errors import Forbidden, GateRejection, InputError, NotFound

__all__ = [
    "BLOCK_AXES",
    "MAX_BLOCK_CHARS",
    "Block",
    "block_history",
    "block_scope",
    "blocks_in_play",
    "get_block",
    "list_blocks",
    "may_read_block",
    "write_block",
]

#: The anchors a block may sit on, in packing order.
BLOCK_AXES = ("tenant", "team", "agent")
#: The longest block text, in characters (an item's ``text`` takes as many).
MAX_BLOCK_CHARS = 4000
_LABEL = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_SCOPE_FORM = 'tenant, "team:ID" or "agent:ID"'
#: What a block's anchor id may not hold: control characters (a line break would start
#: a new line of the packed prefix) and the brackets of a block's header.
_FORGING = re.compile(r"[\x00-\x1f\x7f\[\]]")


@dataclass(frozen=True)
class Block:
    """One row of a core block: its label, anchor, text, and the item that holds it."""

    label: str
    scope: tuple[str, str]
    text: str
    item_id: int
    recorded_at: datetime
    created_by: str
    superseded_at: datetime | None = None

    @property
    def anchor(self) -> str:
        return f"{self.scope[0]}:{self.scope[1]}"


def block_scope(text: str | None) -> tuple[str, str]:
    """``tenant`` (or ``tenant:*``, or None), ``team:ID``, ``agent:ID`` as an anchor;
    ``InputError`` for anything else: another axis, an empty id, an id with surrounding
    blanks (as a principal's team may not have: ``check_team``), a control character
    (a line break) or a bracket, which could forge a block's header in the packed
    prefix (``[team:ID block:LABEL]``)."""
    if text is None or text in ("tenant", "tenant:*"):
        return ("tenant", "*")
    axis, sep, ident = text.partition(":")
    if (
        not sep
        or axis not in BLOCK_AXES
        or axis == "tenant"
        or not ident.strip()
        or ident != ident.strip()
        or _FORGING.search(ident)
    ):
        raise InputError(
            f"block scope {text!r}: expected {_SCOPE_FORM} (an id without surrounding "
            "blanks, control characters or brackets)",
            attribute="scope",
            given=text,
        )
    return (axis, ident)


def _check_label(label: str) -> None:
    if not _LABEL.fullmatch(label):
        raise InputError(
            f"block label {label!r}: a lower-case letter, then letters, digits, _ or - "
            "(at most 64)",
            attribute="label",
            given=label,
        )


def _check_text(text: str) -> str:
    """The text as stored: lines without trailing blanks, no blank lines around."""
    if "\x00" in text:
        raise InputError(
            "block text holds a NUL byte (\\x00), which PostgreSQL text cannot store",
            attribute="text",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"block text holds {exc.reason} at position {exc.start}", attribute="text"
        ) from None
    clean = "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")
    if not clean.strip():
        raise InputError("block text is empty", attribute="text")
    if len(clean) > MAX_BLOCK_CHARS:
        raise InputError(
            f"block text is {len(clean)} characters; at most {MAX_BLOCK_CHARS}",
            attribute="text",
            limit=MAX_BLOCK_CHARS,
        )
    return clean


def may_set_block(actor: Actor, scope: tuple[str, str]) -> None:
    """Raise ``Forbidden`` unless ``actor`` may set blocks on ``scope``."""
    axis, ident = scope
    if actor.may("write_any_axis"):
        return
    if axis == "agent" and actor.may("write") and actor.id == ident:
        return
    # a team's blocks are an SME's (any team's) or the admin's: a team's own members,
    # whatever ``principal_team`` says, read them and do not set them (docs/blocks.md)
    if axis in ("tenant", "team") and actor.may("set_block"):
        return
    raise Forbidden(
        f"{actor.id} ({actor.role}) may not set blocks on {axis}:{ident}"
        + (
            "; an agent sets its own agent:<id> blocks only"
            if actor.role == "agent"
            else "; a team's and the tenant's blocks are set by an SME or admin"
        ),
        actor=actor.id,
        role=actor.role,
        action="set_block",
        scope=f"{axis}:{ident}",
    )


class _BlockWriter(_Writer):
    """The write path with the block's checks in place of the gate's."""

    def _precheck(self, world: World, request: ItemWrite) -> None:
        may_set_block(self.actor, (request.scope.axis, request.scope.id))
        if world.policy.writes != "on":
            raise GateRejection(
                "writes_disabled", f"writes are {world.policy.writes} for tenant {self.tenant}"
            )

    def _shape(self, request: ItemWrite, world: World, visible: dict[str, bool]) -> PreparedItem:
        return PreparedItem(
            request=request,
            subject=request.subject,
            required=(),
            excluded=(),
            object=request.object,
            entities=(),
            scope=(request.scope.axis, request.scope.id),
        )


def write_block(
    *,
    sessions: sessionmaker[Session],
    tenant: str,
    label: str,
    text: str,
    scope: tuple[str, str],
    actor: Actor,
    now: datetime,
) -> WriteResult:
    """Set the block ``label`` on ``scope`` to ``text``: a new row under its key (the
    one before superseded, kept as history), ``duplicate`` for the same text. Malformed
    input is an ``InputError`` that writes nothing; a refusal (``forbidden``,
    ``writes_disabled``) is audited like any refused write."""
    _check_label(label)
    clean = _check_text(text)
    # the tuple is checked as the text form is: a caller of the domain cannot bypass it
    axis, ident = block_scope("tenant" if scope == ("tenant", "*") else f"{scope[0]}:{scope[1]}")
    request = ItemWrite.model_construct(
        kind="block",  # type: ignore[arg-type]  # the block path's own: no door takes it
        subject=f"{axis}:{ident}",
        attribute=f"block:{label}",
        object={"value": clean},
        required=[],
        excluded=[],
        evidence=[],
        derived_from=[],
        epistemic="observation",
        content_type=None,
        scope=Anchor(axis=axis, id=ident),
        facets=[],
        purposes=[],
        text=clean,
        entities=[],
        salience=0.5,
        valid_from=None,
        valid_to=None,
        version=None,
        test=None,
    )
    writer = _BlockWriter(sessions, tenant, actor, now, None, DEFAULT_REGISTRY, WRITE_ACTIONS)
    [outcome] = writer.run([request], DEFAULT_CHUNK)
    if outcome.outcome == "rejected":
        assert outcome.error is not None
        raise outcome.error
    assert outcome.item_id is not None and outcome.state is not None
    return WriteResult(outcome.outcome, outcome.item_id, outcome.state, outcome.superseded)


def _block(row: Any) -> Block:
    rec = record_from_row(row)
    return Block(
        label=rec.attribute.removeprefix("block:"),
        scope=(rec.scope_axis, rec.scope_id),
        text=rec.text or "",
        item_id=rec.id,
        recorded_at=rec.recorded_at,
        created_by=rec.created_by,
        superseded_at=rec.superseded_at,
    )


def _ordered(blocks: Sequence[Block]) -> list[Block]:
    """Packing order: tenant, team, agent; then the anchor id; then the label."""
    return sorted(blocks, key=lambda b: (BLOCK_AXES.index(b.scope[0]), b.scope[1], b.label))


def blocks_in_play(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    teams: Collection[str] = (),
    member_of: Collection[str] = (),
) -> list[Block]:
    """The blocks a recall by ``actor`` packs first: the tenant's, those of ``teams`` that
    it may read (SMEs and admins any; others the teams in ``member_of``), and its own
    agent anchor's; in packing order."""
    scopes = [("tenant", "*")]
    scopes += [("team", t) for t in sorted(set(teams))]
    scopes.append(("agent", actor.id))
    rows = q.current_blocks(session=session, tenant=tenant, scopes=scopes)
    return _ordered([b for b in map(_block, rows) if may_read_block(actor, b.scope, member_of)])


def list_blocks(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    scope: tuple[str, str] | None = None,
    teams: Collection[str] = (),
) -> list[Block]:
    """The blocks in force that ``actor`` may read (on ``scope`` only, when given)."""
    actor.require("read")
    rows = q.current_blocks(
        session=session, tenant=tenant, scopes=None if scope is None else [scope]
    )
    return _ordered([b for b in map(_block, rows) if may_read_block(actor, b.scope, teams)])


def block_history(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    label: str,
    scope: tuple[str, str],
    teams: Collection[str] = (),
) -> list[Block]:
    """Every text the block has had, oldest first (the last is in force unless the block
    was withdrawn); ``NotFound`` when there is none that ``actor`` may read."""
    actor.require("read")
    _check_label(label)
    rows = q.block_rows(
        session=session,
        tenant=tenant,
        axis=scope[0],
        anchor_id=scope[1],
        attribute=f"block:{label}",
    )
    if not rows or not may_read_block(actor, scope, teams):
        raise NotFound(
            f"no block {label!r} on {scope[0]}:{scope[1]}",
            label=label,
            scope=f"{scope[0]}:{scope[1]}",
        )
    return [_block(r) for r in rows]


def get_block(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    label: str,
    scope: tuple[str, str],
    teams: Collection[str] = (),
) -> Block:
    """The block in force; ``NotFound`` when there is none ``actor`` may read."""
    for block in list_blocks(session=session, tenant=tenant, actor=actor, scope=scope, teams=teams):
        if block.label == label:
            return block
    _check_label(label)
    raise NotFound(
        f"no block {label!r} on {scope[0]}:{scope[1]}", label=label, scope=f"{scope[0]}:{scope[1]}"
    )
