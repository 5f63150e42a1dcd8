"""CPU-seconds of one warm parallel ingest: the writer's, the workers', the rest.

    python benchmarks/ingest_cpu.py PATH [--workers 2] [--runs 1] [--profile DIR]

A first ingest loads the pipeline; each run then ingests PATH into a fresh index in the
same process and prints one JSON line: wall seconds, messages per second, the writer's CPU
(``RUSAGE_SELF``), its children's (``RUSAGE_CHILDREN``: the extraction workers and the text
index's segment process, reaped by the end of the ingest) and the workers' own (read from
``/proc`` just before the pool stops). On a machine that others share, CPU-seconds vary
less than wall time.

With ``--profile DIR`` the writer's run goes under ``cProfile`` (``DIR/writer.prof``) and
each worker profiles its extraction calls (``DIR/worker-PID.prof``), with the time and
bytes of pickling their results (``DIR/worker-PID.json``); the figures then include the
profilers' overhead.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from structrag import Index
from structrag.extract import spacy_extractor

_PROFILE_DIR: Path | None = None
_WORKER_PROFILE: cProfile.Profile | None = None
_PICKLED = {"seconds": 0.0, "bytes": 0, "batches": 0}
_WORKER_CPU: list[float] = []


def _profiled_extract(messages: list[Any]) -> list[list[tuple[Any, ...]]]:
    """The workers' task, under a profile kept across its calls (written after each)."""
    global _WORKER_PROFILE
    assert _PROFILE_DIR is not None
    if _WORKER_PROFILE is None:
        _WORKER_PROFILE = cProfile.Profile()
    _WORKER_PROFILE.enable()
    result = _ORIGINAL(messages)
    _WORKER_PROFILE.disable()
    started = time.process_time()
    size = len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    _PICKLED["seconds"] += time.process_time() - started
    _PICKLED["bytes"] += size
    _PICKLED["batches"] += 1
    pid = os.getpid()
    _WORKER_PROFILE.dump_stats(_PROFILE_DIR / f"worker-{pid}.prof")
    (_PROFILE_DIR / f"worker-{pid}.json").write_text(json.dumps(_PICKLED))
    return result


_ORIGINAL = spacy_extractor._worker_extract
_profiled_extract.__module__ = spacy_extractor.__name__
_profiled_extract.__qualname__ = _profiled_extract.__name__ = "_worker_extract"


def _cpu_of(pid: int) -> float:
    """A live process's user + system CPU-seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_close = spacy_extractor.SpacyExtractor.close


def _close_counting(self: spacy_extractor.SpacyExtractor) -> None:
    pool = self._pool
    if pool is not None:
        processes = getattr(pool, "_processes", None) or {}
        total = 0.0
        for pid in list(processes):
            try:
                total += _cpu_of(pid)
            except OSError:
                pass
        _WORKER_CPU.append(total)
    _close(self)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    global _PROFILE_DIR
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="write profiles into this folder")
    parser.add_argument("--keep", type=Path, help="copy the last run's index here")
    args = parser.parse_args(argv)
    spacy_extractor.SpacyExtractor.close = _close_counting  # type: ignore[method-assign]
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        _PROFILE_DIR = args.profile
        spacy_extractor._worker_extract = _profiled_extract
    with tempfile.TemporaryDirectory() as tmp:
        with Index(Path(tmp) / "warm") as index:
            index.ingest([args.path], workers=args.workers)
        for run in range(args.runs):
            target = args.keep if (args.keep and run == args.runs - 1) else Path(tmp) / f"r{run}"
            own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
            _WORKER_CPU.clear()
            profile = cProfile.Profile() if args.profile and run == 0 else None
            with Index(target) as index:
                started = time.perf_counter()
                if profile is not None:
                    profile.enable()
                (report,) = index.ingest([args.path], workers=args.workers)
                if profile is not None:
                    profile.disable()
                seconds = time.perf_counter() - started
            own = _cpu(resource.RUSAGE_SELF) - own
            children = _cpu(resource.RUSAGE_CHILDREN) - children
            if profile is not None:
                assert args.profile is not None
                profile.dump_stats(args.profile / "writer.prof")
            workers = sum(_WORKER_CPU)
            figures = {
                "messages": report.messages_added,
                "seconds": round(seconds, 3),
                "messages_per_second": round(report.messages_added / seconds, 1),
                "writer_cpu": round(own, 3),
                "children_cpu": round(children, 3),
                "workers_cpu": round(workers, 3),
                "other_children_cpu": round(children - workers, 3),
            }
            print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
