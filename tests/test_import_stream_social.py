"""Telegram exports read as a stream: the same messages, conversations, warnings and
errors as the whole-file loader, errors deep in a big file that name the file and the
place, and memory that stays a small fraction of the file (Messenger files, a thread's
part of a few MB, are still loaded whole: they are read the same way as before)."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structrag.errors import InputError
from structrag.importers import (
    LoadOptions,
    ParsedSource,
    StreamedSource,
    load_source,
    scan_source,
)

People = list[str]
Export = dict[str, Any]


def _message(k: int, who: str, text: Any = "", **extra: Any) -> dict[str, Any]:
    """A message as Telegram Desktop writes it (``k`` is its id and its time)."""
    unix = 1_678_626_000 + 60 * k
    entities = [{"type": "plain", "text": text}] if isinstance(text, str) and text else []
    return {
        "id": k,
        "type": "message",
        "date": f"2023-03-12T{10 + k // 60 % 12:02d}:{k % 60:02d}:00",
        "date_unixtime": str(unix),
        "from": who,
        "from_id": f"user{sum(map(ord, who))}",
        "text": text,
        "text_entities": entities,
        **extra,
    }


def _service(k: int, actor: str, action: str, **extra: Any) -> dict[str, Any]:
    unix = 1_678_626_000 + 60 * k
    return {
        "id": k,
        "type": "service",
        "date": "2023-03-12T10:00:00",
        "date_unixtime": str(unix),
        "actor": actor,
        "actor_id": f"user{sum(map(ord, actor))}",
        "action": action,
        "text": "",
        "text_entities": [],
        **extra,
    }


def _rich_messages(base: int) -> list[dict[str, Any]]:
    """Every kind of message the reader treats apart, ids from ``base``."""
    link = {"type": "link", "text": "https://x.org"}
    labelled = {"type": "text_link", "text": "the docs", "href": "https://docs.x.org"}
    same = {"type": "text_link", "text": "https://y.org", "href": "https://y.org"}
    bare = {"type": "text_link", "text": "", "href": "https://z.org"}
    edited = {"edited": "2023-03-12T12:00:00", "edited_unixtime": "1678629600"}
    return [
        _service(base, "Ana", "create_group", title="Family", members=["Ana", "Bob", "Carla"]),
        _message(base + 1, "Ana", "Olá, família"),
        _message(base + 2, "Bob", ["see ", link, " and ", labelled, "; ", same, bare]),
        _message(base + 3, "Carla", "replying to Ana", reply_to_message_id=base + 1),
        _message(base + 4, "Ana", "replying to myself", reply_to_message_id=base + 1),
        _message(base + 5, "Bob", "replying to a later one", reply_to_message_id=base + 9),
        _message(base + 6, "Carla", "replying to a gone one", reply_to_message_id=1),
        _message(base + 7, "Ana", "fixed typo", **edited),
        _message(base + 8, "Bob", "the view", photo="photos/p1.jpg", width=800, height=600),
        _message(base + 9, "Carla", "the menu", file="files/menu.pdf", mime_type="application/pdf"),
        _message(base + 10, "Ana", photo="photos/p2.jpg", width=800, height=600),
        _message(
            base + 11, "Bob", file="stickers/s.webp", media_type="sticker", sticker_emoji="😀"
        ),
        _message(base + 12, "Carla", file="voice/v.ogg", media_type="voice_message"),
        _message(base + 13, "Ana", location_information={"latitude": 1.0, "longitude": 2.0}),
        _message(base + 14, "Bob", contact_information={"first_name": "Dee"}),
        _message(
            base + 15,
            "Carla",
            poll={"question": "Dinner?", "answers": [{"text": "Pizza"}, {"text": "Soup"}]},
        ),
        _service(base + 16, "Bob", "pin_message", message_id=base + 2),
        _message(base + 17, "Ana", "forwarded", forwarded_from="News Channel"),
        {**_message(base + 18, "", "sent by id only"), "from": None},
        {**_message(base + 19, "Bob", "no unix time"), "date_unixtime": None},
        {**_message(base + 20, "Bob", "odd time"), "date_unixtime": "", "date": "sometime"},
        _message(base + 21, "Carla", "   "),
        _message(base + 22, "Carla", "said twice"),
        _message(base + 22, "Carla", "said twice"),
        {**_message(base + 23, "Ana", "a string id"), "id": str(base + 23)},
        {k: v for k, v in _message(base + 24, "Bob", "no id at all").items() if k != "id"},
        _message(base + 25, "Ana", "long " * 20_001),
        _message(base + 26, "Bob", "answers Carla", reply_to_message_id=str(base + 3)),
        _service(base + 27, "Carla", "join_group_by_link", inviter="Ana"),
    ]


def _chat(name: Any, kind: str, ident: Any, messages: list[dict[str, Any]]) -> Export:
    return {"name": name, "type": kind, "id": ident, "messages": messages}


def _account(chats: list[Export], left: list[Export] | None = None) -> Export:
    """A whole account's export: profile, contacts and the chats (``left_chats`` too)."""
    export: Export = {
        "about": "Here is the data you requested.",
        "personal_information": {"user_id": 1, "first_name": "Ana", "phone_number": "+0"},
        "profile_pictures": [{"date": "2023-01-01T00:00:00", "photo": "profile/p.jpg"}],
        "contacts": {"about": "contacts", "list": [{"first_name": "Bob", "user_id": 2}]},
        "frequent_contacts": {"about": "frequent", "list": [{"id": 2, "name": "Bob"}]},
        "chats": {"about": "This page lists all chats.", "list": chats},
    }
    if left is not None:
        export["left_chats"] = {"about": "Chats you left.", "list": left}
    export["other_data"] = {"about": "other", "changes_log": []}
    return export


def _whole_account() -> Export:
    """A group, a one-to-one chat, saved messages, a chat of only service messages, a
    chat whose name and id come after its messages, more chats than a survey keeps, and
    left chats."""
    pins = [_service(900, "Ana", "pin_message", message_id=3)]
    late: Export = {"messages": [_message(1, "Bob", "hi"), _message(2, "Ana", "hey")]}
    late.update(name="Bob", type="personal_chat", id=45)
    chats = [
        _chat("Family", "private_group", 42, _rich_messages(100)),
        _chat("Bob", "personal_chat", 43, [_message(1, "Ana", "hi Bob"), _message(2, "Bob", "yo")]),
        _chat(None, "saved_messages", 44, [_message(1, "Ana", "note to self")]),
        late,
        _chat("Pins", "private_group", 46, pins),
        *(
            _chat(f"Friend {i}", "personal_chat", 50 + i, [_message(1, "Ana", f"hi {i}")])
            for i in range(4)
        ),
    ]
    left = [
        _chat("Old club", "private_supergroup", 60, _rich_messages(500)),
        _chat("Quiet", "private_group", 61, [_message(1, "Ana", photo="photos/q.jpg")]),
    ]
    return _account(chats, left)


def _repo_chat() -> Export:
    """The chat of ``tests/test_importers_fixes.py``'s Telegram test."""
    return _chat(
        "Family",
        "private_group",
        42,
        [
            _service(1, "Ana", "pin_message", message_id=2),
            _message(2, "Ana", "Olá"),
            _message(
                3,
                "Bob",
                ["see ", {"type": "link", "text": "https://x.org"}, " and ", "this"],
                reply_to_message_id=2,
            ),
        ],
    )


def _repo_account() -> Export:
    chat = _repo_chat()
    pins = [m for m in chat["messages"] if m["type"] == "service"]
    return {
        "chats": {
            "list": [
                chat,
                {**chat, "id": 43, "name": "Bob", "type": "personal_chat"},
                {**chat, "id": 44, "name": "Pins", "messages": pins},
            ]
        }
    }


def _big_account(messages: int, chats: int = 40, *, events: bool = True) -> Export:
    """A generated account export of ``messages`` messages in ``chats`` chats (the last
    of them left), a third of them in the first chat; replies, edits, text entity lists,
    attachments and (``events``) media and service messages."""
    sizes = [messages // 3] + [(messages - messages // 3) // (chats - 1)] * (chats - 1)
    people = ["Ana", "Bob", "Carla", "Dev"]
    words = ["yes", "no", "ok", "sure", "great", "maybe", "dinner", "movie", "park", "coffee"]
    made: list[Export] = []
    for c, size in enumerate(sizes):
        msgs: list[dict[str, Any]] = []
        for k in range(1, size + 1):
            who = people[(k * 7 + c) % len(people)]
            text = " ".join(words[(k * j + c) % len(words)] for j in range(1 + k % 6))
            pick = k % 50
            if events and pick == 7:
                msgs.append(_service(k, who, "pin_message", message_id=k - 1))
            elif events and pick == 13:
                msgs.append(_message(k, who, file="stickers/s.webp", media_type="sticker"))
            elif pick == 21:
                msgs.append(_message(k, who, text, photo=f"photos/p{k}.jpg", width=9, height=9))
            elif pick in (3, 29):
                msgs.append(_message(k, who, text, reply_to_message_id=k - 2))
            elif pick == 31:
                msgs.append(_message(k, who, text, reply_to_message_id=k + 2))
            elif pick == 40:
                msgs.append(_message(k, who, [text + " ", {"type": "link", "text": "x.org"}]))
            elif pick == 44:
                msgs.append(_message(k, who, text, edited="2023-03-13T10:00:00"))
            else:
                msgs.append(_message(k, who, text))
        kind = "private_supergroup" if c == 0 else "personal_chat"
        made.append(_chat(f"Chat {c}", kind, 1000 + c, msgs))
    return _account(made[:-1], made[-1:])


@cache
def _big_text() -> str:
    """The export the error tests break, as text (each test breaks its own copy)."""
    return json.dumps(_big_account(15_000), indent=1, ensure_ascii=False)


def _write(path: Path, export: Export, *, indent: int | None = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(export, indent=indent, ensure_ascii=False), encoding="utf-8")
    return path


def _same(path: Path, options: LoadOptions | None = None) -> StreamedSource:
    """``path`` read as a stream, checked against the whole-file loader."""
    whole = load_source(path, options=options)
    streamed = scan_source(path, options=options)
    assert isinstance(whole, ParsedSource)
    assert isinstance(streamed, StreamedSource)
    assert (streamed.path, streamed.format, streamed.sha256) == (
        whole.path,
        "telegram",
        whole.sha256,
    )
    assert streamed.conversations == whole.conversations
    assert list(streamed.iter_messages()) == whole.messages
    assert streamed.count == len(whole.messages)
    assert streamed.warnings == whole.warnings
    assert list(streamed.iter_messages()) == whole.messages  # read again, the same
    return streamed


CASES: dict[str, Callable[[], Export]] = {
    "repo chat": _repo_chat,
    "repo account": _repo_account,
    "single rich chat": lambda: _chat("Family", "private_group", 42, _rich_messages(100)),
    "single personal chat, name after messages": lambda: {
        "messages": [_message(1, "Ana", "hi"), _message(2, "Bob", "hey", reply_to_message_id=1)],
        "id": 7,
        "type": "personal_chat",
        "name": "Bob",
    },
    "whole account": _whole_account,
    "generated account": lambda: _big_account(3000, chats=12),
}


@pytest.mark.parametrize("indent", [1, None], ids=["pretty", "one line"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_streamed_export_reads_as_the_whole_file_does(
    tmp_path: Path, case: str, indent: int | None
) -> None:
    path = _write(tmp_path / "export" / "result.json", CASES[case](), indent=indent)
    _same(path)


def test_the_rich_account_keeps_its_events_names_replies_and_notes(tmp_path: Path) -> None:
    streamed = _same(_write(tmp_path / "result.json", _whole_account()))
    ids = [c.id for c in streamed.conversations]
    assert ids[:4] == ["telegram:42", "telegram:43", "telegram:44", "telegram:45"]
    assert ids[-1] == "telegram:60" and "telegram:46" not in ids and "telegram:61" not in ids
    assert streamed.conversations[2].name == "Saved Messages"
    family = streamed.conversations[0].metadata
    assert family["event_counts"] == {"system": 3, "media": 6}
    assert any("2 chat(s) left out" in w and "'Pins', 'Quiet'" in w for w in streamed.warnings)
    assert any("repeats" in w for w in streamed.warnings)
    assert any("characters; it is stored whole" in w for w in streamed.warnings)
    by_text = {m.text: m for m in streamed.iter_messages() if m.conversation == "telegram:42"}
    assert by_text["replying to a later one"].recipients == ("Carla",)
    assert by_text["answers Carla"].recipients == ("Carla",)
    assert by_text[
        "see https://x.org and the docs (https://docs.x.org); https://y.orghttps://z.org"
    ]
    assert by_text["the menu"].metadata["attachment"] == "files/menu.pdf"
    assert by_text["fixed typo"].metadata["edited"] == "2023-03-12T12:00:00"


def test_one_chat_with_conversation_option_is_streamed_under_that_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "result.json", CASES["single rich chat"]())
    streamed = _same(path, LoadOptions(conversation="family"))
    assert [c.id for c in streamed.conversations] == ["family"]


def test_left_chats_before_chats_is_loaded_whole_in_the_same_order(tmp_path: Path) -> None:
    export = _whole_account()
    reordered = {"left_chats": export.pop("left_chats"), **export}
    path = _write(tmp_path / "result.json", reordered)
    whole = load_source(path)
    read = scan_source(path)
    assert isinstance(read, ParsedSource)
    assert (read.conversations, read.messages) == (whole.conversations, whole.messages)
    assert read.conversations[0].id == "telegram:42"


def test_messenger_files_read_as_before(tmp_path: Path) -> None:
    """Messenger parts are loaded whole (a few MB each, newest first): the same as
    loading the file, with a walk of the file that no longer opens other shapes."""
    export = {
        "participants": [{"name": "Zo\u00c3\u00ab"}, {"name": "Bob"}],
        "messages": [
            {"sender_name": "Bob", "timestamp_ms": 1678630000000, "content": "caf\u00c3\u00a9"},
            {"sender_name": "Zo\u00c3\u00ab", "timestamp_ms": 1678629000000, "content": "hi"},
            {"sender_name": "Bob", "timestamp_ms": 1678628000000, "photos": [{"uri": "a/1.jpg"}]},
        ],
        "title": "Zo\u00c3\u00ab",
        "thread_path": "inbox/zoe_1",
    }
    path = _write(tmp_path / "inbox" / "zoe_1" / "message_1.json", export)
    read, whole = scan_source(path), load_source(path)
    assert isinstance(read, ParsedSource) and read.format == "messenger"
    assert (read.conversations, read.messages) == (whole.conversations, whole.messages)
    assert [m.text for m in read.messages] == ["hi", "café"]


_IDS = st.one_of(
    st.none(),
    st.integers(1, 12),
    st.sampled_from(["3", "7", "07", "x1", "-2"]),
)


@st.composite
def _random_message(draw: st.DrawFn) -> dict[str, Any]:
    """A message with ids in or out of order, repeated or missing, replies to any id."""
    kind = draw(st.sampled_from(["message", "message", "message", "service", "media"]))
    ident = draw(_IDS)
    who = draw(st.sampled_from(["Ana", "Bob", "Carla", ""]))
    if kind == "service":
        msg = _service(0, who or "Ana", draw(st.sampled_from(["pin_message", "create_group"])))
    elif kind == "media":
        msg = _message(0, who, photo="photos/p.jpg")
    else:
        text = draw(st.sampled_from(["hi", "hey", "ok", ["a ", {"type": "link", "text": "x"}]]))
        msg = _message(0, who, text)
        reply = draw(st.one_of(st.none(), _IDS))
        if reply is not None:
            msg["reply_to_message_id"] = reply
    if ident is None:
        del msg["id"]
    else:
        msg["id"] = ident
    return msg


def _read(path: Path, reader: Callable[..., Any]) -> tuple[Any, ...]:
    """What a reader makes of ``path``, or the error it raises."""
    try:
        source = reader(path)
    except InputError as exc:
        return ("error", str(exc))
    messages = list(source.iter_messages())
    return (source.conversations, messages, source.warnings, source.count)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chats=st.lists(st.lists(_random_message(), max_size=12), min_size=1, max_size=3),
    account=st.booleans(),
    kinds=st.lists(st.sampled_from(["personal_chat", "private_group"]), min_size=3, max_size=3),
)
def test_any_chats_read_as_a_stream_as_they_read_whole(
    tmp_path: Path, chats: list[list[dict[str, Any]]], account: bool, kinds: list[str]
) -> None:
    """Ids out of order, repeated (with the same content or not), missing or not numbers,
    replies to earlier, later or unknown messages: the same messages, or the same error."""
    made = [_chat(f"C{i}", kinds[i], 70 + i, msgs) for i, msgs in enumerate(chats)]
    export = _account(made[:-1], made[-1:]) if account else made[0]
    path = _write(tmp_path / "result.json", export)
    assert _read(path, scan_source) == _read(path, load_source)


def test_the_benchmark_measures_reading_a_telegram_export(tmp_path: Path) -> None:
    """``benchmarks/single_input_memory.py --format telegram --read-only`` (the figures
    of streamed against whole reading) writes an account export and reads it both ways."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "single_input_memory.py"
    found = {}
    for whole in (False, True):
        out = tmp_path / f"{whole}.json"
        args = ["--messages", "3000", "--format", "telegram", "--read-only", "--json", str(out)]
        args += ["--keep", str(tmp_path / "work"), *(["--whole"] if whole else [])]
        run = subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
        found[whole] = json.loads(out.read_text())
    assert found[False]["reader"] == "StreamedSource" and found[True]["reader"] == "ParsedSource"
    assert found[False]["read_messages"] == found[True]["read_messages"] > 2500
    assert found[False]["conversations"] == found[True]["conversations"] == 3
    assert found[False]["peak_rss_mb"] > 0 and found[False]["file_mb"] > 0.5


# -- errors -----------------------------------------------------------------------------


Edits = list[tuple[tuple[str | int, ...], Any]]


def _edit(export: Export, edits: Edits) -> None:
    """Set each value at its JSON path."""
    for path, value in edits:
        parent: Any = export
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value


def _at(chat: int, index: int) -> tuple[str | int, ...]:
    return ("chats", "list", chat, "messages", index)


ERRORS: dict[str, tuple[Edits, str]] = {
    "a message that is no object": (
        [(_at(30, 200), 42)],
        "at chats.list[30].messages[200]: a message must be a JSON object, found number",
    ),
    "a bad message id": (
        [(_at(30, 200), _message(0, "Ana", "x") | {"id": [1]})],
        "at chats.list[30].messages[200].id: a message id must be a JSON string or integer",
    ),
    "an id repeated with other content": (
        [(_at(30, 200), _message(199, "Ana", "something else"))],
        "message id '199' is used twice in conversation 'telegram:1030'",
    ),
    "a chat that is no object, after a bad message": (
        [(_at(1, 5), None), (("chats", "list", 30), [])],
        "at chats.list[30]: a chat must be a JSON object, found array",
    ),
    "a bad id before a message that is no object": (
        [(_at(3, 5), _message(0, "Ana", "x") | {"id": 1.5}), (_at(3, 9), "text")],
        "at chats.list[3].messages[9]: a message must be a JSON object, found string",
    ),
    "messages that are no array": (
        [(("chats", "list", 20, "messages"), {"1": "x"})],
        "at chats.list[20].messages: 'messages' must be a JSON array, found object",
    ),
    "two chats with one id": (
        [(("chats", "list", 25, "id"), 1007)],
        "conversation id(s) 'telegram:1007' appear more than once",
    ),
    "no message with text": (
        [
            (("chats",), {"list": [_chat("P", "x", 1, [_service(1, "A", "x")])]}),
            (("left_chats",), {}),
        ],
        "has no messages with text",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_an_error_deep_in_a_big_export_names_the_file_and_the_place(
    tmp_path: Path, case: str
) -> None:
    export = json.loads(_big_text())
    edits, expected = ERRORS[case]
    _edit(export, edits)
    path = _write(tmp_path / "result.json", export)
    with pytest.raises(InputError) as whole:
        load_source(path)
    with pytest.raises(InputError) as streamed:
        scan_source(path)
    assert str(streamed.value) == str(whole.value)
    assert str(streamed.value).startswith(f"{path}: ")
    assert expected in str(streamed.value)


def test_conversation_option_on_an_account_of_several_chats_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "result.json", _whole_account())
    options = LoadOptions(conversation="one")
    with pytest.raises(InputError) as whole:
        load_source(path, options=options)
    with pytest.raises(InputError, match="holds 11 chats") as streamed:
        scan_source(path, options=options)
    assert str(streamed.value) == str(whole.value)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"from": "Bob",', '"from": "Bob"'),  # a comma missing
        ('"text": "', '"text": \''),  # a string not quoted
        ('"id": 200,', '"id": 200.,'),  # a number cut short
    ],
    ids=["comma", "quote", "number"],
)
def test_bad_json_deep_in_a_big_export_names_its_line_and_column(
    tmp_path: Path, old: str, new: str
) -> None:
    text = _big_text()
    path = tmp_path / "result.json"
    at = text.index(old, text.index('"id": 200,', len(text) * 4 // 5))
    path.write_text(text[:at] + new + text[at + len(old) :], encoding="utf-8")
    line = text.count("\n", 0, at) + 1
    with pytest.raises(InputError) as whole:
        load_source(path)
    with pytest.raises(InputError) as streamed:
        scan_source(path)
    assert str(streamed.value) == str(whole.value)
    assert streamed.value.line is not None and abs(streamed.value.line - line) <= 12
    assert streamed.value.column is not None
    assert str(streamed.value).startswith(f"{path}, line {streamed.value.line}, column ")


# -- memory ------------------------------------------------------------------------------


def test_reading_a_big_export_holds_a_small_fraction_of_it(tmp_path: Path) -> None:
    """A generated account export of about 20 MB, checked and read as an ingest does:
    the peak of Python's allocations (about a tenth of the file's size: a piece of the
    file, one message, the ids of the chat being read) stays under a quarter of the
    file's size; loaded whole, it is ten times the file's size. Its chats have no media
    or service messages: those are kept, as the conversations' events."""
    path = _write(tmp_path / "result.json", _big_account(60_000, events=False))
    size = path.stat().st_size
    assert size > 15_000_000
    tracemalloc.start()
    try:
        source = scan_source(path)
        count = sum(1 for _ in source.iter_messages())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size / 4, f"peak {peak / 1e6:.1f} MB for a file of {size / 1e6:.1f} MB"
    assert isinstance(source, StreamedSource) and count == source.count > 55_000
