"""Slack workspace exports: a folder with ``users.json``, ``channels.json`` and one folder
per channel of ``YYYY-MM-DD.json`` day files (each a JSON array of messages).

* **Speaker**: the user's display name, else their real name, else their handle, from
  ``users.json``; when the user is not listed there, a message's own ``user_profile``
  (or one on another of their messages in the channel); a bot
  message's ``username`` or ``bot_profile.name`` (bot messages are kept, with
  ``metadata.bot``, since bots post deploys, alerts and reminders people ask about; a bot
  is not addressable: it gets no default recipients and is nobody's).
* **Time**: ``ts`` (epoch seconds) -> the message timestamp, in UTC. The ``ts`` string is
  also the message id (unique within a channel, which is one conversation).
* **Threads**: kept in chronological order (as the channel reads) and marked: a thread's
  first message has ``metadata.thread`` (its own ``ts``) and ``replies``; a reply has
  ``thread`` and ``reply_to`` (the first message's ``ts``) and is addressed to the thread's
  starter unless it mentions people.
* **Text**: ``<@U123>`` becomes ``@Name``, ``<#C123|general>`` ``#general``,
  ``<https://x|label>`` ``label (https://x)``, ``<!here>`` ``@here``; ``&amp;`` etc. are
  unescaped. Mentioned people are the message's recipients (otherwise the channel's other
  speakers). Files, link attachments and reactions go into metadata; a message that is
  only a file gets ``[shared file: title]`` as its text.
* **Skipped**: joins, leaves, topic/purpose/name changes, pins and other housekeeping
  subtypes; their counts are in the conversation's ``metadata.skipped``. A channel with
  nothing else is left out, with a warning.

One conversation per channel, with the id ``slack:<channel name>`` (DMs: the DM folder).
A channel folder, or a single day file, given alone is read too; it needs the export's
``users.json`` next to it (one folder up), or names in every message's ``user_profile``,
and says so otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    FolderDigest,
    LoadOptions,
    ParsedSource,
    RawMessage,
    SourceChanged,
    StreamedSource,
    as_count,
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
from structrag.models import Conversation, Message
from structrag.timeparse import parse_datetime

DAY_FILE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
_LISTS = ("channels.json", "groups.json", "mpims.json", "dms.json")
#: Subtypes that are a person (or bot) saying something.
_KEPT = frozenset(
    {"bot_message", "thread_broadcast", "reply_broadcast", "file_share", "me_message"}
)
#: Housekeeping subtypes, skipped without a warning (counted in the conversation metadata).
_HOUSEKEEPING = frozenset(
    {
        "channel_join",
        "channel_leave",
        "channel_topic",
        "channel_purpose",
        "channel_name",
        "channel_archive",
        "channel_unarchive",
        "channel_convert_to_private",
        "channel_convert_to_public",
        "group_join",
        "group_leave",
        "group_topic",
        "group_purpose",
        "group_name",
        "group_archive",
        "group_unarchive",
        "pinned_item",
        "unpinned_item",
        "bot_add",
        "bot_remove",
        "bot_enable",
        "bot_disable",
        "tombstone",
        "joiner_notification",
        "reminder_add",
        "reminder_delete",
        "sh_room_created",
        "huddle_thread",
        "channel_canvas_updated",
    }
)
_LINK_RE = re.compile(r"<([^<>\n]+)>")
_SPECIAL = {"!here": "@here", "!channel": "@channel", "!everyone": "@everyone"}


def is_slack_folder(path: Path) -> bool:
    """A Slack export (``users.json`` or ``channels.json`` inside) or one channel's folder
    (day files inside, the first of which holds Slack messages)."""
    if not path.is_dir():
        return False
    if any((path / name).is_file() for name in ("users.json", *_LISTS)):
        return True
    days = _day_files(path)
    if not days:
        return False
    try:
        data = json.loads(days[0].read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return looks_like_slack_day(days[0], data)


def looks_like_slack_day(path: Path, data: Any) -> bool:
    """A Slack day file: a JSON array of objects with ``ts`` and ``type: message``."""
    if not isinstance(data, list) or not data:
        return False
    head = [m for m in data[:5] if isinstance(m, dict)]
    return bool(head) and all("ts" in m and m.get("type") == "message" for m in head)


class _Export:
    """What the export says about people and channels (users.json and the channel lists)."""

    def __init__(self, root: Path | None, digest: FolderDigest, encoding: str) -> None:
        self.root = root
        self.users: dict[str, str] = {}
        self.has_users = False
        self.channels: dict[str, dict[str, Any]] = {}  # folder name -> channel info
        self.channel_names: dict[str, str] = {}  # channel id -> name
        if root is None:
            return
        users_path = root / "users.json"
        if users_path.is_file():
            self.has_users = True
            data = parse_json(users_path, digest.read_text(users_path, encoding))
            expect(users_path, data, list, "the top level", "users.json")
            for i, user in enumerate(data):
                expect(users_path, user, dict, f"[{i}]", "a user")
                uid = user.get("id")
                name = _user_name(user)
                if isinstance(uid, str) and name:
                    self.users[uid] = name
        for list_name in _LISTS:
            list_path = root / list_name
            if not list_path.is_file():
                continue
            data = parse_json(list_path, digest.read_text(list_path, encoding))
            expect(list_path, data, list, "the top level", list_name)
            for i, channel in enumerate(data):
                expect(list_path, channel, dict, f"[{i}]", "a channel")
                cid = str(channel.get("id") or "")
                name = channel.get("name")
                folder = name if isinstance(name, str) and name else cid
                if folder:
                    self.channels[folder] = channel
                if cid:
                    self.channel_names[cid] = folder


def _user_name(user: dict[str, Any]) -> str | None:
    profile = as_dict(user.get("profile"))
    for value in (
        profile.get("display_name"),
        profile.get("real_name"),
        user.get("real_name"),
        user.get("name"),
    ):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def load_slack(
    path: Path, options: LoadOptions, known: dict[Path, bytes] | None = None
) -> ParsedSource:
    """Read a Slack export folder, one channel folder, or one day file. ``known``: bytes
    already read (a day file read to detect its format is not read twice)."""
    digest, parts, empty, _ = _read_channels(path, options, known)
    source = merge_sources(path, "slack", parts)
    source.warnings.extend(_empty_note(path, empty))
    source.sha256 = digest.hexdigest()
    return source


def stream_slack(path: Path, options: LoadOptions) -> StreamedSource:
    """A Slack export folder checked one channel at a time, keeping no message, and read
    again a channel at a time when it is written: an export is held one channel at a time,
    never whole. Its files changing between the check and the end of that reading raises
    :class:`SourceChanged`."""
    conversations: list[Conversation] = []
    warnings: list[str] = []
    checked, parts, empty, count = _read_channels(path, options, None, keep=False)
    for part in parts:
        conversations.extend(part.conversations)
        warnings.extend(part.warnings)
    merge_sources(path, "slack", parts)  # refuses a conversation id twice
    warnings.extend(_empty_note(path, empty))
    sha256 = checked.hexdigest()

    def read() -> Iterator[Message]:
        digest = _new_digest(path)
        try:
            for _, part in _channels(path, options, digest):
                if part is not None:
                    yield from part.messages
        except InputError:
            raise SourceChanged(str(path)) from None  # it passed its check: it changed
        if digest.hexdigest() != sha256:
            raise SourceChanged(str(path))

    return StreamedSource(
        path=str(path),
        format="slack",
        conversations=conversations,
        count=count,
        sha256=sha256,
        read=read,
        warnings=warnings,
    )


def _read_channels(
    path: Path, options: LoadOptions, known: dict[Path, bytes] | None, *, keep: bool = True
) -> tuple[FolderDigest, list[ParsedSource], list[str], int]:
    """Every channel of ``path``: the digest of the files read, the channels with
    messages (without them when not ``keep``), the names of those with none, and how
    many messages they have."""
    digest = _new_digest(path, known)
    parts: list[ParsedSource] = []
    empty: list[str] = []
    count = 0
    for folder, part in _channels(path, options, digest):
        if part is None:
            empty.append(folder.name)
            continue
        count += part.count
        if not keep:
            part.messages, part.locations = [], []
        parts.append(part)
    if not parts:
        raise InputError(
            path,
            "no channel has messages (only joins, topic changes and the like)",
            hint="check the export's date range",
        )
    return digest, parts, empty, count


def _empty_note(path: Path, empty: list[str]) -> list[str]:
    if not empty:
        return []
    return [
        f"{path}: {len(empty)} channel(s) with no messages, only joins and the like, "
        f"left out: {', '.join(empty[:10])}{' ...' if len(empty) > 10 else ''}"
    ]


def _new_digest(path: Path, known: dict[Path, bytes] | None = None) -> FolderDigest:
    return FolderDigest(_root_of(path) or (path if path.is_dir() else path.parent), known)


def _root_of(path: Path) -> Path | None:
    """The export's top folder (the one with users.json or the channel lists), if any."""
    if path.is_file():
        return path.parent.parent if (path.parent.parent / "users.json").is_file() else None
    if any((path / name).is_file() for name in ("users.json", *_LISTS)):
        return path
    return path.parent if (path.parent / "users.json").is_file() else None


#: What ``--format slack`` reads, for the errors that say a file is not that.
_WHAT_SLACK_IS = (
    "--format slack reads an unzipped Slack export: its top folder (users.json, "
    "channels.json and a folder per channel of YYYY-MM-DD.json day files), one channel "
    "folder, or one day file (a JSON array of messages)"
)


def _channel_dirs(path: Path) -> list[tuple[Path, list[Path]]]:
    """The channel folders of ``path`` and their day files, in order."""
    if path.is_file():
        if path.suffix.lower() != ".json":
            raise InputError(
                path,
                "not a Slack export: a Slack export is a folder of JSON files, and this is "
                f"a {path.suffix or 'extension-less'} file",
                hint=f"{_WHAT_SLACK_IS}; leave out --format to have the file's own format detected",
            )
        return [(path.parent, [path])]
    if any((path / name).is_file() for name in ("users.json", *_LISTS)):
        channel_dirs = [
            (sub, days)
            for sub in sorted(p for p in path.iterdir() if p.is_dir())
            if (days := _day_files(sub))
        ]
    elif _day_files(path):
        channel_dirs = [(path, _day_files(path))]
    else:
        raise InputError(
            path,
            "not a Slack export: no users.json, channels.json or YYYY-MM-DD.json day files",
            hint="pass the unzipped export's top folder",
        )
    if not channel_dirs:
        raise InputError(
            path,
            "the Slack export has no channel folders with day files (YYYY-MM-DD.json)",
            hint="check that the export was unzipped completely",
        )
    return channel_dirs


def _channels(
    path: Path, options: LoadOptions, digest: FolderDigest
) -> Iterator[tuple[Path, ParsedSource | None]]:
    """Each channel folder of ``path`` and its conversation, read in turn (``None``: only
    housekeeping in it), the files read added to ``digest``."""
    channel_dirs = _channel_dirs(path)
    export = _Export(_root_of(path), digest, options.encoding)
    check_one_conversation(path, options, len(channel_dirs), "Slack channels")
    for folder, days in channel_dirs:
        yield folder, _load_channel(path, folder, days, export, digest, options)


def _day_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and DAY_FILE_RE.match(p.name))


def _load_channel(
    source_path: Path,
    folder: Path,
    days: list[Path],
    export: _Export,
    digest: FolderDigest,
    options: LoadOptions,
) -> ParsedSource | None:
    """One channel's conversation; ``None`` when it has no messages, only housekeeping."""
    name = folder.name
    info = export.channels.get(name, {})
    found: list[tuple[float, int, Path, str, dict[str, Any]]] = []
    for day in days:
        try:
            data = parse_json(day, digest.read_text(day, options.encoding))
        except InputError as exc:
            if exc.hint is None or "--format jsonl" not in exc.hint:
                raise
            # "Extra data": more than one JSON value; a day file is one array, never
            # JSON Lines (the hint to pass --format jsonl would not help here).
            alone = source_path == day
            raise InputError(
                day,
                f"{'not a Slack day file: ' if alone else ''}{exc.detail}",
                line=exc.line,
                column=exc.column,
                hint=_WHAT_SLACK_IS
                if alone
                else "a Slack day file is one JSON array of "
                "messages: re-export it, or fix the JSON at that position",
            ) from None
        expect(day, data, list, "the top level", "a Slack day file")
        for i, msg in enumerate(data):
            expect(day, msg, dict, f"[{i}]", "a message")
            ts = msg.get("ts")
            try:
                if not isinstance(ts, str | int | float) or isinstance(ts, bool):
                    raise TypeError
                moment = float(ts)
            except (TypeError, ValueError):
                raise InputError(
                    day,
                    f"at {json_path(f'[{i}]', '.ts')}: a Slack message needs its 'ts' "
                    f"(epoch seconds as a string), found {ts!r}",
                    hint="fix or delete this message; the rest of the export is fine",
                ) from None
            found.append((moment, len(found), day, f"[{i}]", msg))
    found.sort(key=lambda item: (item[0], item[1]))
    skipped: dict[str, int] = {}
    unknown_subtypes: dict[str, int] = {}
    unresolved: dict[str, tuple[Path, str]] = {}
    authors: dict[str, str] = {}  # ts -> speaker, for replies addressed to the starter
    raws: list[RawMessage] = []
    # A user users.json does not list is named by any of their messages' user_profile
    # (the first), for their messages without one too.
    learned: dict[str, str] = {}
    for *_, msg in found:
        sender = msg.get("user")
        if isinstance(sender, str) and sender not in export.users and sender not in learned:
            profiled = _profile_name(msg)
            if profiled is not None:
                learned[sender] = profiled
    for _, _, day, where, msg in found:
        subtype = msg.get("subtype")
        subtype = None if subtype is None else str(subtype)
        if msg.get("type", "message") != "message" or (
            subtype is not None and subtype not in _KEPT
        ):
            key = str(subtype or msg.get("type"))
            skipped[key] = skipped.get(key, 0) + 1
            if key not in _HOUSEKEEPING:
                unknown_subtypes[key] = unknown_subtypes.get(key, 0) + 1
            continue
        location = f"{folder.name}/{day.name}{where}"
        raw = _message(day, where, location, msg, export, unresolved, learned)
        if raw.speaker:
            authors[str(msg["ts"])] = raw.speaker
        raws.append(raw)
    for raw in raws:
        starter = raw.metadata.get("reply_to")
        if not raw.recipients and starter and authors.get(starter) not in (None, raw.speaker):
            raw.recipients = (authors[starter],)
    if not raws:
        return None  # only joins, topic changes and the like
    warnings: list[str] = []
    if unresolved:
        ids = ", ".join(sorted(unresolved)[:5]) + (" ..." if len(unresolved) > 5 else "")
        first_day, first_where = next(iter(unresolved.values()))
        if not export.has_users:
            raise InputError(
                first_day,
                f"at {first_where}: user {next(iter(unresolved))} has no name: users.json "
                f"was not found next to {folder.name}/ and the message has no user_profile",
                hint="pass the export's top folder (the one holding users.json and "
                "channels.json), not a channel folder or a day file",
            )
        warnings.append(
            f"{source_path}: {len(unresolved)} user id(s) not in users.json ({ids}, first at "
            f"{first_day}: {first_where}); their messages are kept without a speaker, the "
            "id in metadata 'user'"
        )
    for subtype, count in sorted(unknown_subtypes.items()):
        warnings.append(
            f"{source_path}: {folder.name}: {count} message(s) of subtype {subtype!r} skipped"
        )
    conv_name = _channel_title(name, info, export)
    metadata: dict[str, Any] = {"source": str(source_path), "format": "slack", "channel": name}
    if info.get("id"):
        metadata["channel_id"] = info["id"]
    for key in ("topic", "purpose"):
        value = info.get(key)
        if isinstance(value, dict) and isinstance(value.get("value"), str) and value["value"]:
            metadata[key] = render_text(value["value"], export)[0]
    if skipped:
        metadata["skipped"] = dict(sorted(skipped.items()))
    conversation = Conversation(
        id=options.conversation or f"slack:{name}", name=conv_name, metadata=metadata
    )
    return finish(
        source_path,
        "slack",
        conversation,
        raws,
        parse_time=parse_datetime,
        warnings=warnings,
        people=_members(info, export),
    )


def _members(info: dict[str, Any], export: _Export) -> list[str]:
    """The names of a channel's members as the export's channel lists give them
    (``channels.json``, ``dms.json``, ``mpims.json``, ``groups.json``): recipients too,
    whether they wrote or not."""
    return [
        export.users[member]
        for member in as_list(info.get("members"))
        if isinstance(member, str) and member in export.users
    ]


def _channel_title(name: str, info: dict[str, Any], export: _Export) -> str:
    members = info.get("members")
    if info.get("is_im") or (name.startswith("D") and "name" not in info and members):
        people = [export.users.get(m, m) for m in as_list(members) if isinstance(m, str)]
        return "DM " + ", ".join(people) if people else f"DM {name}"
    if name.startswith("mpdm-") and isinstance(members, list):
        return "Group DM " + ", ".join(str(export.users.get(m, m)) for m in members)
    return f"#{name}"


def _profile_name(msg: dict[str, Any]) -> str | None:
    """The name a message's own ``user_profile`` gives its sender, if any."""
    profile = as_dict(msg.get("user_profile"))
    for value in (profile.get("display_name"), profile.get("real_name"), profile.get("name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _speaker(
    msg: dict[str, Any], export: _Export, learned: dict[str, str]
) -> tuple[str | None, str | None]:
    """The speaker's name and the user id it stands for."""
    uid = msg.get("user") if isinstance(msg.get("user"), str) else None
    if msg.get("subtype") == "bot_message" or (uid is None and msg.get("bot_id")):
        bot = as_dict(msg.get("bot_profile"))
        for value in (msg.get("username"), bot.get("name"), uid and export.users.get(uid)):
            if isinstance(value, str) and value.strip():
                return value.strip(), uid
        return None, uid or msg.get("bot_id")
    if uid and uid in export.users:
        return export.users[uid], uid
    return _profile_name(msg) or (learned.get(uid) if uid else None), uid


def _message(
    day: Path,
    where: str,
    location: str,
    msg: dict[str, Any],
    export: _Export,
    unresolved: dict[str, tuple[Path, str]],
    learned: dict[str, str],
) -> RawMessage:
    ts = str(msg["ts"])
    speaker, uid = _speaker(msg, export, learned)
    metadata: dict[str, Any] = {}
    if uid:
        metadata["user"] = uid
    if speaker is None:
        unresolved.setdefault(str(uid or "(no user)"), (day, where))
    body = msg.get("text")
    text, mentioned = render_text(body if isinstance(body, str) else "", export)
    if not text.strip() and msg.get("blocks"):
        text, mentioned = blocks_text(msg["blocks"], export)  # text only in rich text
    if msg.get("subtype") == "bot_message" or msg.get("bot_id"):
        metadata["bot"] = True
    if msg.get("subtype") == "me_message":
        metadata["me_message"] = True
    thread = msg.get("thread_ts")
    if isinstance(thread, str) and thread:
        metadata["thread"] = thread
        if thread != ts:
            metadata["reply_to"] = thread
            if msg.get("subtype") in ("thread_broadcast", "reply_broadcast"):
                metadata["also_sent_to_channel"] = True
        elif msg.get("reply_count"):
            metadata["replies"] = msg["reply_count"]
    if isinstance(msg.get("edited"), dict):
        metadata["edited"] = True
    extra: list[str] = []
    files = [f for f in as_list(msg.get("files")) if isinstance(f, dict)]
    if files:
        metadata["files"] = [str(f.get("title") or f.get("name") or "file") for f in files]
        extra.extend(f"[shared file: {title}]" for title in metadata["files"])
    attachments = [a for a in as_list(msg.get("attachments")) if isinstance(a, dict)]
    if attachments:
        metadata["attachments"] = [
            {k: a[k] for k in ("title", "title_link", "from_url") if isinstance(a.get(k), str)}
            for a in attachments
        ]
        for a in attachments:
            said = a.get("text") or a.get("fallback") or a.get("title")
            if isinstance(said, str) and said.strip():
                extra.append(render_text(said, export)[0])
    reactions = [r for r in as_list(msg.get("reactions")) if isinstance(r, dict)]
    if reactions:
        metadata["reactions"] = {
            str(r.get("name")): as_count(r.get("count")) or len(as_list(r.get("users")))
            for r in reactions
        }
    if not text.strip() and extra:
        text = "\n".join(extra)  # a file or a bot's attachment is all the message says
    recipients = tuple(dict.fromkeys(m for m in mentioned if m != speaker))
    return RawMessage(
        text=clean_text(text),
        location=location,
        id=ts,
        speaker=speaker,
        recipients=recipients,
        timestamp=float(ts),
        metadata=metadata,
        # A bot posts to the channel, not to its people; nor is it who people talk to.
        addressable=not metadata.get("bot"),
    )


def blocks_text(blocks: Any, export: _Export) -> tuple[str, list[str]]:
    """The text of a message's ``blocks`` (rich text, sections, headers, context), for a
    message whose ``text`` is empty: mentions as ``@Name``, links as ``label (url)``,
    emoji as ``:name:``, list items and quotes on lines of their own; and the people it
    mentions."""
    mentioned: list[str] = []

    def element(item: Any) -> str:
        if isinstance(item, list):
            return "".join(element(part) for part in item)
        if not isinstance(item, dict):
            return ""
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            return str(item["text"])
        if kind in ("mrkdwn", "plain_text") and isinstance(item.get("text"), str):
            said, named = render_text(item["text"], export)
            mentioned.extend(named)
            return said
        if kind == "user" and isinstance(item.get("user_id"), str):
            uid = str(item["user_id"])
            name = export.users.get(uid, uid)
            mentioned.append(name)
            return f"@{name}"
        if kind == "usergroup":
            return "@" + str(item.get("usergroup_id") or "group")
        if kind == "channel" and isinstance(item.get("channel_id"), str):
            cid = str(item["channel_id"])
            return "#" + export.channel_names.get(cid, cid)
        if kind == "broadcast":
            return "@" + str(item.get("range") or "here")
        if kind == "emoji":
            return f":{item.get('name', '')}:"
        if kind == "link":
            url = str(item.get("url") or "")
            label = str(item.get("text") or "")
            return f"{label} ({url})" if label and label != url else url
        if kind in ("rich_text_list", "rich_text_quote", "rich_text_preformatted"):
            parts = [element(part) for part in as_list(item.get("elements"))]
            mark = "- " if kind == "rich_text_list" else "> " if kind == "rich_text_quote" else ""
            return "\n" + "\n".join(mark + p for p in parts if p) + "\n"
        pieces = [element(item.get("text"))] if isinstance(item.get("text"), dict) else []
        pieces += [element(part) for part in as_list(item.get("fields"))]
        pieces.append(element(item.get("elements")))
        return "\n".join(p for p in pieces if p)

    text = "\n".join(part for part in (element(block) for block in as_list(blocks)) if part)
    return clean_text(text), mentioned


def render_text(text: str, export: _Export) -> tuple[str, list[str]]:
    """Slack's markup made readable, and the names of the people it mentions."""
    mentioned: list[str] = []

    def replace(match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target.startswith("@"):
            name = export.users.get(target[1:]) or label.lstrip("@") or target[1:]
            if target[1:] in export.users or label:
                mentioned.append(name)
            return f"@{name}"
        if target.startswith("#"):
            return "#" + (label or export.channel_names.get(target[1:]) or target[1:])
        if target.startswith("!"):
            if target in _SPECIAL:
                return _SPECIAL[target]
            return label or ("@" + target[1:].split("^")[0])
        url = target.removeprefix("mailto:")
        if label and label not in (target, url) and not target.endswith(label):
            return f"{label} ({url})"
        return label or url

    rendered = _LINK_RE.sub(replace, text)
    return rendered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"), mentioned
