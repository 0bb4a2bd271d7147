"""The lineage graph drawn for people: ancestors on the left, descendants on the right,
one column per generation, each node coloured by its state (an SVG the page inlines)."""

from __future__ import annotations

from dataclasses import dataclass

import lifecycle

__all__ = ["Drawing", "draw"]

_W, _H = 176, 46  # a node's box
_DX, _DY = 226, 62  # a column's and a row's pitch
_PAD = 12


@dataclass(frozen=True)
class Node:
    """A drawn node: its box, the item and whether it is the page's own item."""

    x: int
    y: int
    id: int
    state: str
    label: str
    me: bool


@dataclass(frozen=True)
class Edge:
    """A drawn parent -> child edge, as an SVG path."""

    path: str


@dataclass(frozen=True)
class Drawing:
    """An SVG's size, nodes and edges."""

    width: int
    height: int
    w: int
    h: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _label(n: lifecycle.LineageNode) -> str:
    if n.redacted:
        return "redacted"
    text = f"{n.subject} · {n.attribute}"
    return text if len(text) <= 26 else text[:25] + "…"


def draw(lin: lifecycle.Lineage) -> Drawing:
    """Lay the lineage out in generations; only the nodes the lineage holds (what the
    reader may read) are drawn, and only the edges between them."""
    nodes = [*lin.ancestors, lin.item, *lin.descendants]
    columns: dict[int, list[lifecycle.LineageNode]] = {}
    for n in nodes:
        columns.setdefault(n.depth, []).append(n)
    first = min(columns)
    where: dict[int, tuple[int, int]] = {}
    drawn = []
    for depth in sorted(columns):
        for row, n in enumerate(sorted(columns[depth], key=lambda m: m.id)):
            x, y = _PAD + (depth - first) * _DX, _PAD + row * _DY
            where[n.id] = (x, y)
            drawn.append(Node(x, y, n.id, n.state, _label(n), n.id == lin.item.id))
    edges = []
    for parent, child in sorted(lin.graph.edges):
        if parent in where and child in where:
            (x1, y1), (x2, y2) = where[parent], where[child]
            sx, sy, ex, ey = x1 + _W, y1 + _H // 2, x2, y2 + _H // 2
            mid = (sx + ex) // 2
            edges.append(Edge(f"M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}"))
    width = _PAD * 2 + (max(columns) - first) * _DX + _W
    height = _PAD * 2 + (max(len(c) for c in columns.values()) - 1) * _DY + _H
    return Drawing(width, height, _W, _H, tuple(drawn), tuple(edges))
