"""Facebook Messenger and Instagram direct messages, as Meta's "Download your information"
exports them in JSON (``messages/inbox/<thread>/message_1.json``).

A file holds ``participants`` (``[{"name": ...}]``), ``messages`` newest first (each with
``sender_name``, ``timestamp_ms`` and ``content``; media in ``photos``, ``videos``,
``audio_files``, ``gifs``, ``files``, ``sticker``, ``share``), ``title`` and
``thread_path``. Meta writes the UTF-8 bytes of every string as if each byte were a
character (``caf\\u00c3\\u00a9`` for ``café``); strings are repaired when they read back as
UTF-8. Messages are stored oldest first, their time in UTC, addressed to the other
participants; reactions, shared links and media are kept in ``metadata``. A message with
no text (a photo, a sticker, a link, a call, an unsent message) goes to the
conversation's ``metadata.events`` (time, kind, speaker, what it was), as WhatsApp's
omitted media do, never to message text. The conversation is ``messenger:<thread>``
(``thread_path``'s last part, else the folder's name), named by ``title``; a long chat's
``message_2.json`` ... add to it. Message ids are the millisecond times
(``1678630000000``, ``1678630000000-2`` for a second one in the same millisecond).

A file is loaded whole, not walked as a stream as a Telegram export is: Meta writes a
long thread in parts (``message_1.json``, ``message_2.json`` ...), and a part's messages,
newest first, are stored oldest first, which one walk of the file could not give without
holding them; a part of 10,000 short messages (2 MB) is read in about 25 MB.
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
    clean_text,
    expect,
    finish,
    parse_json,
)
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

#: Keys of a message that hold media; a message with only these has no text.
_MEDIA_KEYS = ("photos", "videos", "audio_files", "gifs", "files", "sticker", "share")
#: Keys read into the message itself (the rest go to its metadata).
_OWN_KEYS = frozenset({"sender_name", "timestamp_ms", "content", "is_geoblocked_for_viewer"})


def looks_like_messenger(data: Any) -> bool:
    """A Messenger / Instagram ``message_N.json``: ``participants`` and ``messages`` whose
    first message has ``sender_name`` and ``timestamp_ms``."""
    if not isinstance(data, dict) or not isinstance(data.get("participants"), list):
        return False
    messages = data.get("messages")
    if not isinstance(messages, list):
        return False
    first = next((m for m in messages if isinstance(m, dict)), None)
    return first is not None and "sender_name" in first and "timestamp_ms" in first


def repair(value: Any) -> Any:
    """A string (or the strings in a list or object) as it was before Meta wrote each of
    its UTF-8 bytes as a character: ``"caf\\u00c3\\u00a9"`` is ``"café"``. A string that
    does not read back as UTF-8 (plain text, or already right) is left as it is."""
    if isinstance(value, str):
        try:
            return value.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return value
    if isinstance(value, list):
        return [repair(item) for item in value]
    if isinstance(value, dict):
        return {key: repair(item) for key, item in value.items()}
    return value


def _conversation_id(path: Path, data: dict[str, Any]) -> str:
    thread = data.get("thread_path")
    if isinstance(thread, str) and thread.strip("/"):
        return "messenger:" + thread.strip("/").rsplit("/", 1)[-1]
    if path.stem.lower().startswith("message_") and path.resolve().parent.name:
        return "messenger:" + path.resolve().parent.name
    return "messenger:" + path.stem


def _media(msg: dict[str, Any]) -> tuple[str, str] | None:
    """What a message without text was: (kind, description), or None when it was nothing."""
    if msg.get("is_unsent"):
        return "deleted", "message unsent"
    if "call_duration" in msg:
        return "call", f"call ({as_count(msg['call_duration'])} s)"
    for key in _MEDIA_KEYS:
        value = msg.get(key)
        if not value:
            continue
        if key == "share":
            share = as_dict(value)
            link = share.get("link") or share.get("share_text") or ""
            return "media", f"share: {link}".strip(": ")
        items = as_list(value) or [value]
        uris = [str(as_dict(item).get("uri", "")).rsplit("/", 1)[-1] for item in items]
        named = ", ".join(u for u in uris if u)
        return "media", f"{key.rstrip('s').replace('_', ' ')}: {named}".strip(": ")
    return None


def as_count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def load_messenger(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    expect(path, data, dict, "the top level", "a Messenger export")
    data = repair(data)
    messages = expect(path, data.get("messages"), list, "messages", "'messages'")
    participants = [
        str(p["name"]).strip()
        for p in as_list(data.get("participants"))
        if isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"].strip()
    ]
    found: list[tuple[int, int, dict[str, Any]]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        expect(path, msg, dict, where, "a message")
        stamp = msg.get("timestamp_ms")
        expect(path, stamp, int, f"{where}.timestamp_ms", "timestamp_ms")
        found.append((stamp, i, msg))
    found.sort(key=lambda item: (item[0], -item[1]))  # oldest first; newest-first ties kept
    raws: list[RawMessage] = []
    events: list[dict[str, Any]] = []
    ids: dict[int, int] = {}
    for stamp, i, msg in found:
        where = f"messages[{i}]"
        speaker = msg.get("sender_name")
        speaker = speaker.strip() or None if isinstance(speaker, str) else None
        content = msg.get("content")
        body = clean_text(content) if isinstance(content, str) else ""
        moment = parse_datetime(stamp)
        if not body or msg.get("is_unsent"):
            what = _media(msg) or ("media", "message with no text")
            event: dict[str, Any] = {
                "location": where,
                "time": moment.isoformat() if moment else None,
                "kind": what[0],
                "text": what[1],
            }
            if speaker:
                event["speaker"] = speaker
            events.append(event)
            continue
        ids[stamp] = ids.get(stamp, 0) + 1
        metadata = {
            key: value
            for key, value in msg.items()
            if key not in _OWN_KEYS and value not in (None, False, [], {}, "")
        }
        recipients = tuple(p for p in participants if p != speaker) if speaker else ()
        raws.append(
            RawMessage(
                text=body,
                location=where,
                id=str(stamp) if ids[stamp] == 1 else f"{stamp}-{ids[stamp]}",
                speaker=speaker,
                recipients=recipients,
                timestamp=stamp,
                metadata=metadata,
            )
        )
    if not raws:
        raise InputError(
            path,
            "the Messenger chat has no messages with text, only media, calls or unsent messages",
            hint="download the chat again in JSON with its messages",
        )
    title = data.get("title")
    about: dict[str, Any] = {"source": str(path), "format": "messenger"}
    if participants:
        about["participants"] = participants
    add_events(about, events)
    conversation = Conversation(
        id=options.conversation or _conversation_id(path, data),
        name=title.strip() if isinstance(title, str) and title.strip() else None,
        metadata=about,
    )
    return finish(path, "messenger", conversation, raws, parse_time=parse_datetime)
