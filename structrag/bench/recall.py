"""Evidence recall: for every question, system and budget, the context and what it holds.

:func:`run_recall` ingests LoCoMo-format files into an index, asks every question with
evidence of every system at every budget, and writes to the output directory:

* ``recall.jsonl``: one line per (system, question, budget) with ``system``, ``qid``,
  ``question``, ``conversation``, ``category`` (LoCoMo's number), ``category_name``,
  ``budget``, ``context`` (the text), ``tokens`` (its token count), ``message_ids`` (the
  messages whose text is in the context) and ``evidence`` (the evidence message ids);
* ``recall.md`` and ``recall.json``: the table.

Scoring needs only that JSONL (:func:`rescore`), so anyone can re-score a run:

* a question's recall is the share of its evidence ids among ``message_ids``, and 0 when
  ``tokens`` exceeds ``budget``;
* a category's recall (and ``overall``) is the mean over its questions;
* ``all evidence`` is the share of questions whose evidence is all in the context.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.bench.locomo import (
    CATEGORIES,
    IN_SAMPLE_NOTE,
    Question,
    category_name,
    ingest_paths,
    load_questions,
)
from structrag.bench.machine import environment
from structrag.bench.systems import SYSTEMS, make_systems
from structrag.errors import ConfigError, InputError
from structrag.importers.base import read_json_lines
from structrag.index import Index
from structrag.ingest import ProgressSink

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
    """A record's evidence recall: 0 over budget; None when it has no evidence."""
    evidence = set(record["evidence"])
    if not evidence:
        return None
    if int(record["tokens"]) > int(record["budget"]):
        return 0.0
    return len(evidence & set(record["message_ids"])) / len(evidence)


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
    required = ("system", "budget", "tokens", "message_ids", "evidence", "category")
    if not path.exists():
        raise InputError(path, "file not found", hint="run `structrag bench recall` first")
    for lineno, record in read_json_lines(path, "a recall record (a JSON object)"):
        missing = [k for k in required if k not in record]
        if missing:
            raise InputError(
                path, f"record lacks {', '.join(missing)}", line=lineno, hint=RECORD_HINT
            )
        yield record


RECORD_HINT = (
    "each line needs system, budget, category, tokens, message_ids and evidence "
    "(as written by `structrag bench recall`)"
)


def rescore(
    path: Path, *, data: Sequence[Path] = (), recount: str | None = None
) -> tuple[list[Row], list[str]]:
    """Recompute the recall table from a JSONL file alone.

    With ``data`` (the LoCoMo files), each record's evidence and category are taken from
    the data rather than from the JSONL. With ``recount`` (a tiktoken encoding), token
    counts are recounted from the context text. Returns the rows and notes on what
    disagreed with the file.
    """
    truth = {q.qid: q for q in load_questions(list(data), with_evidence=False)} if data else {}
    counter = None
    if recount:
        from structrag.tokens import get_counter

        counter = get_counter(recount)
    notes: list[str] = []
    changed = {"evidence": 0, "tokens": 0}
    records: list[dict[str, Any]] = []
    for record in read_records(path):
        if truth:
            question = truth.get(str(record.get("qid")))
            if question is None:
                raise InputError(
                    path,
                    f"question {record.get('qid')!r} is not in the data files",
                    hint="pass the LoCoMo files the run used to --data",
                )
            if list(question.evidence) != list(record["evidence"]):
                changed["evidence"] += 1
            record = {**record, "evidence": list(question.evidence)}
            record["category"] = question.category
            record["category_name"] = question.category_name
        if counter is not None:
            tokens = counter.count(str(record.get("context", "")))
            if tokens != int(record["tokens"]):
                changed["tokens"] += 1
            record = {**record, "tokens": tokens}
        records.append(record)
    for what, count in changed.items():
        if count:
            notes.append(f"{count} record(s) had {what} that differ from the recomputed ones")
    return score_records(records), notes


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
    counts = rows[0].counts if rows else {}
    if counts:
        lines.append("")
        lines.append(
            "Questions per category: "
            + ", ".join(f"{n} {counts[n]}" for n in names if n in counts)
            + "."
        )
    return "\n".join(lines) + "\n"


def write_tables(out: Path, rows: Sequence[Row], meta: Mapping[str, Any]) -> None:
    """``recall.json`` (rows and run metadata) and ``recall.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "recall.json").write_text(
        json.dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}, indent=2) + "\n",
        encoding="utf-8",
    )
    (out / "recall.md").write_text(
        "# Evidence recall\n\n"
        "Recall: the share of a question's evidence messages that are in its context (0 "
        "when the context is over budget), averaged per category and overall. All "
        "evidence: the share of questions with every evidence message in context.\n\n"
        f"**In-sample:** {IN_SAMPLE_NOTE} `structrag bench loo` measures held-out "
        "figures.\n\n" + markdown_table(rows),
        encoding="utf-8",
    )


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


def question_record(system: str, question: Question, budget: int, context: Any) -> dict[str, Any]:
    """One ``recall.jsonl`` line: a question's context from one system at one budget."""
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
    if not budgets or min(budgets) < 1:
        raise ConfigError("budgets must be positive numbers of tokens", hint="e.g. 500,1000")


def run_recall(
    data: Sequence[Path],
    out: Path,
    *,
    systems: Sequence[str] = SYSTEMS,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    db: Path | None = None,
    encoding: str = "cl100k_base",
    workers: int = 1,
    limit: int | None = None,
    progress: ProgressSink | None = None,
    command: str | None = None,
) -> list[Row]:
    """Run the recall benchmark; writes ``recall.jsonl``, ``recall.md``, ``recall.json``."""
    if not data:
        raise ConfigError("no data files", hint="pass LoCoMo files with --data")
    check_choices(systems, SYSTEMS, budgets)
    out.mkdir(parents=True, exist_ok=True)
    index_dir = db if db is not None else out / "index"
    meta: dict[str, Any] = environment(command)
    questions = limit_questions(load_questions(data), limit)
    with Index(index_dir) as index:
        started = time.perf_counter()
        reports = index.ingest(ingest_paths(data), workers=workers, progress=progress)
        meta["ingest"] = {
            "index": str(index_dir),
            "messages": index.stats()["messages"],
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
        chosen = make_systems(systems, index, encoding=encoding, cache_dir=out / "cache")
        meta.update(
            data=[str(p) for p in data],
            systems=list(systems),
            budgets=list(budgets),
            encoding=encoding,
            questions=len(questions),
            seconds_per_question={},
        )
        with (out / RECORDS).open("w", encoding="utf-8") as handle:
            for system in chosen:
                started = time.perf_counter()
                system.prepare(questions)
                if progress:
                    progress.start(len(questions), system.name)
                for question in questions:
                    contexts = system.contexts(question, budgets)
                    for budget, context in zip(budgets, contexts, strict=True):
                        record = question_record(system.name, question, budget, context)
                        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    if progress:
                        progress.advance(1)
                if progress:
                    progress.finish()
                handle.flush()
                elapsed = time.perf_counter() - started
                meta["seconds_per_question"][system.name] = round(
                    elapsed / max(1, len(questions)), 4
                )
    rows, _ = rescore(out / RECORDS)
    write_tables(out, rows, meta)
    return rows
