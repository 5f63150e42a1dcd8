"""ChatGPT data exports: ``conversations.json``, a list of chats, each with ``title``,
``create_time`` and a ``mapping`` tree of message nodes (``parent``, ``children``).

A chat's tree holds every branch a user made by editing a prompt or regenerating an
answer; the one the user last saw runs from ``current_node`` up to the root. That branch
is read, root first, so each conversation is what was actually said (a chat without
``current_node`` follows the newest child at every step).

* **Speaker**: ``author.role``: ``user`` or ``assistant``; tool output (``role: tool``,
  code results, browsing) is kept as a message from ``tool`` with ``metadata.tool`` (the
  tool's name); it is not addressable (it answers the assistant, nobody talks to it). A
  non-empty system message (a custom system prompt) is kept the same way; empty system and
  hidden nodes (``is_visually_hidden_from_conversation``), reasoning summaries
  (``thoughts``, ``reasoning_recap``) are skipped. The user's custom instructions
  (``user_editable_context``) go into the conversation's ``metadata.custom_instructions``.
* **Time**: each message's ``create_time`` (epoch seconds, UTC).
* **Text**: ``parts`` joined; ``code``/``execution_output``/``tether_quote`` content read
  from its ``text``; images and files in parts become ``[image]`` / metadata.
* **Metadata**: ``model`` (``model_slug``), ``content_type`` when not plain text,
  ``tool_call`` (the tool an assistant message is addressed to, such as the code it sends
  to ``python``; such a message is not addressed to the user).

One conversation per chat: id ``chatgpt:<conversation id>``, name the chat's title.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    StreamedSource,
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
from structrag.importers.json_stream import JsonSurvey, stream_items
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_SKIPPED_CONTENT = frozenset({"thoughts", "reasoning_recap", "model_editable_context"})


def looks_like_chatgpt(data: Any) -> bool:
    chat = data[0] if isinstance(data, list) and data else data
    return isinstance(chat, dict) and isinstance(chat.get("mapping"), dict)


def load_chatgpt(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    chats = data if isinstance(data, list) else [data]
    if not chats:
        raise InputError(path, "the export holds no chats", hint="export your data again")
    check_one_conversation(path, options, len(chats), "chats")
    listed = isinstance(data, list)
    parts = [
        _chat(path, chat, f"[{i}]" if listed else "the top level", i, options)
        for i, chat in enumerate(chats)
    ]
    return merge_sources(path, "chatgpt", parts)


def stream_chatgpt(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A ChatGPT export checked and read again one chat at a time (see
    :func:`~structrag.importers.json_stream.stream_items`); None for a file that is not a
    list of chats (it is read whole)."""
    if not isinstance(survey.skeleton, list) or not survey.skeleton:
        return None
    check_one_conversation(path, options, survey.length(), "chats")
    return stream_items(
        path, "chatgpt", options, lambda chat, i: _chat(path, chat, f"[{i}]", i, options)
    )


def _branch(path: Path, mapping: dict[str, Any], current: Any, where: str) -> list[str]:
    """The node ids from the root to ``current`` (or to the newest leaf)."""
    if current is None:
        roots = [
            k for k, node in mapping.items() if isinstance(node, dict) and not node.get("parent")
        ]
        if not roots:
            raise InputError(path, f"at {json_path(where, '.mapping')}: the tree has no root")
        chain: list[str] = []
        node_id = roots[0]
        while True:
            chain.append(node_id)
            children = as_list(mapping[node_id].get("children"))
            if not children:
                return chain
            node_id = str(children[-1])
            if node_id not in mapping or node_id in chain:
                raise InputError(
                    path, f"at {json_path(where, '.mapping')}: child {node_id!r} is missing"
                )
    if not isinstance(current, str) or current not in mapping:
        raise InputError(
            path,
            f"at {json_path(where, '.current_node')}: {current!r} is not a node of 'mapping'",
            hint="the chat looks truncated; export your data again",
        )
    chain = []
    at: str | None = current
    while at is not None:
        node_id = at
        if node_id in chain:
            raise InputError(
                path, f"at {json_path(where, '.mapping')}: the parent links form a cycle"
            )
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise InputError(
                path,
                f"at {json_path(where, f'.mapping[{node_id!r}]')}: the node is missing",
                hint="the chat looks truncated; export your data again",
            )
        chain.append(node_id)
        parent = node.get("parent")
        at = str(parent) if parent else None
    return chain[::-1]


def _chat(path: Path, chat: Any, where: str, index: int, options: LoadOptions) -> ParsedSource:
    expect(path, chat, dict, where, "a chat")
    mapping = expect(path, chat.get("mapping"), dict, json_path(where, ".mapping"), "'mapping'")
    chat_id = chat.get("conversation_id") or chat.get("id")
    conv_id = options.conversation or (
        f"chatgpt:{chat_id}" if chat_id else f"chatgpt:{path.stem}-{index + 1}"
    )
    raws: list[RawMessage] = []
    metadata: dict[str, Any] = {"source": str(path), "format": "chatgpt"}
    for node_id in _branch(path, mapping, chat.get("current_node"), where):
        node_where = json_path(where, f".mapping[{node_id!r}]")
        node = mapping[node_id]
        expect(path, node, dict, node_where, "a node")
        message = node.get("message")
        if message is None:
            continue  # the root
        expect(path, message, dict, json_path(node_where, ".message"), "a message")
        raw = _message(path, message, json_path(node_where, ".message"), node_id, metadata)
        if raw is not None:
            raws.append(raw)
    if not raws:
        raise InputError(
            path, f"at {where}: the chat has no messages", hint="an empty chat can be left out"
        )
    for key, value in (
        ("created", chat.get("create_time")),
        ("updated", chat.get("update_time")),
    ):
        moment = parse_datetime(value)
        if moment is not None:
            metadata[key] = moment.isoformat()
    if chat.get("default_model_slug"):
        metadata["model"] = chat["default_model_slug"]
    title = chat.get("title")
    conversation = Conversation(
        id=conv_id, name=title if isinstance(title, str) and title else None, metadata=metadata
    )
    return finish(path, "chatgpt", conversation, raws, parse_time=parse_datetime)


def _message(
    path: Path, message: dict[str, Any], where: str, node_id: str, conv_meta: dict[str, Any]
) -> RawMessage | None:
    author = as_dict(message.get("author"))
    role = str(author.get("role") or "")
    content = as_dict(message.get("content"))
    ctype = str(content.get("content_type") or "text")
    meta = as_dict(message.get("metadata"))
    if ctype == "user_editable_context":
        instructions = {
            k: v for k, v in content.items() if k != "content_type" and isinstance(v, str) and v
        }
        if instructions:
            conv_meta["custom_instructions"] = instructions
        return None
    if ctype in _SKIPPED_CONTENT or meta.get("is_visually_hidden_from_conversation"):
        return None
    if role not in ("user", "assistant", "system", "tool"):
        raise InputError(
            path,
            f"at {json_path(where, '.author.role')}: unknown role {role!r}",
            hint="expected user, assistant, system or tool; is this a ChatGPT export?",
        )
    text, files = _content_text(path, content, json_path(where, ".content"))
    if not text.strip() and not files and role in ("system", "tool"):
        return None
    if (
        not text.strip()
        and not files
        and role == "assistant"
        and message.get("recipient")
        not in (
            None,
            "all",
        )
    ):
        return None
    metadata: dict[str, Any] = {}
    if ctype != "text":
        metadata["content_type"] = ctype
    if meta.get("model_slug"):
        metadata["model"] = meta["model_slug"]
    if files:
        metadata["attachments"] = files
    names = [
        str(a.get("name"))
        for a in as_list(meta.get("attachments"))
        if isinstance(a, dict) and a.get("name")
    ]
    if names:
        metadata["attachments"] = [*metadata.get("attachments", []), *names]
    recipient = message.get("recipient")
    if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        metadata["tool_call"] = recipient
    speaker = role
    if role == "tool":
        speaker = "tool"
        if author.get("name"):
            metadata["tool"] = str(author["name"])
    if not text.strip() and files:
        text = " ".join(f"[{f}]" for f in files)
    return RawMessage(
        text=clean_text(text),
        location=where,
        id=node_id,
        speaker=speaker,
        timestamp=message.get("create_time"),
        metadata=metadata,
        # Tool output and system prompts talk to nobody; a tool call talks to the tool.
        addressable=role in ("user", "assistant") and "tool_call" not in metadata,
    )


def _content_text(path: Path, content: dict[str, Any], where: str) -> tuple[str, list[str]]:
    """The text of a message's content, and the files (images, documents) it holds."""
    files: list[str] = []
    parts = content.get("parts")
    if isinstance(parts, list):
        texts = []
        for i, part in enumerate(parts):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("content_type") or "")
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif "image" in kind:
                    files.append("image")
                elif kind:
                    files.append(kind.replace("_", " "))
            elif part is not None:
                raise InputError(
                    path,
                    f"at {json_path(where, f'.parts[{i}]')}: a part must be a string or an object",
                )
        return "\n".join(t for t in texts if t), files
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            value: str = content[key]
            if content.get("title") and content.get("url"):  # a quote from a web page
                return f"{value}\n(from {content['title']}, {content['url']})", files
            return value, files
    return "", files
