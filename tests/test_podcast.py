"""Asking a podcast transcript (Behind the Tech, episode 53): role questions find the
message that states the role, and backchannels ("Yeah.") do not crowd content out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index

EPISODE_53 = Path(__file__).parent / "fixtures" / "typeagent" / "Episode_53_AdrianTchaikovsky.txt"


@pytest.fixture(scope="module")
def podcast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    with Index(tmp_path_factory.mktemp("podcast") / "ix") as index:
        index.ingest([EPISODE_53], format="transcript", workers=1)
        yield index


@pytest.mark.parametrize(
    ("question", "says"),
    [
        ("What is Kevin Scott's job?", "Chief Technology Officer"),
        ("What does Christina Warren do for a living?", "Senior Developer Advocate"),
        ("What is Adrian's profession?", "sci-fi author"),
    ],
)
def test_role_questions_find_the_stated_role(podcast: Index, question: str, says: str) -> None:
    answer = podcast.ask(question, budget=150)
    assert "facet.job=*" in answer.query
    first = answer.context.messages[0]
    assert says in first.text, (answer.query, [m.id for m in answer.context.messages])


def _content_free(text: str) -> bool:
    words = text.split(": ", 1)[-1].strip(" .!?").lower().replace(",", "").split()
    return bool(words) and set(words) <= {"yeah", "yep", "right", "yes", "okay", "mm-hmm"}


@pytest.mark.parametrize(
    "question",
    [
        "What did Kevin say about AI models?",
        "What does Adrian think about spiders?",
        "What did Christina say about science fiction?",
    ],
)
def test_backchannels_do_not_crowd_out_content(podcast: Index, question: str) -> None:
    answer = podcast.ask(question, budget=400)
    texts = [m.text for m in answer.context.messages]
    assert texts and not _content_free(texts[0])
    flags = [_content_free(t) for t in texts]
    if any(flags):  # backchannels may fill leftover budget, after every content message
        first = flags.index(True)
        assert all(flags[first:]), texts
