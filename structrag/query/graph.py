"""The entity graph of a conversation: who did what to whom, who owns what, what is what.

Edges come from the store (:meth:`~structrag.store.protocols.KnowledgeStore.relation_edges`):
actions with a subject and an object (``Marco -adopt-> Biscuit``), possessions from
``owner`` facets (``Caroline -have-> friend``) and types (``Melanie -is-> friend``). Nodes
are normalised names (:func:`~structrag.analysis.term_key`) and keep a display name.

networkx holds the graph: ``ask`` uses it for neighbourhoods (possessives: "Caroline's
friend" is two hops from Caroline), and the analytics notebook for centrality and
communities over the same graph (:func:`entity_graph`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from structrag.analysis import term_key

if TYPE_CHECKING:
    import networkx as nx


def entity_graph(edges: Iterable[tuple[str, str, str]]) -> nx.MultiDiGraph:
    """A directed multigraph of ``(subject, verb, object)`` edges between normalised
    names; each node's ``name`` attribute is the first way it was written."""
    import networkx as nx  # on first use: importing it costs ~90 ms of a cold start

    graph = nx.MultiDiGraph()
    for subject, verb, obj in edges:
        a, b = term_key(subject), term_key(obj)
        if not a or not b or a == b:
            continue
        for key, name in ((a, subject), (b, obj)):
            if key not in graph:
                graph.add_node(key, name=name)
        graph.add_edge(a, b, verb=verb)
    return graph


class EntityGraph:
    """Neighbourhood queries over :func:`entity_graph`."""

    def __init__(self, edges: Iterable[tuple[str, str, str]]) -> None:
        self.graph = entity_graph(edges)
        self._undirected = self.graph.to_undirected(as_view=True)

    def name(self, key: str) -> str:
        return str(self.graph.nodes[key].get("name", key)) if key in self.graph else key

    def neighbours(self, name: str, hops: int = 2) -> dict[str, int]:
        """Entities within ``hops`` of a named one: normalised name -> distance."""
        import networkx as nx

        start = term_key(name)
        if start not in self.graph:
            return {}
        found = nx.single_source_shortest_path_length(self._undirected, start, cutoff=hops)
        return {node: int(d) for node, d in found.items() if node != start}

    def expand_relation(self, owner: str, noun: str) -> list[str]:
        """Display names of the entities that are the ``noun`` of ``owner``, two hops away:
        Caroline -have-> friend <-is- Melanie gives Melanie for "Caroline's friend"."""
        target = term_key(noun)
        owner_key = term_key(owner)
        found: list[str] = []
        for node, distance in self.neighbours(owner, hops=1).items():
            if distance != 1 or target not in node.split():
                continue
            for other in self._undirected.neighbors(node):
                edges = self._undirected.get_edge_data(node, other) or {}
                is_a = any(data.get("verb") == "is" for data in edges.values())
                if is_a and other not in (owner_key, node):
                    name = self.name(other)
                    if name not in found:
                        found.append(name)
        # A stable order, whatever order the edges came in: best connected first.
        return sorted(found, key=lambda n: (-self._undirected.degree(term_key(n)), n))
