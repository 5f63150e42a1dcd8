"""Named scoring settings. Every weight the ranker uses lives here, documented.

The defaults were chosen on LoCoMo's five development conversations
(``benchmarks/recall.py``) with leave-one-conversation-out checks, and are meant to be
robust rather than tuned to the last digit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


def _window() -> dict[int, float]:
    return {0: 2.0, -1: 1.0, 1: 1.0, -2: 0.5, 2: 0.5}


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
    #: BM25 term-frequency saturation and length normalisation.
    k1: float = 1.2
    b: float = 0.5
    #: z-score weights of the signals fused by ``ask``.
    text_weight: float = 1.0
    knowledge_weight: float = 0.15
    pattern_weight: float = 0.25
    vector_weight: float = 0.0
    #: Messages by a person the question names score ``1 + speaker_boost`` times higher
    #: (0.5 was chosen in every fold of a leave-one-conversation-out check on LoCoMo).
    speaker_boost: float = 0.5
    #: Within a knowledge match: weight by the kind of the matching semantic ref.
    entity_weight: float = 1.0
    action_weight: float = 0.8
    topic_weight: float = 1.0
    #: Related terms (aliases gathered at extraction, fuzzy embedding neighbours) count
    #: this much of an exact match; fuzzy neighbours need this cosine similarity.
    alias_weight: float = 0.9
    #: Derived forms found in the index (teach ~ teacher) count this much.
    derived_weight: float = 0.6
    fuzzy_weight: float = 0.5
    fuzzy_threshold: float = 0.95
    fuzzy_max: int = 3
    #: Entities the graph finds for a possessive ("Caroline's friend": the friend, one or
    #: two hops from Caroline) join the question's words with this weight.
    graph_weight: float = 0.3
    #: ``ask`` widens the query (drops verbs, then scopes) when fewer messages match.
    min_matches: int = 3
    #: ``during:<topic>`` keeps this many turns on each side of a match.
    during_radius: int = 3
    #: Share of an answer's budget the entity/topic summary lines may take.
    knowledge_share: float = 0.03

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
