"""The topology of entities as a networkx graph."""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

__all__ = ["Topology"]


class Topology:
    """Directed edges ``src -relation-> dst``; neighbourhoods ignore direction."""

    def __init__(self, edges: Iterable[tuple[str, str, str]] = ()) -> None:
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph()
        for src, relation, dst in edges:
            self.graph.add_edge(src, dst, relation=relation)

    def neighbourhood(self, subjects: Iterable[str], depth: int) -> set[str]:
        """``subjects`` and every entity within ``depth`` hops of them, either direction."""
        out = set(subjects)
        if depth <= 0:
            return out
        undirected = self.graph.to_undirected(as_view=True)
        for subject in list(out):
            if subject in undirected:
                reach = nx.single_source_shortest_path_length(undirected, subject, cutoff=depth)
                out.update(reach)
        return out
