"""The schema an LLM fills for one message: entities, actions and topics.

The field descriptions come from the data model (:mod:`structrag.models`), so the model the
LLM sees and the records stored are described by the same words. The schema is lenient
where small models are sloppy in harmless ways (a string where a list belongs, a bare name
where an entity object belongs, ``"Past"`` for ``"past"``, ``"false"`` for ``false``, a
facet object instead of a list, empty or null items, extra keys) and strict where it
matters: names must be strings, and the answer must be an object holding at least one of
``entities``, ``actions`` and ``topics``. An object of another shape (the schema echoed
back, the answer wrapped in ``{"knowledge": ...}``, one entity salvaged from a cut-off
reply, ``{}``) is a validation error, so it is re-asked instead of being stored as an
answer that found nothing. The client validates in lax mode (``strict=False``), so
``"false"`` becomes ``False``.

``python -m structrag.extract.llm_schema`` prints the JSON schema; the committed copy is
``grammars/llm_extraction.schema.json`` (a test keeps them equal), usable for constrained
decoding, e.g. ``llama-server --json-schema-file grammars/llm_extraction.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from structrag.models import Action, Entity, Facet, Tense, Topic


def _doc(model: type[BaseModel], name: str) -> str:
    return model.model_fields[name].description or ""


def _as_list(value: Any) -> Any:
    """A lone string (or None) where a list belongs becomes a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return value


def _facet_list(value: Any) -> Any:
    """Facets as a list of name/value objects: one facet object becomes a list of it,
    ``{"breed": "beagle"}`` becomes ``[{"name": "breed", "value": "beagle"}]``; facets
    without a value are left out."""
    if isinstance(value, dict) and "name" in value:
        value = [value]
    elif isinstance(value, dict):
        value = [{"name": k, "value": v} for k, v in value.items()]
    value = _as_list(value)
    if isinstance(value, list):
        value = [f for f in value if not (isinstance(f, dict) and f.get("value") is None)]
    return value


def _without_nulls(value: Any) -> Any:
    """A list with its null items left out."""
    value = _as_list(value)
    if isinstance(value, list):
        value = [item for item in value if item is not None]
    return value


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ExtractedFacet(_Lenient):
    """A property of an entity or a parameter of an action, as a name/value pair."""

    name: str = Field(description=_doc(Facet, "name"))
    value: str | float | bool = Field(description=_doc(Facet, "value"))
    units: str | None = Field(default=None, description=_doc(Facet, "units"))


class ExtractedEntity(_Lenient):
    """A specific person, place, organisation, object or concept named in the message."""

    name: str = Field(
        description=_doc(Entity, "name") + " Must appear in the message (for the speaker "
        "saying 'I', use the speaker's name)."
    )
    types: list[str] = Field(default_factory=list, description=_doc(Entity, "types"))
    facets: list[ExtractedFacet] = Field(default_factory=list, description=_doc(Entity, "facets"))

    _types_list = field_validator("types", mode="before")(_without_nulls)
    _facets_list = field_validator("facets", mode="before")(_facet_list)


class ExtractedAction(_Lenient):
    """Something that happened or will happen, said in the message."""

    subject: str | None = Field(default=None, description=_doc(Action, "subject"))
    verbs: list[str] = Field(description=_doc(Action, "verbs"))
    object: str | None = Field(default=None, description=_doc(Action, "object"))
    indirect_object: str | None = Field(default=None, description=_doc(Action, "indirect_object"))
    tense: Tense = Field(default="present", description=_doc(Action, "tense"))
    negated: bool = Field(default=False, description=_doc(Action, "negated"))
    params: list[ExtractedFacet] = Field(default_factory=list, description=_doc(Action, "params"))

    _lists = field_validator("verbs", mode="before")(_without_nulls)
    _params_list = field_validator("params", mode="before")(_facet_list)

    @field_validator("tense", mode="before")
    @classmethod
    def _tense(cls, value: Any) -> Any:
        if value is None:
            return "present"
        if isinstance(value, str):
            low = value.strip().lower()
            if low.startswith("past"):
                return "past"
            if low.startswith("future"):
                return "future"
            if low.startswith("present") or not low:
                return "present"
            raise ValueError(f"tense must be past, present or future, not {value!r}")
        return value


#: The keys of an extraction answer; an object with none of them is the wrong shape.
ANSWER_KEYS = frozenset({"entities", "actions", "topics"})


class MessageKnowledge(_Lenient):
    """The knowledge in one chat message: who and what it names, what happened, and what
    it is about. Only include what the message itself says or clearly implies; leave a list
    empty when there is nothing for it."""

    entities: list[ExtractedEntity] = Field(
        default_factory=list, description="Entities named in the message."
    )
    actions: list[ExtractedAction] = Field(
        default_factory=list, description="Actions said in the message."
    )
    topics: list[str] = Field(default_factory=list, description=_doc(Topic, "text"))

    _lists = field_validator("actions", "topics", mode="before")(_without_nulls)

    @field_validator("entities", mode="before")
    @classmethod
    def _entities(cls, value: Any) -> Any:
        """A bare name where an entity object belongs becomes ``{"name": ...}``."""
        value = _without_nulls(value)
        if isinstance(value, list):
            value = [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        """An object without any of the three keys is not an answer of this shape."""
        if isinstance(value, dict) and not value.keys() & ANSWER_KEYS:
            keys = ", ".join(repr(k) for k in list(value)[:5])
            got = f"an object with the keys {keys}" if keys else "an empty object"
            raise ValueError(
                "the answer must be an object with the keys entities, actions and topics "
                f"(lists, empty when there is nothing), not {got}"
            )
        return value


def extraction_json_schema() -> dict[str, Any]:
    """The JSON schema of :class:`MessageKnowledge`."""
    return MessageKnowledge.model_json_schema()


def extraction_json_schema_text() -> str:
    """The schema as committed in ``grammars/llm_extraction.schema.json``."""
    return json.dumps(extraction_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - used to regenerate the grammars/ file
    print(extraction_json_schema_text(), end="")
