"""The entity graph ``ask`` reads (:class:`EntityGraph`) against the networkx one the
notebook builds (:func:`entity_graph`) from the same edges."""

from __future__ import annotations

import random

from structrag.query.graph import EntityGraph, entity_graph

EDGES = [
    ("Caroline", "have", "friend"),
    ("Melanie", "is", "friend"),
    ("Caroline", "have", "dog"),
    ("Biscuit", "is", "dog"),
    ("Jon", "is", "best friend"),
    ("Caroline", "have", "best friend"),
    ("Melanie", "visit", "Paris"),
    ("Melanie", "paint", "sunrise"),
]


def test_a_possessive_is_what_is_the_noun_of_its_owner() -> None:
    graph = EntityGraph(EDGES)
    # "friend" and "best friend" both name the noun; Melanie has more edges than Jon.
    assert graph.expand_relation("Caroline", "friend") == ["Melanie", "Jon"]
    assert graph.expand_relation("caroline", "dog") == ["Biscuit"]
    assert graph.expand_relation("Caroline", "cat") == []
    assert graph.expand_relation("Nobody", "friend") == []


def test_an_is_edge_counts_in_either_direction_and_ties_go_by_name() -> None:
    graph = EntityGraph(
        [("Ana", "have", "sister"), ("sister", "is", "Zoe"), ("Bea", "is", "sister")]
    )
    assert graph.expand_relation("Ana", "sister") == ["Bea", "Zoe"]
    # The owner itself is never its own relation, whatever the edges say.
    assert (
        EntityGraph([("Ana", "have", "sister"), ("Ana", "is", "sister")]).expand_relation(
            "Ana", "sister"
        )
        == []
    )


def test_names_and_degrees_agree_with_the_networkx_graph() -> None:
    rng = random.Random(7)
    names = ["Ana", "ana", "Bea", "the dog", "Dog", "Paris", "sister", "a friend", "Zoe"]
    verbs = ["is", "have", "visit"]
    edges = [(rng.choice(names), rng.choice(verbs), rng.choice(names)) for _ in range(60)]
    ours, theirs = EntityGraph(edges), entity_graph(edges)
    assert theirs.number_of_nodes() > 3
    for key in theirs.nodes:
        assert ours.name(key) == theirs.nodes[key]["name"]
        assert ours.degree(key) == theirs.degree(key)
    assert ours.degree("nowhere") == 0
