-- The structrag index schema, version 6: a public, documented contract.
--
-- Analysts read the index from plain DuckDB, pandas or a notebook. The v_* views are the
-- stable way in: plain names, no internal columns. The tables are documented too (every
-- table and column has a COMMENT); columns marked "internal" exist for the query engine
-- and may change between schema versions. `structrag` upgrades an older index when it
-- opens it (see structrag/store/duckdb/schema.py).
--
-- Keys: messages have a store-wide integer key `mkey`, semantic refs a store-wide
-- `ref_id`. DuckDB cannot delete a row that another table's foreign key still points at
-- within the transaction that deleted the referencing rows, and messages (and their
-- knowledge) are deleted together by edits and by memory pruning, so the references from
-- the knowledge tables to `messages` and `semantic_refs` are documented, not enforced;
-- the writer keeps them whole (no orphans: the test suite counts them). The knowledge
-- tables and the embeddings have no primary key either: the one writer gives out ref ids
-- and message keys, and DuckDB's index behind a key cost more than a quarter of the file.

CREATE TABLE IF NOT EXISTS meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
COMMENT ON TABLE meta IS 'Index settings: schema_version, generation (committed writes), embeddings model.';
COMMENT ON COLUMN meta.key IS 'Setting name.';
COMMENT ON COLUMN meta.value IS 'Setting value, as text.';

CREATE TABLE IF NOT EXISTS conversations (
    conversation VARCHAR PRIMARY KEY,
    name VARCHAR,
    metadata JSON NOT NULL,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE conversations IS 'One row per conversation (a chat, a channel, a meeting, a podcast episode).';
COMMENT ON COLUMN conversations.conversation IS 'Conversation id, as given by the input file or --conversation.';
COMMENT ON COLUMN conversations.name IS 'A display name (chat title, episode header), when the input has one.';
COMMENT ON COLUMN conversations.metadata IS 'What the importer knew about the conversation (source file, format, header lines ...).';
COMMENT ON COLUMN conversations.created_at IS 'When the conversation was first ingested (UTC).';

CREATE TABLE IF NOT EXISTS sources (
    source_id INTEGER PRIMARY KEY,
    path VARCHAR NOT NULL,
    sha256 VARCHAR NOT NULL,
    format VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    extractor VARCHAR NOT NULL,
    settings JSON NOT NULL,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP NOT NULL,
    messages_added INTEGER NOT NULL,
    messages_updated INTEGER NOT NULL,
    messages_unchanged INTEGER NOT NULL,
    refs_added INTEGER NOT NULL,
    warnings JSON NOT NULL
);
COMMENT ON TABLE sources IS 'The ingest log: one row per ingested input (file, folder or retry).';
COMMENT ON COLUMN sources.source_id IS 'Ingest number, from 1.';
COMMENT ON COLUMN sources.path IS 'Absolute path of the input.';
COMMENT ON COLUMN sources.sha256 IS 'sha256 of the exact bytes that were parsed.';
COMMENT ON COLUMN sources.format IS 'Input format (jsonl, locomo, slack ...).';
COMMENT ON COLUMN sources.fingerprint IS 'Internal: hash of the format and extraction settings; with sha256 it decides whether an input is unchanged.';
COMMENT ON COLUMN sources.extractor IS 'Extractor used: spacy, llm, hybrid, or import (knowledge read from the file).';
COMMENT ON COLUMN sources.settings IS 'The extractor settings (model, ner ...).';
COMMENT ON COLUMN sources.started_at IS 'When the ingest of this input started (UTC).';
COMMENT ON COLUMN sources.finished_at IS 'When it committed (UTC).';
COMMENT ON COLUMN sources.messages_added IS 'Messages new in this ingest.';
COMMENT ON COLUMN sources.messages_updated IS 'Messages whose content changed and were extracted again.';
COMMENT ON COLUMN sources.messages_unchanged IS 'Messages already indexed with the same content.';
COMMENT ON COLUMN sources.refs_added IS 'Semantic refs written.';
COMMENT ON COLUMN sources.warnings IS 'Warnings raised while reading the input (JSON list of strings).';

CREATE TABLE IF NOT EXISTS messages (
    mkey BIGINT PRIMARY KEY,
    conversation VARCHAR NOT NULL REFERENCES conversations (conversation),
    message_id VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    speaker VARCHAR,
    recipients VARCHAR[] NOT NULL,
    ts TIMESTAMP,
    text VARCHAR NOT NULL,
    tags VARCHAR[] NOT NULL,
    metadata JSON NOT NULL,
    content_hash BIGINT NOT NULL,
    source_id INTEGER REFERENCES sources (source_id),
    memory_table VARCHAR NOT NULL DEFAULT 'messages'
        CHECK (memory_table IN ('messages', 'facts', 'relationships', 'goals', 'knowledge')),
    agent VARCHAR,
    world VARCHAR,
    created_at TIMESTAMP NOT NULL,
    importance VARCHAR NOT NULL DEFAULT 'normal' CHECK (importance IN ('low', 'normal', 'high')),
    is_unique BOOLEAN NOT NULL DEFAULT false,
    status VARCHAR,
    UNIQUE (conversation, message_id)
);
COMMENT ON TABLE messages IS 'One row per message (turn) of every conversation, and per memory: a memory is a message of an agent''s, in one of the memory tables (messages, facts, relationships, goals, knowledge).';
COMMENT ON COLUMN messages.mkey IS 'Store-wide message key; other tables refer to a message by it.';
COMMENT ON COLUMN messages.conversation IS 'Conversation id (conversations.conversation).';
COMMENT ON COLUMN messages.message_id IS 'Message id within its conversation, from the input (or its position, from 1).';
COMMENT ON COLUMN messages.ordinal IS 'Position of the message in its conversation, from 0.';
COMMENT ON COLUMN messages.speaker IS 'Who wrote or said it.';
COMMENT ON COLUMN messages.recipients IS 'Who it was addressed to (by default the conversation''s other speakers).';
COMMENT ON COLUMN messages.ts IS 'When it was written (UTC, or the export''s local time when it gives no zone).';
COMMENT ON COLUMN messages.text IS 'The message text, exactly as stored; spans point into it.';
COMMENT ON COLUMN messages.tags IS 'Labels from the input.';
COMMENT ON COLUMN messages.metadata IS 'Everything else the input said about the message (JSON).';
COMMENT ON COLUMN messages.content_hash IS 'Internal: hash of speaker, time, text, tags and metadata; finds edited messages on re-ingest.';
COMMENT ON COLUMN messages.source_id IS 'The ingest that last wrote the message (sources.source_id); NULL for a memory added live.';
COMMENT ON COLUMN messages.memory_table IS 'The memory table it belongs to: messages (conversation history, and every ingested message), facts, relationships, goals or knowledge (document fragments).';
COMMENT ON COLUMN messages.agent IS 'The agent whose memory it is; NULL for messages ingested from files for everyone.';
COMMENT ON COLUMN messages.world IS 'A group of rooms (conversations) the memory belongs to, when the agent uses worlds.';
COMMENT ON COLUMN messages.created_at IS 'When it was stored (UTC); ts is when it was said.';
COMMENT ON COLUMN messages.importance IS 'low, normal or high; pruning keeps what is important.';
COMMENT ON COLUMN messages.is_unique IS 'Added as unique: an exact duplicate in its room and memory table is not stored again.';
COMMENT ON COLUMN messages.status IS 'A goal''s status (open, in_progress, done, abandoned); NULL for other memories.';

CREATE TABLE IF NOT EXISTS semantic_refs (
    ref_id BIGINT NOT NULL,
    mkey BIGINT NOT NULL,
    conversation VARCHAR NOT NULL,
    message_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL CHECK (kind IN ('entity', 'action', 'topic', 'tag')),
    span_start INTEGER NOT NULL CHECK (span_start >= 0),
    span_end INTEGER NOT NULL CHECK (span_end >= span_start),
    extractor VARCHAR NOT NULL,
    extractor_version VARCHAR NOT NULL
);
COMMENT ON TABLE semantic_refs IS 'Provenance of every piece of knowledge: the message and character span it came from, and the extractor.';
COMMENT ON COLUMN semantic_refs.ref_id IS 'Store-wide id of the semantic ref; entities, actions, topics and tag_refs rows share it.';
COMMENT ON COLUMN semantic_refs.mkey IS 'The message holding it (messages.mkey).';
COMMENT ON COLUMN semantic_refs.conversation IS 'Conversation of the message (copied for filtering).';
COMMENT ON COLUMN semantic_refs.message_id IS 'Id of the message in its conversation (copied for filtering).';
COMMENT ON COLUMN semantic_refs.kind IS 'entity, action, topic or tag: which table holds the knowledge.';
COMMENT ON COLUMN semantic_refs.span_start IS 'Start of the span in messages.text (a Python string index: code points, from 0).';
COMMENT ON COLUMN semantic_refs.span_end IS 'End of the span, exclusive.';
COMMENT ON COLUMN semantic_refs.extractor IS 'What produced it: spacy, llm, metadata (speaker and recipients), or the importer.';
COMMENT ON COLUMN semantic_refs.extractor_version IS 'Version of that extractor.';

CREATE TABLE IF NOT EXISTS entities (
    ref_id BIGINT NOT NULL,
    name VARCHAR NOT NULL,
    name_lower VARCHAR NOT NULL,
    stem_key VARCHAR NOT NULL,
    types VARCHAR[] NOT NULL
);
COMMENT ON TABLE entities IS 'Entities: people, places, organisations, things and concepts named in messages.';
COMMENT ON COLUMN entities.ref_id IS 'The semantic ref (semantic_refs.ref_id).';
COMMENT ON COLUMN entities.name IS 'The name as written.';
COMMENT ON COLUMN entities.name_lower IS 'The name in lower case, for matching by hand: WHERE name_lower = ''caroline''.';
COMMENT ON COLUMN entities.stem_key IS 'Internal: the name''s Snowball stems joined by spaces (how the engine matches names).';
COMMENT ON COLUMN entities.types IS 'Lower-case types, most specific first (person, book, place ...).';

CREATE TABLE IF NOT EXISTS entity_facets (
    ref_id BIGINT NOT NULL,
    position INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    number DOUBLE,
    is_bool BOOLEAN NOT NULL,
    units VARCHAR
);
COMMENT ON TABLE entity_facets IS 'Properties of entities: owner, count, quality, job ...';
COMMENT ON COLUMN entity_facets.ref_id IS 'The entity (entities.ref_id).';
COMMENT ON COLUMN entity_facets.position IS 'Order of the facet on its entity, from 0.';
COMMENT ON COLUMN entity_facets.name IS 'Facet name.';
COMMENT ON COLUMN entity_facets.value IS 'Facet value as text (numbers as written by %g, booleans as true/false).';
COMMENT ON COLUMN entity_facets.number IS 'The value when it is a number.';
COMMENT ON COLUMN entity_facets.is_bool IS 'Whether the value is a boolean.';
COMMENT ON COLUMN entity_facets.units IS 'Units of a numeric value (years, km ...).';

CREATE TABLE IF NOT EXISTS actions (
    ref_id BIGINT NOT NULL,
    verbs VARCHAR[] NOT NULL,
    verb VARCHAR NOT NULL,
    tense VARCHAR NOT NULL CHECK (tense IN ('past', 'present', 'future')),
    subject VARCHAR,
    object VARCHAR,
    indirect_object VARCHAR,
    negated BOOLEAN NOT NULL
);
COMMENT ON TABLE actions IS 'Actions and relations: subject - verb - object (- indirect object).';
COMMENT ON COLUMN actions.ref_id IS 'The semantic ref (semantic_refs.ref_id).';
COMMENT ON COLUMN actions.verbs IS 'Verb lemmas with particles, e.g. [sign, up].';
COMMENT ON COLUMN actions.verb IS 'The verbs joined by spaces: sign up.';
COMMENT ON COLUMN actions.tense IS 'past, present or future.';
COMMENT ON COLUMN actions.subject IS 'Who or what does it; I and you resolved to the speaker and recipient.';
COMMENT ON COLUMN actions.object IS 'What it is done to.';
COMMENT ON COLUMN actions.indirect_object IS 'To or for whom it is done.';
COMMENT ON COLUMN actions.negated IS 'Whether the message says it did not happen.';

CREATE TABLE IF NOT EXISTS action_params (
    ref_id BIGINT NOT NULL,
    position INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    number DOUBLE,
    is_bool BOOLEAN NOT NULL,
    units VARCHAR
);
COMMENT ON TABLE action_params IS 'Other arguments of actions: prepositional phrases (in Lisbon, for the shelter), place, time, manner.';
COMMENT ON COLUMN action_params.ref_id IS 'The action (actions.ref_id).';
COMMENT ON COLUMN action_params.position IS 'Order of the parameter on its action, from 0.';
COMMENT ON COLUMN action_params.name IS 'Parameter name (a preposition: in, to, for, with ...).';
COMMENT ON COLUMN action_params.value IS 'Parameter value as text.';
COMMENT ON COLUMN action_params.number IS 'The value when it is a number.';
COMMENT ON COLUMN action_params.is_bool IS 'Whether the value is a boolean.';
COMMENT ON COLUMN action_params.units IS 'Units of a numeric value.';

CREATE TABLE IF NOT EXISTS topics (
    ref_id BIGINT NOT NULL,
    text VARCHAR NOT NULL,
    stem_key VARCHAR NOT NULL
);
COMMENT ON TABLE topics IS 'Topics: short key phrases saying what a message is about.';
COMMENT ON COLUMN topics.ref_id IS 'The semantic ref (semantic_refs.ref_id).';
COMMENT ON COLUMN topics.text IS 'The phrase as written.';
COMMENT ON COLUMN topics.stem_key IS 'Internal: the phrase''s stems joined by spaces.';

CREATE TABLE IF NOT EXISTS tag_refs (
    ref_id BIGINT NOT NULL,
    text VARCHAR NOT NULL,
    stem_key VARCHAR NOT NULL
);
COMMENT ON TABLE tag_refs IS 'Tag knowledge: labels an importer attached as semantic refs (TypeAgent indexes have them). Message tags from the input are in messages.tags.';
COMMENT ON COLUMN tag_refs.ref_id IS 'The semantic ref (semantic_refs.ref_id).';
COMMENT ON COLUMN tag_refs.text IS 'The tag as written.';
COMMENT ON COLUMN tag_refs.stem_key IS 'Internal: the tag''s stems joined by spaces.';

CREATE TABLE IF NOT EXISTS properties (
    name VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    ref_id BIGINT NOT NULL
);
COMMENT ON TABLE properties IS 'Internal: the property index (as in KnowPro): property name and normalised value -> semantic ref; what action(...) and entity(...) patterns look up.';
COMMENT ON COLUMN properties.name IS 'name, type, facet.name, facet.value, verb, subject, object, indirectObject, topic or tag.';
COMMENT ON COLUMN properties.value IS 'The value''s stems joined by spaces.';
COMMENT ON COLUMN properties.ref_id IS 'The semantic ref (semantic_refs.ref_id).';

CREATE TABLE IF NOT EXISTS aliases (
    conversation VARCHAR NOT NULL,
    term VARCHAR NOT NULL,
    related VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    PRIMARY KEY (conversation, term, related)
);
COMMENT ON TABLE aliases IS 'Internal: names that refer to each other in a conversation, gathered at extraction (Kevin ~ Kevin Scott, Mel ~ Melanie).';
COMMENT ON COLUMN aliases.conversation IS 'Where the alias holds.';
COMMENT ON COLUMN aliases.term IS 'A name''s stem key.';
COMMENT ON COLUMN aliases.related IS 'The stem key of the name it refers to.';
COMMENT ON COLUMN aliases.source IS 'Why: first-name (a first name and the full name) or short-name (a short form of a speaker''s first name).';

CREATE TABLE IF NOT EXISTS embeddings (
    mkey BIGINT NOT NULL,
    model VARCHAR NOT NULL,
    vector FLOAT[] NOT NULL
);
COMMENT ON TABLE embeddings IS 'Message embeddings (L2-normalised): the vector fill of ask and fuzzy term matching.';
COMMENT ON COLUMN embeddings.mkey IS 'The message (messages.mkey).';
COMMENT ON COLUMN embeddings.model IS 'Embedding model name.';
COMMENT ON COLUMN embeddings.vector IS 'The vector; a dot product of two is their cosine similarity.';

CREATE TABLE IF NOT EXISTS extractions (
    mkey BIGINT NOT NULL,
    conversation VARCHAR NOT NULL,
    message_id VARCHAR NOT NULL,
    extractor VARCHAR NOT NULL,
    model VARCHAR,
    attempts INTEGER NOT NULL,
    extracted_at TIMESTAMP NOT NULL,
    prompt_version VARCHAR
);
COMMENT ON TABLE extractions IS 'Messages an extractor that records outcomes (the LLM) answered, even when it found nothing.';
COMMENT ON COLUMN extractions.mkey IS 'The message (messages.mkey).';
COMMENT ON COLUMN extractions.conversation IS 'Its conversation.';
COMMENT ON COLUMN extractions.message_id IS 'Its id in the conversation.';
COMMENT ON COLUMN extractions.extractor IS 'llm or hybrid.';
COMMENT ON COLUMN extractions.model IS 'The model that answered.';
COMMENT ON COLUMN extractions.attempts IS 'Requests it took.';
COMMENT ON COLUMN extractions.extracted_at IS 'When (UTC).';
COMMENT ON COLUMN extractions.prompt_version IS 'Version of the prompt the model was asked with; a re-ingest with another one extracts the message again. NULL: unknown (written before schema 8 with nothing to tell it), taken for the current one.';

CREATE TABLE IF NOT EXISTS extraction_failures (
    mkey BIGINT NOT NULL,
    conversation VARCHAR NOT NULL,
    message_id VARCHAR NOT NULL,
    extractor VARCHAR NOT NULL,
    model VARCHAR,
    error VARCHAR NOT NULL,
    attempts INTEGER NOT NULL,
    failed_at TIMESTAMP NOT NULL,
    prompt_version VARCHAR
);
COMMENT ON TABLE extraction_failures IS 'Messages whose extraction failed (kept with their metadata knowledge; ingest --retry-failed redoes them).';
COMMENT ON COLUMN extraction_failures.mkey IS 'The message (messages.mkey).';
COMMENT ON COLUMN extraction_failures.conversation IS 'Its conversation.';
COMMENT ON COLUMN extraction_failures.message_id IS 'Its id in the conversation.';
COMMENT ON COLUMN extraction_failures.extractor IS 'llm or hybrid.';
COMMENT ON COLUMN extraction_failures.model IS 'The model asked.';
COMMENT ON COLUMN extraction_failures.error IS 'What went wrong.';
COMMENT ON COLUMN extraction_failures.attempts IS 'Requests tried.';
COMMENT ON COLUMN extraction_failures.failed_at IS 'When (UTC).';
COMMENT ON COLUMN extraction_failures.prompt_version IS 'Version of the prompt the model was asked with (NULL: unknown, written before schema 8). ingest --retry-failed asks again with the current one.';

CREATE TABLE IF NOT EXISTS llm_cache (
    model VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    message_hash VARCHAR NOT NULL,
    response JSON NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model, prompt_version, message_hash)
);
COMMENT ON TABLE llm_cache IS 'LLM answers, kept so that nothing is paid for twice (committed one by one, outside ingest transactions).';
COMMENT ON COLUMN llm_cache.model IS 'Model name.';
COMMENT ON COLUMN llm_cache.prompt_version IS 'Version of the prompt that was sent.';
COMMENT ON COLUMN llm_cache.message_hash IS 'Hash of what the model was shown.';
COMMENT ON COLUMN llm_cache.response IS 'The validated answer (JSON).';
COMMENT ON COLUMN llm_cache.input_tokens IS 'Input tokens it cost.';
COMMENT ON COLUMN llm_cache.output_tokens IS 'Output tokens it cost.';
COMMENT ON COLUMN llm_cache.created_at IS 'When it was received (UTC).';

CREATE TABLE IF NOT EXISTS memory_access (
    mkey BIGINT PRIMARY KEY,
    access_count INTEGER NOT NULL,
    last_access TIMESTAMP NOT NULL
);
COMMENT ON TABLE memory_access IS 'How often each memory was read through the memory API, and when last (pruning keeps often-read memories).';
COMMENT ON COLUMN memory_access.mkey IS 'The memory (messages.mkey).';
COMMENT ON COLUMN memory_access.access_count IS 'Reads so far.';
COMMENT ON COLUMN memory_access.last_access IS 'The last read (UTC).';

CREATE TABLE IF NOT EXISTS memory_sources (
    mkey BIGINT NOT NULL,
    source_kind VARCHAR NOT NULL CHECK (source_kind IN ('message', 'tool', 'fragment', 'stated')),
    source_mkey BIGINT,
    source_ref VARCHAR,
    span_start INTEGER,
    span_end INTEGER,
    confidence DOUBLE NOT NULL,
    grounded BOOLEAN NOT NULL
);
COMMENT ON TABLE memory_sources IS 'Where a fact or relationship memory comes from: a message (with the span that states it), a tool result, a document fragment, or stated directly; checked against its source text (grounded).';
COMMENT ON COLUMN memory_sources.mkey IS 'The fact or relationship memory (messages.mkey).';
COMMENT ON COLUMN memory_sources.source_kind IS 'message, tool, fragment or stated (added as a fact, with no source).';
COMMENT ON COLUMN memory_sources.source_mkey IS 'The source message or fragment (messages.mkey), when there is one.';
COMMENT ON COLUMN memory_sources.source_ref IS 'Another reference to the source (a tool call id, say).';
COMMENT ON COLUMN memory_sources.span_start IS 'Start of the span in the source text that states it.';
COMMENT ON COLUMN memory_sources.span_end IS 'End of that span, exclusive.';
COMMENT ON COLUMN memory_sources.confidence IS 'How sure the extraction is, 0 to 1.';
COMMENT ON COLUMN memory_sources.grounded IS 'Whether the fact''s words were found in the source text.';

CREATE TABLE IF NOT EXISTS profile_entries (
    entry_id BIGINT PRIMARY KEY,
    agent VARCHAR NOT NULL,
    user_name VARCHAR NOT NULL,
    category VARCHAR NOT NULL,
    predicate VARCHAR NOT NULL,
    object VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    negated BOOLEAN NOT NULL,
    confidence DOUBLE NOT NULL,
    source_mkeys BIGINT[] NOT NULL,
    created_at TIMESTAMP NOT NULL,
    confirmed_at TIMESTAMP NOT NULL,
    superseded_by BIGINT,
    superseded_at TIMESTAMP
);
COMMENT ON TABLE profile_entries IS 'What an agent knows about a user: preferences, personal context, communication style, goals; each entry cites the messages that state it. A newer statement that contradicts one supersedes it, and the old entry stays as history.';
COMMENT ON COLUMN profile_entries.entry_id IS 'Entry id.';
COMMENT ON COLUMN profile_entries.agent IS 'Whose memory.';
COMMENT ON COLUMN profile_entries.user_name IS 'The user it is about.';
COMMENT ON COLUMN profile_entries.category IS 'preference, personal, style, goal, fact or relationship.';
COMMENT ON COLUMN profile_entries.predicate IS 'The relation: lives_in, works_at, likes, sibling, goal ...';
COMMENT ON COLUMN profile_entries.object IS 'Its value, as written.';
COMMENT ON COLUMN profile_entries.text IS 'The entry as a sentence: Priya lives in Lisbon.';
COMMENT ON COLUMN profile_entries.negated IS 'Whether the user said it is not so.';
COMMENT ON COLUMN profile_entries.confidence IS 'How sure the extraction is, 0 to 1.';
COMMENT ON COLUMN profile_entries.source_mkeys IS 'The messages that state it (messages.mkey), oldest first.';
COMMENT ON COLUMN profile_entries.created_at IS 'When first stated (UTC).';
COMMENT ON COLUMN profile_entries.confirmed_at IS 'When last stated or confirmed (UTC).';
COMMENT ON COLUMN profile_entries.superseded_by IS 'The entry that replaced it; NULL while it holds.';
COMMENT ON COLUMN profile_entries.superseded_at IS 'When it was replaced.';

CREATE TABLE IF NOT EXISTS observations (
    observation_id BIGINT PRIMARY KEY,
    agent VARCHAR NOT NULL,
    room VARCHAR NOT NULL,
    ts TIMESTAMP,
    kind VARCHAR NOT NULL CHECK (kind IN ('decision', 'open_question', 'interest')),
    topic VARCHAR NOT NULL,
    insight VARCHAR NOT NULL,
    importance DOUBLE NOT NULL,
    source_mkeys BIGINT[] NOT NULL,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE observations IS 'Conversation observations: decisions made, questions left open, topics of strong interest, each resting on messages.';
COMMENT ON COLUMN observations.observation_id IS 'Observation id.';
COMMENT ON COLUMN observations.agent IS 'Whose memory.';
COMMENT ON COLUMN observations.room IS 'The conversation (room).';
COMMENT ON COLUMN observations.ts IS 'When it happened (the time of its last source message).';
COMMENT ON COLUMN observations.kind IS 'decision, open_question or interest.';
COMMENT ON COLUMN observations.topic IS 'What it is about.';
COMMENT ON COLUMN observations.insight IS 'The observation as a sentence.';
COMMENT ON COLUMN observations.importance IS 'How much it matters, 0 to 1.';
COMMENT ON COLUMN observations.source_mkeys IS 'The messages it rests on (messages.mkey).';
COMMENT ON COLUMN observations.created_at IS 'When it was made (UTC).';

CREATE TABLE IF NOT EXISTS room_summaries (
    summary_id BIGINT PRIMARY KEY,
    agent VARCHAR NOT NULL,
    room VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    source_mkeys BIGINT[] NOT NULL,
    first_ordinal INTEGER NOT NULL,
    last_ordinal INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE room_summaries IS 'Compaction: older messages of a room summarised; the messages stay stored and searchable.';
COMMENT ON COLUMN room_summaries.summary_id IS 'Summary id.';
COMMENT ON COLUMN room_summaries.agent IS 'Whose memory.';
COMMENT ON COLUMN room_summaries.room IS 'The conversation (room).';
COMMENT ON COLUMN room_summaries.text IS 'The summary.';
COMMENT ON COLUMN room_summaries.method IS 'llm, or extractive (from the extracted topics and actions, offline).';
COMMENT ON COLUMN room_summaries.source_mkeys IS 'The messages it covers (messages.mkey).';
COMMENT ON COLUMN room_summaries.first_ordinal IS 'Ordinal of the first message covered.';
COMMENT ON COLUMN room_summaries.last_ordinal IS 'Ordinal of the last message covered.';
COMMENT ON COLUMN room_summaries.created_at IS 'When it was made (UTC).';

CREATE TABLE IF NOT EXISTS documents (
    document_id VARCHAR PRIMARY KEY,
    agent VARCHAR,
    shared BOOLEAN NOT NULL,
    path VARCHAR NOT NULL,
    title VARCHAR,
    format VARCHAR NOT NULL,
    sha256 VARCHAR NOT NULL,
    chars INTEGER NOT NULL,
    pages INTEGER,
    metadata JSON NOT NULL,
    added_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE documents IS 'Knowledge documents (PDF, Markdown, text, DOCX, HTML, JSON), shared or one agent''s; their fragments are memories in the knowledge table.';
COMMENT ON COLUMN documents.document_id IS 'Deterministic from the path relative to the knowledge root, the shared flag and the agent.';
COMMENT ON COLUMN documents.agent IS 'The agent whose knowledge it is; NULL when shared.';
COMMENT ON COLUMN documents.shared IS 'Whether every agent may read it.';
COMMENT ON COLUMN documents.path IS 'The path it was added from (relative to the knowledge root when one was given), or a label for inline text.';
COMMENT ON COLUMN documents.title IS 'Its title, when it has one.';
COMMENT ON COLUMN documents.format IS 'pdf, markdown, text, docx, html, json or inline.';
COMMENT ON COLUMN documents.sha256 IS 'sha256 of the bytes read: an unchanged file is not added again.';
COMMENT ON COLUMN documents.chars IS 'Length of its text, in characters.';
COMMENT ON COLUMN documents.pages IS 'Pages (PDF).';
COMMENT ON COLUMN documents.metadata IS 'Other metadata (JSON).';
COMMENT ON COLUMN documents.added_at IS 'When it was added or last replaced (UTC).';

CREATE TABLE IF NOT EXISTS fragments (
    mkey BIGINT PRIMARY KEY,
    document_id VARCHAR NOT NULL,
    fragment_index INTEGER NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    section VARCHAR[] NOT NULL
);
COMMENT ON TABLE fragments IS 'Where each fragment (a knowledge memory) sits in its document.';
COMMENT ON COLUMN fragments.mkey IS 'The fragment (messages.mkey); its message_id is <document id>-chunk-<index>.';
COMMENT ON COLUMN fragments.document_id IS 'Its document (documents.document_id).';
COMMENT ON COLUMN fragments.fragment_index IS 'Order in the document, from 0.';
COMMENT ON COLUMN fragments.start_char IS 'Start in the document text (code points, from 0).';
COMMENT ON COLUMN fragments.end_char IS 'End in the document text, exclusive.';
COMMENT ON COLUMN fragments.tokens IS 'Its length in tokens (cl100k_base).';
COMMENT ON COLUMN fragments.page_start IS 'The page it starts on (PDF).';
COMMENT ON COLUMN fragments.page_end IS 'The page it ends on (PDF).';
COMMENT ON COLUMN fragments.section IS 'Its section path: headings (Markdown, DOCX, HTML) or the JSON path.';

CREATE TABLE IF NOT EXISTS commits (
    generation BIGINT PRIMARY KEY,
    committed_at TIMESTAMP NOT NULL,
    first_new_mkey BIGINT,
    last_new_mkey BIGINT,
    changed BOOLEAN NOT NULL
);
COMMENT ON TABLE commits IS 'Internal: what each committed write did, so readers can update their caches instead of rebuilding them.';
COMMENT ON COLUMN commits.generation IS 'The generation the write committed.';
COMMENT ON COLUMN commits.committed_at IS 'When (UTC).';
COMMENT ON COLUMN commits.first_new_mkey IS 'The first message key it added (NULL when it added none).';
COMMENT ON COLUMN commits.last_new_mkey IS 'The last message key it added.';
COMMENT ON COLUMN commits.changed IS 'Whether it also edited or deleted messages (then caches are rebuilt).';

CREATE TABLE IF NOT EXISTS digests (
    conversation VARCHAR NOT NULL,
    part INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (conversation, part)
);
COMMENT ON TABLE digests IS 'Internal: per conversation, what a first question on it reads (its messages as arrays, refs, aliases, vocabulary, relation edges, vectors and rendered lines), written by the ingest that last wrote it and deleted by any other write to it.';
COMMENT ON COLUMN digests.conversation IS 'Conversation id.';
COMMENT ON COLUMN digests.part IS 'The part''s number, from 0 (a digest is stored in parts of at most 8,000 bytes: DuckDB reads a row of a larger blob several times slower).';
COMMENT ON COLUMN digests.data IS 'The part: the digest''s bytes (structrag.query.digest: a JSON header and numpy arrays, zlib-compressed) joined in part order.';

-- Views: the stable, documented way to read an index. Provenance columns are the same in
-- every knowledge view.

CREATE OR REPLACE VIEW v_messages AS
SELECT m.conversation, m.message_id, m.ts, m.speaker, m.recipients, m.text, m.tags,
       m.metadata, m.ordinal
FROM messages m WHERE m.memory_table = 'messages';
COMMENT ON VIEW v_messages IS 'Every message of a conversation: conversation, message_id, ts, speaker, recipients, text (and tags, metadata, ordinal). Other memories (facts, goals, knowledge) are in v_memories.';
COMMENT ON COLUMN v_messages.conversation IS 'Conversation id.';
COMMENT ON COLUMN v_messages.message_id IS 'Message id within the conversation.';
COMMENT ON COLUMN v_messages.ts IS 'When it was written.';
COMMENT ON COLUMN v_messages.speaker IS 'Who wrote or said it.';
COMMENT ON COLUMN v_messages.recipients IS 'Who it was addressed to.';
COMMENT ON COLUMN v_messages.text IS 'The message text.';
COMMENT ON COLUMN v_messages.tags IS 'Labels from the input.';
COMMENT ON COLUMN v_messages.metadata IS 'Other input fields (JSON).';
COMMENT ON COLUMN v_messages.ordinal IS 'Position in the conversation, from 0.';

CREATE OR REPLACE VIEW v_memories AS
SELECT m.agent, m.memory_table, m.conversation AS room, m.world, m.message_id AS memory_id,
       m.speaker AS user_name, m.text, m.ts, m.created_at, m.importance, m.status,
       m.metadata, coalesce(a.access_count, 0) AS access_count, a.last_access
FROM messages m LEFT JOIN memory_access a USING (mkey);
COMMENT ON VIEW v_memories IS 'Every memory of every agent (ingested messages have no agent): which memory table, room and world, who said it, the text, times, importance, goal status and how often it was read.';
COMMENT ON COLUMN v_memories.agent IS 'Whose memory (NULL: ingested for everyone).';
COMMENT ON COLUMN v_memories.memory_table IS 'messages, facts, relationships, goals or knowledge.';
COMMENT ON COLUMN v_memories.room IS 'The room (conversation).';
COMMENT ON COLUMN v_memories.world IS 'The group of rooms, when used.';
COMMENT ON COLUMN v_memories.memory_id IS 'The memory id (a message id for messages).';
COMMENT ON COLUMN v_memories.user_name IS 'Who said or stated it.';
COMMENT ON COLUMN v_memories.text IS 'The memory text.';
COMMENT ON COLUMN v_memories.ts IS 'When it was said.';
COMMENT ON COLUMN v_memories.created_at IS 'When it was stored.';
COMMENT ON COLUMN v_memories.importance IS 'low, normal or high.';
COMMENT ON COLUMN v_memories.status IS 'A goal''s status.';
COMMENT ON COLUMN v_memories.metadata IS 'Other fields (JSON).';
COMMENT ON COLUMN v_memories.access_count IS 'How often it was read through the memory API.';
COMMENT ON COLUMN v_memories.last_access IS 'When it was last read.';

CREATE OR REPLACE VIEW v_fragments AS
SELECT f.document_id, m.message_id AS fragment_id, f.fragment_index, d.path, d.title,
       f.page_start AS page, f.page_end, f.section, f.start_char, f.end_char, f.tokens,
       m.text, d.agent, d.shared
FROM fragments f JOIN messages m USING (mkey) JOIN documents d USING (document_id)
ORDER BY f.document_id, f.fragment_index;
COMMENT ON VIEW v_fragments IS 'Knowledge fragments in document order: SELECT * FROM v_fragments WHERE document_id = ? lists a document''s.';
COMMENT ON COLUMN v_fragments.document_id IS 'The document.';
COMMENT ON COLUMN v_fragments.fragment_id IS '<document id>-chunk-<index>.';
COMMENT ON COLUMN v_fragments.fragment_index IS 'Order in the document, from 0.';
COMMENT ON COLUMN v_fragments.path IS 'The document''s path.';
COMMENT ON COLUMN v_fragments.title IS 'The document''s title.';
COMMENT ON COLUMN v_fragments.page IS 'The page it starts on (PDF).';
COMMENT ON COLUMN v_fragments.page_end IS 'The page it ends on (PDF).';
COMMENT ON COLUMN v_fragments.section IS 'Its section path (headings, or a JSON path).';
COMMENT ON COLUMN v_fragments.start_char IS 'Start in the document text.';
COMMENT ON COLUMN v_fragments.end_char IS 'End in the document text, exclusive.';
COMMENT ON COLUMN v_fragments.tokens IS 'Length in tokens (cl100k_base).';
COMMENT ON COLUMN v_fragments.text IS 'The fragment text.';
COMMENT ON COLUMN v_fragments.agent IS 'The agent it belongs to; NULL when shared.';
COMMENT ON COLUMN v_fragments.shared IS 'Whether every agent may read it.';

CREATE OR REPLACE VIEW v_entities AS
SELECT r.conversation, r.message_id, m.ts, m.speaker,
       e.name, e.name_lower, e.types,
       r.span_start, r.span_end, substr(m.text, r.span_start + 1, r.span_end - r.span_start) AS span_text,
       r.extractor, r.ref_id, m.memory_table
FROM entities e
JOIN semantic_refs r USING (ref_id)
JOIN messages m ON m.mkey = r.mkey;
COMMENT ON VIEW v_entities IS 'Every entity mention with its provenance: the message, its time and speaker, and the span. Knowledge of agents'' memories and of documents too: memory_table = ''messages'' keeps a conversation''s messages only.';
COMMENT ON COLUMN v_entities.conversation IS 'Conversation id.';
COMMENT ON COLUMN v_entities.message_id IS 'The message that mentions it.';
COMMENT ON COLUMN v_entities.ts IS 'When the message was written.';
COMMENT ON COLUMN v_entities.speaker IS 'Who wrote it.';
COMMENT ON COLUMN v_entities.name IS 'The name as written.';
COMMENT ON COLUMN v_entities.name_lower IS 'The name in lower case.';
COMMENT ON COLUMN v_entities.types IS 'Types, most specific first.';
COMMENT ON COLUMN v_entities.span_start IS 'Start of the span in the message text (code points, from 0).';
COMMENT ON COLUMN v_entities.span_end IS 'End of the span, exclusive.';
COMMENT ON COLUMN v_entities.span_text IS 'The text of the span.';
COMMENT ON COLUMN v_entities.extractor IS 'spacy, llm, metadata (the speaker and recipients) or the importer.';
COMMENT ON COLUMN v_entities.ref_id IS 'Id of the semantic ref (for joins with entity_facets).';
COMMENT ON COLUMN v_entities.memory_table IS 'What it was extracted from: messages (a conversation''s messages, the rows of v_messages), facts, relationships or goals (an agent''s memories, v_memories), or knowledge (a document''s fragments, v_fragments).';

CREATE OR REPLACE VIEW v_actions AS
SELECT r.conversation, r.message_id, m.ts, m.speaker,
       a.subject, a.verb, a.object, a.indirect_object, a.tense, a.negated,
       r.span_start, r.span_end, substr(m.text, r.span_start + 1, r.span_end - r.span_start) AS span_text,
       r.extractor, r.ref_id, m.memory_table
FROM actions a
JOIN semantic_refs r USING (ref_id)
JOIN messages m ON m.mkey = r.mkey;
COMMENT ON VIEW v_actions IS 'Every action (subject - verb - object - indirect object) with its provenance. Knowledge of agents'' memories and of documents too: memory_table = ''messages'' keeps a conversation''s messages only.';
COMMENT ON COLUMN v_actions.conversation IS 'Conversation id.';
COMMENT ON COLUMN v_actions.message_id IS 'The message that says it.';
COMMENT ON COLUMN v_actions.ts IS 'When the message was written.';
COMMENT ON COLUMN v_actions.speaker IS 'Who wrote it.';
COMMENT ON COLUMN v_actions.subject IS 'Who or what does it.';
COMMENT ON COLUMN v_actions.verb IS 'The verb lemma (with its particle: sign up).';
COMMENT ON COLUMN v_actions.object IS 'What it is done to.';
COMMENT ON COLUMN v_actions.indirect_object IS 'To or for whom.';
COMMENT ON COLUMN v_actions.tense IS 'past, present or future.';
COMMENT ON COLUMN v_actions.negated IS 'Whether the message says it did not happen.';
COMMENT ON COLUMN v_actions.span_start IS 'Start of the span in the message text (code points, from 0).';
COMMENT ON COLUMN v_actions.span_end IS 'End of the span, exclusive.';
COMMENT ON COLUMN v_actions.span_text IS 'The text of the span.';
COMMENT ON COLUMN v_actions.extractor IS 'spacy, llm, metadata (speaker say to recipient) or the importer.';
COMMENT ON COLUMN v_actions.ref_id IS 'Id of the semantic ref (for joins with action_params).';
COMMENT ON COLUMN v_actions.memory_table IS 'What it was extracted from: messages (a conversation''s messages, the rows of v_messages), facts, relationships or goals (an agent''s memories, v_memories), or knowledge (a document''s fragments, v_fragments).';

CREATE OR REPLACE VIEW v_topics AS
SELECT r.conversation, r.message_id, m.ts, m.speaker,
       t.text AS topic, lower(t.text) AS topic_lower,
       r.span_start, r.span_end, substr(m.text, r.span_start + 1, r.span_end - r.span_start) AS span_text,
       r.extractor, r.ref_id, m.memory_table
FROM topics t
JOIN semantic_refs r USING (ref_id)
JOIN messages m ON m.mkey = r.mkey;
COMMENT ON VIEW v_topics IS 'Every topic (key phrase) with its provenance. Knowledge of agents'' memories and of documents too: memory_table = ''messages'' keeps a conversation''s messages only.';
COMMENT ON COLUMN v_topics.conversation IS 'Conversation id.';
COMMENT ON COLUMN v_topics.message_id IS 'The message it comes from.';
COMMENT ON COLUMN v_topics.ts IS 'When the message was written.';
COMMENT ON COLUMN v_topics.speaker IS 'Who wrote it.';
COMMENT ON COLUMN v_topics.topic IS 'The phrase as written.';
COMMENT ON COLUMN v_topics.topic_lower IS 'The phrase in lower case.';
COMMENT ON COLUMN v_topics.span_start IS 'Start of the span in the message text (code points, from 0).';
COMMENT ON COLUMN v_topics.span_end IS 'End of the span, exclusive.';
COMMENT ON COLUMN v_topics.span_text IS 'The text of the span.';
COMMENT ON COLUMN v_topics.extractor IS 'spacy, llm or the importer.';
COMMENT ON COLUMN v_topics.ref_id IS 'Id of the semantic ref.';
COMMENT ON COLUMN v_topics.memory_table IS 'What it was extracted from: messages (a conversation''s messages, the rows of v_messages), facts, relationships or goals (an agent''s memories, v_memories), or knowledge (a document''s fragments, v_fragments).';

CREATE OR REPLACE VIEW v_facets AS
SELECT r.conversation, r.message_id, m.ts, m.speaker,
       e.name AS entity, f.name AS facet, f.value, f.number, f.units,
       r.span_start, r.span_end, substr(m.text, r.span_start + 1, r.span_end - r.span_start) AS span_text,
       r.extractor, r.ref_id, m.memory_table
FROM entity_facets f
JOIN entities e USING (ref_id)
JOIN semantic_refs r USING (ref_id)
JOIN messages m ON m.mkey = r.mkey;
COMMENT ON VIEW v_facets IS 'Every entity facet (owner, count, quality, job ...) with the entity and its provenance. Knowledge of agents'' memories and of documents too: memory_table = ''messages'' keeps a conversation''s messages only.';
COMMENT ON COLUMN v_facets.conversation IS 'Conversation id.';
COMMENT ON COLUMN v_facets.message_id IS 'The message it comes from.';
COMMENT ON COLUMN v_facets.ts IS 'When the message was written.';
COMMENT ON COLUMN v_facets.speaker IS 'Who wrote it.';
COMMENT ON COLUMN v_facets.entity IS 'The entity''s name as written.';
COMMENT ON COLUMN v_facets.facet IS 'Facet name.';
COMMENT ON COLUMN v_facets.value IS 'Facet value as text.';
COMMENT ON COLUMN v_facets.number IS 'The value when it is a number.';
COMMENT ON COLUMN v_facets.units IS 'Units of a numeric value.';
COMMENT ON COLUMN v_facets.span_start IS 'Start of the entity''s span in the message text (code points, from 0).';
COMMENT ON COLUMN v_facets.span_end IS 'End of the span, exclusive.';
COMMENT ON COLUMN v_facets.span_text IS 'The text of the span.';
COMMENT ON COLUMN v_facets.extractor IS 'spacy, llm or the importer.';
COMMENT ON COLUMN v_facets.ref_id IS 'Id of the entity''s semantic ref.';
COMMENT ON COLUMN v_facets.memory_table IS 'What it was extracted from: messages (a conversation''s messages, the rows of v_messages), facts, relationships or goals (an agent''s memories, v_memories), or knowledge (a document''s fragments, v_fragments).';
