"""Bad and huge input: one-line errors instead of tracebacks, bounded work, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from structrag import Index, InputError, QueryError, QuerySyntaxError
from structrag.extract.base import MAX_EXTRACT_CHARS
from structrag.query.parser import MAX_QUERY_CHARS

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "friends_chat.jsonl"


def run_cli(*args: str | bytes, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "structrag", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


@pytest.mark.parametrize("depth", [990, 1000, 5000])
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_deeply_nested_json_is_a_one_line_error(tmp_path: Path, depth: int, suffix: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text('{"text": ' + "[" * depth + "]" * depth + "}\n")
    done = run_cli("ingest", str(path), "--db", str(tmp_path / "ix"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "nested too deeply" in done.stderr or "must be" in done.stderr
    assert not (tmp_path / "ix").exists()


def test_names_that_are_not_utf8_are_one_line_errors(tmp_path: Path) -> None:
    bad = os.fsdecode(b"chat\xff.jsonl")
    (tmp_path / bad).write_bytes(EXAMPLE.read_bytes())
    done = run_cli("ingest", bad, "--db", "ix", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "chat\\xff.jsonl: the file name is not valid UTF-8" in done.stderr
    done = run_cli("ingest", str(EXAMPLE), "--db", os.fsdecode(b"ix\xff"), cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "ix\\xff is not valid UTF-8" in done.stderr
    with pytest.raises(InputError):
        Index(tmp_path / "ix2").ingest([tmp_path / bad])


def test_a_closed_pipe_is_not_a_failure(example_index: Path) -> None:
    command = (
        f"{sys.executable} -m structrag query Biscuit --db {example_index} --limit 40 | head -1"
    )
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len(done.stdout.splitlines()) == 1


def test_a_trailing_dot_in_a_meta_key_is_a_syntax_error(example_index: Path) -> None:
    done = run_cli("query", "meta.session. = 1", "--db", str(example_index))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "^" in done.stderr


def test_queries_and_questions_have_a_length_limit(example_index: Path) -> None:
    with Index(example_index, read_only=True) as index:
        with pytest.raises(QuerySyntaxError, match="limit"):
            index.query(" OR ".join(f"w{i}" for i in range(MAX_QUERY_CHARS)))
        with pytest.raises(QueryError, match="limit"):
            index.ask("why " * 2000)
        # a long run of emoji is parsed in linear time (it carries nothing to match)
        answer = index.ask("\U0001f600" * 1500 + " Where did Marco sail?", budget=200)
        assert "action(Marco, sail" in answer.query


def test_a_20_mb_message_is_stored_whole_and_extracted_in_part(tmp_path: Path) -> None:
    words = ("harbour", "engine", "Lisbon", "sail", "boat", "market", "bread", "violin")
    body = " ".join(words[i % len(words)] for i in range(2_500_000))
    text = body[: 20_000_000 - 20] + " zanzibarfinalword"
    path = tmp_path / "big.jsonl"
    rows = [{"id": "big", "speaker": "Ann", "text": text}, {"id": "s", "text": "short"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([path])
        assert report.messages_added == 2
        assert any("knowledge is extracted from its first" in w for w in report.warnings)
        assert index.show("big")["text"] == text
        refs = index.sql(
            "SELECT count(*), max(span_end) FROM semantic_refs "
            "WHERE message_id = 'big' AND extractor = 'spacy'"
        )
        count, last = refs[0]
        assert 0 < count < 20_000 and last <= MAX_EXTRACT_CHARS
        found = index.query("zanzibarfinalword")  # the tail is searchable as text
        assert found.messages[0].id == "big"


def test_a_script_without_a_main_guard_ingests_with_workers(tmp_path: Path) -> None:
    """On Linux the workers are forked: a script that calls structrag without an
    ``if __name__ == "__main__":`` guard is not run again in them (a fork server or
    spawned workers would run it again, here wiping the index being written)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("workers are spawned elsewhere, which needs the guard")
    chat = tmp_path / "chat.jsonl"
    rows = [{"id": str(i), "speaker": "Ann", "text": f"Day {i}: I walked."} for i in range(450)]
    chat.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import shutil\n"
        "from structrag import Index\n"
        f"shutil.rmtree({str(tmp_path / 'idx')!r}, ignore_errors=True)\n"
        f"with Index({str(tmp_path / 'idx')!r}) as ix:\n"
        f"    print(ix.ingest([{str(chat)!r}], workers=2)[0].messages_added)\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "450"
    assert "RuntimeWarning" not in result.stderr


def test_a_merge_that_runs_out_of_the_merge_memory_limit_is_done_again_under_the_store_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged ingest is merged with DuckDB held to a small memory limit (the merge was
    the peak of a large ingest); one that needs more is merged again under the store's
    own limit, with the same result, and the store's limit is set back after."""
    import structrag.store.duckdb.staging as staging

    tables = (
        "SELECT count(*), sum(hash(text)) FROM messages "
        "UNION ALL SELECT count(*), 0 FROM semantic_refs"
    )
    with Index(tmp_path / "plain") as index:
        index.ingest([EXAMPLE])
        expected = index.store.sql(tables)
    monkeypatch.setattr(staging, "MERGE_MEMORY_LIMIT", "1MB")  # too small for any merge
    with Index(tmp_path / "retried") as index:
        (report,) = index.ingest([EXAMPLE])
        assert report.messages_added == 46
        assert index.store.sql(tables) == expected
        (limits,) = index.store.sql("SELECT current_setting('memory_limit')")
        assert not _logged(tmp_path / "retried")  # checkpointed under the store's limit
    with Index(tmp_path / "plain") as index:
        assert index.store.sql("SELECT current_setting('memory_limit')") == [limits]


def _logged(index_dir: Path) -> int:
    """Bytes in the DuckDB log of an index (what a checkpoint has not written out)."""
    wal = index_dir / "structrag.duckdb.wal"
    return wal.stat().st_size if wal.exists() else 0


def test_a_merge_is_checkpointed_after_its_commit_and_duckdb_settings_are_set_back(
    tmp_path: Path,
) -> None:
    """DuckDB's own checkpoint, at a commit that takes its log past 16 MiB, ran under the
    store's 1 GB limit and was the peak of a large ingest; the merge's commit leaves it
    out and checkpoints next, under the merge's limit. A small ingest, which DuckDB
    would not have checkpointed, leaves nothing in the log, and the settings are back."""
    import duckdb

    settings = "SELECT current_setting('checkpoint_threshold'), current_setting('memory_limit')"
    with Index(tmp_path / "idx") as index:
        before = index.store.sql(settings)
        (report,) = index.ingest([EXAMPLE])
        assert report.messages_added == 46
        assert not _logged(tmp_path / "idx")
        assert index.store.sql(settings) == before
        assert before[0][0] == duckdb.connect().execute(settings).fetchall()[0][0]
        assert index.store.sql("SELECT count(*) FROM messages") == [(46,)]


def test_index_size_skips_what_an_ingest_removes_during_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stats`` sums the index folder's files while an ingest may be removing its staging
    folder (the server's readers saw a FileNotFoundError): a folder that is gone by the
    time the walk lists it is not counted."""
    import structrag.index as index_module

    (tmp_path / "kept").write_bytes(b"x" * 10)
    staged = tmp_path / ".staging" / "1-a" / "whoosh"
    staged.mkdir(parents=True)
    (staged / "MAIN.tmp").write_bytes(b"y" * 5)
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path) == staged:  # removed by the ingest after its parent was listed
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert index_module._dir_size(tmp_path) == 10


def test_the_text_index_written_beside_the_store_commit_fails_the_ingest_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text index writes its segment on a thread while the store merges and commits
    (``ingest._beside``). If that write fails, the ingest fails with its error and leaves
    nothing: the store's transaction is rolled back, the text index holds nothing new,
    no staging folder is left, and the same ingest then succeeds."""
    from structrag.store import whoosh_index

    real_prepare = whoosh_index.StagedWhooshWriter.prepare
    threads: list[str] = []

    def full_disk(self: whoosh_index.StagedWhooshWriter) -> None:
        threads.append(threading.current_thread().name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(whoosh_index.StagedWhooshWriter, "prepare", full_disk)
    with Index(tmp_path / "idx") as index:
        with pytest.raises(OSError, match="No space left"):
            index.ingest([EXAMPLE])
        assert threads == ["structrag-beside"]
        assert index.store.sql("SELECT count(*) FROM messages") == [(0,)]
        assert index.stats()["messages"] == 0
        index.text_index.refresh()
        assert index.text_index.doc_count() == 0
        assert not list((tmp_path / "idx").glob(".staging/*"))
        monkeypatch.setattr(whoosh_index.StagedWhooshWriter, "prepare", real_prepare)
        (report,) = index.ingest([EXAMPLE])
        assert report.messages_added == 46


class _FullDisk:
    """A DuckDB connection whose checkpoint meets a full disk, as DuckDB reports it: a
    fatal error, after which every statement fails (the state cannot be made on demand
    without filling a real disk)."""

    def __init__(self) -> None:
        self.invalid = False

    def execute(self, statement: str) -> _FullDisk:
        import duckdb

        if self.invalid:
            raise duckdb.FatalException("FATAL Error: database has been invalidated")
        if statement == "CHECKPOINT":
            self.invalid = True
            raise duckdb.FatalException(
                "FATAL Error: Failed: database has been invalidated because of a previous "
                'fatal error.\nOriginal error: "Failed to create checkpoint because of '
                'error: Could not write file: No space left on device"'
            )
        return self


def test_a_checkpoint_on_a_full_disk_says_the_write_is_in_the_log() -> None:
    from structrag.errors import IndexStateError
    from structrag.store.duckdb.staging import checkpoint

    with pytest.raises(IndexStateError) as failed:
        checkpoint(_FullDisk())  # type: ignore[arg-type]
    assert "committed to the store's log" in str(failed.value)
    assert "No space left on device" in str(failed.value)
    assert "replays the log" in (failed.value.hint or "")


def test_a_store_cut_short_says_so_and_what_to_do(example_index: Path, tmp_path: Path) -> None:
    import shutil

    damaged = tmp_path / "index"
    shutil.copytree(example_index, damaged)
    store = damaged / "structrag.duckdb"
    with store.open("r+b") as handle:
        handle.truncate(store.stat().st_size // 2)
    done = run_cli("stats", "--db", str(damaged))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot be read (damaged or cut short?)" in done.stderr
    assert "restore structrag.duckdb from a backup" in done.stderr


def test_a_deleted_text_index_is_rebuilt_and_said_missing(
    example_index: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(example_index, copy)
    shutil.rmtree(copy / "whoosh")
    with Index(copy) as index:
        (note,) = index.notes
        assert note.startswith("the text index was missing") and "rebuilt it" in note
        assert index.query("Biscuit").messages
