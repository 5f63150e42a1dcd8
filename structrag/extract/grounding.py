"""Grounding: turn an LLM's answer for a message into semantic refs with spans, and drop
what the message does not say.

Every name the LLM returns (entity names, action subjects and objects, topics) is looked up
in the message text:

1. as written, on word boundaries, with the same case when the message has it so ("May"
   the month, not "may" the verb), else case-insensitive -> the span of that occurrence;
2. as consecutive words with the same stems ("agencies" for "agency") -> their span;
3. implied: all its words occur, not next to each other; the speaker (the author of every
   message); a recipient when the message says "you"; a topic most of whose content words
   occur in the message (all of them for one or two) -> the whole-message span;
4. otherwise it is **invented**: the item is dropped and counted ("knee surgery" when the
   message only says "knee").

"I"/"me"/"we"/"us" become the speaker's name and "you" the recipient's (when there is
one), with the pronoun's span. Only a name written as a pronoun is one: "us" and "Us" are,
"US" (the country) is not; likewise only such words in the text are taken for pronouns.
An action is located at its verb (stem or irregular form), else at its first located
participant, else at the whole message when it has an implied participant; an action none
of whose parts is in the message is invented.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from structrag.analysis import INDEX_STOPWORDS, stem_words, wordset
from structrag.extract.llm_schema import ExtractedAction, ExtractedEntity, ExtractedFacet
from structrag.extract.llm_schema import MessageKnowledge as Answer
from structrag.models import Action, Entity, Facet, Message, SemanticRef, Span, Topic

_RefSink = Callable[[Entity | Action | Topic, Span], None]

_WORD = re.compile(r"\w+")
FIRST_PERSON = wordset("i me my mine myself we us our ours ourselves")
SECOND_PERSON = wordset("you your yours yourself yourselves")
_FUNCTION_WORDS = INDEX_STOPWORDS | FIRST_PERSON | SECOND_PERSON | wordset("the a an")

# Irregular verb forms (lemma -> forms) so "went" locates "go"; regular forms match by stem.
_IRREGULAR = {
    lemma: frozenset(forms.split())
    for lemma, forms in (
        ("be", "am is are was were been being 'm 're 's"),
        ("have", "has had having 've"),
        ("do", "does did done doing"),
        ("go", "goes went gone going"),
        ("say", "says said saying"),
        ("make", "makes made making"),
        ("get", "gets got gotten getting"),
        ("take", "takes took taken taking"),
        ("see", "sees saw seen seeing"),
        ("come", "comes came coming"),
        ("know", "knows knew known knowing"),
        ("think", "thinks thought thinking"),
        ("give", "gives gave given giving"),
        ("find", "finds found finding"),
        ("tell", "tells told telling"),
        ("become", "becomes became becoming"),
        ("leave", "leaves left leaving"),
        ("feel", "feels felt feeling"),
        ("bring", "brings brought bringing"),
        ("begin", "begins began begun beginning"),
        ("keep", "keeps kept keeping"),
        ("hold", "holds held holding"),
        ("write", "writes wrote written writing"),
        ("stand", "stands stood standing"),
        ("hear", "hears heard hearing"),
        ("meet", "meets met meeting"),
        ("run", "runs ran running"),
        ("pay", "pays paid paying"),
        ("sit", "sits sat sitting"),
        ("speak", "speaks spoke spoken speaking"),
        ("lose", "loses lost losing"),
        ("buy", "buys bought buying"),
        ("send", "sends sent sending"),
        ("build", "builds built building"),
        ("spend", "spends spent spending"),
        ("grow", "grows grew grown growing"),
        ("draw", "draws drew drawn drawing"),
        ("win", "wins won winning"),
        ("teach", "teaches taught teaching"),
        ("catch", "catches caught catching"),
        ("sell", "sells sold selling"),
        ("fall", "falls fell fallen falling"),
        ("eat", "eats ate eaten eating"),
        ("drink", "drinks drank drunk drinking"),
        ("drive", "drives drove driven driving"),
        ("ride", "rides rode ridden riding"),
        ("fly", "flies flew flown flying"),
        ("swim", "swims swam swum swimming"),
        ("sing", "sings sang sung singing"),
        ("read", "reads read reading"),
        ("choose", "chooses chose chosen choosing"),
        ("forget", "forgets forgot forgotten forgetting"),
        ("break", "breaks broke broken breaking"),
        ("wear", "wears wore worn wearing"),
        ("sleep", "sleeps slept sleeping"),
        ("feed", "feeds fed feeding"),
        ("lead", "leads led leading"),
        ("understand", "understands understood understanding"),
    )
}


def _pronoun_case(word: str) -> bool:
    """Whether ``word`` is written as a pronoun may be: lower case or capitalised ("us",
    "Us", "I"), not in capitals ("US", "ME")."""
    return word == word.lower() or word == word.capitalize()


def _pronoun(name: str, pronouns: frozenset[str]) -> bool:
    """Whether ``name`` is one of ``pronouns``, written as a pronoun."""
    return name.lower() in pronouns and _pronoun_case(name)


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    word: str
    low: str
    stem: str


@dataclass
class Grounded:
    """The refs kept for one message, and a description of each item dropped."""

    refs: list[SemanticRef] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)


class _Text:
    """A message's text with word offsets and stems, for lookups."""

    def __init__(self, message: Message) -> None:
        self.message = message
        self.text = message.text
        matches = list(_WORD.finditer(self.text))
        stems = stem_words(m.group().lower() for m in matches)
        self.tokens = [
            _Token(m.start(), m.end(), m.group(), m.group().lower(), s)
            for m, s in zip(matches, stems, strict=True)
        ]
        self.whole = Span(start=0, end=len(self.text))

    @cached_property
    def stems(self) -> frozenset[str]:
        return frozenset(t.stem for t in self.tokens)

    @cached_property
    def pronouns(self) -> frozenset[str]:
        """The words of the text that may be pronouns ("us", not "US")."""
        return frozenset(t.low for t in self.tokens if _pronoun_case(t.word))

    def first_pronoun(self, words: frozenset[str], prefer: str = "") -> Span | None:
        """The span of ``prefer`` used as a pronoun, else of the first of ``words``."""
        candidates = [t for t in self.tokens if t.low in words and _pronoun_case(t.word)]
        for t in sorted(candidates, key=lambda t: t.low != prefer):
            return Span(start=t.start, end=t.end)
        return None

    def locate(self, phrase: str) -> Span | None:
        """Where ``phrase`` occurs as written (the same case first) or as consecutive
        stem-equal words."""
        phrase = phrase.strip()
        if not phrase:
            return None
        pattern = r"(?<!\w)" + re.escape(phrase) + r"(?!\w)"
        found = re.search(pattern, self.text) or re.search(pattern, self.text, re.IGNORECASE)
        if found:
            return Span(start=found.start(), end=found.end())
        wanted = stem_words(w.lower() for w in _WORD.findall(phrase))
        if not wanted:
            return None
        n = len(wanted)
        for i in range(len(self.tokens) - n + 1):
            if all(self.tokens[i + j].stem == wanted[j] for j in range(n)):
                return Span(start=self.tokens[i].start, end=self.tokens[i + n - 1].end)
        return None

    def content_stems(self, phrase: str) -> list[str]:
        words = [w.lower() for w in _WORD.findall(phrase)]
        return stem_words(w for w in words if w not in _FUNCTION_WORDS)


@dataclass(frozen=True)
class _Name:
    """A resolved name: the name to store and where it is (``None`` = invented)."""

    name: str
    span: Span | None
    located: bool  # found in the text (not only implied)


def _resolve(text: _Text, raw: str) -> _Name:
    name = raw.strip()
    low = name.lower()
    message = text.message
    if _pronoun(name, FIRST_PERSON) and message.speaker:
        return _Name(message.speaker, text.first_pronoun(FIRST_PERSON, low) or text.whole, True)
    if _pronoun(name, SECOND_PERSON) and len(message.recipients) == 1:
        pronoun = text.first_pronoun(SECOND_PERSON, low) or text.whole
        return _Name(message.recipients[0], pronoun, True)
    span = text.locate(name)
    if span is not None:
        return _Name(name, span, True)
    if message.speaker and low in (message.speaker.lower(), message.speaker.split()[0].lower()):
        return _Name(name, text.first_pronoun(FIRST_PERSON) or text.whole, False)
    recipients = {r.lower() for r in message.recipients} | {
        r.split()[0].lower() for r in message.recipients if r.strip()
    }
    if low in recipients and text.pronouns & SECOND_PERSON:
        return _Name(name, text.first_pronoun(SECOND_PERSON), False)
    content = text.content_stems(name)
    if content and all(s in text.stems for s in content):
        return _Name(name, text.whole, False)
    return _Name(name, None, False)


def _verb_span(text: _Text, verbs: list[str]) -> Span | None:
    for verb in verbs:
        low = verb.lower()
        forms = _IRREGULAR.get(low, frozenset()) | {low}
        (stem,) = stem_words([low])
        for t in text.tokens:
            if t.low in forms or t.stem == stem:
                return Span(start=t.start, end=t.end)
    return None


def _facet(f: ExtractedFacet) -> Facet | None:
    if not f.name.strip():
        return None
    value = f.value.strip() if isinstance(f.value, str) else f.value
    if value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    return Facet(name=f.name.strip(), value=value, units=(f.units or None))


def _facets(items: list[ExtractedFacet]) -> tuple[Facet, ...]:
    return tuple(f for f in (_facet(i) for i in items) if f is not None)


def _types(types: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.strip().lower() for t in types if t.strip()))


def _verbs(verbs: list[str]) -> tuple[str, ...]:
    return tuple(w for v in verbs for w in v.lower().split())


def ground(message: Message, answer: Answer, *, extractor: str, version: str) -> Grounded:
    """The refs of ``answer`` that the message supports, each with a span in its text."""
    text = _Text(message)
    out = Grounded()

    def ref(knowledge: Entity | Action | Topic, span: Span) -> None:
        out.refs.append(
            SemanticRef(
                conversation=message.conversation,
                message_id=message.id,
                span=span,
                knowledge=knowledge,
                extractor=extractor,
                extractor_version=version,
            )
        )

    for entity in answer.entities:
        _entity(text, entity, ref, out)
    for action in answer.actions:
        _action(text, action, ref, out)
    for topic in dict.fromkeys(t.strip() for t in answer.topics if t.strip()):
        span = text.locate(topic)
        if span is None and _implied_topic(text, topic):
            span = text.whole
        if span is None:
            out.invented.append(f"topic {topic!r}")
            continue
        ref(Topic(text=topic), span)
    return out


def _implied_topic(text: _Text, topic: str) -> bool:
    """Whether most of the topic's content words occur in the message, all of them for a
    topic of one or two ("lake trip" is not implied by "lake", "travel to Tokyo" not by
    "Tokyo"; "family trip to Lisbon" is by "family" and "Lisbon")."""
    content = set(text.content_stems(topic))
    found = sum(1 for s in content if s in text.stems)
    return found * 2 > len(content)


def _entity(text: _Text, entity: ExtractedEntity, ref: _RefSink, out: Grounded) -> None:
    name = entity.name.strip()
    if not name:
        out.invented.append("entity with an empty name")
        return
    if _pronoun(name, FIRST_PERSON | SECOND_PERSON):
        return  # the speaker and recipients are already metadata knowledge
    resolved = _resolve(text, name)
    if resolved.span is None:
        out.invented.append(f"entity {name!r}")
        return
    ref(
        Entity(name=resolved.name, types=_types(entity.types), facets=_facets(entity.facets)),
        resolved.span,
    )


def _action(text: _Text, action: ExtractedAction, ref: _RefSink, out: Grounded) -> None:
    verbs = _verbs(action.verbs)
    label = f"action {' '.join(verbs) or '(no verb)'!r}"
    if not verbs:
        out.invented.append(label)
        return
    roles: dict[str, str | None] = {}
    located: list[Span] = []
    implied = False
    for role in ("subject", "object", "indirect_object"):
        raw = getattr(action, role)
        if raw is None or not str(raw).strip():
            roles[role] = None
            continue
        resolved = _resolve(text, str(raw))
        if resolved.span is None:
            out.invented.append(f"{label} with {role.replace('_', ' ')} {raw!r}")
            return
        roles[role] = resolved.name
        if resolved.located:
            located.append(resolved.span)
        else:
            implied = True
    span = _verb_span(text, list(verbs)) or (located[0] if located else None)
    if span is None and implied:
        span = text.whole
    if span is None:
        out.invented.append(label)
        return
    ref(
        Action(
            verbs=verbs,
            tense=action.tense,
            subject=roles["subject"],
            object=roles["object"],
            indirect_object=roles["indirect_object"],
            negated=action.negated,
            params=_facets(action.params),
        ),
        span,
    )
