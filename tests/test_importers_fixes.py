"""Importer fixes: Messenger and Telegram exports, transcript labels, SubRip and captions
given another format, WhatsApp placeholders and marked messages, WebVTT speakers, Slack
rich text and members."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from structrag import Index
from structrag.importers import load_source, scan_source
from structrag.models import Conversation, Message


def _ingested(path: Path, tmp_path: Path, **options: Any) -> tuple[list[Message], Conversation]:
    """Ingest ``path`` into a new index; its messages and conversation as stored."""
    with Index(tmp_path / "idx") as index:
        index.ingest([path], **options)
        messages = [stored.message for stored in index.messages()]
        (conversation,) = index.conversations()
    return messages, conversation


def _meta(text: str) -> str:
    """``text`` as Meta's export writes it: each UTF-8 byte as a character."""
    return text.encode("utf-8").decode("latin-1")


def test_messenger_export_speakers_times_repaired_text_oldest_first_and_media(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "inbox" / "zoemuller_123"
    folder.mkdir(parents=True)
    path = folder / "message_1.json"
    export = {
        "participants": [{"name": _meta("Zoë Müller")}, {"name": "Bob"}],
        "messages": [  # newest first, as Meta writes them
            {"sender_name": "Bob", "timestamp_ms": 1678630000000, "content": _meta("café 😀")},
            {"sender_name": _meta("Zoë Müller"), "timestamp_ms": 1678629000000, "content": "hi"},
            {
                "sender_name": _meta("Zoë Müller"),
                "timestamp_ms": 1678628000000,
                "photos": [{"uri": "messages/inbox/zoemuller_123/photos/1.jpg"}],
            },
        ],
        "title": _meta("Zoë Müller"),
        "thread_path": "inbox/zoemuller_123",
    }
    path.write_text(json.dumps(export), encoding="utf-8")
    messages, conversation = _ingested(path, tmp_path)
    assert [(m.speaker, m.text, m.timestamp) for m in messages] == [
        ("Zoë Müller", "hi", datetime(2023, 3, 12, 13, 50)),
        ("Bob", "café 😀", datetime(2023, 3, 12, 14, 6, 40)),
    ]
    assert messages[0].recipients == ("Bob",)
    assert conversation.id == "messenger:zoemuller_123"
    assert conversation.name == "Zoë Müller"
    (event,) = conversation.metadata["events"]
    assert event["kind"] == "media" and event["speaker"] == "Zoë Müller"
    assert "1.jpg" in event["text"]


def test_telegram_chat_and_account_exports(tmp_path: Path) -> None:
    chat = {
        "name": "Family",
        "type": "private_group",
        "id": 42,
        "messages": [
            {
                "id": 1,
                "type": "service",
                "date": "2023-03-12T14:00:00",
                "date_unixtime": "1678626000",
                "actor": "Ana",
                "action": "pin_message",
                "message_id": 2,
                "text": "",
            },
            {
                "id": 2,
                "type": "message",
                "date": "2023-03-12T14:02:05",
                "date_unixtime": "1678626125",
                "from": "Ana",
                "text": "Olá",
            },
            {
                "id": 3,
                "type": "message",
                "date": "2023-03-12T14:03:00",
                "date_unixtime": "1678626180",
                "from": "Bob",
                "reply_to_message_id": 2,
                "text": ["see ", {"type": "link", "text": "https://x.org"}, " and ", "this"],
            },
        ],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(chat), encoding="utf-8")
    messages, conversation = _ingested(path, tmp_path)
    assert [(m.id, m.speaker, m.text) for m in messages] == [
        ("2", "Ana", "Olá"),
        ("3", "Bob", "see https://x.org and this"),
    ]
    assert messages[0].timestamp == datetime(2023, 3, 12, 13, 2, 5)  # date_unixtime, UTC
    assert messages[1].metadata["reply_to"] == "2" and messages[1].recipients == ("Ana",)
    assert (conversation.id, conversation.name) == ("telegram:42", "Family")
    (event,) = conversation.metadata["events"]
    assert event["kind"] == "system" and event["speaker"] == "Ana"
    account = tmp_path / "account" / "result.json"
    account.parent.mkdir()
    second = {**chat, "id": 43, "name": "Bob", "type": "personal_chat"}
    pins = [m for m in cast(list[dict[str, Any]], chat["messages"]) if m["type"] == "service"]
    quiet = {**chat, "id": 44, "name": "Pins", "messages": pins}
    listed = {"chats": {"list": [chat, second, quiet]}}
    account.write_text(json.dumps(listed), encoding="utf-8")
    source = load_source(account)
    assert source.format == "telegram"
    assert [c.id for c in source.conversations] == ["telegram:42", "telegram:43"]
    assert any("1 chat(s) left out" in w and "'Pins'" in w for w in source.warnings)


def test_transcript_labels_with_particles_notes_handles_and_caseless_scripts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "call.txt"
    path.write_text(
        "Vincent van Gogh: I paint.\n"
        "María de la Cruz: hola\n"
        "ANA SOUZA (CEO): Hi\n"
        "MARIA [via phone]: hello\n"
        "Jose Maria da Silva Santos Junior: long name\n"
        "bob_92: yo\n"
        "@carla: hey\n"
        "李雷: 你好\n"
        "أحمد: مرحبا\n"
        "דוד: שלום\n"
        "dani: first\n"
        "Note: remember this\n"
        "see https://example.com: no speaker at 10:30: none\n"
        "dani: second\n",
        encoding="utf-8",
    )
    messages, conversation = _ingested(path, tmp_path)
    assert [m.speaker for m in messages] == [
        "Vincent van Gogh",
        "María de la Cruz",
        "Ana Souza",
        "Maria",
        "Jose Maria da Silva Santos Junior",
        "bob_92",
        "@carla",
        "李雷",
        "أحمد",
        "דוד",
        "dani",
        "dani",
    ]
    assert messages[2].metadata["speaker_note"] == "CEO"
    assert "Note: remember this" in messages[10].text
    assert "https://example.com" in messages[10].text
    assert "header" not in conversation.metadata


def test_captions_given_the_transcript_format_and_subrip(tmp_path: Path) -> None:
    vtt = tmp_path / "zoom_meeting.vtt"
    vtt.write_text(
        "WEBVTT\n\n1\n00:00:01.120 --> 00:00:03.450\nAna Souza: Hello everyone.\n\n"
        "2\n00:00:03.900 --> 00:00:06.000\nBob Lima: Thanks Ana.\n",
        encoding="utf-8",
    )
    for fmt in ("zoom", "transcript"):
        for read in (load_source, scan_source):
            source = read(vtt, format=fmt)
            assert [(m.speaker, m.text) for m in source.iter_messages()] == [
                ("Ana Souza", "Hello everyone."),
                ("Bob Lima", "Thanks Ana."),
            ]
    srt = tmp_path / "movie.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:03,000\n- Ana: Where are you going?\n- Bob: Home.\n\n"
        "2\n00:00:10,000 --> 00:00:12,000\n<i>{\\an8}Later words.</i>\n",
        encoding="utf-8",
    )
    messages, _ = _ingested(srt, tmp_path)
    assert [(m.speaker, m.text, m.metadata["start"]) for m in messages] == [
        ("Ana", "Where are you going?", 1.0),
        ("Bob", "Home.", 1.0),
        (None, "Later words.", 10.0),
    ]


def test_webvtt_dash_and_chevron_speakers_and_a_pause_between_one_speakers_cues(
    tmp_path: Path,
) -> None:
    path = tmp_path / "news.vtt"
    path.write_text(
        "WEBVTT\n\n00:00:02.000 --> 00:00:04.000\n- Ana: dash speaker\n- Bob: second dash\n\n"
        "00:00:04.000 --> 00:00:06.000\n>> CARLA: news style\n\n"
        "00:45:00.000 --> 00:45:02.000\n>> CARLA: much later\n",
        encoding="utf-8",
    )
    messages = load_source(path).messages
    assert [(m.speaker, m.text) for m in messages] == [
        ("Ana", "dash speaker"),
        ("Bob", "second dash"),
        ("Carla", "news style"),
        ("Carla", "much later"),
    ]


def test_whatsapp_marked_polls_and_locations_placeholders_documents_and_members(
    tmp_path: Path,
) -> None:
    lrm = "\u200e"
    ios = tmp_path / "ios.txt"
    ios.write_text(
        "[13/03/2023, 14:01:00] Ana: hi all\n"
        f"[13/03/2023, 14:09:00] Ana: {lrm}POLL:\nWhere?\n{lrm}OPTION: Beach (1 vote)\n"
        f"{lrm}[13/03/2023, 14:10:00] Bob: {lrm}Location: https://maps.google.com/?q=38.7,-9.1\n"
        f"{lrm}[13/03/2023, 14:11:00] Bob: report.pdf • 3 pages {lrm}<attached: "
        "00000009-report.pdf>\nthe report\n"
        f"{lrm}[13/03/2023, 14:12:00] Carla: {lrm}image omitted\n",
        encoding="utf-8",
    )
    messages, conversation = _ingested(ios, tmp_path)
    assert [(m.speaker, m.text) for m in messages] == [
        ("Ana", "hi all"),
        ("Ana", "POLL:\nWhere?\nOPTION: Beach (1 vote)"),
        ("Bob", "Location: https://maps.google.com/?q=38.7,-9.1"),
        ("Bob", "the report"),
    ]
    assert messages[3].metadata["attachment"] == "00000009-report.pdf"
    assert messages[0].recipients == ("Bob", "Carla")  # Carla only sent a photo
    assert [e["speaker"] for e in conversation.metadata["events"]] == ["Carla"]
    android = tmp_path / "android.txt"
    android.write_text(
        "12/03/2023, 14:02 - Ana: hi\n"
        "12/03/2023, 14:03 - Bob: null\n"
        "12/03/2023, 14:04 - Bob: <View once voice message omitted>\n"
        "12/03/2023, 14:05 - Bob: Waiting for this message\n"
        "13/03/2023, 14:06 - Bob: This message was deleted by admin Ana\n"
        "13/03/2023, 14:07 - Bob: ok\n",
        encoding="utf-8",
    )
    source = load_source(android)
    assert [m.text for m in source.messages] == ["hi", "ok"]
    kinds = [e["kind"] for e in source.conversations[0].metadata["events"]]
    assert kinds == ["media", "media", "deleted", "deleted"]


def _slack_export(root: Path) -> None:
    root.mkdir()
    users = [
        {"id": "U1", "name": "ana", "profile": {"display_name": "Ana"}},
        {"id": "U2", "name": "bob", "profile": {"display_name": "Bob"}},
        {"id": "U3", "name": "carla", "profile": {"display_name": "Carla"}},
    ]
    (root / "users.json").write_text(json.dumps(users))
    channels = [{"id": "C1", "name": "general", "members": ["U1", "U2", "U3"]}]
    (root / "channels.json").write_text(json.dumps(channels))
    blocks = [
        {
            "type": "rich_text",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "text", "text": "ask "},
                        {"type": "user", "user_id": "U2"},
                        {"type": "text", "text": " about "},
                        {"type": "link", "url": "https://x.org", "text": "the doc"},
                    ],
                }
            ],
        }
    ]
    day = [
        {"type": "message", "ts": "1678626125.000100", "user": "U1", "text": "hello"},
        {"type": "message", "ts": "1678626130.000100", "user": "U1", "text": "", "blocks": blocks},
    ]
    (root / "general").mkdir()
    (root / "general" / "2023-03-12.json").write_text(json.dumps(day))


def test_slack_text_only_in_blocks_and_members_as_recipients(tmp_path: Path) -> None:
    export = tmp_path / "export"
    _slack_export(export)
    messages, _ = _ingested(export, tmp_path)
    assert [m.text for m in messages] == ["hello", "ask @Bob about the doc (https://x.org)"]
    assert messages[0].recipients == ("Bob", "Carla")  # members who never wrote
    assert messages[1].recipients == ("Bob",)  # the one mentioned


def test_a_slack_user_missing_from_users_json_is_named_by_their_profile_throughout(
    tmp_path: Path,
) -> None:
    """A user not in users.json is named by a user_profile on any of their messages, for
    their messages without one too (one message had no speaker, the next "ext")."""
    export = tmp_path / "export"
    _slack_export(export)
    day = [
        {"type": "message", "ts": "1678626125.000100", "user": "U9", "text": "first, bare"},
        {"type": "message", "ts": "1678626130.000100", "user": "U9", "text": "then named",
         "user_profile": {"display_name": "ext"}},
    ]  # fmt: skip
    (export / "general" / "2023-03-12.json").write_text(json.dumps(day))
    source = load_source(export)
    assert [(m.speaker, m.metadata["user"]) for m in source.messages] == [
        ("ext", "U9"),
        ("ext", "U9"),
    ]
    assert not any("not in users.json" in w for w in source.warnings)


def test_whatsapp_french_layout_a_header_line_and_csv_files_say_what_they_are(
    tmp_path: Path,
) -> None:
    import pytest

    from structrag.errors import InputError

    french = tmp_path / "fr.txt"
    french.write_text("12/03/2023 à 14:02 - Ana: salut\n13/03/2023 à 14:03 - Bob: yo\n")
    source = load_source(french)
    assert source.format == "whatsapp"
    assert source.messages[0].timestamp == datetime(2023, 3, 12, 14, 2)
    headed = tmp_path / "headed.txt"
    headed.write_text(
        "WhatsApp Chat with Bob\n12/03/2023, 14:02 - Ana: hi\n13/03/2023, 14:03 - Bob: yo\n"
    )
    with pytest.raises(InputError, match="WhatsApp"):
        load_source(headed)
    table = tmp_path / "messages.csv"
    table.write_text("speaker,text\nAna,hi\n")
    with pytest.raises(InputError, match="does not read CSV") as caught:
        load_source(table)
    assert "JSON Lines" in str(caught.value.hint)


def test_a_thread_in_several_parts_is_stored_oldest_first(tmp_path: Path) -> None:
    folder = tmp_path / "inbox" / "bob_7"
    folder.mkdir(parents=True)
    minute = 60_000
    for part, start in ((1, 1678630000000), (2, 1678620000000)):  # message_1: the newest
        said = [
            {"sender_name": "Bob", "timestamp_ms": start + k * minute, "content": f"p{part}m{k}"}
            for k in (1, 0)  # newest first in each part
        ]
        export = {"participants": [{"name": "Bob"}, {"name": "Ana"}], "messages": said}
        (folder / f"message_{part}.json").write_text(json.dumps(export), encoding="utf-8")
    for given in ([tmp_path / "inbox"], [folder / "message_1.json", folder / "message_2.json"]):
        with Index(tmp_path / f"ix{len(given)}") as index:
            index.ingest(given)
            stored = [s.message for s in index.messages()]
        texts = [m.text for m in sorted(stored, key=lambda m: m.ordinal)]
        assert texts == ["p2m0", "p2m1", "p1m0", "p1m1"], given
