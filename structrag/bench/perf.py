"""Speed, size and scaling: ingest throughput, ``ask``/``query`` latency, size on disk,
peak memory, on LoCoMo and on synthetic corpora grown from it.

* **Ingest throughput** (:func:`ingest_throughput`): each repetition ingests the data
  into a fresh index three ways: ``cli`` (``structrag ingest`` in a new process:
  interpreter start, imports, model load, extraction, writes), ``api-cold``
  (``Index.ingest`` in a fresh process, timed from the call, so it includes loading
  spaCy) and ``api-warm`` (``Index.ingest`` again in the same process, the rate of a
  long-running service).
* **Latency** (:func:`latency`): wall time of ``Index.ask`` (budget 1,000) and of
  ``Index.query`` on the expression ``ask`` translated the question into, each scoped to
  the question's conversation. Three figures, measured apart:

  - ``ask_process_cold`` (:func:`process_cold_asks`): the first ask of a fresh process
    (loading the question parser, the embedding model, the token counter ...), timed from
    the call, in several new processes; how long opening the index took is beside it.
  - ``ask_first``: the first ask on each conversation in a process that has already
    answered a question (on another conversation): what that conversation's caches cost.
  - ``ask`` and ``query``: a second pass over the questions, the steady state of a
    service.
* **Command line** (:func:`cli_seconds`): ``structrag --help``, and ``structrag ask`` on a
  measured index, each in a new process, timed from outside (interpreter start included).
* **Size** (:func:`index_size`): the DuckDB file plus the Whoosh directory. The default
  index stores a 64-dimensional static embedding per message; its share is measured by
  dropping the table and counting DuckDB's freed blocks, which gives the size "vectors
  excluded". For comparison: a float32 vector store of the same messages at 384 and 1,536
  dimensions (raw vectors only, no text and no ANN index, so a lower bound).
* **Peak memory**: ``ru_maxrss`` of the process that ingested and queried, and of its
  extraction workers.
* **Scaling** (:func:`run_perf`): synthetic corpora (:mod:`structrag.bench.synth`) of
  each size are ingested into a fresh index in a fresh process and measured as above. A
  size whose estimated time (from the rate measured at the largest size run so far)
  exceeds ``max_seconds`` is not run: it is extrapolated and marked as such.
"""

from __future__ import annotations

import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from structrag.bench.locomo import Question, load_questions, turn_count
from structrag.bench.machine import environment
from structrag.bench.output import prepare_out
from structrag.bench.synth import write_corpus
from structrag.errors import ConfigError
from structrag.index import Index
from structrag.ingest import ProgressSink

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
VECTOR_DIMS = (384, 1536)
PERF = "perf.json"


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99, mean and max in milliseconds."""
    if not seconds:
        return {"n": 0}
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "n": len(ms),
        "p50": round(float(np.percentile(ms, 50)), 2),
        "p95": round(float(np.percentile(ms, 95)), 2),
        "p99": round(float(np.percentile(ms, 99)), 2),
        "mean": round(float(ms.mean()), 2),
        "max": round(float(ms.max()), 2),
    }


def peak_rss_mb() -> dict[str, float]:
    """Peak resident memory of this process and of its (waited-for) children, in MB."""
    scale = 1024 if sys.platform != "darwin" else 1  # ru_maxrss: KiB on Linux, bytes on macOS
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale
    return {"process": round(own / 1e6, 1), "workers": round(children / 1e6, 1)}


class TreePeak:
    """Samples the resident memory of this process and of all its descendants (the
    extraction workers are the fork server's children, so ``RUSAGE_CHILDREN`` never sees
    them) every ``interval`` seconds, on a thread, while it runs; Linux only (``/proc``),
    elsewhere it records nothing. ``peak()``: MB of the process, of the workers together,
    and of both together, each at its own peak.

    Resident sets added up count twice the pages a forked worker shares with its parent
    (the spaCy model, loaded before the fork), so every ``pss_every``-th sample also reads
    each process's proportional set size (PSS: a shared page split between its sharers):
    ``together_pss`` is the tree's peak as the machine holds it. PSS is read seldom: the
    kernel walks the process's pages for it, ~20 ms for a process of 1.5 GB here."""

    def __init__(self, interval: float = 0.2, pss_every: int = 10) -> None:
        import threading

        self.interval = interval
        self.pss_every = pss_every
        self.process = self.workers = self.together = self.together_pss = 0.0
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> TreePeak:
        if Path("/proc/self/status").exists():
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling, with one last sample (the peaks stay)."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._sample()

    def _run(self) -> None:
        self._sample()  # at once: work shorter than one interval is still seen
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        import os

        me = os.getpid()
        tree = _descendants(me)
        own = process_memory_kb(me, "VmRSS")
        others = sum(process_memory_kb(p, "VmRSS") for p in tree)
        self.process = max(self.process, own / 1024)
        self.workers = max(self.workers, others / 1024)
        self.together = max(self.together, (own + others) / 1024)
        if self._samples % self.pss_every == 0:
            pss = sum(process_memory_kb(p, "Pss", "smaps_rollup") for p in (me, *tree))
            self.together_pss = max(self.together_pss, pss / 1024)
        self._samples += 1

    def peak(self) -> dict[str, float]:
        """The sampled peaks, and ``process_run``: the process's own peak over its whole
        life (``ru_maxrss``; for ``measure_corpus``, the latency pass after the ingest
        too)."""
        return {
            "process": round(self.process, 1),
            "workers": round(self.workers, 1),
            "together": round(self.together, 1),
            "together_pss": round(self.together_pss, 1),
            "process_run": peak_rss_mb()["process"],
        }


def process_memory_kb(pid: int, field: str, file: str = "status") -> int:
    """A process's ``field`` (kB) from ``/proc/PID/FILE``; 0 when it is gone."""
    try:
        with Path(f"/proc/{pid}/{file}").open(encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.append(child)
            todo.append(child)
    return found


# -- ingest throughput ------------------------------------------------------------------

_INGEST_CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from structrag import Index
paths, workers = json.loads(sys.argv[1]), int(sys.argv[2])
out = {}
for label in ("api-cold", "api-warm"):
    with tempfile.TemporaryDirectory() as tmp, Index(Path(tmp) / "idx") as index:
        start = time.perf_counter()
        reports = index.ingest(paths, workers=workers)
        out[label] = (sum(r.messages_added for r in reports), time.perf_counter() - start)
print(json.dumps(out))
"""


def _ingest_once(paths: Sequence[Path], workers: int) -> dict[str, tuple[int, float]]:
    results: dict[str, tuple[int, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "structrag", "ingest", *map(str, paths)),
                *("--db", f"{tmp}/idx", "--json", "-q", "--workers", str(workers)),
            ],
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise ConfigError(f"structrag ingest failed: {proc.stderr.strip()[-500:]}")
        reports = json.loads(proc.stdout)
        results["cli"] = (sum(r["messages_added"] for r in reports), elapsed)
    for label, (count, seconds) in _run_script(_INGEST_CHILD, paths, workers, "ingest").items():
        results[label] = (int(count), float(seconds))
    return results


def _run_script(
    code: str, paths: Sequence[Path], workers: int, what: str, extra: Sequence[str] = ()
) -> Any:
    """Run a benchmark script in a fresh interpreter (``argv``: the paths as JSON, the
    worker count, ``extra``); what its last line of output says, as JSON."""
    proc = subprocess.run(
        [
            *(sys.executable, "-c", code, json.dumps([str(p) for p in paths])),
            *(str(workers), *extra),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ConfigError(f"the {what} benchmark failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ingest_throughput(
    paths: Sequence[Path],
    *,
    repeat: int = 3,
    workers: int = 2,
    progress: ProgressSink | None = None,
) -> dict[str, dict[str, float]]:
    """Messages per second of ``cli``, ``api-cold`` and ``api-warm`` ingests (medians)."""
    if progress:
        progress.start(repeat, "ingest")
    runs = []
    for _ in range(repeat):
        run = _ingest_once(paths, workers)
        run["parser-pipe"] = parser_throughput(paths, workers)  # the same run, interleaved
        run["parser-pipe-blis"] = parser_throughput(paths, workers, blis=True)
        runs.append(run)
        if progress:
            progress.advance(1)
    if progress:
        progress.finish()
    summary: dict[str, dict[str, float]] = {}
    for label in ("cli", "api-cold", "api-warm", "parser-pipe", "parser-pipe-blis"):
        rates = [r[label][0] / r[label][1] for r in runs]
        seconds = [r[label][1] for r in runs]
        summary[label] = {
            "messages": runs[0][label][0],
            "runs": repeat,
            "workers": workers,
            "seconds_median": round(statistics.median(seconds), 2),
            "messages_per_second_median": round(statistics.median(rates), 1),
            "messages_per_second_min": round(min(rates), 1),
            "messages_per_second_max": round(max(rates), 1),
        }
    for key, parser_label in (
        ("ratio_to_parser", "parser-pipe"),
        ("ratio_to_parser_blis", "parser-pipe-blis"),
    ):
        parser = summary[parser_label]["messages_per_second_median"]
        summary[key] = {
            label: round(summary[label]["messages_per_second_median"] / parser, 3)
            for label in ("cli", "api-cold", "api-warm")
        }
    return summary


_PARSER_CHILD = r"""
import json, sys, time
from structrag.importers import load_source
from structrag.nlp.matmul import for_extraction
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline
paths, workers, blis = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "blis"
texts = [m.text for p in paths for m in load_source(p).messages]
nlp = load_pipeline(DEFAULT_MODEL, ner=False)
if not blis:
    for_extraction(nlp)  # as the extraction workers parse (the processes fork from here)
start = time.perf_counter()
count = sum(1 for _ in nlp.pipe(texts, n_process=workers, batch_size=256))
print(json.dumps([count, time.perf_counter() - start]))
"""


def parser_throughput(
    paths: Sequence[Path], workers: int, *, blis: bool = False
) -> tuple[int, float]:
    """spaCy's own ``nlp.pipe(texts, n_process=workers)`` over the messages, with the
    components the extractor runs (NER off), in a fresh process: (messages, seconds), timed
    from the first text to the last doc (the model is loaded before). The ceiling an ingest
    is compared with. The pipeline multiplies matrices with numpy on one BLAS thread, as
    the extraction workers do, or, with ``blis``, with thinc's own blis, as ``spacy.load``
    gives it."""
    extra = ("blis" if blis else "numpy",)
    count, seconds = _run_script(_PARSER_CHILD, paths, workers, "parser", extra)
    return int(count), float(seconds)


_RAY_CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
import ray
from structrag import Index
paths, workers = json.loads(sys.argv[1]), int(sys.argv[2])
# "local": a Ray of its own, even when a cluster runs on this machine (None joins it).
ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
         logging_level="warning")
with tempfile.TemporaryDirectory() as tmp, Index(Path(tmp) / "idx") as index:
    start = time.perf_counter()
    reports = index.ingest(paths, engine="ray", workers=workers)
    print(json.dumps([sum(r.messages_added for r in reports), time.perf_counter() - start]))
"""


def ray_throughput(
    paths: Sequence[Path], *, workers: Sequence[int] = (1, 2), repeat: int = 1
) -> dict[str, dict[str, float]]:
    """``Index.ingest(engine="ray")`` on a local Ray cluster of ``n`` CPUs, for each ``n``
    in ``workers``, in a fresh process each time: messages per second (median), timed from
    the call (actors starting and loading spaCy included; Ray's own start is not)."""
    summary: dict[str, dict[str, float]] = {}
    for n in workers:
        runs = []
        for _ in range(repeat):
            count, seconds = _run_script(_RAY_CHILD, paths, n, "Ray ingest")
            runs.append((int(count), float(seconds)))
        summary[str(n)] = {
            "messages": runs[0][0],
            "runs": repeat,
            "seconds_median": round(statistics.median(s for _, s in runs), 2),
            "messages_per_second_median": round(statistics.median(c / s for c, s in runs), 1),
        }
    return summary


# -- latency ----------------------------------------------------------------------------


def latency(
    index: Index,
    questions: Sequence[Question],
    *,
    budget: int = 1000,
    progress: ProgressSink | None = None,
) -> dict[str, Any]:
    """``ask`` and ``query`` latency over two passes of the questions (see the module).

    The first ask of the pass is the process's first: it is reported alone
    (``ask_first_in_process``, one figure), and its conversation is not in ``ask_first``,
    which holds the first ask on each other conversation."""
    first: list[float] = []
    asks: list[float] = []
    queries: list[float] = []
    failed = 0
    seen: set[str] = set()
    warmup: float | None = None
    if progress:
        progress.start(2 * len(questions), "latency")
    for second_pass in (False, True):
        for q in questions:
            start = time.perf_counter()
            answer = index.ask(q.question, conversation=q.conversation, budget=budget)
            elapsed = time.perf_counter() - start
            if second_pass:
                asks.append(elapsed)
            elif warmup is None:
                warmup = elapsed
                seen.add(q.conversation)
            elif q.conversation not in seen:
                first.append(elapsed)
                seen.add(q.conversation)
            if second_pass:
                start = time.perf_counter()
                try:
                    index.query(answer.query, conversation=q.conversation, limit=20)
                    queries.append(time.perf_counter() - start)
                except Exception:  # a translation that does not round-trip is counted
                    failed += 1
            if progress:
                progress.advance(1)
    if progress:
        progress.finish()
    return {
        "budget": budget,
        "questions": len(questions),
        "conversations": len(seen),
        "ask": percentiles(asks),
        "query": percentiles(queries),
        "ask_first": percentiles(first),
        "ask_first_in_process": None if warmup is None else round(warmup * 1000.0, 2),
        "query_failures": failed,
    }


# -- fresh processes -----------------------------------------------------------------------

_COLD_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from structrag import Index
directory, question, conversation, budget = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with Index(directory, read_only=True) as index:
    opened = time.perf_counter()
    index.ask(question, conversation=conversation or None, budget=budget)
    asked = time.perf_counter()
print(json.dumps({"open": opened - started, "ask": asked - opened}))
"""


def _spread(questions: Sequence[Question], count: int) -> list[Question]:
    """Up to ``count`` questions, one per conversation first (in order), then the rest."""
    firsts: dict[str, Question] = {}
    for q in questions:
        firsts.setdefault(q.conversation, q)
    chosen = list(firsts.values())[:count]
    rest = [q for q in questions if q not in chosen]
    return chosen + rest[: max(0, count - len(chosen))]


def process_cold_asks(
    directory: Path, questions: Sequence[Question], *, runs: int = 5, budget: int = 1000
) -> dict[str, Any]:
    """The first ``Index.ask`` of a fresh process, in ``runs`` new processes (a question
    from a different conversation each, where there are enough): ``ask`` percentiles
    timed from the call, and ``open`` (imports and opening the index) apart."""
    opens: list[float] = []
    asks: list[float] = []
    for q in _spread(questions, runs):
        proc = subprocess.run(
            [
                *(sys.executable, "-c", _COLD_CHILD, str(directory)),
                *(q.question, q.conversation, str(budget)),
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ConfigError(f"a cold ask failed: {proc.stderr.strip()[-500:]}")
        timed = json.loads(proc.stdout.strip().splitlines()[-1])
        opens.append(float(timed["open"]))
        asks.append(float(timed["ask"]))
    return {"ask": percentiles(asks), "open": percentiles(opens)}


def _timed_runs(args: Sequence[str], runs: int) -> list[float]:
    seconds: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "structrag", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "STRUCTRAG_NO_SERVER": "1"},
        )
        seconds.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise ConfigError(f"structrag {args[0]} failed: {proc.stderr.strip()[-500:]}")
    return seconds


def help_seconds(runs: int = 5) -> dict[str, Any]:
    """Wall time of ``structrag --help`` in ``runs`` new processes (interpreter start
    included): the median and every run, in seconds."""
    seconds = _timed_runs(["--help"], runs)
    return {
        "help_seconds": round(statistics.median(seconds), 3),
        "help_runs": [round(t, 3) for t in seconds],
    }


def ask_cold_seconds(
    directory: Path, question: Question, *, runs: int = 5, budget: int = 1000
) -> dict[str, Any]:
    """Wall time of a plain ``structrag ask`` (no server) on the index at ``directory``,
    in ``runs`` new processes: the median and every run, in seconds."""
    seconds = _timed_runs(
        [
            *("ask", question.question, "--db", str(directory)),
            *("--conversation", question.conversation, "--budget", str(budget)),
        ],
        runs,
    )
    return {
        "ask_cold_seconds": round(statistics.median(seconds), 3),
        "ask_cold_runs": [round(t, 3) for t in seconds],
    }


# -- size -------------------------------------------------------------------------------


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def index_size(directory: Path) -> dict[str, Any]:
    """Bytes of the DuckDB file and the Whoosh directory of an index."""
    duck = _dir_bytes(directory) - _dir_bytes(directory / "whoosh")
    whoosh = _dir_bytes(directory / "whoosh")
    return {"duckdb_bytes": duck, "whoosh_bytes": whoosh, "total_bytes": duck + whoosh}


def drop_tables(directory: Path, *tables: str) -> dict[str, int]:
    """Drop tables of the index's store, one after the other; returns, for each, the bytes
    of DuckDB blocks its drop freed.

    Destructive: for a throwaway index at the end of a measurement.
    """
    import duckdb

    con = duckdb.connect(str(directory / "structrag.duckdb"))
    try:

        def used() -> int:
            row = con.execute(
                "SELECT block_size, used_blocks FROM pragma_database_size()"
            ).fetchone()
            return int(row[0]) * int(row[1]) if row else 0

        freed: dict[str, int] = {}
        con.execute("CHECKPOINT")
        for table in tables:
            before = used()
            con.execute(f"DROP TABLE IF EXISTS {table}")
            con.execute("CHECKPOINT")
            freed[table] = max(0, before - used())
        return freed
    finally:
        con.close()


def vector_store_bytes(messages: int, dims: Sequence[int] = VECTOR_DIMS) -> dict[str, int]:
    """A float32 vector store of ``messages`` vectors: raw bytes per dimension count."""
    return {str(d): messages * d * 4 for d in dims}


def text_bytes(index: Index) -> int:
    return sum(len(s.message.text.encode("utf-8")) for s in index.messages())


# -- one corpus, measured in a fresh process ----------------------------------------------


def sample_questions(questions: Sequence[Question], count: int, seed: int = 0) -> list[Question]:
    """A seeded random sample, in file order."""
    if count >= len(questions):
        return list(questions)
    chosen = sorted(random.Random(seed).sample(range(len(questions)), count))
    return [questions[i] for i in chosen]


def measure_corpus(
    paths: Sequence[Path],
    directory: Path,
    *,
    workers: int = 2,
    questions: int | None = 300,
    budget: int = 1000,
    seed: int = 0,
    cold_runs: int = 5,
    progress: ProgressSink | None = None,
) -> dict[str, Any]:
    """Ingest ``paths`` into a fresh index at ``directory`` and measure it; with
    ``cold_runs``, also the first ask of fresh processes and a cold ``structrag ask``
    (:func:`process_cold_asks`, :func:`ask_cold_seconds`).

    Run it in a fresh process (:func:`measure_in_subprocess`) so peak memory is its own.
    """
    if directory.exists() and any(directory.iterdir()):
        raise ConfigError(f"{directory} is not empty", hint="measure into a fresh directory")
    all_questions = load_questions(paths, require=False)
    chosen = (
        all_questions if questions is None else sample_questions(all_questions, questions, seed)
    )
    with Index(directory) as index, TreePeak() as sampler:
        start = time.perf_counter()
        reports = index.ingest(list(paths), workers=workers, progress=progress)
        seconds = time.perf_counter() - start
        sampler.stop()  # the ingest's peak: writer and workers
        stats = index.stats()
        messages = int(stats["messages"])
        embedder = index.embedder
        lat = latency(index, chosen, budget=budget, progress=progress)
        texts = text_bytes(index)
    cli: dict[str, Any] = {}
    if cold_runs and chosen:  # fresh processes, once this one has closed the index
        cold = process_cold_asks(directory, chosen, runs=cold_runs, budget=budget)
        lat["ask_process_cold"] = cold["ask"]
        lat["open_process_cold"] = cold["open"]
        cli = ask_cold_seconds(directory, chosen[0], runs=cold_runs, budget=budget)
    size = index_size(directory)
    # The digests hold each message's vector again (see structrag.query.digest).
    freed = drop_tables(directory, "embeddings", "digests")
    vectors = freed["embeddings"]
    no_vectors = size["total_bytes"] - vectors
    return {
        "messages": messages,
        "conversations": int(stats["conversations"]),
        "semantic_refs": sum(stats["semantic_refs"].values()),
        "ingest": {
            "seconds": round(seconds, 2),
            "messages_per_second": round(messages / seconds, 1) if seconds else None,
            "workers": workers,
            "added": sum(r.messages_added for r in reports),
        },
        "latency": lat,
        "size": {
            **size,
            "embedding_model": embedder.name if embedder else None,
            "embedding_dim": embedder.dim if embedder else 0,
            "vectors_bytes": vectors,
            "total_bytes_without_vectors": no_vectors,
            "bytes_per_message": round(size["total_bytes"] / messages, 1),
            "bytes_per_message_without_vectors": round(no_vectors / messages, 1),
            "digests_bytes": freed["digests"],
            "digests_bytes_per_message": round(freed["digests"] / messages, 1),
            "duckdb_bytes_per_message": round(size["duckdb_bytes"] / messages, 1),
            "whoosh_bytes_per_message": round(size["whoosh_bytes"] / messages, 1),
            "text_bytes_per_message": round(texts / messages, 1),
            "float32_store_bytes": vector_store_bytes(messages),
            "float32_store_bytes_per_message": {str(d): d * 4 for d in VECTOR_DIMS},
        },
        "peak_rss_mb": sampler.peak(),
        **({"cli": cli} if cli else {}),
    }


def measure_in_subprocess(
    paths: Sequence[Path],
    directory: Path,
    *,
    workers: int = 2,
    questions: int | None = 300,
    budget: int = 1000,
    seed: int = 0,
    cold_runs: int = 5,
    quiet: bool = False,
) -> dict[str, Any]:
    """:func:`measure_corpus` in a fresh Python process (progress lines on stderr, unless
    ``quiet``)."""
    spec = {
        "paths": [str(p) for p in paths],
        "directory": str(directory),
        "workers": workers,
        "questions": questions,
        "budget": budget,
        "seed": seed,
        "cold_runs": cold_runs,
        "quiet": quiet,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "structrag.bench.perf", json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        raise ConfigError(f"measuring {directory} failed (exit status {proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


class _LineProgress:
    """Progress for a child process: a line on stderr every ~10%."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.label = ""
        self.next = 0.0

    def start(self, total: int, label: str) -> None:
        self.total, self.done, self.label, self.next = total, 0, label, 0.1

    def advance(self, n: int) -> None:
        self.done += n
        if self.total and self.done / self.total >= self.next:
            print(f"  {self.label}: {self.done}/{self.total}", file=sys.stderr, flush=True)
            self.next += 0.1

    def finish(self) -> None:
        return None


def _child(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    result = measure_corpus(
        [Path(p) for p in spec["paths"]],
        Path(spec["directory"]),
        workers=int(spec["workers"]),
        questions=spec["questions"],
        budget=int(spec["budget"]),
        seed=int(spec["seed"]),
        cold_runs=int(spec.get("cold_runs", 5)),
        progress=None if spec.get("quiet") else _LineProgress(),
    )
    print(json.dumps(result))
    return 0


# -- extrapolation ----------------------------------------------------------------------


def _power_fit(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """y at x on the power law fitted through the points, anchored at the largest one
    (a constant for a single point or a falling fit)."""
    pairs = [(a, b) for a, b in zip(xs, ys, strict=True) if a > 0 and b > 0]
    if not pairs:
        return float("nan")
    if len(pairs) == 1:
        return pairs[0][1]
    lx = np.log([a for a, _ in pairs])
    ly = np.log([b for _, b in pairs])
    slope, _ = np.polyfit(lx, ly, 1)
    # Never extrapolate a decrease (noise between small sizes can fit a negative slope):
    # grow from the largest measured point at the fitted rate, or hold it.
    x0, y0 = max(pairs)
    return float(y0 * math.exp(max(0.0, float(slope)) * (math.log(x) - math.log(x0))))


def extrapolate(measured: Sequence[dict[str, Any]], size: int) -> dict[str, Any]:
    """Figures for an unmeasured size: ingest time linear in messages at the rate of the
    largest measured size; bytes per message as measured there; latency and peak memory
    on the power law through the measured sizes."""
    largest = max(measured, key=lambda m: m["messages"])
    rate = largest["ingest"]["messages_per_second"]
    sizes = [m["messages"] for m in measured]

    def fit(getter: Any) -> float:
        return round(_power_fit(sizes, [getter(m) for m in measured], size), 2)

    per_message = largest["size"]["bytes_per_message"]
    without = largest["size"]["bytes_per_message_without_vectors"]
    return {
        "messages": size,
        "extrapolated": True,
        "method": (
            f"ingest at {rate:.0f} msg/s and bytes per message as measured at "
            f"{largest['messages']:,} messages; latency and memory on a power law through "
            f"the {len(measured)} measured size(s)"
        ),
        "ingest": {"seconds": round(size / rate, 1), "messages_per_second": rate},
        "latency": {
            op: {k: fit(lambda m, k=k, op=op: m["latency"][op][k]) for k in ("p50", "p95", "p99")}
            for op in ("ask", "query", "ask_first", "ask_process_cold")
            if all(m["latency"].get(op, {}).get("n") != 0 for m in measured)
            and all(op in m["latency"] for m in measured)
        },
        "size": {
            "bytes_per_message": per_message,
            "bytes_per_message_without_vectors": without,
            "total_bytes": round(per_message * size),
            "total_bytes_without_vectors": round(without * size),
            "float32_store_bytes": vector_store_bytes(size),
            "float32_store_bytes_per_message": {str(d): d * 4 for d in VECTOR_DIMS},
        },
        "peak_rss_mb": {"process": fit(lambda m: m["peak_rss_mb"]["process"])},
    }


def parser_rate(paths: Sequence[Path], limit: int = 1000) -> float:
    """spaCy pipeline messages per CPU-second on this machine, one process, with thinc's
    own matrix products (blis): the speed of the cores during the run (on a shared
    machine it moves, and ingest moves with it)."""
    from structrag.importers import load_source
    from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline

    texts = [m.text for p in paths for m in load_source(p).messages][:limit]
    nlp = load_pipeline(DEFAULT_MODEL, ner=False)
    list(nlp.pipe(texts[:50]))
    started = time.process_time()
    count = sum(1 for _ in nlp.pipe(texts, batch_size=256))
    return round(count / max(time.process_time() - started, 1e-9), 1)


# -- the whole run ----------------------------------------------------------------------


def run_perf(
    data: Sequence[Path],
    out: Path,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    max_seconds: float = 3600.0,
    repeat: int = 3,
    workers: int = 2,
    questions: int = 300,
    budget: int = 1000,
    keep: bool = False,
    cold_runs: int = 5,
    progress: ProgressSink | None = None,
    command: str | None = None,
    log: Any = None,
    engine: str = "local",
    quiet: bool = False,
) -> dict[str, Any]:
    """Throughput, latency and size on the data, then the scaling sizes; writes
    ``perf.json`` in ``out`` (rewritten after every step, so a long run can be watched).

    ``cli`` holds ``structrag --help`` and a cold ``structrag ask`` on the largest index
    measured (``cold_runs`` new processes each; 0 skips them and the process-cold asks).
    ``quiet``: no progress lines from the measuring processes.
    """
    if not data:
        raise ConfigError("no data files", hint="pass LoCoMo files with --data")
    prepare_out(out)
    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    result: dict[str, Any] = {
        "meta": {
            **environment(command),
            "data": [str(p) for p in data],
            "data_messages": turn_count(data),
            "sizes": list(sizes),
            "max_seconds": max_seconds,
            "repeat": repeat,
            "workers": workers,
            "questions_per_size": questions,
            "budget": budget,
            "engine": engine,
            "cold_runs": cold_runs,
        }
    }

    def save() -> None:
        (out / PERF).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    work = out / "work"
    work.mkdir(exist_ok=True)
    result["meta"]["parser_messages_per_cpu_second"] = parser_rate(data)
    if repeat > 0:
        say(f"ingest throughput: {repeat} run(s) of cli, api-cold and api-warm")
        result["throughput"] = ingest_throughput(
            data, repeat=repeat, workers=workers, progress=progress
        )
        save()
    if engine == "ray":
        counts = sorted({1, workers})
        say(f"ingest on a local Ray cluster of {' and '.join(map(str, counts))} CPU(s)")
        result["ray"] = ray_throughput(data, workers=counts, repeat=max(1, repeat))
        save()
    if cold_runs:
        say(f"command line: {cold_runs} run(s) of structrag --help")
        result["cli"] = help_seconds(cold_runs)
        save()
    say("the data itself: ingest, latency over all its questions, size")
    result["locomo"] = _measure(
        data, work / "index-data", workers, None, budget, keep, cold_runs, quiet
    )
    measured: list[dict[str, Any]] = [result["locomo"]]
    _cli_summary(result, measured)
    save()
    result["scaling"] = []
    for size in sorted(sizes):
        reference = max(measured, key=lambda m: m["messages"])
        estimate = size / reference["ingest"]["messages_per_second"] * 1.1
        if estimate > max_seconds:
            say(
                f"{size:,} messages: ~{estimate / 60:.0f} min estimated, over --max-seconds; "
                "extrapolated"
            )
            entry = extrapolate(
                [m for m in measured if m is not result["locomo"]] or measured, size
            )
            entry["estimated_seconds"] = round(estimate)
            result["scaling"].append(entry)
            save()
            continue
        say(f"{size:,} messages: writing the corpus, then ingest (~{estimate / 60:.0f} min)")
        shards = write_corpus(data, size, work / f"corpus-{size}")
        entry = _measure(
            shards, work / f"index-{size}", workers, questions, budget, keep, cold_runs, quiet
        )
        entry["extrapolated"] = False
        result["scaling"].append(entry)
        measured.append(entry)
        _cli_summary(result, measured)
        save()
    return result


def _cli_summary(result: dict[str, Any], measured: Sequence[dict[str, Any]]) -> None:
    """``result["cli"]``: the ``--help`` runs, and the cold ``ask`` of the largest index
    measured so far."""
    with_cli = [m for m in measured if "cli" in m]
    if "cli" not in result or not with_cli:
        return
    largest = max(with_cli, key=lambda m: m["messages"])
    result["cli"].update(largest["cli"])
    result["cli"]["ask_index_messages"] = largest["messages"]


def _measure(
    paths: Sequence[Path],
    directory: Path,
    workers: int,
    questions: int | None,
    budget: int,
    keep: bool,
    cold_runs: int = 5,
    quiet: bool = False,
) -> dict[str, Any]:
    import shutil

    if directory.exists():
        shutil.rmtree(directory)
    try:
        return measure_in_subprocess(
            paths,
            directory,
            workers=workers,
            questions=questions,
            budget=budget,
            cold_runs=cold_runs,
            quiet=quiet,
        )
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
