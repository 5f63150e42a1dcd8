"""The extractor contract and the metadata knowledge every extractor shares.

An extractor turns messages into semantic refs (knowledge + span), one list per message,
in order. It names itself and its version so every ref records where it came from, and
so a change of extractor settings is visible in the index.

An extractor that can fail per message (the LLM) yields :class:`ExtractedRefs`: the refs it
has for the message (at least its metadata knowledge) and an :class:`ExtractionOutcome`,
which the ingest records next to the message: a success (so a message the model found
nothing in still counts as extracted), or a failure that ``ingest --retry-failed`` redoes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from structrag.models import ROLE_FACET_NAMES as ROLE_FACET_NAMES  # re-exported
from structrag.models import Action, Entity, Message, SemanticRef, Span

Progress = Callable[[int], None]

#: Extractors read at most this many characters of a message: a message of 20 MB would
#: otherwise take minutes and gigabytes and make a million refs. The whole message is
#: stored, and every word of it stays searchable as text.
MAX_EXTRACT_CHARS = 100_000

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


@dataclass(frozen=True)
class ExtractionOutcome:
    """How extraction went for one message; ``error`` is None when it succeeded, else says
    why the message has no extracted knowledge (beyond its metadata knowledge)."""

    extractor: str
    model: str | None = None
    error: str | None = None
    attempts: int = 1

    @property
    def failed(self) -> bool:
        return self.error is not None


class ExtractedRefs(list[SemanticRef]):
    """The refs of one message, and how its extraction went."""

    def __init__(
        self, refs: Iterable[SemanticRef] = (), outcome: ExtractionOutcome | None = None
    ) -> None:
        super().__init__(refs)
        self.outcome = outcome


def outcome_of(refs: Sequence[SemanticRef]) -> ExtractionOutcome | None:
    """The outcome recorded with a message's refs, if any."""
    return refs.outcome if isinstance(refs, ExtractedRefs) else None


@runtime_checkable
class ReportsUsage(Protocol):
    """An extractor that spends something per call (tokens, requests) and says how much.

    ``usage_report`` returns running totals (numbers only); the ingest reports the
    difference over each source.
    """

    def usage_report(self) -> dict[str, int | float]: ...


@runtime_checkable
class RetriesFailures(Protocol):
    """An extractor that can redo the messages whose extraction failed earlier.

    ``failure_extractors`` names the extractors whose recorded failures it redoes (the
    hybrid extractor redoes the LLM's)."""

    failure_extractors: tuple[str, ...]


@runtime_checkable
class Estimates(Protocol):
    """An extractor that can say what extracting some messages would cost, without doing it."""

    def estimate(self, messages: Sequence[Message]) -> dict[str, Any]: ...


def start_extractor(extractor: Extractor, messages: int) -> None:
    """Let an extractor that will be given ``messages`` messages start what it runs them
    on (worker processes) now, while the caller reads its input, if it has anything to
    start (a ``start(messages)`` method)."""
    start = getattr(extractor, "start", None)
    if callable(start):
        start(messages)


def close_extractor(extractor: Extractor) -> None:
    """Stop what an extractor keeps running between calls (worker processes), if it has
    anything to stop (a ``close()`` method)."""
    close = getattr(extractor, "close", None)
    if callable(close):
        close()


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
