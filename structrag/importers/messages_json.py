"""Generic JSON and JSON Lines message files.

Schema (documented in the README): each message is an object with ``text`` (or ``content``,
a string or OpenAI-style list of ``{"type": "text", "text": ...}`` parts) and optionally
``id``, ``speaker`` (or ``role`` / ``author`` / ``sender``), ``recipients`` (or
``listeners`` / ``to``), ``timestamp`` (ISO 8601, epoch seconds, or ``"8 May 2023"``),
``tags``, ``metadata`` and ``conversation``. Other keys are kept in ``metadata``.

A ``.json`` file holds a list of messages, ``{"messages": [...]}`` (with optional ``id`` /
``name``), or ``{"conversations": [{"id": ..., "messages": [...]}, ...]}``. A ``.jsonl``
file holds one message per line; a ``conversation`` key splits it into conversations.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    check_surrogates,
    clean_text,
    expect,
    file_lines,
    finish,
    json_path,
    merge_sources,
    parse_json,
    str_list,
)
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_TEXT_KEYS = ("text", "content", "message", "body")
_SPEAKER_KEYS = ("speaker", "role", "author", "sender", "from", "name")
_RECIPIENT_KEYS = ("recipients", "listeners", "to")
_TIME_KEYS = ("timestamp", "time", "date", "created_at", "datetime")
_KNOWN = {"id", "tags", "metadata", "conversation", *_TEXT_KEYS, *_SPEAKER_KEYS}
_KNOWN.update(_RECIPIENT_KEYS, _TIME_KEYS)


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for key in keys:
        if key in obj and obj[key] is not None:
            return key, obj[key]
    return None, None


def _content_text(path: Path, value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise InputError(
                    path,
                    f"at {json_path(where, f'[{i}]')}: a content part must be a string "
                    "or {'text': ...}",
                )
        return "\n".join(parts)
    found = "null" if value is None else type(value).__name__
    raise InputError(path, f"at {where}: message text must be a string, found {found}")


def raw_message(path: Path, obj: Any, where: str) -> RawMessage:
    """One message object -> :class:`RawMessage`, with errors naming ``where``."""
    expect(path, obj, dict, where, "a message")
    key, text_value = _first(obj, _TEXT_KEYS)
    if key is None:
        raise InputError(
            path,
            f"at {where}: message has no 'text' (or 'content') field",
            hint="every message needs its text; see the JSON schema in the README",
        )
    text = clean_text(_content_text(path, text_value, json_path(where, f".{key}")))
    _, speaker = _first(obj, _SPEAKER_KEYS)
    if speaker is not None and not isinstance(speaker, str):
        speaker = str(speaker)
    rkey, recipients = _first(obj, _RECIPIENT_KEYS)
    _, timestamp = _first(obj, _TIME_KEYS)
    meta = obj.get("metadata") or {}
    expect(path, meta, dict, json_path(where, ".metadata"), "metadata")
    metadata = dict(meta)
    for extra_key, extra in obj.items():
        if extra_key not in _KNOWN:
            metadata.setdefault(extra_key, extra)
    msg_id = obj.get("id")
    if msg_id is not None:
        expect(path, msg_id, (str, int), json_path(where, ".id"), "a message id")
        msg_id = str(msg_id).strip() or None
    return RawMessage(
        text=text,
        location=where,
        id=msg_id,
        speaker=speaker.strip() if isinstance(speaker, str) and speaker.strip() else None,
        recipients=str_list(path, recipients, json_path(where, f".{rkey}")),
        timestamp=timestamp,
        tags=str_list(path, obj.get("tags"), json_path(where, ".tags")),
        metadata=metadata,
    )


def _group(
    path: Path,
    fmt: str,
    default_conv: str,
    items: Sequence[tuple[str | None, RawMessage]],
    names: dict[str, str] | None = None,
) -> ParsedSource:
    order: list[str] = []
    groups: dict[str, list[RawMessage]] = {}
    for conv, raw in items:
        cid = conv or default_conv
        if cid not in groups:
            groups[cid] = []
            order.append(cid)
        groups[cid].append(raw)
    if not order:
        raise InputError(path, "no messages found", hint="see the JSON schema in the README")
    names = names or {}
    parts = [
        finish(
            path,
            fmt,
            Conversation(id=cid, name=names.get(cid), metadata={"source": str(path)}),
            groups[cid],
            parse_time=parse_datetime,
        )
        for cid in order
    ]
    return merge_sources(path, fmt, parts)


def load_jsonl(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    items: list[tuple[str | None, RawMessage]] = []
    lines = file_lines(text)
    last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        obj = _parse_line(path, line, lineno, is_last=lineno == last)
        raw = raw_message(path, obj, f"line {lineno}")
        conv = obj.get("conversation")
        if conv is not None and not isinstance(conv, str | int):
            raise InputError(path, "'conversation' must be a string", line=lineno)
        items.append((options.conversation or (str(conv) if conv is not None else None), raw))
    return _group(path, "jsonl", options.conversation or path.stem, items)


def _parse_line(path: Path, line: str, lineno: int, *, is_last: bool) -> Any:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        hint = (
            "the last line ends before its JSON object is complete: the file looks "
            "truncated; re-export it or delete the partial line"
            if is_last and exc.pos >= len(line.rstrip())
            else "each line must be one complete JSON object"
        )
        raise InputError(
            path, f"invalid JSON: {exc.msg}", line=lineno, column=exc.colno, hint=hint
        ) from None
    check_surrogates(path, line, data, line=lineno)
    return data


def load_json(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    default = options.conversation or path.stem
    if isinstance(data, list):
        items: list[tuple[str | None, RawMessage]] = [
            (None, raw_message(path, m, f"[{i}]")) for i, m in enumerate(data)
        ]
        return _group(path, "json", default, items)
    expect(path, data, dict, "the top level", "the file")
    if "conversations" in data:
        convs = expect(path, data["conversations"], list, "conversations", "'conversations'")
        items = []
        names: dict[str, str] = {}
        for ci, conv in enumerate(convs):
            where = f"conversations[{ci}]"
            expect(path, conv, dict, where, "a conversation")
            cid = options.conversation or str(conv.get("id") or f"{path.stem}-{ci + 1}")
            if isinstance(conv.get("name"), str):
                names[cid] = conv["name"]
            msgs = expect(
                path, conv.get("messages"), list, json_path(where, ".messages"), "'messages'"
            )
            items.extend(
                (cid, raw_message(path, m, json_path(where, f".messages[{i}]")))
                for i, m in enumerate(msgs)
            )
        return _group(path, "json", default, items, names)
    if "messages" in data:
        msgs = expect(path, data["messages"], list, "messages", "'messages'")
        cid = options.conversation or str(data.get("id") or data.get("conversation") or path.stem)
        items = [(cid, raw_message(path, m, f"messages[{i}]")) for i, m in enumerate(msgs)]
        names = {cid: data["name"]} if isinstance(data.get("name"), str) else {}
        return _group(path, "json", cid, items, names)
    raise InputError(
        path,
        "JSON object has neither 'messages' nor 'conversations'",
        hint="see the JSON schema in the README, or pass --format locomo / typeagent",
    )
