"""Compaction and observations: what a long room comes down to.

When a room's history passes a message count (or a token budget), its older messages are
summarised into a room summary that lists the memory ids it covers; the messages stay
stored and searchable. Offline, the summary is extractive: the period, the people, the
topics most talked about, and the actions stated, all from the knowledge extracted from
those messages. Conversation observations come from the same messages: decisions made
("let's go with", "we decided", "I'll book"), questions left open (a question nobody
answered in the turns after it), and topics of strong interest (talked about again and
again).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from structrag.models import Action, Entity, SemanticRef, Topic
from structrag.store.protocols import StoredMessage
from structrag.timeparse import format_date

#: Words that mark a decision in a message.
_DECISION = re.compile(
    r"\b(?:let'?s (?:go with|do|take|book|pick)|we(?:'ve| have)? decided|i(?:'ve| have)? "
    r"decided|decided to|we(?:'ll| will) go with|i'?ll (?:take|book|go with)|agreed|"
    r"settled on|going with)\b",
    re.IGNORECASE,
)


@dataclass
class Finding:
    """An observation before it is stored."""

    kind: str  # decision, open_question, interest
    topic: str
    insight: str
    importance: float
    sources: list[int] = field(default_factory=list)  # mkeys


@dataclass
class Digest:
    """What a stretch of a room comes down to: a summary and observations."""

    summary: str
    findings: list[Finding]


def _label(stored: StoredMessage) -> str:
    return stored.message.speaker or "someone"


def digest(
    messages: Sequence[StoredMessage],
    refs: dict[int, list[SemanticRef]],
    *,
    agent: str,
    max_topics: int = 6,
    max_actions: int = 8,
    interest_threshold: int = 3,
) -> Digest:
    """An extractive summary of ``messages`` (in order) and the observations in them."""
    if not messages:
        return Digest("", [])
    first, last = messages[0].message, messages[-1].message
    period = (
        f"{format_date(first.timestamp)} to {format_date(last.timestamp)}"
        if first.timestamp and last.timestamp
        else f"messages {first.ordinal} to {last.ordinal}"
    )
    # Who spoke and whom they spoke to: a room where only the user's messages were
    # stored is still between them and the agent they were said to.
    people = sorted(
        {_label(s) for s in messages} | {p for s in messages for p in s.message.recipients}
    )
    topics: Counter[str] = Counter()
    topic_sources: dict[str, list[int]] = {}
    entities: Counter[str] = Counter()
    actions: list[str] = []
    for stored in messages:
        for ref in refs.get(stored.mkey, []):
            k = ref.knowledge
            if ref.extractor == "metadata":
                continue
            if isinstance(k, Topic):
                key = k.text.lower()
                topics[key] += 1
                topic_sources.setdefault(key, []).append(stored.mkey)
            elif isinstance(k, Entity) and "person" not in k.types:
                entities[k.name] += 1
                topic_sources.setdefault(k.name.lower(), []).append(stored.mkey)
            elif isinstance(k, Action) and k.subject and k.object and not k.negated:
                line = f"{k.subject} {' '.join(k.verbs)} {k.object}"
                if line not in actions:
                    actions.append(line)
    talked = [t for t, _ in topics.most_common(max_topics)] or [
        e for e, _ in entities.most_common(max_topics)
    ]
    said = f"between {', '.join(people)}" if len(people) > 1 else f"from {people[0]}"
    parts = [f"{period}: {len(messages)} messages {said}."]
    if talked:
        parts.append("Talked about " + ", ".join(talked) + ".")
    if actions:
        parts.append("; ".join(actions[:max_actions]) + ".")
    mentioned = [e for e, _ in entities.most_common(max_topics) if e.lower() not in talked]
    if mentioned:
        parts.append("Mentioned " + ", ".join(mentioned) + ".")
    findings = _decisions(messages) + _open_questions(messages, agent)
    for key, count in (topics + Counter({e.lower(): n for e, n in entities.items()})).items():
        if count >= interest_threshold:
            findings.append(
                Finding(
                    "interest",
                    key,
                    f"{key} came up {count} times",
                    min(1.0, count / (2 * interest_threshold)),
                    sorted(set(topic_sources.get(key, [])))[:20],
                )
            )
    return Digest(" ".join(parts), findings)


def _decisions(messages: Sequence[StoredMessage]) -> list[Finding]:
    """Messages that state a decision, with the sentence that says it: the longest one
    that marks it ("agreed. We decided to use Postgres." says the second), and for a bare
    "agreed" the message it answers."""
    found = []
    for i, stored in enumerate(messages):
        text = stored.message.text
        matches = list(_DECISION.finditer(text))
        if not matches:
            continue
        match, sentence = max(
            ((m, _sentence(text, m.start())) for m in matches), key=lambda ms: len(ms[1])
        )
        insight = f"{_label(stored)}: {sentence}"
        sources = [stored.mkey]
        if len(sentence.split()) < 4 and i > 0:  # "agreed." agrees to what came before
            before = messages[i - 1]
            said = " ".join(before.message.text.split())
            said = said if len(said) <= 160 else said[:159] + "…"
            insight += f" (to {_label(before)}: {said})"
            sources.insert(0, before.mkey)
        found.append(Finding("decision", match.group(0).lower(), insight, 0.8, sources))
    return found


def _open_questions(messages: Sequence[StoredMessage], agent: str) -> list[Finding]:
    """Questions from a user that no one else answered in the two turns after them."""
    found = []
    for i, stored in enumerate(messages):
        text = stored.message.text.strip()
        if not text.endswith("?") or stored.message.speaker in (None, agent):
            continue
        after = messages[i + 1 : i + 3]
        if any(s.message.speaker != stored.message.speaker for s in after):
            continue
        if i + 1 >= len(messages):
            continue  # the room's last word: it may still be answered
        found.append(
            Finding(
                "open_question",
                _sentence(text, len(text) - 1),
                f"{_label(stored)} asked: {text}",
                0.6,
                [stored.mkey],
            )
        )
    return found


def _sentence(text: str, at: int) -> str:
    """The sentence of ``text`` around position ``at``."""
    start = max(text.rfind(". ", 0, at), text.rfind("\n", 0, at)) + 1
    ends = [i for i in (text.find(". ", at), text.find("\n", at)) if i != -1]
    end = min(ends) + 1 if ends else len(text)
    return text[start:end].strip()
