"""``structrag bench``: recall against baselines, held-out recall, speed, size, reports.

The commands import the benchmark modules only when they run, so the CLI's start-up and
the library never load them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from structrag.cli.common import emit_json, json_option, note, progress_bar
from structrag.query.context import MAX_BUDGET

F = TypeVar("F", bound=Callable[..., Any])


def _int_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter("expected positive numbers, e.g. 500,1000")
    return list(dict.fromkeys(numbers))  # a repeated number is measured once


def _budget_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    """Token budgets: positive and at most MAX_BUDGET, as `ask --budget` takes them."""
    numbers = _int_list(ctx, param, value)
    over = [n for n in numbers or [] if n > MAX_BUDGET]
    if over:
        raise click.BadParameter(
            f"{over[0]:,} is over the largest budget, {MAX_BUDGET:,} tokens "
            "(as `structrag ask --budget`)"
        )
    return numbers


LOCOMO_HELP = "LoCoMo: github.com/snap-research/locomo, CC BY-NC 4.0."


def _data(help: str) -> Callable[[F], F]:
    return click.option(
        "--data",
        "data",
        multiple=True,
        required=True,
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help=help + " " + LOCOMO_HELP,
    )


#: --data for the commands that read LoCoMo-format files only.
data_option = _data("LoCoMo-format file (repeatable).")
#: --data for the recall benchmarks: LoCoMo-format files or chat question sets.
questions_option = _data(
    "A LoCoMo-format file, or a chat question set (a JSON file of format "
    "structrag-chat-questions naming chat exports and their questions, such as "
    "benchmarks/data/informal/questions.json); repeatable, each file once, each "
    "conversation in one file."
)


def run_options(func: F) -> F:
    """--encoding, --workers, --limit and --quiet: how a recall benchmark runs."""
    for option in reversed(
        (
            click.option(
                "--encoding", default="cl100k_base", show_default=True, help="Token encoding."
            ),
            click.option(
                "--workers",
                type=click.IntRange(1, 64),
                default=min(2, os.cpu_count() or 1),
                show_default=True,
                help="Extraction processes for the ingest.",
            ),
            click.option(
                "--limit",
                type=click.IntRange(1),
                help="At most this many questions per conversation.",
            ),
            click.option("--quiet", "-q", is_flag=True, help="No progress bar."),
        )
    ):
        func = option(func)
    return func


#: The default grid of `bench loo` (structrag.bench.loo.DEFAULT_GRID, kept equal by a test;
#: spelt out here so that the CLI does not import the benchmark modules to show its help).
LOO_GRID = (
    "speaker_boost=0,0.5,1 knowledge_weight=0,0.15,0.3 pattern_weight=0,0.25 "
    "vector_weight=0,0.25 window=default,wide"
)


@click.group()
def bench() -> None:
    """Benchmarks on LoCoMo-format data: recall against baselines, held-out recall (leave
    one conversation out), speed, size, scaling.

    LoCoMo is not shipped with structrag: get locomo10.json from
    github.com/snap-research/locomo (CC BY-NC 4.0, non-commercial use). The baselines
    need the bench extra: pip install torch==2.13.0 first, then "structrag[bench]".
    """


@bench.command("recall")
@questions_option
@click.option(
    "--budgets",
    callback=_budget_list,
    default="500,1000,2000,4000",
    show_default=True,
    help="Token budgets, comma-separated.",
)
@click.option(
    "--systems",
    default="structured,bm25,bm25+fill,dense,hybrid",
    show_default=True,
    help="Systems to compare, comma-separated: structured, bm25, bm25+fill (BM25, then the "
    "embedding fill ask uses), dense, hybrid.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (recall.jsonl, recall.md, recall.json, the index, caches).",
)
@click.option(
    "--db",
    type=click.Path(file_okay=False, path_type=Path),
    help="Use (and update) this index instead of OUT/index.",
)
@run_options
def bench_recall(
    data: tuple[Path, ...],
    budgets: list[int],
    systems: str,
    out: Path,
    db: Path | None,
    encoding: str,
    workers: int,
    limit: int | None,
    quiet: bool,
) -> None:
    """Evidence recall of every system at every budget on LoCoMo questions (or a chat
    question set's).

    Writes one JSONL line per (system, question, budget) to OUT/recall.jsonl, and the
    table (recall per category and overall, share of questions with all their evidence
    in context) to OUT/recall.md and OUT/recall.json; prints the table. The options and
    the data are checked before the ingest, and the three files replace the previous
    ones only when the run is complete.

    \b
    Example:
      structrag bench recall --data locomo10.json --out results --budgets 500,1000
    """
    from structrag.bench.machine import command_line
    from structrag.bench.recall import markdown_table, run_recall

    rows = run_recall(
        list(data),
        out,
        systems=systems,
        budgets=budgets,
        db=db,
        encoding=encoding,
        workers=workers,
        limit=limit,
        progress=progress_bar(quiet),
        command=command_line(),
        log=note,
    )
    click.echo(markdown_table(rows), nl=False)
    note(f"wrote {out / 'recall.jsonl'}, {out / 'recall.md'}, {out / 'recall.json'}")


@bench.command("knowledge")
@click.option(
    "--data",
    "data",
    multiple=True,
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A folder (or file) of FAQ pages, HTML or Markdown (repeatable): e.g. "
    "/usr/share/doc/python3.11/html/faq (apt-get install python3.11-doc) and "
    "/usr/share/doc/debian/FAQ (apt-get install debian-faq).",
)
@click.option(
    "--budgets",
    callback=_budget_list,
    default="500,1000,2000",
    show_default=True,
    help="Token budgets, comma-separated.",
)
@click.option(
    "--systems",
    default="structured,text,vector,hybrid",
    show_default=True,
    help="Search modes to compare, comma-separated.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-knowledge"),
    show_default=True,
    help="Output directory (knowledge.jsonl, knowledge.md, knowledge.json, the index).",
)
@click.option(
    "--pdf",
    type=click.Path(exists=True, path_type=Path),
    help="A PDF (or .pdf.gz) to time loading: pages per second.",
)
@click.option("--limit", type=click.IntRange(1), help="At most this many questions.")
@click.option(
    "--sizes",
    callback=_int_list,
    help="Also time search with this many fragments (the pages copied), comma-separated: "
    "e.g. 10000,100000.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_knowledge(
    data: tuple[Path, ...],
    budgets: list[int],
    systems: str,
    out: Path,
    pdf: Path | None,
    limit: int | None,
    sizes: list[int] | None,
    quiet: bool,
) -> None:
    """Document knowledge recall: FAQ questions answered from their pages.

    Every question heading of the pages is a question and the text under it its answer
    passage; the pages are indexed as knowledge without the question headings, each search
    mode's fragments are packed into each budget, and a question counts as answered when
    half its passage is in the context. Writes OUT/knowledge.jsonl, OUT/knowledge.md and
    OUT/knowledge.json; prints the table.

    \b
    Example (Debian's packages, never committed):
      apt-get install python3.11-doc debian-faq
      structrag bench knowledge --data /usr/share/doc/python3.11/html/faq \\
          --data /usr/share/doc/debian/FAQ --pdf /usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz
    """
    import json

    from structrag.bench.knowledge import markdown, pdf_pages_per_second, run_knowledge
    from structrag.bench.machine import command_line

    names = [s.strip() for s in systems.split(",") if s.strip()]
    result = run_knowledge(
        list(data),
        out,
        budgets=budgets,
        systems=names,
        limit=limit,
        sizes=sizes or (),
        progress=progress_bar(quiet),
        command=command_line(),
    )
    if pdf is not None:
        result["meta"]["pdf"] = pdf_pages_per_second(pdf)
        (out / "knowledge.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "knowledge.md").write_text(markdown(result))
    click.echo(markdown(result), nl=False)
    note(f"wrote {out / 'knowledge.jsonl'}, {out / 'knowledge.md'}, {out / 'knowledge.json'}")


@bench.command("loo")
@questions_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (loo.json, loo.md, loo.jsonl; the index unless --db).",
)
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="FIELD=V1,V2,...",
    help="A numeric RankingSettings field and the values to try (repeatable; replaces the "
    "whole default grid; window takes self, near, default, wide). Default: " + LOO_GRID + ".",
)
@click.option(
    "--budgets",
    callback=_budget_list,
    default="500,1000,2000,4000",
    show_default=True,
    help="Budgets the held-out conversation is scored at, comma-separated.",
)
@click.option(
    "--select-budget",
    type=click.IntRange(1, MAX_BUDGET),
    default=1000,
    show_default=True,
    help="Settings are chosen by mean recall at this budget.",
)
@click.option(
    "--db",
    type=click.Path(file_okay=False, path_type=Path),
    help="Use (and update) this index instead of OUT/index (e.g. bench recall's).",
)
@run_options
def bench_loo(
    data: tuple[Path, ...],
    out: Path,
    grid: tuple[str, ...],
    budgets: list[int],
    select_budget: int,
    db: Path | None,
    encoding: str,
    workers: int,
    limit: int | None,
    quiet: bool,
) -> None:
    """Held-out recall of the structured system: leave one conversation out.

    The default ranking settings were chosen on LoCoMo's development conversations, so
    `bench recall` on them is in-sample. For each conversation in turn, this chooses the
    settings from a grid by mean recall at --select-budget on the other conversations,
    then scores the held-out one with them at every budget. Writes OUT/loo.json (per
    fold: settings chosen, in-sample and held-out recall per budget and category),
    OUT/loo.md (held-out recall pooled over the folds, beside the in-sample figures) and
    OUT/loo.jsonl (the held-out records); prints the tables.

    \b
    Example:
      structrag bench loo --data locomo10.json --out results --grid speaker_boost=0,0.5,1
    """
    from structrag.bench.loo import (
        DEFAULT_GRID,
        folds_table,
        parse_grid,
        pooled_summary,
        run_leave_one_out,
    )
    from structrag.bench.machine import command_line

    result = run_leave_one_out(
        list(data),
        out,
        grid=parse_grid(grid) if grid else DEFAULT_GRID,
        budgets=budgets,
        select_budget=select_budget,
        db=db,
        encoding=encoding,
        workers=workers,
        limit=limit,
        progress=progress_bar(quiet),
        command=command_line(),
        log=note,
    )
    click.echo(pooled_summary(result.pooled, select_budget))
    click.echo(folds_table(result.folds, select_budget), nl=False)
    note(f"wrote {out / 'loo.json'}, {out / 'loo.md'}, {out / 'loo.jsonl'}")


@bench.command("rescore")
@click.argument("path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--data",
    "data",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Take evidence and categories from these data files (LoCoMo-format files or chat "
    "question sets, as the run had them), not from the JSONL.",
)
@click.option(
    "--recount",
    metavar="ENCODING",
    help="Recount context tokens (e.g. cl100k_base); every record needs its context.",
)
@json_option
def bench_rescore(path: Path, data: tuple[Path, ...], recount: str | None, as_json: bool) -> None:
    """Recompute the recall table from a recall JSONL file alone (recall.jsonl, or
    loo.jsonl).

    A question's recall is the share of its evidence ids among message_ids less cut_ids
    (a line cut short does not count; 0 when tokens > budget); categories and overall are
    means over questions. A line with a field missing or of the wrong type, or a (system,
    question, budget) given twice, is an error naming the line; a file without records is
    an error. Rows that cover different questions get a warning.
    """
    from structrag.bench.recall import markdown_table, rescore

    rows, notes = rescore(path, data=list(data), recount=recount)
    for text in notes:
        note(text if text.startswith("warning: ") else f"note: {text}")
    if as_json:
        emit_json([row.as_dict() for row in rows])
        return
    click.echo(markdown_table(rows), nl=False)


@bench.command("synth")
@data_option
@click.option("--size", type=click.IntRange(1), required=True, help="Messages to write.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the LoCoMo-format shards.",
)
def bench_synth(data: tuple[Path, ...], size: int, out: Path) -> None:
    """Write a synthetic LoCoMo-format corpus of SIZE messages for scaling runs.

    Conversations are replicated with renamed speakers (also in the text) and session
    dates shifted by whole weeks.
    """
    from structrag.bench.synth import write_corpus

    for shard in write_corpus(list(data), size, out):
        click.echo(str(shard))


@bench.command("memory")
@data_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-memory"),
    show_default=True,
    help="Output directory (memory.json, memory.md, memory_quality.jsonl, the indexes; "
    "OUT/indexes/SIZE is reused once complete, while the data files' bytes are unchanged).",
)
@click.option(
    "--sizes",
    callback=_int_list,
    default="1000,10000,100000",
    show_default=True,
    help="Numbers of preloaded memories to measure speed at, comma-separated.",
)
@click.option(
    "--samples",
    type=click.IntRange(2),
    default=100,
    show_default=True,
    help="Timed adds per size (searches per mode and context windows: half as many).",
)
@click.option(
    "--limit", type=click.IntRange(1), help="At most this many questions per conversation."
)
@click.option("--skip-speed", is_flag=True, help="Only the quality part.")
@click.option("--skip-quality", is_flag=True, help="Only the speed part.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_memory(
    data: tuple[Path, ...],
    out: Path,
    sizes: list[int],
    samples: int,
    limit: int | None,
    skip_speed: bool,
    skip_quality: bool,
    quiet: bool,
) -> None:
    """Agent memory: speed at scale and LoCoMo evidence recall of a live replay.

    Speed: for each size, an index preloaded with that many memories (a synthetic corpus
    of the data, kept under OUT/indexes/SIZE); add, search (each mode), context and prune
    latency or throughput, against the targets. Quality: every conversation replayed
    message by message through memory add, every question searched in its room in each
    mode and packed into 1,000 tokens, recall compared with ask on a batch-ingested
    index; the user-profile entries the replay made. Writes OUT/memory.json and
    OUT/memory.md; prints the tables.

    \b
    Example:
      structrag bench memory --data locomo10.json --out results --sizes 1000,10000
    """
    from structrag.bench.machine import command_line
    from structrag.bench.memory import markdown, run_memory

    result = run_memory(
        list(data),
        out,
        sizes=sizes,
        samples=samples,
        limit=limit,
        speed=not skip_speed,
        quality=not skip_quality,
        progress=progress_bar(quiet),
        command=command_line(),
    )
    click.echo(markdown(result), nl=False)
    note(f"wrote {out / 'memory.json'}, {out / 'memory.md'}")


@bench.command("perf")
@data_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (perf.json; corpora and indexes under OUT/work).",
)
@click.option(
    "--sizes",
    callback=_int_list,
    default="10000,100000,1000000",
    show_default=True,
    help="Synthetic corpus sizes (messages), comma-separated.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(0),
    default=3600.0,
    show_default=True,
    help="Sizes whose estimated ingest exceeds this are extrapolated, not run.",
)
@click.option(
    "--repeat",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="Runs of the ingest throughput benchmark (0: skip it).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes.",
)
@click.option(
    "--questions",
    type=click.IntRange(1),
    default=300,
    show_default=True,
    help="Questions sampled per synthetic size for latency.",
)
@click.option(
    "--budget", type=click.IntRange(1), default=1000, show_default=True, help="ask budget."
)
@click.option(
    "--cold-runs",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="New processes timed for a first ask, `structrag --help` and a cold `structrag "
    "ask` (0: skip them).",
)
@click.option("--keep", is_flag=True, help="Keep the indexes under OUT/work.")
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="ray: also ingest the data with --engine ray on a local Ray cluster of 1 and "
    '--workers CPUs (pip install "structrag[ray]").',
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_perf(
    data: tuple[Path, ...],
    out: Path,
    sizes: list[int],
    max_seconds: float,
    repeat: int,
    workers: int,
    questions: int,
    budget: int,
    cold_runs: int,
    keep: bool,
    engine: str,
    quiet: bool,
) -> None:
    """Ingest throughput, ask/query latency, size on disk and peak memory, and how they
    grow on synthetic corpora of --sizes messages.

    Each corpus is ingested into a fresh index in a fresh process. Sizes whose estimated
    ingest time exceeds --max-seconds are extrapolated from the largest one measured and
    marked so. Writes OUT/perf.json; `structrag bench report OUT` draws the report.

    \b
    Example:
      structrag bench perf --data locomo10.json --out results --sizes 10000,100000
    """
    from structrag.bench.machine import command_line
    from structrag.bench.perf import run_perf
    from structrag.bench.report import percentiles

    result = run_perf(
        list(data),
        out,
        sizes=sizes,
        max_seconds=max_seconds,
        repeat=repeat,
        workers=workers,
        questions=questions,
        budget=budget,
        keep=keep,
        cold_runs=cold_runs,
        progress=progress_bar(quiet),
        command=command_line(),
        log=note,
        engine=engine,
        quiet=quiet,
    )
    throughput = result.get("throughput", {})
    if throughput:
        ratio = throughput["ratio_to_parser"]
        click.echo(
            f"ingest {throughput['cli']['messages_per_second_median']:.0f} msg/s (cli), "
            f"{throughput['api-warm']['messages_per_second_median']:.0f} (api-warm); spaCy's "
            f"nlp.pipe alone {throughput['parser-pipe']['messages_per_second_median']:.0f}: "
            f"ratio {ratio['cli']:.2f} (cli), {ratio['api-warm']:.2f} (api-warm); against "
            f"its pipe with blis {throughput['ratio_to_parser_blis']['api-warm']:.2f} (api-warm)"
        )
    for n, ray in result.get("ray", {}).items():
        click.echo(f"ray, {n} worker(s): {ray['messages_per_second_median']:.0f} msg/s")
    for item in [result["locomo"], *result["scaling"]]:
        lat = item["latency"]
        guess = " (extrapolated)" if item.get("extrapolated") else ""
        click.echo(
            f"{item['messages']:>9,} messages{guess}:"
            f" ingest {item['ingest']['messages_per_second']:.0f} msg/s, ask p50/p95/p99 "
            + percentiles(lat["ask"], "/")
            + " ms, query "
            + percentiles(lat["query"], "/")
            + f" ms, {item['size']['bytes_per_message']:.0f} B/msg "
            f"({item['size']['bytes_per_message_without_vectors']:.0f} without vectors)"
        )
        if lat.get("ask_first", {}).get("n") and not item.get("extrapolated"):
            cold = lat.get("ask_process_cold")
            click.echo(
                f"{'':>9}  first ask on a conversation p50/p95/p99 "
                + percentiles(lat["ask_first"], "/")
                + " ms"
                + ("" if not cold else ", first ask of a process " + percentiles(cold, "/"))
                + (" ms" if cold else "")
            )
    cli = result.get("cli", {})
    if cli:
        cold_ask = cli.get("ask_cold_seconds")
        click.echo(
            f"command line: --help {cli['help_seconds']:.2f} s"
            + (
                ""
                if cold_ask is None
                else f", cold ask {cold_ask:.2f} s at {cli['ask_index_messages']:,} messages"
            )
        )
    note(f"wrote {out / 'perf.json'}")


@bench.command("report")
@click.argument("results", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the report here (default: RESULTS).",
)
def bench_report(results: Path, out: Path | None) -> None:
    """Write report.md and PNG plots (recall vs budget, latency and size vs corpus size)
    from a results directory holding recall.json, loo.json and/or perf.json.

    The held-out figures of loo.json come first and the targets are checked on them; a
    notes.md in RESULTS (what was unusual about the runs) is appended. recall.json and
    loo.json made from different data, or with other questions (--limit), budgets or
    encoding, are refused.
    """
    from structrag.bench.report import write_report

    for path in write_report(results, out):
        click.echo(str(path))


@bench.command("serve")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Results directory: serve.json, serve.md, the index and the server's logs.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(1, 3600),
    default=60,
    show_default=True,
    help="How long the load runs, in seconds.",
)
@click.option(
    "--clients",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Client threads calling the server at once, each on its own connection.",
)
@click.option(
    "--readers",
    type=click.IntRange(1, 32),
    default=2,
    show_default=True,
    help="The server's reader threads.",
)
@click.option(
    "--mix",
    callback=lambda ctx, param, value: _mix(value),
    default="ask=0.5,add=0.25,search=0.25",
    show_default=True,
    help="Shares of ask, memory add and memory search among the requests.",
)
@click.option("--no-ingest", is_flag=True, help="No background ingest.")
@click.option(
    "--ingest-workers",
    type=click.IntRange(1, 16),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes of the background ingest (as `structrag ingest --workers`).",
)
@click.option(
    "--think",
    type=click.FloatRange(0, 60),
    default=0,
    show_default=True,
    help="Each client's mean pause between two calls, in seconds (random, exponential): "
    "an agent's LLM turn. 0: back to back.",
)
@click.option(
    "--cli-runs",
    type=click.IntRange(0, 100),
    default=5,
    show_default=True,
    help="How many times to time `structrag ask` through the server (and half as many "
    "opening the files); 0 skips it.",
)
def bench_serve(
    out: Path,
    seconds: float,
    clients: int,
    readers: int,
    mix: dict[str, float],
    no_ingest: bool,
    ingest_workers: int,
    think: float,
    cli_runs: int,
) -> None:
    """The server under load on loopback: CLIENTS clients for SECONDS seconds mixing ask,
    memory add and memory search while a background ingest runs.

    Builds an index of synthetic conversations in OUT/index, starts `structrag serve` on
    a free loopback port, and reports requests/s, p50/p95/p99 and errors per endpoint,
    the ingest's progress and the server's peak RSS (target: no errors, ask p95 <= 100
    ms), then the CLI's `ask` latency through the server and opening the files. Writes
    OUT/serve.json and OUT/serve.md. Needs the serve extra.

    \b
    Example:
      structrag bench serve --out results --seconds 60 --clients 16
    """
    from structrag.bench.machine import command_line
    from structrag.bench.serve import run_serve_bench
    from structrag.cli.serve import needs_extra

    needs_extra("structrag bench serve")
    result = run_serve_bench(
        out,
        seconds=seconds,
        clients=clients,
        readers=readers,
        mix=mix,
        ingest_files=not no_ingest,
        ingest_workers=ingest_workers,
        think=think,
        cli_runs=cli_runs,
        command=command_line(),
        log=note,
    )
    click.echo((out / "serve.md").read_text(encoding="utf-8"))
    if not result["targets"]["met"]:
        note("note: the target (no errors, ask p95 <= 100 ms) was missed; see serve.json")


def _mix(value: str) -> dict[str, float]:
    names = {"ask": "ask", "add": "memory add", "search": "memory search"}
    try:
        shares = {names[k.strip()]: float(v) for k, v in (p.split("=") for p in value.split(","))}
    except (KeyError, ValueError):
        raise click.BadParameter("write shares as ask=0.5,add=0.25,search=0.25") from None
    if any(v < 0 for v in shares.values()) or not sum(shares.values()):
        raise click.BadParameter("shares must be non-negative and not all zero")
    return shares
