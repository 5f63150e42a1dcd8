"""Conversation digests: stored by an ingest, read back whole, dropped by any other write to
their conversation, and never a different answer from the tables they summarise."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from structrag import Index
from structrag.query import digest as digest_module
from structrag.query.digest import ConversationDigest, DigestContent, build_digest
from structrag.store.duckdb import writer
from structrag.store.protocols import MessageFrame, RefTable, Scope
from structrag.tokens import get_counter

QUESTIONS = {
    "friends": [
        "When did Marco adopt Biscuit?",
        "What did Marco tell Priya about the engine in July 2024?",
        "Who teaches the cooking class, and where did he work before?",
        "Where does Ana work?",
        "What is Priya training for?",
    ],
    "work": ["Who reviewed the budget?", "When is the launch?"],
}

WORK = [
    ("w1", "Dana", "2024-06-01T09:00:00", "Kofi reviewed the budget for the Osaka launch."),
    ("w2", "Kofi", "2024-06-01T09:05:00", "The launch is on 12 September, in Osaka."),
    ("w3", "Dana", "2024-06-02T10:00:00", "Great, I will book the hotel near the venue."),
]


def _objects(values: list[object]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _content(vectors: np.ndarray) -> DigestContent:
    frame = MessageFrame(
        mkeys=np.array([7, 3, 9], dtype=np.int64),
        conversations=_objects(["c", "c", "c"]),
        ids=_objects(["m1", "", "m3 é"]),
        ordinals=np.array([0, 1, 2], dtype=np.int64),
        sessions=_objects(["1", "2023-05-08", ""]),
        speakers=_objects(["Bé 🎉", None, ""]),
        timestamps=np.array(["2023-05-08T13:56:00", "NaT", "1969-12-31T23:59:59"], "datetime64[s]"),
    )
    return DigestContent(
        frame=frame,
        refs=RefTable(
            np.array([10, 11, 12], np.int64),
            np.array([7, 7, 9], np.int64),
            np.array([1, 2, 3], np.uint8),
        ),
        aliases=[("mel", "melanie", "speaker"), ("é", "", "x")],
        words=["adopt", "biscuit", "naïve"],
        edges=[],
        model="static" if len(vectors) else None,
        vector_mkeys=np.array([7, 9][: len(vectors)], dtype=np.int64),
        vectors=vectors,
        counter="cl100k_base",
        lines=["[8 May 2023] Bé 🎉: two\nlines", "", "x"],
        tokens=np.array([9, 1, 2], dtype=np.int32),
    )


@pytest.mark.parametrize("dims", [0, 4])
def test_a_digest_reads_back_what_was_stored(dims: int) -> None:
    vectors = (
        np.arange(2 * dims, dtype=np.float32).reshape(-1, dims)
        if dims
        else np.zeros((0, 0), np.float32)
    )
    content = _content(vectors)
    read = ConversationDigest.from_bytes("c", content.to_bytes())
    assert read is not None
    for name in ("mkeys", "conversations", "ids", "ordinals", "sessions", "speakers"):
        got, want = getattr(read.frame, name), getattr(content.frame, name)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), name
    assert read.frame.timestamps.dtype == content.frame.timestamps.dtype
    assert read.frame.timestamps.tobytes() == content.frame.timestamps.tobytes()
    assert read.refs.ref_ids.tolist() == [10, 11, 12] and read.refs.kinds.tolist() == [1, 2, 3]
    assert read.refs.mkeys.tolist() == [7, 7, 9]
    assert read.aliases() == content.aliases and read.words() == content.words
    assert read.edges() == [] and read.lines() == content.lines
    assert [read.line(i) for i in range(3)] == content.lines
    assert read.tokens.tolist() == [9, 1, 2] and read.counter == "cl100k_base"
    assert read.model == content.model and read.vectors.shape == vectors.shape
    assert read.vectors.tobytes() == vectors.tobytes()
    assert read.vector_mkeys.tolist() == content.vector_mkeys.tolist()


def test_a_digest_of_another_version_or_no_digest_is_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    content = _content(np.zeros((0, 0), np.float32))
    monkeypatch.setattr(digest_module, "DIGEST_VERSION", digest_module.DIGEST_VERSION + 1)
    newer = content.to_bytes()
    monkeypatch.undo()
    assert ConversationDigest.from_bytes("c", newer) is None
    assert ConversationDigest.from_bytes("c", b"not a digest") is None
    assert ConversationDigest.from_bytes("c", content.to_bytes()) is not None


@pytest.fixture
def two_chats(tmp_path: Path) -> Path:
    """The bundled example chat and a second conversation, in one JSON Lines file."""
    source = Path(__file__).parents[1] / "examples" / "friends_chat.jsonl"
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    rows += [
        {"id": i, "conversation": "work", "speaker": s, "timestamp": t, "text": x}
        for i, s, t, x in WORK
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def chats_index(tmp_path: Path, two_chats: Path) -> Iterator[Index]:
    """A writable index of :func:`two_chats`."""
    with Index(tmp_path / "index") as ix:
        ix.ingest([two_chats])
        yield ix


def _answers(directory: Path) -> list[tuple[str, list[str], list[tuple[int, float]]]]:
    out = []
    with Index(directory, read_only=True) as ix:
        for conversation, questions in QUESTIONS.items():
            for question in questions:
                a = ix.ask(question, conversation=conversation, budget=120)
                ranked = [(r.mkey, round(r.score, 9)) for r in a.ranked]
                out.append((a.context.text, [m.text for m in a.context.messages], ranked))
    return out


def _digested(directory: Path) -> dict[str, bool]:
    with Index(directory, read_only=True) as ix:
        return {c: ix.engine.view(c).digest is not None for c in QUESTIONS}


def test_an_ingest_stores_digests_and_answers_as_without_them(
    tmp_path: Path, two_chats: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(digest_module, "RENDER_BATCH", 7)  # lines rendered 7 at a time
    directory = tmp_path / "index"
    with Index(directory) as ix:
        ix.ingest([two_chats])
        store = ix.store
        for conversation in QUESTIONS:
            data = store.digest(conversation)
            assert data is not None
            stored = ConversationDigest.from_bytes(conversation, data)
            fresh = build_digest(
                store, conversation, ix.embedder.name if ix.embedder else None, get_counter()
            )
            assert stored is not None and fresh is not None
            assert stored.frame.mkeys.tolist() == fresh.frame.mkeys.tolist()
            assert stored.lines() == fresh.lines and stored.words() == fresh.words
            assert stored.edges() == fresh.edges
            assert stored.refs.ref_ids.tolist() == fresh.refs.ref_ids.tolist()
            assert stored.vectors.tobytes() == fresh.vectors.tobytes()
    assert _digested(directory) == {"friends": True, "work": True}
    with_digests = _answers(directory)
    assert any("Biscuit" in line for _, lines, _ in with_digests for line in lines)
    with duckdb.connect(str(directory / "structrag.duckdb")) as con:
        con.execute("DELETE FROM digests")
    assert _digested(directory) == {"friends": False, "work": False}
    assert _answers(directory) == with_digests


def _stored_lines(ix: Index, conversation: str) -> list[str]:
    """The rendered lines of a conversation's stored digest (which must be there)."""
    data = ix.store.digest(conversation)
    assert data is not None
    digest = ConversationDigest.from_bytes(conversation, data)
    assert digest is not None
    return digest.lines()


def test_a_live_write_drops_the_digest_of_its_conversation_only(chats_index: Index) -> None:
    ix = chats_index
    mem = ix.memory("assistant")
    mem.add("Kofi moved the launch party to the Umeda rooftop bar.", user="Kofi", room="work")
    assert ix.store.digest("work") is None
    assert ix.store.digest("friends") is not None
    # the answer reads the new message from the tables, not a stale digest
    answer = ix.ask("Where is the launch party?", conversation="work", budget=200)
    assert any("Umeda rooftop" in m.text for m in answer.context.messages)
    # a delete drops the digest of the deleted message's conversation
    friends = list(ix.store.iter_messages("friends"))
    transaction = ix.store.begin(None, [])
    transaction.delete([friends[0].mkey])
    transaction.commit()
    assert ix.store.digest("friends") is None
    # reindex writes every conversation's digest again, from the tables as they are
    ix.reindex()
    assert ix.store.digest("friends") is not None
    assert any("Umeda rooftop" in line for line in _stored_lines(ix, "work"))
    assert ix.engine.view("work").digest is not None
    answer = ix.ask("Where is the launch party?", conversation="work", budget=200)
    assert any("Umeda rooftop" in m.text for m in answer.context.messages)


def test_an_ingest_that_edits_a_conversation_writes_its_digest_again(
    chats_index: Index, two_chats: Path
) -> None:
    ix = chats_index
    mark = b"marked: not a digest"  # what an untouched conversation keeps
    ix.store.sql("UPDATE digests SET data = ? WHERE conversation = 'friends' AND part = 0", [mark])
    before = ix.store.digest("friends")
    assert before is not None and before.startswith(mark)
    edited = two_chats.read_text(encoding="utf-8").replace(
        "Kofi reviewed the budget", "Amara reviewed the budget"
    )
    two_chats.write_text(edited, encoding="utf-8")
    ix.ingest([two_chats])
    assert ix.store.digest("friends") == before  # not touched: not written again
    assert any("Amara reviewed the budget" in line for line in _stored_lines(ix, "work"))
    answer = ix.ask("Who reviewed the budget?", conversation="work", budget=120)
    assert "Amara" in answer.context.messages[0].text


def test_messages_outside_a_digest_are_rendered_from_the_store(chats_index: Index) -> None:
    """Lines of messages the digest does not hold (another conversation's) still come."""
    ix = chats_index
    view = ix.engine.view("work")
    assert view.digest is not None
    friends = next(iter(ix.store.iter_messages("friends")))
    work = next(iter(ix.store.iter_messages("work")))
    counter = get_counter()
    lines = ix.engine.derived.lines([work.mkey, friends.mkey], counter, view=view)
    assert lines[work.mkey].text.endswith(WORK[0][3])
    assert lines[friends.mkey].text.endswith(friends.message.text)
    assert lines[work.mkey].tokens == counter.count(lines[work.mkey].text + "\n")


def test_a_conversation_too_long_for_a_digest_is_read_from_the_tables(
    tmp_path: Path, two_chats: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "DIGEST_MAX_MESSAGES", len(WORK))
    with Index(tmp_path / "index") as ix:
        ix.ingest([two_chats])
        assert ix.store.digest("work") is not None
        assert ix.store.digest("friends") is None  # 46 messages
        answer = ix.ask("When did Marco adopt Biscuit?", conversation="friends", budget=150)
        assert answer.message_ids[0] == "m11"


def test_a_damaged_digest_is_not_read_and_the_tables_answer(chats_index: Index) -> None:
    ix = chats_index
    ix.store.sql("UPDATE digests SET data = ? WHERE conversation = 'friends' AND part = 1", [b"x"])
    assert ix.store.digest("friends") is not None
    assert ix.engine.view("friends").digest is None
    answer = ix.ask("When did Marco adopt Biscuit?", conversation="friends", budget=150)
    assert answer.message_ids[0] == "m11"


def test_digests_serve_only_the_plain_scope_and_their_own_token_counter(
    chats_index: Index,
) -> None:
    ix = chats_index
    assert ix.engine.view("work").digest is not None
    assert ix.engine.view(scope=Scope(conversation="work", agent="assistant")).digest is None
    view = ix.engine.view("work")
    work = next(iter(ix.store.iter_messages("work")))
    other = get_counter("o200k_base")
    (line,) = ix.engine.derived.lines([work.mkey], other, view=view).values()
    assert line.tokens == other.count(line.text + "\n")
    answer = ix.ask("Who reviewed the budget?", conversation="work", encoding="o200k_base")
    assert answer.context.tokens == other.count(answer.context.text)


def test_a_query_of_a_conversation_shares_the_view_of_ask(chats_index: Index) -> None:
    """``query`` of one conversation reads it as ``ask`` does (its view and digest, the
    same ranking), documents or not; without a conversation it searches the documents
    too. A scope of a conversation with the documents beside it is the plain one while
    the index has no documents."""
    ix = chats_index
    wider = Scope(conversation="work", tables=("messages", "knowledge"))
    plain = ix.engine.view("work")
    assert ix.engine.view(scope=wider) is plain
    found = ix.query("budget", conversation="work")
    assert found.messages[0].id == "w1"
    assert {m.conversation for m in found.messages} == {"work"}
    ix.knowledge.add("The budget for the Osaka venue is 40,000 euros.", shared=True)
    assert ix.engine.view("work").digest is not None
    assert ix.engine.view(scope=wider).digest is None
    found = ix.query("budget", conversation="work")
    assert {m.conversation for m in found.messages} == {"work"}
    everywhere = ix.query("budget", limit=None)
    assert f"doc:{_only_document(ix)}" in {m.conversation for m in everywhere.messages}


def test_a_messages_line_from_its_fields_is_the_line_of_the_whole_message(
    chats_index: Index,
) -> None:
    """A digest renders its lines from the fields a line shows (``line_fields``); they
    are the lines of the whole messages, document fragments (their label) included."""
    from structrag.query.context import render_line, render_message

    ix = chats_index
    ix.knowledge.add("# Venue\n\nThe budget for the Osaka venue is 40,000 euros.", shared=True)
    keys = [int(k) for (k,) in ix.sql("SELECT mkey FROM messages ORDER BY mkey")]
    whole = ix.store.messages_by_keys(keys)
    fields = ix.store.line_fields(keys)
    assert sorted(fields) == keys
    lines = {k: render_line(fields[k]) for k in keys}
    assert lines == {k: render_message(whole[k]) for k in keys}
    labelled = [k for k in keys if whole[k].message.conversation.startswith("doc:")]
    assert labelled
    for k in labelled:
        m = whole[k].message
        assert m.metadata["label"] and lines[k] == f"[{m.metadata['label']}] {m.text}"
    assert {f.metadata for k, f in fields.items() if k not in labelled} == {None}
    assert ix.store.line_fields([]) == {}


def _only_document(ix: Index) -> str:
    ((document,),) = ix.sql("SELECT document_id FROM documents")
    return str(document)


#: Fingerprints of the code that makes a digest, per DIGEST_VERSION: change that code and
#: this test fails until DIGEST_VERSION is bumped (old digests then go unread) and the new
#: fingerprint is recorded here, or, when what a digest holds is unchanged byte for byte,
#: the new fingerprint is added to the version's (lines from ``line_fields``: the same
#: lines, tested above; ``render_line`` typed to take a message as well, its body as it was;
#: the documents' room prefix named by ``structrag.naming.DOCUMENT_ROOM``, the same "doc:").
#: The last two: token counts through ``count_within``, the same for every line that can
#: fit a budget (a line longer than any holds MAX_BUDGET + 1, over every budget as
#: before); ``TiktokenCounter.count`` counting in parts a text tiktoken fails on (it
#: raised before: no digest held one).
MAKERS_FINGERPRINTS = {
    1: {
        "fae39d715e5915fe",
        "067a7bb3df762a71",
        "3131a5847e6012cf",
        "56dbe854fcd54e89",
        "9e6ed886de81f9a1",
        "b7bc9b4f0e9b6571",
    }
}


def test_the_code_that_makes_digests_is_the_code_of_their_version() -> None:
    from structrag.query import context
    from structrag.store.duckdb.reader import DuckDBReader
    from structrag.timeparse import format_date
    from structrag.tokens import TiktokenCounter

    makers = [
        DigestContent.to_bytes,
        build_digest,
        digest_module.vocabulary_words,
        context.render_line,
        format_date,
        TiktokenCounter.count,
        *(
            getattr(DuckDBReader, name)
            for name in (
                "message_frame",
                "line_fields",
                "ref_table",
                "aliases",
                "knowledge_vocabulary",
                "relation_edges",
                "embedding_matrix",
            )
        ),
    ]
    source = "\n".join(inspect.getsource(f) for f in makers)
    found = hashlib.sha256(source.encode()).hexdigest()[:16]
    assert found in MAKERS_FINGERPRINTS.get(digest_module.DIGEST_VERSION, set()), (
        "the code that makes a digest changed: bump DIGEST_VERSION in "
        f"structrag/query/digest.py and record {found!r} for it in MAKERS_FINGERPRINTS"
    )


def test_an_ingest_whose_digest_fails_leaves_the_index_as_it_was(
    chats_index: Index, two_chats: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ix = chats_index
    before = (ix.store.generation(), ix.store.digest("work"), ix.stats())

    def broken(*args: object) -> None:
        raise RuntimeError("digest failed")

    monkeypatch.setattr(digest_module, "build_digest", broken)
    two_chats.write_text(
        two_chats.read_text(encoding="utf-8").replace("Kofi reviewed", "Amara reviewed"),
        encoding="utf-8",
    )
    with pytest.raises(RuntimeError, match="digest failed"):
        ix.ingest([two_chats])
    assert (ix.store.generation(), ix.store.digest("work"), ix.stats()) == before
    assert "Kofi" in ix.ask("Who reviewed the budget?", conversation="work").context.text
