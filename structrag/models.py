"""The data model: conversations, messages, knowledge records and semantic refs.

Knowledge records (:class:`Entity`, :class:`Action`, :class:`Topic`, :class:`Tag`) are small
frozen pydantic models; their field descriptions double as the schema an LLM extractor is
asked to fill. A :class:`SemanticRef` is one knowledge record plus its provenance: the
conversation, the message id, the character span in the message text, and the extractor's
name and version.

Character spans are ``[start, end)`` offsets in Python string indices (code points) into
``Message.text``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

KnowledgeKind = Literal["entity", "action", "topic", "tag"]
KNOWLEDGE_KINDS: tuple[KnowledgeKind, ...] = ("entity", "action", "topic", "tag")
Tense = Literal["past", "present", "future"]


#: Facet names that hold what a person does (the spaCy extractor writes the first). The
#: index makes a ref with such a facet findable by the facet's name as well as its value,
#: so "What is Kevin Scott's job?" finds "Kevin Scott, Chief Technology Officer for
#: Microsoft" by "job".
ROLE_FACET_NAMES: tuple[str, ...] = ("job", "role", "profession", "occupation", "career")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


FrozenT = TypeVar("FrozenT", bound=_Frozen)


def unchecked(cls: type[FrozenT], values: dict[str, Any]) -> FrozenT:
    """A model of ``cls`` holding ``values``, a value for every field in field order,
    already valid: nothing is checked or converted.

    For records structrag built and validated itself and rebuilds elsewhere (the refs an
    extraction worker sends back as tuples): in an ingest of ``locomo_dev`` the writer
    rebuilt its 33,565 refs in 0.52-0.59 CPU-s with ``model_construct`` and in 0.26-0.28
    with this. The model is the one ``model_construct`` makes when given every field."""
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


class Span(_Frozen):
    """A character range ``[start, end)`` in a message's text."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError(f"span end {self.end} is before start {self.start}")
        return self

    def within(self, text: str) -> bool:
        return 0 <= self.start <= self.end <= len(text)


class Facet(_Frozen):
    """A property of an entity, e.g. ``color = blue`` or ``age = 4 years``."""

    name: str = Field(description="The property name, e.g. 'color', 'age', 'profession'.")
    value: str | float | bool = Field(description="The property value; a number when it is one.")
    units: str | None = Field(default=None, description="Units of a numeric value, e.g. 'years'.")

    def value_text(self) -> str:
        if isinstance(self.value, bool):
            text = "true" if self.value else "false"
        elif isinstance(self.value, float):
            text = f"{self.value:g}"
        else:
            text = self.value
        return f"{text} {self.units}" if self.units else text


class Entity(_Frozen):
    """A specific person, place, organisation, object or concept named in a message."""

    kind: Literal["entity"] = "entity"
    name: str = Field(
        description="The entity's name as written, e.g. 'Caroline', 'adoption agency'."
    )
    types: tuple[str, ...] = Field(
        default=(), description="Lower-case types, most specific first, e.g. ('person',)."
    )
    facets: tuple[Facet, ...] = Field(default=(), description="Properties of the entity.")


class Action(_Frozen):
    """Something that happened or will happen: subject - verb - object (- indirect object)."""

    kind: Literal["action"] = "action"
    verbs: tuple[str, ...] = Field(description="Verb lemmas, e.g. ('adopt',) or ('sign', 'up').")
    tense: Tense = Field(default="present", description="Tense of the verb.")
    subject: str | None = Field(default=None, description="Who or what does it (entity name).")
    object: str | None = Field(default=None, description="What it is done to (entity name).")
    indirect_object: str | None = Field(
        default=None, description="To or for whom it is done (entity name)."
    )
    negated: bool = Field(
        default=False, description="True when the message says it did not happen."
    )
    params: tuple[Facet, ...] = Field(
        default=(), description="Other arguments: place, time, manner (name/value pairs)."
    )


class Topic(_Frozen):
    """A short key phrase saying what a message is about."""

    kind: Literal["topic"] = "topic"
    text: str = Field(description="A short noun phrase, e.g. 'adoption agencies'.")


class Tag(_Frozen):
    """A label attached to a message by the user or an importer."""

    kind: Literal["tag"] = "tag"
    text: str


Knowledge = Annotated[Entity | Action | Topic | Tag, Field(discriminator="kind")]


class SemanticRef(_Frozen):
    """One knowledge record with its provenance."""

    ref_id: int | None = Field(default=None, description="Assigned by the store.")
    conversation: str
    message_id: str
    span: Span
    knowledge: Knowledge
    extractor: str
    extractor_version: str

    @property
    def kind(self) -> KnowledgeKind:
        return self.knowledge.kind


#: Metadata keys that say where a message sits in its file, not what it says.
POSITIONAL_METADATA = frozenset({"source_line"})


class Message(_Frozen):
    """One turn of a conversation. ``id`` is unique within its conversation."""

    conversation: str
    id: str
    ordinal: int = Field(ge=0, description="Position of the message in its conversation.")
    speaker: str | None = None
    recipients: tuple[str, ...] = ()
    timestamp: datetime | None = None
    text: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    def content_hash(self) -> int:
        """A hash of what the message says: speaker, time, text, tags and metadata.

        A re-ingest compares it to find edited messages. The ordinal, the recipients and
        positional metadata (``source_line``) are left out: importers infer recipients from
        the other speakers, which change when a conversation grows, and a line added above a
        turn moves it without changing it.
        """
        payload = json.dumps(
            [
                self.speaker,
                self.timestamp.isoformat() if self.timestamp else None,
                self.text,
                list(self.tags),
                {k: v for k, v in self.metadata.items() if k not in POSITIONAL_METADATA},
            ],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        digest = hashlib.sha256(payload.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big", signed=True)  # 64 bits: a BIGINT column


class Conversation(_Frozen):
    """A named sequence of messages (a chat, a meeting, a podcast episode)."""

    id: str
    name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
