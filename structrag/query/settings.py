"""Named scoring settings. Every weight and limit the ranker uses lives here, documented.

The defaults were chosen on LoCoMo's five development conversations with
leave-one-conversation-out checks (``structrag bench loo``), and are meant to be robust
rather than tuned to the last digit. The README's "How results are ranked" table lists
them.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any

#: Settings whose values are bounded above too (shares and cosine thresholds), or below
#: by more than 0 (a divisor); every other number is 0 or more.
_BOUNDS: dict[str, tuple[float, float | None]] = {
    "b": (0.0, 1.0),
    "fuzzy_threshold": (0.0, 1.0),
    "knowledge_share": (0.0, 1.0),
    "fill_tokens_per_message": (1.0, None),
}


def check_setting(name: str, value: Any, kind: Any) -> None:
    """Raise :class:`~structrag.errors.ConfigError` when ``value`` is not a possible value
    of the ranking setting ``name`` of type ``kind`` (``"float"``, ``"int"``, ``"bool"``):
    of another type (``True`` is no number), not finite, or out of its range."""
    from structrag.errors import ConfigError

    kind = getattr(kind, "__name__", kind)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"ranking setting {name} takes true or false, not {value!r}")
        return
    if kind not in ("int", "float"):
        return
    number = isinstance(value, numbers.Real if kind == "float" else numbers.Integral)
    if isinstance(value, bool) or not number:  # numpy's numbers are numbers too
        what = "a whole number" if kind == "int" else "a number"
        raise ConfigError(f"ranking setting {name} takes {what}, not {value!r}")
    low, high = _BOUNDS.get(name, (0.0, None))
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite or value < low or (high is not None and value > high):
        bounds = f"from {low:g} to {high:g}" if high is not None else f"{low:g} or more"
        raise ConfigError(
            f"ranking setting {name} must be {bounds}, not {value!r}",
            hint=f"the default is {getattr(DEFAULT_SETTINGS, name)!r}"
            if hasattr(DEFAULT_SETTINGS, name)
            else None,
        )


def _window() -> dict[int, float]:
    return {0: 2.0, -1: 1.0, 1: 1.0, -2: 0.5, 2: 0.5}


def _alias_sources() -> dict[str, float]:
    return {"first-name": 0.9, "short-name": 0.8}


def _term_synonyms() -> dict[str, tuple[str, ...]]:
    return {
        "role": ("job",),
        "occupation": ("job",),
        "profession": ("job",),
        "career": ("job",),
    }


def _verb_synonyms() -> dict[str, tuple[str, ...]]:
    return {
        "say": ("tell", "talk", "speak", "mention"),
        "tell": ("say", "talk", "speak", "mention"),
        "talk": ("say", "tell", "speak", "discuss"),
        "speak": ("say", "tell", "talk"),
        "mention": ("say", "tell"),
        "discuss": ("talk",),
        "buy": ("purchase", "get"),
        "purchase": ("buy",),
        "visit": ("go",),
        "go": ("visit", "travel"),
        "travel": ("go", "visit"),
        "love": ("like", "enjoy"),
        "like": ("love", "enjoy"),
        "enjoy": ("like", "love"),
        "start": ("begin",),
        "begin": ("start",),
        "make": ("create", "build"),
        "create": ("make",),
    }


@dataclass(frozen=True)
class RankingSettings:
    """How matches are scored and combined.

    Message text is scored with BM25 over a *context window*: a message's own words count
    ``window[0]`` times, its neighbours' (same session) ``window[±1]``, ``window[±2]``, so a
    reply is found by the question it answers. Knowledge matches (entities, actions, topics
    whose terms match), pattern matches (``entity(...)``, ``action(...)``) and vector
    similarity are combined with the text score as z-scores over the messages in scope.
    """

    #: Weight of a neighbour's words in a message's text window, by offset.
    window: dict[int, float] = field(default_factory=_window)
    #: Whether the window's offsets count turns (runs of messages by one speaker) rather
    #: than messages; the other messages of a message's own turn count as ``window[±1]``.
    #: A message without a speaker (a document fragment) is a turn of its own.
    window_turns: bool = True
    #: BM25 term-frequency saturation and length normalisation.
    k1: float = 1.2
    b: float = 0.5
    #: z-score weights of the signals fused by ``ask``.
    text_weight: float = 1.0
    knowledge_weight: float = 0.0
    pattern_weight: float = 0.25
    vector_weight: float = 0.0
    #: A question's entity pattern with facets (what a question for "Kevin Scott's job"
    #: becomes) weighs this many times a pattern: it asks for exactly that knowledge.
    facet_boost: float = 4.0
    #: Messages by a person the question names score ``1 + speaker_boost`` times higher
    #: (0.5 was chosen in every fold of a leave-one-conversation-out check on LoCoMo).
    speaker_boost: float = 0.5
    #: The text score of a backchannel (a message with no content words of its own:
    #: "Yeah.", "Right, right.", "Haha") is multiplied by this: it matches only through its
    #: neighbours' words, and would crowd the messages it answers out of the budget.
    backchannel_weight: float = 0.2
    #: Within a knowledge match: weight by the kind of the matching semantic ref.
    entity_weight: float = 1.0
    action_weight: float = 0.8
    topic_weight: float = 1.0
    #: Related terms (aliases gathered at extraction, fuzzy embedding neighbours) count
    #: this much of an exact match; fuzzy neighbours need this cosine similarity.
    alias_weight: float = 0.9
    #: How much each kind of alias is worth before ``alias_weight``: a first name for the
    #: full name ("Kevin" ~ "Kevin Scott"), a short form of a speaker's first name
    #: ("Mel" ~ "Melanie").
    alias_sources: dict[str, float] = field(default_factory=_alias_sources)
    #: A pattern's verb also matches these verbs ("what did Kevin tell Satya" finds "say").
    verb_synonyms: dict[str, tuple[str, ...]] = field(default_factory=_verb_synonyms)
    #: A word also finds these words (at ``synonym_weight``): a question about someone's
    #: "role" or "occupation" finds the ``job`` facets the extractor records.
    term_synonyms: dict[str, tuple[str, ...]] = field(default_factory=_term_synonyms)
    synonym_weight: float = 0.8
    #: Derived forms found in the index (teach ~ teacher) count this much.
    derived_weight: float = 0.6
    #: Irregular forms found in the index (buy ~ bought, go ~ went, child ~ children)
    #: count this much (0: off). In-sample on LoCoMo, 0.5 against 0: recall 0.8194 /
    #: 0.8704 / 0.9140 against 0.8155 / 0.8711 / 0.9153 at 500 / 1,000 / 2,000 tokens.
    inflection_weight: float = 0.5
    #: The kinds of a category (``kind:sport``: tennis, surfing ...) count this much of
    #: the category word.
    kind_weight: float = 0.5
    #: A question word the index does not hold (a typo: "lerning") also finds the index
    #: terms one edit away, at this weight; at most ``spelling_max`` of them, for words of
    #: ``spelling_min_length`` letters or more.
    spelling_weight: float = 0.8
    spelling_max: int = 3
    spelling_min_length: int = 4
    fuzzy_weight: float = 0.5
    fuzzy_threshold: float = 0.95
    fuzzy_max: int = 3
    #: Entities the graph finds for a possessive ("Caroline's friend": the friend, one or
    #: two hops from Caroline) join the question's words with this weight; at most
    #: ``graph_max_names`` of them.
    graph_weight: float = 0.3
    graph_max_names: int = 5
    #: A message's pattern score counts at most this many matching refs.
    pattern_cap: float = 3.0
    #: A nested pattern (``action(*, adopt, entity(type=pet))``) passes at most this many
    #: of its best entities' names to the outer pattern.
    nested_max_refs: int = 500
    #: ``ask`` widens the query (drops verbs, then scopes) when fewer messages match.
    min_matches: int = 3
    #: When a question's time scope ("on 9 November 2022") leaves fewer than
    #: ``min_matches`` and is dropped, its messages still come first: those the wider
    #: query matches, then, if the scope holds at most this many messages (a day or a
    #: week of chat), all the others in conversation order (0: only the matched ones).
    scope_keep_max: int = 64
    #: ``during:<topic>`` keeps this many turns on each side of a match.
    during_radius: int = 3
    #: Share of an answer's budget the entity/topic summary lines may take; the summary
    #: looks at the ``summary_refs`` best knowledge hits and names at most
    #: ``summary_entities`` entities and ``summary_topics`` topics.
    knowledge_share: float = 0.03
    summary_refs: int = 40
    summary_entities: int = 8
    summary_topics: int = 6
    #: Vector fill considers ``budget / fill_tokens_per_message + fill_extra`` of the
    #: nearest messages (enough to fill any budget: messages cost a few tokens at least).
    fill_tokens_per_message: int = 4
    fill_extra: int = 64
    #: A message that ends with a question (a trailing ``[shares a photo ...]`` aside)
    #: shares the question's words but rarely holds the answer, which its reply gets
    #: through the text window: ``ask`` packs the ranking's ``question_depth`` best
    #: messages with such messages' scores lowered by this many standard deviations of
    #: those scores (0: off). Chosen by a leave-one-conversation-out check on LoCoMo (3 of
    #: 5 folds chose 1 over 0; held out at 1,000 tokens with ``open_object_weight``: 0.864
    #: against 0.858).
    question_penalty: float = 1.0
    question_depth: int = 128
    #: A question's action whose object is a category ("What books has Tim read":
    #: ``action(Tim, read, books)`` with ``kind:books``) also finds the subject's actions
    #: with that verb and any object (``action(Tim, read, *)^1``): the answers name
    #: instances ("I read Dune"). A signal of its own, weighed this many times a pattern
    #: (0: off; every leave-one-out fold chose 1 over 0).
    open_object_weight: float = 1.0
    #: Packing gives up looking for a message that still fits after this many misses in
    #: a row.
    pack_max_misses: int = 64
    #: A quoted phrase (``"support group"``) multiplies the text scores of the messages
    #: that have its words together by this much (1: the words in any order).
    phrase_boost: float = 4.0

    def __post_init__(self) -> None:
        for f in fields(self):
            check_setting(f.name, getattr(self, f.name), f.type)
        for offset, weight in self.window.items():
            check_setting(f"window[{offset}]", weight, "float")
        for source, weight in self.alias_sources.items():
            check_setting(f"alias_sources[{source!r}]", weight, "float")

    def with_overrides(self, **values: Any) -> RankingSettings:
        known = {f.name for f in fields(self)}
        unknown = set(values) - known
        if unknown:
            from structrag.errors import ConfigError

            raise ConfigError(
                f"unknown ranking setting(s): {', '.join(sorted(unknown))}",
                hint=f"known: {', '.join(sorted(known))}",
            )
        return replace(self, **values)


DEFAULT_SETTINGS = RankingSettings()
