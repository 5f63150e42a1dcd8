"""The text index's own way of adding documents (``add_document``) writes what Whoosh's
``add_document`` writes: every term's postings (document, weight, value), the term
statistics, the columns, field lengths and stored fields, read back from the segment.
And the process that writes a large ingest's segment (``segment_process``) writes the
same index as the ingest's own process, and fails an ingest whole when it fails."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh import index

import structrag.ingest as ingest_module
from structrag import Index, IndexStateError
from structrag.store import segment_process, whoosh_documents, whoosh_index
from structrag.store.protocols import IndexedMessage

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "friends_chat.jsonl"

# words with spaces, empty words, non-ASCII and repeats: the terms arrive analysed, but a
# term holding a space is two terms to Whoosh's tokenizer, and an empty one none
_WORDS = st.sampled_from(["cat", "dog", "café", "naïve", "a b", "", " ", "x", "日本", "run"])


@st.composite
def _messages(draw: Any) -> list[IndexedMessage]:
    count = draw(st.integers(1, 12))
    out = []
    for mkey in range(count):
        out.append(
            IndexedMessage(
                mkey=draw(st.integers(0, 2**40)) if mkey else 0,
                conversation=draw(st.sampled_from(["c1", "conv 2", "Ünï"])),
                speaker=draw(st.sampled_from([None, "", "Ann", "BOB smith"])),
                first_ref=draw(st.integers(0, 2**40)),
                terms=draw(st.lists(_WORDS, max_size=8)),
                knowledge=draw(st.lists(st.lists(_WORDS, max_size=4), max_size=5)),
                content=draw(st.integers(0, 8)),
            )
        )
    return out


def _segment(messages: Sequence[IndexedMessage], fast: bool, pool_limit: int | None) -> Any:
    """Everything a reader shows of the segment ``messages`` make, one way or the other."""
    with tempfile.TemporaryDirectory() as folder:
        writer = index.create_in(folder, whoosh_index._schema()).writer(limitmb=64)
        if pool_limit is not None:
            writer.pool.limit = pool_limit  # sorted runs written to disk on the way
        for message in messages:
            if fast:
                whoosh_documents.add_document(writer, message)
            else:
                writer.add_document(**whoosh_documents.document(message))
        writer.commit(merge=False)
        return _dump(folder)


def _dump(folder: str | Path) -> dict[str, Any]:
    """Everything a reader shows of the Whoosh index in ``folder``."""
    with index.open_dir(str(folder)).reader() as reader:
        docs = reader.doc_count_all()
        terms = []
        for field, text in reader.all_terms():
            info = reader.term_info(field, text)
            matcher = reader.postings(field, text)
            postings = []
            while matcher.is_active():
                postings.append((matcher.id(), matcher.weight(), matcher.value()))
                matcher.next()
            stats = (info.weight(), info.doc_frequency(), info.min_length(), info.max_length())
            terms.append((field, text, stats, info.max_weight(), postings))
        return {
            "docs": docs,
            "terms": terms,
            "columns": {n: list(reader.column_reader(n)) for n in whoosh_documents.COLUMNS},
            "lengths": {
                f: (reader.field_length(f), [reader.doc_field_length(d, f) for d in range(docs)])
                for f in whoosh_documents.POSTED
            },
            "stored": [reader.stored_fields(d) for d in range(docs)],
        }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=_messages(), runs=st.booleans())
def test_fast_add_writes_what_whoosh_writes(messages: list[IndexedMessage], runs: bool) -> None:
    limit = 2_000 if runs else None
    assert _segment(messages, True, limit) == _segment(messages, False, limit)


def test_a_schema_the_fast_path_does_not_write_is_refused() -> None:
    schema = whoosh_index._schema()
    whoosh_index._check_fast_path(schema)
    schema["text"].scorable = True  # lengths the fast path does not write
    with pytest.raises(AssertionError, match="schema changed"):
        whoosh_index._check_fast_path(schema)


def test_fast_add_postings_of_a_message() -> None:
    """The postings of one message, spelled out: an empty speaker is a term of its own,
    a term's frequency and positions are counted, and a term with a space is two."""
    message = IndexedMessage(
        mkey=7,
        conversation="c",
        speaker=None,
        first_ref=40,
        terms=["dog", "cat", "dog"],
        knowledge=[["cat"], [], ["cat dog", "cat"]],
        content=2,
    )
    segment = _segment([message], True, None)
    postings = {(f, t): (p[0][1], stats[1]) for f, t, stats, _, p in segment["terms"]}
    assert postings == {
        ("conv", b"c"): (1.0, 1),
        ("key", b"7"): (1.0, 1),
        ("speaker", b""): (1.0, 1),
        ("text", b"cat"): (1.0, 1),
        ("text", b"dog"): (2.0, 1),
        ("knowledge", b"cat"): (3.0, 1),
        ("knowledge", b"dog"): (1.0, 1),
    }
    assert segment["columns"] == {"mkey": [7], "first_ref": [40], "length": [3], "content": [2]}
    # the positions of "cat" in the knowledge field: refs 0, 2 and 2 again
    with tempfile.TemporaryDirectory() as folder:
        writer = index.create_in(folder, whoosh_index._schema()).writer()
        whoosh_documents.add_document(writer, message)
        writer.commit(merge=False)
        with index.open_dir(folder).searcher() as searcher:
            matcher = searcher.reader().postings("knowledge", "cat")
            assert list(matcher.value_as("positions")) == [0, 2, 2]


def _message(mkey: int) -> IndexedMessage:
    return IndexedMessage(mkey, "c", "Ann", mkey * 3, ["dog", "cat"], [["dog"]], 2)


def _staged(tmp_path: Path) -> Path:
    path = tmp_path / "whoosh"
    path.mkdir()
    index.create_in(str(path), whoosh_index._schema())
    return path


def test_an_ingest_indexed_by_the_segment_process_equals_one_indexed_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[segment_process.SegmentProcess] = []
    real_init = segment_process.SegmentProcess.__init__

    def init(self: segment_process.SegmentProcess, path: Path) -> None:
        real_init(self, path)
        started.append(self)

    monkeypatch.setattr(segment_process.SegmentProcess, "__init__", init)
    monkeypatch.setattr(ingest_module, "SEGMENT_PROCESS_MIN", 10**9)
    with Index(tmp_path / "here") as here:
        (report,) = here.ingest([EXAMPLE])
    assert not started
    monkeypatch.setattr(ingest_module, "SEGMENT_PROCESS_MIN", report.messages_added)
    with Index(tmp_path / "child") as child:
        (again,) = child.ingest([EXAMPLE])
        answer = child.ask("Who adopted a dog?")
    assert again.messages_added == report.messages_added == 46
    assert [p._process.returncode for p in started] == [0]
    assert _dump(tmp_path / "child" / "whoosh") == _dump(tmp_path / "here" / "whoosh")
    with Index(tmp_path / "here") as here:
        assert here.ask("Who adopted a dog?").context == answer.context
    assert not list((tmp_path / "child").glob(".staging/*"))


def test_a_segment_process_that_dies_fails_the_ingest_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The segment process is killed as it is about to write (a fault point in it): the
    ingest fails with a clear error, leaves nothing (store, text index, staging folder),
    and the same ingest then succeeds."""
    monkeypatch.setattr(ingest_module, "SEGMENT_PROCESS_MIN", 1)
    monkeypatch.setenv("STRUCTRAG_FAULT", "segment-write")
    with Index(tmp_path / "idx") as idx:
        with pytest.raises(IndexStateError, match=r"segment stopped \(exit code -9\)") as exc:
            idx.ingest([EXAMPLE])
        assert "run it again" in (exc.value.hint or "")
        assert idx.store.sql("SELECT count(*) FROM messages") == [(0,)]
        idx.text_index.refresh()
        assert idx.text_index.doc_count() == 0
        assert not list((tmp_path / "idx").glob(".staging/*"))
        monkeypatch.delenv("STRUCTRAG_FAULT")
        (report,) = idx.ingest([EXAMPLE])
        assert report.messages_added == 46
        assert idx.text_index.doc_count() == 46


def test_a_failed_commit_stops_a_segment_process_still_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A digest fails while the segment process still writes (held at its fault point):
    the ingest raises the digest's error without waiting for the segment, the child is
    gone, nothing is written, and the same ingest then succeeds."""
    import structrag.index as index_module

    marker = tmp_path / "writing"
    monkeypatch.setattr(ingest_module, "SEGMENT_PROCESS_MIN", 1)
    monkeypatch.setenv("STRUCTRAG_FAULT", f"segment-write:wait:{marker}")
    started: list[segment_process.SegmentProcess] = []
    real_init = segment_process.SegmentProcess.__init__

    def init(self: segment_process.SegmentProcess, path: Path) -> None:
        real_init(self, path)
        started.append(self)

    def failing_builder(embedder: Any) -> Any:
        def build(store: Any, conversation: str) -> bytes:
            deadline = time.monotonic() + 60
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.01)  # the child holds at its point, the segment unwritten
            raise RuntimeError("digest failed")

        return build

    monkeypatch.setattr(segment_process.SegmentProcess, "__init__", init)
    monkeypatch.setattr(index_module, "_digest_builder", failing_builder)
    # a safety net: were the child waited for, it would go on after this
    release = threading.Timer(60, lambda: marker.unlink(missing_ok=True))
    release.start()
    try:
        with Index(tmp_path / "idx") as idx:
            with pytest.raises(RuntimeError, match="digest failed"):
                idx.ingest([EXAMPLE])
            assert marker.exists()  # still held there: the ingest did not wait
            assert [p._process.returncode for p in started] == [-9]
            assert idx.store.sql("SELECT count(*) FROM messages") == [(0,)]
            idx.text_index.refresh()
            assert idx.text_index.doc_count() == 0
            assert not list((tmp_path / "idx").glob(".staging/*"))
    finally:
        release.cancel()
    monkeypatch.undo()
    with Index(tmp_path / "idx") as idx:
        (report,) = idx.ingest([EXAMPLE])
        assert report.messages_added == 46
        assert idx.text_index.doc_count() == 46


def test_the_segment_process_reports_what_failed(tmp_path: Path) -> None:
    child = segment_process.SegmentProcess(_staged(tmp_path))
    child._send([("not", "a document")])
    with pytest.raises(IndexStateError, match="could not be written: TypeError"):
        child.finish()
    child.cancel()
    # no index in the folder: the child says so, and the log holds nothing unexpected
    missing = tmp_path / "missing" / "whoosh"
    missing.mkdir(parents=True)
    child = segment_process.SegmentProcess(missing)
    with pytest.raises(IndexStateError, match="could not be written: EmptyIndexError"):
        child.finish()


def test_a_segment_process_that_fails_while_indexing_says_why(tmp_path: Path) -> None:
    """The child fails on a batch and ends; the next batch finds its input closed, and
    the error raised is the one the child answered with, not a bare "stopped"."""
    child = segment_process.SegmentProcess(_staged(tmp_path))
    child._send([("not", "a document")])
    child._process.wait()
    with pytest.raises(IndexStateError, match="could not be written: TypeError"):
        child._send([(1, "c", "Ann", 3, ["dog"], [["dog"]], 1)])
    child.cancel()


def test_a_cancelled_segment_process_ends_and_writes_no_segment(tmp_path: Path) -> None:
    """Cancelled, the child is killed at once: extraction workers forked after it
    started would hold its input open, so waiting for it to see the end could last."""
    path = _staged(tmp_path)
    child = segment_process.SegmentProcess(path)
    for mkey in range(segment_process.BATCH + 1):
        child.add(_message(mkey))
    child.cancel()
    assert child._process.returncode is not None
    with index.open_dir(str(path)).reader() as reader:
        assert reader.doc_count_all() == 0
    assert not list(path.glob("*.seg"))


def test_ctrl_c_in_the_terminal_does_not_reach_the_segment_process(tmp_path: Path) -> None:
    """Ctrl-C in a terminal reaches every process of its foreground group: the child is
    in a session of its own (the ingest decides whether to stop), and goes on until told."""
    path = _staged(tmp_path)
    child = segment_process.SegmentProcess(path)
    assert os.getsid(child._process.pid) != os.getsid(0)
    assert os.getpgid(child._process.pid) != os.getpgid(0)
    child.add(_message(1))
    child.finish()
    assert child._process.returncode == 0
    assert _dump(path)["columns"]["mkey"] == [1]


def test_the_segment_process_finds_what_a_script_put_on_its_path(tmp_path: Path) -> None:
    """A script run by a Python without structrag installed, that puts it on ``sys.path``
    itself: its ingest's segment process finds structrag and Whoosh all the same."""
    import subprocess
    import sys

    base = getattr(sys, "_base_executable", sys.executable)
    bare = subprocess.run(
        [base, "-I", "-c", "import structrag"], capture_output=True, text=True, check=False
    )
    if bare.returncode == 0:
        pytest.skip(f"{base} has structrag installed: nothing to show")
    script = tmp_path / "ingest.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = {[p for p in sys.path if p]!r}\n"
        "import structrag.ingest\n"
        "from structrag import Index\n"
        "structrag.ingest.SEGMENT_PROCESS_MIN = 1\n"
        f"with Index({str(tmp_path / 'idx')!r}) as index:\n"
        f"    (report,) = index.ingest([{str(EXAMPLE)!r}])\n"
        "    print(report.messages_added, index.text_index.doc_count())\n"
    )
    done = subprocess.run(
        [base, "-I", str(script)], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["46", "46"]
