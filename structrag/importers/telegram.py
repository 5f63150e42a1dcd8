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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
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
)
from structrag.models import Conversation
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
    for group in ("chats", "left_chats"):
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


def _chat(
    path: Path, where: str, chat: dict[str, Any], options: LoadOptions, single: bool
) -> ParsedSource:
    messages = expect(path, chat.get("messages"), list, json_path(where, ".messages"), "'messages'")
    authors: dict[str, str] = {}
    for i, msg in enumerate(messages):
        expect(path, msg, dict, json_path(where, f".messages[{i}]"), "a message")
        if msg.get("type") == "message" and msg.get("id") is not None:
            speaker = _speaker(msg, "from")
            if speaker:
                authors[str(msg["id"])] = speaker
    raws: list[RawMessage] = []
    events: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        at = json_path(where, f".messages[{i}]")
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
            events.append(event)
            continue
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
            author = authors.get(str(reply))
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
        raws.append(
            RawMessage(
                text=body,
                location=at,
                id=str(msg_id) if msg_id is not None else None,
                speaker=speaker,
                recipients=recipients,
                timestamp=moment,
                metadata=metadata,
            )
        )
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
    conversation = Conversation(
        id=(options.conversation if single else None) or default, name=name, metadata=about
    )
    return finish(path, "telegram", conversation, raws, parse_time=parse_datetime)


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
        raise InputError(
            path,
            "the Telegram export has no messages with text, only service messages and media",
            hint="export the chat again from Telegram Desktop in JSON ('Machine-readable JSON')",
        )
    merged = merge_sources(path, "telegram", parts)
    if empty:  # no message to store them with: say which chats went
        names = [c.name or c.id for part in empty for c in part.conversations]
        shown = ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")
        merged.warnings.append(
            f"{len(names)} chat(s) left out: only service messages or media without text ({shown})"
        )
    return merged
