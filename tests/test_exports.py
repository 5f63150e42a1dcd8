"""Real exports (Slack, Discord, WhatsApp, ChatGPT, email, meeting transcripts) through the
real pipeline: spaCy, DuckDB and Whoosh in ``tmp_path``.

The fixtures under ``tests/fixtures/exports/`` are invented conversations written in each
tool's export layout. One index is built from the whole folder (which also exercises the
folder expansion); each test then checks what one format put in it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from structrag import Index
from structrag.cli import cli, main
from structrag.errors import InputError, InputErrors, UnknownFormatError
from structrag.importers import (
    LoadOptions,
    detect_format,
    expand_inputs,
    load_source,
)
from structrag.models import Conversation, Message

EXPORTS = Path(__file__).resolve().parent / "fixtures" / "exports"

# What a speaker must never be: a platform id, a dict's repr, a header line's name.
_ID_RE = re.compile(r"^(?:[UWBCDG][A-Z0-9]{5,}|\d{6,}|[0-9a-f-]{16,})$")
_HEADERS = {"from", "to", "cc", "subject", "date", "kind", "language", "message-id", "webvtt"}


def assert_real_speaker(message: Message) -> None:
    name = message.speaker
    assert name is not None, f"{message.id} has no speaker"
    assert not _ID_RE.match(name), f"speaker {name!r} is an id"
    assert not name.startswith(("{", "[", "<")) and "':" not in name, f"speaker {name!r}"
    assert name.lower() not in _HEADERS, f"speaker {name!r} is a header"
    assert len(name) <= 60 and "\n" not in name


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("exports") / "exports"
    shutil.copytree(EXPORTS, target)
    return target


@pytest.fixture(scope="module")
def ingested(exports: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    """One index of the whole exports folder, built once."""
    with Index(tmp_path_factory.mktemp("index") / "idx") as index:
        reports = index.ingest([exports])
        index.reports = reports  # type: ignore[attr-defined]
        yield index


def _messages(index: Index, conversation: str) -> list[Message]:
    found = [s.message for s in index.messages(conversation)]
    assert found, f"no messages in {conversation!r}"
    return sorted(found, key=lambda m: m.ordinal)


def _conversation(index: Index, conversation: str) -> Conversation:
    (found,) = [c for c in index.conversations() if c.id == conversation]
    return found


# -- the folder as a whole ---------------------------------------------------------------


def test_the_folder_ingests_every_known_file_and_notes_the_rest(ingested: Index) -> None:
    reports = ingested.reports  # type: ignore[attr-defined]
    formats = sorted({r.format for r in reports if not r.skipped})
    assert formats == [
        "chatgpt",
        "discord",
        "email",
        "json",
        "jsonl",
        "slack",
        "transcript",
        "webvtt",
        "whatsapp",
    ]
    sources = {Path(r.path).name for r in reports if not r.skipped}
    # The Slack export and the folder of .eml files are one source each; the ChatGPT
    # export's other files and the stray .rtf are left out, with a note.
    assert {"slack_export", "board-meeting", "conversations.json", "garden.mbox"} <= sources
    assert "users.json" not in sources and "chat.html" not in sources
    (note,) = [r for r in reports if r.skipped]
    assert note.format == "folder"
    assert "chatgpt/user.json (part of a ChatGPT export" in (note.skipped or "")
    assert "notes.rtf (no known kind (.rtf))" in (note.skipped or "")
    assert all(r.messages_added > 0 for r in reports if not r.skipped)


def test_no_speaker_is_an_id_a_repr_or_a_header(ingested: Index) -> None:
    messages = [s.message for s in ingested.messages()]
    assert len(messages) > 60
    for message in messages:
        if message.conversation == "slack:general" and message.metadata.get("user") is None:
            assert message.metadata.get("bot")
        assert_real_speaker(message)
        for recipient in message.recipients:
            assert not _ID_RE.match(recipient) and recipient.lower() not in _HEADERS


def test_every_chat_message_is_dated(ingested: Index) -> None:
    undated = {
        (s.message.conversation, s.message.id)
        for s in ingested.messages()
        if s.message.timestamp is None
        and not s.message.conversation.startswith(("garden committee", "zoom", "podcast", "board"))
        and s.message.speaker != "system"
    }
    assert not undated


# -- Slack -------------------------------------------------------------------------------


def test_slack_channels_speakers_threads_and_markup(ingested: Index) -> None:
    general = _messages(ingested, "slack:general")
    assert [m.speaker for m in general] == [
        "Ana Souza",  # display name empty: the real name
        "Bo",  # the display name
        "Cyrus Patel",
        "Cyrus Patel",
        "Deploy Bot",
        "Delphine Moreau",  # a deactivated user, still in users.json
        "Ana Souza",
        "Eve T",  # not in users.json: the message's user_profile
    ]
    start, reply, _, broadcast, bot, left, shared, _ = general
    assert start.timestamp == datetime(2023, 3, 12, 9, 0)
    assert start.id == "1678611600.000000"
    assert start.text.startswith("Morning all! The work day is on Saturday. @Bo can you")
    assert "work day sign-up (https://example.invalid/signup)" in start.text
    assert start.recipients == ("Bo",)  # who it mentions
    assert start.metadata["replies"] == 2 and start.metadata["reactions"] == {"seedling": 2}
    assert reply.metadata["reply_to"] == start.id == reply.metadata["thread"]
    assert reply.recipients == ("Ana Souza",)  # the thread's starter
    assert reply.text == "Yes, I will bring it & the spare gloves. It needs a new spark plug first."
    assert broadcast.metadata["also_sent_to_channel"] is True
    assert bot.text == "Reminder: water the seedlings in the greenhouse before noon."
    assert bot.metadata["bot"] is True and bot.recipients == ()
    assert all("Deploy Bot" not in m.recipients for m in general)
    assert left.metadata["edited"] is True and "@Ana Souza please" in left.text
    assert shared.text == "[shared file: Plot map 2023]"
    assert "#seed-swap" in general[2].text
    conversation = _conversation(ingested, "slack:general")
    assert conversation.name == "#general"
    assert conversation.metadata["skipped"] == {
        "channel_join": 1,
        "channel_leave": 1,
        "channel_topic": 1,
    }
    assert "(https://example.invalid/calendar)" in conversation.metadata["topic"]
    seeds = _messages(ingested, "slack:seed-swap")
    assert [(m.speaker, m.recipients) for m in seeds] == [
        ("Bo", ("Ana Souza",)),
        ("Ana Souza", ("Bo",)),
    ]


def test_slack_channel_folder_and_day_file_alone(exports: Path) -> None:
    channel = load_source(exports / "slack_export" / "seed-swap")  # users.json one level up
    assert channel.format == "slack" and [m.speaker for m in channel.messages] == [
        "Bo",
        "Ana Souza",
    ]
    day = exports / "slack_export" / "general" / "2023-03-13.json"
    assert detect_format(day, day.read_text())[0] == "slack"
    source = load_source(day)
    assert [c.id for c in source.conversations] == ["slack:general"]
    assert (
        source.sha256
        == hashlib.sha256(
            _digest_input(exports / "slack_export", ["users.json", "channels.json"], day)
        ).hexdigest()
    )


def _digest_input(root: Path, lists: list[str], day: Path) -> bytes:
    out = b""
    for path in [*(root / n for n in lists), day]:
        data = path.read_bytes()
        out += f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode() + data
    return out


def test_a_slack_channel_without_users_json_says_what_to_do(tmp_path: Path) -> None:
    channel = tmp_path / "random"
    shutil.copytree(EXPORTS / "slack_export" / "seed-swap", channel)
    with pytest.raises(InputError) as info:
        load_source(channel)
    assert info.value.path == str(channel / "2023-03-12.json")
    assert "at [1]: user U02BO has no name: users.json was not found" in str(info.value)
    assert "top folder" in (info.value.hint or "")


def test_slack_channels_with_only_housekeeping_are_left_out(tmp_path: Path) -> None:
    export = tmp_path / "export"
    shutil.copytree(EXPORTS / "slack_export", export)
    (export / "random").mkdir()
    (export / "random" / "2023-03-12.json").write_text(
        json.dumps([{"type": "message", "subtype": "channel_join", "ts": "1678611600.0"}])
    )
    source = load_source(export)
    assert [c.id for c in source.conversations] == ["slack:general", "slack:seed-swap"]
    assert any("left out: random" in w for w in source.warnings)


def test_a_channel_of_another_workspace_is_not_mixed_into_one_of_its_name(
    tmp_path: Path,
) -> None:
    """Two workspaces each have #general (other channel ids): the second export is
    refused, in a later ingest or in the same one, before anything of it is written; one
    channel folder with --conversation goes in as a conversation of its own."""
    first, second = tmp_path / "acme", tmp_path / "globex"
    shutil.copytree(EXPORTS / "slack_export", first)
    shutil.copytree(EXPORTS / "slack_export", second)
    listed = json.loads((second / "channels.json").read_text())
    for channel in listed:
        channel["id"] = "X" + channel["id"]
    (second / "channels.json").write_text(json.dumps(listed))
    with Index(tmp_path / "db") as index:
        index.ingest([first])
        before = index.stats()
        for paths in ([second], [first, second]):
            with pytest.raises((InputError, InputErrors)) as info:
                index.ingest(paths)
            said = str(info.value)
            assert "its channel XC01GEN is not the channel of conversation 'slack:general'" in said
            assert "C01GEN" in said and "--conversation slack:general-2" in said
            assert index.stats() == before
        (report,) = index.ingest([second / "general"], conversation="slack:general-2")
        assert report.messages_added > 0
        assert {c.id for c in index.store.conversations()} >= {"slack:general", "slack:general-2"}
        # the conversation's own name given: merged on purpose
        (again,) = index.ingest([second / "general"], conversation="slack:general", force=True)
        assert again.conversations == ["slack:general"]
    fresh = tmp_path / "fresh"
    with Index(fresh) as index, pytest.raises((InputError, InputErrors), match="XC01GEN"):
        index.ingest([first, second])  # both in one ingest: the second is refused too


def test_slack_errors_name_the_day_file_and_message(tmp_path: Path) -> None:
    export = tmp_path / "export"
    shutil.copytree(EXPORTS / "slack_export", export)
    day = export / "general" / "2023-03-12.json"
    data = json.loads(day.read_text())
    del data[3]["ts"]
    day.write_text(json.dumps(data, indent=1))
    with pytest.raises(InputError) as info:
        load_source(export)
    assert info.value.path == str(day) and "[3].ts" in str(info.value)
    day.write_text('[{"type": "message", "ts": "1.0", "text": "hi"},')
    with pytest.raises(InputError) as info:
        load_source(export)
    assert info.value.path == str(day) and info.value.line == 1 and "truncated" in str(info.value)


# -- Discord -----------------------------------------------------------------------------


def test_discord_authors_replies_attachments_and_system_messages(ingested: Index) -> None:
    conv = "discord:Astronomy Club/observing"
    messages = _messages(ingested, conv)
    assert [m.speaker for m in messages] == ["Mira", "Jonas Weber", "tess", "Starbot", "Mira"]
    plan, reply, photo, bot, answer = messages
    assert plan.id == "1084000000000000002" and plan.metadata["pinned"] is True
    assert plan.timestamp == datetime(2023, 3, 10, 20, 1, 12, 345000)
    assert reply.timestamp == datetime(2023, 3, 10, 20, 3, 40)  # +01:00 -> UTC
    assert reply.metadata["reply_to"] == plan.id and reply.recipients == ("Mira",)
    assert photo.text == "[attachment: orion-nebula.jpg]"
    assert photo.metadata["attachments"][0]["fileName"] == "orion-nebula.jpg"
    assert bot.metadata["bot"] is True and bot.recipients == ()
    assert answer.recipients == ("tess",)
    conversation = _conversation(ingested, conv)
    assert conversation.metadata["system_messages"] == {
        "ChannelPinnedMessage": 1,
        "GuildMemberJoin": 1,
    }


def test_discord_author_without_a_name_is_an_error(tmp_path: Path) -> None:
    (source,) = (EXPORTS / "discord").glob("*.json")
    data = json.loads(source.read_text())
    data["messages"][2]["author"] = {"id": "1"}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"messages\[2\]\.author"):
        load_source(path)


# -- WhatsApp ----------------------------------------------------------------------------


def test_whatsapp_android_day_first(ingested: Index) -> None:
    conv = "WhatsApp Chat with Allotment crew"
    messages = _messages(ingested, conv)
    assert [m.speaker for m in messages] == [
        "Ana Souza",
        "Bo Lindqvist",
        "Ana Souza",
        "Bo Lindqvist",
        "Cleo Park",
    ]
    assert messages[1].text == (
        "I can do Wednesday evening.\nI will bring the hoe and the wheelbarrow\nand some lemonade."
    )
    assert messages[2].timestamp == datetime(2023, 3, 13, 18, 7)
    assert messages[2].text == "Thanks Bo! I left the key under the blue pot"
    assert messages[2].metadata["edited"] is True
    assert messages[3].text == "The weeded plot, finally"
    assert messages[3].metadata["attachment"] == "IMG-20230313-WA0004.jpg"
    assert messages[4].text == "Looks great. I added compost to plot 8 yesterday."
    metadata = _conversation(ingested, conv).metadata
    assert metadata["date_order"] == "day-first, settled by '13/03/2023'"
    assert metadata["event_counts"] == {"system": 5, "media": 1, "deleted": 1}
    kinds = [(e["kind"], e["text"][:25]) for e in metadata["events"]]
    assert ("system", "Ana Souza added Bo Lindqv") in kinds
    assert ("media", "<Media omitted>") in kinds
    assert metadata["events"][-1]["time"] == "2023-03-14T07:45:00"


def test_whatsapp_ios_month_first_with_marks(ingested: Index) -> None:
    conv = "WhatsApp Chat - Porto trip"  # "_chat.txt" takes its folder's name
    messages = _messages(ingested, conv)
    assert [m.speaker for m in messages] == [
        "Marta Ruiz",
        "Leo Chen",
        "Marta Ruiz",
        "Leo Chen",
        "Ines Costa",
    ]
    assert messages[0].timestamp == datetime(2023, 3, 12, 14, 5, 40)
    assert messages[2].timestamp == datetime(2023, 3, 13, 9, 15, 30)
    assert messages[1].text.endswith("It has a balcony over the river.")
    metadata = _conversation(ingested, conv).metadata
    assert metadata["date_order"] == "month-first, settled by '3/13/23'"
    events = metadata["events"]
    assert all(e.get("speaker") != "Porto trip" for e in events)
    assert {e["kind"] for e in events} == {"system", "media", "deleted"}


def test_whatsapp_ambiguous_dates_use_the_default_and_warn() -> None:
    path = EXPORTS / "whatsapp" / "ambiguous dates.txt"
    source = load_source(path)
    assert source.messages[0].timestamp == datetime(2023, 4, 3, 9, 15)  # 3 April
    assert any(
        "--date-order mdy" in w and "index.ingest(paths, date_order='mdy')" in w
        for w in source.warnings
    )
    assert "default" in source.conversations[0].metadata["date_order"]
    month_first = load_source(path, options=LoadOptions(date_order="mdy"))
    assert month_first.messages[0].timestamp == datetime(2023, 3, 4, 9, 15)
    assert not month_first.warnings


def test_a_dry_run_prints_the_warnings_of_what_it_would_ingest(tmp_path: Path) -> None:
    """A dry run is where to check the date order: its warnings are printed, as the
    ingest's are."""
    from click.testing import CliRunner

    from structrag.cli import cli

    path = EXPORTS / "whatsapp" / "ambiguous dates.txt"
    done = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(tmp_path / "ix"), "--dry-run"])
    assert done.exit_code == 0, done.output
    assert "warning:" in done.stderr and "--date-order mdy" in done.stderr
    assert "dry run: nothing was sent or written" in done.stdout


def test_whatsapp_bad_first_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.txt"
    path.write_text("Chat export\n12/03/2023, 09:16 - Ana: hi\n")
    with pytest.raises(InputError) as info:
        load_source(path, format="whatsapp")
    assert info.value.line == 1 and "WhatsApp" in str(info.value)


# -- ChatGPT -----------------------------------------------------------------------------


def test_chatgpt_current_branch_roles_and_tools(ingested: Index) -> None:
    conv = "chatgpt:6b0c1f7e-1111-4a2b-9c3d-000000000001"
    messages = _messages(ingested, conv)
    assert [(m.id, m.speaker) for m in messages] == [
        ("u1", "user"),
        ("a1", "assistant"),  # the regenerated answer the user kept, not "a1old"
        ("u2", "user"),
        ("a2", "assistant"),
        ("t2", "tool"),
        ("a3", "assistant"),
    ]
    assert messages[0].timestamp == datetime(2023, 3, 12, 14, 0, 10)
    assert messages[0].recipients == ("assistant",)
    assert messages[3].metadata["tool_call"] == "python" and messages[3].recipients == ()
    assert messages[4].text == "70.0" and messages[4].metadata["tool"] == "python"
    assert messages[4].recipients == ()
    conversation = _conversation(ingested, conv)
    assert conversation.name == "Sourdough starter smells odd"
    assert conversation.metadata["custom_instructions"]["user_instructions"] == "Answer briefly."


def test_chatgpt_system_prompt_is_nobodys_recipient(ingested: Index) -> None:
    messages = _messages(ingested, "chatgpt:6b0c1f7e-2222-4a2b-9c3d-000000000002")
    assert [m.id for m in messages] == ["k1", "k2", "k3", "k4", "k5"]  # k2edit was edited away
    system = messages[0]
    assert system.speaker == "system" and system.recipients == ()
    assert all("system" not in m.recipients for m in messages)
    assert messages[3].metadata["attachments"] == ["image", "bamboo.jpg"]


def test_chatgpt_broken_tree_names_the_chat(tmp_path: Path) -> None:
    data = json.loads((EXPORTS / "chatgpt" / "conversations.json").read_text())
    data[1]["current_node"] = "nowhere"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"\[1\]\.current_node"):
        load_source(path)
    with pytest.raises(InputError, match="--format chatgpt"):
        load_source(path, format="json")


# -- email -------------------------------------------------------------------------------


def test_mbox_threads_quotes_and_signatures(ingested: Index) -> None:
    thread = _messages(ingested, "email:seed-1@example.org")
    assert [m.speaker for m in thread] == ["Ana Souza", "Bo Lindqvist", "Cleo Park"]
    first, second, third = thread
    assert first.recipients == ("Bo Lindqvist", "Cleo Park")  # "Park, Cleo" turned round
    assert first.timestamp == datetime(2023, 3, 14, 8, 12)
    assert "From the catalog I picked" in first.text  # mbox ">From" unescaped
    assert first.metadata["signature"] == "Ana Souza\nElm Street Community Garden"
    assert second.text == (
        "Sounds good. I would add two packets of Genovese basil.\n"
        "I can pick the order up from the shop on Saturday."
    )
    assert second.metadata["quoted"].startswith("On Tue, 14 Mar 2023 at 09:12, Ana Souza")
    assert second.metadata["signature"] == "Thanks,\nBo"
    assert second.metadata["in_reply_to"] == "seed-1@example.org"
    assert third.timestamp == datetime(2023, 3, 15, 14, 5)  # -0500 -> UTC
    assert third.text.startswith("I checked the shed: we still have half a bag of seed")
    assert "Genovese" not in third.text and "Treasurer" not in third.text  # HTML quote, sig
    assert third.metadata["attachments"] == ["budget.csv"]
    assert _conversation(ingested, "email:seed-1@example.org").name == "Seed order for spring"
    (keys,) = _messages(ingested, "email:keys-1@example.org")
    assert keys.text == "I left the keys to plot 12 at the Café Lumière on the corner."
    assert keys.metadata["quoted"].startswith("-----Original Message-----")


def test_eml_folder_is_one_threaded_source(ingested: Index) -> None:
    thread = _messages(ingested, "email:agenda-1@example.net")
    assert [m.speaker for m in thread] == ["Priya Nair", "Sam Ortiz"]
    assert thread[1].text.endswith("it came in at 4,800 pounds.")
    assert thread[1].metadata["signature"] == "Sent from my iPhone"
    assert thread[1].recipients == ("Priya Nair", "Marta Ruiz")


def test_eml_reply_in_its_own_file_joins_the_thread() -> None:
    source = load_source(EXPORTS / "email" / "board-meeting" / "02-reply.eml")
    assert [c.id for c in source.conversations] == ["email:agenda-1@example.net"]


def test_transcript_format_refuses_an_email(tmp_path: Path) -> None:
    path = tmp_path / "mail.txt"
    path.write_bytes((EXPORTS / "email" / "board-meeting" / "01-agenda.eml").read_bytes())
    assert detect_format(path, path.read_text())[0] == "email"
    with pytest.raises(InputError, match="--format email"):
        load_source(path, format="transcript")


def test_email_without_from_names_the_message_line(tmp_path: Path) -> None:
    path = tmp_path / "box.mbox"
    path.write_text(
        "From a@x Tue Mar 14 08:12:00 2023\nFrom: A <a@x>\nDate: Tue, 14 Mar 2023 09:12:00"
        " +0100\nSubject: one\n\nhello\n\nFrom b@x Tue Mar 14 08:13:00 2023\n"
        "Subject: two\nDate: Tue, 14 Mar 2023 09:13:00 +0100\nTo: a@x\n\nbody\n"
    )
    with pytest.raises(InputError) as info:
        load_source(path)
    assert info.value.line == 8 and "no From: header" in str(info.value)


def test_duplicate_copies_in_a_mailbox_are_read_once(tmp_path: Path) -> None:
    mbox = (EXPORTS / "email" / "garden.mbox").read_bytes()
    path = tmp_path / "twice.mbox"
    path.write_bytes(mbox + b"\n" + mbox)
    source = load_source(path)
    assert len(source.messages) == 4
    assert any("duplicate" in w for w in source.warnings)


def test_cli_names_bare_addresses_after_the_names_they_go_by(tmp_path: Path) -> None:
    """Jürgen writes to a bare ana@; Ana replies to a bare jm@: each recipient is the name
    its From header gives, so `to:"Ana Souza"` finds Jürgen's mail and the address is no
    entity of its own."""
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "a.eml").write_text(
        "From: =?UTF-8?B?SsO8cmdlbiBNw7xsbGVy?= <jm@example.de>\nTo: ana@example.com\n"
        "Subject: Budget for Lisbon\nDate: Tue, 14 Mar 2023 09:00:00 +0100\n"
        "Message-ID: <a1@example.de>\n\nCan you send me the budget for the workshop?\n"
    )
    (folder / "b.eml").write_text(
        "From: Ana Souza <ana@example.com>\nTo: jm@example.de\n"
        "Subject: Re: Budget for Lisbon\nDate: Tue, 14 Mar 2023 11:00:00 +0100\n"
        "Message-ID: <b1@example.com>\nIn-Reply-To: <a1@example.de>\n"
        "References: <a1@example.de>\n\nSure, I will send the budget tomorrow.\n"
    )
    db = tmp_path / "db"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    with Index(db, read_only=True) as index:
        thread = _messages(index, "email:a1@example.de")
    assert [(m.id, m.speaker, m.recipients) for m in thread] == [
        ("a1@example.de", "Jürgen Müller", ("Ana Souza",)),
        ("b1@example.com", "Ana Souza", ("Jürgen Müller",)),
    ]
    assert [m.metadata["to"] for m in thread] == [["ana@example.com"], ["jm@example.de"]]
    found = CliRunner().invoke(cli, ["query", 'to:"Ana Souza"', "--db", str(db)])
    assert found.exit_code == 0, found.output
    assert "Jürgen Müller: Can you send me the budget" in found.output
    assert "1 message" in found.output
    entities = CliRunner().invoke(cli, ["entities", "--db", str(db)])
    assert entities.exit_code == 0, entities.output
    assert "Ana Souza" in entities.output and "@" not in entities.output


# -- meeting transcripts -----------------------------------------------------------------


def test_otter_export(ingested: Index) -> None:
    messages = _messages(ingested, "garden committee otter")
    assert [m.speaker for m in messages] == [
        "Ana Souza",
        "Bo Lindqvist",
        "Unknown Speaker",
        "Ana Souza",
    ]
    assert messages[1].text == (
        "I called the repair shop. They can come next Tuesday\nand the part costs about 90 euros."
    )
    assert messages[1].metadata["offset"] == "0:15"
    assert messages[3].text == "Yes, welcome. We were talking about the heater."  # no footer


def test_zoom_transcript_and_chat(ingested: Index) -> None:
    transcript = _messages(ingested, "zoom transcript")
    assert [m.speaker for m in transcript] == [
        "Ana Souza",
        "Bo Lindqvist",
        "dr. cleo park",
        "Ana Souza",
    ]
    assert transcript[2].text.endswith("compost delivery:\nit arrives on Friday morning.")
    chat = _messages(ingested, "zoom chat")
    assert [m.speaker for m in chat] == ["Ana Souza", "Bo Lindqvist", "cleo.park"]
    assert chat[1].recipients == ("Ana Souza",) and chat[1].metadata["private"] is True
    assert chat[2].text == "I have to leave at 3, sorry\nthe bus schedule changed"


def test_bracketed_times_are_a_transcript_not_json(ingested: Index) -> None:
    path = EXPORTS / "meetings" / "podcast episode 4.txt"
    assert detect_format(path, path.read_text())[0] == "transcript"
    messages = _messages(ingested, "podcast episode 4")
    assert [m.metadata["offset"] for m in messages] == ["00:00:01", "00:00:06", "00:00:12"]


def test_webvtt_header_lines(ingested: Index) -> None:
    messages = _messages(ingested, "board call")
    assert [m.speaker for m in messages] == ["Ana Souza", "Bo Lindqvist"]
    header = _conversation(ingested, "board call").metadata["header"]
    assert header == {"Kind": "captions", "Language": "en"}


# -- generic JSON with export dates, and OpenAI-style roles ------------------------------


def test_json_with_dotted_dates_and_sender_objects(ingested: Index) -> None:
    messages = _messages(ingested, "family group")
    assert [m.speaker for m in messages] == ["Mum", "Tomás", "Lucía", "Mum"]
    assert messages[0].timestamp == datetime(2023, 12, 28, 20, 2, 2)
    assert messages[2].timestamp == datetime(2024, 1, 2, 9, 12)


def test_openai_roles_system_and_tools_are_not_recipients(ingested: Index) -> None:
    messages = _messages(ingested, "support chat")
    assert [m.speaker for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[0].recipients == () and messages[5].recipients == ()
    assert messages[4].recipients == ()  # a turn that only calls a tool
    assert messages[1].recipients == ("assistant",)
    assert messages[2].recipients == ("user",)
    assert messages[1].timestamp == datetime(2023, 3, 12, 14, 2)  # day-first default


def test_json_speaker_object_without_a_name_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"text": "hi", "author": {"id": 42}}]))
    with pytest.raises(InputError, match=r"\[0\]\.author.*no name"):
        load_source(path)


# -- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "fmt"),
    [
        ("slack_export/general/2023-03-12.json", "slack"),
        ("discord/Astronomy Club - observing [1080000000000000001].json", "discord"),
        ("whatsapp/WhatsApp Chat with Allotment crew.txt", "whatsapp"),
        ("whatsapp/WhatsApp Chat - Porto trip/_chat.txt", "whatsapp"),
        ("chatgpt/conversations.json", "chatgpt"),
        ("email/garden.mbox", "email"),
        ("email/board-meeting/01-agenda.eml", "email"),
        ("meetings/garden committee otter.txt", "transcript"),
        ("meetings/zoom chat.txt", "transcript"),
        ("meetings/podcast episode 4.txt", "transcript"),
        ("meetings/board call.vtt", "webvtt"),
        ("json/family group.json", "json"),
        ("json/support chat.jsonl", "jsonl"),
    ],
)
def test_detect_format(relative: str, fmt: str) -> None:
    path = EXPORTS / relative
    assert detect_format(path, path.read_text(encoding="utf-8"))[0] == fmt


@pytest.mark.parametrize(
    ("relative", "fmt"),
    [
        ("slack_export", "slack"),
        ("slack_export/general", "slack"),
        ("email/board-meeting", "email"),
    ],
)
def test_detect_folder_format(relative: str, fmt: str) -> None:
    assert detect_format(EXPORTS / relative, "")[0] == fmt


def test_content_detection_without_extensions(tmp_path: Path) -> None:
    for name, source in [
        ("inbox", "email/garden.mbox"),
        ("chat", "whatsapp/WhatsApp Chat with Allotment crew.txt"),
    ]:
        path = tmp_path / name
        shutil.copy(EXPORTS / source, path)
        assert load_source(path).format == ("email" if name == "inbox" else "whatsapp")


def test_a_zip_says_unzip_it(tmp_path: Path) -> None:
    path = tmp_path / "slack export.zip"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(UnknownFormatError, match="unzip"):
        load_source(path)


# -- folders -----------------------------------------------------------------------------


def test_expand_inputs(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "a" / "b" / "two.txt").write_text("ANA: hi\n")
    (tmp_path / "a" / "photo.png").write_bytes(b"\x89PNG")
    (tmp_path / "a" / ".DS_Store").write_bytes(b"\0")
    (tmp_path / "a" / "__MACOSX").mkdir()
    (tmp_path / "a" / "__MACOSX" / "._one.jsonl").write_bytes(b"\0")
    shutil.copytree(EXPORTS / "slack_export", tmp_path / "a" / "slack")
    inputs = expand_inputs([tmp_path / "a", tmp_path / "lone.json"])
    assert [p.relative_to(tmp_path).as_posix() for p in inputs.paths] == [
        "a/one.jsonl",
        "a/b/two.txt",
        "a/slack",
        "lone.json",
    ]
    ((folder, note),) = inputs.skipped
    assert (
        folder == str(tmp_path / "a")
        and note == "left out 1 file(s): photo.png (no known kind (.png))"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.png").write_bytes(b"")
    with pytest.raises(InputError, match="no file of a kind"):
        expand_inputs([empty])


def test_cli_ingests_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    shutil.copytree(EXPORTS / "whatsapp", folder)
    (folder / "photo.jpg").write_bytes(b"\xff\xd8")
    db = tmp_path / "db"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.output.count("(whatsapp):") == 3
    assert f"{folder}: left out 1 file(s): photo.jpg" in result.output
    assert "skipped" not in result.output  # the folder's files were ingested
    with Index(db, read_only=True) as index:
        assert {c.id for c in index.conversations()} == {
            "WhatsApp Chat with Allotment crew",
            "WhatsApp Chat - Porto trip",
            "ambiguous dates",
        }
    again = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db), "--quiet"])
    assert again.exit_code == 0 and again.output.count("already ingested") == 3


def test_cli_folder_with_a_bad_file_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "chats"
    shutil.copytree(EXPORTS / "meetings", folder)
    (folder / "broken.json").write_text('{"messages": [')
    db = tmp_path / "db"
    with pytest.raises(SystemExit) as info:
        main(["ingest", str(folder), "--db", str(db), "--quiet"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert f"error: {folder / 'broken.json'}, line 1, column 15" in err and "truncated" in err
    assert not db.exists()


def test_cli_folder_with_a_readme_beside_the_chats_says_how_to_leave_it_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A README or notes file beside chat exports is read as a transcript and stops the
    ingest; its error says how to leave it out, and ``--exclude`` does (by name, by
    pattern, or a whole sub-folder by its path), noting what it left out."""
    folder = tmp_path / "chats"
    shutil.copytree(EXPORTS / "whatsapp", folder)
    (folder / "README.md").write_text("# My chats\n\nExported from my phone.\n")
    (folder / "drafts").mkdir()
    (folder / "drafts" / "todo.txt").write_text("buy milk\n")
    db = tmp_path / "db"
    with pytest.raises(SystemExit) as info:
        main(["ingest", str(folder), "--db", str(db), "--quiet"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    # Both files that cannot be read are named at once, and how to leave them out.
    assert "error: 2 inputs cannot be ingested; nothing was written:" in err
    assert f"\n  {folder / 'README.md'}: no 'SPEAKER: text' turns found" in err
    assert f"\n  {folder / 'drafts' / 'todo.txt'}: no 'SPEAKER: text' turns found" in err
    assert (
        "hint: to leave out the files found in folders, pass --exclude README.md --exclude "
        'drafts/todo.txt (over HTTP: "exclude": ["README.md", "drafts/todo.txt"])' in err
    )
    assert not db.exists()

    args = ["ingest", str(folder), "--db", str(db), "--quiet", "--exclude", "*.md"]
    result = CliRunner().invoke(cli, [*args, "--exclude", "./drafts/"])  # as typed
    assert result.exit_code == 0, result.output
    assert result.output.count("(whatsapp):") == 3
    assert (
        f"{folder}: left out 2 file(s) or folder(s): README.md (--exclude *.md), "
        "drafts/ (--exclude drafts)" in result.output
    )
    with Index(db, read_only=True) as index:
        assert len(index.conversations()) == 3
    # A pattern on the path within the folder; the sub-folder's file is then read (and
    # fails, naming the pattern to add).
    result = CliRunner().invoke(cli, [*args, "--exclude", "drafts/t*.txt", "--force"])
    assert result.exit_code == 0, result.output
    assert "drafts/todo.txt (--exclude drafts/t*.txt)" in result.output
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, InputError)
    assert "pass --exclude drafts/todo.txt (over HTTP" in str(result.exception)
    # Patterns that leave nothing say so.
    result = CliRunner().invoke(cli, [*args, "--exclude", "*.txt"])
    assert isinstance(result.exception, InputError)
    assert "after --exclude, the folder holds no input (5 file(s) or folder(s) excluded)" in (
        str(result.exception)
    )
    # A name with wildcard characters is escaped in the hint, and the hint's pattern works.
    (folder / "chat [1].txt").write_text("not a chat\n")
    result = CliRunner().invoke(cli, [*args, "--exclude", "drafts"])
    assert isinstance(result.exception, InputError)
    assert "pass --exclude 'chat [[]1].txt'" in str(result.exception)
    result = CliRunner().invoke(cli, [*args, "--exclude", "drafts", "--exclude", "chat [[]1].txt"])
    assert result.exit_code == 0, result.output
    assert "chat [1].txt (--exclude chat [[]1].txt)" in result.output


def test_a_folder_of_many_bad_files_names_the_first_ten_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Every input is checked before anything is written, and the check names each file
    that fails, up to ``MAX_FAILED_INPUTS``; the good file in the folder is not written."""
    from structrag.ingest import MAX_FAILED_INPUTS

    folder = tmp_path / "chats"
    shutil.copytree(EXPORTS / "whatsapp", folder)
    for n in range(MAX_FAILED_INPUTS + 2):
        (folder / f"notes-{n:02d}.md").write_text(f"note {n}\n")
    with Index(tmp_path / "db") as index:
        with pytest.raises(InputErrors) as info:
            index.ingest([folder])
        assert index.stats()["messages"] == 0
    err = info.value
    assert [Path(e.path).name for e in err.errors] == [
        f"notes-{n:02d}.md" for n in range(MAX_FAILED_INPUTS)
    ]
    assert str(err).startswith(f"more than {MAX_FAILED_INPUTS} inputs cannot be ingested")
    assert "(the check stopped there)" in str(err)
    assert err.hint and "--exclude notes-00.md --exclude notes-01.md" in err.hint
    assert isinstance(err, InputError) and err.path == str(folder / "notes-00.md")


def test_exclude_in_a_folder_of_mails_and_from_the_python_api(tmp_path: Path) -> None:
    """A folder's .eml files are read together: excluding one of them is an error that
    says so (excluding the folder works); the Python API takes one pattern as a string."""
    folder = tmp_path / "inbox"
    shutil.copytree(EXPORTS / "email" / "board-meeting", folder / "mail")
    (folder / "README.md").write_text("# Inbox\n")
    with pytest.raises(InputError, match=r"the \.eml files of a folder are read together"):
        expand_inputs([folder], ["01-agenda.eml", "README.md"])
    with pytest.raises(InputError, match="after --exclude"):
        expand_inputs([folder], ["mail", "README.md"])
    with Index(tmp_path / "db") as index:
        reports = index.ingest([folder], exclude="README.md")
        assert [r.format for r in reports] == ["email", "folder"]
        assert reports[-1].skipped is not None
        assert "README.md (--exclude README.md)" in reports[-1].skipped


# -- the hash is that of the bytes parsed -----------------------------------------------


def test_source_hash_is_of_the_bytes_parsed(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    original = b'{"speaker": "Ana", "text": "first"}\n'
    path.write_bytes(original)
    source = load_source(path)
    with path.open("ab") as handle:  # the file grows after it was read
        handle.write(b'{"speaker": "Bo", "text": "second"}\n')
    assert source.sha256 == hashlib.sha256(original).hexdigest()
    assert source.sha256 != hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_appended_during_ingest_is_read_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file loaded whole (here one email) appended to after each read (while it is
    checked, and again while it is written) is stored as the version that was parsed,
    under that version's hash; the next ingest reads what was appended. (Files read as
    streams are given up and read again instead: see the JSON Lines tests below.)"""
    import structrag.importers
    import structrag.ingest

    path = tmp_path / "garlic.eml"
    path.write_bytes(
        b"From: Ana <ana@example.org>\nTo: Bo <bo@example.org>\nSubject: Garlic\n"
        b"Date: Tue, 14 Mar 2023 09:12:00 +0100\nMessage-ID: <m1@example.org>\n\n"
        b"I planted garlic.\n"
    )
    real_scan = structrag.importers.scan_source
    versions: list[bytes] = []

    def scan_then_append(*args: Any, **kwargs: Any) -> Any:
        versions.append(path.read_bytes())
        source = real_scan(*args, **kwargs)
        with path.open("ab") as handle:
            handle.write(f"Water {len(versions) + 1}.\n".encode())
        return source

    monkeypatch.setattr(structrag.ingest, "scan_source", scan_then_append)
    with Index(tmp_path / "idx") as index:
        (report,) = index.ingest([path])
        # Checked as version 1, read again as version 2 at its turn: version 2 is stored.
        assert len(versions) == 2
        assert "changed while the ingest ran" in " ".join(report.warnings)
        rows = index.store.sql("SELECT sha256 FROM sources")
        assert rows == [(hashlib.sha256(versions[1]).hexdigest(),)]
        assert [s.message.text for s in index.messages()] == ["I planted garlic.\nWater 2."]
        monkeypatch.setattr(structrag.ingest, "scan_source", real_scan)
        (report,) = index.ingest([path])
        assert report.skipped is None
        assert [s.message.text for s in index.messages()][-1].endswith("Water 3.")


def _append_after_scans(monkeypatch: pytest.MonkeyPatch, path: Path, times: int) -> None:
    """Make the first ``times`` checks of ``path`` append a line to it once they read it
    (it changes between its check and its reading for the write)."""
    import structrag.importers
    import structrag.ingest

    real_scan = structrag.importers.scan_source
    left = [times]

    def scan_then_append(*args: Any, **kwargs: Any) -> Any:
        source = real_scan(*args, **kwargs)
        if left[0]:
            left[0] -= 1
            with path.open("ab") as handle:
                handle.write(b'{"speaker": "Bo", "text": "A line written late."}\n')
        return source

    monkeypatch.setattr(structrag.ingest, "scan_source", scan_then_append)


def _chat_lines(path: Path, n: int) -> None:
    path.write_text(
        "".join(
            json.dumps({"speaker": "Ana" if i % 2 else "Bo", "text": f"Note {i} about the boat."})
            + "\n"
            for i in range(n)
        )
    )


def test_a_jsonl_file_that_changes_while_it_is_streamed_is_written_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON Lines file is checked, then read again line by line while it is written; a
    line added in between makes the ingest give that write up and check and write the
    file as it is now, under the hash of those bytes."""
    path = tmp_path / "chat.jsonl"
    _chat_lines(path, 30)
    _append_after_scans(monkeypatch, path, times=1)
    with Index(tmp_path / "idx") as index:
        (report,) = index.ingest([path])
        assert "changed while the ingest ran" in " ".join(report.warnings)
        assert report.messages_added == 31 and len(list(index.messages())) == 31
        rows = index.store.sql("SELECT sha256, messages_added FROM sources")
        assert rows == [(hashlib.sha256(path.read_bytes()).hexdigest(), 31)]
        (again,) = index.ingest([path])
        assert again.skipped is not None


def test_a_jsonl_file_that_keeps_changing_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.jsonl"
    _chat_lines(path, 30)
    _append_after_scans(monkeypatch, path, times=10)
    with Index(tmp_path / "idx") as index:
        with pytest.raises(InputError, match="changed each time it was read"):
            index.ingest([path])
        assert list(index.messages()) == []
        assert index.store.sql("SELECT count(*) FROM sources") == [(0,)]


def test_text_that_merely_starts_with_a_bracket_is_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "episode.txt"
    path.write_text("[MUSIC]\nHOST: Welcome back.\nGUEST: Thanks for having me.\n")
    source = load_source(path)
    assert source.format == "transcript"
    assert [m.speaker for m in source.messages] == ["Host", "Guest"]
