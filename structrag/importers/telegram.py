"""Telegram Desktop's chat export in JSON (``result.json``): one chat (``name``, ``type``,
``id``, ``messages``), or a whole account's (``{"chats": {"list": [chat, ...]}}``, each
chat a conversation; ``left_chats`` too).

A message (``"type": "message"``) has ``id``, ``from`` (``from_id``), ``date`` (local
time) and ``date_unixtime`` (UTC, preferred), and ``text``: a string, or a list of strings
and entities (``{"type": "link", "text": ...}``, ``{"type": "text_link", "text": ...,
"href": ...}``) joined as they read (a link with a label as ``label (url)``).
``reply_to_message_id`` becomes ``metadata.reply_to``, the message addressed to that
message's author; ``edited`` is ``metadata.edited``; a photo or file is
``metadata.attachment``. Service messages (``"type": "service"``: a group created, a
message pinned, someone joined) and messages with no text (a sticker, a voice message, a
photo without a caption) go to the conversation's ``metadata.events`` (time, kind,
speaker, what it was), never to message text. The conversation is ``telegram:<chat id>``,
named by the chat's ``name``.

An export of any size is read as a stream (:func:`stream_telegram`): walked from the file
one message at a time, once to check it and once more when its messages are written. What
is held is one message and, for the chat being read, each message's id and author (a
reply may name a later message) and the id and content hash of each message kept (an id
may repeat): about 50 bytes a message while ids come in Telegram's increasing order.
:func:`load_telegram` reads an export whole, with the same messages, conversations,
warnings and errors.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    ConversationBuilder,
    LoadOptions,
    ParsedSource,
    RawMessage,
    SourceChanged,
    StreamedSource,
    add_events,
    as_dict,
    as_list,
    check_one_conversation,
    clean_text,
    expect,
    finish,
    json_path,
    merge_sources,
    parse_json,
    read_again,
)
from structrag.importers.json_stream import (
    ACCOUNT_GROUPS,
    ARRAY,
    OBJECT,
    JsonEvent,
    JsonPath,
    JsonStream,
    JsonSurvey,
    message_opens,
)
from structrag.models import Conversation, Message
from structrag.timeparse import parse_datetime

_KINDS = frozenset({"message", "service"})
#: Keys of a message read into the message itself (the rest, when set, go to metadata).
_OWN_KEYS = frozenset(
    {
        "id",
        "type",
        "date",
        "date_unixtime",
        "from",
        "text",
        "text_entities",
        "reply_to_message_id",
        "edited",
        "edited_unixtime",
        "photo",
        "file",
    }
)


def _is_chat(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    first = next((m for m in data["messages"] if isinstance(m, dict)), None)
    return (
        first is not None
        and first.get("type") in _KINDS
        and "date" in first
        and ("date_unixtime" in first or "from" in first or "actor" in first)
    )


def looks_like_telegram(data: Any) -> bool:
    """A Telegram Desktop JSON export: one chat whose messages have ``type``
    (``message``/``service``) and ``date``, or an account's ``chats.list``."""
    if _is_chat(data):
        return True
    chats = as_dict(data).get("chats") if isinstance(data, dict) else None
    return isinstance(chats, dict) and isinstance(chats.get("list"), list)


def _chats(path: Path, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "chats" not in data:
        return [("the top level", data)]
    out: list[tuple[str, dict[str, Any]]] = []
    for group in ACCOUNT_GROUPS:
        listed = as_dict(data.get(group)).get("list")
        for i, chat in enumerate(as_list(listed)):
            where = f"{group}.list[{i}]"
            expect(path, chat, dict, where, "a chat")
            out.append((where, chat))
    return out


def text_of(value: Any) -> str:
    """A message's ``text``: a string, or parts (strings and entities) joined as they
    read; a link with its own label is ``label (url)``."""
    if isinstance(value, str):
        return value
    parts: list[str] = []
    for part in as_list(value):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            shown = str(part.get("text") or "")
            href = part.get("href")
            if isinstance(href, str) and href and href != shown:
                shown = f"{shown} ({href})" if shown else href
            parts.append(shown)
    return "".join(parts)


def _time(msg: dict[str, Any]) -> Any:
    unix = msg.get("date_unixtime")
    if isinstance(unix, str) and unix.strip().isdigit():
        return int(unix)
    if isinstance(unix, int) and not isinstance(unix, bool):
        return unix
    return msg.get("date")


def _speaker(msg: dict[str, Any], key: str) -> str | None:
    name = msg.get(key)
    if isinstance(name, str) and name.strip():
        return name.strip()
    ident = msg.get(f"{key}_id")
    return str(ident) if ident not in (None, "") else None


def _service_text(msg: dict[str, Any]) -> str:
    action = str(msg.get("action") or "service message").replace("_", " ")
    details = [str(msg[key]) for key in ("title", "message_id") if msg.get(key) not in (None, "")]
    members = [str(m) for m in as_list(msg.get("members")) if m]
    if members:
        details.append(", ".join(members))
    body = text_of(msg.get("text"))
    return " ".join([action, *details, *([body] if body else [])])


def _media_text(msg: dict[str, Any]) -> str:
    kind = str(msg.get("media_type") or ("photo" if msg.get("photo") else "")).replace("_", " ")
    item = msg.get("file") or msg.get("photo") or msg.get("sticker_emoji") or ""
    if "location_information" in msg:
        kind = kind or "location"
    if "contact_information" in msg:
        kind = kind or "contact"
    return f"{kind or 'media'}: {item}".strip(": ")


def _author(msg: dict[str, Any]) -> tuple[str, str] | None:
    """The message id and author that a reply to this message is addressed to."""
    if msg.get("type") == "message" and msg.get("id") is not None:
        speaker = _speaker(msg, "from")
        if speaker:
            return str(msg["id"]), speaker
    return None


#: The author of the message with an id (for a reply to it), None when unknown.
AuthorOf = Callable[[str], str | None]


def _entry(
    path: Path, at: str, msg: dict[str, Any], chat: Mapping[str, Any], author_of: AuthorOf
) -> RawMessage | dict[str, Any]:
    """A message object at ``at`` of ``chat`` (its ``name`` and ``type`` are read): the
    message it says, or the event it is (a service message, media with no text)."""
    moment = parse_datetime(_time(msg))
    msg_id = msg.get("id")
    if msg_id is not None:
        expect(path, msg_id, (str, int), json_path(at, ".id"), "a message id")
    kind = msg.get("type")
    body = clean_text(text_of(msg.get("text")))
    poll = as_dict(msg.get("poll"))
    if poll and not body:
        answers = [str(as_dict(a).get("text") or "") for a in as_list(poll.get("answers"))]
        body = "\n".join([str(poll.get("question") or ""), *answers]).strip()
    if kind != "message" or not body:
        event: dict[str, Any] = {
            "location": at,
            "time": moment.isoformat() if moment else None,
            "kind": "system" if kind != "message" else "media",
            "text": _service_text(msg) if kind != "message" else _media_text(msg),
        }
        if msg_id is not None:
            event["id"] = str(msg_id)
        who = _speaker(msg, "actor" if kind != "message" else "from")
        if who:
            event["speaker"] = who
        return event
    speaker = _speaker(msg, "from")
    metadata: dict[str, Any] = {
        key: value
        for key, value in msg.items()
        if key not in _OWN_KEYS and value not in (None, False, [], {}, "")
    }
    recipients: tuple[str, ...] = ()
    reply = msg.get("reply_to_message_id")
    if reply is not None:
        metadata["reply_to"] = str(reply)
        author = author_of(str(reply))
        if author and author != speaker:
            recipients = (author,)
    partner = chat.get("name")
    if not recipients and chat.get("type") == "personal_chat" and isinstance(partner, str):
        # a one-to-one chat is named by the other person, who may not have written
        recipients = (partner.strip(),) if partner.strip() not in ("", speaker) else ()
    if msg.get("edited"):
        metadata["edited"] = msg["edited"]
    attached = msg.get("file") or msg.get("photo")
    if isinstance(attached, str) and attached:
        metadata["attachment"] = attached
    if isinstance(msg.get("date"), str):
        metadata["local_time"] = msg["date"]
    return RawMessage(
        text=body,
        location=at,
        id=str(msg_id) if msg_id is not None else None,
        speaker=speaker,
        recipients=recipients,
        timestamp=moment,
        metadata=metadata,
    )


def _conversation(
    path: Path,
    chat: Mapping[str, Any],
    events: list[dict[str, Any]],
    options: LoadOptions,
    single: bool,
) -> Conversation:
    chat_id = chat.get("id")
    name = chat.get("name")
    if isinstance(name, str) and name.strip():
        name = name.strip()
    else:
        name = "Saved Messages" if chat.get("type") == "saved_messages" else None
    default = f"telegram:{chat_id}" if chat_id not in (None, "") else f"telegram:{path.stem}"
    about: dict[str, Any] = {"source": str(path), "format": "telegram"}
    if chat.get("type"):
        about["type"] = chat["type"]
    add_events(about, events)
    return Conversation(
        id=(options.conversation if single else None) or default, name=name, metadata=about
    )


def _chat(
    path: Path, where: str, chat: dict[str, Any], options: LoadOptions, single: bool
) -> ParsedSource:
    messages = expect(path, chat.get("messages"), list, json_path(where, ".messages"), "'messages'")
    authors: dict[str, str] = {}
    for i, msg in enumerate(messages):
        expect(path, msg, dict, json_path(where, f".messages[{i}]"), "a message")
        found = _author(msg)
        if found:
            authors[found[0]] = found[1]
    raws: list[RawMessage] = []
    events: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        item = _entry(path, json_path(where, f".messages[{i}]"), msg, chat, authors.get)
        if isinstance(item, RawMessage):
            raws.append(item)
        else:
            events.append(item)
    conversation = _conversation(path, chat, events, options, single)
    return finish(path, "telegram", conversation, raws, parse_time=parse_datetime)


def _no_messages(path: Path) -> InputError:
    return InputError(
        path,
        "the Telegram export has no messages with text, only service messages and media",
        hint="export the chat again from Telegram Desktop in JSON ('Machine-readable JSON')",
    )


def _left_out(names: list[str]) -> str:
    """The warning for chats with no message to store their events with."""
    shown = ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")
    return f"{len(names)} chat(s) left out: only service messages or media without text ({shown})"


def load_telegram(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    expect(path, data, dict, "the top level", "a Telegram export")
    chats = _chats(path, data)
    check_one_conversation(path, options, len(chats), "chats")
    parts: list[ParsedSource] = []
    empty: list[ParsedSource] = []
    for where, chat in chats:
        part = _chat(path, where, chat, options, single=len(chats) == 1)
        (parts if part.messages else empty).append(part)
    if not parts:
        raise _no_messages(path)
    merged = merge_sources(path, "telegram", parts)
    if empty:  # no message to store them with: say which chats went
        merged.warnings.append(
            _left_out([c.name or c.id for part in empty for c in part.conversations])
        )
    return merged


# -- read as a stream -------------------------------------------------------------------


class _Unstreamable(Exception):
    """A document whose layout a single walk cannot read as :func:`load_telegram` reads
    it whole (``left_chats`` before ``chats``, a key given twice): it is loaded whole."""


def _place(at: JsonPath, account: bool) -> tuple[JsonPath, JsonPath] | None:
    """The path of the chat an event is in and the event's path within it; None for an
    event outside every chat (an account's profile, contacts ...)."""
    if not account:
        return (), at
    if len(at) >= 3 and at[0] in ACCOUNT_GROUPS and at[1] == "list" and isinstance(at[2], int):
        return at[:3], at[3:]
    return None


def _where(chat: JsonPath) -> str:
    return f"{chat[0]}.list[{chat[2]}]" if chat else "the top level"


def _error(check: Callable[[], Any]) -> InputError | None:
    """The error ``check`` raises, kept to be raised when its turn comes."""
    try:
        check()
    except InputError as exc:
        return exc
    return None


class _IdMap:
    """A chat's message ids, each to a number (an author's, a message's place). Telegram
    numbers a chat's messages in increasing order: while the ids come so, they are kept in
    two arrays (16 bytes an id) and found by bisection; from the first id out of that
    order (or one that is no integer), in a dict."""

    def __init__(self) -> None:
        self.ids = array("q")
        self.values = array("q")
        self.others: dict[str, int] | None = None

    @staticmethod
    def _number(key: str) -> int | None:
        if key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and len(key) < 19:
            return int(key)
        return None

    def get(self, key: str) -> int | None:
        if self.others is not None:
            return self.others.get(key)
        number = self._number(key)
        if number is None:
            return None
        at = bisect_left(self.ids, number)
        return self.values[at] if at < len(self.ids) and self.ids[at] == number else None

    def set(self, key: str, value: int) -> None:
        if self.others is None:
            number = self._number(key)
            last = self.ids[-1] if self.ids else -1
            if number is not None and number > last:
                self.ids.append(number)
                self.values.append(value)
                return
            if number is not None and number == last:
                self.values[-1] = value
                return
            self.others = {str(i): v for i, v in zip(self.ids, self.values, strict=True)}
            self.ids, self.values = array("q"), array("q")
        self.others[key] = value


class _Authors:
    """Who wrote the messages of a chat read so far, by message id (see :func:`_author`):
    what a reply is addressed to."""

    def __init__(self) -> None:
        self.ids = _IdMap()
        self.names: list[str] = []
        self.numbers: dict[str, int] = {}

    def note(self, msg: dict[str, Any]) -> None:
        found = _author(msg)
        if found is None:
            return
        ident, name = found
        number = self.numbers.setdefault(name, len(self.names))
        if number == len(self.names):
            self.names.append(name)
        before = self.ids.get(ident)
        if before is not None and before != number:
            raise _Unstreamable  # an id given to two authors: the later one answers
        self.ids.set(ident, number)

    def get(self, ident: str) -> str | None:
        number = self.ids.get(ident)
        return None if number is None else self.names[number]


@dataclass
class _Plan:
    """What reading a checked chat's messages again needs: its name and type, its
    speakers, the messages that repeat an earlier one, and for replies to a message that
    comes later the author :func:`load_telegram` finds."""

    where: str
    header: dict[str, Any]
    conversation: str = ""
    speakers: frozenset[str] = frozenset()
    skip: frozenset[int] = frozenset()
    fixes: dict[int, str | None] = field(default_factory=dict)


class _ChatCheck:
    """One chat checked message by message as :func:`_chat` checks it whole, its errors
    kept in the order that one raises them: ``messages`` not an array, then a message
    that is no object, then a bad id, then an id repeated with other content. Held per
    message read: its id and author, and for a message kept its id, content hash and
    place (about 50 bytes); replies to a message not read yet."""

    def __init__(self, path: Path, chat: JsonPath) -> None:
        self.path = path
        self.plan = _Plan(_where(chat), {})
        self.messages: Any = None  # the array's event, or the value found instead
        self.authors = _Authors()
        self.ahead: dict[int, str] = {}  # message index -> the id it replies to, unread
        self.speakers: set[str] = set()
        self.builder = ConversationBuilder("", ())  # ids and notes as finish() makes them
        self.seen = _IdMap()  # id -> the number of the message kept with it
        self.hashes = array("q")  # by that number: its content hash
        self.places = array("q")  # and its index in 'messages'
        self.skip: set[int] = set()
        self.events: list[dict[str, Any]] = []
        self.count = 0  # messages kept
        #: 'messages' that is no array, or the first message that is no object
        self.malformed: InputError | None = None
        self.bad_id: InputError | None = None
        self.repeated: tuple[RawMessage, str, str] | None = None

    def member(self, key: str | int, value: Any) -> None:
        if key == "messages":
            if self.messages is not None:
                raise _Unstreamable  # json.loads keeps the last; this walk read the first
            self.messages = value
        elif key in ("name", "type", "id"):
            self.plan.header[str(key)] = value

    def message(self, index: int, msg: Any) -> None:
        if self.malformed is not None:
            return
        at = json_path(self.plan.where, f".messages[{index}]")
        if not isinstance(msg, dict):
            self.malformed = _error(lambda: expect(self.path, msg, dict, at, "a message"))
            return
        self.authors.note(msg)
        if self.bad_id is not None:
            return

        def author_of(target: str) -> str | None:
            author = self.authors.get(target)
            if author is None:
                self.ahead[index] = target
            return author

        try:
            item = _entry(self.path, at, msg, self.plan.header, author_of)
        except InputError as exc:
            self.bad_id = exc
            return
        if not isinstance(item, RawMessage):
            self.events.append(item)
            return
        if item.speaker:
            self.speakers.add(item.speaker)
        if self.repeated is not None:
            return
        message = self.builder.message(item)
        digest = message.content_hash()
        first = self.seen.get(message.id)
        if first is not None:
            there = json_path(self.plan.where, f".messages[{self.places[first]}]")
            if self.hashes[first] == digest:
                self.builder.notes.repeated(self.path, item, message.id, "", there, True)
                self.skip.add(index)
            else:
                self.repeated = (item, message.id, there)
            return
        self.seen.set(message.id, len(self.hashes))
        self.hashes.append(digest)
        self.places.append(index)
        self.builder.notes.look(self.path, item, message.id)
        self.builder.keep()
        self.count += 1

    def close(self) -> None:
        """The end of the chat: the authors of the replies to later messages, now that
        all are known; what only the check needed is let go."""
        if self.messages is not ARRAY:
            where = json_path(self.plan.where, ".messages")
            self.malformed = _error(
                lambda: expect(self.path, self.messages, list, where, "'messages'")
            )
        self.plan.fixes = {
            index: self.authors.get(target)
            for index, target in self.ahead.items()
            if self.authors.get(target) is not None
        }
        self.plan.speakers = frozenset(self.speakers)
        self.plan.skip = frozenset(self.skip)
        self.authors, self.seen, self.ahead = _Authors(), _IdMap(), {}
        self.hashes, self.places, self.speakers, self.skip = array("q"), array("q"), set(), set()

    def error(self, conversation: str) -> InputError | None:
        if self.malformed or self.bad_id:
            return self.malformed or self.bad_id
        if self.repeated is not None:
            raw, msg_id, there = self.repeated
            return _error(
                lambda: self.builder.notes.repeated(
                    self.path, raw, msg_id, conversation, there, False
                )
            )
        return None


class _Check:
    """The check of a Telegram export in one walk (see :func:`stream_telegram`): its
    chats as :func:`load_telegram` finds them, each checked as it is read; the errors are
    raised at the end in the order that one raises them."""

    def __init__(self, path: Path, options: LoadOptions, account: bool) -> None:
        self.path = path
        self.options = options
        self.account = account
        self.chats: list[_ChatCheck] = []
        self.current: _ChatCheck | None = None if account else _ChatCheck(path, ())
        self.last: tuple[int, int] = (-1, -1)
        self.total = 0 if account else 1
        self.not_a_chat: InputError | None = None
        self.failed = False  # a chat has an error: the chats after it are only counted

    def event(self, event: JsonEvent) -> None:
        place = _place(event.path, self.account)
        if place is None:
            return
        chat, rest = place
        if not rest:
            if self.account:
                self._start(chat, event.value)
            return
        current = self.current
        if current is None:
            return
        if len(rest) == 1:
            current.member(rest[0], event.value)
        elif len(rest) == 2 and rest[0] == "messages":
            current.message(int(rest[1]), event.value)

    def _start(self, chat: JsonPath, value: Any) -> None:
        self._close()
        order = (ACCOUNT_GROUPS.index(str(chat[0])), int(chat[2]))
        if order <= self.last:
            raise _Unstreamable  # a group given twice
        self.last = order
        self.total += 1
        if value is not OBJECT:
            if self.not_a_chat is None:
                where = _where(chat)
                self.not_a_chat = _error(lambda: expect(self.path, value, dict, where, "a chat"))
            return
        if not self.failed:
            self.current = _ChatCheck(self.path, chat)

    def _close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.chats.append(self.current)
            self.failed = self.failed or bool(
                self.current.malformed or self.current.bad_id or self.current.repeated
            )
        self.current = None

    def done(self) -> tuple[list[Conversation], list[_Plan], int, list[str]]:
        """The conversations of the chats with messages, the plans to read them again,
        their number of messages and the warnings; or the error :func:`load_telegram`
        raises."""
        self._close()
        if self.not_a_chat is not None:
            raise self.not_a_chat
        check_one_conversation(self.path, self.options, self.total, "chats")
        single = self.total == 1
        made = [
            _conversation(self.path, chat.plan.header, chat.events, self.options, single)
            for chat in self.chats
        ]
        for chat, conversation in zip(self.chats, made, strict=True):
            error = chat.error(conversation.id)
            if error is not None:
                raise error
            chat.plan.conversation = conversation.id
        kept = [(c, chat) for c, chat in zip(made, self.chats, strict=True) if chat.count]
        if not kept:
            raise _no_messages(self.path)
        ids = [c.id for c, _ in kept]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise InputError(
                self.path,
                f"conversation id(s) {', '.join(map(repr, dupes))} appear more than once",
                hint="give each conversation its own id",
            )
        warnings = [w for _, chat in kept for w in chat.builder.notes.warnings(self.path)]
        left = [c.name or c.id for c, chat in zip(made, self.chats, strict=True) if not chat.count]
        if left:
            warnings.append(_left_out(left))
        plans = [chat.plan for _, chat in kept]
        return [c for c, _ in kept], plans, sum(chat.count for _, chat in kept), warnings


class _Reading:
    """The messages of one checked chat, read again one at a time (as :func:`_chat`
    makes them: a reply finds its author by id, as the check found it)."""

    def __init__(self, path: Path, plan: _Plan) -> None:
        self.path = path
        self.plan = plan
        self.builder = ConversationBuilder(
            plan.conversation, plan.speakers, parse_time=parse_datetime
        )
        self.authors = _Authors()

    def message(self, index: int, msg: Any) -> Message | None:
        if not isinstance(msg, dict):
            raise SourceChanged(str(self.path))  # the check found an object there
        try:
            self.authors.note(msg)
        except _Unstreamable:
            raise SourceChanged(str(self.path)) from None  # the check found no such id
        fixes = self.plan.fixes

        def author_of(target: str) -> str | None:
            return fixes[index] if index in fixes else self.authors.get(target)

        at = json_path(self.plan.where, f".messages[{index}]")
        item = _entry(self.path, at, msg, self.plan.header, author_of)
        if not isinstance(item, RawMessage) or index in self.plan.skip:
            return None
        message = self.builder.message(item)
        self.builder.keep()
        return message


def stream_telegram(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A Telegram export (one chat, or a whole account's) checked in a walk that holds
    one message at a time, and walked again when its messages are written; the same
    messages, conversations, warnings and errors as :func:`load_telegram`. While a chat
    is read, its authors by message id and the ids seen are held (a reply may name a
    later message; an id may repeat). None for a document of another shape, or one a
    walk cannot read as :func:`load_telegram` reads it (``left_chats`` before ``chats``,
    a key given twice, one message id given to two authors): it is loaded whole."""
    data = survey.skeleton
    if not isinstance(data, dict):
        return None
    account = "chats" in data
    if not account and not isinstance(data.get("messages"), list):
        return None
    groups = [key for key in data if key in ACCOUNT_GROUPS]
    if groups != [group for group in ACCOUNT_GROUPS if group in groups]:
        return None  # left_chats before chats: chats are read first
    check = _Check(path, options, account)
    stream = JsonStream(path, message_opens, options.encoding)
    try:
        for event in stream:
            check.event(event)
    except _Unstreamable:
        return None
    conversations, plans, count, warnings = check.done()
    by_chat = {plan.where: plan for plan in plans}
    digest = stream.sha256

    def messages(stream: JsonStream) -> Iterator[Message]:
        top = by_chat.get(_where(()))
        reading = _Reading(path, top) if top is not None and not account else None
        for event in stream:
            place = _place(event.path, account)
            if place is None:
                continue
            chat, rest = place
            if not rest:
                if account:
                    plan = by_chat.get(_where(chat))
                    reading = _Reading(path, plan) if plan is not None else None
            elif reading is not None and len(rest) == 2 and rest[0] == "messages":
                message = reading.message(int(rest[1]), event.value)
                if message is not None:
                    yield message

    def read() -> Iterator[Message]:
        return read_again(
            path, options.encoding, digest, messages, lambda p, e: JsonStream(p, message_opens, e)
        )

    return StreamedSource(
        path=str(path),
        format="telegram",
        conversations=conversations,
        count=count,
        sha256=digest,
        read=read,
        warnings=warnings,
    )
