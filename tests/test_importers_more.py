"""More chat exports: WhatsApp media with a caption and Korean phones' layouts, an mbox
with an unescaped "From " line in a body, and imessage-exporter's text export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from structrag import Index
from structrag.errors import InputError
from structrag.importers import load_source, scan_source


def _both(path: Path) -> list[tuple[str | None, datetime | None, str, dict[str, object]]]:
    """The messages of ``path`` read whole and as a stream (which must agree)."""
    whole = load_source(path)
    streamed = scan_source(path)
    assert whole.format == streamed.format
    assert [c.metadata for c in whole.conversations] == [c.metadata for c in streamed.conversations]
    one = [(m.speaker, m.timestamp, m.text, dict(m.metadata)) for m in whole.messages]
    two = [(m.speaker, m.timestamp, m.text, dict(m.metadata)) for m in streamed.iter_messages()]
    assert one == two
    return one


@pytest.mark.parametrize(
    "stamps",
    [
        ("12/03/2024, 14:04", "12/03/2024, 14:05", "12/03/2024, 14:06", "13/03/2024, 14:07"),
        ("3/12/24, 2:04 PM", "3/12/24, 2:05 PM", "3/12/24, 2:06 PM", "3/13/24, 2:07 PM"),
    ],
    ids=["android-24h", "android-12h"],
)
def test_whatsapp_android_media_omitted_with_a_caption_is_the_caption(
    tmp_path: Path, stamps: tuple[str, ...]
) -> None:
    chat = tmp_path / "WhatsApp Chat with Anna.txt"
    chat.write_text(
        f"{stamps[0]} - Bo: hi\n"
        f"{stamps[1]} - Anna: IMG-20240312-WA0003.jpg (file attached)\nLook at this view!\n"
        f"{stamps[2]} - Anna: <Media omitted>\nLook at this one\ntoo\n"
        f"{stamps[3]} - Bo: <Media omitted>\n",
        encoding="utf-8",
    )
    messages = _both(chat)
    assert [(m[0], m[2]) for m in messages] == [
        ("Bo", "hi"),
        ("Anna", "Look at this view!"),
        ("Anna", "Look at this one\ntoo"),
    ]
    assert messages[1][3]["attachment"] == "IMG-20240312-WA0003.jpg"
    assert messages[2][3]["media"] == "<Media omitted>"
    assert messages[2][1] == datetime(2024, 3, 12, 14, 6)
    events = load_source(chat).conversations[0].metadata["events"]
    assert [(e["kind"], e["speaker"], e["text"]) for e in events] == [
        ("media", "Bo", "<Media omitted>")
    ]


def test_whatsapp_ios_image_omitted_with_a_caption_is_the_caption(tmp_path: Path) -> None:
    lrm = "\u200e"
    chat = tmp_path / "_chat.txt"
    chat.write_text(
        "[12/03/2024, 14:04:00] Bo: hi\n"
        f"[12/03/2024, 14:05:00] Anna: {lrm}image omitted\nthe view from the hut\n",
        encoding="utf-8",
    )
    messages = _both(chat)
    assert messages[1][2] == "the view from the hut"
    assert messages[1][3]["media"] == "image omitted"


def test_whatsapp_ios_media_in_another_language_keeps_its_caption(tmp_path: Path) -> None:
    """A placeholder iOS wrote in German, with a caption below: the caption is the
    sender's message (it was dropped, the sender with it); a marked line alone is still
    WhatsApp's own."""
    lrm = "\u200e"
    chat = tmp_path / "_chat.txt"
    chat.write_text(
        f"{lrm}[12.03.23, 14:00:00] Strandtrip: {lrm}Grete hat Hans hinzugefügt\n"
        "[12.03.23, 14:01:05] Grete: Hallo\n"
        f"{lrm}[12.03.23, 14:02:05] Hans: {lrm}Bild weggelassen\n"
        "Schau mal, der Strand in Lisbon\n"
        "[13.03.23, 14:03:05] Grete: Ciao\n",
        encoding="utf-8",
    )
    messages = _both(chat)
    assert [(m[0], m[2]) for m in messages] == [
        ("Grete", "Hallo"),
        ("Hans", "Schau mal, der Strand in Lisbon"),
        ("Grete", "Ciao"),
    ]
    assert messages[1][3]["media"] == "Bild weggelassen"
    events = load_source(chat).conversations[0].metadata["events"]
    assert [(e["kind"], e["text"]) for e in events] == [("system", "Grete hat Hans hinzugefügt")]


@pytest.mark.parametrize(
    ("media", "deleted", "mine"),
    [
        ("<Medien ausgeschlossen>", "Diese Nachricht wurde gelöscht.",
         "Du hast diese Nachricht gelöscht."),
        ("<Médias omis>", "Ce message a été supprimé", "Vous avez supprimé ce message"),
        ("<Multimedia omitido>", "Se eliminó este mensaje.", "Eliminaste este mensaje."),
    ],
    ids=["de", "fr", "es"],
)  # fmt: skip
def test_whatsapp_android_placeholders_in_other_languages_are_events(
    tmp_path: Path, media: str, deleted: str, mine: str
) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(
        f"12/03/2023, 14:02 - Paul: {media}\n"
        f"13/03/2023, 14:03 - Paul: {media}\nla plage\n"
        f"13/03/2023, 14:04 - Paul: {deleted}\n"
        f"13/03/2023, 14:05 - Marie: {mine}\n"
        "13/03/2023, 14:06 - Marie: Salut\n",
        encoding="utf-8",
    )
    messages = _both(chat)
    assert [(m[0], m[2]) for m in messages] == [("Paul", "la plage"), ("Marie", "Salut")]
    assert messages[0][3]["media"] == media
    events = load_source(chat).conversations[0].metadata["events"]
    assert [(e["kind"], e["speaker"]) for e in events] == [
        ("media", "Paul"),
        ("deleted", "Paul"),
        ("deleted", "Marie"),
    ]


def test_whatsapp_korean_android_and_ios_layouts(tmp_path: Path) -> None:
    android = tmp_path / "android.txt"
    android.write_text(
        "2024. 3. 12. 오후 2:05 - Anna: 안녕하세요\n"
        "2024. 3. 12. 오후 12:06 - 민수: 네 안녕하세요!\n잘 지내요?\n"
        "2024. 3. 13. 오전 12:30 - Anna: <Media omitted>\n"
        "2024. 3. 13. 오전 9:01 - Anna: 좋은 아침\n",
        encoding="utf-8",
    )
    assert load_source(android).format == "whatsapp"
    assert [(m[0], m[1], m[2]) for m in _both(android)] == [
        ("Anna", datetime(2024, 3, 12, 14, 5), "안녕하세요"),
        ("민수", datetime(2024, 3, 12, 12, 6), "네 안녕하세요!\n잘 지내요?"),
        ("Anna", datetime(2024, 3, 13, 9, 1), "좋은 아침"),
    ]
    events = load_source(android).conversations[0].metadata["events"]
    assert events[0]["time"] == "2024-03-13T00:30:00"  # 오전 12:30 is half past midnight
    ios = tmp_path / "_chat.txt"
    ios.write_text(
        "\u200e[2024. 3. 12. 오후 2:05:33] Anna: 안녕\n"
        "[2024. 3. 12. 오전 11:59:00] 민수: 점심 먹었어?\n"
        "[24. 3. 13. 14:07:10] Anna: 24-hour phone\n",
        encoding="utf-8",
    )
    assert [(m[0], m[1], m[2]) for m in _both(ios)] == [
        ("Anna", datetime(2024, 3, 12, 14, 5, 33), "안녕"),
        ("민수", datetime(2024, 3, 12, 11, 59), "점심 먹었어?"),
        ("Anna", datetime(2024, 3, 13, 14, 7, 10), "24-hour phone"),
    ]


def test_structrag_ingest_reads_a_korean_whatsapp_export(tmp_path: Path) -> None:
    folder = tmp_path / "WhatsApp Chat - 민수"
    folder.mkdir()
    chat = folder / "_chat.txt"
    chat.write_text(
        "[2024. 3. 12. 오후 2:05:33] Anna: 내일 부산 가요\n"
        "[2024. 3. 12. 오후 2:06:01] 민수: 좋아요! 기차 몇 시예요?\n",
        encoding="utf-8",
    )
    db = tmp_path / "idx"
    proc = subprocess.run(
        [sys.executable, "-m", "structrag", "ingest", str(chat), "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)  # the report
    with Index(db) as index:
        stored = [s.message for s in index.messages()]
        (conversation,) = index.conversations()
    assert conversation.id == "WhatsApp Chat - 민수"
    assert conversation.metadata["format"] == "whatsapp"
    assert [(m.speaker, m.timestamp, m.text) for m in stored] == [
        ("Anna", datetime(2024, 3, 12, 14, 5, 33), "내일 부산 가요"),
        ("민수", datetime(2024, 3, 12, 14, 6, 1), "좋아요! 기차 몇 시예요?"),
    ]


_MBOX = """\
From ana@example.org Tue Mar 12 14:05:00 2024
From: Ana Souza <ana@example.org>
To: Bo <bo@example.org>
Subject: Garden plans
Date: Tue, 12 Mar 2024 14:05:00 +0100
Message-ID: <a1@example.org>

Hi Bo,

From what I heard, the council will water the beds on Fridays.
From the minutes:
Attendees: Ana, Bo
Ana

From bo@example.org Tue Mar 12 15:00:00 2024
From: Bo <bo@example.org>
To: Ana Souza <ana@example.org>
Subject: Re: Garden plans
Date: Tue, 12 Mar 2024 15:00:00 +0100
Message-ID: <b1@example.org>
In-Reply-To: <a1@example.org>

Great news.

From Carla
"""


@pytest.mark.parametrize("name", ["garden.mbox", "garden"])
def test_mbox_body_lines_starting_with_from_do_not_split_messages(
    tmp_path: Path, name: str
) -> None:
    box = tmp_path / name
    box.write_text(_MBOX, encoding="utf-8")
    messages = _both(box)
    assert [(m[0], m[2]) for m in messages] == [
        (
            "Ana Souza",
            "Hi Bo,\n\nFrom what I heard, the council will water the beds on Fridays.\n"
            "From the minutes:\nAttendees: Ana, Bo\nAna",
        ),
        ("Bo", "Great news.\n\nFrom Carla"),
    ]
    assert messages[1][3]["in_reply_to"] == "a1@example.org"
    # A "From <sender> <date>" line separates messages even when the next one is not a
    # mail: that one is an error, as before.
    box.write_text(
        "From a@x Tue Mar 14 08:12:00 2023\nFrom: A <a@x>\nSubject: one\n"
        "Date: Tue, 14 Mar 2023 09:12:00 +0100\n\nhello\n\n"
        "From - Tue Mar 14 08:13:00 2023\nSubject: two\nDate: Tue, 14 Mar 2023 09:13:00 +0100\n"
        "\nbody\n",
        encoding="utf-8",
    )
    for read in (load_source, scan_source):
        with pytest.raises(InputError, match="no From: header"):
            read(box)


_IMESSAGE = """\
Mar 12, 2024  2:04:00 PM Anna named the conversation Porto trip

Mar 12, 2024  2:05:33 PM (Read by you after 1 minute)
Anna
Hello there

a second paragraph
Tapbacks:
Loved by Me

Mar 12, 2024  2:06:10 PM
Me
Hi Anna!
    Mar 12, 2024  2:07:00 PM
    +15558675309
    A reply
    This message responded to an earlier message.

Mar 12, 2024  2:07:00 PM
+15558675309
A reply
This message responded to an earlier message.

Mar 02, 2024 11:15:09 PM (Read by them after 2 hours, 3 minutes)
Me
Good night

"""


def test_imessage_exporter_text_export_is_detected_and_read(tmp_path: Path) -> None:
    chat = tmp_path / "Porto trip.txt"
    chat.write_text(_IMESSAGE, encoding="utf-8")
    assert load_source(chat).format == "imessage"
    assert scan_source(chat).format == "imessage"
    messages = _both(chat)
    assert [(m[0], m[1], m[2]) for m in messages] == [
        ("Anna", datetime(2024, 3, 12, 14, 5, 33), "Hello there\n\na second paragraph"),
        ("Me", datetime(2024, 3, 12, 14, 6, 10), "Hi Anna!"),
        ("+15558675309", datetime(2024, 3, 12, 14, 7), "A reply"),
        ("Me", datetime(2024, 3, 2, 23, 15, 9), "Good night"),
    ]
    assert messages[0][3]["read"] == "Read by you after 1 minute"
    assert messages[0][3]["reactions"] == ["Loved by Me"]
    assert messages[1][3]["from_me"] is True
    assert messages[2][3]["reply"] is True
    conversation = load_source(chat).conversations[0]
    assert conversation.id == "Porto trip"
    assert [e["text"] for e in conversation.metadata["events"]] == [
        "Anna named the conversation Porto trip"
    ]
    with Index(tmp_path / "idx") as index:
        index.ingest([chat])
        assert [s.message.speaker for s in index.messages()] == [
            "Anna",
            "Me",
            "+15558675309",
            "Me",
        ]
    # A transcript under a date line stays a transcript.
    notes = tmp_path / "standup.txt"
    notes.write_text("Mar 12, 2024  9:00:00 AM\nAna: morning all\nBo: morning\n", encoding="utf-8")
    source = load_source(notes)
    assert source.format == "transcript"
    assert [m.speaker for m in source.messages] == ["Ana", "Bo"]


def test_a_folder_with_a_file_name_that_is_not_utf8_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    (folder / "ok.jsonl").write_text('{"speaker": "Ana", "text": "hello there"}\n')
    bad = os.fsdecode(bytes(folder) + b"/caf\xe9.jsonl")
    Path(bad).write_text('{"speaker": "Bo", "text": "hi"}\n')
    done = subprocess.run(
        [sys.executable, "-m", "structrag", "ingest", str(folder), "--db", str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        errors="replace",
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "caf\\xe9.jsonl" in done.stderr and "not valid UTF-8" in done.stderr


def test_an_edited_media_placeholder_without_caption_stays_an_event(tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(
        "12/03/2023, 14:02 - Ana: <Media omitted>\n<This message was edited>\n"
        "12/03/2023, 14:03 - Bo: ok\n",
        encoding="utf-8",
    )
    source = load_source(chat)
    assert [(m.speaker, m.text) for m in source.messages] == [("Bo", "ok")]
    events = source.conversations[0].metadata["events"]
    assert [e["kind"] for e in events] == ["media"]


@pytest.mark.parametrize(
    "text",
    [
        "Mar 12, 2024  2:05:33 PM\nTeam sync notes\nAlice: Hi all, the launch is Friday.\n"
        "Bob: Great, I will prepare slides.\n\nAlice: Also lunch?\n",
        "Mar 12, 2024  2:05:33 PM\nTeam sync notes\nAlice: Hi all, the launch is Friday.\n"
        "Bob: Great, I will prepare slides.\n",
    ],
)
def test_dated_notes_of_turns_stay_a_transcript(tmp_path: Path, text: str) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(text, encoding="utf-8")
    source = load_source(notes)
    assert source.format == "transcript"
    assert [m.speaker for m in source.messages][:2] == ["Alice", "Bob"]
