"""TypeAgent / KnowPro index files (``*_index_data.json``, microsoft/typeagent-py).

Imports the messages (``textChunks`` joined by newlines, ``metadata.speaker`` and
``listeners``/``recipients``, ``tags``, ``timestamp``) and the LLM-extracted
``semanticRefs`` as knowledge, so an index built by an LLM elsewhere can be queried here.
Message ids are the KnowPro message ordinals (``"0"``, ``"1"`` ...). KnowPro locates
knowledge to a text chunk, not a character range, so each imported ref's span is the first
occurrence of its name (or topic text) in that chunk, or the whole chunk when the text is
not there verbatim. The extractor is recorded as ``typeagent`` with the file's version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    clean_text,
    expect,
    finish,
    parse_json,
    str_list,
)
from structrag.models import (
    Action,
    Conversation,
    Entity,
    Facet,
    Knowledge,
    SemanticRef,
    Span,
    Tag,
    Tense,
    Topic,
)
from structrag.timeparse import parse_datetime

EXTRACTOR = "typeagent"
_NONE = {None, "", "none"}
_TENSES: dict[str, Tense] = {"past": "past", "present": "present", "future": "future"}


def looks_like_typeagent(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    msgs = data.get("messages")
    return "semanticRefs" in data or (
        isinstance(msgs, list)
        and bool(msgs)
        and isinstance(msgs[0], dict)
        and "textChunks" in msgs[0]
    )


def load_typeagent(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    expect(path, data, dict, "the top level", "a TypeAgent index")
    messages = expect(path, data.get("messages"), list, "messages", "'messages'")
    conv_id = options.conversation or str(data.get("nameTag") or path.stem)
    raws: list[RawMessage] = []
    chunk_starts: list[list[int]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        expect(path, msg, dict, where, "a message")
        chunks = expect(path, msg.get("textChunks"), list, f"{where}.textChunks", "textChunks")
        starts, parts, offset = [], [], 0
        for c, chunk in enumerate(chunks):
            expect(path, chunk, str, f"{where}.textChunks[{c}]", "a text chunk")
            starts.append(offset)
            parts.append(chunk)
            offset += len(chunk) + 1
        meta = msg.get("metadata") or {}
        expect(path, meta, dict, f"{where}.metadata", "metadata")
        speaker = meta.get("speaker")
        recipients = meta.get("listeners", meta.get("recipients"))
        extra = {k: v for k, v in meta.items() if k not in ("speaker", "listeners", "recipients")}
        raws.append(
            RawMessage(
                text="\n".join(parts),
                location=where,
                id=str(i),
                speaker=str(speaker) if speaker else None,
                recipients=str_list(path, recipients, f"{where}.metadata.listeners"),
                timestamp=msg.get("timestamp"),
                tags=str_list(path, msg.get("tags"), f"{where}.tags"),
                metadata=extra,
            )
        )
        chunk_starts.append(starts)
    header = expect(path, data.get("fileHeader") or {}, dict, "fileHeader", "fileHeader")
    version = str(header.get("version", "0"))
    conversation = Conversation(
        id=conv_id,
        name=str(data.get("nameTag")) if data.get("nameTag") else None,
        metadata={"source": str(path), "format": "typeagent", "tags": data.get("tags") or []},
    )
    source = finish(
        path,
        "typeagent",
        conversation,
        raws,
        parse_time=parse_datetime,
        default_recipients=False,
    )
    texts = [m.text for m in source.messages]
    refs = data.get("semanticRefs") or []
    expect(path, refs, list, "semanticRefs", "'semanticRefs'")
    skipped = 0
    for r, ref in enumerate(refs):
        where = f"semanticRefs[{r}]"
        expect(path, ref, dict, where, "a semantic ref")
        text_range = expect(path, ref.get("range") or {}, dict, f"{where}.range", "a range")
        start = expect(
            path, text_range.get("start") or {}, dict, f"{where}.range.start", "a location"
        )
        ordinal = start.get("messageOrdinal")
        chunk = start.get("chunkOrdinal", 0) or 0
        if not isinstance(ordinal, int) or not 0 <= ordinal < len(texts):
            raise InputError(path, f"at {where}.range: messageOrdinal {ordinal!r} is not a message")
        if not isinstance(chunk, int) or not 0 <= chunk < len(chunk_starts[ordinal]):
            raise InputError(path, f"at {where}.range: chunkOrdinal {chunk!r} is not a chunk")
        knowledge = _knowledge(path, ref, where)
        if knowledge is None:
            skipped += 1
            continue
        chunk_begin = chunk_starts[ordinal][chunk]
        chunk_text = messages[ordinal]["textChunks"][chunk]
        span = _locate(knowledge, chunk_text, chunk_begin, len(texts[ordinal]))
        source.knowledge.append(
            SemanticRef(
                conversation=conv_id,
                message_id=str(ordinal),
                span=span,
                knowledge=knowledge,
                extractor=EXTRACTOR,
                extractor_version=version,
            )
        )
    if skipped:
        source.warnings.append(f"{path}: {skipped} semantic ref(s) of unknown kind skipped")
    return source


def _locate(knowledge: Knowledge, chunk: str, begin: int, text_len: int) -> Span:
    needle = ""
    if isinstance(knowledge, Entity):
        needle = knowledge.name
    elif isinstance(knowledge, Topic | Tag):
        needle = knowledge.text
    elif isinstance(knowledge, Action) and knowledge.verbs:
        needle = knowledge.verbs[0]
    at = chunk.lower().find(needle.lower()) if needle else -1
    if at >= 0:
        return Span(start=begin + at, end=begin + at + len(needle))
    return Span(start=min(begin, text_len), end=min(begin + len(chunk), text_len))


def _facet(path: Path, value: Any, where: str) -> Facet:
    expect(path, value, dict, where, "a facet")
    name = str(value.get("name", "")).strip() or "value"
    raw = value.get("value")
    units = None
    if isinstance(raw, dict):
        units = raw.get("units")
        raw = raw.get("amount")
    if not isinstance(raw, str | int | float | bool):
        raw = "" if raw is None else str(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = float(raw)
    return Facet(name=name, value=raw, units=str(units) if units else None)


def _name(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
        return None
    return str(value).strip()


def _knowledge(path: Path, ref: dict[str, Any], where: str) -> Knowledge | None:
    kind = ref.get("knowledgeType")
    body: dict[str, Any] = expect(
        path, ref.get("knowledge"), dict, f"{where}.knowledge", "knowledge"
    )
    if kind == "entity":
        types = str_list(path, body.get("type"), f"{where}.knowledge.type")
        facets = tuple(
            _facet(path, f, f"{where}.knowledge.facets[{i}]")
            for i, f in enumerate(body.get("facets") or [])
        )
        name = clean_text(str(body.get("name") or ""))
        if not name:
            return None
        return Entity(name=name, types=tuple(t.lower() for t in types), facets=facets)
    if kind == "action":
        verbs = str_list(path, body.get("verbs"), f"{where}.knowledge.verbs")
        tense = str(body.get("verbTense") or body.get("verb_tense") or "present").lower()
        params: list[Facet] = []
        for i, param in enumerate(body.get("params") or []):
            if isinstance(param, str):
                params.append(Facet(name="detail", value=param))
            else:
                params.append(_facet(path, param, f"{where}.knowledge.params[{i}]"))
        subject_facet = body.get("subjectEntityFacet")
        if isinstance(subject_facet, dict):
            facet = _facet(path, subject_facet, f"{where}.knowledge.subjectEntityFacet")
            params.append(facet.model_copy(update={"name": f"subject {facet.name}"}))
        return Action(
            verbs=tuple(v.lower() for v in verbs) or ("do",),
            tense=_TENSES.get(tense, "present"),
            subject=_name(body.get("subjectEntityName")),
            object=_name(body.get("objectEntityName")),
            indirect_object=_name(body.get("indirectObjectEntityName")),
            params=tuple(params),
        )
    if kind in ("topic", "tag"):
        text = clean_text(str(body.get("text") or ""))
        if not text:
            return None
        return Topic(text=text) if kind == "topic" else Tag(text=text)
    return None
