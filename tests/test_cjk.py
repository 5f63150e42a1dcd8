"""Chinese and Japanese text, written without spaces, searched by word: real ingests (DuckDB,
Whoosh, spaCy) into ``tmp_path``, then ``query`` and ``ask``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.analysis import stems, term_key, words
from tests.chat_helpers import PLAIN_TERMS, spaced_chat

CHAT = [
    ("1", "Li", "我喜欢吃寿司。"),
    ("2", "Wang", "我的猫很可爱。"),
    ("3", "Yuki", "昨日コンピュータを買いました。"),
    ("4", "Li", "We went to Tokyo and ate 美味しいラーメン together."),
    ("5", "Wang", "北京大学的图书馆很大。"),
    ("6", "Li", "我在大学学习了四年。"),
]


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    folder = tmp_path_factory.mktemp("cjk")
    chat = spaced_chat(folder / "chat.jsonl", CHAT)
    with Index(folder / "index") as index:
        index.ingest([chat])
        yield index


def ids(index: Index, expression: str) -> list[str]:
    return [m.id for m in index.query(expression, limit=None).messages]


def said(index: Index, expression: str) -> list[str]:
    """The messages found that are no filler (the filler is found by its neighbour)."""
    return [i for i in ids(index, expression) if "f" not in i]


def test_a_chinese_word_inside_a_sentence_is_found_by_query(ix: Index) -> None:
    assert ids(ix, "寿司")[0] == "1"
    assert said(ix, "寿司") == ["1"]
    assert said(ix, "图书馆") == ["5"]
    # a word of several bigrams is the word, not any message with one of them: 大学
    # alone (message 6) is no 北京大学
    assert said(ix, "北京大学") == ["5"]
    assert set(said(ix, "大学")) == {"5", "6"}
    assert "whole [北京大学]" in ix.query("北京大学").plan
    # under AND and NOT it is exact, as a quoted phrase is
    assert ids(ix, "大学 AND NOT 北京大学") == ["6"]
    assert ids(ix, "寿司 AND speaker:Li") == ["1"]


def test_a_chinese_question_finds_the_message_by_ask(ix: Index) -> None:
    answer = ix.ask("谁喜欢吃寿司？")
    assert answer.ranked[0].id == "1"
    assert "寿司" in answer.query
    assert ix.ask("北京大学的图书馆怎么样？").ranked[0].id == "5"
    # the query that ask prints runs in query with the same result
    assert ids(ix, answer.query)[0] == "1"


def test_a_japanese_katakana_word_is_found(ix: Index) -> None:
    assert ids(ix, "コンピュータ")[0] == "3"
    assert said(ix, "コンピュータ") == ["3"]
    assert ix.ask("誰がコンピュータを買いましたか").ranked[0].id == "3"


def test_a_single_character_word_is_found(ix: Index) -> None:
    assert said(ix, "猫") == ["2"]
    assert ids(ix, "猫 AND speaker:Wang") == ["2"]
    assert not any("only stopwords" in n for n in ix.query("猫").notes)


def test_english_words_of_a_mixed_message_match_as_before(ix: Index) -> None:
    assert ids(ix, "Tokyo")[0] == "4"
    assert ids(ix, "together")[0] == "4"  # stemmed: togeth
    assert ids(ix, "tokyo AND ラーメン") == ["4"]
    assert said(ix, "ラーメン") == ["4"]
    assert ix.ask("Who ate ラーメン in Tokyo?").ranked[0].id == "4"


def test_a_speaker_named_in_chinese_inside_a_question(tmp_path: Path) -> None:
    chat = tmp_path / "c.jsonl"
    rows = [
        {"id": "1", "speaker": "李明", "text": "我喜欢吃寿司。"},
        {"id": "2", "speaker": "王芳", "text": "我也喜欢吃寿司，但是更喜欢拉面。"},
    ]
    chat.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        answer = index.ask("王芳喜欢吃什么？")
        assert "speaker:王芳" in answer.query
        assert answer.ranked[0].id == "2"


def test_ascii_analysis_is_unchanged_and_cjk_beside_it_is_split() -> None:
    for text, expected in PLAIN_TERMS:
        assert stems(text) == expected
    assert stems("Zoë's café, naïve résumés") == ["zoë", "café", "naïv", "résumé"]
    assert term_key("Kevin Scott") == "kevin scott"
    # Korean is written with spaces: its words stay words
    assert stems("한국어 텍스트") == ["한국어", "텍스트"]
    # Chinese and Japanese: characters and bigrams, the English words beside as before
    assert stems("We ate 寿司 in Tokyo, 猫!") == ["we", "ate", "寿", "寿司", "司", "tokyo", "猫"]
    assert stems("北京大学") == ["北", "北京", "京", "京大", "大", "大学", "学"]
    assert words("我喜欢寿司", unigrams=False) == ["我喜", "喜欢", "欢寿", "寿司"]
    assert term_key("北京大学") == "北 北京 京 京大 大 大学 学"


def test_an_index_built_before_the_cjk_analysis_says_to_reindex(tmp_path: Path) -> None:
    with Index(tmp_path / "index") as index:
        index.ingest([spaced_chat(tmp_path / "chat.jsonl", CHAT)])
        assert not any("reindex" in n for n in index.query("寿司").notes)  # a new index
        # An index written before the analysis recorded itself: its CJK runs were terms.
        index.store.sql("DELETE FROM meta WHERE key = 'text_analysis'")
        index.store.release()
    with Index(tmp_path / "index") as index:
        for notes in (index.query("寿司").notes, index.ask("谁喜欢吃寿司？").notes):
            assert any("structrag reindex" in n for n in notes), notes
        assert not any("reindex" in n for n in index.query("pottery").notes)  # no CJK
        assert not any("reindex" in n for n in index.query("火山").notes)  # said nowhere
        index.reindex()
        assert not any("reindex" in n for n in index.query("寿司").notes)
