"""What ``ask`` shows is what runs: the printed query is a real query with the same plan,
empty questions are refused, and the text output says which message each line is."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag import Index, QueryError
from structrag.cli import cli
from structrag.query.context import CUT_MARK, MIN_CUT_TOKENS
from structrag.query.parser import parse

#: The note of a question whose dropped time scope's messages come first.
FIRST = re.compile(
    r"the (?P<which>messages|matching messages) of (?P<scopes>.+) "
    r"\((?P<count>\d+) in all\) come first"
)

LOCOMO = Path(
    os.environ.get(
        "STRUCTRAG_LOCOMO",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json",
    )
)


def _locomo_questions() -> list[str]:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    return [str(qa["question"]) for sample in data for qa in sample["qa"] if qa.get("question")]


@pytest.fixture(scope="module")
def locomo_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    """The first LoCoMo conversation, indexed (every question is asked of it)."""
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not found at {LOCOMO} (set STRUCTRAG_LOCOMO)")
    first = json.loads(LOCOMO.read_text(encoding="utf-8"))[:1]
    path = tmp_path_factory.mktemp("locomo") / "conv.json"
    path.write_text(json.dumps(first), encoding="utf-8")
    with Index(tmp_path_factory.mktemp("locomo-index") / "ix") as index:
        index.ingest([path], workers=1)
        yield index


def test_the_printed_query_runs_with_the_same_plan_for_every_locomo_question(
    locomo_index: Index,
) -> None:
    questions = _locomo_questions()
    assert len(questions) > 900
    (conversation,) = [c.id for c in locomo_index.conversations()]
    widened = kept = 0
    for question in questions:
        answer = locomo_index.ask(question, conversation=conversation, budget=300)
        node = parse(answer.query)
        assert parse(node.to_query()) == node, question
        result = locomo_index.query(answer.query, conversation=conversation, limit=None)
        assert result.plan == answer.plan, question
        expected = [m.id for m in result.messages]
        first = [m for note in answer.notes if (m := FIRST.fullmatch(note))]
        if first:
            # A time scope the widening dropped: its messages come first (all of them
            # when there are few), then the printed query's other matches.
            scope = locomo_index.query(first[0]["scopes"], conversation=conversation, limit=None)
            members = [m.id for m in scope.messages]
            assert len(members) == int(first[0]["count"]), question
            everyone = first[0]["which"] == "messages"
            extra = [m for m in members if m not in expected] if everyone else []
            expected = (
                [m for m in expected if m in members]
                + extra
                + [m for m in expected if m not in members]
            )
            kept += 1
        assert expected == [m.id for m in answer.ranked], question
        widened += any("widened" in note for note in answer.notes)
    assert widened  # the widened queries were checked too, not only the first ones
    assert kept  # and so were those that keep a dropped time scope's messages first


@pytest.fixture(scope="module")
def ix(example_index: Path) -> Iterator[Index]:
    with Index(example_index, read_only=True) as index:
        yield index


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_an_empty_question_is_an_error(ix: Index, question: str) -> None:
    with pytest.raises(QueryError, match="empty"):
        ix.ask(question)


@pytest.mark.parametrize("question", ["!!!", "?", "👍 ❤️", "... ?!"])
def test_a_question_without_words_is_an_error(ix: Index, question: str) -> None:
    with pytest.raises(QueryError, match="no words"):
        ix.ask(question)


def test_a_question_of_one_word_in_any_script_is_asked(ix: Index) -> None:
    assert ix.ask("Biscuit?").context
    assert ix.ask("日本").question == "日本"


def test_a_budget_too_small_for_the_best_match_says_so(ix: Index) -> None:
    """The best match is longer than the budget: the context holds its start, cut, and a
    note says so; with too little room even for a start, the context holds what fits and
    the note names the message and what it would cost; with room for it, no note."""
    roomy = ix.ask("When did Marco adopt Biscuit?", budget=1000)
    best = roomy.context.messages[0]
    assert not any("budget of" in n for n in roomy.notes)
    tight = ix.ask("When did Marco adopt Biscuit?", budget=best.tokens - 1)
    first = tight.context.messages[0]
    assert first.id == best.id and first.cut and first.text.endswith(CUT_MARK)
    assert best.text.startswith(first.text.removesuffix(CUT_MARK))
    assert tight.context.tokens <= best.tokens - 1
    assert any(f"{best.id}, is longer than the budget" in n for n in tight.notes)
    tiny = ix.ask("When did Marco adopt Biscuit?", budget=MIN_CUT_TOKENS - 1)
    assert best.id not in tiny.context.message_ids
    (said,) = [n for n in tiny.notes if "does not fit" in n]
    assert f"{best.id} ({best.tokens} tokens)" in said
    assert f"budget of {MIN_CUT_TOKENS - 1} tokens" in said


def test_a_context_of_the_vector_fill_alone_says_so(ix: Index) -> None:
    """No message matches the words (another language, words the chat never uses): the
    context is the embedding's nearest messages, and a note says that."""
    for question in ("马可什么时候收养了饼干？", "xyzzy plugh?"):
        answer = ix.ask(question, budget=200)
        assert not len(answer.ranked) and answer.context.messages
        assert {m.source for m in answer.context.messages} == {"vector"}
        assert any("no message matches the question's words" in n for n in answer.notes)
    matched = ix.ask("When did Marco adopt Biscuit?", budget=200)
    assert not any("no message matches" in n for n in matched.notes)


def test_counts_asked_of_the_python_api_are_checked(ix: Index, tmp_path: Path) -> None:
    """What the CLI refuses with a range, the Python API refuses with a clear error (a
    negative limit returned everything, a negative top failed inside DuckDB)."""
    from structrag import ConfigError, MemoryInputError

    calls: tuple[Callable[[], object], ...] = (
        lambda: ix.query("Biscuit", limit=-1),
        lambda: ix.query("Biscuit", limit=0),
        lambda: ix.entities(top=-1),
        lambda: ix.topics(top=0),
    )
    for call in calls:
        with pytest.raises(ConfigError, match="must be at least 1"):
            call()
    assert len(ix.query("Biscuit", limit=None).messages) > len(
        ix.query("Biscuit", limit=1).messages
    )
    with pytest.raises(ConfigError, match="no kind of knowledge 'bogus'"):
        ix.refs("bogus")  # at the call, not at the first ref read
    with pytest.raises(ConfigError, match="from 1 to 1,000,000 tokens, not True"):
        ix.ask("Who adopted Biscuit?", budget=True)
    with Index(tmp_path / "mem") as index:
        memory = index.memory("bot")
        memory.add("I moved to Lisbon in May.", user="sam", room="dm")
        asks: tuple[Callable[[], object], ...] = (
            lambda: memory.search("Lisbon", count=-1),
            lambda: memory.recent(count=0),
            lambda: index.knowledge.search("Lisbon", count=0),
        )
        for ask in asks:
            with pytest.raises(MemoryInputError, match="must be at least 1"):
                ask()


def test_the_cli_refuses_an_empty_question(example_index: Path) -> None:
    result = CliRunner().invoke(cli, ["ask", "", "--db", str(example_index)])
    assert result.exit_code == 1
    assert "the question is empty" in str(result.exception) + result.output


def test_a_question_that_is_too_long_is_refused(ix: Index) -> None:
    with pytest.raises(QueryError, match="limit"):
        ix.ask("why " * 1000)


def test_widening_notes_appear_once(ix: Index) -> None:
    answer = ix.ask("What did Marco buy in March 2021?", budget=300)
    widened = [n for n in answer.notes if "widened" in n]
    assert widened and len(widened) == len(set(widened))
    assert len(answer.notes) == len(set(answer.notes))


def test_text_output_names_each_message(example_index: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ask", "When did Marco adopt Biscuit?", "--db", str(example_index), "--budget", "80"]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "Marco:" in line]
    assert lines and lines[0].split()[0] == "m11"


def test_text_output_names_the_conversation_when_there_are_several(
    tmp_path: Path, example_chat: Path
) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(
        json.dumps({"id": "x1", "speaker": "Ana", "text": "Biscuit the beagle chewed my shoe."})
        + "\n"
    )
    db = str(tmp_path / "ix")
    with Index(db) as index:
        index.ingest([example_chat, other])
    result = CliRunner().invoke(cli, ["ask", "What did Biscuit do?", "--db", db, "--budget", "200"])
    assert result.exit_code == 0, result.output
    speakers = ("Ana:", "Marco:", "Priya:", "Sam:")
    labels = {
        line.split()[0] for line in result.output.splitlines() if any(s in line for s in speakers)
    }
    assert "other/x1" in labels
    assert any(label.startswith("friends/m") for label in labels)


def test_a_person_named_narrows_a_question_to_the_conversations_they_are_in(tmp_path: Path) -> None:
    """Over several conversations, "What books has Ana read?" answers from Ana's chat
    (where she speaks, or is talked of), not another pair's talk of books."""
    lines = {
        "ana.jsonl": [
            ("Ana", "I finished a novel by Ursula Le Guin last night, The Dispossessed."),
            ("Ben", "Nice. How was the trip to Lisbon?"),
            ("Ana", "Lovely, the tram rides were the best part."),
        ],
        "about.jsonl": [
            ("Dev", "Ana told me she reads on the train every morning."),
            ("Eli", "She always has something in her bag."),
        ],
        "others.jsonl": [
            ("Cara", "I read three books this month, all of them thrillers."),
            ("Dan", "Books are my thing too: I read a book a week."),
            ("Cara", "Which book are you reading now?"),
        ],
    }
    for name, turns in lines.items():
        (tmp_path / name).write_text(
            "".join(
                json.dumps({"id": f"t{i}", "speaker": who, "text": text}) + "\n"
                for i, (who, text) in enumerate(turns)
            ),
            encoding="utf-8",
        )
    with Index(tmp_path / "ix") as index:
        index.ingest(sorted(tmp_path.glob("*.jsonl")))
        answer = index.ask("What books has Ana read?", budget=400)
        assert {m.conversation for m in answer.context.messages} == {"ana", "about"}
        note = "Ana speaks or is named in about, ana: the answer is looked for there"
        assert any(n.startswith(note) for n in answer.notes), answer.notes
        assert "others" not in {m.conversation for m in answer.ranked}
        # in one conversation nothing moves, and nothing is said
        alone = index.ask("What books has Ana read?", conversation="others", budget=400)
        assert not any("come first" in note for note in alone.notes)
        assert {m.conversation for m in alone.context.messages} == {"others"}


def _chats(folder: Path, chats: dict[str, list[tuple[str, str, str]]]) -> list[Path]:
    """JSON Lines chats, one per name, of (month of 2023, speaker, text) turns."""
    paths = []
    for name, turns in chats.items():
        path = folder / f"{name}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {"id": f"t{i}", "speaker": who, "text": text, "timestamp": f"2023-0{month}-10"}
                )
                + "\n"
                for i, (month, who, text) in enumerate(turns)
            ),
            encoding="utf-8",
        )
        paths.append(path)
    return paths


def test_a_question_about_a_person_widens_in_their_conversation_not_elsewhere(
    tmp_path: Path,
) -> None:
    """Another pair's matches do not answer a question that names Melanie, even when none
    of Melanie's messages says its words in its month: her own chat is widened, then its
    nearest messages fill the context; nor does the fill reach other conversations."""
    paths = _chats(
        tmp_path,
        {
            "mel": [
                ("3", "Melanie", "I painted a sunset over the lake with my kids last weekend."),
                ("3", "Caroline", "That sounds so peaceful, I love your paintings."),
                ("5", "Melanie", "We went camping in the mountains, the kids loved it."),
            ],
            "others": [
                ("8", "John", "I painted the fence of the garden yesterday, took hours."),
                ("8", "Maria", "We painted the kitchen blue this month."),
                ("8", "John", "Painting is tiring but the garden looks great now."),
                # enough of them that the nearest messages of the whole index are theirs
                *(("9", "Maria", f"The garden fence needs coat number {i}.") for i in range(300)),
            ],
        },
    )
    with Index(tmp_path / "ix") as index:
        index.ingest(paths)
        answer = index.ask("What did Melanie paint in August 2023?", budget=400)
        assert answer.context.messages
        assert {m.conversation for m in answer.context.messages} == {"mel"}, answer.notes
        assert "t0" in answer.message_ids  # widened in her chat: the painting, in March
        elsewhere = index.ask("What did Melanie say about the garden fence?", budget=400)
        # her chat's nearest messages fill the context: all three fit
        assert elsewhere.message_ids and set(elsewhere.message_ids) == {"t0", "t1", "t2"}
        assert {m.conversation for m in elsewhere.context.messages} == {"mel"}
        assert any("none of the" in n for n in elsewhere.notes), elsewhere.notes
        assert not any("no message matches" in n for n in elsewhere.notes), elsewhere.notes
