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
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    as_count,
    as_dict,
    as_list,
    clean_text,
    expect,
    finish,
    json_path,
    parse_json,
)
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
    guild = data.get("guild") if isinstance(data.get("guild"), dict) else {}
    channel = expect(path, data.get("channel"), dict, "channel", "'channel'")
    messages = expect(path, data.get("messages"), list, "messages", "'messages'")
    # Names by author id first, so that a reply to an earlier message finds its author.
    names: dict[str, str] = {}
    authors: dict[str, str] = {}
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
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
            names[str(author["id"])] = name
        if msg.get("id") is not None:
            authors[str(msg["id"])] = name
        for m in as_list(msg.get("mentions")):
            if isinstance(m, dict) and m.get("id") is not None and _author_name(m):
                names.setdefault(str(m["id"]), _author_name(m) or "")
    raws: list[RawMessage] = []
    system: dict[str, int] = {}
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        kind = str(msg.get("type") or "Default")
        if kind not in _SAID:
            system[kind] = system.get(kind, 0) + 1
            continue
        raws.append(_message(path, msg, where, names, authors))
    if not raws:
        raise InputError(
            path,
            "the export has no messages (only system messages, or none at all)",
            hint="check the export's date range",
        )
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
    conversation = Conversation(
        id=options.conversation or f"discord:{guild_name}/{channel_name}",
        name=f"{guild_name} #{channel_name}",
        metadata=metadata,
    )
    return finish(path, "discord", conversation, raws, parse_time=parse_datetime)


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
