"""Questions -> query expressions with an LLM, falling back to the offline translator.

The LLM fills :class:`QuestionQuery`, a pydantic schema that mirrors the query grammar
(action, entity and topic patterns, terms, a time scope, a speaker scope); it is turned
into the same AST the parser builds, so the user sees the expression that ran. Names the
question does not contain (and that are not the conversation's speakers) are dropped as
invented. When no LLM is configured, or the request fails, the offline spaCy translator
answers instead, and the answer says so in its notes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from structrag.analysis import fold_accents, stems
from structrag.errors import LLMError
from structrag.llm.base import StructuredLLM
from structrag.query import ast
from structrag.query.question import Translation, question_kind
from structrag.query.timeexpr import understood
from structrag.translate.offline import SpacyTranslator

TRANSLATE_PROMPT_VERSION = "1"

QuestionType = Literal[
    "who",
    "what",
    "when",
    "where",
    "why",
    "how",
    "how many",
    "how long",
    "how often",
    "how much",
    "yes/no",
    "list",
    "other",
]


class FacetTerm(BaseModel):
    name: str = Field(description="Property name, e.g. 'color', 'owner'.")
    value: str = Field(description="Property value as written in the question.")


class EntityTerm(BaseModel):
    """A specific person, place, organisation or thing the question is about."""

    name: str | None = Field(
        default=None,
        description="The name as written in the question; null for 'any entity of the types'.",
    )
    types: list[str] = Field(
        default_factory=list,
        description="Kinds of thing asked for, e.g. ['book'] for 'what books'. Never "
        "generic words like 'thing' or 'object'.",
    )
    facets: list[FacetTerm] = Field(default_factory=list)


class ActionTerm(BaseModel):
    """Who did what to whom; leave a part null when the question leaves it open."""

    subject: str | None = Field(default=None, description="Who does it (a name).")
    verb: str | None = Field(default=None, description="The verb in its base form: 'adopt'.")
    object: str | None = Field(default=None, description="What it is done to.")
    indirect_object: str | None = Field(
        default=None, description="To or for whom: 'Satya' in 'what did Kevin tell Satya'."
    )


class QuestionQuery(BaseModel):
    """How to search a conversation history for the answer to a question."""

    question_type: QuestionType = Field(description="What kind of answer is wanted.")
    people: list[str] = Field(
        default_factory=list, description="People named in the question (as written)."
    )
    actions: list[ActionTerm] = Field(default_factory=list)
    entities: list[EntityTerm] = Field(
        default_factory=list, description="Other named or asked-for entities."
    )
    topics: list[str] = Field(
        default_factory=list, description="Short noun phrases the answer is about."
    )
    terms: list[str] = Field(
        default_factory=list, description="Other words an answering message would contain."
    )
    time: str | None = Field(
        default=None,
        description="A time restriction exactly as written in the question, e.g. 'in May "
        "2023' or 'last week'; null unless the question limits when.",
    )
    speaker: str | None = Field(
        default=None,
        description="Only when the question asks what one person said: that person.",
    )


SYSTEM_PROMPT = """You turn a question about a conversation history into a search query.
Fill the fields from the question only: copy names and phrases as written, put verbs in
their base form, leave a field empty when the question does not say it. Speakers of the
conversation: {speakers}."""


class LLMTranslator:
    """A question translator that asks an LLM, with the offline translator as fallback."""

    def __init__(self, llm: StructuredLLM | None, fallback: SpacyTranslator | None = None) -> None:
        self.llm = llm
        self.fallback = fallback or SpacyTranslator()

    def translate(self, question: str, speakers: Sequence[str]) -> Translation:
        if self.llm is None:
            found = self.fallback.translate(question, speakers)
            found.notes.append("no LLM configured: translated offline")
            return found
        messages = [
            {
                "role": "system",
                "content": SYSTEM_PROMPT.format(speakers=", ".join(speakers) or "-"),
            },
            {"role": "user", "content": f"Question: {question}"},
        ]
        try:
            completion = self.llm.complete(messages, QuestionQuery, max_tokens=600)
        except LLMError as exc:
            found = self.fallback.translate(question, speakers)
            found.notes.append(f"LLM translation failed ({exc.message}): translated offline")
            return found
        translation = to_translation(completion.value, question, speakers)
        translation.notes.append(
            f"translated by {self.llm.model} ({completion.stats.calls} call(s), "
            f"{completion.stats.input_tokens}+{completion.stats.output_tokens} tokens)"
        )
        return translation


def _grounded(text: str | None, question: str, speakers: Sequence[str]) -> bool:
    """Whether a name or phrase comes from the question (by stems), or is a speaker the
    question names (by a word of the name, or the start of one: "Mel" for Melanie): a
    speaker it does not name is the model's guess, which would narrow the search."""
    if not text or text.strip() in ("", "*"):
        return True
    if any(
        (text.strip().lower() == s.lower() or text.strip().lower() == s.split()[0].lower())
        and _names(question, s)
        for s in speakers
    ):
        return True
    wanted = set(stems(text))
    return bool(wanted) and wanted <= set(stems(question))


def _names(question: str, speaker: str) -> bool:
    """Whether ``question`` names ``speaker``: says a part of the name ("Ed" of Ed Park,
    "Zoe" of Zoë), or starts one with a capitalised word of three letters or more that
    is no stopword ("Mel" of Melanie; not "Will" of William, nor "How" of Howard)."""
    from structrag.analysis import query_stopwords

    parts = [fold_accents(p) for p in speaker.lower().split()]
    words = re.findall(r"\w{2,}", question)
    if any(fold_accents(w.lower()) in parts for w in words):
        return True
    stop = query_stopwords()
    return any(
        w[:1].isupper()
        and len(w) >= 3
        and w.lower() not in stop
        and any(p.startswith(fold_accents(w.lower())) for p in parts)
        for w in words
    )


def _slot(value: str | None) -> str | None:
    """A pattern slot from the LLM: ``None`` (any value) for empty or ``*``."""
    if value is None or not value.strip() or value.strip() == "*":
        return None
    return value.strip()


def to_translation(query: QuestionQuery, question: str, speakers: Sequence[str]) -> Translation:
    """The AST of an LLM's :class:`QuestionQuery`, dropping what the question does not say."""
    notes: list[str] = []
    dropped: list[str] = []

    def keep(text: str | None) -> bool:
        ok = _grounded(text, question, speakers)
        if not ok and text:
            dropped.append(text)
        return ok

    items: list[ast.Node] = []
    for action in query.actions:
        parts = [action.subject, action.object, action.indirect_object]
        if not all(keep(p) for p in parts):
            continue
        pattern = ast.ActionPattern(
            _slot(action.subject),
            _slot(action.verb),
            _slot(action.object),
            _slot(action.indirect_object),
        )
        if any(
            p is not None
            for p in (pattern.subject, pattern.verb, pattern.object, pattern.indirect_object)
        ):
            items.append(pattern)
    for entity in query.entities:
        if not keep(entity.name):
            continue
        types = tuple(t.lower() for t in entity.types if t.strip())
        facets = tuple(
            ast.FacetCondition(f.name, _slot(f.value)) for f in entity.facets if keep(f.value)
        )
        name = _slot(entity.name)
        if name is None and not types and not facets:
            continue
        items.append(ast.EntityPattern(name=name, types=types, facets=facets))
    for topic in query.topics:
        if keep(topic):
            items.append(ast.Term(topic, phrase=len(topic.split()) > 1))
    for term in query.terms:
        if keep(term):
            items.append(ast.Term(term, phrase=len(term.split()) > 1))
    people = [p for p in query.people if keep(p)]
    if not items:
        words = [w for w in question.split() if w.isalpha()][:8] or [question]
        items = [ast.Term(w) for w in words]
    body: ast.Node = items[0] if len(items) == 1 else ast.Or(tuple(items))
    scopes: list[ast.Node] = []
    if query.time:
        if understood(query.time) and keep(query.time):
            scopes.append(ast.TimeScope(None, None, query.time, "when"))
        else:
            notes.append(f"time {query.time!r} not understood: ignored")
    if query.speaker and keep(query.speaker):
        scopes.append(ast.PeopleScope("speaker", query.speaker))
    if scopes:
        body = ast.And((body, *scopes))
    if dropped:
        notes.append("dropped names not in the question: " + ", ".join(sorted(set(dropped))))
    kind = (
        query.question_type
        if query.question_type != "other"
        else question_kind(question.rstrip("?").split())
    )
    return Translation(
        query=body,
        people=people,
        kind=kind,
        time_phrases=[query.time] if query.time else [],
        notes=notes,
    )
