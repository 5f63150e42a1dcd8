"""Answers written by an LLM from a budgeted answer context, citing message ids.

The prompt shows each message of the context with its id (``(m11) [21 May 2024] Marco:
...``), written ``conversation/id`` (``(friends/m11) ...``) when the context holds several
conversations, whose ids may repeat; the model answers with :class:`GeneratedAnswer`.
Citations of ids that are not in the context are dropped and listed, and their marks are
removed from the answer's text, so every citation points at a message the user can look
up with ``structrag show``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from structrag.llm.base import StructuredLLM
from structrag.query.context import AnswerContext

ANSWER_PROMPT_VERSION = "1"

SYSTEM_PROMPT = """You answer questions about a conversation history using only the
excerpts given. Each excerpt starts with its message id in parentheses. Cite the ids of
the messages your answer relies on, in square brackets after the sentence they support,
e.g. "She adopted a beagle [m11]." If the excerpts do not contain the answer, say so and
set answered to false."""


class GeneratedAnswer(BaseModel):
    answered: bool = Field(description="False when the excerpts do not contain the answer.")
    answer: str = Field(
        description="One to three sentences, citing message ids in square brackets."
    )
    citations: list[str] = Field(
        default_factory=list, description="Ids of the messages the answer relies on."
    )


@dataclass
class WrittenAnswer:
    text: str
    answered: bool
    citations: list[str]
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    dropped_citations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "answered": self.answered,
            "citations": self.citations,
            "model": self.model,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "dropped_citations": self.dropped_citations,
        }


def qualified(context: AnswerContext) -> bool:
    """Whether the context holds messages of several conversations, whose ids are then
    written ``conversation/id`` (as ``ask`` prints them), since ids may repeat across
    conversations."""
    return len({m.conversation for m in context.messages}) > 1


def labels(context: AnswerContext, qualify: bool | None = None) -> list[str]:
    """The id each context message is shown and cited by: ``m11``, or ``friends/m11``
    when ``qualify`` (by default: when the context holds several conversations)."""
    if qualify is None:
        qualify = qualified(context)
    return [f"{m.conversation}/{m.id}" if qualify else m.id for m in context.messages]


def excerpts(context: AnswerContext, lines: Mapping[int, str], qualify: bool | None = None) -> str:
    """The context's messages, each prefixed with its id (see :func:`labels`), for the
    prompt."""
    return "\n".join(
        f"({label}) {lines[m.mkey]}"
        for label, m in zip(labels(context, qualify), context.messages, strict=True)
        if m.mkey in lines
    )


_MARK = re.compile(r"\s*\[([^\[\]\n]+)\](?!\()")  # not a Markdown link's [text](url)


def _shape(label: str) -> str:
    """An id's shape: its digits as one mark (``m11``, ``m999``: ``m#``), and a run of hex
    digits holding digits as one mark too (``mem-9f0a1b2c3d4e`` and ``mem-77aa``: ``mem-#``;
    a UUID: ``#-#-#-#-#``)."""
    hexed = re.sub(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{4,}(?![0-9A-Za-z])", "#", label)
    return re.sub(r"\d+", "#", hexed)


class _Citations:
    """Citations checked against the context: an id shown in the prompt is kept; a bare
    id (``m11`` for ``friends/m11``) when it names one message of the context, and a
    qualified one (``friends/m11`` for ``m11``), are kept as shown; anything else is
    dropped."""

    def __init__(self, shown: list[str], context: AnswerContext) -> None:
        self.shown = set(shown)
        bare: dict[str, list[str]] = {}
        self.full: dict[str, str] = {}  # conversation/id -> the label shown
        for label, m in zip(shown, context.messages, strict=True):
            bare.setdefault(m.id, []).append(label)
            self.full[f"{m.conversation}/{m.id}"] = label
        self.bare = {k: v[0] for k, v in bare.items() if len(set(v)) == 1}
        #: The shapes of the context's ids: a bracket of this shape is a citation
        #: ([m999]); one of words or other marks ([image], [sic], [2024-05-03]) is text.
        self.shapes = {_shape(label) for label in shown} | {_shape(m.id) for m in context.messages}
        self.dropped: list[str] = []

    def resolve(self, cited: str) -> str | None:
        cited = cited.strip().strip("[]()").strip()
        if cited in self.shown:
            return cited
        found = self.bare.get(cited) or self.full.get(cited)
        if found is None and cited not in self.dropped:
            self.dropped.append(cited)
        return found

    def _cites(self, part: str) -> bool:
        """Whether a bracket's part reads as a message id of the context's kind."""
        return part in self.bare or part in self.full or _shape(part) in self.shapes

    def clean(self, text: str, listed: set[str]) -> str:
        """``text`` with its citation marks of dropped ids removed (``[m999]``, the
        ``m999`` of ``[m11, m999]``) and bare ids qualified. A bracket that cites nothing
        the model listed and is not of the shape of the context's ids (``[21 May 2024]``,
        ``[image]``, ``[sic]``), or is a Markdown link's text, is left alone."""

        def mark(found: re.Match[str]) -> str:
            parts = [p.strip() for p in re.split(r"[,;]", found.group(1)) if p.strip()]
            cites = [p for p in parts if p in listed or p in self.shown or self._cites(p)]
            if not parts or len(cites) != len(parts):
                return found.group(0)
            kept = [r for r in dict.fromkeys(self.resolve(p) for p in parts) if r]
            if not kept:
                return ""
            lead = found.group(0)[: len(found.group(0)) - len(found.group(0).lstrip())]
            return f"{lead}[{', '.join(kept)}]"

        return _MARK.sub(mark, text).strip()


def write_answer(
    llm: StructuredLLM,
    question: str,
    context: AnswerContext,
    lines: Mapping[int, str],
    *,
    qualify: bool | None = None,
) -> WrittenAnswer:
    """Ask the LLM for an answer from the context. Raises LLM errors to the caller.

    Messages are shown and cited by the ids of :func:`labels` (``qualify``: write every
    id ``conversation/id``; by default only when the context holds several
    conversations). Citations of messages not in the context are dropped from the
    citations and from the text."""
    shown = labels(context, qualify)
    knowledge = "\n".join(context.knowledge)
    body = excerpts(context, lines, qualify)
    user = (f"{knowledge}\n\n" if knowledge else "") + f"Excerpts:\n{body}\n\nQuestion: {question}"
    completion = llm.complete(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        GeneratedAnswer,
        max_tokens=500,
    )
    check = _Citations(shown, context)
    listed = [c.strip().strip("[]()").strip() for c in completion.value.citations]
    kept = [r for r in dict.fromkeys(check.resolve(c) for c in listed) if r]
    text = check.clean(completion.value.answer.strip(), set(listed))
    stats = completion.stats
    return WrittenAnswer(
        text=text,
        answered=completion.value.answered,
        citations=kept,
        model=llm.model,
        calls=stats.calls,
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        dropped_citations=check.dropped,
    )
