"""Statements about people found offline, with dependency patterns on spaCy's parse.

:func:`extract_statements` reads messages the way the extractor does (the shared pipeline
of :mod:`structrag.nlp`, quotes made plain and stage directions blanked without moving a
character, batched with ``nlp.pipe``) and returns, per message, the
:class:`~structrag.memory.statements.Statement` records its patterns find:

* facts: "I live in X", "I'm living in X", "I moved (back) to X" ("I've moved to X" is
  told as "moved"), "I work at/for X", "I work as a Y", "I'm a Y" (a job noun), "I study
  X at Y", "I'm a student at Y";
* personal: "I'm from X", "I grew up in X", "I'm N (years old)", "I turned N", pets ("I
  have a dog named X", "my dog X", "X is my dog", "I adopted a puppy"), "call me X", "I'm
  allergic to X" (each of a list: "to shellfish and gluten");
* relationships: "my sister/brother/wife/husband/partner/friend/mom/dad/son/daughter/
  boss/colleague X", "my sister is X", "X is my sister", "I have a sister named X", "I
  married X", "I'm dating X"; family and pets also unnamed ("my husband", "two kids");
* preferences: "I like/love/enjoy/prefer X", "I hate/dislike X", "I'm into X", "I'm a
  fan of X", "my favorite X is Y", with negation ("I don't like X" is ``likes``, negated);
* goals: "I want to X", "I'd love to X", "I'm planning to X", "I'm going to X", "my
  goal/dream is to X";
* style (how the speaker wants answers): "please keep it short", "be concise", "I prefer
  short answers", "no emojis", "don't use emojis", "use bullet points", "answer in French".

Subjects are the speaker for I/me/my, the single recipient for "you", a name as written
("Marco works at the harbour"), or a relative named by its owner ("my sister" is "Priya's
sister"). Other pronouns (he, she, we, they) resolve to nothing: a statement about nobody
in particular is not kept.

Left out on purpose, where the parse shows them: questions ("Do you live in Lisbon?";
requests of style may be questions, "Can you keep it short?"), conditionals ("if I lived
in Paris"), reported or believed speech ("she said she lives in Lisbon", "I think he
works at X"), modal hedges ("I might move to Paris"), and a fact under a wish ("I want to
live in Paris" is a goal, not where the speaker lives). Negations are kept as negated
statements. Preferences for something only the context identifies ("I love it", "I love
this song", "I love your painting") are not preferences a memory can use, so they are
left out too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from structrag.analysis import wordset
from structrag.extract.base import MAX_EXTRACT_CHARS
from structrag.memory.statements import Statement, describe, normalize
from structrag.models import Message, Tense
from structrag.nlp.lemma import lemma, lemma_tables
from structrag.nlp.names import is_name_token
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline, pipe, set_pos
from structrag.nlp.text import parse_text

if TYPE_CHECKING:
    from spacy.tokens import Doc, Token
    from spacy.tokens import Span as SpacySpan

#: Messages are parsed in pieces of at most this many characters (as the extractor does).
MAX_PIECE_CHARS = 20_000

# Confidence by pattern: an ordering from hand checks of LoCoMo samples
# (benchmarks/statement_yield.py), not calibrated probabilities. A first-person statement
# with an explicit verb is rarely wrong; "I'm going to", a bare number as an age, an
# unnamed relative or a past liking leave more room for error.
_SURE = 0.9
_LIKELY = 0.75
_MAYBE = 0.6
_WEAK = 0.5

# -- word lists --------------------------------------------------------------------------

_RELATIONS: dict[str, str] = {
    **dict.fromkeys(("sister", "brother", "sibling", "sis", "bro", "twin"), "sibling"),
    **dict.fromkeys(("wife", "husband", "spouse", "hubby"), "married_to"),
    **dict.fromkeys(
        ("partner", "boyfriend", "girlfriend", "fiance", "fiancee", "fiancé", "fiancée"),
        "partner",
    ),
    **dict.fromkeys(
        ("mom", "mum", "mother", "dad", "father", "mommy", "daddy", "mama", "papa", "parent"),
        "parent",
    ),
    **dict.fromkeys(("stepmom", "stepdad", "stepmother", "stepfather"), "parent"),
    **dict.fromkeys(
        ("son", "daughter", "kid", "child", "children", "stepson", "stepdaughter"), "child"
    ),
    **dict.fromkeys(
        wordset(
            "cousin aunt uncle niece nephew grandma grandpa grandmother grandfather granny",
            "grandparent grandson granddaughter grandchild grandkid",
        ),
        "relative",
    ),
    **dict.fromkeys(("friend", "buddy", "pal", "bestie", "bff"), "friend"),
    **dict.fromkeys(("colleague", "coworker", "co-worker", "workmate"), "colleague"),
    **dict.fromkeys(("boss", "manager", "supervisor"), "boss"),
    **dict.fromkeys(("neighbor", "neighbour"), "neighbor"),
    **dict.fromkeys(("roommate", "flatmate", "housemate"), "roommate"),
}
# Relations a person states without naming anyone ("my husband", "I have two kids"): a
# fact about the speaker's family. Unnamed friends, colleagues or parents say little.
_UNNAMED_RELATIONS = frozenset({"sibling", "partner", "married_to", "child"})
# What "we" and "our" share with the speaker: "we adopted a puppy", "our dog". Not
# children: "our kids" is as often a community's ("our kids need better schools").
_HOUSEHOLD = frozenset({"has_pet"})
# "my late husband", "my ex-wife", "my future husband": not the relation now.
_NOT_NOW = wordset("late former ex ex- future deceased dead old")
_PETS = wordset(
    "dog dogs puppy puppies pup pups cat cats kitten kittens kitty bird birds parrot",
    "parakeet budgie fish goldfish hamster hamsters rabbit rabbits bunny bunnies turtle",
    "turtles tortoise snake lizard gecko iguana ferret chinchilla hedgehog horse horses",
    "pony pet pets guinea",
)
_TOY_WORDS = wordset(
    "stuffed toy plush robot robotic cartoon wooden ceramic paper stone hot animal",
    "porcelain glass metal plastic lego statue",
)
_PLACE_NOUNS = wordset(
    "city town village country state area neighborhood neighbourhood district suburb",
    "suburbs apartment flat house condo place island coast countryside farm region county",
    "province capital street building dorm hometown village cabin mountains",
)
_ORG_NOUNS = wordset(
    "company startup start-up firm hospital clinic school university college bank",
    "restaurant cafe café bakery shop store office factory lab laboratory library hotel",
    "agency studio gym center centre nonprofit non-profit organization organisation",
    "charity magazine newspaper farm garage supermarket warehouse shelter museum",
    "airline airport station bar pub salon spa daycare kindergarten nursery church",
    "department firm corporation business",
)
# "I work at my own pace", "at the end of the day".
_NOT_WORKPLACES = wordset("pace speed level end point rate moment same least best most")
_SCHOOL_NOUNS = wordset("school university college academy institute uni conservatory")
_TIME_WORDS = wordset(
    "night nights weekend weekends morning mornings evening evenings home hours hour",
    "minutes days day weeks months years time times moment moments free living money",
    "myself yourself himself herself ourselves themselves",
)
# Nouns that name a job by themselves; most others are found by their ending (_is_job).
_JOB_NOUNS = wordset(
    "nurse chef cook doctor judge coach pilot clerk nanny maid poet author officer",
    "lawyer ceo cto cfo coo president advocate architect barista vet surgeon dentist cop",
    "detective soldier marine model athlete mentor intern attorney scholar specialist",
    "tutor principal dean priest pastor rabbi imam monk nun mayor senator governor",
    "minister secretary analyst critic guide mechanic carpenter cashier waitress",
    "bartender entrepreneur freelancer paramedic firefighter plumber electrician",
    "accountant consultant student professor veterinarian therapist counselor",
    "counsellor pharmacist technician librarian",
)
# Person nouns that say how someone relates to others, what they like or what they are
# like, not what they do for a living ("I'm a big fan", "I'm a mom", "I'm a runner").
_NOT_JOBS = wordset(
    "friend buddy pal mate bestie partner wife husband spouse boyfriend girlfriend fiance",
    "mom mother dad father parent son daughter child kid baby brother sister sibling",
    "cousin aunt uncle niece nephew grandma grandpa grandmother grandfather neighbor",
    "neighbour roommate classmate relative family member fan lover beginner winner loser",
    "dreamer believer follower supporter user reader viewer listener survivor human man",
    "woman person guy gal lady girl boy client patient customer owner newcomer foreigner",
    "stranger teenager teen adult toddler sucker reminder computer employer runner",
    "swimmer gamer hiker climber traveler traveller learner thinker doer planner",
    "worrier hugger homebody introvert extrovert perfectionist optimist pessimist",
    "morning night cat dog animal nerd geek junkie addict foodie weirdo mess wreck",
    "part fighter lifer keeper hoarder collector achiever overachiever",
)
# Adjectives before a noun that say how much, not what kind ("a big fan", "a total
# beginner"): no job; and adjectives that judge a job, not name it ("a great cook").
_EVALUATIVE = wordset(
    "big huge total complete real true natural good bad great terrible proud hopeless",
    "lifelong amazing awesome wonderful fantastic excellent decent lousy horrible awful",
    "best better worst little tiny super major massive",
)
# "a retired teacher" was one; "an aspiring writer" is not one yet.
_FORMER = wordset("retired former ex ex- onetime one-time")
_ASPIRING = wordset("aspiring wannabe would-be future prospective")
_ANSWER_NOUNS = wordset("answer answers response responses reply replies explanation")
_ANSWER_NOUNS |= wordset("explanations message messages summary summaries text texts")
_LENGTH_WORDS = wordset(
    "short shorter brief briefer concise succinct terse detailed thorough long longer",
    "verbose wordy lengthy simple simpler",
)
_TONE_WORDS = wordset("formal informal casual friendly professional polite direct blunt")
_FORMATS = wordset(
    "bullet bullets list lists table tables markdown headings headers examples example code"
)
_LANGUAGES = wordset(
    "english spanish french german portuguese italian dutch chinese mandarin cantonese",
    "japanese korean russian arabic hindi turkish polish swedish norwegian danish greek",
    "hebrew vietnamese thai indonesian ukrainian czech finnish hungarian romanian",
)
_REQUEST_VERBS = wordset("answer reply respond write talk speak explain")
# Verbs under which a clause is said, believed, wished or imagined, not stated.
_REPORTING = wordset(
    "say tell claim think believe hear read guess suppose wish imagine pretend dream",
    "wonder ask doubt hope suspect assume mention write text bet figure feel fear",
    "expect reckon heard sound seem look",
)
# "if I lived in Paris"; "sounds like you love hiking" (an impression, not a statement).
_CONDITIONAL_MARKS = wordset("if unless whether like though")
_LATER_MARKS = wordset("when whenever once until till")
_HEDGES = wordset("would could might should may must can 'd ca wo")
_MAYBE_WORDS = wordset("maybe perhaps probably possibly hopefully")
# Heads of an xcomp under which a fact still holds: "I started working at X", "I used to
# live in Y" (past), "I'm going to move to Z" (future), "I love living in Lisbon".
_FACT_XCOMP_HEADS = wordset("start begin continue keep use go love like enjoy")
# Verbs after "want to" that make talk about the conversation, not a goal ("I want to
# say thanks", "I wanted to let you know").
_DISCOURSE_VERBS = wordset(
    "say tell thank let ask share know hear see check remind apologize apologise",
    "congratulate wish mention add point update talk chat catch introduce show send give",
    "make hug be do get",
)
_GOAL_VERBS = {
    "want": "wants_to",
    "hope": "wants_to",
    "wish": "wants_to",
    "aspire": "wants_to",
    "plan": "plans_to",
    "intend": "plans_to",
    "aim": "plans_to",
    "decide": "plans_to",
}
# Verbs that make no goal alone: "join in", "try", "keep going", "see".
_LIGHT_GOALS = wordset(
    "join try come go see do help visit check attend watch read hear meet stay get have",
    "make take give play win finish move push grind continue keep start begin work",
)
# Adjectives of liking and the preposition that names what is liked.
_FOND = {
    "passionate": "about",
    "crazy": "about",
    "mad": "about",
    "interested": "in",
    "obsessed": "with",
    "fond": "of",
    "keen": "on",
}
_GOAL_NOUNS = wordset("goal goals dream dreams plan plans aim ambition mission wish hope")
_LIKE_VERBS = {
    "like": "likes",
    "love": "likes",
    "enjoy": "likes",
    "adore": "likes",
    "hate": "dislikes",
    "dislike": "dislikes",
    "detest": "dislikes",
    "loathe": "dislikes",
    "despise": "dislikes",
    "prefer": "prefers",
}
# "the" + these can be a general liking ("I love the beach"); "the" + others points at
# something in the conversation ("I love the colors").
_GENERIC_THE = wordset(
    "beach beaches ocean sea mountains outdoors rain snow sun sunshine city countryside",
    "woods forest water summer winter spring fall autumn night morning",
)
_QUESTION_AUX = wordset(
    "do does did is are was were am can could would will have has had should shall may"
)
_QUESTION_WORDS = wordset("what where when who whom whose which why how")
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_PHRASE_CUT = frozenset(
    {"relcl", "acl", "advcl", "punct", "cc", "conj", "appos", "parataxis", "ccomp", "mark"}
)
_VERBAL_CUT = frozenset({"relcl", "advcl", "punct", "cc", "conj", "parataxis", "mark"})
_DETERMINERS = wordset("a an the this that these those my your his her its our their")
# What only the conversation can tell: "I love watching them", "I'd love to try it".
# Adverbs that say when or how surely, not what: no part of a phrase.
_ASIDES = wordset("anymore again too either also now still already though lately")
_RAGGED_ENDS = frozenset({"JJ", "JJR", "RB", "CD"})
_DEICTIC = wordset("it them this that these those him her one")
_BREAKS = frozenset({"-", "--", "\u2013", "\u2014", ":", ";", "(", ")", "[", "]"})
# "allergic to X, Y and Z": the words that join a list of allergens, those before an
# allergen that are no part of it, and those that end the list (a new clause, a
# preposition: "allergic to cats since I was a kid", "to pollen in the spring").
_ALLERGEN_JOINS = wordset(
    "and or nor plus like especially particularly including mostly mainly even also"
)
_ALLERGEN_SKIP = wordset("both either basically pretty literally just all")
_ALLERGEN_STOPS = wordset(
    "so but because since though although when while if unless until as than which who",
    "that in at on for from during without after before by about into around",
    "whenever where whose etc not n't never except apart besides other",
    "with containing",
    "have has had get got need needs must carry avoid can cannot ca eat take use",
)
# What a verb the tagger misread still does when it is no allergen: an object, a
# complement ("and have to carry an EpiPen").
_VERB_ARGS = frozenset(
    {"dobj", "xcomp", "ccomp", "neg", "prt", "dative", "attr", "acomp", "oprd", "prep"}
)
_ALLERGEN_WORDS = 5
# Favorites of these are moments of the conversation, not tastes ("my favorite part").
_VAGUE_KINDS = wordset("part parts thing things moment moments memory memories one ones day bit")


# -- reading messages ----------------------------------------------------------------------


def extract_statements(
    messages: Sequence[Message], *, model: str = DEFAULT_MODEL, batch_size: int = 256
) -> list[list[Statement]]:
    """The statements each message makes, one list per message, in order.

    Texts are parsed in batches with ``nlp.pipe``; every span is an offset into
    ``message.text`` (at most :data:`~structrag.extract.base.MAX_EXTRACT_CHARS` of a
    message are read, as the extractor reads them).
    """
    nlp = load_pipeline(model, ner=False)
    pieces: list[tuple[int, int, str]] = []
    for i, message in enumerate(messages):
        pieces.extend((i, *p) for p in _pieces(message.text[:MAX_EXTRACT_CHARS]))
    found: list[list[Statement]] = [[] for _ in messages]
    docs = pipe(nlp, [p[2] for p in pieces], batch_size=batch_size)
    for (index, offset, _), doc in zip(pieces, docs, strict=True):
        set_pos(doc)
        found[index].extend(_Reader(doc, messages[index], offset).statements())
    return [_dedupe(statements) for statements in found]


#: Emoji and other pictures (with their joiners and variation selectors): blanked before
#: parsing, the same length, so that "a dog named Bruno 🐕" keeps its name.
_PICTURES = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\u200d\ufe0f]+")


def _pieces(text: str) -> list[tuple[int, str]]:
    """(offset, text to parse) for each piece of a message: the whole text when short,
    else cuts at a line or sentence end; each piece starts at its first character that is
    not white space (a parse that opens on white space mistakes the next word for a
    name)."""
    parsed = _PICTURES.sub(lambda m: " " * len(m[0]), parse_text(text))
    pieces: list[tuple[int, str]] = []
    start = 0
    while start < len(parsed):
        end = min(len(parsed), start + MAX_PIECE_CHARS)
        if end < len(parsed):
            cut = max(parsed.rfind("\n", start, end), parsed.rfind(". ", start, end))
            if cut > start + MAX_PIECE_CHARS // 2:
                end = cut + 1
        piece = parsed[start:end]
        lead = len(piece) - len(piece.lstrip())
        if lead < len(piece):
            pieces.append((start + lead, piece[lead:]))
        start = end
    return pieces


def _dedupe(statements: list[Statement]) -> list[Statement]:
    """One statement per fact in a message: the first of equal ones, and an unnamed
    relative or pet ("my sister") only when the message does not name one of that kind
    ("my sister Ana")."""
    named = {
        (s.subject.casefold(), s.predicate, (s.detail or "").casefold())
        for s in statements
        if s.detail and s.specific
    }
    seen: set[tuple[str, str, str, bool, str]] = set()
    kept: list[Statement] = []
    for s in statements:
        key = (s.subject.casefold(), s.predicate, normalize(s.object), s.negated, s.tense)
        if key in seen:
            continue
        if (
            not s.specific
            and (s.subject.casefold(), s.predicate, (s.detail or "").casefold()) in named
        ):
            continue
        seen.add(key)
        kept.append(s)
    return kept


# -- parse helpers -------------------------------------------------------------------------


def _lemma(token: Token) -> str:
    return lemma(token.text, token.tag_)


def _child(token: Token, *deps: str) -> Token | None:
    return next((c for c in token.children if c.dep_ in deps), None)


def _preps(token: Token, *words: str) -> Iterator[tuple[Token, Token]]:
    """(preposition, its object) for each prepositional child of ``token`` among ``words``."""
    for prep in token.children:
        if prep.dep_ == "prep" and prep.lower_ in words:
            pobj = _child(prep, "pobj")
            if pobj is not None:
                yield prep, pobj


def _preps_via(
    token: Token, words: tuple[str, ...], via: frozenset[str]
) -> Iterator[tuple[Token, Token]]:
    """Like _preps, and the prepositions the parse hangs on an adverb of ``via`` under
    ``token`` ("moved back to Paris": "to" under "back"; "moved back home to Paris":
    under "home", itself under "moved")."""
    yield from _preps(token, *words)
    todo = [c for c in token.children if c.dep_ in ("advmod", "npadvmod") and c.lower_ in via]
    seen: set[int] = set()
    while todo:
        adverb = todo.pop(0)
        if adverb.i in seen:
            continue
        seen.add(adverb.i)
        yield from _preps(adverb, *words)
        todo += [c for c in adverb.children if c.dep_ in ("advmod", "npadvmod") and c.lower_ in via]


#: Adverbs of a move the parse may hang its destination on: "moved back to Paris",
#: "moved back home to Paris", "moved away from London", "moved here from Lisbon".
#: What one moves along with oneself: "we moved our family to Lisbon".
_MOVED_WITH = wordset("family kids children stuff things everything belongings life house home")
_MOVE_ADVERBS = frozenset({"back", "home", "away", "abroad", "over", "down", "here", "there"})


def _prep_objects(token: Token, *words: str) -> Iterator[tuple[Token, Token]]:
    """Like _preps, the object a gerund too: "passionate about helping people"."""
    for prep in token.children:
        if prep.dep_ == "prep" and prep.lower_ in words:
            obj = _child(prep, "pobj", "pcomp")
            if obj is not None:
                yield prep, obj


def _with_conjuncts(token: Token) -> list[Token]:
    """The token and the conjuncts after it: "hiking and swimming" -> both."""
    return [token, *(c for c in token.conjuncts if c.i > token.i)]


def _is_verb(token: Token) -> bool:
    """A verb, or "like" that the tagger took for a preposition but parsed as the verb of
    its clause ("I really like chess")."""
    if token.tag_ == "IN":
        return (
            token.lower_ == "like"
            and token.dep_ in ("ROOT", "conj", "ccomp")
            and any(c.dep_ == "nsubj" for c in token.children)
            and any(c.dep_ == "dobj" for c in token.children)
        )
    if token.tag_ in ("NN", "NNP") and token.dep_ == "conj":
        # "I live in Porto and work at Acme": the small model tags the second verb a noun
        head = token.head
        return (
            token.lower_ in _NOUN_TAGGED_VERBS
            and head.tag_.startswith("VB")
            and any(c.dep_ == "prep" for c in token.children)
            and not any(c.dep_ in ("det", "poss", "amod", "compound") for c in token.children)
        )
    return token.tag_.startswith("VB") and token.dep_ not in ("aux", "auxpass")


#: Verbs of statements the tagger may take for nouns when they follow "and".
_NOUN_TAGGED_VERBS = frozenset({"work", "live", "study", "teach", "stay"})


def _auxes(verb: Token) -> list[Token]:
    """The auxiliaries of a verb, those of the verb it is joined to included when it has
    none and no subject of its own ("I'll think about it and get pets": "'ll get")."""
    own = [c for c in verb.children if c.dep_ in ("aux", "auxpass")]
    if own or verb.dep_ != "conj" or any(c.dep_ in _SUBJECT_DEPS for c in verb.children):
        return own
    return [c for c in verb.head.children if c.dep_ in ("aux", "auxpass")]


def _has_hedge(verb: Token) -> bool:
    """ "would", "might", "could"...; or "maybe", "probably" ("maybe get pets")."""
    return any(a.lower_ in _HEDGES for a in _auxes(verb) if a.dep_ == "aux") or any(
        c.dep_ == "advmod" and c.lower_ in _MAYBE_WORDS for c in verb.children
    )


def _negated(token: Token) -> bool:
    """ "don't", "not", "never", "no longer", and "no"/"none" on the object."""
    for child in token.children:
        if child.dep_ == "neg":
            return True
        if (
            child.dep_ == "advmod"
            and child.lower_ == "longer"
            and any(c.lower_ == "no" for c in child.children)
        ):
            return True
        if child.dep_ in ("dobj", "attr", "pobj") and any(
            c.dep_ == "det" and c.lower_ == "no" for c in child.children
        ):
            return True
    return False


def _chain(verb: Token) -> list[Token]:
    """The verb and the verbs it is an open complement of: "living" in "I love living"
    gives [living, love]; the heads carry the negation, tense and hedges."""
    chain = [verb]
    while chain[-1].dep_ == "xcomp" and chain[-1].head.i != chain[-1].i and len(chain) < 4:
        chain.append(chain[-1].head)
    return chain


def _tense(verb: Token) -> Tense:
    """Future with will/'ll/gonna or "going to"; past with a past form or "used to";
    present otherwise: the present perfect says what holds now ("I've lived here"), and
    so does a start ("I started working at X")."""
    for k, v in enumerate(_chain(verb)):
        aux = _auxes(v)
        if any(a.lower_ in ("will", "'ll", "shall", "wo", "gon") for a in aux):
            return "future"
        if k and v.lower_ in ("going", "gon"):
            return "future"
        if k and _lemma(v) in ("start", "begin", "keep", "continue"):
            continue
        if v.tag_ == "VBD" or any(a.tag_ == "VBD" for a in aux) or (v.tag_ == "VBN" and not aux):
            return "past"
    return "present"


def _question_start(sent: SpacySpan) -> int:
    """The first token of the part of a sentence that asks: the whole sentence for "Do you
    live in Lisbon?" or "where do you live", the tail after a comma for "I live in Lisbon,
    how about you?"; the sentence's end when it asks nothing."""
    words = [t for t in sent if not (t.is_space or t.is_punct or t.tag_ == "UH")]
    if not words:
        return sent.end
    first = words[0]
    second = words[1] if len(words) > 1 else None
    inverted = first.lower_ in _QUESTION_AUX and any(
        t.dep_ in _SUBJECT_DEPS and t.i > first.i and t.head.i == first.head.i
        for t in sent
        if t.i <= first.i + 3
    )
    wh = first.lower_ in _QUESTION_WORDS and second is not None and second.lower_ in _QUESTION_AUX
    if inverted or wh:
        return sent.start
    last = next((t for t in reversed(sent) if not t.is_space), None)
    if last is None or "?" not in last.text:
        return sent.end
    for t in reversed(sent[:-1]):
        if t.text in (",", ";", "-", "--", ":"):
            return t.i + 1
    return sent.start


def _blocked(token: Token) -> bool:
    """Whether the clause of ``token`` is conditional, reported or believed: "if I lived
    in Paris", "she said she lives in Lisbon", "I think he works at X", "I wish I had a
    dog"."""
    node = token
    for _ in range(12):
        if any(c.dep_ == "mark" and c.lower_ in _CONDITIONAL_MARKS for c in node.children):
            return True
        if node.tag_ in ("VB", "VBP", "VBZ") and any(
            c.dep_ in ("advmod", "mark") and c.lower_ in _LATER_MARKS for c in node.children
        ):
            return True  # "for when I have kids": some day, not now
        head = node.head
        if head.i == node.i:
            return False
        if node.dep_ in ("ccomp", "parataxis") and _lemma(head) in _REPORTING:
            return True
        if node.dep_ == "relcl":
            return True
        node = head
    return False


# -- the reader ----------------------------------------------------------------------------


#: Chat's asides at the end of a phrase ("sushi lol", "Google btw"): not the object's words.
_CHAT_TAGS = wordset(
    "lol lmao rofl haha hahaha hehe btw tbh imo imho omg rn jk fr ngl smh idk xd pls plz thx"
)
#: The speaker's own words for themselves, in an object as written (lower case: "Me and
#: My Friends" is a title), and what they become.
_FIRST_PERSON = re.compile(r"\b(?:my|mine|me|myself|I)\b(?![’'])")
_OWN = {"my": "{}'s", "mine": "{}'s", "myself": "themself"}
#: The word before a capital "I" that is a name's ("World War I"), not the speaker.
_TITLED = re.compile(r"[A-Z][\w-]*\s+$")


def _first_person(text: str, me: str) -> str:
    """``text`` with the speaker's words for themselves replaced by their name ("help my
    family" -> "help Priya's family"); "I've" and a capital "I" after a capitalised word
    ("World War I") stay."""

    def named(found: re.Match[str]) -> str:
        if found[0] == "I" and _TITLED.search(text, 0, found.start()):
            return found[0]
        return _OWN.get(found[0], "{}").format(me)

    return _FIRST_PERSON.sub(named, text)


class _Reader:
    """Finds the statements of one parsed piece of a message."""

    def __init__(self, doc: Doc, message: Message, offset: int) -> None:
        self.doc = doc
        self.message = message
        self.offset = offset
        # The piece as written: the parser read a copy of the same length.
        self.text = message.text[offset : offset + len(doc.text)]
        self.me = message.speaker
        self.you = message.recipients[0] if len(message.recipients) == 1 else None
        self.people = {p.lower() for p in (message.speaker, *message.recipients) if p}
        self.found: list[Statement] = []
        self.question_from = len(doc)

    def statements(self) -> list[Statement]:
        for sent in self.doc.sents:
            self.question_from = _question_start(sent)
            self._style(sent)
            for token in sent:
                if _is_verb(token):
                    self._verb(token)
                elif token.tag_ in ("NN", "NNS") and (
                    _kind(token) in _RELATIONS or _kind(token) in _PETS
                ):
                    self._kin(token)
                elif token.tag_ in ("NN", "NNS") and token.lower_ in _GOAL_NOUNS:
                    self._goal_noun(token)
                if token.lower_ == "married" or token.lower_ == "engaged":
                    self._married(token)
        return self.found

    # -- output ----------------------------------------------------------------------

    def _add(
        self,
        subject: tuple[str, list[Token]],
        predicate: str,
        obj: tuple[str, int, int],
        anchor: Iterable[Token],
        *,
        negated: bool = False,
        tense: Tense = "present",
        confidence: float = _SURE,
        detail: str | None = None,
        question_ok: bool = False,
    ) -> None:
        """Keep a statement whose words are ``subject``'s tokens, ``anchor`` (the verb
        and the like) and the object's span, unless they fall in a question."""
        name, subject_tokens = subject
        text, obj_start, obj_end = obj
        anchor = list(anchor)
        # The span covers the words that negate it: "Don't use emojis".
        tokens = [*subject_tokens, *anchor]
        tokens += [
            c
            for t in anchor
            for c in t.children
            if c.dep_ == "neg"
            or (c.dep_ == "aux" and c.i + 1 < len(self.doc) and self.doc[c.i + 1].dep_ == "neg")
        ]
        if not question_ok and self.question_from < len(self.doc):
            asked = self.doc[self.question_from].idx
            if obj_end > asked or any(t.i >= self.question_from for t in tokens):
                return
        starts = [t.idx for t in tokens] + [obj_start]
        ends = [t.idx + len(t.text) for t in tokens] + [obj_end]
        statement = Statement.make(
            name,
            predicate,
            text,
            start=self.offset + min(starts),
            end=self.offset + max(ends),
            negated=negated,
            tense=tense,
            confidence=confidence,
            detail=detail,
        )
        said = _first_person(text, self.me) if self.me else text
        if self.me and said != text:  # "help my family" is the speaker's, whoever reads it
            # The object stays as written (it is the span's words); its text names them.
            told = describe(name, predicate, said, negated=negated, tense=tense, detail=detail)
            statement = replace(statement, text=told)
        self.found.append(statement)

    # -- who --------------------------------------------------------------------------

    def _owner(self, token: Token, *, household: bool = False) -> tuple[str, list[Token]] | None:
        """Whose thing a noun is: "my" -> the speaker, "your" -> the recipient, "Ana's" ->
        Ana; the first of a list lends its owner to the rest ("my husband and kids"). A
        ``household`` thing (pets, children) of "our" is the speaker's too."""
        poss = _child(token, "poss")
        if poss is None and token.dep_ == "conj":
            poss = _child(token.head, "poss")
        if poss is None:
            return None
        if poss.lower_ in ("my", "mine") or (household and poss.lower_ == "our"):
            return (self.me, [poss]) if self.me else None
        if poss.lower_ == "your":
            return (self.you, [poss]) if self.you else None
        if self._is_person_name(poss):
            return self._name(poss), [poss]
        return None

    def _is_person_name(self, token: Token) -> bool:
        return (is_name_token(token) and token.tag_ != "NNS") or token.lower_ in self.people

    def _name(self, token: Token) -> str:
        """A name with its first names and titles: "Priya Shah", "Dr. Rao"."""
        tokens = [token]
        for child in reversed(list(token.lefts)):
            if (
                child.dep_ == "compound"
                and child.i == tokens[0].i - 1
                and (
                    self._is_person_name(child)
                    or child.text.rstrip(".").lower() in ("dr", "mr", "mrs", "ms")
                )
            ):
                tokens.insert(0, child)
        start = tokens[0].idx
        end = token.idx + len(token.text)
        return " ".join(self.text[start:end].split())

    def _named(self, token: Token) -> Token | None:
        """The name a noun stands beside: "my sister Ana", "Ana, my sister", "a dog named
        Max", "my sister, Ana,"."""
        for child in token.children:
            if child.dep_ == "appos" and self._is_person_name(child):
                return child
            if child.dep_ == "acl" and child.lower_ in ("named", "called"):
                name = _child(child, "oprd", "attr", "dobj", "npadvmod")
                if name is not None and self._is_person_name(name):
                    return name
        head = token.head
        if token.dep_ in ("appos", "compound") and self._is_person_name(head) and head.i != token.i:
            return head
        # "My best friend Sam moved": the parse may make both subjects of the verb.
        after = token.doc[token.i + 1] if token.i + 1 < len(token.doc) else None
        if (
            after is not None
            and self._is_person_name(after)
            and after.head.i in (token.i, head.i)
            and after.dep_ == token.dep_
        ):
            return after
        return None

    def _person(self, token: Token, *, household: bool = False) -> tuple[str, list[Token]] | None:
        """Who a subject is: I/me (the speaker), you (the one recipient), a name, a named
        relative ("my sister Ana" -> Ana) or an unnamed one ("my sister" -> "Priya's
        sister"). Other pronouns are nobody in particular, but for a ``household`` fact
        (pets, children) "we" are the speaker's household: "we adopted a puppy"."""
        low = token.lower_
        if token.tag_ == "PRP":
            if low in ("i", "me") or (household and low == "we"):
                return (self.me, [token]) if self.me else None
            if low == "you":
                return (self.you, [token]) if self.you else None
            return None
        if self._is_person_name(token) and _kind(token) not in _RELATIONS:
            return self._name(token), [token]
        if token.tag_ in ("NN", "NNS") and _kind(token) in _RELATIONS:
            name = self._named(token)
            if name is not None:
                return self._name(name), [token, name]
            owner = self._owner(token)
            if owner is not None and token.tag_ == "NN" and not _not_now(token):
                return f"{owner[0]}'s {low}", [*owner[1], token]
        return None

    def _subjects(self, verb: Token, *, household: bool = False) -> list[tuple[str, list[Token]]]:
        """The people a verb is said of, its subject's conjuncts included ("my husband Tom
        and I live in Boston"), the subject inherited through "want to"/"and" chains."""
        node: Token | None = verb
        subject: Token | None = None
        for _ in range(4):
            if node is None:
                break
            subject = next((c for c in node.children if c.dep_ in _SUBJECT_DEPS), None)
            if subject is not None or node.dep_ not in ("xcomp", "conj") or node.head.i == node.i:
                break
            node = node.head
        if subject is None and node is not None:
            # The tagger sometimes takes a name before its verb for an adjective ("Marco
            # lives in Lisbon": "Marco" JJ); a name of the conversation's people is one.
            before = node.doc[node.i - 1] if node.i > 0 else None
            if before is not None and before.head.i == node.i and before.lower_ in self.people:
                subject = before
        if subject is None:
            return [(self.me, [])] if self.me and node is not None and _diary(node) else []
        people = []
        for token in _with_conjuncts(subject):
            person = self._person(token, household=household)
            if person is not None:
                people.append(person)
        return people

    # -- what -------------------------------------------------------------------------

    def _phrase(
        self,
        head: Token,
        *,
        verbal: bool = False,
        max_tokens: int = 8,
        keep: frozenset[str] = frozenset(),
    ) -> tuple[str, int, int] | None:
        """The words of a phrase from its head, as written: without a leading article or
        possessive, a relative clause, a list that follows, or (for a noun) any
        preposition but "of". ``verbal`` keeps a verb's objects and prepositions ("hang
        out with friends"); ``keep`` names more dependents to keep. A verb phrase that does
        something to "it" or "them" says nothing without the conversation ("watching them
        play"), so it is no phrase."""
        cut_deps = _VERBAL_CUT if verbal else _PHRASE_CUT
        cut: set[int] = set()
        for child in head.children:
            if child.dep_ in keep:
                continue
            if child.dep_ == "advmod" and child.lower_ in _ASIDES and child.i > head.i:
                cut.update(t.i for t in child.subtree)  # "move to Berlin anymore"
            if child.dep_ in cut_deps or (
                not verbal and child.dep_ == "prep" and child.lower_ != "of"
            ):
                cut.update(t.i for t in child.subtree)
        tokens: list[Token] = []
        for token in head.subtree:
            if token.i in cut:
                if token.i > head.i:
                    break
                continue
            tokens.append(token)
        # Only the run of words around the head: a parse may hang a word from far away
        # on it ("why" in "reminded me why I wanted to join").
        at = next(k for k, t in enumerate(tokens) if t.i == head.i)
        first, last = at, at
        while first > 0 and tokens[first - 1].i == tokens[first].i - 1:
            first -= 1
        while (
            last + 1 < len(tokens)
            and tokens[last + 1].i == tokens[last].i + 1
            and not _break(tokens[last + 1])  # "new cities - check out this pic"
        ):
            last += 1
        tokens = tokens[first : last + 1]
        while tokens and (
            tokens[0].lower_ in _DETERMINERS
            or tokens[0].tag_ in ("PRP$", "DT", "POS", "TO", "WRB", "WDT")
            or tokens[0].is_punct
            or tokens[0].is_space
        ):
            tokens.pop(0)
        # Cut short, a phrase ends on a word that can end one ("helping out at future"
        # -> "helping out").
        ragged = len(tokens) > max_tokens
        tokens = tokens[:max_tokens]
        for _ in range(2):
            while tokens and (
                tokens[-1].is_punct
                or tokens[-1].is_space
                or tokens[-1].lower_ in _CHAT_TAGS
                or tokens[-1].tag_ in ("IN", "CC", "DT", "TO", "POS", "PRP$", "HYPH")
                or (ragged and tokens[-1].tag_ in _RAGGED_ENDS and tokens[-1].i != head.i)
            ):
                tokens.pop()
            # Cut inside a verb's list: "using my voice to make a change and lift" ->
            # before the "and".
            joins = [k for k, t in enumerate(tokens) if t.tag_ == "CC" and k > 1]
            if not (ragged and joins and tokens[-1].tag_.startswith("VB")):
                break
            tokens = tokens[: joins[-1]]
        if not tokens or all(t.tag_ in ("PRP", "DT", "WP", "EX") for t in tokens):
            return None
        if verbal and any(
            (t.dep_ in ("dobj", "nsubj", "nsubjpass", "pobj") and t.lower_ in _DEICTIC)
            or (t.dep_ == "det" and t.lower_ in ("this", "that", "these", "those"))
            for t in tokens
        ):
            return None  # "watching them play", "having some of these little ones around"
        start, end = tokens[0].idx, tokens[-1].idx + len(tokens[-1].text)
        while end > start and self.text[end - 1] in "-\u2013\u2014:;,":  # "the sunset-"
            end -= 1
        text = " ".join(self.text[start:end].split())
        if not any(c.isalnum() for c in text):
            return None
        return text, start, end

    def _place(self, token: Token) -> bool:
        """A place or organisation name, or a noun for a kind of place."""
        if token.lower_ in _TIME_WORDS:
            return False
        return is_name_token(token) or (
            token.tag_ in ("NN", "NNS") and token.lower_ in _PLACE_NOUNS
        )

    def _workplace(self, token: Token, prep: str = "for") -> bool:
        """An employer or a place of work: a name, an organisation ("a small startup"), or
        after "at" any place ("at the harbour", but not "at night")."""
        if token.lower_ in _TIME_WORDS or token.tag_ == "PRP":
            return False
        if is_name_token(token):
            return True
        if prep == "at" and token.tag_ in ("NN", "NNS") and token.lower_ not in _NOT_WORKPLACES:
            return True
        return token.tag_ in ("NN", "NNS") and (
            token.lower_ in _ORG_NOUNS
            or any(c.dep_ == "compound" and c.lower_ in _ORG_NOUNS for c in token.children)
        )

    # -- verbs ------------------------------------------------------------------------

    def _verb(self, verb: Token) -> None:
        word = _lemma(verb)
        if word == "be":
            self._copula(verb)
            return
        handler = {
            "live": self._live,
            "move": self._move,
            "relocate": self._move,
            "come": self._come_from,
            "grow": self._grow_up,
            "work": self._work,
            "study": self._study,
            "major": self._study,
            "have": self._have,
            "own": self._have,
            "adopt": self._have,
            "rescue": self._have,
            "get": self._have,
            "marry": self._marry,
            "date": self._date,
            "turn": self._turn,
            "call": self._call_me,
            "quit": self._quit,
            "leave": self._quit,
            "lose": self._quit,
        }.get(word)
        if handler is not None:
            handler(verb)
        if word in _LIKE_VERBS:
            self._like(verb, word)
        if word in _GOAL_VERBS or word in ("like", "love") or verb.lower_ in ("going", "gon"):
            self._goal(verb, word)

    def _fact_ok(self, verb: Token) -> bool:
        """A verb that states a fact: not hedged ("I might move"), not under a wish ("I
        want to live in Paris") or a condition or a report."""
        chain = _chain(verb)
        if any(_has_hedge(v) for v in chain) or _blocked(verb):
            return False
        return all(_lemma(v) in _FACT_XCOMP_HEADS or v.lower_ == "going" for v in chain[1:])

    def _negation(self, verb: Token) -> bool:
        return any(_negated(v) for v in _chain(verb))

    def _simple(
        self,
        verb: Token,
        predicate: str,
        words: tuple[str, ...],
        test: str,
        *,
        tense: Tense | None = None,
        confidence: float = _SURE,
        via: frozenset[str] = frozenset(),
    ) -> None:
        """``subject VERB PREP object`` with the object a place or a workplace; ``via``:
        adverbs the parse may hang the preposition on ("moved back to Paris")."""
        if not self._fact_ok(verb):
            return
        for prep, pobj in _preps_via(verb, words, via):
            for obj in _with_conjuncts(pobj):
                phrase = self._phrase(obj)
                fits = self._place(obj) if test == "place" else self._workplace(obj, prep.lower_)
                if phrase is None or not fits:
                    continue
                for subject in self._subjects(verb):
                    self._add(
                        subject,
                        predicate,
                        phrase,
                        [verb, prep],
                        negated=self._negation(verb),
                        tense=tense or _tense(verb),
                        confidence=confidence,
                    )

    def _live(self, verb: Token) -> None:
        self._simple(verb, "lives_in", ("in", "at", "on"), "place")

    def _move(self, verb: Token) -> None:
        if any(
            c.dep_ == "prt" and c.lower_ in ("on", "out", "forward", "up") for c in verb.children
        ):
            return
        if any(c.dep_ == "dobj" and c.lower_ not in _MOVED_WITH for c in verb.children):
            return  # "I moved the meeting (back) to Monday": the meeting moved
        tense = _tense(verb)
        if verb.tag_ == "VBG" and any(c.dep_ == "aux" and _lemma(c) == "be" for c in verb.children):
            tense = "future"  # "I'm moving to Lisbon": a plan
        elif (
            tense == "present"
            and verb.tag_ == "VBN"
            and any(c.dep_ == "aux" and _lemma(c) == "have" for c in _auxes(verb))
        ):
            tense = "past"  # "I've moved to Paris" says what "I moved to Paris" says
        self._simple(verb, "moved_to", ("to",), "place", tense=tense, via=_MOVE_ADVERBS)
        if tense == "past":  # "I moved from Sweden": lived there before
            self._simple(
                verb,
                "lives_in",
                ("from",),
                "place",
                tense="past",
                confidence=_MAYBE,
                via=_MOVE_ADVERBS,
            )

    def _come_from(self, verb: Token) -> None:
        if verb.tag_ in ("VBP", "VBZ"):  # "I come from X"; "I came from the gym" is no origin
            self._simple(verb, "from", ("from",), "place")

    def _grow_up(self, verb: Token) -> None:
        if any(c.dep_ == "prt" and c.lower_ == "up" for c in verb.children):
            self._simple(verb, "grew_up_in", ("in", "on"), "place")

    def _work(self, verb: Token) -> None:
        if not self._fact_ok(verb):
            return
        self._simple(verb, "works_at", ("at", "for", "in"), "work")
        for prep, pobj in _preps(verb, "as"):
            phrase = self._job_phrase(pobj)
            if phrase is None:
                continue
            for subject in self._subjects(verb):
                self._add(
                    subject,
                    "job",
                    phrase,
                    [verb, prep],
                    negated=self._negation(verb),
                    tense=_tense(verb),
                )

    def _quit(self, verb: Token) -> None:
        """ "I quit my job at Google", "I lost my job as a banker": works there, or as
        that, no more."""
        job = _child(verb, "dobj")
        if job is None or _lemma(job) != "job" or not self._fact_ok(verb):
            return
        if _tense(verb) == "future" or self._negation(verb):
            return
        subjects = self._subjects(verb)
        for prep, pobj in [*_preps(job, "at", "with", "in"), *_preps(verb, "at")]:
            phrase = self._phrase(pobj)
            if phrase is None or not self._workplace(pobj, prep.lower_):
                continue
            for subject in subjects:
                self._add(subject, "works_at", phrase, [verb, job, prep], negated=True)
        for prep, pobj in [*_preps(job, "as"), *_preps(verb, "as")]:
            role = self._job_phrase(pobj)
            if role is None:
                continue
            for subject in subjects:
                self._add(subject, "job", role, [verb, job, prep], negated=True)

    def _study(self, verb: Token) -> None:
        if not self._fact_ok(verb):
            return
        subjects = self._subjects(verb)
        negated = self._negation(verb)
        tense = _tense(verb)
        objects = [c for c in verb.children if c.dep_ == "dobj" and c.tag_ in ("NN", "NNS", "NNP")]
        objects += [p for w, p in _preps(verb, "in") if _lemma(verb) == "major"]
        for obj in objects:
            for each in _with_conjuncts(obj):
                phrase = self._phrase(each)
                if phrase is None or each.lower_ in _TIME_WORDS:
                    continue
                for subject in subjects:
                    self._add(subject, "studies", phrase, [verb], negated=negated, tense=tense)
        for prep, pobj in _preps(verb, "at"):
            if is_name_token(pobj) or pobj.lower_ in _SCHOOL_NOUNS:
                phrase = self._phrase(pobj)
                if phrase is None:
                    continue
                for subject in subjects:
                    self._add(
                        subject, "studies_at", phrase, [verb, prep], negated=negated, tense=tense
                    )

    def _have(self, verb: Token) -> None:
        """Pets and family one has: "I have a dog named Max", "we adopted a puppy", "I
        have two kids", "I have a sister named Ana"."""
        word = _lemma(verb)
        if not self._fact_ok(verb):
            return
        tense = _tense(verb)
        if word != "have":
            # Getting or adopting one means having it now, unless it is still to come.
            if tense == "future" or (verb.tag_ == "VBG" and word == "get"):
                return
            tense = "present"
        negated = self._negation(verb)
        for obj in verb.children:
            if obj.dep_ != "dobj" or obj.tag_ not in ("NN", "NNS"):
                continue
            # "a sister named Ana and a brother named Rui": the parse may hang the second
            # on the first one's name.
            listed = [t for t in obj.subtree if t.dep_ == "conj" and t.tag_ in ("NN", "NNS")]
            for each in [obj, *listed]:
                low = _kind(each)
                if low in _PETS and _not_a_pet(each):
                    continue
                if low in _PETS:
                    self._owned(verb, each, "has_pet", tense, negated)
                elif low in _RELATIONS and word in ("have", "adopt") and not _not_now(each):
                    self._owned(verb, each, _RELATIONS[low], tense, negated)

    def _owned(self, verb: Token, noun: Token, predicate: str, tense: Tense, negated: bool) -> None:
        if _child(noun, "poss") is not None:
            return  # "I have my dog with me": _kin has it
        name = self._named(noun)
        # The noun as written for an unnamed one ("two kids"), else its singular.
        detail = self.text[noun.idx : noun.idx + len(noun.text)].lower()
        if name is not None:
            detail = _kind(noun)
            phrase = self._name_phrase(name)
            confidence = _SURE
        elif predicate == "has_pet" or predicate in _UNNAMED_RELATIONS:
            phrase = self._count_phrase(noun)
            confidence = _LIKELY
        else:
            return
        household = predicate in _HOUSEHOLD
        for subject in self._subjects(verb, household=household):
            self._add(
                subject,
                predicate,
                phrase,
                [verb, noun],
                negated=negated,
                tense=tense,
                confidence=confidence,
                detail=detail,
            )

    def _name_phrase(self, token: Token) -> tuple[str, int, int]:
        name = self._name(token)
        end = token.idx + len(token.text)
        return name, end - len(name) if self.text[end - len(name) : end] == name else token.idx, end

    def _count_phrase(self, noun: Token) -> tuple[str, int, int]:
        """An unnamed pet or relative as written, with its article or number: "a dog",
        "two kids", "pets"."""
        first = noun
        for child in noun.lefts:
            if child.dep_ in ("det", "nummod", "amod", "compound") and child.lower_ not in (
                "no",
                "any",
                "the",
                "this",
                "that",
            ):
                first = child
                break
        start, end = first.idx, noun.idx + len(noun.text)
        return " ".join(self.text[start:end].split()), start, end

    def _marry(self, verb: Token) -> None:
        """ "I married Tom"."""
        if not self._fact_ok(verb):
            return
        obj = _child(verb, "dobj")
        if obj is None or not self._is_person_name(obj):
            return
        tense = _tense(verb)
        for subject in self._subjects(verb):
            self._add(
                subject,
                "married_to",
                self._name_phrase(obj),
                [verb],
                negated=self._negation(verb),
                # Marrying someone means being married to them now.
                tense="present" if tense == "past" else tense,
            )

    def _married(self, token: Token) -> None:
        """ "I'm married to Tom", "I got married to Tom", "I'm engaged to Tom"."""
        head = token.head if token.dep_ in ("acomp", "attr", "oprd", "advcl") else token
        if not (_is_verb(head) or token.i == head.i):
            return
        if not self._fact_ok(head):
            return
        predicate = "married_to" if token.lower_ == "married" else "partner"
        tense = _tense(head)
        if tense == "past" and _lemma(head) == "get":
            tense = "present"  # "I got married to Tom": married now
        for prep, pobj in _preps(token, "to"):
            if not self._is_person_name(pobj):
                continue
            for subject in self._subjects(head):
                self._add(
                    subject,
                    predicate,
                    self._name_phrase(pobj),
                    [token, prep],
                    negated=self._negation(head),
                    tense=tense,
                    detail=None if predicate == "married_to" else "fiance",
                )

    def _date(self, verb: Token) -> None:
        """ "I'm dating Tom"."""
        obj = _child(verb, "dobj")
        if obj is None or not self._is_person_name(obj) or not self._fact_ok(verb):
            return
        if verb.tag_ != "VBG":
            return
        for subject in self._subjects(verb):
            self._add(
                subject,
                "partner",
                self._name_phrase(obj),
                [verb],
                negated=self._negation(verb),
                tense=_tense(verb),
            )

    def _turn(self, verb: Token) -> None:
        """ "I turned 30", "I'm turning 40 next month"."""
        number = _child(verb, "dobj", "attr", "npadvmod", "oprd", "acomp")
        if number is None or number.tag_ != "CD" or not self._fact_ok(verb):
            return
        tense: Tense = "future" if verb.tag_ == "VBG" or _tense(verb) == "future" else "present"
        if tense == "present" and verb.dep_ == "advcl":
            tense = "past"  # "When I turned ten, ...": an age back then
        for subject in self._subjects(verb):
            self._add(
                subject,
                "age",
                (number.text, number.idx, number.idx + len(number.text)),
                [verb],
                tense=tense,
                confidence=_LIKELY,
            )

    def _call_me(self, verb: Token) -> None:
        """ "Call me Sam", "please call me Sam"."""
        obj = _child(verb, "dobj")
        name = _child(verb, "oprd", "npadvmod", "attr", "ccomp")
        if obj is None or obj.lower_ != "me" or name is None or not self.me:
            return
        if _child(verb, *_SUBJECT_DEPS) is not None or not is_name_token(name):
            return
        self._add(
            (self.me, [obj]),
            "goes_by",
            self._name_phrase(name),
            [verb],
            confidence=_LIKELY,
        )

    # -- preferences ------------------------------------------------------------------

    def _like(self, verb: Token, word: str) -> None:
        """ "I like/love/enjoy X", "I love to paint", "I hate X", "I prefer X"; "I'd love
        to X" is a goal, found by _goal."""
        if _has_hedge(verb) or _blocked(verb) or verb.dep_ in ("xcomp", "amod"):
            return
        subjects = self._subjects(verb)
        if not subjects:
            return
        tense = _tense(verb)
        if tense == "future":
            return  # "You'll love exploring the city": a prediction, not a taste
        # A past liking is an episode ("I loved the concert") unless it is a habit.
        always = any(c.lower_ in ("always", "never") for c in verb.children)
        confidence = _SURE if tense != "past" or always else _WEAK
        if tense == "past" and always:
            tense = "present"
        negated = self._negation(verb)
        phrases: list[tuple[str, int, int]] = []
        for obj in verb.children:
            between = verb.doc[min(verb.i, obj.i) + 1 : max(verb.i, obj.i)]
            if any(t.text in (":", '"') for t in between):
                continue  # 'a quote I really like: "Turn on the light"'
            if obj.dep_ == "dobj":
                if self._answers(obj, verb, subjects, negated):
                    continue
                phrases += self._liked_all(obj)
            elif obj.dep_ == "xcomp" and obj.tag_ in ("VB", "VBG"):
                if obj.tag_ == "VB" and _lemma(obj) in _DISCOURSE_VERBS | {"admit", "bother"}:
                    continue  # "I hate to say it", "I'd hate to bother you"
                phrases += [p for e in _with_conjuncts(obj) if (p := self._activity(e)) is not None]
        if not phrases:
            # The tagger misreads some objects it has not seen: "I hate cilantro" (JJ).
            stray = verb.doc[verb.i + 1] if verb.i + 1 < len(verb.doc) else None
            if (
                stray is not None
                and stray.head.i == verb.i
                and stray.dep_ in ("advmod", "npadvmod", "oprd", "acomp", "attr")
                and stray.tag_ in ("NN", "NNS", "NNP", "JJ")
                and (stray.i + 1 == len(verb.doc) or verb.doc[stray.i + 1].is_punct)
            ):
                phrases.append((stray.text, stray.idx, stray.idx + len(stray.text)))
        for phrase in phrases:
            for subject in subjects:
                self._add(
                    subject,
                    _LIKE_VERBS[word],
                    phrase,
                    [verb],
                    negated=negated,
                    tense=tense,
                    confidence=confidence,
                )

    def _liked_all(self, obj: Token) -> list[tuple[str, int, int]]:
        """What a liking is for, each of a list: "hiking and swimming" gives two, and
        "action and sci-fi movies" one (the list is of the modifiers of "movies"); a
        determiner of the first belongs to all ("the dark sky and green scenery")."""
        conjuncts = _with_conjuncts(obj)
        if (
            len(conjuncts) == 2
            and obj.tag_ == "NN"
            and conjuncts[1].tag_ == "NNS"
            and not any(c.dep_ in ("det", "amod", "compound", "poss", "nummod") for c in obj.lefts)
            and any(c.dep_ in ("amod", "compound") for c in conjuncts[1].lefts)
        ):
            whole = self._liked(conjuncts[1], det_of=obj)
            if whole is None:
                return []
            return [(" ".join(self.text[obj.idx : whole[2]].split()), obj.idx, whole[2])]
        phrases = []
        for each in conjuncts:
            phrase = self._liked(each, det_of=obj)
            if phrase is not None:
                phrases.append(phrase)
        return phrases

    def _liked(self, obj: Token, *, det_of: Token | None = None) -> tuple[str, int, int] | None:
        """What a liking is for, when the words say it without the conversation: a kind
        of thing ("live music", "hiking"), a name ("Harry Potter") or one's own ("my job"
        -> "job"); not "it", "this song", "your painting" or "the colors"."""
        if obj.tag_ in ("PRP", "DT", "WP", "EX", "CD") or obj.lower_ in ("one", "ones", "lot"):
            return None
        if obj.lower_ in self.people:  # "I love the thought, Nate!": Nate is spoken to
            return None
        if obj.tag_.startswith("VB"):
            return self._activity(obj)
        det = _child(obj, "det") or (_child(det_of, "det") if det_of is not None else None)
        if det is not None and det.lower_ in ("this", "that", "these", "those"):
            return None
        if (
            det is not None
            and det.lower_ == "the"
            and obj.lower_ not in _GENERIC_THE
            and not is_name_token(obj)
        ):
            return None
        poss = _child(obj, "poss")
        if poss is not None and poss.lower_ not in ("my",):
            return None
        if any(c.dep_ in ("relcl", "acl") for c in obj.children):
            if det is not None and det.lower_ == "the":
                return None  # "the way the frosting turned out"
            # "stories that tackle important issues": the clause says which.
            return self._phrase(obj, keep=frozenset({"relcl"}), max_tokens=10)
        return self._phrase(obj)

    def _activity(self, verb: Token) -> tuple[str, int, int] | None:
        """A liked activity as written: "hiking", "to paint", "hanging out with friends"."""
        if verb.lower_ in ("it", "that"):
            return None
        phrase = self._phrase(verb, verbal=True)
        if phrase is None:
            return None
        to = _child(verb, "aux")
        if to is not None and to.tag_ == "TO" and to.i < verb.i:
            end = phrase[2]  # "to just take a look at the sunset"
            return " ".join(self.text[to.idx : end].split()), to.idx, end
        return phrase

    def _answers(
        self, obj: Token, verb: Token, subjects: list[tuple[str, list[Token]]], negated: bool
    ) -> bool:
        """ "I prefer short answers", "I like detailed explanations": a style."""
        if obj.lower_ not in _ANSWER_NOUNS:
            return False
        for adj in obj.children:
            if adj.dep_ == "amod" and adj.lower_ in _LENGTH_WORDS | _TONE_WORDS:
                predicate = "answer_length" if adj.lower_ in _LENGTH_WORDS else "tone"
                for subject in subjects:
                    if subject[0] != self.me:
                        continue
                    self._add(
                        subject,
                        predicate,
                        (adj.text, adj.idx, adj.idx + len(adj.text)),
                        [verb, obj],
                        negated=negated,
                        confidence=_LIKELY,
                    )
        return True

    # -- goals ------------------------------------------------------------------------

    def _goal(self, verb: Token, word: str) -> None:
        """ "I want to X", "I'd love to X", "I'm planning to X", "I'm going to X"."""
        if _blocked(verb) or (verb.dep_ == "xcomp" and _lemma(verb.head) in _GOAL_VERBS):
            return
        if any(c.dep_ == "dobj" for c in verb.children):
            return  # "I want you to know"
        going = verb.lower_ in ("going", "gon")
        if going and not any(c.dep_ == "aux" and _lemma(c) == "be" for c in verb.children):
            return
        if word in ("like", "love") and not any(
            c.dep_ == "aux" and c.lower_ in ("would", "'d") for c in verb.children
        ):
            return
        predicate = "plans_to" if going else _GOAL_VERBS.get(word, "wants_to")
        confidence = _MAYBE if going else _SURE
        tense: Tense = "past" if verb.tag_ == "VBD" else "future"
        for target in verb.children:
            if target.dep_ != "xcomp" or target.tag_ != "VB":
                continue
            if _lemma(target) in _DISCOURSE_VERBS:
                continue
            to = _child(target, "aux")
            if to is None or to.tag_ != "TO":
                continue
            phrase = self._phrase(target, verbal=True, max_tokens=10)
            if phrase is None or _vague_goal(target):
                continue
            for subject in self._subjects(verb):
                self._add(
                    subject,
                    predicate,
                    phrase,
                    [verb],
                    negated=self._negation(verb),
                    tense=tense,
                    confidence=confidence,
                )

    def _goal_noun(self, noun: Token) -> None:
        """ "my goal of having a family", "my dream to open a bakery" ("my goal is to X"
        is _copula's)."""
        owner = self._owner(noun)
        if owner is None or _blocked(noun):
            return
        target = next((c for c in noun.children if c.dep_ == "acl" and c.tag_ == "VB"), None)
        for of in (c for c in noun.children if c.dep_ == "prep" and c.lower_ == "of"):
            target = target or next(
                (c for c in of.children if c.dep_ in ("pcomp", "pobj") and c.tag_ == "VBG"),
                None,
            )
        if target is None or (target.tag_ == "VB" and _child(target, "aux") is None):
            return
        phrase = self._phrase(target, verbal=True, max_tokens=10)
        if phrase is not None:
            self._add(
                owner,
                "goal",
                phrase,
                [noun],
                tense="future",
                confidence=_LIKELY,
                detail=noun.lower_.rstrip("s"),
            )

    # -- "be" -------------------------------------------------------------------------

    def _copula(self, verb: Token) -> None:
        if _has_hedge(verb) or _blocked(verb):
            return
        if verb.dep_ == "xcomp" and _lemma(verb.head) not in _FACT_XCOMP_HEADS:
            return  # "I want to be a nurse" (a goal, found by _goal)
        subject = _child(verb, *_SUBJECT_DEPS)
        if subject is None:
            return
        negated = self._negation(verb)
        tense = _tense(verb)
        # The tagger may call a name after "is" an adjective ("... is Radiohead": acomp).
        attr = _child(verb, "attr") or next(
            (
                c
                for c in verb.children
                if c.dep_ == "acomp" and (c.tag_.startswith("NN") or is_name_token(c))
            ),
            None,
        )
        if attr is not None:
            self._copula_attr(verb, subject, attr, negated, tense)
        for prep, pobj in _preps(verb, "from"):
            if any(c.lower_ in ("back", "away", "home") for c in verb.children):
                break
            origin = self._phrase(pobj) if self._place(pobj) else None
            if origin is None:
                continue
            for person in self._people(subject):
                self._add(person, "from", origin, [verb, prep], negated=negated, tense=tense)
        # "I'm into X"; "I'm passionate about X", "interested in X", "crazy about X".
        fondness = [(verb, p, o) for p, o in _prep_objects(verb, "into")]
        acomp = _child(verb, "acomp")
        if acomp is not None and acomp.lower_ in _FOND:
            fondness += [(acomp, p, o) for p, o in _prep_objects(acomp, _FOND[acomp.lower_])]
        for word, prep, obj in fondness:
            for phrase in self._liked_all(obj):
                for person in self._people(subject):
                    self._add(
                        person,
                        "likes",
                        phrase,
                        [verb, word, prep],
                        negated=negated,
                        tense=tense,
                        confidence=_LIKELY,
                    )
        if acomp is not None and acomp.lower_ == "allergic":  # "I'm allergic to peanuts"
            to = acomp.doc[acomp.i + 1] if acomp.i + 1 < len(acomp.doc) else None
            if to is not None and to.lower_ == "to":
                for what in self._allergens(to):
                    for person in self._people(subject):
                        self._add(
                            person,
                            "allergic_to",
                            what,
                            [verb, acomp, to],
                            negated=negated,
                            tense=tense,
                        )
        if acomp is not None and acomp.lower_ == "old":
            self._age(verb, subject, acomp, tense)
        # "My goal is to run a marathon"; "my dream is to open a bakery".
        xcomp = _child(verb, "xcomp")
        if xcomp is not None and subject.lower_ in _GOAL_NOUNS:
            owner = self._owner(subject)
            to = _child(xcomp, "aux")
            aim = self._phrase(xcomp, verbal=True, max_tokens=10)
            if owner is not None and aim is not None and to is not None and to.tag_ == "TO":
                self._add(
                    owner,
                    "goal",
                    aim,
                    [subject, verb],
                    negated=negated,
                    tense="future" if tense == "present" else tense,
                    detail=subject.lower_.rstrip("s") if subject.lower_ != "goals" else "goal",
                )

    def _allergens(self, to: Token) -> list[tuple[str, int, int]]:
        """What "allergic to" names, each of a list: "shellfish and gluten", "dairy,
        shellfish and tree nuts", "bee stings". Read from the words, not the parse: the
        small model takes a noun it has not seen after "to" for a verb ("to shellfish":
        an infinitive), and may hang a list's last words anywhere. The list ends at the
        next clause ("so I avoid tofu", "but I love sushi", "which sucks"), a preposition
        ("since I was a kid"), a sentence mark or an aside; an item of more than
        :data:`_ALLERGEN_WORDS` words is a clause, not an allergen, and is dropped."""
        items: list[list[Token]] = [[]]
        doc, end = to.doc, to.sent.end
        k = to.i + 1
        while k < end:
            t = doc[k]
            low = t.lower_
            item = items[-1]
            if (
                low == "as"
                and k + 2 < end
                and doc[k + 1].lower_ == "well"
                and doc[k + 2].lower_ == "as"
            ):
                items.append([])  # "peanuts as well as shellfish"
                k += 3
                continue
            if low in _ALLERGEN_JOINS or t.text in (",", "/", "&"):
                items.append([])
            elif low in _ALLERGEN_SKIP and not item:
                pass  # "to both cats and dogs", "to basically everything"
            elif (
                (t.dep_ in _SUBJECT_DEPS and item)
                or t.tag_ in ("MD", "VBZ", "VBP", "VBD", "UH", "WDT", "WP", "WRB")
                or (t.tag_.startswith("VB") and any(c.dep_ in _VERB_ARGS for c in t.children))
                or (t.tag_ in ("RB", "RBR", "RBS") and item)
                or low in _ALLERGEN_STOPS
                or low in _ASIDES
                or low in _CHAT_TAGS
                or (t.is_punct and not _inside_word(t))
                or t.is_space
            ):
                # "anything with nuts": the preposition says which things.
                if not (low in ("with", "containing") and _indefinite(item)):
                    break
                item.append(t)
            else:
                item.append(t)
            k += 1
        found = []
        for item in items:
            while item and (item[0].lower_ in _DETERMINERS or item[0].tag_ in ("DT", "PRP$")):
                item.pop(0)
            while item and (item[-1].is_punct or item[-1].tag_ in ("CC", "DT", "IN", "TO")):
                item.pop()
            if not item or len(item) > _ALLERGEN_WORDS:
                continue
            if any(t.tag_ in ("PRP", "WP", "EX") or t.lower_ in _DEICTIC for t in item):
                continue  # "allergic to it": only the conversation says what
            start, stop = item[0].idx, item[-1].idx + len(item[-1].text)
            found.append((" ".join(self.text[start:stop].split()), start, stop))
        return found

    def _favorite(
        self, verb: Token, subject: Token, attr: Token, negated: bool, tense: Tense
    ) -> bool:
        """Favorites, whichever side of "is" names the person: "my favorite food is
        pizza", "my favorite is the banana split", "painting is my favorite (hobby)",
        "ice cream is one of my favorites". True when the sentence is one of these."""
        if _is_favorite(subject):  # "my favorite (food) is X"
            holder, thing = subject, attr
        elif _is_favorite(attr):  # "X is my favorite (hobby)"
            holder, thing = attr, subject
        else:
            of = next((p for w, p in _preps(attr, "of") if attr.lower_ == "one"), None)
            if of is None or not _is_favorite(of):
                return False
            holder, thing = of, subject  # "X is one of my favorites"
        owner = self._owner(holder)
        kind = None if holder.lower_.startswith("favo") else holder.lower_
        if (
            owner is None
            or kind in _VAGUE_KINDS
            or thing.lower_ in _DEICTIC
            or any(c.dep_ == "det" and c.lower_ in _DEICTIC for c in thing.children)
        ):  # "my favorite part", "this series is one of my favorites"
            return True
        for each in _with_conjuncts(thing):
            phrase = None if each.tag_ in ("PRP", "DT", "WP") else self._phrase(each)
            if phrase is None:
                continue
            self._add(
                owner,
                "likes",
                phrase,
                [holder, verb],
                negated=negated,
                tense=tense,
                confidence=_LIKELY,
                detail=kind,
            )
        return True

    def _people(self, subject: Token) -> list[tuple[str, list[Token]]]:
        people = []
        for token in _with_conjuncts(subject):
            person = self._person(token)
            if person is not None:
                people.append(person)
        return people

    def _copula_attr(
        self, verb: Token, subject: Token, attr: Token, negated: bool, tense: Tense
    ) -> None:
        low = _kind(attr)
        if self._favorite(verb, subject, attr, negated, tense):
            return
        # "Ana is my sister", "Max is my dog", "I'm your brother".
        owner = self._owner(attr)
        if owner is not None and (low in _RELATIONS or low in _PETS) and not _not_now(attr):
            other = self._person(subject) if low not in _PETS else None
            if low in _PETS and self._is_person_name(subject):
                other = self._name(subject), [subject]
            if other is not None and other[0] != owner[0]:
                predicate = "has_pet" if low in _PETS else _RELATIONS[low]
                self._add(
                    owner,
                    predicate,
                    self._name_phrase(other[1][-1]),
                    [*other[1], verb, attr],
                    negated=negated,
                    tense=tense,
                    detail=low,
                )
            return
        # "My sister is Ana", "my sister's name is Ana", "my name is Sam".
        if self._is_person_name(attr) and attr.tag_ != "PRP":
            kin = subject
            if subject.lower_ == "name":
                poss = _child(subject, "poss")
                if poss is not None and poss.lower_ == "my" and self.me and attr.text != self.me:
                    self._add(
                        (self.me, [poss]),
                        "goes_by",
                        self._name_phrase(attr),
                        [subject, verb],
                        negated=negated,
                        confidence=_LIKELY,
                    )
                    return
                kin = poss if poss is not None else subject
            kind = _kind(kin)
            if kind in _RELATIONS or kind in _PETS:
                owner = self._owner(kin)
                if owner is not None and not _not_now(kin):
                    predicate = "has_pet" if kind in _PETS else _RELATIONS[kind]
                    self._add(
                        owner,
                        predicate,
                        self._name_phrase(attr),
                        [kin, verb],
                        negated=negated,
                        tense=tense,
                        detail=kin.lower_,
                    )
                    return
        people = self._people(subject)
        if not people:
            return
        # "I'm 34", "Marco is 34".
        if (
            attr.tag_ == "CD"
            and attr.text.isdigit()  # "I've been one", "I'm the one": no age
            and 0 < int(attr.text) < 120
            and not list(attr.children)
            and tense != "past"
        ):
            after = attr.doc[attr.i + 1] if attr.i + 1 < len(attr.doc) else None
            if after is None or not after.tag_.startswith("NN"):
                for person in people:
                    self._add(
                        person,
                        "age",
                        (attr.text, attr.idx, attr.idx + len(attr.text)),
                        [verb],
                        tense=tense,
                        confidence=_MAYBE,
                    )
            return
        # "I'm a big fan of jazz", "I'm not a fan of horror movies".
        if low == "fan":
            for prep, pobj in _preps(attr, "of"):
                for each in _with_conjuncts(pobj):
                    phrase = self._liked(each)
                    if phrase is None:
                        continue
                    for person in people:
                        self._add(
                            person,
                            "likes",
                            phrase,
                            [verb, attr, prep],
                            negated=negated,
                            tense=tense,
                            confidence=_LIKELY,
                        )
            return
        # "I'm a nurse", "Marco is a chef at the harbour", "I'm a student at UCLA".
        if _is_job(attr):
            phrase = self._job_phrase(attr)
            if phrase is None:
                return
            negated = negated or any(c.dep_ == "det" and c.lower_ == "no" for c in attr.children)
            if any(c.dep_ in ("amod", "compound") and c.lower_ in _FORMER for c in attr.children):
                tense = "past"  # "a retired teacher"
            for person in people:
                self._add(person, "job", phrase, [verb], negated=negated, tense=tense)
            student = _lemma(attr) == "student"
            for prep, pobj in _preps(attr, "at", "for", "in"):
                fits = (
                    (pobj.lower_ in _SCHOOL_NOUNS or is_name_token(pobj))
                    if student
                    else (self._workplace(pobj) and prep.lower_ != "in")
                )
                where = self._phrase(pobj) if fits else None
                if where is None:
                    continue
                for person in people:
                    self._add(
                        person,
                        "studies_at" if student else "works_at",
                        where,
                        [verb, attr, prep],
                        negated=negated,
                        tense=tense,
                        confidence=_LIKELY,
                    )

    def _age(self, verb: Token, subject: Token, old: Token, tense: Tense) -> None:
        """ "I'm 34 years old", "my son is 5 months old"."""
        unit = _child(old, "npadvmod")
        if unit is None or _lemma(unit) not in ("year", "month", "week", "day"):
            return
        number = _child(unit, "nummod")
        if number is None or number.tag_ != "CD":
            return
        if _lemma(unit) == "year":
            value = (number.text, number.idx, number.idx + len(number.text))
        else:
            start, end = number.idx, unit.idx + len(unit.text)
            value = (" ".join(self.text[start:end].split()), start, end)
        for person in self._people(subject):
            self._add(person, "age", value, [verb, old], tense=tense)

    def _job_phrase(self, head: Token) -> tuple[str, int, int] | None:
        """A job as written: "software engineer", "professor of physics"; without an
        adjective that judges ("a great cook" -> "cook")."""
        if head.tag_ not in ("NN", "NNS", "NNP"):
            return None
        first = head
        for child in reversed(list(head.lefts)):
            if child.i != first.i - 1:
                break
            if child.dep_ == "compound" or (
                child.dep_ == "amod"
                and child.lower_ not in _EVALUATIVE
                and child.lower_ not in _FORMER
                and not child.lower_.endswith("ing")  # "an inspiring writer"
            ):
                first = child
            else:
                break
        end_token = head
        for _, pobj in _preps(head, "of"):
            end_token = max(pobj.subtree, key=lambda t: t.i)
        start, end = first.idx, end_token.idx + len(end_token.text)
        end -= len(end_token.text) - len(end_token.text.rstrip("-"))  # "manager-"
        return " ".join(self.text[start:end].split()), start, end

    # -- relatives and pets by their owner ----------------------------------------------

    def _kin(self, noun: Token) -> None:
        """ "my sister Ana", "Ana, my sister", "my dog Max", and unnamed "my husband", "my
        two kids", "my dog"."""
        low = _kind(noun)
        predicate = "has_pet" if low in _PETS else _RELATIONS[low]
        owner = self._owner(noun, household=predicate in _HOUSEHOLD)
        if owner is None or _not_now(noun) or _blocked(noun) or low == "pet":
            return
        if noun.dep_ == "compound" or (predicate == "has_pet" and _not_a_pet(noun)):
            return  # "my dog food", "my stuffed dog"
        if noun.dep_ in ("attr",) and _lemma(noun.head) == "be":
            return  # "Ana is my sister": _copula_attr has it
        detail = self.text[noun.idx : noun.idx + len(noun.text)].lower()
        named = self._named(noun)
        if named is not None:
            detail = low
            for name in _with_conjuncts(named):
                if self._is_person_name(name):
                    self._add(owner, predicate, self._name_phrase(name), [noun], detail=detail)
            return
        if noun.dep_ in _SUBJECT_DEPS and _lemma(noun.head) == "be":
            attr = _child(noun.head, "attr")
            if attr is not None and self._is_person_name(attr):
                return  # "My sister is Ana": _copula_attr has it
        if predicate == "has_pet" or predicate in _UNNAMED_RELATIONS:
            self._add(
                owner,
                predicate,
                self._count_phrase(noun),
                [noun],
                confidence=_MAYBE,
                detail=detail,
            )

    # -- style ------------------------------------------------------------------------

    def _style(self, sent: SpacySpan) -> None:
        """How the speaker wants to be answered: requests ("please keep it short", "be
        concise", "can you answer in French?", "don't use emojis", "no emojis") and the
        preferences _answers finds ("I prefer short answers")."""
        if not self.me:
            return
        me: tuple[str, list[Token]] = (self.me, [])
        for token in sent:
            if (
                token.dep_ == "ROOT"
                and token.tag_.startswith("NN")
                and token.lower_
                in (
                    "emojis",
                    "emoji",
                    "emoticons",
                )
            ):
                no = next((c for c in token.lefts if c.dep_ == "det" and c.lower_ == "no"), None)
                if no is not None:
                    self._add(
                        me,
                        "emojis",
                        (token.text, token.idx, token.idx + len(token.text)),
                        [no, token],
                        negated=True,
                        confidence=_LIKELY,
                        question_ok=True,
                    )
                continue
            if not _is_verb(token) or not self._request(token):
                continue
            word = _lemma(token)
            negated = self._negation(token) or (
                token.dep_ == "xcomp" and _lemma(token.head) in ("stop", "avoid", "quit")
            )
            anchor = [token.head, token] if token.head.i < token.i else [token]
            if word == "keep" or word == "be":
                for adj in token.children:
                    if adj.dep_ in ("oprd", "acomp", "ccomp", "xcomp", "attr"):
                        self._style_word(me, anchor, adj, negated)
            elif word in ("use", "add", "include", "send"):
                for obj in token.children:
                    if obj.dep_ != "dobj":
                        continue
                    self._style_thing(me, anchor, obj, negated)
            elif word in _REQUEST_VERBS:
                for prep, pobj in _preps(token, "in"):
                    if pobj.lower_ in _LANGUAGES:
                        self._add(
                            me,
                            "answer_language",
                            (pobj.text, pobj.idx, pobj.idx + len(pobj.text)),
                            [token, prep],
                            negated=negated,
                            confidence=_LIKELY,
                            question_ok=True,
                        )

    def _request(self, verb: Token) -> bool:
        """An imperative ("Keep it short", "Please don't use emojis", "stop using emojis")
        or a request put as a question ("Can you keep it short?")."""
        head = verb
        if verb.dep_ == "xcomp" and _lemma(verb.head) in ("stop", "avoid", "quit", "try"):
            head = verb.head
        subject = _child(head, *_SUBJECT_DEPS)
        if subject is None:
            return head.tag_ == "VB" and head.dep_ in ("ROOT", "conj") and not _has_hedge(head)
        return subject.lower_ == "you" and any(
            c.dep_ == "aux" and c.lower_ in ("can", "could", "would", "will") for c in head.children
        )

    def _style_word(
        self, me: tuple[str, list[Token]], anchor: list[Token], adj: Token, negated: bool
    ) -> None:
        low = adj.lower_
        if low in _LENGTH_WORDS:
            predicate = "answer_length"
        elif low in _TONE_WORDS:
            predicate = "tone"
        else:
            return
        self._add(
            me,
            predicate,
            (adj.text, adj.idx, adj.idx + len(adj.text)),
            anchor,
            negated=negated,
            confidence=_LIKELY,
            question_ok=True,
        )

    def _style_thing(
        self, me: tuple[str, list[Token]], anchor: list[Token], obj: Token, negated: bool
    ) -> None:
        negated = negated or any(c.dep_ == "det" and c.lower_ == "no" for c in obj.children)
        low = obj.lower_
        if low in ("emojis", "emoji", "emoticons"):
            self._add(
                me,
                "emojis",
                (obj.text, obj.idx, obj.idx + len(obj.text)),
                anchor,
                negated=negated,
                confidence=_LIKELY,
                question_ok=True,
            )
        elif low == "tone":
            for adj in obj.children:
                if adj.dep_ == "amod":
                    self._style_word(me, anchor, adj, negated)
        elif low in _FORMATS or any(c.lower_ in _FORMATS for c in obj.children):
            phrase = self._phrase(obj)
            if phrase is not None:
                self._add(
                    me,
                    "speaks_style",
                    phrase,
                    anchor,
                    negated=negated,
                    confidence=_LIKELY,
                    question_ok=True,
                )


def _not_now(noun: Token) -> bool:
    """ "my late husband", "my ex-wife", "my future husband": not the relation now."""
    return any(
        c.lower_.rstrip("-") in _NOT_NOW and c.dep_ in ("amod", "compound", "nmod")
        for c in noun.children
    ) or noun.lower_.startswith("ex-")


def _is_job(noun: Token) -> bool:
    """Whether a noun names a job: a listed one ("nurse", "chef") or an agent noun by its
    ending ("teacher", "scientist", "accountant"), unless it is about how a person is,
    relates or what they like ("fan", "mom", "runner"), or comes with an adjective of
    degree ("a big reader", "a total beginner")."""
    if noun.tag_ not in ("NN", "NNS"):
        return False
    word = _lemma(noun).rstrip("-")
    last = word.rsplit("-", 1)[-1]
    if word in _NOT_JOBS or last in _NOT_JOBS:
        return False
    if any(
        c.dep_ in ("amod", "compound") and (c.lower_ in _EVALUATIVE or c.lower_ in _ASPIRING)
        for c in noun.children
    ):
        return False
    if word in _JOB_NOUNS or last in _JOB_NOUNS:
        return True
    if len(word) > 5 and word.endswith(("ist", "ian", "eer")):
        return True
    if len(word) > 5 and word.endswith(("er", "or")):
        verbs = lemma_tables()["verb"][0]
        stem = word[:-2]
        return word not in verbs and (
            stem in verbs or stem + "e" in verbs or (stem[-1] == stem[-2] and stem[:-1] in verbs)
        )
    return False


def _kind(noun: Token) -> str:
    """A relative's or pet's noun in the singular: "kids" -> "kid"."""
    # A dash glued on by the tokenizer ("manager-") is no part of the word.
    return (_lemma(noun) if noun.tag_ == "NNS" else noun.lower_).rstrip("-")


def _diary(verb: Token) -> bool:
    """A sentence whose "I" chat leaves out: it opens on an inflected verb with no
    subject ("Lost my job as a banker yesterday", "Moved to Lisbon last year"), not on an
    imperative ("Keep it up") or a verb whose subject is "it" ("Sounds great")."""
    if verb.dep_ != "ROOT" or verb.tag_ == "VBZ":
        return False
    opening = next((t for t in verb.sent if not (t.is_punct or t.is_space or t.tag_ == "UH")), None)
    return (
        opening is not None
        and opening.i == verb.i
        and verb.lower_ != lemma(verb.text, "VB")
        and verb.lower_ not in ("thanks", "glad", "sorry")
    )


def _is_favorite(token: Token) -> bool:
    """ "favorite(s)" itself, or a noun it describes ("favorite food")."""
    if token.lower_ in ("favorite", "favourite", "favorites", "favourites"):
        return True
    return token.tag_ in ("NN", "NNS") and any(
        c.dep_ == "amod" and c.lower_ in ("favorite", "favourite") for c in token.children
    )


def _not_a_pet(noun: Token) -> bool:
    """ "a stuffed animal dog", "that toy cat", "a hot dog", "that dog you gave me": not
    a pet one has, or one only the conversation identifies."""
    return any(
        (c.dep_ in ("amod", "compound") and c.lower_ in _TOY_WORDS)
        or (c.dep_ == "det" and c.lower_ in ("that", "this", "those", "these"))
        for c in noun.children
    )


def _vague_goal(verb: Token) -> bool:
    """A goal that says nothing without the conversation: a light verb with nothing after
    it ("I'd love to join in", "I'm gonna keep going"), or one done to the listener ("I
    wanted to fill you in")."""
    if any(c.dep_ in ("dobj", "dative") and c.lower_ in ("you", "ya") for c in verb.children):
        return True
    while _lemma(verb) in ("keep", "continue", "start", "begin") and (nxt := _child(verb, "xcomp")):
        verb = nxt
    args = [
        c
        for c in verb.children
        if c.dep_ not in ("aux", "neg", "prt", "advmod", "punct", "cc", "conj")
        and not (c.dep_ == "prep" and not list(c.children))  # "join in"
    ]
    return not args and _lemma(verb) in _LIGHT_GOALS


def _inside_word(token: Token) -> bool:
    """A hyphen glued to the words on both sides: "tree-nuts", "self-acceptance"."""
    doc = token.doc
    return (
        token.text in ("-", "\u2013")
        and not token.whitespace_
        and token.i > 0
        and not doc[token.i - 1].whitespace_
        and token.i + 1 < len(doc)
    )


def _indefinite(words: list[Token]) -> bool:
    """ "anything", "foods": what a following "with nuts" says more of."""
    return len(words) == 1 and words[0].lower_ in _INDEFINITE


_INDEFINITE = wordset("anything something everything food foods stuff things products")


def _break(token: Token) -> bool:
    """A dash, colon or bracket that ends a phrase: "new cities - check this out", "the
    sunset- it reminds me"; not the hyphen inside "self-acceptance"."""
    if token.text not in _BREAKS:
        return False
    spaced_before = token.i > 0 and bool(token.doc[token.i - 1].whitespace_)
    return spaced_before or bool(token.whitespace_) or token.text not in ("-", "\u2013")
