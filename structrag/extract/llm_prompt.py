"""The extraction prompt, its version, and the hash that keys cached answers.

Change :data:`PROMPT_VERSION` whenever the prompt or the schema changes what the model is
asked: cached answers are keyed by (model, prompt version, message hash), so a new version
is extracted afresh and an unchanged one is never paid for twice.
"""

from __future__ import annotations

import hashlib

from structrag.extract.base import MAX_EXTRACT_CHARS
from structrag.models import Message

PROMPT_VERSION = "1"

SYSTEM_PROMPT = """\
You extract structured knowledge from one message of a conversation, for a search index.

Return:
- entities: specific people, places, organisations, objects, pets, works and concepts the \
message names. Use each name as written in the message. Types are lower-case, most specific \
first (e.g. ["dog", "animal"], ["person"], ["city", "place"]). Facets are properties stated \
in the message (e.g. {"name": "color", "value": "blue"}; numbers as numbers, with units).
- actions: what someone did, does or will do: subject, verb lemmas (e.g. ["adopt"], \
["sign", "up"]), object, indirect object, tense (past, present or future), negated when \
the message says it did not happen; places and times as params.
- topics: one to three short noun phrases saying what the message is about.

Rules:
- Only include what this message says or clearly implies. Never add names that are not in \
the message.
- "I", "me", "my" refer to the speaker: use the speaker's name. "you" refers to the \
recipient when there is one.
- Leave a list empty when there is nothing for it (greetings often have no actions).
"""


def render_message(message: Message) -> str:
    """The user turn of the prompt: who speaks to whom, when, and the text."""
    lines = [f"Speaker: {message.speaker or 'unknown'}"]
    if message.recipients:
        lines.append(f"Recipients: {', '.join(message.recipients)}")
    if message.timestamp is not None:
        lines.append(f"Time: {message.timestamp.isoformat(sep=' ', timespec='minutes')}")
    lines.append("Message:")
    lines.append(message.text[:MAX_EXTRACT_CHARS])
    return "\n".join(lines)


def prompt_messages(message: Message) -> list[dict[str, str]]:
    """The chat messages sent for one message."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_message(message)},
    ]


def message_hash(message: Message) -> str:
    """What the model is shown for this message, hashed: the cache key besides the model
    and the prompt version. Everything the prompt contains (speaker, recipients, time,
    text) is in it, and nothing else, so a change of tags or metadata costs no call."""
    return hashlib.sha256(render_message(message).encode("utf-8")).hexdigest()[:32]
