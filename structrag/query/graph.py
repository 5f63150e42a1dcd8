"""The entity graph of a conversation: who did what to whom, who owns what, what is what.

Edges come from the store (:meth:`~structrag.store.protocols.KnowledgeStore.relation_edges`):
actions with a subject and an object (``Marco -adopt-> Biscuit``), possessions from
``owner`` facets (``Caroline -have-> friend``) and types (``Melanie -is-> friend``). Nodes
are normalised names (:func:`~structrag.analysis.term_key`) and keep a display name.

:func:`entity_graph` builds it in networkx, for the analytics notebook (centrality,
communities); ``ask`` reads neighbourhoods (possessives: "Caroline's friend" is two hops
from Caroline) from :class:`EntityGraph`, the same edges as plain adjacency.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from structrag.analysis import term_key

if TYPE_CHECKING:
    import networkx as nx


def _keyed(edges: Iterable[tuple[str, str, str]]) -> Iterator[tuple[str, str, str, str, str]]:
    """``(subject key, subject, verb, object key, object)`` of each edge between two
    different, non-empty normalised names: the edges both graphs below hold."""
    for subject, verb, obj in edges:
        a, b = term_key(subject), term_key(obj)
        if a and b and a != b:
            yield a, subject, verb, b, obj


def entity_graph(edges: Iterable[tuple[str, str, str]]) -> nx.MultiDiGraph:
    """A directed multigraph of ``(subject, verb, object)`` edges between normalised
    names; each node's ``name`` attribute is the first way it was written."""
    import networkx as nx  # on first use: importing it costs ~90 ms of a cold start

    graph = nx.MultiDiGraph()
    for a, subject, verb, b, obj in _keyed(edges):
        for key, name in ((a, subject), (b, obj)):
            if key not in graph:
                graph.add_node(key, name=name)
        graph.add_edge(a, b, verb=verb)
    return graph


class EntityGraph:
    """Neighbourhood queries over the edges :func:`entity_graph` takes, held as plain
    adjacency: ``ask`` needs neighbours and edge verbs only, and importing
    networkx would cost a cold ``structrag ask`` about 0.1 s. Edges count in both
    directions; nodes keep the first way they were written, as in :func:`entity_graph`."""

    def __init__(self, edges: Iterable[tuple[str, str, str]]) -> None:
        self._names: dict[str, str] = {}
        #: node -> neighbour -> the verbs of the edges between them, either direction.
        self._adjacent: dict[str, dict[str, list[str]]] = {}
        for a, subject, verb, b, obj in _keyed(edges):
            self._names.setdefault(a, subject)
            self._names.setdefault(b, obj)
            self._adjacent.setdefault(a, {}).setdefault(b, []).append(verb)
            self._adjacent.setdefault(b, {}).setdefault(a, []).append(verb)

    def name(self, key: str) -> str:
        return self._names.get(key, key)

    def degree(self, key: str) -> int:
        """How many edges touch ``key`` (a normalised name), in either direction."""
        return sum(len(verbs) for verbs in self._adjacent.get(key, {}).values())

    def expand_relation(self, owner: str, noun: str) -> list[str]:
        """Display names of the entities that are the ``noun`` of ``owner``, two hops away:
        Caroline -have-> friend <-is- Melanie gives Melanie for "Caroline's friend"."""
        target = term_key(noun)
        owner_key = term_key(owner)
        found: list[str] = []
        for node in self._adjacent.get(owner_key, {}):
            if target not in node.split():
                continue
            for other, verbs in self._adjacent[node].items():
                if "is" in verbs and other not in (owner_key, node):
                    name = self.name(other)
                    if name not in found:
                        found.append(name)
        # A stable order, whatever order the edges came in: best connected first.
        return sorted(found, key=lambda n: (-self.degree(term_key(n)), n))
