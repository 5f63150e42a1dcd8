"""Chat question sets: questions over chat exports, with evidence named by its text, read
by the recall benchmark like LoCoMo files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structrag.bench.chats import FORMAT
from structrag.bench.locomo import ingest_paths, load_questions
from structrag.bench.recall import run_recall
from structrag.errors import InputError

INFORMAL = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "informal"

CHAT = [
    "[28.12.2023, 20:01:40] Ana: \u200eMessages and calls are end-to-end encrypted.",
    "[28.12.2023, 20:02:02] Ana: hiii are u back in town?",
    "[28.12.2023, 20:02:40] Bo: not yet, still at my parents",
    "[28.12.2023, 20:03:10] Bo: \u200eimage omitted",
    "[28.12.2023, 20:04:00] Ana: haha",
    "[02.01.2024, 09:15:00] Bo: my cat Mochi threw up twice 😿",
    "[02.01.2024, 09:16:30] Ana: haha",
    "[02.01.2024, 18:30:00] Bo: vet says no blockage, she is fine",
]


def _set(tmp_path: Path, questions: list[dict[str, object]]) -> Path:
    (tmp_path / "ana_bo.txt").write_text("\n".join(CHAT) + "\n", encoding="utf-8")
    path = tmp_path / "questions.json"
    path.write_text(
        json.dumps(
            {
                "format": FORMAT,
                "version": 1,
                "chats": {"ana_bo": {"file": "ana_bo.txt", "questions": questions}},
            }
        ),
        encoding="utf-8",
    )
    return path


def test_evidence_text_names_the_message_ids_the_importer_gives(tmp_path: Path) -> None:
    path = _set(
        tmp_path,
        [
            {
                "question": "What did the vet say about Mochi?",
                "category": "multi-hop",
                "answer": "no blockage",
                "evidence": ["my cat Mochi threw up", "vet says no blockage"],
            }
        ],
    )
    (question,) = load_questions([path])
    assert question.conversation == "ana_bo"
    assert question.category == 1 and question.category_name == "multi-hop"
    # system lines and the omitted image are no messages: ids count messages only
    assert question.evidence == ("4", "6")
    assert ingest_paths([path]) == [(tmp_path / "ana_bo.txt").resolve()]


def test_a_piece_held_by_several_messages_counts_when_one_is_exactly_it(tmp_path: Path) -> None:
    path = _set(tmp_path, [{"question": "q?", "category": "single-hop", "evidence": ["haha"]}])
    with pytest.raises(InputError, match="2 messages hold"):
        load_questions([path])
    exact = _set(tmp_path, [{"question": "q?", "category": "single-hop", "evidence": ["not yet"]}])
    assert load_questions([exact])[0].evidence == ("2",)


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ({"question": "q?", "category": "single-hop", "evidence": ["a dog"]}, "no message holds"),
        ({"question": "q?", "category": "gossip", "evidence": ["haha"]}, "unknown category"),
        ({"category": "single-hop"}, "expected an object with a 'question'"),
    ],
)
def test_a_bad_question_is_an_error_that_says_where(
    tmp_path: Path, question: dict[str, object], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load_questions([_set(tmp_path, [question])])


def test_a_missing_chat_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "questions.json"
    path.write_text(
        json.dumps({"format": FORMAT, "chats": {"x": {"file": "nope.txt", "questions": []}}}),
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="not found"):
        ingest_paths([path])


def test_bench_recall_runs_on_a_chat_question_set(tmp_path: Path) -> None:
    path = _set(
        tmp_path,
        [
            {
                "question": "What is the name of Bo's cat?",
                "category": "single-hop",
                "evidence": ["my cat Mochi threw up"],
            }
        ],
    )
    rows = run_recall([path], tmp_path / "out", systems=["structured"], budgets=[40, 400])
    recall = {row.budget: row.recall["overall"] for row in rows}
    assert recall[400] == 1.0


def test_the_informal_chats_resolve() -> None:
    """The bundled informal chats (our own writing): every piece of evidence names one
    message, and every kind of question is there."""
    questions = load_questions([INFORMAL / "questions.json"])
    assert len(questions) >= 80
    assert {q.category_name for q in questions} == {
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
    }
    assert len({q.conversation for q in questions}) >= 4
    assert all(q.evidence for q in questions)
