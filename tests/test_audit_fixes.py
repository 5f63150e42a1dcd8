"""Defects a user audit found (a wheel in a fresh venv, following the README): each test
fails on the code before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag.cli import cli
from structrag.errors import InputError
from tests.serve_helpers import (
    Served,
    conversation_file,
    copy_index,
    http,
    run_cli,
    start_server,
)


def failing(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``structrag ARGS`` prints on stderr when it fails (exit 1), as a user sees it."""
    from structrag.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(args)
    err = capsys.readouterr().err
    assert info.value.code == 1, err
    assert "Traceback" not in err
    return err


# -- 1. --no-server on an index a live server owns: refused at once ---------------------


@pytest.fixture(scope="module")
def served(example_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = copy_index(example_index, tmp_path_factory.mktemp("audit") / "index")
    server = start_server(directory)
    yield server
    assert server.stop() == 0, server.log.read_text()


@pytest.mark.parametrize(
    "args",
    [("sql", "select 1"), ("stats",), ("query", "entity:Biscuit"), ("ingest", "CHAT")],
    ids=["sql", "stats", "query", "ingest"],
)
def test_no_server_on_a_served_index_fails_at_once(
    served: Served, tmp_path: Path, args: tuple[str, ...]
) -> None:
    chat = conversation_file(tmp_path / "chat.jsonl", "audit-chat", 3)
    argv = [str(chat) if a == "CHAT" else a for a in args]
    db = str(served.directory)
    started = time.monotonic()
    done = run_cli(*argv, "--db", db, "--no-server", env={"STRUCTRAG_LOCK_TIMEOUT": "30"})
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed < 20, (elapsed, done.stderr)  # no 30 s wait for a lock it never gets
    assert "Traceback" not in done.stderr
    assert served.url in done.stderr, done.stderr
    if args[0] == "sql":  # sql cannot go through the server: stop it
        assert "cannot go through it" in done.stderr and "kill -TERM" in done.stderr
    else:
        assert f"the structrag server at {served.url}" in done.stderr, done.stderr
        assert "--no-server cannot open its files while it runs" in done.stderr
        assert "leave out --no-server" in done.stderr


def test_sql_on_a_served_index_does_not_suggest_no_server(served: Served) -> None:
    done = run_cli("sql", "select 1", "--db", str(served.directory))
    assert done.returncode == 1
    assert "--no-server" not in done.stderr, done.stderr
    assert "stop the server" in done.stderr and f"process {served.process.pid}" in done.stderr


# -- 2. a garbled WhatsApp message line: a warning naming the file and the line ----------


def test_garbled_whatsapp_header_lines_are_warned_about(tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(
        "12/03/2023, 14:02 - Ana: hi there\n"
        "12/03/2023, 14:03 - Bob: hello\n"
        "12/03/2023, 14:04 Bob broken line without dash\n"
        "12/03/2023, 14:0\n"
        "12/03/2023 was a good day\n"  # a message line that starts with a date: fine
        "13/03/2023, 09:00 - Ana: dates that work for me:\n"
        "15/03/2023\n"  # a list of dates: fine
        "16/03/2023\n"
        "13/03/2023 10:00 standup with Carol\n"  # not written as the file's lines are
        "14/03/2023 2 people off\n"
        "12 March 2023, 14:00 the agenda\n",  # another way of writing dates: fine
        encoding="utf-8",
    )
    db = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(chat), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)[0]
    assert len(report["warnings"]) == 1, report["warnings"]
    assert f"{chat}: lines 3, 4 start with a date and time" in report["warnings"][0]
    assert report["messages_added"] == 3  # the lines stay text of the message above
    shown = CliRunner().invoke(cli, ["ingest", str(chat), "--db", str(tmp_path / "b")])
    assert "warning: " in shown.stderr and "lines 3, 4" in shown.stderr


def test_ios_whatsapp_garbled_line_and_clean_export(tmp_path: Path) -> None:
    chat = tmp_path / "_chat.txt"
    chat.write_text(
        "[12/03/2023, 14:02:05] Ana: hi there\n"
        "[12/03/2023, 14:03:10] Bob: hello\n"
        "[12/03/2023, 14:0\n"
        "12/03/2023, 14:05 - pasted from an Android chat\n"  # not this file's layout
        "[13/03/2023, 09:00:00] Ana: see you\n",
        encoding="utf-8",
    )
    db = tmp_path / "index"
    result = CliRunner().invoke(cli, ["ingest", str(chat), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert f"{chat}: line 3 starts with a date and time" in result.stderr, result.stderr
    assert "line 4" not in result.stderr


# -- 3. --format slack on a file that is no Slack export --------------------------------


def test_format_slack_on_a_text_file_says_what_a_slack_export_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text("12/03/2023, 14:02 - Ana: hi there\n", encoding="utf-8")
    args = ["ingest", str(chat), "--format", "slack", "--db", str(tmp_path / "index")]
    err = failing(args, capsys)
    assert "not a Slack export" in err, err
    assert "channels.json" in err and "YYYY-MM-DD.json" in err
    assert "jsonl" not in err and "invalid JSON" not in err


def test_format_slack_on_json_lines_drops_the_jsonl_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.json"
    rows.write_text('{"a": 1}\n{"b": 2}\n', encoding="utf-8")
    args = ["ingest", str(rows), "--format", "slack", "--db", str(tmp_path / "index")]
    err = failing(args, capsys)
    assert "not a Slack day file" in err and "line 2" in err
    assert "--format jsonl" not in err, err


# -- 4. structrag mcp without the serve extra names itself -------------------------------


def test_mcp_without_the_serve_extra_names_structrag_mcp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name in ("fastapi", "mcp") else real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    err = failing(["mcp", "--db", str(tmp_path / "index"), "--create"], capsys)
    assert "structrag mcp needs fastapi, mcp" in err, err
    assert "structrag serve needs" not in err
    assert "pip install 'structrag[serve]'" in err


# -- 5. a bad STRUCTRAG_LOCK_TIMEOUT is an error, not 10 s --------------------------------


@pytest.mark.parametrize("value", ["abc", "-1", "nan"])
def test_a_bad_lock_timeout_is_an_error_naming_it(
    value: str,
    example_index: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from structrag.errors import ConfigError
    from structrag.store.workspace import lock_timeout

    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", value)
    with pytest.raises(ConfigError, match="STRUCTRAG_LOCK_TIMEOUT"):
        lock_timeout()
    err = failing(["stats", "--db", str(example_index), "--no-server"], capsys)
    assert f"STRUCTRAG_LOCK_TIMEOUT={value!r}" in err, err


@pytest.mark.parametrize(("value", "seconds"), [("", 10.0), ("0", 0.0), (" 2.5 ", 2.5)])
def test_good_lock_timeouts_still_read(
    value: str, seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from structrag.store.workspace import lock_timeout

    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", value)
    assert lock_timeout() == seconds


# -- 6. conversations points at the listing that shows every document --------------------


def test_conversations_note_names_the_list_that_shows_agents_documents(tmp_path: Path) -> None:
    db = str(tmp_path / "index")
    shared = tmp_path / "shared.md"
    shared.write_text("# Handbook\n\nThe office opens at nine.\n", encoding="utf-8")
    own = tmp_path / "own.md"
    own.write_text("# Notes\n\nThe support bot answers in Portuguese.\n", encoding="utf-8")
    runner = CliRunner()
    for path, whose in ((shared, ["--shared"]), (own, ["--agent", "support-bot"])):
        added = runner.invoke(cli, ["knowledge", "add", str(path), "--db", db, *whose])
        assert added.exit_code == 0, added.output
    listing = runner.invoke(cli, ["conversations", "--db", db, "--no-server"])
    assert listing.exit_code == 0, listing.output
    assert "2 documents added as knowledge" in listing.stdout, listing.stdout
    command = listing.stdout.rsplit("`", 2)[1]
    assert command == f"structrag knowledge list --all --db {db}", listing.stdout
    shown = runner.invoke(cli, command.split()[1:])
    assert shown.exit_code == 0, shown.output
    assert "shared" in shown.stdout and "agent support-bot" in shown.stdout


# -- 7. memory search marks a superseded memory, as memory facts does ---------------------


def test_memory_search_text_marks_superseded_facts(tmp_path: Path) -> None:
    db = str(tmp_path / "index")
    runner = CliRunner()
    for text in ("I live in Lisbon.", "I moved to Porto, I live in Porto now."):
        added = runner.invoke(
            cli, ["memory", "add", text, "--db", db, "--agent", "bot", "--user", "ana"]
        )
        assert added.exit_code == 0, added.output
    args = ["memory", "search", "live", "--db", db, "--agent", "bot", "--table", "facts"]
    hits = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    old = {h["id"] for h in hits if h.get("status") == "superseded"}
    assert old, hits
    text = runner.invoke(cli, args).stdout
    for line in text.splitlines():
        record = line.split()[1]
        assert ("(superseded)" in line) == (record in old), text


# -- 8. pattern queries that find nothing say why -----------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("entity:Zorro", "no entity named 'Zorro' in the index"),
        ("entity:Biscit", "entities with similar names: Biscuit"),
        ("type:book", "no entity of type 'book' in the index"),
        ("kind:sprots~", "did you mean kind:sport?"),
        ("kind:sprots", "'sprots' is not a category the lexicon of kinds knows"),
    ],
)
def test_pattern_queries_that_find_nothing_say_why(
    example_index: Path, query: str, expected: str
) -> None:
    from structrag import Index

    with Index(example_index, read_only=True) as index:
        result = index.query(query)
    assert not result.messages
    assert any(expected in note for note in result.notes), result.notes


def test_pattern_notes_name_the_conversation_and_stay_quiet_on_hits(example_index: Path) -> None:
    from structrag import Index

    with Index(example_index, read_only=True) as index:
        scoped = index.query("entity:Zorro", conversation="friends")
        found = index.query("entity:Biscuit")
        narrowed = index.query("entity:Biscuit date:1990")
    assert any("no entity named 'Zorro' in conversation 'friends'" in n for n in scoped.notes)
    assert found.messages and not any("no entity" in n for n in found.notes)
    # Biscuit is there: what found nothing is the date, not the entity
    assert not narrowed.messages and not any("no entity" in n for n in narrowed.notes)


# -- 9. ask --batch answers line by line, and reads stdin as - ----------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"question": ', "invalid JSON"),
        ('{"question": "Who?", "conversation": "nope"}', "no conversation 'nope'"),
        ('{"question": "?"}', ""),
    ],
    ids=["json", "conversation", "question"],
)
def test_ask_batch_prints_the_answers_before_a_bad_line(
    example_index: Path, tmp_path: Path, bad: str, message: str
) -> None:
    batch = tmp_path / "questions.jsonl"
    batch.write_text(
        '{"question": "When did Marco adopt Biscuit?", "id": "q1"}\n'
        '{"question": "Who teaches the cooking class?"}\n' + bad + "\n"
        '{"question": "Who is Sam?"}\n',
        encoding="utf-8",
    )
    done = run_cli("ask", "--batch", str(batch), "--db", str(example_index), "--budget", "80")
    assert done.returncode == 1, done.stderr
    assert [json.loads(line)["line"] for line in done.stdout.splitlines()] == [1, 2]
    assert f"{batch}, line 3" in done.stderr and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_ask_batch_reads_stdin_as_dash(example_index: Path) -> None:
    questions = '{"question": "When did Marco adopt Biscuit?"}\n{"question": "Who is Sam?"}\n'
    runner = CliRunner()
    args = ["ask", "--batch", "-", "--db", str(example_index), "--budget", "80"]
    done = runner.invoke(cli, args, input=questions)
    assert done.exit_code == 0, done.output
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["line"] for a in answers] == [1, 2]
    assert "m11" in answers[0]["message_ids"]
    bad = runner.invoke(cli, args, input=questions + '{"question": 3}\n')
    assert isinstance(bad.exception, Exception)
    assert "<stdin>, line 3" in str(bad.exception)
    assert len(bad.stdout.splitlines()) == 2  # the answers before it


def test_ask_batch_on_stdin_refuses_a_lone_surrogate_as_a_file_does(example_index: Path) -> None:
    line = '{"question": "who is free \\ud800 on Friday?"}\n'
    args = ["ask", "--batch", "-", "--db", str(example_index)]
    done = CliRunner().invoke(cli, args, input=line)
    assert isinstance(done.exception, InputError), done.exception
    assert "<stdin>, line 1" in str(done.exception) and "surrogate" in str(done.exception)


def test_ingest_through_a_server_names_the_files_as_given(served: Served, tmp_path: Path) -> None:
    """The server is sent absolute paths; the reports name the files as the command was
    given them, as a local ingest does."""
    (tmp_path / "chats").mkdir()
    for name in ("one", "two"):
        conversation_file(tmp_path / "chats" / f"{name}.jsonl", f"as-given-{name}", 3)
    db = str(served.directory)
    estimate = run_cli("ingest", "chats", "--db", db, "--dry-run", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    assert "chats/one.jsonl (jsonl): 3 new" in estimate.stdout, estimate.stdout
    done = run_cli("ingest", "chats", "--db", db, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["path"] for r in json.loads(done.stdout)) == [
        "chats/one.jsonl",
        "chats/two.jsonl",
    ]
    again = run_cli("ingest", "chats/two.jsonl", "--db", db, cwd=tmp_path)
    assert again.stdout.startswith("chats/two.jsonl: skipped, already ingested"), again.stdout
    assert str(tmp_path) not in done.stdout + again.stdout + estimate.stdout


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_of_an_ingest_through_a_server_reports_the_files_written(
    served: Served, tmp_path: Path, as_json: bool
) -> None:
    """Ctrl-C cancels the server's job; once it stops, the command prints the reports of
    the files it wrote, as a local ingest does, and exits 130."""
    import os
    import signal
    import subprocess
    import sys

    conversation_file(tmp_path / "tiny.jsonl", f"cancelled-tiny-{as_json}", 2)
    # long enough to be under way at Ctrl-C on a fast idle machine (3,000 was not)
    big = conversation_file(tmp_path / "big.jsonl", f"cancelled-big-{as_json}", 20000)
    args = ["ingest", "tiny.jsonl", "big.jsonl", "--db", str(served.directory), "-q"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "structrag", *args, *(["--json"] if as_json else [])],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    job: dict[str, object] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        _, jobs = http("GET", f"{served.url}/v1/jobs")
        job = next((j for j in jobs if str(big) in j["inputs"]), {})
        if job and job["progress"]["files"] >= 1:  # type: ignore[index]
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "tiny.jsonl: written before the interruption" in err and "big" not in err, err
    if as_json:
        (report,) = json.loads(out)
        assert (report["path"], report["messages_added"]) == ("tiny.jsonl", 2), out
    else:
        assert out.startswith("tiny.jsonl (jsonl): 2 new, 0 updated") and "big" not in out, out
    _, ended = http("GET", f"{served.url}/v1/jobs/{job['id']}")
    assert ended["state"] == "cancelled", ended


def test_a_question_too_long_fails_the_same_through_a_server(
    served: Served, example_index: Path, tmp_path: Path
) -> None:
    """The server's request schema refused it with its own words ("String should have at
    most 2000 characters", a position of "questions.1.question"), no answer printed."""
    batch = tmp_path / "batch.jsonl"
    lines = ["When did Marco adopt Biscuit?", "x " * 1250, "Who is Sam?"]
    batch.write_text("".join(json.dumps({"question": q}) + "\n" for q in lines), "utf-8")
    said = []
    for db in (str(served.directory), str(example_index)):
        done = run_cli("ask", "--batch", str(batch), "--db", db, "--budget", "80")
        assert done.returncode == 1, done.stderr
        assert [json.loads(line)["line"] for line in done.stdout.splitlines()] == [1]
        assert f"{batch}, line 2: the question has 2,500 characters" in done.stderr
        said.append(done.stderr)
        one = run_cli("ask", "y" * 2001, "--db", db)
        assert one.returncode == 1 and "the question has 2,001 characters" in one.stderr
        assert "openapi" not in one.stderr + done.stderr
    assert said[0] == said[1]


def test_a_store_a_killed_first_write_left_empty_reads_as_no_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kill -9 while a first ingest creates the index leaves a DuckDB file without tables:
    reading commands called it "schema version None" and said to re-create it."""
    import duckdb

    folder = tmp_path / "index"
    folder.mkdir()
    duckdb.connect(str(folder / "structrag.duckdb")).close()
    err = failing(["stats", "--db", str(folder), "--no-server"], capsys)
    assert f"no index at {folder}: its structrag.duckdb holds no tables yet" in err, err
    assert "structrag ingest FILE" in err and "version None" not in err
    chat = conversation_file(tmp_path / "chat.jsonl", "after-kill", 3)
    assert run_cli("ingest", str(chat), "--db", str(folder), "-q").returncode == 0
    stats = run_cli("stats", "--db", str(folder), "--json")
    assert json.loads(stats.stdout)["messages"] == 3, stats.stderr


# -- 10. --db on a folder of the user's own files: no index created among them -------------


def test_an_index_is_not_created_in_a_folder_of_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chats").mkdir()
    chat = conversation_file(tmp_path / "chats" / "chat.jsonl", "folder-chat", 3)
    (tmp_path / "chats" / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = sorted(p.name for p in (tmp_path / "chats").iterdir())
    err = failing(["ingest", str(chat), "--db", str(tmp_path / "chats"), "-q"], capsys)
    assert f"{tmp_path / 'chats'} is not an index" in err
    assert "(chat.jsonl, notes.txt)" in err and "new or empty directory" in err, err
    assert sorted(p.name for p in (tmp_path / "chats").iterdir()) == before  # nothing added


@pytest.mark.parametrize(
    "present", [[], [".gitkeep", ".DS_Store"], ["lost+found"]], ids=["empty", "hidden", "volume"]
)
def test_an_index_is_created_in_an_empty_folder_or_one_of_hidden_files(
    tmp_path: Path, present: list[str]
) -> None:
    chat = conversation_file(tmp_path / "chat.jsonl", "folder-chat", 3)
    folder = tmp_path / "index"
    folder.mkdir()
    for name in present:
        if name == "lost+found":  # the root of a volume mounted for the index
            (folder / name).mkdir()
        else:
            (folder / name).write_text("", encoding="utf-8")
    done = run_cli("ingest", str(chat), "--db", str(folder), "-q")
    assert done.returncode == 0, done.stderr
    again = run_cli("ingest", str(chat), "--db", str(folder), "-q")  # an index now: reopened
    assert again.returncode == 0, again.stderr
    assert (folder / "structrag.duckdb").is_file()


# -- 11. memory reads on an index this process may not write --------------------------------


def _bound(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``structrag ARGS --db DB`` in a process that file modes bind: root ignores them, so
    it runs without root's capabilities (setpriv)."""
    import shutil
    import sys

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a process that file modes bind")
    command = ["setpriv", "--bounding-set=-all", sys.executable, "-m", "structrag"]
    return subprocess.run(
        [*command, *args, "--db", str(db)], capture_output=True, text=True, check=False
    )


@contextmanager
def _read_only(db: Path) -> Iterator[None]:
    paths = [db, *db.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        yield
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)


def test_memory_reads_work_on_an_index_it_may_not_write(tmp_path: Path) -> None:
    """memory get, recent, search and context opened the index to write (they count what
    they read): on a read-only index they failed with 'Permission denied'."""
    db = tmp_path / "index"
    add = ["memory", "add", "I adopted a cat named Miso.", "--db", str(db), "--agent", "bot"]
    added = run_cli(*add, "--user", "priya", "--room", "dm", "--json")
    memory_id = json.loads(added.stdout)["id"]
    with _read_only(db):

        def bound(*args: str) -> subprocess.CompletedProcess[str]:
            return _bound(db, *args, "--agent", "bot")

        for args in (
            ("memory", "get", memory_id),
            ("memory", "recent"),
            ("memory", "search", "Miso"),
            ("memory", "context", "What is my cat called?", "--room", "dm"),
        ):
            done = bound(*args)
            assert done.returncode == 0, (args, done.stderr)
            assert "Miso" in done.stdout, (args, done.stdout)
        refused = bound("memory", "add", "I moved to Porto.")
        assert refused.returncode == 1 and "Permission denied" in refused.stderr


def test_a_read_only_index_behind_its_text_index_is_read_with_a_note(tmp_path: Path) -> None:
    """A text index behind the store is rebuilt on opening, which needs to write: on an
    index the process may not write, every read failed with 'Permission denied'. It now
    reads what there is, and says so; opened where it can write, it is rebuilt."""
    db = tmp_path / "index"
    chat = conversation_file(tmp_path / "chat.jsonl", "behind", 5)
    assert run_cli("ingest", str(chat), "--db", str(db), "-q").returncode == 0
    (db / "whoosh" / "GENERATION").write_text("0\n")  # as a write killed between commits
    with _read_only(db):
        stats = _bound(db, "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["messages"] == 5
        assert "the text index is behind the store (generation 0 vs 1)" in stats.stderr
        assert "cannot be rebuilt here" in stats.stderr and "Permission denied" in stats.stderr
    reopened = run_cli("stats", "--db", str(db))
    assert "rebuilt it from the store (5 messages)" in reopened.stderr, reopened.stderr
