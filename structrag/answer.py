"""Answers written by an LLM from a budgeted answer context, citing message ids.

The prompt shows each message of the context with its id (``(m11) [21 May 2024] Marco:
...``); the model answers with :class:`GeneratedAnswer`. Citations of ids that are not
in the context are dropped and counted, so every citation points at a message the user
can look up with ``structrag show``.
"""

from __future__ import annotations

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


def excerpts(context: AnswerContext, lines: Mapping[int, str]) -> str:
    """The context's messages, each prefixed with its id, for the prompt."""
    return "\n".join(f"({m.id}) {lines[m.mkey]}" for m in context.messages if m.mkey in lines)


def write_answer(
    llm: StructuredLLM, question: str, context: AnswerContext, lines: Mapping[int, str]
) -> WrittenAnswer:
    """Ask the LLM for an answer from the context. Raises LLM errors to the caller."""
    knowledge = "\n".join(context.knowledge)
    body = excerpts(context, lines)
    user = (f"{knowledge}\n\n" if knowledge else "") + f"Excerpts:\n{body}\n\nQuestion: {question}"
    completion = llm.complete(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        GeneratedAnswer,
        max_tokens=500,
    )
    allowed = set(context.message_ids)
    cited = [c.strip().strip("[]()") for c in completion.value.citations]
    kept = [c for c in dict.fromkeys(cited) if c in allowed]
    dropped = [c for c in dict.fromkeys(cited) if c not in allowed]
    stats = completion.stats
    return WrittenAnswer(
        text=completion.value.answer.strip(),
        answered=completion.value.answered,
        citations=kept,
        model=llm.model,
        calls=stats.calls,
        input_tokens=stats.input_tokens,
        output_tokens=stats.output_tokens,
        dropped_citations=dropped,
    )
