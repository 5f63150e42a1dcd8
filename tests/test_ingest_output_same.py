"""The extraction workers' short cut gives what the plain path gives.

A worker packs what the rules found straight into tuples, without building the refs that
packing would take apart again: the writer must rebuild every ref as the in-process
extraction makes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import structrag.extract.spacy_extractor as module
from structrag.extract.spacy_extractor import SpacyExtractor, pack_refs
from structrag.importers import load_source
from structrag.models import Message

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "friends_chat.jsonl"


def _messages() -> list[Message]:
    messages = list(load_source(EXAMPLE).messages)
    texts = [
        "I didn't adopt the 3 puppies from the animal shelter in Boston on Friday.",
        "Kevin Scott, Chief Technology Officer for Microsoft, gave a talk 👍🏽 in 2 rooms.",
        "[MUSIC] (Laughter.) We ran 21.1 km with Marco and Priya, 🇯🇵 the 3rd time!",
        "   ",
        "",
        "Dog training classes and adoption agencies are hard work. Dog training classes.",
    ]
    extra = [
        Message(
            conversation="other",
            id=str(i),
            ordinal=i,
            speaker="Caroline" if i % 2 else None,
            recipients=("Melanie",) if i % 3 else (),
            text=text,
        )
        for i, text in enumerate(texts)
    ]
    return messages + extra


@pytest.fixture(scope="module")
def extractor() -> SpacyExtractor:
    return SpacyExtractor(workers=1)


@pytest.mark.parametrize("metadata", [True, False])
def test_packed_extraction_is_the_packed_refs_of_the_local_one(
    extractor: SpacyExtractor, metadata: bool
) -> None:
    messages = _messages()
    extractor.metadata = metadata
    try:
        packed = list(extractor._extract_packed(messages))
        local = [pack_refs(refs) for refs in extractor._extract_local(messages)]
    finally:
        extractor.metadata = True
    assert packed == local
    assert sum(len(rows) for rows in packed) > 100
    kinds = {row[0] for rows in packed for row in rows}
    assert kinds == {"entity", "action", "topic"}


def test_parallel_extraction_gives_the_local_refs(
    extractor: SpacyExtractor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the worker processes (packed rows, rebuilt refs) and in-process."""
    messages = _messages()
    monkeypatch.setattr(module, "PARALLEL_MIN_MESSAGES", 10)
    parallel = SpacyExtractor(workers=2)
    try:
        got = list(parallel.extract(messages))
    finally:
        parallel.close()
    expected = list(extractor.extract(messages))
    assert got == expected
    assert [[repr(r) for r in refs] for refs in got] == [
        [repr(r) for r in refs] for refs in expected
    ]
