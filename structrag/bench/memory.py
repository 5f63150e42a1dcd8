"""Agent memory, measured: how fast the memory API is at scale, and how well its search
finds LoCoMo's evidence when the conversations are replayed live.

**Speed.** For each size, an index holds that many memories of agent ``bench``: a
synthetic corpus (:func:`structrag.bench.synth.write_corpus`, LoCoMo conversations
replicated with renamed speakers) loaded with ``Index.ingest(..., agent="bench")``. It is
kept under ``OUT/indexes/<size>`` and reused on the next run once complete, as long as
the data files hold the same bytes (their SHA-256 is part of the key). Measured on
it: ``Memory.add`` (a short chat message from one of several users into one of several
rooms, extracted and searchable on return), ``Memory.search`` in each mode over all the
agent's memories (LoCoMo's questions), ``Memory.context`` (budget 2,000, a room of the
corpus), and ``Memory.prune``: a dry run over every memory (examined per second) and a
real prune of the memories the timed adds wrote (removed per second, which also leaves
the index as it was for the next run).

**Quality.** Each conversation of the data is replayed message by message through
``Memory.add`` (one agent, each speaker a user, each conversation a room, each message
with its LoCoMo ``dia_id`` as memory id and its session date as timestamp, so evidence
ids are memory ids). Every question with evidence is searched in its conversation's room
in each mode; the hits, in rank order, are packed into 1,000 tokens by the context builder
``ask`` and ``bench recall`` use (same rendered lines, same cl100k counter), and a
question's recall is the share of its evidence in the packed context (0 over budget).
The reference is ``Index.ask(question, conversation=..., budget=1000)`` on an index of the
same file ingested in one batch (``bench recall``'s structured system), and ``ask`` on
the replayed index. The replay also reports how many user-profile entries the offline
statement extractor made, with a few of them and the messages that state them.

Written to the output directory: ``memory.json`` (everything), ``memory.md`` (the
tables), ``memory_quality.jsonl`` (one line per system and question: ids, no text).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structrag.bench.locomo import Question, check_distinct, in_sample_note, load_questions
from structrag.bench.machine import environment
from structrag.bench.output import Outputs, prepare_out
from structrag.bench.perf import percentiles
from structrag.bench.recall import as_paths, limit_questions, markdown_table, score_records
from structrag.bench.synth import write_corpus
from structrag.errors import ConfigError
from structrag.importers import load_source
from structrag.importers.base import file_sha256
from structrag.index import Index
from structrag.ingest import ProgressSink
from structrag.memory.store import MemoryQuery
from structrag.query.context import RankedMessage, build_context
from structrag.query.modes import SEARCH_MODES
from structrag.tokens import get_counter

DEFAULT_SIZES = (1000, 10_000, 100_000)
DEFAULT_SAMPLES = 100
AGENT = "bench"
REPLAY_AGENT = "locomo-replay"
BUDGET = 1000
CONTEXT_BUDGET = 2000
#: How many hits a quality search asks for (more than 1,000 tokens hold).
SEARCH_COUNT = 100
RECORDS = "memory_quality.jsonl"
#: The targets the speed figures are reported against (milliseconds, p50).
TARGETS = {"add_p50_ms": 25.0, "search_p50_ms": 15.0, "context_p50_ms": 50.0}
#: Structured memory search should be within this much of ``ask``'s recall.
ASK_TOLERANCE = 0.01

# Short chat messages of the kind an assistant receives (our own text).
CHAT = (
    "Hey, can you remind me what time the dentist appointment is tomorrow?",
    "I moved to Lisbon last month and I'm still looking for a good gym.",
    "My sister Ana is visiting next weekend, any ideas for dinner?",
    "I prefer short answers, please.",
    "Did I tell you I started learning the guitar?",
    "Work was rough today, the release slipped again.",
    "Can you book a table for two at 8pm on Friday?",
    "I have a dog named Biscuit and he hates the rain.",
    "What was the name of that podcast I liked about history?",
    "I want to run a half marathon this autumn.",
    "Remind me to call my landlord about the heating.",
    "We finally picked a name for the project: Lighthouse.",
    "I work at Acme now, in the data team.",
    "Thanks, that recipe worked out great!",
    "Is it going to rain in Porto on Saturday?",
    "I'm allergic to peanuts, keep that in mind for restaurant picks.",
    "Let's move our weekly sync to Thursday mornings.",
    "My flight to Berlin leaves at 6am, ugh.",
    "I just finished reading Dune and loved it.",
    "Can you summarise what we decided about the budget?",
)
USERS = ("priya", "marco", "lena", "tomas", "yuki")
ROOMS = ("live-1", "live-2", "live-3", "live-4", "live-5")


def _timed(seconds: list[float], started: float) -> None:
    seconds.append(time.perf_counter() - started)


def _build(data: Sequence[Path], size: int, out: Path, progress: ProgressSink | None) -> Path:
    """The index of ``size`` memories of agent ``bench``, built once (a marker beside the
    index says it is complete and what it was built from: the data files' names and the
    SHA-256 of their bytes, so an index of data that has changed since is built again)."""
    directory = out / "indexes" / str(size)
    marker = out / "indexes" / f"{size}.complete.json"
    signature = {
        "size": size,
        "data": [str(p) for p in data],
        "sha256": [file_sha256(Path(p)) for p in data],
        "agent": AGENT,
    }
    if marker.exists() and directory.exists() and _signature(marker) == signature:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    marker.unlink(missing_ok=True)
    shards = write_corpus(data, size, out / "corpus" / str(size))
    started = time.perf_counter()
    with Index(directory) as index:
        index.ingest(shards, agent=AGENT, workers=2, progress=progress)
        messages = index.memory(AGENT).count(table="messages")
    seconds = time.perf_counter() - started
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(
        json.dumps(
            {
                "signature": signature,
                "messages": messages,
                "seconds": round(seconds, 1),
                "messages_per_second": round(messages / seconds, 1),
            },
            indent=2,
        )
    )
    return directory


def _signature(marker: Path) -> Any:
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return info.get("signature") if isinstance(info, dict) else None


def measure_size(
    data: Sequence[Path],
    size: int,
    out: Path,
    *,
    samples: int = DEFAULT_SAMPLES,
    questions: Sequence[str],
    progress: ProgressSink | None = None,
) -> dict[str, Any]:
    """Speed figures at one size (see the module docstring)."""
    directory = _build(data, size, out, progress)
    built = json.loads((out / "indexes" / f"{size}.complete.json").read_text())
    searches = max(1, samples // 2)
    asked = [questions[i % len(questions)] for i in range(searches)]
    with Index(directory) as index:
        mem = index.memory(AGENT)
        preloaded = mem.count()
        rooms = [
            str(r[0])
            for r in index.sql(
                "SELECT DISTINCT conversation FROM messages WHERE agent = ? "
                "AND memory_table = 'messages' AND conversation NOT LIKE 'live-%' "
                "ORDER BY 1 LIMIT 20",
                [AGENT],
            )
        ]
        # Warm up (spaCy, tiktoken, the derived caches), untimed.
        mem.add("Warming up before the timed adds.", user=USERS[0], room=ROOMS[0])
        for mode in SEARCH_MODES:
            mem.search(asked[0], mode=mode)
        mem.context(asked[0], room=rooms[0], budget=CONTEXT_BUDGET)

        add: list[float] = []
        if progress:
            progress.start(samples, f"add ({size:,})")
        for i in range(samples):
            started = time.perf_counter()
            mem.add(CHAT[i % len(CHAT)], user=USERS[i % len(USERS)], room=ROOMS[i % len(ROOMS)])
            _timed(add, started)
            if progress:
                progress.advance(1)
        if progress:
            progress.finish()

        search: dict[str, dict[str, float]] = {}
        for mode in SEARCH_MODES:
            seconds: list[float] = []
            for question in asked:
                started = time.perf_counter()
                mem.search(question, mode=mode, count=10)
                _timed(seconds, started)
            search[mode] = percentiles(seconds)

        context: list[float] = []
        tokens: list[int] = []
        for i, question in enumerate(asked):
            started = time.perf_counter()
            window = mem.context(question, room=rooms[i % len(rooms)], budget=CONTEXT_BUDGET)
            _timed(context, started)
            tokens.append(window.tokens)

        examined = mem.count(table="messages")
        dry = mem.prune(older_than="0s", dry_run=True)
        live = sum(mem.count(room=room) for room in ROOMS)
        removed = 0
        real = 0.0
        for room in ROOMS:
            report = mem.prune(
                older_than="0s",
                room=room,
                table=None,
                keep_if_accessed_more_than=10**9,
                dry_run=False,
            )
            removed += len(report.removed)
            real += report.seconds
        left = sum(mem.count(room=room) for room in ROOMS)
    return {
        "size": size,
        "preloaded": preloaded,
        "build": {k: built[k] for k in ("messages", "seconds", "messages_per_second")},
        "add_ms": percentiles(add),
        "search_ms": search,
        "search_scope": "all of the agent's memories (no room), count=10",
        "context_ms": percentiles(context),
        "context_budget": CONTEXT_BUDGET,
        "context_tokens_max": max(tokens),
        "prune": {
            "dry_run_examined": examined,
            "dry_run_would_remove": len(dry.removed),
            "dry_run_seconds": round(dry.seconds, 4),
            "examined_per_second": round(examined / dry.seconds, 1) if dry.seconds else None,
            "live_memories": live,
            "removed": removed,
            "left": left,
            "seconds": round(real, 4),
            "removed_per_second": round(removed / real, 1) if real else None,
        },
    }


def _targets(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each target, the figure it is judged on and whether it is met (search at the
    largest size measured, the others at every size)."""
    if not rows:
        return {}
    largest = max(rows, key=lambda r: r["size"])
    add = max(r["add_ms"]["p50"] for r in rows)
    context = max(r["context_ms"]["p50"] for r in rows)
    search = {m: largest["search_ms"][m]["p50"] for m in SEARCH_MODES}
    return {
        "add_p50_ms": {"target": TARGETS["add_p50_ms"], "worst": add, "met": add <= 25.0},
        "search_p50_ms": {
            "target": TARGETS["search_p50_ms"],
            "size": largest["size"],
            "by_mode": search,
            "met": {m: v <= TARGETS["search_p50_ms"] for m, v in search.items()},
        },
        "context_p50_ms": {
            "target": TARGETS["context_p50_ms"],
            "worst": context,
            "met": context <= TARGETS["context_p50_ms"],
        },
    }


def _record(system: str, question: Question, context: Any) -> dict[str, Any]:
    return {
        "system": system,
        "qid": question.qid,
        "conversation": question.conversation,
        "category": question.category,
        "category_name": question.category_name,
        "budget": BUDGET,
        "tokens": context.tokens,
        "message_ids": list(context.message_ids),
        "evidence": list(question.evidence),
    }


def _replay(
    data: Sequence[Path], index: Index, progress: ProgressSink | None
) -> tuple[int, list[float]]:
    """Every message of the data through ``Memory.add``, in order; the add timings."""
    mem = index.memory(REPLAY_AGENT)
    messages = [m for path in data for m in load_source(path, format="locomo").messages]
    seconds: list[float] = []
    if progress:
        progress.start(len(messages), "replay")
    for message in messages:
        started = time.perf_counter()
        mem.add(
            message.text,
            user=message.speaker,
            room=message.conversation,
            id=message.id,
            timestamp=message.timestamp,
            metadata=message.metadata,
        )
        _timed(seconds, started)
        if progress:
            progress.advance(1)
    if progress:
        progress.finish()
    return len(messages), seconds


def _profile(index: Index, sample: int = 5) -> dict[str, Any]:
    """The profile entries the replay made, and a few of them with their source text."""
    mem = index.memory(REPLAY_AGENT)
    users = [
        str(r[0])
        for r in index.sql(
            "SELECT DISTINCT speaker FROM messages WHERE agent = ? AND speaker IS NOT NULL "
            "ORDER BY 1",
            [REPLAY_AGENT],
        )
    ]
    entries = [e for user in users for e in mem.profile(user, history=True)]
    entries.sort(key=lambda e: e.entry_id)
    step = max(1, len(entries) // sample)
    shown = []
    for entry in entries[::step][:sample]:
        source = mem.parts.memory.memories(
            MemoryQuery(REPLAY_AGENT, ids=entry.sources[:1], user=entry.user)
        )
        shown.append(
            {
                "user": entry.user,
                "category": entry.category,
                "entry": entry.text,
                "superseded": entry.superseded_by is not None,
                "source_id": entry.sources[0] if entry.sources else None,
                "source_text": source[0].text if source else None,
            }
        )
    categories: dict[str, int] = {}
    for entry in entries:
        categories[entry.category] = categories.get(entry.category, 0) + 1
    return {
        "entries": len(entries),
        "current": sum(e.superseded_by is None for e in entries),
        "users": len(users),
        "by_category": categories,
        "sample": shown,
    }


def measure_quality(
    data: Sequence[Path],
    out: Path,
    *,
    limit: int | None = None,
    progress: ProgressSink | None = None,
) -> dict[str, Any]:
    """LoCoMo replayed through the memory API, evidence recall per search mode against
    ``ask`` (see the module docstring)."""
    questions = limit_questions(load_questions(list(data)), limit)
    counter = get_counter("cl100k_base")
    folder = out / "quality"
    shutil.rmtree(folder, ignore_errors=True)
    records: list[dict[str, Any]] = []
    timings: dict[str, list[float]] = {}
    with Index(folder / "batch") as batch:
        batch.ingest(list(data), workers=2, progress=progress)
        for question in questions:
            answer = batch.ask(question.question, conversation=question.conversation, budget=BUDGET)
            records.append(_record("ask (batch index)", question, answer.context))
    with Index(folder / "replay") as index:
        replayed, add = _replay(data, index, progress)
        mem = index.memory(REPLAY_AGENT)
        engine = index.engine
        if progress:
            progress.start(len(questions), "questions")
        for question in questions:
            for mode in SEARCH_MODES:
                started = time.perf_counter()
                hits = mem.search(
                    question.question, room=question.conversation, mode=mode, count=SEARCH_COUNT
                )
                timings.setdefault(mode, []).append(time.perf_counter() - started)
                ranked = [
                    RankedMessage(h.memory.mkey, h.memory.room, h.memory.id, h.score, mode)
                    for h in hits
                ]
                context = build_context(
                    lambda keys: engine.lines(keys, counter), counter, ranked, [], BUDGET
                )
                records.append(_record(f"memory search {mode}", question, context))
            answer = index.ask(question.question, conversation=question.conversation, budget=BUDGET)
            records.append(_record("ask (replayed index)", question, answer.context))
            if progress:
                progress.advance(1)
        if progress:
            progress.finish()
        profile = _profile(index)
    with Outputs(out) as files:
        with files.path(RECORDS).open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        files.commit()
    rows = score_records(records)
    recall = {row.system: round(row.recall["overall"], 4) for row in rows}
    structured = recall.get("memory search structured", 0.0)
    ask = recall.get("ask (batch index)", 0.0)
    return {
        "budget": BUDGET,
        "questions": len(questions),
        "conversations": list(dict.fromkeys(q.conversation for q in questions)),
        "replayed_messages": replayed,
        "replay_add_ms": percentiles(add),
        "search_ms": {mode: percentiles(s) for mode, s in timings.items()},
        "recall": recall,
        "rows": [row.as_dict() for row in rows],
        "structured_minus_ask": round(structured - ask, 4),
        "within_tolerance": structured >= ask - ASK_TOLERANCE,
        "tolerance": ASK_TOLERANCE,
        "profile": profile,
        "table": markdown_table(rows),
    }


def run_memory(
    data: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    samples: int = DEFAULT_SAMPLES,
    limit: int | None = None,
    speed: bool = True,
    quality: bool = True,
    progress: ProgressSink | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark; writes ``memory.json`` and ``memory.md`` and returns the former."""
    data = as_paths(data)
    out = Path(out)
    if not data:
        raise ConfigError("no data files", hint="pass a LoCoMo-format file with --data")
    check_distinct(data)
    if not sizes or min(sizes) < 1:
        raise ConfigError("sizes must be positive numbers of memories", hint="e.g. 1000,10000")
    if samples < 2:
        raise ConfigError(f"--samples must be at least 2, not {samples}")
    if not (speed or quality):
        raise ConfigError("nothing to run", hint="leave out --skip-speed or --skip-quality")
    prepare_out(out)
    meta: dict[str, Any] = environment(command)
    meta.update(data=[str(p) for p in data], sizes=list(sizes), samples=samples)
    result: dict[str, Any] = {"meta": meta}
    if speed:
        questions = [q.question for q in load_questions(list(data))]
        if not questions:
            raise ConfigError("the data has no questions with evidence to search with")
        rows = [
            measure_size(data, size, out, samples=samples, questions=questions, progress=progress)
            for size in sizes
        ]
        result["speed"] = rows
        result["targets"] = _targets(rows)
    if quality:
        result["quality"] = measure_quality(data, out, limit=limit, progress=progress)
    with Outputs(out) as files:
        files.write_text("memory.json", json.dumps(result, indent=2) + "\n")
        files.write_text("memory.md", markdown(result))
        files.commit()
    return result


def _pair(figures: dict[str, Any]) -> str:
    return f"{figures['p50']:.1f} / {figures['p95']:.1f}"


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        "# Agent memory: speed and quality",
        "",
        f"Data: {', '.join(meta['data'])}. {meta['date']}, {meta['machine']['cores']} cores, "
        f"commit {meta['git_commit']}.",
    ]
    speed = result.get("speed")
    if speed:
        lines += [
            "",
            "## Speed",
            "",
            f"Each index holds SIZE memories of one agent (a synthetic LoCoMo corpus loaded "
            f"with `Index.ingest(..., agent=...)`). Milliseconds, p50 / p95: "
            f"{meta['samples']} adds (short chat messages, {len(USERS)} users, "
            f"{len(ROOMS)} rooms), {max(1, meta['samples'] // 2)} searches per mode over all "
            f"the agent's memories (LoCoMo questions, count 10), as many context windows "
            f"(budget {CONTEXT_BUDGET:,}). Prune: a dry run over every message memory "
            "(examined/s), then a real prune of the timed adds' memories (removed/s).",
            "",
            "| memories | add | search structured | text | vector | hybrid | context "
            "| prune dry run | prune |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in speed:
            prune = row["prune"]
            lines.append(
                f"| {row['preloaded']:,} | {_pair(row['add_ms'])} | "
                + " | ".join(_pair(row["search_ms"][m]) for m in SEARCH_MODES)
                + f" | {_pair(row['context_ms'])} | "
                f"{prune['examined_per_second']:,.0f}/s | {prune['removed_per_second']:,.0f}/s |"
            )
        targets = result["targets"]
        search = targets["search_p50_ms"]
        missed = [m for m, ok in search["met"].items() if not ok]
        lines += [
            "",
            "Targets: add p50 <= 25 ms: "
            + ("met" if targets["add_p50_ms"]["met"] else "**missed**")
            + f" (worst p50 {targets['add_p50_ms']['worst']:.1f} ms); search p50 <= 15 ms at "
            f"{search['size']:,}: "
            + (
                "met in every mode"
                if not missed
                else "**missed** in "
                + ", ".join(missed)
                + (", met in the others" if len(missed) < len(SEARCH_MODES) else "")
            )
            + "; context p50 <= 50 ms: "
            + ("met" if targets["context_p50_ms"]["met"] else "**missed**")
            + f" (worst p50 {targets['context_p50_ms']['worst']:.1f} ms).",
        ]
    quality = result.get("quality")
    if quality:
        recall = quality["recall"]
        gap = quality["structured_minus_ask"]
        profile = quality["profile"]
        lines += [
            "",
            "## Quality (LoCoMo replayed through `Memory.add`)",
            "",
            f"{quality['replayed_messages']:,} messages replayed one by one (add p50 / p95 "
            f"{_pair(quality['replay_add_ms'])} ms); {quality['questions']} questions with "
            f"evidence, each searched in its conversation's room and packed in rank order "
            f"into {quality['budget']:,} tokens. Recall: the share of the evidence in the "
            "context. `ask (batch index)` is `Index.ask` on the file ingested in one batch "
            "(`bench recall`'s structured system); it fills the budget its ranking leaves "
            "with the nearest messages by embedding, which memory search does not.",
            "",
            quality["table"].rstrip("\n"),
            "",
            f"Structured memory search minus ask: {gap:+.4f} "
            + (
                f"(within {quality['tolerance']})."
                if quality["within_tolerance"]
                else f"(**more than {quality['tolerance']} below ask**)."
            ),
            "",
            in_sample_note(quality.get("conversations"))[1],
            "",
            f"User profile: {profile['entries']} entries ({profile['current']} current) for "
            f"{profile['users']} users, by category "
            + ", ".join(f"{k} {v}" for k, v in sorted(profile["by_category"].items()))
            + ". A sample:",
            "",
        ]
        for item in profile["sample"]:
            lines.append(
                f'* {item["user"]}: "{item["entry"]}" <- {item["source_id"]}: '
                f'"{item["source_text"]}"'
            )
        del recall
    return "\n".join(lines) + "\n"
