"""Generic JSON and JSON Lines message files.

Schema (documented in the README): each message is an object with ``text`` (or ``content``,
a string or OpenAI-style list of ``{"type": "text", "text": ...}`` parts) and optionally
``id``, ``speaker`` (or ``role`` / ``author`` / ``sender``), ``recipients`` (or
``listeners`` / ``to``), ``timestamp`` (ISO 8601, epoch seconds, or ``"8 May 2023"``),
``tags``, ``metadata`` and ``conversation``. Other keys are kept in ``metadata``. A speaker
given as an object (``"author": {"id": ..., "name": ...}``) is its name, never its repr.

OpenAI-style ``role: system`` (or ``developer``, ``tool``, ``function``) messages are kept
as messages, but they are not addressable: they get no default recipients and are nobody's
recipient; nor is an assistant turn that only calls tools (``tool_calls``, no text).

Numeric dates (``12/03/2023``) are read day- or month-first as the file's own values
settle it (see :mod:`structrag.timeparse`); when none does, day-first with a warning.

A ``.json`` file holds a list of messages, ``{"messages": [...]}`` (with optional ``id`` /
``name``), or ``{"conversations": [{"id": ..., "messages": [...]}, ...]}``. A ``.jsonl``
file holds one message per line; a ``conversation`` key splits it into conversations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    ConversationBuilder,
    Hashed,
    HashedLines,
    LoadOptions,
    MessageNotes,
    ParsedSource,
    RawMessage,
    SourceChanged,
    StreamedSource,
    check_surrogates,
    clean_text,
    expect,
    file_lines,
    finish,
    json_error,
    json_path,
    merge_sources,
    parse_json,
    read_again,
    str_list,
    too_deep,
)
from structrag.importers.json_stream import (
    JsonStream,
    JsonSurvey,
    message_opens,
)
from structrag.models import Conversation, Message
from structrag.timeparse import DateOrder, DateOrderVotes, infer_date_order, parse_datetime

_TEXT_KEYS = ("text", "content", "message", "body")
_SPEAKER_KEYS = ("speaker", "role", "author", "sender", "from", "name")
_RECIPIENT_KEYS = ("recipients", "listeners", "to")
_TIME_KEYS = ("timestamp", "time", "date", "created_at", "datetime")
_KNOWN = {"id", "tags", "metadata", "conversation", *_TEXT_KEYS, *_SPEAKER_KEYS}
_KNOWN.update(_RECIPIENT_KEYS, _TIME_KEYS)
#: Roles whose messages are not addressed to, nor by, the people in the conversation.
NOT_ADDRESSABLE_ROLES = frozenset({"system", "developer", "tool", "function"})
_ORDERS: tuple[DateOrder, DateOrder] = ("dmy", "mdy")
_NAME_KEYS = ("display_name", "nickname", "name", "real_name", "username", "full_name")


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
            elif isinstance(part, dict) and isinstance(part.get("type"), str):
                # an image, audio or file part: said in the text, as the ChatGPT reader does
                kind = part["type"].lower()
                named = next((k for k in ("image", "audio", "file") if k in kind), kind)
                parts.append(f"[{named}]")
            else:
                raise InputError(
                    path,
                    f"at {json_path(where, f'[{i}]')}: a content part must be a string, "
                    "{'text': ...} or {'type': ...}",
                )
        return "\n".join(parts)
    found = "null" if value is None else type(value).__name__
    raise InputError(path, f"at {where}: message text must be a string, found {found}")


def _speaker_name(path: Path, value: Any, where: str) -> str | None:
    """A speaker as a name: a string, a number, or an object's name field (never a repr)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):
        for key in _NAME_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return str(value[key]).strip()
        raise InputError(
            path,
            f"at {where}: the speaker is an object with no name field "
            f"(keys: {', '.join(sorted(map(str, value))[:8])})",
            hint="give the speaker as a string, or as an object with 'name' or "
            "'display_name'; for a chat app's export, pass its --format",
        )
    found = "array" if isinstance(value, list) else type(value).__name__
    raise InputError(
        path,
        f"at {where}: the speaker must be a string, found a JSON {found}",
        hint="give each message one speaker name",
    )


def _no_text_hint(obj: dict[str, Any]) -> str:
    if "mapping" in obj:
        return "this looks like a ChatGPT export (conversations.json): pass --format chatgpt"
    if "ts" in obj and ("user" in obj or "subtype" in obj):
        return "this looks like a Slack export: pass the export's folder (--format slack)"
    return "every message needs its text; see the JSON schema in the README"


def raw_message(path: Path, obj: Any, where: str) -> RawMessage:
    """One message object -> :class:`RawMessage`, with errors naming ``where``."""
    expect(path, obj, dict, where, "a message")
    key, text_value = _first(obj, _TEXT_KEYS)
    if key is None and ("tool_calls" in obj or "function_call" in obj):
        key, text_value = "content", ""  # an assistant turn that only calls tools
    if key is None:
        raise InputError(
            path,
            f"at {where}: message has no 'text' (or 'content') field",
            hint=_no_text_hint(obj),
        )
    text = clean_text(_content_text(path, text_value, json_path(where, f".{key}")))
    skey, speaker_value = _first(obj, _SPEAKER_KEYS)
    role = obj.get("role")
    if (
        skey == "role"
        and isinstance(obj.get("name"), str)
        and obj["name"].strip()
        and not (isinstance(role, str) and role.strip().lower() in NOT_ADDRESSABLE_ROLES)
    ):
        # OpenAI's {"role": "user", "name": "Carla"}: the name is who speaks (a tool's
        # or function's name is not a person's)
        skey, speaker_value = "name", obj["name"]
    speaker = _speaker_name(path, speaker_value, json_path(where, f".{skey}"))
    addressable = not (
        (isinstance(role, str) and role.strip().lower() in NOT_ADDRESSABLE_ROLES)
        or (speaker is not None and speaker.lower() in NOT_ADDRESSABLE_ROLES)
        or (not text and ("tool_calls" in obj or "function_call" in obj))  # talks to a tool
    )
    rkey, recipients = _first(obj, _RECIPIENT_KEYS)
    _, timestamp = _first(obj, _TIME_KEYS)
    meta = obj.get("metadata") or {}
    expect(path, meta, dict, json_path(where, ".metadata"), "metadata")
    metadata = dict(meta)
    for extra_key, extra in obj.items():
        if extra_key not in _KNOWN:
            metadata.setdefault(extra_key, extra)
    if skey == "name" and isinstance(role, str):
        metadata.setdefault("role", role)  # the speaker is the name: the role is kept
    elif skey != "name" and obj.get("name") is not None:
        metadata.setdefault("name", obj["name"])  # a tool's name, say
    msg_id = obj.get("id")
    if msg_id is not None:
        expect(path, msg_id, (str, int), json_path(where, ".id"), "a message id")
        msg_id = str(msg_id).strip() or None
    return RawMessage(
        text=text,
        location=where,
        id=msg_id,
        speaker=speaker,
        recipients=str_list(path, recipients, json_path(where, f".{rkey}")),
        timestamp=timestamp,
        tags=str_list(path, obj.get("tags"), json_path(where, ".tags")),
        metadata=metadata,
        addressable=addressable,
    )


def _group(
    path: Path,
    fmt: str,
    default_conv: str,
    items: Sequence[tuple[str | None, RawMessage]],
    options: LoadOptions,
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
    # One day/month order for the whole file, decided from all its dates.
    dates = infer_date_order((raw.timestamp for _, raw in items), forced=options.date_order)
    metadata: dict[str, Any] = {"source": str(path)}
    if dates.evidence is not None or dates.ambiguous:
        metadata["date_order"] = dates.basis
    parts = [
        finish(
            path,
            fmt,
            Conversation(id=cid, name=names.get(cid), metadata=metadata),
            groups[cid],
            parse_time=partial(parse_datetime, order=dates.order),
        )
        for cid in order
    ]
    source = merge_sources(path, fmt, parts)
    source.warnings.extend(dates.notes(path))
    return source


def load_jsonl(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    lines = list(enumerate(file_lines(text), start=1))
    check = check_messages(path, _jsonl_raws(path, lines, options), options)
    order = {c.id: i for i, c in enumerate(check.conversations)}
    found = sorted(  # conversation by conversation, each in file order
        checked_messages(path, _jsonl_raws(path, lines, options), check),
        key=lambda m: order[m[1].conversation],
    )
    return ParsedSource(
        path=str(path),
        format="jsonl",
        conversations=check.conversations,
        messages=[m for _, m in found],
        locations=[f"line {lineno}" for lineno, _ in found],
        warnings=check.warnings,
    )


def stream_jsonl(path: Path, options: LoadOptions) -> StreamedSource:
    """A JSON Lines file checked in one pass that holds no message, and read again, one
    line at a time, when its messages are written."""
    lines = HashedLines(path, options.encoding)
    check = check_messages(path, _jsonl_raws(path, lines, options), options)
    return checked_source(
        path,
        "jsonl",
        options,
        check,
        lines.sha256,
        lambda lines: _jsonl_raws(path, lines, options),
        HashedLines,
    )


def checked_source(
    path: Path,
    fmt: str,
    options: LoadOptions,
    check: MessagesCheck,
    digest: str,
    raws: Callable[[Any], Iterable[KeyedRaw]],
    reader: Callable[[Path, str], Hashed],
    conversations: list[Conversation] | None = None,
) -> StreamedSource:
    """The stream of an input checked by :func:`check_messages` (with hash ``digest``):
    its messages are ``raws`` of a new ``reader`` of the file, read again when written.
    ``conversations``: when the format makes its own (else the check's)."""

    def messages(reading: Any) -> Iterator[Message]:
        return (message for _, message in checked_messages(path, raws(reading), check))

    def read() -> Iterator[Message]:
        return read_again(path, options.encoding, digest, messages, reader)

    return StreamedSource(
        path=str(path),
        format=fmt,
        conversations=conversations or check.conversations,
        count=check.count,
        sha256=digest,
        read=read,
        warnings=check.warnings,
    )


#: A message as a check reads it: a key for it that grows along the input (a line
#: number, a running count), the message, and its conversation (None: the input's own).
KeyedRaw = tuple[int, RawMessage, str | None]


def _jsonl_raws(
    path: Path, lines: Iterable[tuple[int, str]], options: LoadOptions
) -> Iterator[KeyedRaw]:
    numbered = iter(lines)
    for lineno, line in numbered:
        if not line.strip():
            continue
        try:
            obj = _parse_line(path, line, lineno, is_last=False)
        except InputError:
            if not any(rest.strip() for _, rest in numbered):
                _parse_line(path, line, lineno, is_last=True)
            raise
        raw = raw_message(path, obj, f"line {lineno}")
        yield lineno, raw, _line_conversation(path, obj, lineno, options)


@dataclass
class MessagesCheck:
    """What the check of a file's messages found, all that is needed to read them again:
    the conversations in order, their addressable speakers, the keys of the messages that
    repeat an earlier one, the day/month order, the warnings."""

    conversations: list[Conversation]
    speakers: dict[str, set[str]]
    skip: set[int]
    order: DateOrder
    count: int
    warnings: list[str]
    default: str
    #: Whether a message with no recipients is addressed to the conversation's other
    #: speakers (see :class:`~structrag.importers.base.ConversationBuilder`).
    default_recipients: bool = True


@dataclass
class _Seen:
    """One conversation as the check found it."""

    speakers: set[str] = field(default_factory=set)
    #: Message id -> the fingerprint of its first copy << 32 | that copy's key.
    ids: dict[str, int] = field(default_factory=dict)
    #: Message id -> where its first copy is (for a key that is not a line number).
    where: dict[str, str] = field(default_factory=dict)
    count: int = 0
    #: The ids given by place, to messages without one.
    numbered: set[str] = field(default_factory=set)
    notes: MessageNotes = field(default_factory=MessageNotes)
    #: Per day/month order: the times it could not read (how many, the first).
    unparsed: dict[DateOrder, list[Any]] = field(
        default_factory=lambda: {"dmy": [0, None], "mdy": [0, None]}
    )


def check_messages(
    path: Path,
    raws: Iterable[KeyedRaw],
    options: LoadOptions,
    *,
    default: str | None = None,
    names: dict[str, str] | None = None,
    keyed_by_line: bool = True,
    empty: InputError | None = None,
    default_recipients: bool = True,
) -> MessagesCheck:
    """Check every message of an input read as a stream (bad fields and conflicting ids
    are :class:`InputError` naming where) without keeping them. ``default``: the
    conversation of messages that name none (``--conversation``, else the file's stem);
    ``names``: conversation names; ``keyed_by_line``: the keys are line numbers (else
    where each first copy is, is remembered by id); ``empty``: the error for an input
    with no message; ``default_recipients``: see :class:`MessagesCheck`."""
    default = default or options.conversation or path.stem
    seen: dict[str, _Seen] = {}
    skip: set[int] = set()
    votes = DateOrderVotes()
    for key, raw, conversation in raws:
        cid = conversation or default
        conv = seen.setdefault(cid, _Seen())
        said = votes.add(raw.timestamp)
        if raw.timestamp not in (None, ""):
            # Which day/month order applies is known at the end: note misses under each.
            if said is None:  # no day/month question: read the same either way
                missed = parse_datetime(raw.timestamp) is None
                misses = {"dmy": missed, "mdy": missed}
            else:
                misses = {o: parse_datetime(raw.timestamp, order=o) is None for o in _ORDERS}
            for order in _ORDERS:
                if misses[order]:
                    tally = conv.unparsed[order]
                    tally[0] += 1
                    tally[1] = tally[1] or raw.location
        msg_id = raw.id if raw.id is not None else str(conv.count + 1)
        fingerprint = _fingerprint(raw)
        first = conv.ids.get(msg_id)
        if first is not None and (raw.id is None) != (msg_id in conv.numbered):
            at = f"line {first & 0xFFFFFFFF}" if keyed_by_line else conv.where[msg_id]
            lacking = raw.location if raw.id is None else at
            raise InputError(
                path,
                f"the message at {lacking} has no id, and numbered by its place it is "
                f"{msg_id!r}, the id of the message at "
                f"{at if raw.id is None else raw.location}",
                hint="give every message of a conversation an id, or none (they are then "
                "numbered 1, 2, ...)",
            )
        if raw.id is None:
            conv.numbered.add(msg_id)
        if first is not None:
            same = first >> 32 == fingerprint
            at = f"line {first & 0xFFFFFFFF}" if keyed_by_line else conv.where[msg_id]
            conv.notes.repeated(path, raw, msg_id, cid, at, same)
            skip.add(key)
            continue
        conv.ids[msg_id] = fingerprint << 32 | (key & 0xFFFFFFFF)
        if not keyed_by_line:
            conv.where[msg_id] = raw.location
        conv.notes.look(path, raw, msg_id)
        conv.count += 1
        if raw.speaker and raw.addressable:
            conv.speakers.add(raw.speaker)
    if not seen:
        raise empty or InputError(
            path, "no messages found", hint="see the JSON schema in the README"
        )
    dates = votes.choice(options.date_order)
    metadata: dict[str, Any] = {"source": str(path)}
    if dates.evidence is not None or dates.ambiguous:
        metadata["date_order"] = dates.basis
    warnings: list[str] = []
    for conv in seen.values():
        conv.notes.unparsed_count, conv.notes.unparsed_first = conv.unparsed[dates.order]
        warnings.extend(conv.notes.warnings(path))
    warnings.extend(dates.notes(path))
    names = names or {}
    return MessagesCheck(
        conversations=[
            Conversation(id=cid, name=names.get(cid), metadata=metadata) for cid in seen
        ],
        speakers={cid: conv.speakers for cid, conv in seen.items()},
        skip=skip,
        order=dates.order,
        count=sum(conv.count for conv in seen.values()),
        warnings=warnings,
        default=default,
        default_recipients=default_recipients,
    )


def checked_messages(
    path: Path, raws: Iterable[KeyedRaw], check: MessagesCheck
) -> Iterator[tuple[int, Message]]:
    """The messages of a checked input, read again, in its order, with their keys."""
    parse_time = partial(parse_datetime, order=check.order)
    builders = {
        cid: ConversationBuilder(
            cid, speakers, parse_time=parse_time, default_recipients=check.default_recipients
        )
        for cid, speakers in check.speakers.items()
    }
    for key, raw, conversation in raws:
        if key in check.skip:
            continue
        builder = builders.get(conversation or check.default)
        if builder is None:
            raise SourceChanged(str(path))
        message = builder.message(raw)
        builder.keep()
        yield key, message


def _line_conversation(path: Path, obj: Any, lineno: int, options: LoadOptions) -> str | None:
    conv = obj.get("conversation")
    if conv is not None and (not isinstance(conv, str | int) or isinstance(conv, bool)):
        raise InputError(path, "'conversation' must be a string", line=lineno)
    return options.conversation or (str(conv) if conv is not None else None)


def _own_conversation(path: Path, obj: Any, where: str, options: LoadOptions) -> str | None:
    """A message's own ``conversation`` key (it splits a list of messages, as in JSON
    Lines), unless ``--conversation`` names one for the whole input."""
    conv = obj.get("conversation") if isinstance(obj, dict) else None
    if conv is None or conv == "" or options.conversation:
        return None
    return str(
        expect(path, conv, (str, int), json_path(where, ".conversation"), "a conversation id")
    )


def _conversation_id(path: Path, value: Any, where: str, default: str) -> str:
    """A conversation's ``id`` (a string or an integer), or ``default`` when it has none."""
    if value is None or value == "":
        return default
    return str(expect(path, value, (str, int), where, "a conversation id"))


def _fingerprint(raw: RawMessage) -> int:
    """A 64-bit fingerprint of what a message is made from (two copies of a message with
    the same fingerprint are taken for the same message)."""
    payload = json.dumps(
        [raw.text, raw.speaker, raw.recipients, raw.timestamp, raw.tags, raw.metadata],
        sort_keys=True,
        default=str,
    )
    return int.from_bytes(hashlib.blake2b(payload.encode(), digest_size=8).digest())


def _parse_line(path: Path, line: str, lineno: int, *, is_last: bool) -> Any:
    try:
        data = json.loads(line)
    except RecursionError:
        raise too_deep(path, line=lineno) from None
    except json.JSONDecodeError as exc:
        hint = (
            "the last line ends before its JSON object is complete: the file looks "
            "truncated; re-export it or delete the partial line"
            if is_last and exc.pos >= len(line.rstrip())
            else "each line must be one complete JSON object"
        )
        raise InputError(
            path, json_error(exc.msg), line=lineno, column=exc.colno, hint=hint
        ) from None
    check_surrogates(path, line, data, line=lineno)
    return data


def load_json(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    default = options.conversation or path.stem
    if isinstance(data, list):
        items: list[tuple[str | None, RawMessage]] = [
            (_own_conversation(path, m, f"[{i}]", options), raw_message(path, m, f"[{i}]"))
            for i, m in enumerate(data)
        ]
        return _group(path, "json", default, items, options)
    expect(path, data, dict, "the top level", "the file")
    if "conversations" in data:
        convs = expect(path, data["conversations"], list, "conversations", "'conversations'")
        items = []
        names: dict[str, str] = {}
        for ci, conv in enumerate(convs):
            where = f"conversations[{ci}]"
            expect(path, conv, dict, where, "a conversation")
            cid = options.conversation or _conversation_id(
                path, conv.get("id"), json_path(where, ".id"), f"{path.stem}-{ci + 1}"
            )
            if isinstance(conv.get("name"), str):
                names[cid] = conv["name"]
            msgs = expect(
                path, conv.get("messages"), list, json_path(where, ".messages"), "'messages'"
            )
            items.extend(
                (cid, raw_message(path, m, json_path(where, f".messages[{i}]")))
                for i, m in enumerate(msgs)
            )
        return _group(path, "json", default, items, options, names)
    if "messages" in data:
        msgs = expect(path, data["messages"], list, "messages", "'messages'")
        cid = options.conversation or str(data.get("id") or data.get("conversation") or path.stem)
        items = [
            (
                _own_conversation(path, m, f"messages[{i}]", options) or cid,
                raw_message(path, m, f"messages[{i}]"),
            )
            for i, m in enumerate(msgs)
        ]
        names = {cid: data["name"]} if isinstance(data.get("name"), str) else {}
        return _group(path, "json", cid, items, options, names)
    raise InputError(
        path,
        "JSON object has neither 'messages' nor 'conversations'",
        hint="see the JSON schema in the README, or pass --format locomo / typeagent",
    )


def stream_json(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A JSON message document (a list of messages, ``{"messages": [...]}`` or
    ``{"conversations": [...]}``) checked in a walk that holds one message at a time, and
    walked again when its messages are written; the same messages, conversations and
    warnings as :func:`load_json`. None for a document of another shape, or one whose
    structure is wrong (:func:`load_json` says what is wrong with it)."""
    data = survey.skeleton
    names: dict[str, str] = {}
    cids: dict[int, str] = {}
    default = options.conversation or path.stem
    if isinstance(data, list):
        shape = "list"
    elif isinstance(data, dict) and "conversations" in data:
        if not isinstance(data["conversations"], list):
            return None
        shape = "conversations"
        for i in range(survey.length("conversations")):
            header = survey.headers.get(i, {})
            if not (header.get("object") and header.get("messages")):
                return None
            cid = options.conversation or _conversation_id(
                path, header.get("id"), f"conversations[{i}].id", f"{path.stem}-{i + 1}"
            )
            cids[i] = cid
            if isinstance(header.get("name"), str):
                names[cid] = header["name"]
    elif isinstance(data, dict) and "messages" in data:
        if not isinstance(data["messages"], list):
            return None
        shape = "messages"
        default = options.conversation or str(
            data.get("id") or data.get("conversation") or path.stem
        )
        if isinstance(data.get("name"), str):
            names[default] = data["name"]
    else:
        return None

    def raws(stream: JsonStream) -> Iterator[KeyedRaw]:
        key = 0
        for event in stream:
            at = event.path
            if shape == "list" and len(at) == 1:
                where = f"[{at[0]}]"
                cid = _own_conversation(path, event.value, where, options)
            elif shape == "messages" and len(at) == 2 and at[0] == "messages":
                where = f"messages[{at[1]}]"
                cid = _own_conversation(path, event.value, where, options)
            elif shape == "conversations" and len(at) == 4 and at[2] == "messages":
                index = int(at[1])
                where, cid = f"conversations[{index}].messages[{at[3]}]", cids.get(index)
                if cid is None:
                    raise SourceChanged(str(path))  # more conversations than the survey saw
            else:
                continue
            key += 1
            yield key, raw_message(path, event.value, where), cid

    stream = JsonStream(path, message_opens, options.encoding)
    check = check_messages(
        path, raws(stream), options, default=default, names=names, keyed_by_line=False
    )
    return checked_source(
        path,
        "json",
        options,
        check,
        stream.sha256,
        raws,
        lambda p, e: JsonStream(p, message_opens, e),
    )
