"""The topology of entities as a networkx graph."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Literal

from predicates.errors import InputError

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Direction", "Topology"]

Direction = Literal["out", "in", "both"]


class Topology:
    """Directed edges ``src -relation-> dst``; neighbourhoods ignore direction."""

    def __init__(self, edges: Iterable[tuple[str, str, str]] = ()) -> None:
        self._edges = list(edges)
        self._graph: nx.MultiDiGraph[str] | None = None

    @property
    def graph(self) -> nx.MultiDiGraph[str]:
        """The edges as a networkx graph, built at its first use: networkx is imported
        then, so a one-shot command whose world is never walked does not load it (a
        tenth of a CLI recall's start-up)."""
        if self._graph is None:
            import networkx as nx

            graph: nx.MultiDiGraph[str] = nx.MultiDiGraph()
            for src, relation, dst in self._edges:
                graph.add_edge(src, dst, relation=relation)
            self._graph = graph
        return self._graph

    def __contains__(self, entity: object) -> bool:
        return entity in self.graph

    def edges(self) -> list[tuple[str, str, str]]:
        """Every edge as ``(src, relation, dst)``, sorted."""
        return sorted((s, d["relation"], t) for s, t, d in self.graph.edges(data=True))

    def neighbourhood(self, subjects: Iterable[str], depth: int) -> set[str]:
        """``subjects`` and every entity within ``depth`` hops of them, either direction."""
        out = set(subjects)
        if depth <= 0:
            return out
        for subject in list(out):
            out.update(self.neighbours(subject, depth=depth))
        return out

    def neighbours(
        self,
        subject: str,
        *,
        depth: int = 1,
        relations: Collection[str] | None = None,
        direction: Direction = "both",
    ) -> dict[str, int]:
        """Entities within ``depth`` hops of ``subject`` (itself excluded), with their distance.

        ``direction`` follows edges as written (``out``: what ``subject``
        depends on or runs on), against them (``in``: what depends on it) or
        both; ``relations`` keeps only edges of those relations. Breadth-first,
        so each distance is the shortest one.
        """
        if direction not in ("out", "in", "both"):
            raise InputError(f"direction is out, in or both, not {direction!r}")
        if depth < 0:
            raise InputError(f"depth must be 0 or more, not {depth}")
        if subject not in self.graph:
            return {}
        seen = {subject: 0}
        frontier = [subject]
        for distance in range(1, depth + 1):
            following: list[str] = []
            for node in frontier:
                steps: list[tuple[str, str]] = []
                if direction in ("out", "both"):
                    steps += [
                        (t, d["relation"]) for _, t, d in self.graph.out_edges(node, data=True)
                    ]
                if direction in ("in", "both"):
                    steps += [
                        (s, d["relation"]) for s, _, d in self.graph.in_edges(node, data=True)
                    ]
                for other, relation in steps:
                    if relations is not None and relation not in relations:
                        continue
                    if other not in seen:
                        seen[other] = distance
                        following.append(other)
            frontier = following
        del seen[subject]
        return seen
