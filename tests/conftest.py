"""Shared fixtures: small conversation files in every supported format, and real indexes
(a real DuckDB file and a real Whoosh index) in ``tmp_path``."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# A test run started in the background by a non-interactive shell (`make test &`, a CI
# runner's script) ignores SIGINT, and so does every process it starts: the Ctrl-C tests,
# which send SIGINT as a terminal does, would see it ignored. Run as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def locomo_sample(
    sample_id: str | None = "conv-test", *, per_turn_dates: bool = False
) -> dict[str, object]:
    """A small LoCoMo-format conversation (our own text, same layout as LoCoMo)."""
    sessions = {
        1: (
            "1:56 pm on 8 May, 2023",
            [
                ("Alice", "Hi Bob! I started volunteering at the animal shelter on Monday."),
                ("Bob", "That's great, Alice! Which animals do they have?"),
                ("Alice", "Mostly dogs and a few rabbits. I walk the dogs every morning."),
                ("Bob", "I adopted a rescue cat named Pepper last year, she loves boxes."),
            ],
        ),
        2: (
            "10:15 am on 25 May, 2023",
            [
                ("Bob", "I didn't get the job at the library, sadly."),
                ("Alice", "Sorry to hear that. Will you apply to the museum in Boston?"),
                ("Bob", "Yes, I will send my application to the museum next week."),
                (
                    "Alice",
                    "Good luck! I painted a sunset over the lake for the shelter fundraiser.",
                ),
            ],
        ),
    }
    conversation: dict[str, object] = {"speaker_a": "Alice", "speaker_b": "Bob"}
    for number, (date, turns) in sessions.items():
        if not per_turn_dates:
            conversation[f"session_{number}_date_time"] = date
        rows = []
        for i, (speaker, text) in enumerate(turns, start=1):
            row: dict[str, object] = {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text}
            if per_turn_dates:
                row["date_time"] = date
            rows.append(row)
        conversation[f"session_{number}"] = rows
    conversation["session_2"][3]["blip_caption"] = "a photo of a painting of a sunset"  # type: ignore[index]
    sample: dict[str, object] = {"conversation": conversation, "qa": []}
    if sample_id is not None:
        sample["sample_id"] = sample_id
    return sample


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([locomo_sample()]), encoding="utf-8")
    return path


@pytest.fixture
def transcript_file(tmp_path: Path) -> Path:
    path = tmp_path / "episode.txt"
    path.write_text(
        "Tech Talk Podcast\nEpisode 7 - Gardens\n\n"
        "HOST NAME: Welcome back. Today our guest is Dana Reyes.\n"
        "She grows vegetables on her roof in Chicago.\n\n"
        "[MUSIC]\n\n"
        "DANA REYES: Thanks for having me. I built the garden in 2019.\n"
        "HOST NAME: What do you grow?\n"
        "DANA REYES: Tomatoes, peppers and basil. The basil never survives August.\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def vtt_file(tmp_path: Path) -> Path:
    path = tmp_path / "standup.vtt"
    path.write_text(
        "WEBVTT\n\nNOTE recorded standup\n\n"
        "1\n00:00:01.000 --> 00:00:04.000\n"
        "<v Rosa Diaz>I fixed the login bug yesterday.</v>\n\n"
        "2\n00:00:04.000 --> 00:00:06.500\n"
        "<v Rosa Diaz>Today I will review the payment code.</v>\n\n"
        "3\n00:00:07.000 --> 00:00:09.000\n"
        "<v Tom Lee>I am still blocked on the database migration.</v>\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def jsonl_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    rows = [
        {
            "id": "1",
            "speaker": "Kim",
            "timestamp": "2024-03-01T09:00:00Z",
            "text": "I booked the flights to Tokyo for April.",
        },
        {
            "id": "2",
            "role": "assistant",
            "timestamp": "2024-03-01T09:01:00Z",
            "content": [{"type": "text", "text": "Great. Do you need a hotel near Shibuya?"}],
        },
        {
            "id": "3",
            "speaker": "Kim",
            "timestamp": "2024-03-01T09:02:00Z",
            "text": "Yes, and my sister Mina is coming with me.",
            "tags": ["travel"],
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def example_chat(tmp_path: Path) -> Path:
    target = tmp_path / "friends_chat.jsonl"
    shutil.copy(EXAMPLES / "friends_chat.jsonl", target)
    return target


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "index") as ix:
        yield ix


@pytest.fixture(scope="session")
def example_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the bundled example conversation, built once per test session."""
    directory = tmp_path_factory.mktemp("example") / "index"
    with Index(directory) as ix:
        ix.ingest([EXAMPLES / "friends_chat.jsonl"])
    return directory
