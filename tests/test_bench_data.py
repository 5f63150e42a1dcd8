"""The benchmarks' data, checked: evidence matched to the turns' real ids, clean errors
for malformed or undecodable files, unique question ids, options checked before the
ingest, results replaced whole, and the in-sample note only where it applies. Runs use a
real DuckDB file and Whoosh index in ``tmp_path``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from structrag import Index
from structrag.bench.locomo import (
    DEFAULTS_CHOSEN_ON,
    load_questions,
    read_questions,
    resolve_evidence,
)
from structrag.bench.memory import run_memory
from structrag.bench.recall import RECORDS, as_names, rescore, run_recall, write_tables
from structrag.bench.report import recall_section, write_report
from structrag.bench.synth import write_corpus
from structrag.bench.systems import BM25System
from structrag.cli import cli
from structrag.cli.bench import _int_list
from structrag.errors import ConfigError, InputError
from tests.conftest import locomo_sample
from tests.test_bench import FIXTURE_RESULTS, qa_sample
from tests.test_chat_questions import _set as chat_set


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def renamed(sample: dict[str, Any], rename: Any) -> dict[str, Any]:
    """The sample with every turn's dia_id passed through ``rename``."""
    conversation = sample["conversation"]
    for key, turns in conversation.items():
        if re.fullmatch(r"session_\d+", key):
            for turn in turns:
                turn["dia_id"] = rename(turn["dia_id"])
    return sample


def padded(dia_id: str) -> str:
    session, turn = dia_id[1:].split(":")
    return f"D{int(session):02d}:{int(turn):02d}"


def with_qa(sample: dict[str, Any], *qa: tuple[str, Any, Any]) -> dict[str, Any]:
    sample["qa"] = [{"question": q, "evidence": e, "category": c} for q, e, c in qa]
    return sample


# -- evidence against the turns' own ids -------------------------------------------------


@pytest.mark.parametrize(
    ("items", "ids", "expected", "unknown"),
    [
        (["D01:04"], ["D01:03", "D01:04"], ("D01:04",), []),  # as written: not rewritten
        (["D1:4"], ["D01:03", "D01:04"], ("D01:04",), []),  # normalised to the real id
        (["T1"], ["T1", "T2"], ("T1",), []),
        (["d1:1"], ["D1:1"], ("D1:1",), []),
        (["D8:6; D9:17"], ["D8:6", "D9:17"], ("D8:6", "D9:17"), []),
        (["D:11:26", "D11:26"], ["D11:26"], ("D11:26",), []),
        (["D10:19", "D1:1"], ["D1:1"], ("D10:19", "D1:1"), [("D10:19", True)]),
        (["D", "D1:1"], ["D1:1"], ("D1:1",), [("D", False)]),
    ],
)
def test_evidence_is_matched_to_the_conversations_ids(
    items: list[str], ids: list[str], expected: tuple[str, ...], unknown: list[Any]
) -> None:
    assert resolve_evidence(items, ids) == (expected, unknown)


def test_questions_keep_evidence_that_is_a_turn_id_as_written(tmp_path: Path) -> None:
    pad = renamed(locomo_sample("conv-pad"), padded)
    with_qa(pad, ("Bob's cat?", ["D01:04"], 4), ("Alice volunteers?", ["D1:1"], 4))
    other = renamed(locomo_sample("conv-t"), lambda d: "T" + d.replace("D", "").replace(":", ""))
    with_qa(other, ("Bob's cat?", ["T14"], 4), ("Lower?", ["t14"], 4))
    lower = with_qa(locomo_sample("conv-low"), ("Bob's cat?", ["d1:4"], 4))
    path = write(tmp_path / "ids.json", [pad, other, lower])
    found = {q.qid: q.evidence for q in load_questions([path])}
    assert found == {
        "conv-pad#0": ("D01:04",),
        "conv-pad#1": ("D01:01",),
        "conv-t#0": ("T14",),
        "conv-low#0": ("D1:4",),
    }
    # "t14" is no turn id, and reads as no D<session>:<turn>: left out, with a warning.
    loaded = read_questions([path])
    assert loaded.without_evidence == 1
    assert loaded.warnings == [
        "ids.json: question conv-t#1: evidence 't14' names no turn of conv-t; left out"
    ]


@pytest.mark.parametrize(
    ("evidence", "shown"),
    [("D1:1", '"D1:1"'), ([1], "[1]"), (["D1:1", None], '["D1:1", null]'), ({"a": 1}, '{"a"')],
)
def test_evidence_that_is_not_a_list_of_strings_is_an_error(
    tmp_path: Path, evidence: Any, shown: str
) -> None:
    sample = with_qa(locomo_sample("conv-a"), ("ok?", ["D1:1"], 4), ("bad?", evidence, 4))
    path = write(tmp_path / "ev.json", [sample])
    with pytest.raises(
        InputError, match=r"ev\.json: at qa\[1\] \(conversation conv-a, question 1\)"
    ) as info:
        load_questions([path])
    assert "'evidence' must be a list of strings" in str(info.value)
    assert shown in str(info.value)


# -- categories and malformed question lists -----------------------------------------------


@pytest.mark.parametrize("category", ["multi-hop", [1], True, 4.7, None])
def test_a_category_that_is_not_an_integer_is_an_error(tmp_path: Path, category: Any) -> None:
    sample = with_qa(locomo_sample("conv-a"), ("ok?", ["D1:1"], 4), ("bad?", ["D1:2"], category))
    path = write(tmp_path / "cat.json", [locomo_sample("conv-b"), sample])
    with pytest.raises(
        InputError,
        match=r"cat\.json: at \[1\]\.qa\[1\] \(conversation conv-a, "
        r"question 1\): 'category' must be an integer, not ",
    ) as info:
        load_questions([path])
    assert json.dumps(category) in str(info.value)
    assert info.value.hint and "1 multi-hop" in info.value.hint


def test_a_question_without_category_or_text_is_an_error(tmp_path: Path) -> None:
    sample = locomo_sample("conv-a")
    sample["qa"] = [{"question": "q?", "evidence": ["D1:1"]}]
    with pytest.raises(InputError, match=r"at qa\[0\] .*: the question has no 'category'"):
        load_questions([write(tmp_path / "a.json", sample)])
    sample["qa"] = [{"answer": "x", "evidence": ["D1:1"], "category": 1}]
    with pytest.raises(InputError, match=r"at qa\[0\] .*: the question has no 'question' text"):
        load_questions([write(tmp_path / "b.json", sample)])
    sample["qa"] = ["What?"]
    with pytest.raises(InputError, match=r"at qa\[0\] .*: a question must be an object"):
        load_questions([write(tmp_path / "c.json", sample)])


def test_qa_that_is_not_a_list_is_an_error(tmp_path: Path) -> None:
    sample = locomo_sample("conv-a")
    sample["qa"] = "oops"
    path = write(tmp_path / "qa.json", [sample, with_qa(locomo_sample("b"), ("q?", ["D1:1"], 1))])
    with pytest.raises(
        InputError,
        match=r"qa\.json: at \[0\]\.qa \(conversation conv-a\): 'qa' "
        "must be a list",
    ):
        load_questions([path])


def test_no_question_left_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.json", [locomo_sample("conv-a"), locomo_sample("conv-b")])
    with pytest.raises(
        InputError,
        match=r"empty\.json: no question with evidence to ask "
        r"\(2 conversation\(s\), no questions\)",
    ):
        load_questions([path])
    only_ghosts = with_qa(locomo_sample("conv-a"), ("q?", ["D"], 1), ("r?", [], 2))
    path = write(tmp_path / "ghosts.json", [only_ghosts])
    with pytest.raises(InputError, match=r"2 question\(s\) without evidence naming a turn"):
        load_questions([path])
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "recall", "--data", str(path), "--out", str(tmp_path / "o"), "-q"),
            *("--systems", "structured"),  # no baseline that needs the bench extra
        ],
    )
    assert result.exit_code == 1 and isinstance(result.exception, InputError)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ({"question": "q?", "category": "single-hop", "evidence": "haha"}, "'evidence' must be"),
        ({"question": "q?", "category": "single-hop"}, "'evidence' must be a non-empty list"),
        ({"question": "q?", "category": "single-hop", "evidence": []}, "non-empty list"),
        ({"question": "q?", "category": "single-hop", "evidence": ["not yet", 3]}, "piece 2"),
        ({"question": "q?", "category": "single-hop", "evidence": [""]}, "piece 1"),
    ],
)
def test_chat_question_sets_refuse_questions_without_usable_evidence(
    tmp_path: Path, question: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=r"chat 'ana_bo', question 2: .*" + re.escape(message)):
        load_questions(
            [
                chat_set(
                    tmp_path,
                    [
                        {"question": "ok?", "category": "single-hop", "evidence": ["not yet"]},
                        question,
                    ],
                )
            ]
        )


def test_chat_question_set_questions_must_be_a_list(tmp_path: Path) -> None:
    path = chat_set(tmp_path, [])
    data = json.loads(path.read_text())
    data["chats"]["ana_bo"]["questions"] = "oops"
    with pytest.raises(InputError, match="'questions' must be a list"):
        load_questions([write(path, data)])


# -- files that are not UTF-8 --------------------------------------------------------------


@pytest.fixture
def latin1(tmp_path: Path) -> Path:
    sample = with_qa(locomo_sample("conv-a"), ("Where does Alice volunteer?", ["D1:1"], 4))
    sample["conversation"]["session_1"][0]["text"] = "Café at the shelter."
    path = tmp_path / "latin1.json"
    path.write_bytes(json.dumps([sample], ensure_ascii=False).encode("latin-1"))
    return path


def _utf8_error(error: BaseException | None, name: str) -> None:
    assert isinstance(error, InputError), error
    assert re.search(
        re.escape(name) + r", line 1, column \d+: byte 0xe9 is not valid utf-8", str(error)
    )
    assert error.hint and "UTF-8" in error.hint and "--encoding" not in error.hint


def test_a_data_file_that_is_not_utf8_is_a_clean_error(latin1: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_questions([latin1])
    _utf8_error(info.value, "latin1.json")
    out = str(tmp_path / "out")
    recall_jsonl = write(tmp_path / "r.jsonl", [])
    for args in (
        ["recall", "--data", str(latin1), "--out", out, "-q", "--systems", "structured"],
        ["loo", "--data", str(latin1), "--out", out, "-q"],
        ["synth", "--data", str(latin1), "--size", "10", "--out", out],
        ["rescore", str(recall_jsonl), "--data", str(latin1)],
    ):
        result = CliRunner().invoke(cli, ["bench", *args])
        assert result.exit_code == 1, (args, result.output)
        _utf8_error(result.exception, "latin1.json")
    assert not Path(out).exists()


def test_rescore_of_a_jsonl_that_is_not_utf8_names_no_missing_option(tmp_path: Path) -> None:
    path = tmp_path / "recall.jsonl"
    path.write_bytes(b'{"system": "s\xe9"}\n')
    with pytest.raises(InputError) as info:
        rescore(path)
    _utf8_error(info.value, "recall.jsonl")


# -- rescore checks each line ----------------------------------------------------------------


def _record(**extra: Any) -> dict[str, Any]:
    record = {
        "system": "bm25",
        "qid": "conv-a#0",
        "budget": 100,
        "category": 4,
        "category_name": "single-hop",
        "context": "[8 May 2023] Alice: hi",
        "tokens": 10,
        "message_ids": ["D1:1"],
        "evidence": ["D1:1"],
    }
    record.update(extra)
    return {k: v for k, v in record.items() if v is not ...}


def _jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tokens": "abc"}, 'tokens must be an integer, not "abc"'),
        ({"budget": True}, "budget must be an integer, not true"),
        ({"message_ids": None}, "message_ids must be a list of strings, not null"),
        ({"evidence": "D1:1"}, 'evidence must be a list of strings, not "D1:1"'),
        ({"category": "multi-hop", "category_name": ...}, "category must be an integer"),
        ({"system": 3}, "system must be a string"),
    ],
)
def test_rescore_names_the_line_of_a_malformed_record(
    tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    path = _jsonl(tmp_path / "r.jsonl", _record(), _record(qid="conv-a#1", **extra))
    with pytest.raises(InputError, match=r"r\.jsonl, line 2: " + re.escape(message)):
        rescore(path)
    result = CliRunner().invoke(cli, ["bench", "rescore", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, InputError)


def test_rescore_recount_needs_each_records_context(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", _record(), _record(qid="conv-a#1", context=...))
    rows, _ = rescore(path)  # without --recount the recorded counts are scored
    assert rows[0].questions == 2
    with pytest.raises(InputError, match=r"line 2: record has no context to recount"):
        rescore(path, recount="cl100k_base")


def test_rescore_refuses_a_record_given_twice(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "r.jsonl", _record(), _record(budget=200), _record())
    with pytest.raises(
        InputError,
        match=r"line 3: the record of bm25 for question conv-a#0 at "
        r"budget 100 is repeated \(first at line 1\)",
    ):
        rescore(path)


# -- question ids are unique -------------------------------------------------------------------


def test_a_data_file_given_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "qa.json", [qa_sample()])
    with pytest.raises(ConfigError, match="given twice"):
        load_questions([path, tmp_path / "." / "qa.json"])
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "recall",
            "--data",
            str(path),
            "--data",
            str(tmp_path / ".." / tmp_path.name / "qa.json"),
            "--out",
            str(tmp_path / "o"),
            "-q",
        ],
    )
    assert isinstance(result.exception, ConfigError) and "given twice" in str(result.exception)
    assert not (tmp_path / "o").exists()


def test_a_conversation_in_two_files_or_twice_in_one_is_refused(tmp_path: Path) -> None:
    first = write(tmp_path / "a.json", [qa_sample("conv-x")])
    second = write(tmp_path / "b.json", [qa_sample("conv-y"), qa_sample("conv-x")])
    with pytest.raises(
        InputError,
        match=r"b\.json: conversation 'conv-x' is given twice \(it is "
        r"also in .*a\.json\)",
    ):
        load_questions([first, second])
    twice = write(tmp_path / "c.json", [qa_sample("conv-x"), qa_sample("conv-x")])
    with pytest.raises(
        InputError, match=r"c\.json: conversation 'conv-x' is given twice in this file"
    ):
        load_questions([twice])


def test_repeated_budgets_and_systems_count_once() -> None:
    assert _int_list(None, None, "300,100,300") == [300, 100]  # type: ignore[arg-type]
    assert as_names("bm25,bm25, structured") == ["bm25", "structured"]
    assert as_names(["structured"]) == ["structured"]


# -- end to end: ids as the data writes them, the API with plain strings --------------------


def test_recall_finds_zero_padded_and_other_ids(tmp_path: Path) -> None:
    pad = renamed(locomo_sample("conv-pad"), padded)
    with_qa(
        pad,
        ("What is the name of Bob's cat?", ["D01:04"], 4),
        ("Where does Alice volunteer?", ["D1:1"], 4),
        ("Which job did Bob not get, and where will he apply?", ["d02:01", "D02:03"], 1),
        ("Which animals are at the shelter?", ["D01:03", "D9:99"], 1),  # one names no turn
        ("Where is the lake?", ["D"], 3),  # names no turn: left out
    )
    other = renamed(locomo_sample("conv-t"), lambda d: "T" + d.replace("D", "").replace(":", ""))
    with_qa(other, ("What is the name of Bob's cat?", ["T14"], 4))
    path = write(tmp_path / "ids.json", [pad, other])
    logs: list[str] = []
    out = tmp_path / "out"
    # Plain strings, as a script writes them; repeated systems and budgets count once.
    rows = run_recall(
        str(path),
        str(out),
        systems="structured,bm25,bm25",
        budgets=[4000, 40, 4000],
        workers=1,
        log=logs.append,
    )
    assert [(r.system, r.budget) for r in rows] == [
        ("structured", 4000),
        ("structured", 40),
        ("bm25", 4000),
        ("bm25", 40),
    ]
    records = [json.loads(line) for line in (out / RECORDS).read_text().splitlines()]
    assert len(records) == 2 * 5 * 2  # 5 questions with evidence, each once per key
    with Index(out / "index", read_only=True) as index:
        stored = {(s.message.conversation, s.message.id) for s in index.messages()}
    for record in records:
        if record["qid"] != "conv-pad#3":
            assert {(record["conversation"], e) for e in record["evidence"]} <= stored
    at_4000 = {r["qid"]: r for r in records if r["system"] == "structured" and r["budget"] == 4000}
    # Every evidence turn fits in 4,000 tokens: all found but the one that names no turn.
    assert {qid: record_value(r) for qid, r in at_4000.items()} == {
        "conv-pad#0": 1.0,
        "conv-pad#1": 1.0,
        "conv-pad#2": 1.0,
        "conv-pad#3": 0.5,
        "conv-t#0": 1.0,
    }
    written = json.loads((out / "recall.json").read_text())
    meta = written["meta"]
    assert (meta["systems"], meta["budgets"]) == (["structured", "bm25"], [4000, 40])
    assert meta["evidence_warnings"] == 2 and meta["questions_without_evidence"] == 1
    assert meta["conversations"] == ["conv-pad", "conv-t"]
    assert len(logs) == 2 and "'D9:99' names no turn of conv-pad" in logs[0]
    markdown = (out / "recall.md").read_text()
    assert "**Warning:** 2 evidence id(s) name no turn" in markdown
    assert "1 question(s) without evidence naming a turn are left out." in markdown
    assert "**Not in-sample:**" in markdown  # not locomo_dev's conversations
    again, notes = rescore(out / RECORDS, data=[path], recount="cl100k_base")
    assert notes == [] and [r.as_dict() for r in again] == written["rows"]


def test_bench_recall_scores_evidence_written_as_the_turn_ids(tmp_path: Path) -> None:
    """Zero-padded ids (``D01:04``), ids of another form (``T14``) and lowercase evidence
    are found through the command line, as the data writes them."""
    pad = renamed(locomo_sample("conv-pad"), padded)
    with_qa(pad, ("What is the name of Bob's cat?", ["D01:04"], 4))
    other = renamed(locomo_sample("conv-t"), lambda d: "T" + d.replace("D", "").replace(":", ""))
    with_qa(other, ("What is the name of Bob's cat?", ["T14"], 4))
    lower = with_qa(locomo_sample("conv-low"), ("What is the name of Bob's cat?", ["d1:4"], 4))
    path = write(tmp_path / "ids.json", [pad, other, lower])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "recall", "--data", str(path), "--out", str(out), "-q"),
            *("--workers", "1", "--systems", "structured", "--budgets", "4000"),
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads((out / "recall.json").read_text())["rows"]
    assert row["questions"] == 3 and row["recall"]["overall"] == 1.0


def test_repeated_budgets_systems_are_asked_once_and_rescore_agrees(tmp_path: Path) -> None:
    data = write(tmp_path / "qa.json", [qa_sample()])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "recall", "--data", str(data), "--out", str(out), "-q"),
            *("--workers", "1", "--systems", "bm25,bm25", "--budgets", "300,100,300"),
        ],
    )
    assert result.exit_code == 0, result.output
    records = (out / RECORDS).read_text().splitlines()
    assert len(records) == 5 * 2  # five questions with evidence, two budgets, one system
    written = json.loads((out / "recall.json").read_text())
    assert [(r["system"], r["budget"], r["questions"]) for r in written["rows"]] == [
        ("bm25", 300, 5),
        ("bm25", 100, 5),
    ]
    rows, notes = rescore(out / RECORDS, data=[data])
    assert notes == [] and [r.as_dict() for r in rows] == written["rows"]


def test_run_recall_takes_plain_strings(tmp_path: Path) -> None:
    data = write(tmp_path / "qa.json", [qa_sample()])
    rows = run_recall(str(data), str(tmp_path / "out"), systems="bm25", budgets=200, workers=1)
    assert [(r.system, r.budget, r.questions) for r in rows] == [("bm25", 200, 5)]
    rows = run_recall([str(data)], tmp_path / "out", systems="bm25,structured", budgets=[200])
    assert [r.system for r in rows] == ["bm25", "structured"]


def record_value(record: dict[str, Any]) -> float:
    evidence = set(record["evidence"])
    return len(evidence & set(record["message_ids"])) / len(evidence)


# -- options checked first; results replaced whole ------------------------------------------


def test_a_failed_run_leaves_the_previous_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write(tmp_path / "qa.json", [qa_sample()])
    out = tmp_path / "out"
    run_recall([data], out, systems=["bm25"], budgets=[200], workers=1)
    names = ("recall.jsonl", "recall.json", "recall.md")
    before = {name: (out / name).read_bytes() for name in names}

    # An unknown token encoding fails before anything is ingested or written.
    fresh = tmp_path / "fresh"
    with pytest.raises(ConfigError, match="unknown token encoding 'bogus'"):
        run_recall([data], fresh, systems=["bm25"], budgets=[200], encoding="bogus")
    assert not fresh.exists()
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "recall", "--data", str(data), "--out", str(out), "-q"),
            *("--encoding", "bogus", "--systems", "bm25"),
        ],
    )
    assert isinstance(result.exception, ConfigError) and "bogus" in str(result.exception)

    # A run that fails half way leaves the previous files whole, and no temporary ones.
    calls = {"n": 0}
    contexts = BM25System.contexts

    def failing(self: BM25System, question: Any, budgets: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("interrupted")
        return contexts(self, question, budgets)

    monkeypatch.setattr(BM25System, "contexts", failing)
    with pytest.raises(RuntimeError, match="interrupted"):
        run_recall([data], out, systems=["bm25"], budgets=[300], workers=1)
    assert {name: (out / name).read_bytes() for name in names} == before
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


# -- bench loo checks its grid before the ingest ------------------------------------------------


def test_loo_refuses_a_grid_field_that_is_not_a_number_before_the_ingest(tmp_path: Path) -> None:
    data = write(tmp_path / "two.json", [qa_sample("conv-a"), qa_sample("conv-b")])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        ["bench", "loo", "--data", str(data), "--out", str(out), "--grid", "verb_synonyms=1"],
    )
    assert isinstance(result.exception, ConfigError), result.output
    assert "verb_synonyms cannot be varied in the grid" in str(result.exception)
    assert not out.exists()
    from structrag.bench.loo import run_leave_one_out

    for grid, message in (
        ({"speaker_boost": ("0.5",)}, "speaker_boost takes numbers, not '0.5'"),
        ({"min_matches": (1.5,)}, "min_matches takes whole numbers"),
        ({"speaker_boost": (True,)}, "speaker_boost takes numbers, not True"),
        ({"window": ("huge",)}, "window takes a window preset"),
        ({"alias_sources": ({},)}, "alias_sources cannot be varied"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            run_leave_one_out([data], out, grid=grid)
        assert not out.exists()


# -- the report refuses results of different data -------------------------------------------------


def test_report_refuses_recall_and_loo_of_different_data(tmp_path: Path) -> None:
    for name in ("recall.json", "loo.json"):
        (tmp_path / name).write_bytes((FIXTURE_RESULTS / name).read_bytes())
    result = CliRunner().invoke(cli, ["bench", "report", str(tmp_path)])
    assert isinstance(result.exception, InputError)
    assert (
        "recall.json and loo.json were made from different data (recall.json: demo.json; "
        "loo.json: loo-demo.json)"
    ) in str(result.exception)
    assert not (tmp_path / "report.md").exists()
    # With the data's SHA-256 recorded, it decides (the same bytes under another name).
    recall = json.loads((tmp_path / "recall.json").read_text())
    loo = json.loads((tmp_path / "loo.json").read_text())
    recall["meta"]["data_sha256"] = loo["meta"]["data_sha256"] = "ab" * 32
    # (measured alike too: the report also refuses other questions or budgets)
    recall["meta"].update(questions=loo["meta"]["questions"], budgets=loo["meta"]["budgets"])
    write(tmp_path / "recall.json", recall)
    write(tmp_path / "loo.json", loo)
    assert write_report(tmp_path)[0].name == "report.md"
    loo["meta"]["data"] = ["demo.json"]
    loo["meta"]["data_sha256"] = "cd" * 32
    write(tmp_path / "loo.json", loo)
    with pytest.raises(InputError, match="different data"):
        write_report(tmp_path)


# -- in-sample only on the conversations the defaults were chosen on ----------------------------


@pytest.mark.parametrize(
    ("conversations", "label"),
    [
        (list(DEFAULTS_CHOSEN_ON), "**In-sample:** The default ranking settings were chosen on"),
        (["my-1", "my-2"], "**Not in-sample:**"),
        (["conv-26", "my-1"], "**Partly in-sample:**"),
        (None, "**In-sample:**"),  # results written before the conversations were recorded
    ],
)
def test_in_sample_is_said_only_of_the_conversations_the_defaults_were_chosen_on(
    tmp_path: Path, conversations: list[str] | None, label: str
) -> None:
    recall = json.loads((FIXTURE_RESULTS / "recall.json").read_text())
    if conversations is not None:
        recall["meta"]["conversations"] = conversations
    write_tables(tmp_path, [], recall["meta"])
    assert label in (tmp_path / "recall.md").read_text()
    section = "\n".join(recall_section(recall))
    assert label in section
    if conversations == ["my-1", "my-2"]:
        assert "none of them is in this data" in section
        assert "In-sample" not in section


# -- bench memory rebuilds an index of data that changed ------------------------------------------


def test_memory_rebuilds_its_index_when_the_data_changes(tmp_path: Path) -> None:
    data = write(tmp_path / "qa.json", [qa_sample("conv-a"), qa_sample("conv-b")])
    out = tmp_path / "out"
    run_memory([data], out, sizes=[16], samples=2, quality=False)
    marker = out / "indexes" / "16.complete.json"
    first = json.loads(marker.read_text())
    run_memory([data], out, sizes=[16], samples=2, quality=False)
    assert json.loads(marker.read_text()) == first  # same bytes: reused
    changed = qa_sample("conv-a")
    changed["conversation"]["session_1"][0]["text"] = "I started flying a zeppelin on Monday."
    write(data, [changed, qa_sample("conv-b")])
    run_memory([data], out, sizes=[16], samples=2, quality=False)
    assert json.loads(marker.read_text())["signature"] != first["signature"]
    with Index(out / "indexes" / "16", read_only=True) as index:
        texts = [s.message.text for s in index.messages()]
    assert any("zeppelin" in t for t in texts)


def test_a_synthetic_corpus_is_written_again_when_its_source_changes(tmp_path: Path) -> None:
    source = write(tmp_path / "src.json", [qa_sample("a")])
    shards = write_corpus([source], 8, tmp_path / "corpus")
    assert "zeppelin" not in shards[0].read_text()
    changed = qa_sample("a")
    changed["conversation"]["session_1"][0]["text"] = "A zeppelin flew over the shelter."
    write(source, [changed])
    assert "zeppelin" in write_corpus([source], 8, tmp_path / "corpus")[0].read_text()


# -- help ------------------------------------------------------------------------------------------


def test_help_names_what_the_commands_read() -> None:
    runner = CliRunner()
    report = runner.invoke(cli, ["bench", "report", "--help"]).output
    assert "loo.json" in report and "notes.md" in report
    for command in ("recall", "loo"):
        text = " ".join(runner.invoke(cli, ["bench", command, "--help"]).output.split())
        assert "or a chat question set" in text, command
