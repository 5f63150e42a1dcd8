"""Questions: translation, ranking, and an answer context that never exceeds its budget."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.query.context import CUT_MARK, render_message
from structrag.query.question import question_kind
from structrag.tokens import get_counter
from structrag.translate.offline import SpacyTranslator

QUESTIONS = [
    "When did Marco adopt Biscuit?",
    "What did Marco tell Priya about the engine?",
    "Who teaches the cooking class?",
    "What does Priya bake at the bakery?",
    "Where did Marco sail to in July 2024?",
    "How far did Priya run without knee pain?",
    "What is the capital of Mongolia?",
]


@pytest.fixture(scope="module")
def ix(example_index: Path) -> Iterator[Index]:
    with Index(example_index, read_only=True) as index:
        yield index


@pytest.mark.parametrize("budget", [30, 120, 400, 1000])
@pytest.mark.parametrize("question", QUESTIONS)
def test_context_never_exceeds_the_budget(ix: Index, question: str, budget: int) -> None:
    answer = ix.ask(question, budget=budget)
    counter = get_counter("cl100k_base")
    assert answer.context.tokens == counter.count(answer.context.text)
    assert answer.context.tokens <= budget
    stored = {s.message.id: s for s in ix.messages()}
    for packed in answer.context.messages:
        line = render_message(stored[packed.id])
        if packed.cut:  # the best match, longer than the budget: its start
            assert packed is answer.context.messages[0] and packed.text.endswith(CUT_MARK)
            line = packed.text.removesuffix(CUT_MARK)
        assert line in answer.context.text
    assert len(set(answer.message_ids)) == len(answer.message_ids)


def test_the_evidence_comes_first(ix: Index) -> None:
    answer = ix.ask("When did Marco adopt Biscuit?", budget=200)
    assert answer.message_ids[0] == "m11"
    answer = ix.ask("Who is the teacher of the cooking class?", budget=200)
    assert "m23" in answer.message_ids[:3]


def test_translation_is_shown_as_a_query_expression(ix: Index) -> None:
    answer = ix.ask("What did Marco tell Priya about the engine?", budget=300)
    assert "action(Marco, tell, *, Priya)" in answer.query
    assert answer.kind == "what"
    assert "Fuse" in answer.plan


def test_time_phrases_become_scopes(ix: Index) -> None:
    answer = ix.ask("What did Marco do in July 2024?", budget=300)
    assert 'when:"in July 2024"' in answer.query
    july = {
        s.message.id
        for s in ix.messages()
        if s.message.timestamp and s.message.timestamp.month == 7
    }
    structured = [m.id for m in answer.context.messages if m.source == "structured"]
    assert structured and set(structured) <= july


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("What did Eli say after March 2024?", "after March 2024"),
        ("What did Alice say before March 2024?", "before March 2024"),
        ("What has Bob said since May 2024?", "since May 2024"),
        ("What did Dana say until February 2024?", "until February 2024"),
        ("What did Chen say from January to March 2024?", "from January to March 2024"),
        ("What did Alice say on April 15?", "on April 15"),
        ("What happened between February 1 and March 15?", "between February 1 and March 15"),
        ("What did Bob say on 2024-01-22?", "on 2024-01-22"),
        ("What happened in the last two weeks?", "in the last two weeks"),
        ("What did Bob say until today?", "until today"),
        ("What has Eli said since yesterday?", "since yesterday"),
    ],
)
def test_time_phrases_with_a_direction_or_without_a_year(question: str, phrase: str) -> None:
    found = SpacyTranslator().translate(question, ["Alice", "Bob", "Chen", "Dana", "Eli"])
    assert found.time_phrases == [phrase]
    assert f'when:"{phrase}"' in found.query.to_query()
    assert not {"march", "april", "february", "may"} & {
        w.lower() for w in found.query.to_query().replace('"', " ").split() if "when:" not in w
    } - set(phrase.lower().split())


def test_the_verb_may_is_no_month() -> None:
    found = SpacyTranslator().translate("Who said this may be too expensive?", ["Bob"])
    assert found.time_phrases == []
    assert "may" not in found.query.to_query().lower().replace("when", "")
    assert SpacyTranslator().translate("What did Bob do in May 2024?", ["Bob"]).time_phrases
    for lower in ("what did bob do in may?", "what happened last may?"):  # typed lower case
        assert SpacyTranslator().translate(lower, ["Bob"]).time_phrases, lower
    assert not SpacyTranslator().translate("this may not work, who said so?", []).time_phrases


def test_a_month_or_day_before_and_after_a_date(ix: Index) -> None:
    """On the bundled chat (3 May to 20 July 2024): the directed scopes keep what they
    say, and a day without a year is the latest such day."""
    dated = {s.message.id: s.message.timestamp for s in ix.messages() if s.message.timestamp}
    for question, keep in (
        ("What did Marco say after June 2024?", lambda t: t.month >= 7),
        ("What did Marco say before June 2024?", lambda t: t.month <= 5),
        ("What did Priya say on May 3?", lambda t: (t.month, t.day) == (5, 3)),
    ):
        answer = ix.ask(question, budget=400)
        structured = [m.id for m in answer.context.messages if m.source == "structured"]
        assert structured, question
        assert all(keep(dated[i]) for i in structured), (question, structured)


def test_widening_when_the_scope_finds_nothing(ix: Index) -> None:
    answer = ix.ask("What did Marco buy in March 2021?", budget=300)
    assert any("widened" in note for note in answer.notes)
    assert answer.message_ids


def test_a_group_of_scopes_alone_is_not_widened() -> None:
    """Dropping its scopes would leave it nothing to rank by (a boosted speaker alone)."""
    from structrag.query import ast
    from structrag.query.question import widen

    only = ast.Or(
        (
            ast.Boost(ast.PeopleScope("speaker", "Nate"), 1.5),
            ast.TimeScope(None, None, "2023", "when"),
        )
    )
    assert widen(only, 2) is None
    words = ast.Or((ast.Term("cook"), ast.TimeScope(None, None, "last weekend", "when")))
    widened = widen(words, 2)
    assert widened is not None and ast.Term("weekend") in widened.items
    # a year stays as a word (transcripts say "published in 2008"), but alone ranks nothing
    book = ast.Or((ast.Term("book"), ast.TimeScope(None, None, "in 2008", "when")))
    widened = widen(book, 2)
    assert widened is not None and ast.Term("2008") in widened.items


def test_a_message_without_text_is_never_packed(tmp_path: Path) -> None:
    """An empty message ranked in by its neighbours' words would cost a line that says
    nothing ("[29 December 2023] Priya: ")."""
    chat = tmp_path / "trip.jsonl"
    rows = [
        ("a1", "Priya", "Who is bringing sandwiches to Sintra?"),
        ("a2", "Marco", "I can bring sandwiches for everyone."),
        ("a3", "Priya", ""),
        ("a4", "Sam", "Great, sandwiches and lemonade for Sintra then."),
    ]
    chat.write_text(
        "".join(
            json.dumps({"id": i, "speaker": who, "text": text, "conversation": "trip"}) + "\n"
            for i, who, text in rows
        )
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        answer = index.ask("Who is bringing sandwiches to Sintra?", budget=200)
        assert "a2" in answer.message_ids and "a3" not in answer.message_ids
        assert "a3" not in index.ask("sandwiches", budget=2000).message_ids


def test_the_forms_of_say_are_no_words_to_search_for(ix: Index) -> None:
    """ "What has Marco said?" asks for Marco's messages, not for the word "said"."""
    said = ix.ask("What has Marco said?", budget=300)
    say = ix.ask("What did Marco say?", budget=300)
    assert "said" not in said.query.split()
    assert said.query == say.query and said.message_ids == say.message_ids


def test_contractions_leave_no_word_fragments_to_search_for(ix: Index) -> None:
    """ "I'll" and "we've" leave no "ll" or "ve" to search for. (A negative contraction
    is kept: "won't" searches "won", as the index reads "won't" in a message, so "What
    does Jon tell Gina he won't do?" finds "I won't quit".)"""
    for question in ("What did Marco say? I'll ask.", "What have we've heard from Sam?"):
        words = ix.ask(question, budget=100).query.split()
        assert not {"ll", "ve"} & set(words), question
    assert "didn" in ix.ask("What didn't Marco buy?", budget=100).query.split()


def test_what_a_person_said_ranks_their_messages_above_those_naming_them(ix: Index) -> None:
    """ "What did Sam say?": Sam's messages, not Priya's "Thanks for telling me, Sam"
    (which names Sam and has him as its recipient) first."""
    answer = ix.ask("What did Sam say?", budget=300)
    first = answer.context.messages[0]
    assert first.id != "m22" and "] Sam: " in first.text, first.text


def test_leftover_budget_is_filled_from_vectors(ix: Index) -> None:
    answer = ix.ask("What is the capital of Mongolia?", budget=300)
    assert answer.context.messages
    assert {m.source for m in answer.context.messages} == {"vector"}


def test_answer_json_has_the_documented_keys(ix: Index) -> None:
    data = ix.ask("When did Marco adopt Biscuit?", budget=200).as_dict()
    assert {
        "question",
        "conversation",
        "budget",
        "query",
        "messages",
        "message_ids",
        "context",
        "tokens",
    } <= set(data)
    assert data["message_ids"] == [m["id"] for m in data["messages"]]
    assert all({"id", "conversation", "score"} <= set(m) for m in data["messages"])


def test_graph_expansion_finds_the_friend(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    rows = [
        ("Caroline", "My friend Melanie just started a new job."),
        ("Bob", "Nice, good for her."),
        ("Caroline", "Melanie works at the science museum as a curator."),
        ("Bob", "I work at the bakery on Main Street."),
        ("Caroline", "The weather is lovely today."),
        ("Bob", "It is, we should go for a walk."),
    ]
    path.write_text("\n".join(json.dumps({"speaker": s, "text": t}) for s, t in rows))
    with Index(tmp_path / "idx") as index:
        index.ingest([path])
        answer = index.ask("Where does Caroline's friend work?", budget=40)
    assert any(note.endswith("-> Melanie") for note in answer.notes)
    assert "Melanie^0.3" in answer.query
    assert "3" in answer.message_ids[:2]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did she go?", "when"),
        ("How many dogs?", "how many"),
        ("Who called?", "who"),
        ("Did Ann come?", "yes/no"),
        ("Where is it?", "where"),
        ("List the books", "list"),
    ],
)
def test_question_kinds(question: str, kind: str) -> None:
    assert question_kind(question.rstrip("?").split()) == kind


@pytest.mark.parametrize(
    ("question", "person"),
    [
        ("What will Zoë bring?", "Zoë Ståhl"),  # the tagger takes Zoë for a pronoun
        ("What will Zoe bring?", "Zoë Ståhl"),  # accents aside
        ("What did Jurgen say about the hotel?", "Jürgen Müller"),
        ("What did Amara talk about?", "Dr. Amara Okafor"),  # after a title
        ("Did Dr. Okafor agree?", "Dr. Amara Okafor"),
    ],
)
def test_the_people_a_question_names_whatever_their_accents_and_titles(
    question: str, person: str
) -> None:
    speakers = ["Zoë Ståhl", "Dr. Amara Okafor", "Jürgen Müller", "Priya"]
    assert SpacyTranslator().translate(question, speakers).people == [person]


def test_a_speaker_scope_without_accents_finds_the_speaker(tmp_path: Path) -> None:
    chat = tmp_path / "trip.jsonl"
    chat.write_text(
        json.dumps({"id": "1", "speaker": "Zoë Ståhl", "text": "I booked the hotel in Sintra."})
        + "\n"
        + json.dumps({"id": "2", "speaker": "Priya", "text": "Great, I will bring lunch."})
        + "\n"
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        assert [m.id for m in index.query("speaker:Zoe").messages] == ["1"]
        assert not index.query("speaker:Zoe").notes
        # a last name, with or without its accents, when no first name is it
        for surname in ("speaker:Ståhl", "speaker:stahl"):
            assert [m.id for m in index.query(surname).messages] == ["1"], surname


def test_translator_finds_people_names_and_possessions() -> None:
    found = SpacyTranslator().translate(
        "What did Mel say about Caroline's adoption agency in Boston?", ["Melanie", "Caroline"]
    )
    assert set(found.people) == {"Melanie", "Caroline"}
    assert ("Caroline", "agency") in found.relations
    assert "entity:Boston" in found.query.to_query()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "structrag", *args], capture_output=True, text=True, check=False
    )


def test_cli_query_ask_and_batch(example_index: Path, tmp_path: Path) -> None:
    db = str(example_index)
    done = run_cli("query", "entity:Biscuit AND speaker:Marco", "--db", db, "--json", "--explain")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["messages"] and "plan" in data and "ast" in data
    done = run_cli("query", "action(Marco, adopt, *)", "--db", db, "--json")
    refs = json.loads(done.stdout)["semantic_refs"]
    assert refs and all(r["kind"] == "action" for r in refs)
    assert all(r["text"].startswith("Marco adopt ") for r in refs)
    messages = json.loads(done.stdout)["messages"]
    assert {r["message_id"] for r in refs} <= {m["id"] for m in messages}
    assert all(r["conversation"] == "friends" for r in refs)
    assert all(m["speaker"] == "Marco" and m["timestamp"].startswith("20") for m in messages)
    done = run_cli("query", "Biscuit", "--db", db, "--limit", "2", "--json")
    data = json.loads(done.stdout)
    assert len(data["messages"]) == 2 and data["matched"] > 2
    done = run_cli("query", "Biscuit", "--db", db, "--limit", "2")
    assert f"2 messages of {data['matched']:,} in " in done.stdout
    done = run_cli("ask", "When did Marco adopt Biscuit?", "--db", db, "--budget", "100", "--json")
    answer = json.loads(done.stdout)
    assert answer["tokens"] <= 100 and answer["message_ids"][0] == "m11"
    batch = tmp_path / "questions.jsonl"
    batch.write_text(
        '{"question": "When did Marco adopt Biscuit?", "conversation": "friends"}\n'
        '{"question": "Who teaches the cooking class?"}\n'
    )
    done = run_cli("ask", "--batch", str(batch), "--db", db, "--budget", "150")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["question"] for a in lines] == [
        "When did Marco adopt Biscuit?",
        "Who teaches the cooking class?",
    ]
    assert all(a["tokens"] <= 150 for a in lines)
    assert lines[0]["conversation"] == "friends"
    batch.write_text('{"question": "ok?"}\n{"q": 1}\n')
    done = run_cli("ask", "--batch", str(batch), "--db", db)
    assert done.returncode == 1 and "line 2" in done.stderr and "Traceback" not in done.stderr
    # line by line: the answer to line 1 is printed, then the error names line 2
    assert [json.loads(line)["line"] for line in done.stdout.splitlines()] == [1]
    batch.write_text('{"question": "ok?"}\n{"question": "ok?", "conversation": "nope"}\n')
    done = run_cli("ask", "--batch", str(batch), "--db", db)
    assert done.returncode == 1 and "line 2" in done.stderr and "'nope'" in done.stderr
    assert [json.loads(line)["line"] for line in done.stdout.splitlines()] == [1]
    done = run_cli("query", "entity(", "--db", db)
    assert done.returncode == 1 and "^" in done.stderr and "Traceback" not in done.stderr


def test_a_job_stated_as_a_position_answers_a_job_question(tmp_path: Path) -> None:
    """TypeAgent's LLM writes a person's job as a ``position`` facet: "What is Christina
    Warren's job?" finds it as it finds the spaCy extractor's ``job``."""
    intro = "I'm Christina Warren, Senior Developer Advocate at GitHub."
    chatter = ["We talk about books today.", "Science fiction is great.", "Spiders too."]
    messages = [
        {"textChunks": [text], "metadata": {"speaker": "Christina"}, "tags": [], "timestamp": None}
        for text in [*chatter, intro]
    ]
    data = {
        "nameTag": "ep",
        "fileHeader": {"version": "0.1"},
        "messages": messages,
        "semanticRefs": [
            {
                "semanticRefOrdinal": 0,
                "range": {"start": {"messageOrdinal": 3, "chunkOrdinal": 0}},
                "knowledgeType": "entity",
                "knowledge": {
                    "name": "Christina Warren",
                    "type": ["person"],
                    "facets": [{"name": "position", "value": "Senior Developer Advocate"}],
                },
            }
        ],
    }
    path = tmp_path / "ep_index_data.json"
    path.write_text(json.dumps(data))
    with Index(tmp_path / "ix") as index:
        index.ingest([path])
        answer = index.ask("What is Christina Warren's job?", budget=60)
        assert "facet.job" in answer.query and answer.message_ids[0] == "3"
        found = index.query('entity(name="Christina Warren", facet.job=*)').messages
        assert [m.id for m in found] == ["3"]


def test_a_possessive_before_work_asks_about_the_relation() -> None:
    """ "Where does Marco's cousin work?": the tagger makes "work" a noun with "cousin"
    before it; the question is the cousin's job, found through the graph, not Marco's."""
    found = SpacyTranslator().translate("Where does Marco's cousin work?", ["Marco", "Priya"])
    assert ("Marco", "cousin") in found.relations
    assert "facet.job" not in found.query.to_query()


def test_a_category_with_a_typo_finds_its_kinds(tmp_path: Path) -> None:
    """ "Which sprots came up?": the category word, one edit from a word the history has,
    brings the kinds of sport (judo, cycling) as the right spelling does; the printed
    query (kind:sprots~) parses back."""
    from structrag.query.parser import parse as parse_query

    chat = tmp_path / "team.jsonl"
    filler = [
        (str(i), "Bob", f"Status update number {i}: the build is green.") for i in range(3, 13)
    ]
    rows = [
        ("1", "Alice", "Which sport should the team try this year?"),
        *filler,  # far from the word "sport": only its kinds bring message 2
        ("2", "Dana", "I'd say judo, or cycling on Sundays."),
    ]
    chat.write_text(
        "".join(json.dumps({"id": i, "speaker": s, "text": t}) + "\n" for i, s, t in rows)
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        typo = index.ask("Which sprots came up?", budget=80)
        assert "kind:sprots~" in typo.query
        assert parse_query("kind:sprots~ came").to_query() == "kind:sprots~ came"
        assert typo.context.messages[0].id == "2"
        assert index.ask("Which sports came up?", budget=80).context.messages[0].id == "2"
