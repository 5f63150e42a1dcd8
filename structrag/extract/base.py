"""The extractor contract and the metadata knowledge every extractor shares.

An extractor turns messages into semantic refs (knowledge + span), one list per message,
in order. It names itself and its version so every ref records where it came from, and
so a change of extractor settings is visible in the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from structrag.models import Action, Entity, Message, SemanticRef, Span

Progress = Callable[[int], None]

METADATA_EXTRACTOR = "metadata"
METADATA_VERSION = "1"


@runtime_checkable
class Extractor(Protocol):
    """Turns messages into knowledge. Implementations: spaCy (offline), LLM, hybrid."""

    name: str
    version: str

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        """Yield the semantic refs of each message, in the order of ``messages``."""
        ...

    def settings(self) -> dict[str, object]:
        """The settings that change what is extracted (recorded in the ingest log)."""
        ...


def metadata_knowledge(message: Message) -> list[SemanticRef]:
    """Speaker and recipients as person entities, and "speaker say (to) recipient" actions.

    These refs span the whole message: what the speaker said is the message itself.
    """
    if not message.text.strip():
        return []
    span = Span(start=0, end=len(message.text))

    def ref(knowledge: Entity | Action) -> SemanticRef:
        return SemanticRef(
            conversation=message.conversation,
            message_id=message.id,
            span=span,
            knowledge=knowledge,
            extractor=METADATA_EXTRACTOR,
            extractor_version=METADATA_VERSION,
        )

    refs: list[SemanticRef] = []
    people = ([message.speaker] if message.speaker else []) + [
        r for r in message.recipients if r != message.speaker
    ]
    refs.extend(ref(Entity(name=p, types=("person",))) for p in people)
    if message.speaker:
        if message.recipients:
            refs.extend(
                ref(
                    Action(verbs=("say",), tense="past", subject=message.speaker, indirect_object=r)
                )
                for r in message.recipients
                if r != message.speaker
            )
        else:
            refs.append(ref(Action(verbs=("say",), tense="past", subject=message.speaker)))
    return refs
