"""The command line: every command has help, JSON output parses, errors are clean."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from structrag import Index
from structrag.cli import cli, main
from tests.entry_helpers import run_marked


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
    return found


@pytest.mark.parametrize("path", _commands(cli))
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    assert command.help and len(command.help.strip()) > 20
    assert "Usage:" in result.output


def test_help_lists_the_commands_without_importing_them() -> None:
    from structrag.cli import COMMANDS

    for name, (module, _attribute, short) in COMMANDS.items():
        command = cli.commands[name]
        assert command.name == name
        assert command.callback is not None and command.callback.__module__ == module
        assert not command.hidden and not command.deprecated
        for limit in (20, 45, 60, 80, 120, 200):
            listed = click.Command(name, help=short).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit)
    expected = click.Group.format_commands
    ctx = click.Context(cli, max_content_width=100)
    ours, theirs = click.HelpFormatter(width=100), click.HelpFormatter(width=100)
    cli.format_commands(ctx, ours)
    expected(cli, ctx, theirs)
    assert ours.getvalue() == theirs.getvalue()
    code = (
        "import sys\n"
        "from structrag.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('structrag.cli.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def run(*args: str) -> tuple[int, str, str]:
    """Run ``python -m structrag`` as a user would; returns (status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "structrag", *args], capture_output=True, text=True, check=False
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_ingest_stats_show_json(tmp_path: Path, locomo_file: Path) -> None:
    db = str(tmp_path / "db")
    code, out, err = run("ingest", str(locomo_file), "--db", db, "--json")
    assert code == 0, err
    (report,) = json.loads(out)
    assert report["messages_added"] == 8
    code, out, _ = run("stats", "--db", db, "--json")
    stats = json.loads(out)
    assert stats["conversations"] == 1 and stats["messages"] == 8
    assert set(stats["semantic_refs"]) >= {"entity", "action", "topic"}
    assert stats["embeddings"] == "static"  # the default, recorded by the first ingest
    code, out, _ = run("show", "D1:3", "--db", db, "--json")
    shown = json.loads(out)
    assert shown["id"] == "D1:3" and shown["knowledge"]
    code, out, _ = run("entities", "--db", db, "--top", "3", "--json")
    assert len(json.loads(out)) == 3
    code, out, _ = run("topics", "--db", db, "--json")
    assert code == 0 and isinstance(json.loads(out), list)
    code, out, _ = run("ingest", str(locomo_file), "--db", db)
    assert code == 0 and "skipped" in out


def test_sql_reads_the_views_as_a_table_or_json(example_index: Path) -> None:
    runner = CliRunner()
    db = str(example_index)
    statement = "SELECT message_id, span_text FROM v_entities WHERE name_lower = 'biscuit'"
    table = runner.invoke(cli, ["sql", statement, "--db", db])
    assert table.exit_code == 0, table.output
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["message_id", "span_text"] and rows
    assert all("Biscuit" in row for row in rows)
    as_json = runner.invoke(cli, ["sql", statement, "--db", db, "--json", "--limit", "1"])
    assert as_json.exit_code == 0, as_json.output
    (row,) = json.loads(as_json.stdout)
    assert set(row) == {"message_id", "span_text"} and row["span_text"] == "Biscuit"
    refused = runner.invoke(cli, ["sql", "DELETE FROM topics", "--db", db])
    assert refused.exit_code == 1 and "not DELETE statements" in str(refused.exception)
    two = runner.invoke(cli, ["sql", "SELECT 1; SELECT 2", "--db", db])
    assert two.exit_code == 1 and "one statement at a time" in str(two.exception)
    same = runner.invoke(cli, ["sql", "SELECT 1 AS a, 2 AS a", "--db", db, "--json"])
    assert json.loads(same.stdout) == [{"a": 1, "a_2": 2}]
    # JSON columns are values in --json (not strings holding JSON) and JSON in the table
    meta = 'SELECT \'{"page": 3, "tags": ["a"]}\'::JSON AS meta, NULL::JSON AS none'
    decoded = runner.invoke(cli, ["sql", meta, "--db", db, "--json"])
    assert json.loads(decoded.stdout) == [{"meta": {"page": 3, "tags": ["a"]}, "none": None}]
    shown = runner.invoke(cli, ["sql", meta, "--db", db])
    assert shown.stdout.splitlines()[1].split("  ")[0] == '{"page": 3, "tags": ["a"]}'
    cut = runner.invoke(
        cli, ["sql", "SELECT * FROM range(5)", "--db", db, "--json", "--limit", "3"]
    )
    assert len(json.loads(cut.stdout)) == 3
    assert "more than 3 rows: raise --limit to see them" in cut.stderr
    strict = runner.invoke(
        cli,
        [
            "sql",
            "SELECT 'nan'::DOUBLE AS n, TIMESTAMP '2024-03-10 23:30' AS t",
            "--db",
            db,
            "--json",
        ],
    )
    assert json.loads(strict.stdout, parse_constant=pytest.fail) == [
        {"n": None, "t": "2024-03-10T23:30:00"}
    ]
    many = runner.invoke(cli, ["sql", "SELECT * FROM range(5000)", "--db", db, "--limit", "3"])
    assert many.stdout.splitlines()[1:] == ["0", "1", "2"]
    assert "more than 3 rows: raise --limit to see them" in many.stderr  # as with --json
    # SQL that fails: DuckDB's words and where, as an error of structrag's (no traceback)
    code, _, err = run("sql", "SELECT nosuch FROM v_messages", "--db", db)
    assert code == 1 and "Traceback" not in err
    assert "the SQL failed: Binder Error" in err and "LINE 1:" in err and "hint:" in err


def test_entities_list_their_most_frequent_types_first(example_index: Path) -> None:
    out = CliRunner().invoke(cli, ["entities", "--db", str(example_index), "--json"]).stdout
    rows = json.loads(out)
    with Index(example_index, read_only=True) as index:
        for row in rows[:5]:
            counts = dict(
                index.sql(
                    "SELECT t, count(*) FROM (SELECT unnest(e.types) AS t FROM entities e "
                    "JOIN semantic_refs r USING (ref_id) WHERE e.stem_key = (SELECT stem_key "
                    "FROM entities WHERE name = ? LIMIT 1)) GROUP BY t",
                    [row["name"]],
                )
            )
            assert row["types"] == sorted(counts, key=lambda t: (-counts[t], t)), row


def test_errors_exit_non_zero_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversation": {"session_1": [')
    code, _, err = run("ingest", str(bad), "--db", str(tmp_path / "db"))
    assert code == 1
    assert "Traceback" not in err
    assert str(bad) in err and "line 1" in err and "truncated" in err
    code, _, err = run("stats", "--db", str(tmp_path / "nowhere"))
    assert code == 1 and "no index" in err and "Traceback" not in err
    code, _, err = run("ingest", "--db", str(tmp_path / "db"))
    assert code == 2 and "Missing argument" in err
    code, _, err = run("ingest", str(bad), "--db", str(bad / "sub"))
    assert code == 1 and "cannot create the index directory" in err and "Traceback" not in err


def test_main_turns_structrag_errors_into_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["show", "x", "--db", str(tmp_path / "missing")])
    assert info.value.code == 1
    assert "error: no index" in capsys.readouterr().err


def _duckdb_interrupts() -> list[Exception]:
    """What DuckDB raises when Ctrl-C (Python's SIGINT handler) or an interrupt stops a
    query, made for real."""
    import os
    import signal
    import threading

    import duckdb

    found: list[Exception] = []
    for stop in ("interrupt", "sigint"):
        con = duckdb.connect()
        if stop == "interrupt":
            timer = threading.Timer(0.3, con.interrupt)
        else:
            timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            con.execute("SELECT count(*) FROM range(10000000000) a").fetchall()
        except Exception as exc:
            found.append(exc)
        finally:
            timer.join()
            con.close()
    return found


def test_ctrl_c_inside_a_duckdb_query_is_an_interruption_not_a_traceback(
    tmp_path: Path,
    example_index: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from structrag.index import Index

    raised = _duckdb_interrupts()
    assert len(raised) == 2
    for exc in raised:

        def stats(self: Index, exc: Exception = exc) -> dict[str, object]:
            raise exc

        monkeypatch.setattr(Index, "stats", stats)
        with pytest.raises(SystemExit) as info:
            main(["stats", "--db", str(example_index), "--no-server"])
        assert info.value.code == 130, exc
        assert capsys.readouterr().err.strip() == "interrupted"
    monkeypatch.undo()
    with pytest.raises(SystemExit):  # an index that does not exist: not an interruption
        main(["stats", "--db", str(tmp_path / "none")])
    assert "interrupted" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ("reindex",),
        ("knowledge", "clear", "--shared"),
        ("knowledge", "remove", "doc-1"),
        ("memory", "prune", "--agent", "bot", "--older-than", "1d"),
        ("memory", "remove", "mem-1", "--agent", "bot"),
        ("memory", "search", "hi", "--agent", "bot"),
    ],
)
def test_a_mistyped_db_is_an_error_not_a_new_empty_index(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo"
    result = CliRunner().invoke(cli, [*args, "--db", str(typo)])
    # a StructragError (main prints it with its hint, exit status 1), not a usage error
    assert result.exit_code == 1, result.output
    assert "Usage:" not in result.output
    assert "no index at" in result.output + str(result.exception or "")
    assert not typo.exists()


def test_a_failed_first_ingest_leaves_no_index_behind(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"speaker": "Ann", "text": "hi"}\n{"speaker": ', encoding="utf-8")
    db = tmp_path / "db"
    code, _, err = run("ingest", str(bad), "--db", str(db))
    assert code == 1 and "line 2" in err
    assert not db.exists()


def test_batch_lines_are_checked(example_index: Path, tmp_path: Path) -> None:
    batch = tmp_path / "questions.jsonl"
    cases = {
        '{"question": "Who?", "budget": "lots"}': '"budget" must be a whole number of tokens',
        '{"question": "Who?", "budget": 2000000}': "from 1 to 1,000,000",
        '{"question": "   "}': '"question" must be a non-empty string',
        '{"question": "Who?", "conversation": 3}': '"conversation" must be a string',
        '{"question": "Who?", "conversation": "nope"}': "nope",
        '{"question": "Who?", "sources": ["knowledge"]}': "unknown key 'sources'",
        '{"question": "Who?", "budgett": 50}': "unknown key 'budgett'",
        "[1, 2]": "each line must be",
    }
    for line, message in cases.items():
        batch.write_text('{"question": "Who adopted Biscuit?"}\n' + line + "\n", encoding="utf-8")
        code, _, err = run("ask", "--batch", str(batch), "--db", str(example_index))
        assert code == 1, line
        assert message in err and f"{batch}" in err and "line 2" in err, err
        assert "Traceback" not in err


def test_one_budget_limit_for_the_api_the_cli_and_the_server(
    example_index: Path, tmp_path: Path
) -> None:
    """A budget over a million tokens is refused alike: by ``Index.ask`` and an agent's
    context window (a clear error), by the CLI (before it opens the index or asks a
    server) and by the server's request schema."""
    from structrag import ConfigError, Index
    from structrag.errors import MemoryInputError
    from structrag.query.context import MAX_BUDGET
    from structrag.server.schemas import AskIn

    with Index(example_index, read_only=True) as index:
        assert index.ask("Who adopted Biscuit?", budget=MAX_BUDGET).context.messages
        with pytest.raises(ConfigError, match="from 1 to 1,000,000 tokens, not 1000001"):
            index.ask("Who adopted Biscuit?", budget=MAX_BUDGET + 1)
    with (
        Index(tmp_path / "mem") as index,
        pytest.raises(MemoryInputError, match="from 1 to 1,000,000 tokens"),
    ):
        index.memory("bot").context("hello", budget=MAX_BUDGET + 1)
    for command in (("ask", "Who?"), ("memory", "context", "hello", "--agent", "bot")):
        code, _, err = run(*command, "--db", str(tmp_path / "none"), "--budget", "1000001")
        assert code == 2 and "1<=x<=1000000" in err, err
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="less than or equal to 1000000"):
        AskIn(question="Who?", budget=MAX_BUDGET + 1)


def test_stats_tell_histories_memory_rooms_and_documents_apart(tmp_path: Path) -> None:
    from structrag import Index

    db = tmp_path / "db"
    with Index(db) as index:
        index.ingest([Path(__file__).resolve().parents[1] / "examples" / "friends_chat.jsonl"])
        index.memory("bot").add("I moved to Porto last year.", user="sam", room="dm-sam")
        # a memory the agent files as knowledge is in its room, not a document
        index.memory("bot").add("The printer is on floor 2.", room="dm-sam", table="knowledge")
        index.knowledge.add("The studio's wifi password is teapot-42.", shared=True)
        stats = index.stats()
        assert stats["conversation_kinds"] == {"histories": 1, "memory_rooms": 1, "documents": 1}
        assert stats["conversations"] == 3
        # messages are the conversations' (46 ingested, 1 the agent's); the fact made of
        # the agent's message, its note and the document's fragment are memories
        assert stats["messages"] == 47
        assert stats["memories"] == {"facts": 1, "relationships": 0, "goals": 0, "knowledge": 2}
    code, out, err = run("stats", "--db", str(db))
    assert code == 0, err
    assert "conversations:  3 (1 history, 1 memory room, 1 document)" in out
    assert "messages:       47\n" in out
    assert "memories:       1 fact, 2 knowledge memories\n" in out


def test_lists_of_an_unknown_conversation_are_an_error(example_index: Path) -> None:
    for command in ("entities", "topics"):
        code, _, err = run(command, "--db", str(example_index), "--conversation", "nope")
        assert code == 1 and "no conversation 'nope'" in err and "structrag conversations" in err


def test_a_read_only_command_ends_at_once_with_its_output_whole(example_index: Path) -> None:
    """A read-only command run as the process's entry point skips the interpreter's
    teardown (no exit handlers run) once it has succeeded; what it printed is all there,
    as printed in process. A command that fails tears down."""
    args = ["query", "Biscuit OR Marco", "--db", str(example_index), "--limit", "40", "--json"]
    proc = run_marked(*args)
    assert proc.returncode == 0, proc.stderr
    assert "torn down" not in proc.stderr
    in_process = CliRunner().invoke(cli, args)
    assert in_process.exit_code == 0
    printed, expected = json.loads(proc.stdout), json.loads(in_process.stdout)
    printed.pop("seconds"), expected.pop("seconds")
    assert printed == expected
    assert len(printed["messages"]) > 5
    failing = run_marked("show", "nope", "--db", str(example_index))
    assert failing.returncode == 1 and "torn down" in failing.stderr


def test_an_ingest_ends_at_once_with_its_index_whole(tmp_path: Path, locomo_file: Path) -> None:
    db = tmp_path / "db"
    proc = run_marked("ingest", str(locomo_file), "--db", str(db), "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "torn down" not in proc.stderr
    (report,) = json.loads(proc.stdout)
    code, out, err = run("stats", "--db", str(db), "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == report["messages_added"] > 0
    # Memory commands keep the full teardown.
    memory = run_marked("memory", "add", "I live in Porto.", "--db", str(db), "--agent", "a")
    assert memory.returncode == 0, memory.stderr
    assert "torn down" in memory.stderr


def test_ctrl_c_during_an_ingest_ends_it_cleanly_and_a_rerun_finishes(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) in the middle of
    extraction: exit 130 with one line and no tracebacks (the workers leave it to the
    ingest), nothing written; the same command again ingests the file."""
    import os
    import signal
    import time

    source = tmp_path / "big.jsonl"
    lines = [
        json.dumps(
            {
                "id": f"m{i}",
                "conversation": f"c{i // 500}",
                "speaker": ("Ana", "Ben")[i % 2],
                "text": f"Message {i}: Ana told Ben about the trip to Porto and the boat {i}.",
            }
        )
        for i in range(4000)
    ]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "db"
    args = [sys.executable, "-m", "structrag", "ingest", str(source), "--db", str(db), "-q"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not (db / ".staging").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # extracting
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().startswith("interrupted:"), err
    code, out, err = run("stats", "--db", str(db), "--json")
    assert (code, json.loads(out)["messages"]) == (0, 0) if code == 0 else "no index at" in err
    again = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    code, out, err = run("stats", "--db", str(db), "--json")
    assert json.loads(out)["messages"] == 4000


def test_a_text_index_with_a_segment_missing_says_to_reindex(
    tmp_path: Path, example_index: Path
) -> None:
    import shutil

    db = tmp_path / "ix"
    shutil.copytree(example_index, db)
    for segment in (db / "whoosh").glob("*.seg"):
        segment.unlink()
    code, _, err = run("query", "Biscuit", "--db", str(db))
    assert code == 1 and "Traceback" not in err
    assert "cannot read the text index" in err and "structrag reindex" in err
    assert run("reindex", "--db", str(db))[0] == 0
    code, out, err = run("query", "Biscuit", "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["messages"], err


def test_a_full_disk_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    # The errors a full disk raises, as the CLI reads them (filling a real disk needs a
    # file system of its own: checked by hand on a 40 MB tmpfs, where ingests failed with
    # Whoosh's OSError ENOSPC and DuckDB's "Could not write ... .wal: No space left").
    import duckdb

    from structrag.cli import _disk_full

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "seg"))
    assert _disk_full(full) == f"no space left on device: {tmp_path / 'seg'}"
    assert _disk_full(OSError(errno.EACCES, "Permission denied")) is None
    assert _disk_full(ValueError("No space left on device")) is None
    wal = duckdb.TransactionException("Could not write x.wal: No space left on device")
    assert _disk_full(wal) == "no space left on device: the index's store could not write its log"


@pytest.mark.parametrize(
    ("as_json", "term"),
    [(False, False), (True, False), (False, True)],
    ids=["text", "json", "term"],
)
def test_ctrl_c_after_some_files_names_the_files_written(
    tmp_path: Path, as_json: bool, term: bool
) -> None:
    """Each file is written whole; an ingest of several that Ctrl-C stops says which of
    them are in, and prints their reports (their lines, or their JSON for scripts), as a
    finished ingest does (it printed nothing of them). SIGTERM (``timeout``, systemd)
    stops it the same way, exit 143 (it died at once, saying nothing, its staging left)."""
    import os
    import signal
    import time

    tiny, big = tmp_path / "tiny.jsonl", tmp_path / "big.jsonl"
    said = "Ana told Ben about the trip to Porto and the boat"
    tiny.write_text(json.dumps({"id": "t1", "speaker": "Ana", "text": said}) + "\n")
    big.write_text(
        "\n".join(
            json.dumps({"id": f"m{i}", "speaker": ("Ana", "Ben")[i % 2], "text": f"{said} {i}."})
            for i in range(4000)
        )
        + "\n"
    )
    db = tmp_path / "db"
    args = [sys.executable, "-m", "structrag", "ingest", str(tiny), str(big), "--db", str(db)]
    proc = subprocess.Popen(
        [*args, "-q", *(["--json"] if as_json else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    marker = db / "whoosh" / "GENERATION"  # the text index's generation: 1 once tiny is in
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if marker.exists() and marker.read_text().strip() == "1":
            break
        time.sleep(0.02)
    time.sleep(0.5)  # extracting the big file
    assert proc.poll() is None, proc.communicate()
    if term:
        os.kill(proc.pid, signal.SIGTERM)  # the main process only, as `timeout` sends it
    else:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == (143 if term else 130) and "Traceback" not in err, err
    assert f"{tiny}: written before the interruption" in err and str(big) not in err
    stopped = "terminated (SIGTERM)" if term else "interrupted"
    assert f"{stopped}: each file is written whole" in err
    assert not (db / ".staging").exists()
    if as_json:
        (report,) = json.loads(out)
        assert (report["path"], report["messages_added"]) == (str(tiny), 1), out
    else:
        assert out.startswith(f"{tiny} (jsonl): 1 new, 0 updated") and str(big) not in out, out


def test_a_conversation_given_by_its_name_is_answered_with_its_id(tmp_path: Path) -> None:
    """``--conversation "Ann & Bo"`` (the name ``conversations`` shows) is refused with the
    id to give."""
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely, what is its name?"},
            ],
        },
        "qa": [],
    }
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample]))
    db = str(tmp_path / "ix")
    assert run("ingest", str(data), "--db", db, "-q")[0] == 0
    code, _, err = run("ask", "What did Ann adopt?", "--db", db, "--conversation", "ann & bo")
    assert code == 1 and "no conversation 'ann & bo'" in err
    assert "that is the name of conv-1: give its id" in err
