"""Everything the query engine derives from an index, cached per store generation.

A :class:`Derived` holds one :class:`ConversationView` per conversation asked about (and
one for the whole index): the messages as arrays (:class:`~structrag.query.scope.ScopeData`),
its semantic refs (:class:`~structrag.store.protocols.RefTable`), speakers, aliases,
related terms, the fuzzy vocabulary, the entity graph, message vectors and the property
index. Everything is built lazily on first use and dropped when the store's generation
changes (a committed ingest). A view implements
:class:`~structrag.query.compile.CompileContext`, and :class:`Evaluation` implements
:class:`~structrag.query.nodes.PlanContext` over it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import numpy as np

from structrag.analysis import (
    TEXT_ANALYSIS_KEY,
    fold_accents,
    phrase_stems,
    stem_words,
    stems,
    term_key,
    words,
)
from structrag.embeddings import Embedder
from structrag.errors import NotFoundError
from structrag.lexicon import Lexicon, default_lexicon
from structrag.lexicon.irregular import irregular_forms
from structrag.naming import DOCUMENT_ROOM
from structrag.query.context import Line, TokenCounter, count_within, render_message
from structrag.query.digest import ConversationDigest, vocabulary_words
from structrag.query.graph import EntityGraph
from structrag.query.scope import ScopeData
from structrag.query.settings import RankingSettings
from structrag.store.protocols import (
    KnowledgeStore,
    MessageFilter,
    PropertyCondition,
    RefTable,
    Scope,
    StoredMessage,
    TextIndexReader,
)

#: Pattern candidates up to this many are checked by the store one by one; more, against
#: each condition's refs over the whole index (cached per generation, up to
#: ``MEETING_CACHE_REFS`` ref ids).
MEETING_DIRECT_REFS = 5_000
MEETING_CACHE_REFS = 5_000_000
#: Messages with an underscore read for the note on an index built before identifiers'
#: parts were terms (:meth:`Derived.identifier_parts`).
IDENTIFIERS_READ = 100_000

#: Word embeddings kept for fuzzy matches (all conversations together).
WORD_VECTORS = 500_000

#: Texts (questions) whose embeddings are kept, oldest dropped first.
TEXT_VECTORS = 1_024

#: Messages read ahead for rendering, kept until rendered (or this many are waiting).
STORED_AHEAD = 10_000
#: A quoted phrase is checked in at most this many messages holding all its words.
PHRASE_CHECKS = 20_000

#: Knowledge texts a view keeps (ref ids, found or not) before it starts again.
KNOWN_TEXTS = 200_000

#: Suffixes that derive one word from another (in their stemmed form).
DERIVATIONAL_SUFFIXES = frozenset(
    {"er", "or", "ist", "ian", "ment", "ship", "ism", "ness", "ful", "al", "ive", "ic", "ess", "i"}
)


class ConversationView:
    """What the engine knows about one scope: a conversation (or, with ``None``, the whole
    index), its memory tables, and an agent's memories (see
    :class:`~structrag.store.protocols.Scope`). Tables that only help lookups (refs,
    properties, aliases, the entity graph, vectors) are the conversation's, a superset of
    the scope; what a query can return is always bounded by the scope's messages."""

    def __init__(self, owner: Derived, scope: Scope) -> None:
        self.owner = owner
        self.scope_key = scope
        self.conversation = scope.conversation
        conversation = scope.conversation
        store, text = owner.store, owner.text
        #: What an ingest stored for a first question on the conversation (None: read
        #: the tables; see :mod:`structrag.query.digest`).
        self.digest = owner.digest(scope)
        frame = store.message_frame(scope) if self.digest is None else self.digest.frame
        docs = text.docs_of(frame.mkeys)
        mkeys, lengths, contents = text.lengths(docs)
        self.scope = ScopeData.build(
            conversation, frame, docs, mkeys, lengths, contents, owner.settings
        )
        self.speakers = sorted({s for s in frame.speakers if s})
        self._refs: RefTable | None = None
        self._aliases: dict[str, list[tuple[str, float]]] | None = None
        self._related: dict[str, list[tuple[str, float]]] = {}
        self._kinds: dict[str, list[tuple[str, float]]] = {}
        self._vocab: tuple[list[str], np.ndarray] | bool | None = False
        self._graph: EntityGraph | None = None
        self._vectors: np.ndarray | bool | None = False
        self._speaker_conversations: dict[str, frozenset[str]] = {}
        self._runs: list[tuple[str, int, int]] | None = None  # see in_conversations
        #: Knowledge texts read so far (None: the ref has none, or is not the view's).
        self._texts: dict[int, tuple[str, str, list[str]] | None] = {}

    @property
    def settings(self) -> RankingSettings:
        return self.owner.settings

    # -- refs ------------------------------------------------------------------------------

    @property
    def refs(self) -> RefTable:
        if self._refs is None:
            digest = self.digest
            self._refs = (
                self.owner.store.ref_table(self.conversation) if digest is None else digest.refs
            )
        return self._refs

    def _conversation_refs(self, ref_ids: Sequence[int]) -> list[int]:
        """The refs among ``ref_ids`` that belong to the view's conversation (all of them
        for a wider scope)."""
        if self.conversation is None or not len(ref_ids):
            return list(ref_ids)
        ids = np.asarray(ref_ids, dtype=np.int64)
        _, found = self.refs.locate(ids)
        return [int(r) for r in ids[found].tolist()]

    def refs_meeting(
        self, ref_ids: Sequence[int], conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """The refs among ``ref_ids`` that meet every condition, checked by the store
        where the rows are (see :meth:`Derived.refs_meeting`); a conversation's view keeps
        its own refs only. Nothing is loaded up front: a first question on a conversation
        reads only the candidates it has."""
        return self.owner.refs_meeting(self._conversation_refs(ref_ids), conditions)

    def knowledge_texts(self, ref_ids: Sequence[int]) -> dict[int, tuple[str, str, list[str]]]:
        """``ref_id -> (kind, name or text, types)`` for entity, topic and tag refs (a
        conversation's view: its own refs only), read from the store as asked and kept."""
        known = self._texts
        missing = [r for r in dict.fromkeys(ref_ids) if r not in known]
        if missing:
            found = self.owner.store.knowledge_texts(self._conversation_refs(missing))
            if len(known) + len(missing) > KNOWN_TEXTS:
                known.clear()
            for ref in missing:
                known[ref] = found.get(ref)
        out: dict[int, tuple[str, str, list[str]]] = {}
        for ref in ref_ids:
            text = known[ref]
            if text is not None:
                out[ref] = text
        return out

    # -- names and terms (CompileContext) --------------------------------------------------

    def _alias_table(self) -> dict[str, list[tuple[str, float]]]:
        if self._aliases is None:
            weights = self.settings.alias_sources
            table: dict[str, list[tuple[str, float]]] = {}
            digest = self.digest
            rows = (
                self.owner.store.aliases(self.conversation) if digest is None else digest.aliases()
            )
            for term, related, source in rows:
                table.setdefault(term, []).append((related, weights.get(source, 0.0)))
            self._aliases = table
        return self._aliases

    def name_keys(self, name: str) -> tuple[str, ...]:
        """A name's key and its aliases' keys; a full name does not widen to the words it
        is made of ("Kevin Scott" is not every Kevin, though "Kevin" may be Kevin Scott)."""
        key = term_key(name)
        words = set(key.split())
        aliases = (related for related, _ in self._alias_table().get(key, []))
        keys = {key, *(a for a in aliases if not set(a.split()) < words)}
        return tuple(sorted(k for k in keys if k))

    def verb_lemma(self, verb: str) -> str:
        lemmatize = self.owner.lemmatize
        return lemmatize(verb) if lemmatize else verb.lower()

    def people_named(self, name: str) -> list[str]:
        """Speakers a name refers to: exact, first name, or an alias ("Mel" -> Melanie);
        failing those, the same without accents (speaker:Zoe is Zoë), then a last name
        (speaker:Scott is Kevin Scott)."""
        keys = set(self.name_keys(name))
        found = [s for s in self.speakers if term_key(s) in keys or term_key(s.split()[0]) in keys]
        folded = {fold_accents(k) for k in keys}
        if not found:
            found = [
                s
                for s in self.speakers
                if fold_accents(term_key(s)) in folded
                or fold_accents(term_key(s.split()[0])) in folded
            ]
        if not found:
            found = [
                s
                for s in self.speakers
                if len(s.split()) > 1 and fold_accents(term_key(s.split()[-1])) in folded
            ]
        return found or [name]

    def related_terms(self, stem: str) -> list[tuple[str, float]]:
        """Aliases gathered at extraction, synonyms, derived and irregular forms, and fuzzy
        neighbours of a stem; for a stem written without accents that no message in scope
        has, the index terms that are it with accents ("zurich": zürich), at full weight."""
        if stem in self._related:
            return self._related[stem]
        s = self.settings
        found: dict[str, float] = {}
        # (a long word has too many spellings to try: thousands past 15 letters)
        if stem.isascii() and stem.isalpha() and 2 < len(stem) <= 15 and not self.holds(stem):
            # the stemmer drops a final e, which may have been é ("resume": résumé)
            forms = _accented(stem) | (_accented(stem + "e") if stem[-1] != "e" else set())
            for accented in stem_words(sorted(forms)):
                if accented != stem and self.holds(accented):
                    found[accented] = 1.0
        for related, weight in self._alias_table().get(stem, []):
            found[related] = max(found.get(related, 0.0), weight * s.alias_weight)
        for synonym in self._synonyms().get(stem, ()):
            found.setdefault(synonym, s.synonym_weight)
        for form in self._derived_forms(stem):
            found.setdefault(form, s.derived_weight)
        if s.inflection_weight > 0:  # "buy" ~ "bought", "child" ~ "children"
            for form in irregular_forms().get(stem, ()):
                if self.holds(form):
                    found.setdefault(form, s.inflection_weight)
        for neighbour, similarity in self._fuzzy(stem):
            key = term_key(neighbour)
            if key != stem and key not in found:
                found[key] = similarity * s.fuzzy_weight
        result = sorted(found.items(), key=lambda kv: -kv[1])
        self._related[stem] = result
        return result

    def is_category(self, key: str) -> bool:
        """Whether the lexicon has ``key`` as a category (whatever the history holds)."""
        lexicon = self.owner.lexicon
        return lexicon is not None and key in lexicon

    def kinds(self, key: str) -> list[tuple[str, float]]:
        """The lexicon's kinds of a category key that the text index holds (one word
        each), at ``kind_weight``."""
        cached = self._kinds.get(key)
        if cached is not None:
            return cached
        s, lexicon = self.settings, self.owner.lexicon
        found: list[tuple[str, float]] = []
        if s.kind_weight > 0 and lexicon is not None:
            for member in lexicon.kinds(key):
                if " " not in member and self.holds(member):
                    found.append((member, s.kind_weight))
        self._kinds[key] = found
        return found

    def _synonyms(self) -> dict[str, tuple[str, ...]]:
        return self.owner.synonyms

    def _derived_forms(self, stem: str) -> list[str]:
        """Terms of the index that derive from a stem or it from them: teach ~ teacher,
        paint ~ painter. Only known derivational suffixes count (camp is not campaign)."""
        if self.settings.derived_weight <= 0 or len(stem) < 4 or not stem.isalpha():
            return []
        text = self.owner.text
        forms = [
            term
            for term in text.terms_with_prefix(stem)
            if term != stem and term[len(stem) :] in DERIVATIONAL_SUFFIXES
        ]
        for suffix in DERIVATIONAL_SUFFIXES:
            base = stem[: -len(suffix)]
            if stem.endswith(suffix) and len(base) >= 4 and base in text.terms_with_prefix(base, 1):
                forms.append(base)
        return forms

    def corrections(self, stem: str) -> list[tuple[str, float]]:
        """For a stem no message in scope has, the index terms one edit away, or the same
        but for up to two accents, at ``spelling_weight``: what a typo in a question meant
        ("lerning" finds learn, "apartmnet" apartment, "angstrom" Ångström). Candidates
        are stemmed again, so a corrected word meets the stem the index holds."""
        s = self.settings
        if s.spelling_weight <= 0 or len(stem) < s.spelling_min_length or not stem.isalpha():
            return []
        if self.holds(stem):
            return []
        found: dict[str, None] = {}
        for candidate in stem_words(sorted(_edits(stem) | _accented(stem))):
            fresh = candidate != stem and candidate not in found and len(candidate) > 2
            if fresh and self.holds(candidate):
                found[candidate] = None
        return [(c, s.spelling_weight) for c in list(found)[: s.spelling_max]]

    def conversations_of(self, people: Sequence[str]) -> frozenset[str]:
        """The conversations in scope where one of ``people`` (speakers' names) speaks or
        is named in a message's text."""
        frame = self.scope.frame
        out: set[str] = set()
        for person in people:
            if person not in self._speaker_conversations:
                spoken = frame.conversations[frame.speakers == person]
                self._speaker_conversations[person] = frozenset(spoken.tolist())
            out |= self._speaker_conversations[person]
            words = stems(person)
            if words:
                named = self.scope.holding(words[:1], self.owner.text)
                out.update(frame.conversations[named].tolist())
        return frozenset(out)

    def in_conversations(self, names: AbstractSet[str]) -> np.ndarray:
        """Which messages of the view are in one of the conversations ``names``, or in a
        document's. Read from the runs of one conversation in the frame (made once a
        view: a question over a million messages compares no strings per message)."""
        frame = self.scope.frame
        if self._runs is None:
            conversations = frame.conversations
            n = len(conversations)
            cuts = (np.flatnonzero(conversations[1:] != conversations[:-1]) + 1).tolist()
            starts, ends = [0, *cuts], [*cuts, n]
            self._runs = [
                (str(conversations[a]), a, b) for a, b in zip(starts, ends, strict=True) if b > a
            ]
        mask = np.zeros(len(frame), dtype=bool)
        for name, start, end in self._runs:
            if name in names or name.startswith(DOCUMENT_ROOM):
                mask[start:end] = True
        return mask

    def has_conversation(self, conversation: str) -> bool:
        return bool((self.scope.frame.conversations == conversation).any())

    def holds(self, term: str) -> bool:
        """Whether a message in scope has the term in its text (a lookup that misses is a
        dictionary probe; a hit reads the postings, which scoring reads anyway)."""
        return bool(len(self.owner.text.text_postings(term, self.scope.docs).mkeys))

    def _fuzzy(self, stem: str) -> list[tuple[str, float]]:
        embedder, s = self.owner.embedder, self.settings
        if embedder is None or s.fuzzy_weight <= 0 or len(stem) < 4 or not stem.isalpha():
            return []
        if self._vocab is False:
            if self.digest is not None:
                words = self.digest.words()
            else:
                words = vocabulary_words(self.owner.store.knowledge_vocabulary(self.conversation))
            self._vocab = (words, self.owner.word_vectors(embedder, words)) if words else None
        if not isinstance(self._vocab, tuple):
            return []
        words, vectors = self._vocab
        sims = vectors @ self.owner.word_vectors(embedder, [stem])[0]
        best = np.argsort(-sims)[: s.fuzzy_max]
        return [(words[i], float(sims[i])) for i in best if sims[i] >= s.fuzzy_threshold]

    # -- graph and vectors -----------------------------------------------------------------

    @property
    def graph(self) -> EntityGraph:
        if self._graph is None:
            digest = self.digest
            edges = (
                self.owner.store.relation_edges(self.conversation)
                if digest is None
                else digest.edges()
            )
            self._graph = EntityGraph(edges)
        return self._graph

    def vector_scores(self, text: str) -> np.ndarray | None:
        """Cosine similarity of ``text`` with every message in scope (None: no vectors)."""
        embedder = self.owner.embedder
        if embedder is None:
            return None
        if self._vectors is False:
            digest = self.digest
            if digest is not None and digest.model == embedder.name:
                mkeys, vectors = digest.vector_mkeys, digest.vectors
            else:
                mkeys, vectors = self.owner.store.embedding_matrix(embedder.name, self.conversation)
            self._vectors = None
            if len(mkeys):
                dense = np.zeros((len(self.scope), vectors.shape[1]), dtype=np.float32)
                positions, found = self.scope.positions(mkeys)
                dense[positions] = vectors[found]
                self._vectors = dense
        if not isinstance(self._vectors, np.ndarray):
            return None
        return np.asarray(self._vectors @ self.owner.text_vector(embedder, text), dtype=np.float64)


@dataclass
class Evaluation:
    """A :class:`~structrag.query.nodes.PlanContext`: one run of a plan over a view."""

    view: ConversationView
    notes: list[str] = field(default_factory=list)

    @property
    def scope(self) -> ScopeData:
        return self.view.scope

    @property
    def settings(self) -> RankingSettings:
        return self.view.settings

    def text_scores(self, terms: Mapping[str, float]) -> np.ndarray:
        return self.scope.bm25(dict(terms), self.view.owner.text)

    def text_holders(self, terms: Iterable[str]) -> np.ndarray:
        return self.scope.holding(terms, self.view.owner.text)

    def phrase_holders(self, phrase: Sequence[str]) -> np.ndarray:
        scope = self.scope
        mask = np.ones(len(scope), dtype=bool)
        for stem in set(phrase):
            mask &= scope.holding([stem], self.view.owner.text)
        positions = np.flatnonzero(mask)
        if len(phrase) < 2 or not len(positions):
            return mask
        if len(positions) > PHRASE_CHECKS:  # too many to read: the words, anywhere
            self.notes.append(
                f"{' '.join(phrase)!r}: {len(positions)} messages hold the words; "
                f"they are not checked for the phrase (more than {PHRASE_CHECKS})"
            )
            return mask
        wanted = list(phrase)
        stored = self.view.owner.store.messages_by_keys(scope.frame.mkeys[positions].tolist())
        for position in positions:
            found = stored.get(int(scope.frame.mkeys[position]))
            # the words as written, or an identifier's parts ("max retries" in max_retries)
            views = phrase_stems(found.message.text) if found is not None else []
            mask[position] = any(
                said[i : i + len(wanted)] == wanted
                for said in views
                for i in range(len(said) - len(wanted) + 1)
            )
        return mask

    def knowledge_hits(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        return self.scope.knowledge_arrays(term, self.view.owner.text)

    def ref_kinds(self, ref_ids: np.ndarray) -> np.ndarray:
        return self.view.refs.kinds_of(ref_ids)

    def refs_having(self, conditions: Sequence[PropertyCondition]) -> dict[int, int]:
        found = self.view.owner.store.refs_meeting(None, conditions)
        ids = np.asarray(sorted(found), dtype=np.int64)
        refs = self.view.refs
        rows, known = refs.locate(ids)
        positions, held = self.scope.positions(refs.mkeys[rows])
        return dict(zip(ids[known][held].tolist(), positions.tolist(), strict=True))

    def ref_positions(self, ref_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        refs = self.view.refs
        rows, found = refs.locate(ref_ids)
        positions, held = self.scope.positions(refs.mkeys[rows])
        found[np.flatnonzero(found)[~held]] = False
        return positions, found

    def refs_meeting(
        self, ref_ids: Sequence[int], conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        return self.view.refs_meeting(ref_ids, conditions)

    def ref_names(self, ref_ids: Sequence[int]) -> set[str]:
        names: set[str] = set()
        for _, text, _ in self.view.knowledge_texts(ref_ids).values():
            names.add(term_key(text))
        return names

    def filter_mask(self, condition: MessageFilter) -> np.ndarray:
        scope = self.scope
        mask = np.zeros(len(scope), dtype=bool)
        only_speakers = condition.speakers and condition == MessageFilter(
            speakers=condition.speakers
        )
        if only_speakers:  # answered from the arrays, without a round trip to the store
            wanted = {s.lower() for s in condition.speakers}
            return np.array([s in wanted for s in scope.speakers_lower], dtype=bool)
        keys = self.view.owner.store.filter_messages(condition)
        if keys:
            positions, _ = scope.positions(np.array(sorted(keys), dtype=np.int64))
            mask[positions] = True
        return mask

    def vector_scores(self, text: str) -> np.ndarray | None:
        return self.view.vector_scores(text)


class Derived:
    """The engine's caches, for one store generation (see the module docstring)."""

    def __init__(
        self,
        store: KnowledgeStore,
        text: TextIndexReader,
        *,
        settings: RankingSettings,
        embedder: Embedder | Callable[[], Embedder | None] | None = None,
        lemmatize: Callable[[str], str] | None = None,
        lexicon: Lexicon | Callable[[], Lexicon] | None = default_lexicon,
    ) -> None:
        self.store = store
        self.text = text
        self.settings = settings
        #: The embedder, or what gives it: an index's embedding model is fixed by its first
        #: write, so it is looked up again when the store has committed.
        self._embedder_source = embedder
        self.embedder: Embedder | None = None
        self.lemmatize = lemmatize
        self._lexicon_source = lexicon
        self._generation: tuple[int, int | None] = (-1, None)
        #: ``RankingSettings.term_synonyms`` by stem.
        self.synonyms = {
            term_key(word): tuple(term_key(s) for s in synonyms)
            for word, synonyms in settings.term_synonyms.items()
        }
        self._views: dict[Scope, ConversationView] = {}
        #: The ids of the index's conversations (a view's conversation must be one).
        self._conversations: set[str] | None = None
        #: The memory tables that hold messages (see :meth:`held`).
        self._tables: set[str] | None = None
        self._lines: dict[tuple[str, int], Line] = {}
        #: Messages read ahead for :meth:`lines`, not rendered yet.
        self._stored: dict[int, StoredMessage] = {}
        #: The refs of the whole index meeting one property condition, sorted.
        self._meeting: dict[PropertyCondition, np.ndarray] = {}
        #: The stems of identifiers' parts, each with an identifier that has it (see
        #: :meth:`identifier_parts`).
        self._identifier_parts: dict[str, str] | None = None
        #: The index's ``text_analysis`` setting, as read this generation ("" for none).
        self._analysis: str | None = None

    @property
    def lexicon(self) -> Lexicon | None:
        """The lexicon of kinds, loaded at first use (``kind:`` terms only)."""
        source = self._lexicon_source
        if callable(source):
            self._lexicon_source = source = source()
        return source

    def refresh(self) -> None:
        """Drop everything when the store (or the text index, which follows it) has
        committed since the caches were built."""
        store_generation = self.store.generation()
        generation = (store_generation, self.text.catch_up(store_generation))
        if generation != self._generation:
            self._generation = generation
            self._views.clear()
            self._conversations = None
            self._tables = None
            self._lines.clear()
            self._stored.clear()
            self._meeting.clear()
            self._identifier_parts = None
            self._analysis = None
            source = self._embedder_source
            self.embedder = source() if callable(source) else source

    def text_analysis(self) -> set[str]:
        """The features of the index's text analysis (``structrag.analysis.TEXT_ANALYSIS``),
        read once a generation; empty for an index built before they were recorded."""
        if self._analysis is None:
            self._analysis = self.store.get_setting(TEXT_ANALYSIS_KEY) or ""
        return set(self._analysis.split())

    def identifier_parts(self) -> dict[str, str]:
        """The stems of the parts of the identifiers messages say (``retri`` of
        ``max_retries``), each with one such identifier: what an index built before the
        parts were terms cannot find by a part (the engine's note to reindex). One scan of
        the messages with an underscore per generation, at most ``IDENTIFIERS_READ`` of
        them."""
        if self._identifier_parts is None:
            rows = self.store.sql(
                "SELECT text FROM messages WHERE contains(text, '_') LIMIT ?",
                [IDENTIFIERS_READ],
            )
            found: dict[str, str] = {}
            for (said,) in rows:
                for word in words(str(said)):
                    if "_" in word:
                        for stem in stems(word.replace("_", " ")):
                            found.setdefault(stem, word)
            self._identifier_parts = found
        return self._identifier_parts

    def word_vectors(self, embedder: Embedder, words: Sequence[str]) -> np.ndarray:
        """The embeddings of single words, one row each (see :class:`EmbeddingCache`)."""
        return EMBEDDING_CACHE.words(embedder, words)

    def text_vector(self, embedder: Embedder, text: str) -> np.ndarray:
        """The embedding of a question (see :class:`EmbeddingCache`)."""
        return EMBEDDING_CACHE.text(embedder, text)

    def refs_meeting(
        self, ref_ids: Sequence[int], conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """The refs among ``ref_ids`` meeting every condition, for a scope wider than a
        conversation. Few candidates are checked by the store directly; many (a common
        verb in a large index) against each condition's refs over the whole index, read
        once per generation and kept (up to ``MEETING_CACHE_REFS`` refs in all)."""
        if len(ref_ids) <= MEETING_DIRECT_REFS:
            return self.store.refs_meeting(ref_ids, conditions)
        met = np.asarray(ref_ids, dtype=np.int64)
        for condition in conditions:
            refs = self._meeting.get(condition)
            if refs is None:
                refs = np.asarray(self.store.refs_meeting(None, [condition]), dtype=np.int64)
                if sum(len(r) for r in self._meeting.values()) + len(refs) > MEETING_CACHE_REFS:
                    self._meeting.clear()
                self._meeting[condition] = refs
            met = np.intersect1d(met, refs, assume_unique=True)
            if not len(met):
                break
        return [int(r) for r in met.tolist()]

    def digest(self, scope: Scope) -> ConversationDigest | None:
        """The stored digest of a conversation's scope (only the plain one: its messages,
        of any agent), None when it has none."""
        conversation = scope.conversation
        if conversation is None or scope != Scope(conversation=conversation):
            return None
        data = self.store.digest(conversation)
        return None if data is None else ConversationDigest.from_bytes(conversation, data)

    def held(self, scope: Scope) -> Scope:
        """The scope without the memory tables that hold nothing: in an index without
        documents, a conversation with the documents beside it (what ``query`` searches)
        is the conversation's plain scope, whose view ``ask`` has built and whose digest
        the ingest stored."""
        if len(scope.tables) < 2:
            return scope  # nothing to leave out (ask's scope: no query for it)
        if self._tables is None:
            self._tables = self.store.memory_tables()
        tables = tuple(t for t in scope.tables if t in self._tables)
        return replace(scope, tables=tables) if tables and tables != scope.tables else scope

    def view(self, scope: Scope) -> ConversationView:
        self.refresh()
        scope = self.held(scope)
        if scope not in self._views:
            conversation = scope.conversation
            if self._conversations is None:
                self._conversations = {c.id for c in self.store.conversations()}
            if conversation is not None and conversation not in self._conversations:
                named = sorted(
                    c.id
                    for c in self.store.conversations()
                    if (c.name or "").casefold() == conversation.casefold()
                )
                raise NotFoundError(
                    f"no conversation {conversation!r} in the index",
                    hint=f"that is the name of {', '.join(named[:5])}: give its id"
                    if named
                    else "list them with `structrag conversations`",
                )
            self._views[scope] = ConversationView(self, scope)
        return self._views[scope]

    def lines(
        self,
        mkeys: Sequence[int],
        counter: TokenCounter,
        ahead: Sequence[int] = (),
        view: ConversationView | None = None,
    ) -> dict[int, Line]:
        """Messages rendered for a context, with token counts (cached per generation).

        ``ahead``: messages likely to be asked for next (the rest of a ranking being
        packed); read from the store in the same query when some of ``mkeys`` must be
        read, and rendered only when asked for. ``view``: the view the messages were
        ranked in, whose digest may hold their lines."""
        self.refresh()
        name = counter.name
        missing = [k for k in mkeys if (name, k) not in self._lines]
        if missing and view is not None and self._views.get(view.scope_key) is view:
            missing = self._digested_lines(missing, name, view)  # a view of this generation
        if missing:
            stored = self._stored
            wanted = [k for k in missing if k not in stored]
            if wanted:
                extra = [k for k in ahead if (name, k) not in self._lines and k not in stored]
                if len(stored) + len(wanted) + len(extra) > STORED_AHEAD:
                    stored.clear()
                stored.update(self.store.messages_by_keys(list(dict.fromkeys(wanted + extra))))
            for mkey in missing:
                found = stored.pop(mkey, None)
                if found is None:
                    continue
                text = render_message(found)
                self._lines[(name, mkey)] = Line(
                    found.message.conversation,
                    found.message.id,
                    text,
                    count_within(counter, text + "\n"),
                )
        return {k: self._lines[(name, k)] for k in mkeys if (name, k) in self._lines}

    def _digested_lines(self, mkeys: list[int], name: str, view: ConversationView) -> list[int]:
        """Lines of ``mkeys`` from a view's digest (when it counted tokens as ``name``
        does); returns the keys it does not hold."""
        digest = view.digest
        if digest is None or digest.counter != name:
            return mkeys
        keys = np.asarray(mkeys, dtype=np.int64)
        positions, found = view.scope.positions(keys)
        frame = view.scope.frame
        for mkey, at in zip(keys[found].tolist(), positions.tolist(), strict=True):
            line = digest.line(at)
            self._lines[(name, mkey)] = Line(
                str(frame.conversations[at]), str(frame.ids[at]), line, int(digest.tokens[at])
            )
        return [int(k) for k in keys[~found].tolist()]


class EmbeddingCache:
    """Embeddings that depend only on the model, kept for the whole process (every index
    and every engine of it: a server's, or one per settings in ``bench loo``).

    * words, for fuzzy matches: only the words no conversation asked about before are
      encoded, up to ``WORD_VECTORS`` (then it starts again);
    * texts (questions), the last ``TEXT_VECTORS``: a question asked again, or of several
      conversations, is not encoded again. With MiniLM an encoding costs more than the
      rest of an ask.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model = ""
        self._words: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._texts: dict[tuple[str, str], np.ndarray] = {}

    def words(self, embedder: Embedder, words: Sequence[str]) -> np.ndarray:
        with self._lock:
            if self._model != embedder.name or len(self._words) + len(words) > WORD_VECTORS:
                self._model, self._words = embedder.name, {}
                self._matrix = np.zeros((0, embedder.dim), dtype=np.float32)
            rows = self._words
            missing = [w for w in dict.fromkeys(words) if w not in rows]
            if missing:
                vectors = np.asarray(embedder.encode(missing), dtype=np.float32)
                start, end = len(rows), len(rows) + len(missing)
                if end > len(self._matrix):  # grown by doubling: appends stay cheap
                    size = max(end, 2 * len(self._matrix))
                    grown = np.zeros((size, vectors.shape[1]), dtype=np.float32)
                    grown[:start] = self._matrix[:start]
                    self._matrix = grown
                self._matrix[start:end] = vectors
                rows.update((w, start + i) for i, w in enumerate(missing))
            at = np.fromiter((rows[w] for w in words), dtype=np.int64, count=len(words))
            return self._matrix[at]

    def text(self, embedder: Embedder, text: str) -> np.ndarray:
        key = (embedder.name, text)
        with self._lock:
            vector = self._texts.get(key)
            if vector is None:
                vector = np.asarray(embedder.encode([text])[0], dtype=np.float32)
                if len(self._texts) >= TEXT_VECTORS:
                    self._texts.pop(next(iter(self._texts)))
                self._texts[key] = vector
            return vector


EMBEDDING_CACHE = EmbeddingCache()

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _edits(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS if c != b[0]}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return deletes | swaps | replaces | inserts


#: The accented letters each plain one stands for when accents are left out.
_ACCENTS = {
    "a": "àáâãäå",
    "c": "ç",
    "e": "èéêë",
    "i": "ìíîï",
    "n": "ñ",
    "o": "òóôõöø",
    "u": "ùúûü",
    "y": "ýÿ",
}


def _accented(word: str, most: int = 2) -> set[str]:
    """``word`` with up to ``most`` of its plain letters written with an accent ("zurich"
    -> "zürich", "angstrom" -> "ångström"); nothing for a word that has accents."""
    if not word.isascii():
        return set()
    found = {word}
    for _ in range(most):
        found |= {
            w[:i] + c + w[i + 1 :]
            for w in found
            for i, ch in enumerate(w)
            for c in _ACCENTS.get(ch, "")
        }
    found.discard(word)
    return found


def _by_name(rows: dict[int, list[tuple[str, str]]]) -> dict[int, dict[str, list[str]]]:
    out: dict[int, dict[str, list[str]]] = {}
    for ref, pairs in rows.items():
        grouped: dict[str, list[str]] = {}
        for name, value in pairs:
            grouped.setdefault(name, []).append(value)
        out[ref] = grouped
    return out
