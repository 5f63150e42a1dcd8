"""Natural-language questions -> query expressions, offline, with spaCy.

The translator reads the question's parse: the question type (who / when / where / what /
how many / list ...), the people it names (matched against the conversation's speakers,
first names included), other proper names, the main verb with its subject and object,
the content noun phrases, and time expressions ("in May 2023", "last week",
"3 days ago", "yesterday"). It returns an AST, which the user sees as a query
expression, e.g. ``What did Kevin tell Satya about AI models last May?`` becomes
``action(Kevin, tell, *, Satya) "AI models" AND when:"last May"``. Vague words such as
"recently" are left as words: in a question they rarely mean the last days of the history.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from structrag.analysis import fold_accents, has_cjk, term_key, wordset
from structrag.nlp.lemma import is_known_word, is_verb_word, lemma
from structrag.nlp.names import is_name_token
from structrag.nlp.pipeline import DEFAULT_MODEL, parse
from structrag.query import ast
from structrag.query.question import Translation, question_kind
from structrag.query.timeexpr import MONTHS, NUMERIC_DATE, SEASONS, understood

if TYPE_CHECKING:
    from spacy.tokens import Token

_MONTHS = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUMBER = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of)"
_SEASONS = "|".join(SEASONS)
#: Seasons read without a year: not "fall" ("hurt in the fall", "this fall apart").
_BARE_SEASONS = "|".join(s for s in SEASONS if s != "fall")
#: What may follow a season read as a time: the question's end, punctuation or a word
#: that starts another part ("in the spring rolls", "this summer camp" are things).
_NO_NOUN_AFTER = (
    r"(?=\s*(?:$|[?.!,;:)]|(?:and|or|but|of|in|on|at|to|with|for|from|when|while|before|"
    r"after|did|does|do|was|were|is|are|has|have|had|will|would|could)\b))"
)
#: One end of a directed phrase or a range ("after March 2024", "between May 1 and May 9").
_POINT = "|".join(
    [
        rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?",
        rf"(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?",
        rf"(?:{_MONTHS})\.?,?\s+(?:of\s+)?\d{{4}}",
        r"\d{4}-\d{1,2}(?:-\d{1,2})?",
        NUMERIC_DATE,
        rf"(?:{_SEASONS})\s+(?:of\s+)?\d{{4}}",
        rf"(?:last|this)\s+(?:week|month|year|{_MONTHS}|{_BARE_SEASONS}|fall)",
        r"today|yesterday",
        r"\d{4}",
        rf"(?:{_MONTHS})",
    ]
)
_TIME_PATTERNS = [
    rf"\b(?:from|between)\s+(?:the\s+)?(?:{_POINT})\s+(?:to|and|until|till|through)\s+"
    rf"(?:the\s+)?(?:{_POINT})\b",
    rf"\b(?:before|prior to|after|since|until|till|through)\s+(?:the\s+)?(?:{_POINT})\b",
    rf"\b(?:in|during|on)?\s*(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?,?\s+\d{{4}}\b",
    rf"\b(?:in|during|on)?\s*(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b",
    rf"\b(?:in|during)?\s*(?:{_MONTHS})\.?,?\s+(?:of\s+)?\d{{4}}\b",
    rf"\b(?:last|this|in|during)\s+(?:{_MONTHS})\b",
    rf"\b(?:in|during)?\s*(?:the\s+)?(?:{_SEASONS})\s+(?:of\s+)?\d{{4}}\b",
    rf"\b(?:last|this past|this|in|during)\s+(?:the\s+)?(?:{_BARE_SEASONS})\b{_NO_NOUN_AFTER}",
    rf"\blast\s+fall\b{_NO_NOUN_AFTER}",
    rf"\b(?:on\s+)?{NUMERIC_DATE}\b",
    r"\b(?:last|this)\s+(?:week|month|year)\b",
    r"\bthe\s+(?:previous|week before|day before yesterday)\b",
    rf"\b{_NUMBER}\s+(?:days?|weeks?|months?|years?)\s+ago\b",
    r"\b(?:yesterday|today)\b",
    r"\bin\s+\d{4}\b",
    r"\b(?:on\s+|in\s+)?\d{4}-\d{1,2}(?:-\d{1,2})?\b",
    rf"\bon\s+(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?![,\s]*\d)",
    rf"\bon\s+(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?![,\s]*\d)",
    rf"\b(?:in|during|over|within)\s+the\s+(?:last|past)\s+(?:{_NUMBER}\s+)?"
    r"(?:days?|weeks?|months?|years?)\b",
]
_TIME_RE = re.compile("|".join(f"(?:{p})" for p in _TIME_PATTERNS), re.IGNORECASE)
_WH = {"who", "whom", "whose", "what", "when", "where", "why", "how", "which"}
_LIGHT = {"be", "do", "have", "get", "go", "make", "happen", "think", "know", "say", "like"}
_TELLING = {"tell", "say", "ask", "show", "give", "send", "teach", "write", "text", "email"}
_GENERIC = {
    "thing",
    "things",
    "kind",
    "kinds",
    "type",
    "types",
    "way",
    "ways",
    "time",
    "times",
    "anything",
    "something",
    "everything",
    "lot",
    "one",
    "ones",
    "stuff",
    "part",
}


# Runs of symbols (emoji, punctuation) and very long "words": spaCy's tokenizer splits them
# one character at a time, in time that grows with the square of their length.
_SYMBOL_RUN = re.compile(r"[^\w\s]{4,}")
_LONG_WORD = re.compile(r"\S{40}")


#: "two weeks before", "the Sunday before", "the weekend after": the date places an event
#: said in some message, not the messages to read.
_EVENT_BEFORE = re.compile(
    r"(?:\b(?:days?|weeks?|months?|years?|weekend|night|morning|evening|afternoon|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|\bday)\s*$",
    re.IGNORECASE,
)
_DIRECTION_WORD = re.compile(
    r"(?:before|prior to|after|since|until|till|through)\s+(?:the\s+)?", re.IGNORECASE
)


def _undirected(m: re.Match[str], text: str) -> tuple[int, int]:
    """A found phrase's span; a directed one that follows a span of time or a day ("two
    weeks before August 11, 2023") is the date alone."""
    start, end = m.span()
    direction = _DIRECTION_WORD.match(text, start)
    if direction and _EVENT_BEFORE.search(text[:start]):
        return direction.end(), end
    return start, end


#: Words after "may" that make it the verb ("this may be too expensive", "it may not").
_AFTER_MODAL = wordset(
    "be have not also still never just even well only actually already really cost take",
    "need help work make get go come seem look mean change happen become want",
)


def _a_time(phrase: str, after: str = "") -> bool:
    """Whether a phrase the patterns found is a time: understood, and not the modal verb
    "may" ("this may be too expensive": lower case, a verb after it; "in may" is May)."""
    following = after.split()[:1]
    if (
        re.search(r"\bmay$", phrase.strip())
        and following
        and following[0].lower().strip(".,!?") in _AFTER_MODAL
    ):
        return False
    return understood(phrase.strip())


def tame(question: str) -> str:
    """The question as the parser reads it: runs of four or more symbols (emoji, ``?!?!``)
    become one space and words of 40 characters or more are cut, which keeps parsing time
    linear in the question's length; they carry nothing a query could match."""
    text = _SYMBOL_RUN.sub(" ", question)
    return _LONG_WORD.sub(lambda m: m.group(0) + " ", text)


class SpacyTranslator:
    """Question -> :class:`Translation` with the same spaCy pipeline as the extractor."""

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model

    def translate(self, question: str, speakers: Sequence[str]) -> Translation:
        text = tame(question.strip())
        found = [_undirected(m, text) for m in _TIME_RE.finditer(text)]
        found = [(start, end) for start, end in found if _a_time(text[start:end], text[end:])]
        time_phrases = [text[start:end].strip() for start, end in found]
        rest = text
        for start, end in reversed(found):  # the phrases out, the words around them kept
            rest = f"{rest[:start]} {rest[end:]}"
        doc = parse(rest, model=self.model)
        kind = question_kind([t.text for t in doc])
        speaker_keys = _speaker_keys(speakers)
        people: list[str] = []
        names: list[str] = []
        name_tokens: set[int] = set()
        run: list[str] = []
        run_ids: list[int] = []
        for token in [*doc, None]:
            if token is not None and is_name_token(token) and token.lower_ not in _WH:
                run.append(token.text)
                run_ids.append(token.i)
                continue
            if run:
                name = " ".join(run)
                person = _speaker_for(name, speaker_keys, speakers)
                if person:
                    if person not in people:
                        people.append(person)
                elif name not in names:
                    names.append(name)
                name_tokens.update(run_ids)
                run, run_ids = [], []
        for token in doc:
            # A speaker's name written in lower case, or with a possessive s and no
            # apostrophe ("who is lenas team lead?", "kemals mom"): informal questions.
            if (
                token.i not in name_tokens
                and token.is_alpha
                and token.tag_.startswith(("NN", "JJ"))
                and not token.text[:1].isupper()
                and len(token.text) > 2
            ):
                person = speaker_keys.get(_key(token.text))
                if person:
                    if person not in people:
                        people.append(person)
                    name_tokens.add(token.i)
            elif (
                # a speaker's capitalised name the tagger took for something else ("What
                # will Zoë bring?": a pronoun)
                token.i not in name_tokens
                and token.i > 0
                and token.is_alpha
                and token.text[:1].isupper()
                and (person := speaker_keys.get(_key(token.text)))
            ):
                if person not in people:
                    people.append(person)
                name_tokens.add(token.i)
        if has_cjk(text):
            # Chinese and Japanese have no spaces for a name to stand between: a speaker
            # whose name the question holds ("李明喜欢吃什么") is named.
            for speaker in speakers:
                if has_cjk(speaker) and speaker in text and speaker not in people:
                    people.append(speaker)
        items: list[ast.Node] = []
        action, verb_token = _action(doc, people, names, name_tokens)
        if action is not None:
            items.append(action)
        for name in names:
            items.append(ast.EntityPattern(name=name))
        skip = (
            {verb_token} if action is not None and action.verb and verb_token is not None else set()
        )
        category = _asked_category(doc)
        marked = False
        for phrase in _noun_phrases(doc, name_tokens, skip):
            kinds = category is not None and phrase.split()[-1] == category.text
            marked = marked or kinds
            items.append(ast.Term(phrase, phrase=" " in phrase, kinds=kinds))
        if category is not None and not marked and category.is_alpha:
            words = [
                t.text
                for t in category.lefts
                if t.dep_ in ("amod", "compound") and t.is_alpha and t.i == category.i - 1
            ]
            text = " ".join([*words, category.text])
            items.append(ast.Term(text, phrase=" " in text, kinds=True))
        if not items:
            for person in people:
                items.append(ast.EntityPattern(name=person))
        if not items:
            words = [t.text for t in doc if t.is_alpha and not t.is_stop]
            items.extend(ast.Term(w) for w in words[:8])
        body: ast.Node = items[0] if len(items) == 1 else ast.Or(tuple(items))
        if time_phrases:
            scopes = tuple(ast.TimeScope(None, None, p, "when") for p in time_phrases)
            body = (
                ast.And((body, *scopes))
                if items
                else (scopes[0] if len(scopes) == 1 else ast.And(scopes))
            )
        relations = []
        for token in doc:
            if token.dep_ == "poss" and token.i in name_tokens and token.head.tag_ in ("NN", "NNS"):
                owner = _role_text(token, people, name_tokens) or token.text
                head = token.head
                between = [c for c in head.children if c.dep_ == "compound" and c.i > token.i]
                if between and head.dep_ == "ROOT" and any(c.tag_ == "VBZ" for c in head.lefts):
                    # "Where does Marco's cousin work?": the tagger made "work" a noun
                    # with "cousin" before it; the question is about the cousin
                    head = between[0]
                noun = lemma(head.text, head.tag_)
                if noun in JOB_WORDS:
                    body = _with(body, _job_pattern(owner))
                else:
                    relations.append((owner, noun))
        asked = _job_question(doc, people, name_tokens)
        if asked:
            body = _with(body, _job_pattern(asked))
        return Translation(
            query=body,
            people=people,
            kind=kind,
            time_phrases=time_phrases,
            relations=relations,
            unknown=_unknown_words(doc, name_tokens),
        )


def _unknown_words(doc: object, name_tokens: set[int]) -> list[str]:
    """Lower-case words (the first may be capitalised) of four letters or more that are no
    known English word nor a name: likely typos, which the query lets match the words one
    edit away."""
    from spacy.lang.en.stop_words import STOP_WORDS
    from spacy.tokens import Doc

    assert isinstance(doc, Doc)
    return [
        t.text
        for t in doc
        if t.is_alpha
        and (t.text.islower() or (t.i == 0 and t.text[1:].islower()))
        and len(t.text) >= 4
        and t.i not in name_tokens
        and t.lower_ not in STOP_WORDS
        and not is_known_word(t.text, t.tag_)
    ]


#: Nouns that name a kind of something: "what kind of art" asks for kinds of art.
_KIND_NOUNS = frozenset({"kind", "kinds", "type", "types", "sort", "sorts", "form", "forms"})


def _asked_category(doc: object) -> Token | None:
    """The noun naming what a question asks for, when it asks for things of a category:
    "What *sports* does John like?", "Which *cities* ...", "What kind of *art* ...", "How
    many *children* ...", "What are Joanna's *hobbies*?". The answer names kinds of it
    (taekwondo for martial arts), so the query looks for those too (``kind:``)."""
    from spacy.tokens import Doc

    assert isinstance(doc, Doc)
    noun = None
    for token in doc:
        head = token.head
        if token.lower_ in ("what", "which") and token.dep_ == "det" and head.tag_.startswith("NN"):
            noun = head
        elif token.lower_ == "many" and token.dep_ == "amod" and head.tag_.startswith("NN"):
            if any(c.lower_ == "how" for c in token.children) or (
                token.i > 0 and doc[token.i - 1].lower_ == "how"
            ):
                noun = head
        elif (
            token.lower_ in ("what", "which")
            and token.dep_ in ("attr", "nsubj")
            and head.lemma_ in ("be", "")
            and head.tag_.startswith("VB")
        ):
            # "What are Joanna's hobbies?": the other side of "be", when it is plural.
            noun = next(
                (
                    c
                    for c in head.children
                    if c.dep_ in ("nsubj", "attr") and c.i != token.i and c.tag_ == "NNS"
                ),
                None,
            )
        if noun is not None:
            break
    if noun is None and len(doc) > 1 and doc[0].lower_ in ("what", "which"):
        # The parser sometimes misreads the determiner ("What Turkish dishes come up?"
        # with "What" as an object): the last noun of the words right after it.
        run = []
        for token in doc[1:]:
            if not token.tag_.startswith(("NN", "JJ")):
                break
            run.append(token)
        nouns = [t for t in run if t.tag_.startswith("NN")]
        noun = nouns[-1] if nouns and run[-1] is nouns[-1] else None
    if noun is not None and noun.lower_ in _KIND_NOUNS:
        of = next((c for c in noun.children if c.dep_ == "prep" and c.lower_ == "of"), None)
        inner = next((c for c in of.children if c.dep_ == "pobj"), None) if of else None
        noun = inner if inner is not None and inner.tag_.startswith("NN") else None
    return noun


#: Nouns that ask for a person's job: "What is Kevin Scott's job?", "... Ana's role?"
JOB_WORDS = frozenset({"job", "role", "occupation", "profession", "career", "position", "work"})
_FOR_A_LIVING = re.compile(r"\bfor (?:a )?(?:living|work)\b", re.IGNORECASE)


def _job_pattern(person: str) -> ast.EntityPattern:
    """The entity pattern of a person's job facet (the extractor records stated jobs)."""
    return ast.EntityPattern(name=person, facets=(ast.FacetCondition("job", None),))


def _with(body: ast.Node, item: ast.Node) -> ast.Node:
    """``body`` with one more item in its group (scopes joined by AND stay outside)."""
    if isinstance(body, ast.And) and body.items:
        return ast.And((_with(body.items[0], item), *body.items[1:]))
    if isinstance(body, ast.Or) and not body.explicit:
        return ast.Or((*body.items, item))
    return ast.Or((body, item))


def _job_question(doc: object, people: list[str], name_tokens: set[int]) -> str | None:
    """Whose job a question asks about: "What does Ana do for a living?", "What does Ana
    work as?"; None for other questions."""
    from spacy.tokens import Doc

    assert isinstance(doc, Doc)
    text = doc.text
    for verb in doc:
        if not verb.tag_.startswith("VB"):
            continue
        base = lemma(verb.text, verb.tag_)
        asks = (base == "do" and _FOR_A_LIVING.search(text)) or (
            base == "work" and any(c.lower_ == "as" for c in verb.children)
        )
        if not asks:
            continue
        subject = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subject is not None:
            return _role_text(subject, people, name_tokens)
    return None


#: Titles before a speaker's first name ("Dr. Amara Okafor" is asked about as Amara).
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "miss", "prof", "sir", "dame", "rev"})


def _key(name: str) -> str:
    return fold_accents(term_key(name))


def _first_name(speaker: str) -> str:
    words = speaker.split()
    while len(words) > 1 and words[0].lower().rstrip(".") in _TITLES:
        words = words[1:]
    return words[0]


def _speaker_for(name: str, keys: dict[str, str], speakers: Sequence[str]) -> str | None:
    """The speaker a name refers to: full name, first name (after a title: "Amara" for
    "Dr. Amara Okafor"), or a unique short form of a first name ("Mel" for Melanie);
    accents aside ("Zoe" for Zoë)."""
    name = _first_name(name) if name.split()[0].lower().rstrip(".") in _TITLES else name
    found = keys.get(_key(name)) or keys.get(_key(name.split()[0]))
    if found or len(name) < 3 or " " in name:
        return found
    low = fold_accents(name.lower())
    matches = [s for s in speakers if fold_accents(_first_name(s).lower()).startswith(low)]
    return matches[0] if len(matches) == 1 else None


def _speaker_keys(speakers: Sequence[str]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for speaker in speakers:
        keys[_key(speaker)] = speaker
        keys.setdefault(_key(_first_name(speaker)), speaker)
    # a title and a family name ("Dr. Okafor"): the family name, when one speaker has it
    family: dict[str, list[str]] = {}
    for speaker in speakers:
        words = speaker.split()
        if len(words) > 1 and words[0].lower().rstrip(".") in _TITLES:
            family.setdefault(_key(words[-1]), []).append(speaker)
    for key, owners in family.items():
        if len(owners) == 1:
            keys.setdefault(key, owners[0])
    return keys


def _role_text(token: object, people: list[str], name_tokens: set[int]) -> str | None:
    from spacy.tokens import Token

    assert isinstance(token, Token)
    if token.lower_ in _WH or token.tag_ in ("WP", "WDT", "WRB"):
        return None
    if token.tag_ in ("PRP", "PRP$"):
        return None
    if token.i in name_tokens:
        span = [t for t in token.subtree if t.i in name_tokens]
        name = " ".join(t.text for t in span) or token.text
        for person in people:
            if _key(_first_name(person)) == _key(name.split()[0]) or _key(person) == _key(name):
                return person
        return name
    if token.tag_.startswith("NN"):
        inside = [t for t in token.subtree if t.i <= token.i]
        for t in inside:
            if t.i in name_tokens and t.dep_ in ("poss", "compound"):
                # "Caroline's identity", "Caroline research": the action is Caroline's.
                owner = " ".join(x.text for x in t.subtree if x.i in name_tokens)
                for person in people:
                    if term_key(person.split()[0]) == term_key(owner.split()[0]):
                        return person
                return owner
        words = [t.text for t in inside if not t.is_stop and t.is_alpha and t.i not in name_tokens][
            -3:
        ]
        phrase = " ".join(words)
        return phrase if phrase and phrase.lower() not in _GENERIC else None
    return None


def _action(
    doc: object, people: list[str], names: list[str], name_tokens: set[int]
) -> tuple[ast.ActionPattern | None, int | None]:
    from spacy.tokens import Doc

    assert isinstance(doc, Doc)
    verbs = [
        t
        for t in doc
        if t.tag_.startswith("VB")
        and t.dep_ not in ("aux", "auxpass")
        and is_verb_word(t.lower_)
        and t.lower_ != "s"
    ]
    if not verbs:
        return None, None
    main = next((v for v in verbs if lemma(v.text, v.tag_) not in _LIGHT), verbs[0])
    verb = lemma(main.text, main.tag_)
    subject = obj = indirect = None
    for child in main.children:
        if child.dep_ in ("nsubj", "nsubjpass") and subject is None:
            subject = _role_text(child, people, name_tokens)
        elif child.dep_ in ("dobj", "attr") and obj is None:
            obj = _role_text(child, people, name_tokens)
        elif child.dep_ == "dative" and indirect is None:
            indirect = _role_text(child, people, name_tokens)
        elif child.dep_ == "prep" and child.lower_ in ("to", "with") and indirect is None:
            pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
            if pobj is not None and pobj.i in name_tokens:
                indirect = _role_text(pobj, people, name_tokens)
    if verb in _TELLING and indirect is None and obj in people:
        obj, indirect = None, obj  # "tell Satya": the person told is the indirect object
    if subject is None and obj is None and indirect is None:
        return None, None
    if verb in _LIGHT and obj is None and indirect is None:
        # "What did Kevin say?": every message of Kevin's says something; the speaker
        # preference covers it, and a subject-only pattern would match them all.
        return None, None
    return ast.ActionPattern(subject, verb, obj, indirect), main.i


def _noun_phrases(doc: object, name_tokens: set[int], skip: set[int]) -> list[str]:
    from spacy.lang.en.stop_words import STOP_WORDS
    from spacy.tokens import Doc

    assert isinstance(doc, Doc)
    phrases: list[str] = []
    for chunk in doc.noun_chunks:
        words = [
            t
            for t in chunk
            if t.i not in name_tokens
            and t.lower_ not in STOP_WORDS
            and t.is_alpha
            and t.tag_ not in ("WP", "WDT", "PRP", "PRP$")
        ]
        if not words:
            continue
        phrase = " ".join(t.text for t in words)
        if phrase.lower() in _GENERIC:
            continue
        if phrase not in phrases:
            phrases.append(phrase)
    # verbs and adjectives that carry meaning ("paint", "favorite") as single terms
    for token in doc:
        if token.i in name_tokens or token.lower_ in STOP_WORDS or not token.is_alpha:
            continue
        if len(token.text) < 2:  # "s" of "whats" (what's)
            continue
        if token.i in skip:
            continue
        if token.tag_.startswith(("VB", "JJ")) and lemma(token.text, token.tag_) not in _LIGHT:
            word = token.text
            if not any(word in p.split() for p in phrases):
                phrases.append(word)
    return phrases
