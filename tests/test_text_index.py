"""The text index's own way of adding documents (``_add_document``) writes what Whoosh's
``add_document`` writes: every term's postings (document, weight, value), the term
statistics, the columns, field lengths and stored fields, read back from the segment."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh import index

from structrag.store import whoosh_index
from structrag.store.protocols import IndexedMessage

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
    folder = tempfile.mkdtemp()
    writer = index.create_in(folder, whoosh_index._schema()).writer(limitmb=64)
    if pool_limit is not None:
        writer.pool.limit = pool_limit  # sorted runs written to disk on the way
    for message in messages:
        if fast:
            whoosh_index._add_document(writer, message)
        else:
            writer.add_document(**whoosh_index._document(message))
    writer.commit(merge=False)
    with index.open_dir(folder).reader() as reader:
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
            "columns": {n: list(reader.column_reader(n)) for n in whoosh_index._COLUMNS},
            "lengths": {
                f: (reader.field_length(f), [reader.doc_field_length(d, f) for d in range(docs)])
                for f in whoosh_index._POSTED
            },
            "stored": [reader.stored_fields(d) for d in range(docs)],
        }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=_messages(), runs=st.booleans())
def test_fast_add_writes_what_whoosh_writes(messages: list[IndexedMessage], runs: bool) -> None:
    limit = 2_000 if runs else None
    assert _segment(messages, True, limit) == _segment(messages, False, limit)


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
        whoosh_index._add_document(writer, message)
        writer.commit(merge=False)
        with index.open_dir(folder).searcher() as searcher:
            matcher = searcher.reader().postings("knowledge", "cat")
            assert list(matcher.value_as("positions")) == [0, 2, 2]
