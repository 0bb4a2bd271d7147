"""Withdrawal over lineage, revocation and refutation (model §4.4), and the lineage
graph for people.

The store keeps lineage as ``derived_from`` arrays and their transitive
closure (``item_ancestry``), so a revocation or a refutation finds its
descendants in one range scan and moves them in one statement; ``lineage`` loads the
neighbourhood of one item into a networkx graph for analysis and display.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from claims import Access, Actor, ItemRecord, get_item
from lifecycle import _queries as q
from lifecycle._access import readable_ids, visible_item
from lifecycle._bulk import Withdrawal, withdraw_lineage
from lifecycle._states import decide
from predicates.errors import InputError, NotFound

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Lineage", "LineageNode", "RevokeResult", "lineage", "refute", "revoke"]


@dataclass(frozen=True)
class RevokeResult:
    """The revoked item and the descendants it re-opened."""

    item: ItemRecord
    reopened: list[int]


def revoke(
    *, session: Session, tenant: str, item_id: int, reason: str, actor: Actor, now: datetime
) -> RevokeResult:
    """Revoke an item; every descendant still in circulation goes to ``needs_reverification``.

    Descendants (transitively) already revoked, or otherwise out of
    circulation, keep their state. Nothing is deleted. The descendants move
    set-based, each with its state row and one ``transition`` audit row.
    ``reopened`` names those of them the actor may know of (``readable_ids``).
    """
    actor.require("revoke")
    if not reason.strip():
        raise InputError("a revocation needs a reason")
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    reopened = _withdraw(session, tenant, item, "revoke", reason, actor, now)
    # the answer names only the descendants the actor may know of (all were re-opened)
    seen = readable_ids(session=session, tenant=tenant, actor=actor, ids=reopened)
    return RevokeResult(
        get_item(session=session, tenant=tenant, item_id=item_id, actor=actor),
        [i for i in reopened if i in seen],
    )


def refute(
    *, session: Session, tenant: str, item_id: int, reason: str, actor: Actor, now: datetime
) -> ItemRecord:
    """An SME refutes an item with a reason: it leaves retrieval and every context, and
    what was derived from it is re-opened as a revocation re-opens it.

    Every descendant (transitively) still in circulation goes to
    ``needs_reverification``, each with its ``transition`` audit row naming the
    refuted ancestor; descendants already revoked, refuted or otherwise out of
    circulation keep their state. A write derived from it is refused
    (``lineage_refuted``).
    """
    actor.require("refute")
    if not reason.strip():
        raise InputError("a refutation needs a reason")
    item = visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor, lock=True)
    _withdraw(session, tenant, item, "refute", reason, actor, now)
    return visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


def _withdraw(
    session: Session,
    tenant: str,
    item: ItemRecord,
    action: Withdrawal,
    reason: str,
    actor: Actor,
    now: datetime,
) -> list[int]:
    """Move ``item`` (locked by the caller) by ``action`` and re-open its lineage; the
    ids of the descendants re-opened."""
    decide(action, item.state)  # IllegalTransition from a state the action is not defined for
    # One set-based move for the item and its descendants: row locks first, the
    # tenant's audit chain last, the same order as the write path (no deadlock).
    _, reopened = withdraw_lineage(
        session=session,
        tenant=tenant,
        item_id=item.id,
        action=action,
        reason=reason,
        at=now,
        actor=actor.id,
    )
    return [m[0] for m in reopened]


@dataclass(frozen=True)
class LineageNode:
    """One item of a lineage: its state and, for ancestors and descendants, its distance."""

    id: int
    state: str
    depth: int  # < 0 ancestors, 0 the item, > 0 descendants
    kind: str
    subject: str
    attribute: str
    text: str | None
    redacted: bool


@dataclass(frozen=True)
class Lineage:
    """An item with its ancestors and descendants, as a networkx ``DiGraph`` parent -> child."""

    item: LineageNode
    ancestors: tuple[LineageNode, ...]
    descendants: tuple[LineageNode, ...]
    graph: nx.DiGraph[int]


def lineage(*, session: Session, tenant: str, item_id: int, actor: Actor) -> Lineage:
    """Ancestors and descendants of ``item_id`` with their states.

    Items the actor may not read and redacted items are left out, of the lists
    and of the graph alike, as if never written (the depths of the others are
    still measured over the whole graph). ``NotFound`` when the item itself is
    not readable or redacted, or another principal's working memory.
    """
    import networkx as nx

    visible_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    rows = q.lineage_edges(
        session=session, tenant=tenant, item_id=item_id, gate=actor.gate_params()
    )
    graph: nx.DiGraph[int] = nx.DiGraph()
    info = {}
    for r in rows:
        graph.add_node(int(r.id))
        info[int(r.id)] = r
    for r in rows:
        for parent in r.derived_from:
            if int(parent) in info:
                graph.add_edge(int(parent), int(r.id))
    me = info.get(item_id)
    if me is None or me.redacted or not Access.of(me).readable_by(actor):
        raise NotFound(f"no item {item_id}", item=item_id)
    down = nx.single_source_shortest_path_length(graph, item_id)
    up = nx.single_source_shortest_path_length(graph.reverse(copy=False), item_id)

    def node(i: int, depth: int) -> LineageNode:
        r = info[i]
        hidden = bool(r.redacted)
        return LineageNode(
            i,
            str(r.state),
            depth,
            "" if hidden else str(r.kind),
            "" if hidden else str(r.subject),
            "" if hidden else str(r.attribute),
            None if hidden else r.text,
            hidden,
        )

    def visible(i: int) -> bool:
        # never another principal's working memory (claims.private_visible, in SQL)
        r = info[i]
        return not r.redacted and bool(r.private_ok) and Access.of(r).readable_by(actor)

    ancestors = sorted(
        (node(i, -d) for i, d in up.items() if i != item_id and visible(i)),
        key=lambda n: (-n.depth, n.id),
    )
    desc = sorted(
        (node(i, d) for i, d in down.items() if i != item_id and visible(i)),
        key=lambda n: (n.depth, n.id),
    )
    shown: nx.DiGraph[int] = nx.DiGraph(graph.subgraph(i for i in info if visible(i)))
    return Lineage(node(item_id, 0), tuple(ancestors), tuple(desc), shown)
