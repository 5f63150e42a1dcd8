"""The benchmark harness: recall scoring and rescoring, synthetic corpora, perf figures,
the report, the notebook, and a small end-to-end ``bench recall`` run (structured and
BM25 on a tiny LoCoMo-format file; the dense baseline needs the bench extra)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from structrag import Index
from structrag.bench.locomo import load_questions, normalise_evidence
from structrag.bench.perf import extrapolate, measure_corpus, percentiles
from structrag.bench.recall import read_records, record_recall, rescore, score_records
from structrag.bench.report import write_report
from structrag.bench.synth import WEEKS_PER_COPY, synthetic_samples, write_corpus
from structrag.bench.systems import SYSTEMS, check_available, make_systems, require
from structrag.cli import bench_recall, cli
from structrag.embeddings import message_text
from structrag.errors import ConfigError, InputError
from structrag.importers import load_source
from structrag.timeparse import parse_datetime
from tests.conftest import locomo_sample

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RESULTS = Path(__file__).resolve().parent / "fixtures" / "bench_results"
NOTEBOOK = ROOT / "notebooks" / "bench_report.ipynb"


def qa_sample(sample_id: str = "conv-test") -> dict[str, Any]:
    """The conftest LoCoMo sample with questions (our own text)."""
    sample = locomo_sample(sample_id)
    sample["qa"] = [
        {"question": "Where does Alice volunteer?", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the name of Bob's cat?", "evidence": ["D1:4"], "category": 4},
        {
            "question": "Which job did Bob not get, and where will he apply instead?",
            "evidence": ["D2:1", "D2:3"],
            "category": 1,
        },
        {"question": "When did Alice paint a sunset?", "evidence": ["D2:4"], "category": 2},
        {"question": "Which animals are at the shelter?", "evidence": ["D1:2; D1:3"]},
        {"question": "Does Bob like tea?", "evidence": [], "category": 3},
    ]
    return sample


@pytest.fixture
def qa_file(tmp_path: Path) -> Path:
    path = tmp_path / "qa.json"
    path.write_text(json.dumps([qa_sample()]), encoding="utf-8")
    return path


def record(evidence: list[str], ids: list[str], tokens: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "system": "s",
        "budget": 100,
        "category": 1,
        "evidence": evidence,
        "message_ids": ids,
        "tokens": tokens,
        **extra,
    }


# -- scoring ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evidence", "ids", "tokens", "expected"),
    [
        (["D1:1"], ["D1:1", "D1:2"], 10, 1.0),
        (["D1:1", "D2:2"], ["D1:1"], 10, 0.5),
        (["D1:1", "D2:2"], ["D3:3"], 10, 0.0),
        (["D1:1"], ["D1:1"], 101, 0.0),  # over budget scores nothing
        (["D1:1"], ["D1:1"], 100, 1.0),  # exactly at budget is fine
        ([], ["D1:1"], 10, None),
    ],
)
def test_record_recall(
    evidence: list[str], ids: list[str], tokens: int, expected: float | None
) -> None:
    assert record_recall(record(evidence, ids, tokens)) == expected


def test_score_records_means_per_category_and_full_coverage() -> None:
    rows = score_records(
        [
            record(["a"], ["a"], category=1),
            record(["a", "b"], ["a"], category=1),
            record(["c"], [], category=2),
            record(["d"], ["d"], tokens=500, category=2),  # over budget
            record(["e"], ["e"], category=4, budget=200),  # another budget: another row
        ]
    )
    assert [(r.system, r.budget) for r in rows] == [("s", 100), ("s", 200)]
    row = rows[0]
    assert row.recall["multi-hop"] == pytest.approx(0.75)
    assert row.recall["temporal"] == 0.0
    assert row.recall["overall"] == pytest.approx(1.5 / 4)
    assert row.full["overall"] == pytest.approx(0.25)
    assert row.full["multi-hop"] == pytest.approx(0.5)
    assert row.over_budget == 1
    assert row.counts == {"multi-hop": 2, "temporal": 2, "overall": 4}


def test_fixture_jsonl_rescores_to_its_table() -> None:
    rows, notes = rescore(FIXTURE_RESULTS / "recall.jsonl")
    written = json.loads((FIXTURE_RESULTS / "recall.json").read_text())["rows"]
    assert notes == []
    assert [r.as_dict() for r in rows] == written
    by_key = {(r.system, r.budget): r for r in rows}
    assert by_key[("structured", 500)].recall["overall"] == pytest.approx(2.5 / 3)
    assert by_key[("bm25", 500)].recall["single-hop"] == 0.0  # 520 tokens > 500
    assert by_key[("bm25", 500)].over_budget == 1
    assert by_key[("bm25", 1000)].full["overall"] == pytest.approx(2 / 3)


def test_rescore_recounts_tokens(tmp_path: Path) -> None:
    lines = (FIXTURE_RESULTS / "recall.jsonl").read_text().splitlines()
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rows, notes = rescore(path, recount="cl100k_base")
    # The hand-written over-budget line has 520 recorded tokens but a short context.
    assert any("tokens" in n for n in notes)
    by_key = {(r.system, r.budget): r for r in rows}
    assert by_key[("bm25", 500)].over_budget == 0


def test_read_records_reports_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"system": "s"}\n')
    with pytest.raises(InputError, match="line 1"):
        list(read_records(path))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ("D1:3",)),
        (["D8:6; D9:17"], ("D8:6", "D9:17")),
        (["D:11:26"], ("D11:26",)),
        (["D", "D1:3", "D1:3"], ("D1:3",)),
    ],
)
def test_normalise_evidence(raw: list[str], expected: tuple[str, ...]) -> None:
    assert normalise_evidence(raw) == expected


def test_load_questions_skips_questions_without_evidence(qa_file: Path) -> None:
    questions = load_questions([qa_file])
    assert [q.qid for q in questions] == [f"conv-test#{i}" for i in range(5)]
    assert questions[4].evidence == ("D1:2", "D1:3")
    assert questions[2].category_name == "multi-hop"


# -- synthetic corpora ---------------------------------------------------------------------


def _words(sample: dict[str, Any]) -> set[str]:
    texts = [sample["conversation"].get("speaker_a"), sample["conversation"].get("speaker_b")]
    for key, turns in sample["conversation"].items():
        if re.fullmatch(r"session_\d+", key):
            texts += [t.get("speaker") for t in turns] + [t.get("text") for t in turns]
            texts += [t.get("blip_caption") for t in turns]
    texts += [q["question"] for q in sample["qa"]]
    return {w for t in texts if isinstance(t, str) for w in re.findall(r"\w+", t)}


def test_synthetic_copies_rename_speakers_shift_dates_and_keep_ids_unique() -> None:
    sources = [qa_sample("a"), qa_sample("b")]
    copies = list(synthetic_samples(sources, 30))
    assert sum(count for _, count in copies) == 30  # the last copy is cut to fit
    assert [count for _, count in copies] == [8, 8, 8, 6]
    ids = [s["sample_id"] for s, _ in copies]
    assert len(set(ids)) == len(ids)
    speakers = set()
    for number, (sample, _) in enumerate(copies):
        conv = sample["conversation"]
        assert {"Alice", "Bob"}.isdisjoint(_words(sample))
        pair = (conv["speaker_a"], conv["speaker_b"])
        assert pair[0] != pair[1]
        speakers.add(pair)
        sessions = [v for k, v in conv.items() if k.startswith("session_") and isinstance(v, list)]
        turn_ids = [t["dia_id"] for turns in sessions for t in turns]
        assert len(turn_ids) == len(set(turn_ids))
        assert {t["speaker"] for t in conv["session_1"]} == set(pair)
        original = parse_datetime(sources[number % 2]["conversation"]["session_1_date_time"])
        shifted = parse_datetime(conv["session_1_date_time"])
        assert original is not None and shifted is not None
        assert shifted - original == dt.timedelta(weeks=WEEKS_PER_COPY * number)
        assert shifted.weekday() == original.weekday()
        assert "Pepper" in _words(sample)  # other names are left alone
    assert len(speakers) == len(copies)
    # A question whose evidence was cut from the last copy is dropped.
    last, _ = copies[-1]
    kept = {t["dia_id"] for k, v in last["conversation"].items() if isinstance(v, list) for t in v}
    assert all(set(q["evidence"]) <= kept for q in last["qa"])
    assert "Bob" not in " ".join(q["question"] for q in copies[0][0]["qa"])


def test_write_corpus_shards_import_as_locomo(tmp_path: Path) -> None:
    source = tmp_path / "src.json"
    source.write_text(json.dumps([qa_sample("a"), qa_sample("b")]))
    shards = write_corpus([source], 40, tmp_path / "corpus", shard_size=16)
    assert [p.name for p in shards] == ["part-0001.json", "part-0002.json", "part-0003.json"]
    parsed = [load_source(p) for p in shards]
    keys = [(m.conversation, m.id) for src in parsed for m in src.messages]
    assert len(keys) == 40 and len(set(keys)) == 40
    assert all(src.format == "locomo" for src in parsed)
    assert write_corpus([source], 40, tmp_path / "corpus", shard_size=16) == shards  # reused
    assert {q.conversation for q in load_questions(shards)} <= {k[0] for k in keys}


# -- perf ---------------------------------------------------------------------------------


def test_percentiles_in_milliseconds() -> None:
    stats = percentiles([0.001 * i for i in range(1, 101)])
    assert stats["n"] == 100
    assert stats["p50"] == pytest.approx(50.5)
    assert stats["p99"] == pytest.approx(99.01)
    assert percentiles([]) == {"n": 0}


def _measured(messages: int, p50: float, rate: float) -> dict[str, Any]:
    lat = {"p50": p50, "p95": p50 * 2, "p99": p50 * 3}
    return {
        "messages": messages,
        "ingest": {"messages_per_second": rate},
        "latency": {"ask": lat, "query": lat},
        "size": {"bytes_per_message": 2000.0, "bytes_per_message_without_vectors": 1700.0},
        "peak_rss_mb": {"process": 500.0},
    }


def test_extrapolate_grows_latency_but_never_shrinks_it() -> None:
    growing = extrapolate([_measured(10_000, 10.0, 100.0), _measured(100_000, 20.0, 80.0)], 10**6)
    assert growing["extrapolated"] is True
    assert growing["ingest"]["seconds"] == pytest.approx(10**6 / 80.0)
    assert growing["latency"]["ask"]["p50"] == pytest.approx(40.0)  # doubling per decade
    assert growing["size"]["total_bytes_without_vectors"] == 1700 * 10**6
    falling = extrapolate([_measured(10_000, 30.0, 100.0), _measured(100_000, 20.0, 80.0)], 10**6)
    assert falling["latency"]["ask"]["p50"] == pytest.approx(20.0)


def test_measure_corpus_reports_speed_size_and_memory(qa_file: Path, tmp_path: Path) -> None:
    result = measure_corpus([qa_file], tmp_path / "idx", workers=1, questions=3)
    assert result["messages"] == 8
    assert result["ingest"]["messages_per_second"] > 0
    assert result["latency"]["ask"]["n"] == 3 and result["latency"]["query"]["n"] == 3
    assert result["latency"]["ask_first"]["n"] == 1
    size = result["size"]
    assert size["total_bytes"] == size["duckdb_bytes"] + size["whoosh_bytes"] > 0
    assert 0 <= size["vectors_bytes"] <= size["total_bytes"]
    assert size["float32_store_bytes_per_message"] == {"384": 1536, "1536": 6144}
    assert result["peak_rss_mb"]["process"] > 0


# -- the end-to-end recall run --------------------------------------------------------------


def test_bench_recall_end_to_end(qa_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            *("bench", "recall", "--data", str(qa_file), "--out", str(out)),
            *("--systems", "structured,bm25", "--budgets", "40,200", "--workers", "1", "-q"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "| structured | 40 |" in result.output and "| bm25 | 200 |" in result.output
    records = [json.loads(line) for line in (out / "recall.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 5 * 2
    keys = {"system", "question", "conversation", "category", "budget", "context", "tokens"}
    assert all(keys | {"message_ids", "evidence"} <= r.keys() for r in records)
    assert all(r["tokens"] <= r["budget"] for r in records)
    turn_ids = {f"D1:{i}" for i in range(1, 5)} | {f"D2:{i}" for i in range(1, 5)}
    assert all(set(r["message_ids"]) <= turn_ids for r in records)
    big = [r for r in records if r["budget"] == 200]
    assert all(r["message_ids"] for r in big)
    # Every message in a context is there as its rendered line, in the order listed.
    with Index(out / "index", read_only=True) as index:
        for r in records:
            assert r["context"].count("\n") + 1 >= len(r["message_ids"])
        # The structured system is the public ask path, exactly.
        first = next(r for r in records if r["system"] == "structured" and r["budget"] == 200)
        answer = index.ask(first["question"], conversation=first["conversation"], budget=200)
        assert answer.context.text == first["context"]
        assert answer.message_ids == first["message_ids"]
    # The written table is what rescoring the JSONL gives, also with the data's evidence.
    written = json.loads((out / "recall.json").read_text())
    rows, notes = rescore(out / "recall.jsonl", data=[qa_file], recount="cl100k_base")
    assert notes == []
    assert [r.as_dict() for r in rows] == written["rows"]
    assert written["meta"]["budgets"] == [40, 200]
    assert (out / "recall.md").read_text().count("| structured |") == 2
    rescored = runner.invoke(cli, ["bench", "rescore", str(out / "recall.jsonl"), "--json"])
    assert rescored.exit_code == 0, rescored.output
    assert json.loads(rescored.output) == written["rows"]
    # A second run reuses the index (the file is skipped, not re-ingested).
    again = runner.invoke(
        cli,
        [
            *("bench", "recall", "--data", str(qa_file), "--out", str(out)),
            *("--systems", "bm25", "--budgets", "200", "-q", "--limit", "2"),
        ],
    )
    assert again.exit_code == 0, again.output
    meta = json.loads((out / "recall.json").read_text())["meta"]
    assert meta["ingest"]["skipped"] and meta["questions"] == 2


def test_bm25_fill_packs_bm25_then_the_embedding_order(qa_file: Path, tmp_path: Path) -> None:
    with Index(tmp_path / "index") as index:
        index.ingest([qa_file])
        bm25, filled = make_systems(["bm25", "bm25+fill"], index)
        stored = list(index.messages("conv-test"))
        embedder = index.embedder
        assert embedder is not None
        filled_any = False
        vectors = embedder.encode([message_text(s.message.speaker, s.message.text) for s in stored])
        for question in load_questions([qa_file]):
            similarity = vectors @ embedder.encode([question.question])[0]
            nearest = [stored[i].message.id for i in np.argsort(-similarity, kind="stable")]
            budgets = [30, 60, 4000]
            plain = [c.message_ids for c in bm25.contexts(question, budgets)]
            full = [c.message_ids for c in filled.contexts(question, budgets)]
            for ids, more in zip(plain, full, strict=True):
                # BM25's own context comes first, unchanged; the fill follows in the
                # embedding order, leaving out what BM25 ranked.
                assert more[: len(ids)] == ids
                fill = more[len(ids) :]
                assert fill == [i for i in nearest if i in fill]
            ranked = plain[-1]  # at 4,000 tokens every ranked message fits
            assert full[-1] == ranked + [i for i in nearest if i not in ranked]
            filled_any |= any(len(f) > len(p) for f, p in zip(full, plain, strict=True))
        # Where BM25 leaves budget empty, the fill uses it.
        assert filled_any


def test_default_systems_are_all_systems() -> None:
    option = next(p for p in bench_recall.params if p.name == "systems")
    assert option.default == ",".join(SYSTEMS)
    assert "bm25+fill" in SYSTEMS


def test_bench_recall_rejects_unknown_system(qa_file: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["bench", "recall", "--data", str(qa_file), "--out", str(tmp_path), "--systems", "x"],
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)


def test_missing_optional_dependency_names_the_extra() -> None:
    with pytest.raises(ConfigError, match="bench extra") as info:
        require("structrag_no_such_module", "the test baseline")
    assert "torch==2.13.0" in str(info.value)
    with pytest.raises(ConfigError, match="bench extra"):
        check_available("structrag_no_such_module", "the test baseline")
    check_available("json", "nothing")


# -- report and notebook ------------------------------------------------------------------


def test_report_writes_markdown_and_plots(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(FIXTURE_RESULTS, results)
    (results / "notes.md").write_text("A build ran beside the benchmark.\n")
    written = write_report(results)
    assert {p.name for p in written} == {
        "report.md",
        "recall_vs_budget.png",
        "latency_vs_size.png",
        "size_vs_size.png",
    }
    for png in written[1:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (results / "report.md").read_text()
    assert "structrag bench recall --data demo.json" in report
    assert "| 100,000 | extrapolated |" in report
    assert "multi-hop" in report and "2 cores" in report
    assert "## Notes on this run\n\nA build ran beside the benchmark." in report


def test_report_without_results_is_a_clean_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "report", str(tmp_path)])
    assert isinstance(result.exception, InputError)


def test_notebook_redraws_the_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("STRUCTRAG_RESULTS", str(FIXTURE_RESULTS))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    original = copy.deepcopy(notebook)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 3
    text = "".join(o.get("text", "") for o in outputs)
    assert "recall.json: 0.8333" in text  # the notebook's own rescoring agrees
    # The committed notebook carries no outputs (they would go stale).
    assert all(not c.get("outputs") for c in original.cells if c.cell_type == "code")
