"""Evidence recall: for every question, system and budget, the context and what it holds.

:func:`run_recall` ingests LoCoMo-format files into an index, asks every question with
evidence of every system at every budget, and writes to the output directory:

* ``recall.jsonl``: one line per (system, question, budget) with ``system``, ``qid``,
  ``question``, ``conversation``, ``category`` (LoCoMo's number), ``category_name``,
  ``budget``, ``context`` (the text), ``tokens`` (its token count), ``message_ids`` (the
  messages whose text is in the context, as ``Index.ask`` lists them), ``cut_ids`` (those
  of them whose line is cut short to its start: a best message longer than the budget)
  and ``evidence`` (the evidence message ids);
* ``recall.md`` and ``recall.json``: the table; ``recall.json`` holds ``meta`` (when,
  where and how the run was made: machine, commit, command, the data and its SHA-256,
  systems, budgets, encoding, ``limit``, ``workers``, the index's ``embeddings``, the
  ``ranking_settings`` of the structured system, the questions asked and what reading
  them found, ``setup_seconds`` and ``seconds_per_question`` per system, ``timing``
  saying what those include) and ``rows`` (one per system and budget).

Scoring needs only that JSONL (:func:`rescore`), so anyone can re-score a run:

* a question's recall is the share of its evidence ids among ``message_ids`` less
  ``cut_ids`` (a cut line does not count as finding its message), and 0 when ``tokens``
  exceeds ``budget``;
* a category's recall (and ``overall``) is the mean over its questions;
* ``all evidence`` is the share of questions whose evidence is all in the context.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.bench.locomo import (
    CATEGORIES,
    Question,
    QuestionSet,
    category_name,
    check_distinct,
    data_sha256,
    in_sample_note,
    ingest_paths,
    load_questions,
    question_number,
    read_questions,
)
from structrag.bench.machine import environment, settings_meta
from structrag.bench.output import Outputs, prepare_out, utf8_error, write_atomic
from structrag.bench.systems import DENSE_MODEL, SYSTEMS, check_systems, make_systems
from structrag.errors import ConfigError, InputError
from structrag.importers.base import read_json_lines
from structrag.index import Index
from structrag.ingest import ProgressSink
from structrag.query.context import MAX_BUDGET, AnswerContext

DEFAULT_BUDGETS = (500, 1000, 2000, 4000)
RECORDS = "recall.jsonl"


@dataclass
class Row:
    """Recall of one system at one budget."""

    system: str
    budget: int
    questions: int = 0
    recall: dict[str, float] = field(default_factory=dict)
    full: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    over_budget: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "budget": self.budget,
            "questions": self.questions,
            "recall": {k: round(v, 6) for k, v in self.recall.items()},
            "all_evidence": {k: round(v, 6) for k, v in self.full.items()},
            "questions_per_category": self.counts,
            "over_budget": self.over_budget,
        }


def record_recall(record: Mapping[str, Any]) -> float | None:
    """A record's evidence recall: 0 over budget; None when it has no evidence. A message
    in ``cut_ids`` (its line cut short to fit) counts as not found."""
    evidence = set(record["evidence"])
    if not evidence:
        return None
    if int(record["tokens"]) > int(record["budget"]):
        return 0.0
    found = set(record["message_ids"]) - set(record.get("cut_ids") or ())
    return len(evidence & found) / len(evidence)


def category_order(names: Iterable[str]) -> list[str]:
    known = [n for n in CATEGORIES.values() if n in names]
    return known + sorted(set(names) - set(known))


def score_records(records: Iterable[Mapping[str, Any]]) -> list[Row]:
    """The recall table of some records, one row per (system, budget) in first-seen order."""
    groups: dict[tuple[str, int], list[tuple[str, float, bool]]] = {}
    for record in records:
        value = record_recall(record)
        if value is None:
            continue
        name = record.get("category_name") or category_name(int(record["category"]))
        over = int(record["tokens"]) > int(record["budget"])
        key = (str(record["system"]), int(record["budget"]))
        groups.setdefault(key, []).append((str(name), value, over))
    rows: list[Row] = []
    for (system, budget), items in groups.items():
        row = Row(system, budget, questions=len(items))
        row.over_budget = sum(over for _, _, over in items)
        for name in category_order({n for n, _, _ in items}):
            values = [v for n, v, _ in items if n == name]
            row.recall[name] = statistics.fmean(values)
            row.full[name] = sum(v == 1.0 for v in values) / len(values)
            row.counts[name] = len(values)
        all_values = [v for _, v, _ in items]
        row.recall["overall"] = statistics.fmean(all_values)
        row.full["overall"] = sum(v == 1.0 for v in all_values) / len(all_values)
        row.counts["overall"] = len(all_values)
        rows.append(row)
    return rows


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a recall JSONL file, with positioned errors."""
    for _, record in numbered_records(path):
        yield record


RECORD_HINT = (
    "each line needs system, budget, category, tokens, message_ids and evidence "
    "(as written by `structrag bench recall`)"
)


def numbered_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a recall JSONL file and their line numbers; a record that lacks a
    field or has one of the wrong type is an error naming its line."""
    path = Path(path)
    required = ("system", "budget", "tokens", "message_ids", "evidence", "category")
    if not path.exists():
        raise InputError(path, "file not found", hint="run `structrag bench recall` first")
    lines = read_json_lines(path, "a recall record (a JSON object)")
    while True:
        try:
            lineno, record = next(lines)
        except StopIteration:
            return
        except InputError as exc:
            raise utf8_error(exc, path) from None
        missing = [k for k in required if k not in record]
        if missing:
            raise InputError(
                path, f"record lacks {', '.join(missing)}", line=lineno, hint=RECORD_HINT
            )
        _check_record(path, lineno, record)
        yield lineno, record


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_record(path: Path, lineno: int, record: Mapping[str, Any]) -> None:
    """The types :func:`score_records` relies on (``true`` is no number here)."""

    def bad(key: str, what: str) -> InputError:
        shown = json.dumps(record.get(key), ensure_ascii=False)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return InputError(path, f"{key} must be {what}, not {shown}", line=lineno, hint=RECORD_HINT)

    if not isinstance(record["system"], str):
        raise bad("system", "a string")
    for key in ("budget", "tokens"):
        if not _is_int(record[key]):
            raise bad(key, "an integer")
    for key in ("message_ids", "evidence"):
        value = record[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(key, "a list of strings")
    cut = record.get("cut_ids")
    if cut is not None and (not isinstance(cut, list) or not all(isinstance(v, str) for v in cut)):
        raise bad("cut_ids", "a list of strings")
    name = record.get("category_name")
    if name is not None and not isinstance(name, str):
        raise bad("category_name", "a string")
    if name is None and not _is_int(record["category"]):
        raise bad("category", "an integer (LoCoMo's number) when there is no category_name")
    qid = record.get("qid")
    if qid is not None and not isinstance(qid, str):
        raise bad("qid", "a string")


def rescore(
    path: Path, *, data: Sequence[str | Path] = (), recount: str | None = None
) -> tuple[list[Row], list[str]]:
    """Recompute the recall table from a JSONL file alone.

    With ``data`` (the LoCoMo files), each record's evidence and category are taken from
    the data rather than from the JSONL. With ``recount`` (a tiktoken encoding), token
    counts are recounted from the context text (a record without one is an error). A
    (system, question, budget) that appears twice is an error: it would count twice, and
    so is a file without records (or without a record with evidence to score).
    Returns the rows and notes on what disagreed with the file; a note that starts with
    ``warning:`` says that the systems (or budgets) cover different questions, so their
    rows are not comparable.
    """
    path = Path(path)
    counter = None
    if recount:
        from structrag.tokens import get_counter

        counter = get_counter(recount)  # an unknown encoding fails before any reading
    truth = (
        {q.qid: q for q in load_questions(list(data), with_evidence=False, require=False)}
        if data
        else {}
    )
    notes: list[str] = []
    changed = {"evidence": 0, "tokens": 0}
    records: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, int], int] = {}
    covered: dict[tuple[str, int], set[str]] = {}
    for lineno, record in numbered_records(path):
        qid = record.get("qid")
        if qid is not None:
            key = (str(record["system"]), str(qid), int(record["budget"]))
            if key in seen:
                raise InputError(
                    path,
                    f"the record of {key[0]} for question {key[1]} at budget {key[2]} is "
                    f"repeated (first at line {seen[key]})",
                    line=lineno,
                    hint="each (system, question, budget) is scored once; a file written "
                    "by one `structrag bench recall` run has no repeats",
                )
            seen[key] = lineno
        if truth:
            question = truth.get(str(qid)) if qid is not None else None
            if question is None:
                raise InputError(
                    path,
                    f"question {qid!r} is not in the data files",
                    line=lineno,
                    hint="pass the LoCoMo files the run used to --data",
                )
            if list(question.evidence) != list(record["evidence"]):
                changed["evidence"] += 1
            record = {**record, "evidence": list(question.evidence)}
            record["category"] = question.category
            record["category_name"] = question.category_name
        if counter is not None:
            context = record.get("context")
            if not isinstance(context, str):
                raise InputError(
                    path,
                    "record has no context to recount the tokens of",
                    line=lineno,
                    hint="--recount counts each record's context text (as `structrag bench "
                    "recall` writes it); leave --recount out to score the recorded counts",
                )
            tokens = counter.count(context)
            if tokens != int(record["tokens"]):
                changed["tokens"] += 1
            record = {**record, "tokens": tokens}
        if qid is not None and record["evidence"]:
            covered.setdefault((str(record["system"]), int(record["budget"])), set()).add(str(qid))
        records.append(record)
    if not records:
        raise InputError(
            path, "no records", hint="run `structrag bench recall` (or `bench loo`) to write some"
        )
    for what, count in changed.items():
        if count:
            notes.append(f"{count} record(s) had {what} that differ from the recomputed ones")
    coverage = coverage_warning(covered)
    if coverage:
        notes.append(coverage)
    rows = score_records(records)
    if not rows:
        raise InputError(
            path,
            f"no record has evidence to score ({len(records)} record(s), every one with an "
            "empty evidence list)",
            hint="a question is scored on its evidence ids; pass --data to take them from "
            "the data files",
        )
    return rows, notes


def coverage_warning(covered: Mapping[tuple[str, int], set[str]]) -> str | None:
    """A warning when the (system, budget) rows of a file were scored on different
    questions (by question id), else None."""
    sets = {frozenset(qids) for qids in covered.values()}
    if len(sets) <= 1:
        return None
    every = frozenset().union(*sets)
    shown = [
        f"{system} at {budget}: {len(qids)} of {len(every)}"
        for (system, budget), qids in covered.items()
        if len(qids) < len(every)
    ]
    return (
        "warning: the rows cover different questions, so they are not comparable (questions "
        f"scored, of the {len(every)} in the file: {'; '.join(shown)})"
    )


def markdown_table(rows: Sequence[Row]) -> str:
    """Recall per category and overall, and the share of questions fully covered."""
    names = category_order({n for row in rows for n in row.recall if n != "overall"})
    header = ["system", "budget", *names, "overall", "all evidence", "n"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", "---:"] + ["---:"] * (len(names) + 3)) + "|",
    ]
    for row in rows:
        cells = [row.system, str(row.budget)]
        cells += [f"{row.recall[n]:.3f}" if n in row.recall else "" for n in names]
        cells += [f"**{row.recall['overall']:.3f}**", f"{row.full['overall']:.3f}"]
        cells.append(str(row.questions))
        lines.append("| " + " | ".join(cells) + " |")
    groups: dict[tuple[tuple[str, int], ...], list[Row]] = {}
    for row in rows:
        if row.counts:
            key = tuple((n, row.counts[n]) for n in names if n in row.counts)
            groups.setdefault(key, []).append(row)
    if groups:
        lines.append("")
    for key, members in groups.items():
        which = (
            ""
            if len(groups) == 1
            else " (" + ", ".join(f"{r.system} at {r.budget}" for r in members) + ")"
        )
        lines.append(
            f"Questions per category{which}: " + ", ".join(f"{n} {c}" for n, c in key) + "."
        )
    return "\n".join(lines) + "\n"


def write_tables(
    out: Path, rows: Sequence[Row], meta: Mapping[str, Any], files: Outputs | None = None
) -> None:
    """``recall.json`` (rows and run metadata) and ``recall.md`` in ``out`` (staged in
    ``files`` when given, else each written whole)."""
    out = Path(out)
    label, note = in_sample_note(meta.get("conversations"))
    texts = {
        "recall.json": json.dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}, indent=2)
        + "\n",
        "recall.md": "# Evidence recall\n\n"
        "Recall: the share of a question's evidence messages that are in its context (0 "
        "when the context is over budget), averaged per category and overall. All "
        "evidence: the share of questions with every evidence message in context.\n\n"
        f"**{label}:** {note} `structrag bench loo` measures held-out figures.\n\n"
        + markdown_table(rows)
        + data_notes(meta),
    }
    for name, text in texts.items():
        if files is not None:
            files.write_text(name, text)
        else:
            write_atomic(out / name, text)


#: How many evidence warnings a results file lists (all are counted).
WARNINGS_KEPT = 50


def question_meta(found: QuestionSet) -> dict[str, Any]:
    """What reading the questions found, for a results file's meta (pass the set
    :func:`limit_set` made, so that it covers only the questions a run asks)."""
    return {
        "conversations": list(found.conversations),
        "questions_without_evidence": found.without_evidence,
        "evidence_warnings": len(found.warnings),
        "evidence_warning_lines": found.warnings[:WARNINGS_KEPT],
    }


def data_notes(meta: Mapping[str, Any]) -> str:
    """Lines under a table on questions left out and evidence that names no turn."""
    lines = []
    skipped = int(meta.get("questions_without_evidence") or 0)
    if skipped:
        lines.append(f"{skipped} question(s) without evidence naming a turn are left out.")
    count = int(meta.get("evidence_warnings") or 0)
    if count:
        shown = list(meta.get("evidence_warning_lines") or [])
        lines.append(
            f"**Warning:** {count} evidence id(s) name no turn of their conversation "
            "(an id kept counts as missed by every system):"
        )
        lines += [f"* {line}" for line in shown]
        if count > len(shown):
            lines.append(f"* ... and {count - len(shown)} more")
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def limit_questions(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """At most ``limit`` questions per conversation, in order (all when ``limit`` is None)."""
    if limit is None:
        return list(questions)
    seen: dict[str, int] = {}
    kept = []
    for q in questions:
        seen[q.conversation] = seen.get(q.conversation, 0) + 1
        if seen[q.conversation] <= limit:
            kept.append(q)
    return kept


def limit_set(found: QuestionSet, limit: int | None) -> QuestionSet:
    """What a run with ``--limit`` covers: at most ``limit`` questions per conversation
    (:func:`limit_questions`), and only the warnings and questions left out (no evidence)
    that come before the last question asked of a conversation whose questions were cut
    by the limit (all of them where the limit cut nothing)."""
    if limit is None:
        return found
    kept = limit_questions(found.questions, limit)
    asked: dict[str, int] = {}
    for q in found.questions:
        asked[q.conversation] = asked.get(q.conversation, 0) + 1
    reach: dict[str, int] = {}
    for q in kept:
        if asked[q.conversation] > limit:
            reach[q.conversation] = question_number(q.qid)

    def covered(at: tuple[str, int]) -> bool:
        conversation, number = at
        return conversation not in reach or number <= reach[conversation]

    warnings = [
        (line, at) for line, at in zip(found.warnings, found.warning_at, strict=True) if covered(at)
    ]
    skipped = [at for at in found.skipped_at if covered(at)]
    return QuestionSet(
        questions=kept,
        conversations=list(found.conversations),
        warnings=[line for line, _ in warnings],
        without_evidence=len(skipped),
        warning_at=[at for _, at in warnings],
        skipped_at=skipped,
    )


def question_record(
    system: str, question: Question, budget: int, context: AnswerContext
) -> dict[str, Any]:
    """One ``recall.jsonl`` line: a question's context from one system at one budget
    (``cut_ids``: the messages of ``message_ids`` whose line is cut short, which scoring
    counts as not found)."""
    return {
        "system": system,
        "qid": question.qid,
        "question": question.question,
        "conversation": question.conversation,
        "category": question.category,
        "category_name": question.category_name,
        "budget": budget,
        "context": context.text,
        "tokens": context.tokens,
        "message_ids": context.message_ids,
        "cut_ids": [m.id for m in context.messages if m.cut],
        "evidence": list(question.evidence),
    }


def check_choices(systems: Sequence[str], known: Sequence[str], budgets: Sequence[int]) -> None:
    """The systems a benchmark was asked for are ones it has; its budgets are positive."""
    unknown = [s for s in systems if s not in known]
    if unknown or not systems:
        raise ConfigError(
            f"unknown system(s): {', '.join(unknown) or 'none given'}",
            hint=f"choose from {', '.join(known)}",
        )
    check_budgets(budgets)


def check_budgets(budgets: Sequence[int]) -> None:
    """Budgets are whole numbers from 1 to ``MAX_BUDGET`` (as ``ask --budget``): checked
    before the ingest, for every system."""
    if not budgets or not all(_is_int(b) and b >= 1 for b in budgets):
        raise ConfigError("budgets must be positive numbers of tokens", hint="e.g. 500,1000")
    over = [b for b in budgets if b > MAX_BUDGET]
    if over:
        raise ConfigError(
            f"budget {over[0]:,} is over the largest context, {MAX_BUDGET:,} tokens",
            hint=f"give budgets from 1 to {MAX_BUDGET:,} (as `structrag ask --budget`)",
        )


def as_paths(data: str | Path | Iterable[str | Path]) -> list[Path]:
    """Data files as paths: one path, or any iterable of ``str`` or ``Path``."""
    if isinstance(data, str | Path):
        return [Path(data)]
    return [Path(p) for p in data]


def as_names(systems: str | Iterable[str]) -> list[str]:
    """System names without repeats: a comma-separated string, or any iterable."""
    items = systems.split(",") if isinstance(systems, str) else list(systems)
    return list(dict.fromkeys(str(s).strip() for s in items if str(s).strip()))


def as_budgets(budgets: int | Iterable[int]) -> list[int]:
    """Budgets without repeats, in the order given."""
    items = [budgets] if isinstance(budgets, int) else list(budgets)
    check_budgets(items)
    return list(dict.fromkeys(items))


def check_limit(limit: int | None) -> None:
    if limit is not None and (not _is_int(limit) or limit < 1):
        raise ConfigError(f"limit must be a positive number of questions, not {limit!r}")


def check_encoding(encoding: str) -> None:
    """Load the token encoding now: an unknown one fails before the ingest."""
    from structrag.tokens import get_counter

    get_counter(encoding)


#: What ``setup_seconds`` and ``seconds_per_question`` of ``recall.json`` include.
TIMING = {
    "setup_seconds": "each system's preparation, once per run, before its first question: "
    "the baselines read the conversations' turns and render their context lines (cached "
    "in the index's engine, so a later system finds them rendered); bm25, bm25+fill and "
    "hybrid: indexing the turns for BM25; "
    f"dense and hybrid: loading {DENSE_MODEL} and embedding every turn and question "
    "(embeddings are read from OUT/cache where a system or an earlier run already "
    "embedded the same texts)",
    "seconds_per_question": "the mean wall time of one question at every budget after the "
    "setup: ranking and packing. Each system runs on its own instances, so hybrid computes "
    "its BM25 and dense rankings itself and bm25+fill its BM25 ranking (none reuses "
    "another system's); structured is Index.ask, whose first question on a conversation "
    "builds the engine's caches for it",
}


def run_recall(
    data: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    systems: str | Sequence[str] = SYSTEMS,
    budgets: int | Sequence[int] = DEFAULT_BUDGETS,
    db: str | Path | None = None,
    encoding: str = "cl100k_base",
    workers: int = 1,
    limit: int | None = None,
    progress: ProgressSink | None = None,
    command: str | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Row]:
    """Run the recall benchmark; writes ``recall.jsonl``, ``recall.md``, ``recall.json``.

    Every option is checked, and the data read and checked, before the ingest; the three
    files are written under temporary names and renamed into place at the end, so a run
    that fails leaves the previous results as they were. ``log`` gets the warnings (evidence
    that names no turn) of the questions the run asks."""
    paths = as_paths(data)
    if not paths:
        raise ConfigError("no data files", hint="pass LoCoMo files with --data")
    check_distinct(paths)
    names = as_names(systems)
    budgets = as_budgets(budgets)
    check_choices(names, SYSTEMS, budgets)
    check_limit(limit)
    check_encoding(encoding)
    check_systems(names)
    out = Path(out)
    index_dir = Path(db) if db is not None else out / "index"
    found = limit_set(read_questions(paths), limit)
    for line in found.warnings:
        if log:
            log(f"warning: {line}")
    questions = found.questions
    prepare_out(out)
    meta: dict[str, Any] = environment(command)
    with Index(index_dir) as index:
        started = time.perf_counter()
        reports = index.ingest(ingest_paths(paths), workers=workers, progress=progress)
        stats = index.stats()
        meta["ingest"] = {
            "index": str(index_dir),
            "messages": stats["messages"],
            "seconds": round(time.perf_counter() - started, 2),
            "skipped": [r.path for r in reports if r.skipped],
        }
        known = {c.id for c in index.conversations()}
        missing = sorted({q.conversation for q in questions} - known)
        if missing:
            raise ConfigError(
                f"conversations {', '.join(missing[:5])} are not in the index {index_dir}",
                hint="the data files and --db must hold the same conversations",
            )
        meta.update(
            data=[str(p) for p in paths],
            data_sha256=data_sha256(paths),
            systems=list(names),
            budgets=list(budgets),
            encoding=encoding,
            limit=limit,
            workers=workers,
            embeddings=stats.get("embeddings"),
            ranking_settings=settings_meta(index.settings),
            questions=len(questions),
            **question_meta(found),
            **({"dense_model": DENSE_MODEL} if {"dense", "hybrid"} & set(names) else {}),
            timing=TIMING,
            setup_seconds={},
            seconds_per_question={},
        )
        with Outputs(out) as files:
            with files.path(RECORDS).open("w", encoding="utf-8") as handle:
                for name in names:
                    # Each system on its own instances: none reuses another's rankings.
                    (system,) = make_systems(
                        [name], index, encoding=encoding, cache_dir=out / "cache"
                    )
                    started = time.perf_counter()
                    system.prepare(questions)
                    meta["setup_seconds"][name] = round(time.perf_counter() - started, 3)
                    if progress:
                        progress.start(len(questions), system.name)
                    started = time.perf_counter()
                    for question in questions:
                        contexts = system.contexts(question, budgets)
                        for budget, context in zip(budgets, contexts, strict=True):
                            record = question_record(system.name, question, budget, context)
                            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                        if progress:
                            progress.advance(1)
                    elapsed = time.perf_counter() - started
                    if progress:
                        progress.finish()
                    handle.flush()
                    meta["seconds_per_question"][name] = round(elapsed / max(1, len(questions)), 4)
            rows, _ = rescore(files.path(RECORDS))
            write_tables(out, rows, meta, files)
            files.commit()
    return rows
