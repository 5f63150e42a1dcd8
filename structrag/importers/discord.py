"""Discord channel exports made by DiscordChatExporter (JSON: ``guild``, ``channel``,
``messages``).

* **Speaker**: ``author.nickname`` (the name shown in the server) when present, else
  ``author.name``; bots are kept with ``metadata.bot``, not addressable (no default
  recipients, nobody's recipient).
* **Time**: ``timestamp`` (ISO 8601 with an offset) -> UTC; ``timestampEdited`` ->
  ``metadata.edited``. The message id is Discord's snowflake id.
* **Replies**: ``reference.messageId`` -> ``metadata.reply_to``; a reply is addressed to
  the author of the message it answers, a message with ``mentions`` to the people it
  mentions, others to the channel's other speakers.
* **Metadata**: ``attachments`` (file names and URLs), ``embeds`` (title, URL,
  description), ``reactions`` (emoji -> count), ``isPinned``. A message that is only an
  attachment or an embed gets ``[attachment: name]`` or the embed's title as its text.
* **Skipped**: system messages (``GuildMemberJoin``, ``ChannelPinnedMessage``,
  ``RecipientAdd``, ``Call``, ``ThreadCreated`` ...); their counts are in the conversation's
  ``metadata.system_messages``.

One conversation per file, ``discord:<server>/<channel>`` (DiscordChatExporter writes
one channel, or one thread, per file).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    SourceChanged,
    StreamedSource,
    as_count,
    as_dict,
    as_list,
    clean_text,
    expect,
    finish,
    json_path,
    parse_json,
)
from structrag.importers.json_stream import JsonStream, JsonSurvey, message_opens
from structrag.importers.messages_json import KeyedRaw, check_messages, checked_source
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

#: Message types that are someone saying something; every other type is a system message.
_SAID = frozenset(
    {"Default", "Reply", "ChatInputCommand", "ContextMenuCommand", "ThreadStarterMessage"}
)
_MENTION_RE = re.compile(r"<@!?(\d+)>")


def looks_like_discord(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("messages"), list)
        and isinstance(data.get("channel"), dict)
        and ("guild" in data or "exportedAt" in data)
    )


def _author_name(author: dict[str, Any]) -> str | None:
    for key in ("nickname", "name"):
        value = author.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def load_discord(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    expect(path, data, dict, "the top level", "a DiscordChatExporter file")
    expect(path, data.get("channel"), dict, "channel", "'channel'")
    messages = expect(path, data.get("messages"), list, "messages", "'messages'")
    people = _People()
    for i, msg in enumerate(messages):
        people.note(path, msg, f"messages[{i}]")
    raws = [
        _message(path, msg, f"messages[{i}]", people.names, people.authors)
        for i, msg in enumerate(messages)
        if str(msg.get("type") or "Default") in _SAID
    ]
    if not raws:
        raise _no_messages(path)
    conversation = _conversation(path, data, people.system, options)
    return finish(path, "discord", conversation, raws, parse_time=parse_datetime)


def stream_discord(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A DiscordChatExporter file walked one message at a time: once for the names of
    authors and mentions (a reply finds the author of the message it answers), once to
    check the messages, and again when they are written. None for a file whose channel or
    messages are not what the format says (:func:`load_discord` says what is wrong)."""
    data = survey.skeleton
    if not (
        isinstance(data, dict)
        and isinstance(data.get("channel"), dict)
        and isinstance(data.get("messages"), list)
    ):
        return None
    people = _People()
    first = JsonStream(path, message_opens, options.encoding)
    for event in first:
        if len(event.path) == 2 and event.path[0] == "messages":
            people.note(path, event.value, f"messages[{event.path[1]}]")
    if first.sha256 != survey.sha256:
        raise SourceChanged(str(path))
    conversation = _conversation(path, data, people.system, options)

    def raws(stream: JsonStream) -> Iterator[KeyedRaw]:
        key = 0
        for event in stream:
            if len(event.path) == 2 and event.path[0] == "messages":
                msg = event.value
                if str(msg.get("type") or "Default") in _SAID:
                    key += 1
                    where = f"messages[{event.path[1]}]"
                    yield key, _message(path, msg, where, people.names, people.authors), None

    stream = JsonStream(path, message_opens, options.encoding)
    check = check_messages(
        path,
        raws(stream),
        options,
        default=conversation.id,
        keyed_by_line=False,
        empty=_no_messages(path),
    )

    return checked_source(
        path,
        "discord",
        options,
        check,
        stream.sha256,
        raws,
        lambda p, e: JsonStream(p, message_opens, e),
        [conversation],
    )


@dataclass
class _People:
    """Names by author id (and of people mentioned), authors by message id, counts of
    system messages: what one walk over the messages finds before they are read."""

    names: dict[str, str] = field(default_factory=dict)
    authors: dict[str, str] = field(default_factory=dict)
    system: dict[str, int] = field(default_factory=dict)

    def note(self, path: Path, msg: Any, where: str) -> None:
        expect(path, msg, dict, where, "a message")
        author = expect(path, msg.get("author"), dict, json_path(where, ".author"), "'author'")
        name = _author_name(author)
        if name is None:
            raise InputError(
                path,
                f"at {json_path(where, '.author')}: the author has no name or nickname",
                hint="re-export the channel with DiscordChatExporter's JSON format",
            )
        if author.get("id") is not None:
            self.names[str(author["id"])] = name
        if msg.get("id") is not None:
            self.authors[str(msg["id"])] = name
        for m in as_list(msg.get("mentions")):
            if isinstance(m, dict) and m.get("id") is not None and _author_name(m):
                self.names.setdefault(str(m["id"]), _author_name(m) or "")
        kind = str(msg.get("type") or "Default")
        if kind not in _SAID:
            self.system[kind] = self.system.get(kind, 0) + 1


def _no_messages(path: Path) -> InputError:
    return InputError(
        path,
        "the export has no messages (only system messages, or none at all)",
        hint="check the export's date range",
    )


def _conversation(
    path: Path, data: dict[str, Any], system: dict[str, int], options: LoadOptions
) -> Conversation:
    guild = as_dict(data.get("guild"))
    channel: dict[str, Any] = data["channel"]
    guild_name = str(guild.get("name") or "Direct Messages")
    channel_name = str(channel.get("name") or channel.get("id") or path.stem)
    metadata: dict[str, Any] = {
        "source": str(path),
        "format": "discord",
        "guild": guild_name,
        "channel": channel_name,
    }
    for key in ("id", "type", "category", "topic"):
        if channel.get(key):
            metadata[f"channel_{key}"] = channel[key]
    if system:
        metadata["system_messages"] = dict(sorted(system.items()))
    return Conversation(
        id=options.conversation or f"discord:{guild_name}/{channel_name}",
        name=f"{guild_name} #{channel_name}",
        metadata=metadata,
    )


def _message(
    path: Path,
    msg: dict[str, Any],
    where: str,
    names: dict[str, str],
    authors: dict[str, str],
) -> RawMessage:
    author: dict[str, Any] = msg["author"]
    speaker = _author_name(author)
    msg_id = msg.get("id")
    if not isinstance(msg_id, str | int) or not str(msg_id).strip():
        raise InputError(path, f"at {json_path(where, '.id')}: the message has no id")
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        expect(path, content, str, json_path(where, ".content"), "the content")
    text = _MENTION_RE.sub(lambda m: "@" + names.get(m.group(1), m.group(1)), content or "")
    metadata: dict[str, Any] = {}
    if author.get("isBot"):
        metadata["bot"] = True
    if msg.get("type") not in (None, "Default", "Reply"):
        metadata["type"] = msg["type"]
    recipients: list[str] = []
    reference = msg.get("reference")
    if isinstance(reference, dict) and reference.get("messageId"):
        replied = str(reference["messageId"])
        metadata["reply_to"] = replied
        if replied in authors:
            recipients.append(authors[replied])
    for mention in as_list(msg.get("mentions")):
        if isinstance(mention, dict) and _author_name(mention):
            recipients.append(_author_name(mention) or "")
    extra: list[str] = []
    attachments = [a for a in as_list(msg.get("attachments")) if isinstance(a, dict)]
    if attachments:
        metadata["attachments"] = [
            {k: a[k] for k in ("fileName", "url", "fileSizeBytes") if k in a} for a in attachments
        ]
        extra.extend(f"[attachment: {a.get('fileName') or a.get('url')}]" for a in attachments)
    embeds = [e for e in as_list(msg.get("embeds")) if isinstance(e, dict)]
    if embeds:
        metadata["embeds"] = [
            {k: e[k] for k in ("title", "url", "description") if e.get(k)} for e in embeds
        ]
        extra.extend(
            str(e.get("title") or e.get("description") or "") for e in embeds if e.get("title")
        )
    reactions = [r for r in as_list(msg.get("reactions")) if isinstance(r, dict)]
    if reactions:
        metadata["reactions"] = {
            str(as_dict(r.get("emoji")).get("name") or "?"): as_count(r.get("count"))
            for r in reactions
        }
    if msg.get("isPinned"):
        metadata["pinned"] = True
    if msg.get("timestampEdited"):
        metadata["edited"] = str(msg["timestampEdited"])
    if not text.strip() and extra:
        text = "\n".join(x for x in extra if x)
    return RawMessage(
        text=clean_text(text),
        location=where,
        id=str(msg_id).strip(),
        speaker=speaker,
        recipients=tuple(dict.fromkeys(r for r in recipients if r and r != speaker)),
        timestamp=msg.get("timestamp"),
        metadata=metadata,
        addressable=not author.get("isBot"),  # a bot posts to the channel, to nobody
    )
