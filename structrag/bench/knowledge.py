"""Document knowledge recall, on question sets nobody on the project wrote.

The documents are FAQ pages: every heading that asks a question ("How do I ...?") is a
question, and the text under it (up to the next heading) is its answer passage. Both FAQs
that Debian packages ship work, installed from the package registry at benchmark time
(never committed): the Python FAQ (``apt-get install python3.11-doc``:
``/usr/share/doc/python3.11/html/faq``, PSF licence) and the Debian FAQ (``apt-get
install debian-faq``: ``/usr/share/doc/debian/FAQ``, GPL). Any folder of HTML or Markdown
pages with question headings does.

The pages are indexed as shared knowledge **without their question headings** (rewritten
as Markdown: other headings kept, question headings left out), so a question never finds
itself. For every question, each system ranks the fragments, the ranking is packed in
rank order into 500, 1,000 and 2,000 tokens (``[label] text`` lines, cl100k; a fragment
that does not fit is passed over, as ``ask`` does), and the question counts as answered
when the packed fragments hold at least half of its answer passage. Systems:
``structured`` (the query compiler), ``text`` (BM25), ``vector`` (the index's embeddings)
and ``hybrid`` (reciprocal rank fusion of text and vector), the four search modes of
``structrag knowledge search``. No setting was chosen on these questions: every figure is
held out.

``--sizes`` also times search over larger sets: the pages are copied (under other names,
so each copy is its own document) until the index holds that many fragments, and every
mode's search is timed there (p50 and p95). Extraction is replayed for the copies (the
same fragment text gives the same knowledge; :class:`ReplayExtractor`), so building a
large set costs the writes and the text index, not hours of parsing.

Written to the output directory: ``knowledge.jsonl`` (one line per system, question and
budget), ``knowledge.json`` and ``knowledge.md`` (the table, with the speed figures:
fragments per second end to end, search latency, and pages per second loading a PDF).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from structrag.bench.machine import environment
from structrag.bench.output import prepare_out
from structrag.bench.recall import check_choices
from structrag.errors import ConfigError
from structrag.extract.base import Extractor, Progress
from structrag.index import Index
from structrag.ingest import Ingestor, ProgressSink
from structrag.knowledge.base import KnowledgeBase
from structrag.knowledge.document import Document
from structrag.knowledge.loaders import load_document, walk
from structrag.models import Message, SemanticRef
from structrag.naming import document_conversation
from structrag.query.modes import SEARCH_MODES, rank
from structrag.store.protocols import MemoryInfo, Scope
from structrag.tokens import get_counter

DEFAULT_BUDGETS = (500, 1000, 2000)
RECORDS = "knowledge.jsonl"
#: A question is answered when the context holds at least this share of its passage.
COVERED = 0.5
#: Answer passages shorter than this are too thin to judge (a heading followed by a list
#: of links, say): their questions are left out.
MIN_PASSAGE_CHARS = 80
#: How many fragments of a ranking are tried when packing.
PACK_DEPTH = 40
_NUMBERING = re.compile(r"^\s*(\d+(\.\d+)*\.?)\s+")


@dataclass(frozen=True)
class FAQItem:
    """A question and where its answer passage is, in the rewritten page."""

    qid: str
    question: str
    page: str  # the rewritten page's file name
    start: int
    end: int


def _title(text: str) -> str:
    """A heading as a question: Sphinx's pilcrow and "7.1." numbering left out."""
    return _NUMBERING.sub("", text.replace("¶", "").strip()).strip()


def rewrite(document: Document, name: str) -> tuple[str, list[FAQItem]]:
    """A page as Markdown without its question headings, and its questions with the
    range of each answer passage in that Markdown."""
    headings = sorted(document.headings, key=lambda h: h.start)
    parts: list[str] = []
    items: list[FAQItem] = []
    length = 0
    position = 0
    pending: tuple[str, int] | None = None  # a question whose answer is being written

    def emit(text: str) -> None:
        nonlocal length
        parts.append(text)
        length += len(text)

    def close() -> None:
        nonlocal pending
        if pending is not None:
            question, start = pending
            body = "".join(parts)[start:].strip()
            if len(body) >= MIN_PASSAGE_CHARS:
                begin = start + ("".join(parts)[start:].find(body[:40]))
                items.append(FAQItem(f"{name}#{len(items)}", question, name, begin, length))
            pending = None

    for heading in headings:
        if heading.start < position:
            continue
        emit(document.text[position : heading.start])
        close()
        title = _title(heading.title)
        if title.endswith("?"):
            pending = (title, length)
        elif title:
            emit("\n" + "#" * max(1, min(heading.level, 6)) + " " + title + "\n")
        position = heading.end
    emit(document.text[position:])
    close()
    return "".join(parts), items


def build_set(paths: Sequence[Path], folder: Path) -> list[FAQItem]:
    """Rewrite the FAQ pages under ``paths`` into ``folder``; their questions."""
    files = walk(paths).files
    pages = [f for f in files if f.suffix.lower() in (".html", ".htm", ".md", ".markdown")]
    if not pages:
        raise ConfigError(
            f"no HTML or Markdown pages under {', '.join(str(p) for p in paths)}",
            hint="apt-get install python3.11-doc debian-faq, then pass "
            "/usr/share/doc/python3.11/html/faq and /usr/share/doc/debian/FAQ",
        )
    folder.mkdir(parents=True, exist_ok=True)
    items: list[FAQItem] = []
    seen: set[str] = set()
    for page in pages:
        document = load_document(page)
        name = f"{page.parent.parent.name}-{page.parent.name}-{page.name.split('.')[0]}.md".lower()
        text, found = rewrite(document, name)
        found = [i for i in found if i.question.lower() not in seen]
        if not found:
            continue
        seen.update(i.question.lower() for i in found)
        (folder / name).write_text(text, encoding="utf-8")
        items.extend(found)
    if not items:
        raise ConfigError("the pages have no question headings", hint="pass FAQ pages")
    return items


def _pack(
    ranked: Sequence[int],
    lines: dict[int, tuple[str, int]],
    budget: int,
) -> list[int]:
    """Fragments in rank order that fit ``budget`` (one that does not is passed over)."""
    used = 0
    packed: list[int] = []
    for mkey in ranked[:PACK_DEPTH]:
        _, tokens = lines[mkey]
        if used + tokens <= budget:
            packed.append(mkey)
            used += tokens
    return packed


def _coverage(item: FAQItem, places: list[tuple[str, int, int]]) -> float:
    """The share of the answer passage inside the packed fragments."""
    covered: list[tuple[int, int]] = []
    for page, start, end in places:
        if page != item.page:
            continue
        low, high = max(start, item.start), min(end, item.end)
        if low < high:
            covered.append((low, high))
    covered.sort()
    total = 0
    reach = item.start
    for low, high in covered:
        low = max(low, reach)
        if high > low:
            total += high - low
            reach = high
    return total / max(1, item.end - item.start)


def run_knowledge(
    data: Sequence[Path],
    out: Path,
    *,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    systems: Sequence[str] = SEARCH_MODES,
    limit: int | None = None,
    sizes: Sequence[int] = (),
    progress: ProgressSink | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring); returns what ``knowledge.json`` holds."""
    check_choices(systems, SEARCH_MODES, budgets)
    prepare_out(out)
    pages = out / "pages"
    shutil.rmtree(pages, ignore_errors=True)
    items = build_set(data, pages)
    if limit is not None:
        items = items[:limit]
    meta: dict[str, Any] = environment(command)
    meta.update(data=[str(p) for p in data], questions=len(items), budgets=list(budgets))
    counter = get_counter("cl100k_base")
    index_dir = out / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    with Index(index_dir) as index:
        started = time.perf_counter()
        report = index.knowledge.add(pages, shared=True, progress=progress)
        seconds = time.perf_counter() - started
        fragments = report.fragments_added
        meta["add"] = {
            "documents": report.documents_added,
            "fragments": fragments,
            "tokens": report.tokens,
            "seconds": round(seconds, 2),
            "fragments_per_second": round(fragments / seconds, 1) if seconds else None,
        }
        places: dict[int, tuple[str, int, int]] = {}
        lines: dict[int, tuple[str, int]] = {}
        for document in index.knowledge.documents():
            _, stored = index.knowledge.show(document.document_id)
            keys = dict(
                index.sql(
                    "SELECT message_id, mkey FROM messages WHERE conversation = ?",
                    [document_conversation(document.document_id)],
                )
            )
            for fragment in stored:
                mkey = int(keys[fragment.fragment_id])
                places[mkey] = (document.path, fragment.start, fragment.end)
                label = document.path + (f" §{fragment.section[-1]}" if fragment.section else "")
                line = f"[{label}] {fragment.text}"
                lines[mkey] = (line, counter.count(line) + 1)
        scope = Scope(tables=("knowledge",), shared=True)
        with (out / RECORDS).open("w", encoding="utf-8") as handle:
            for system in systems:
                answered = dict.fromkeys(budgets, 0)
                coverage: dict[int, list[float]] = {b: [] for b in budgets}
                timings: list[float] = []
                if progress:
                    progress.start(len(items), system)
                for item in items:
                    started = time.perf_counter()
                    ranked = rank(index.engine, item.question, scope, system).mkeys.tolist()
                    timings.append(time.perf_counter() - started)
                    for budget in budgets:
                        packed = _pack(ranked, lines, budget)
                        share = _coverage(item, [places[k] for k in packed])
                        coverage[budget].append(share)
                        answered[budget] += share >= COVERED
                        record = {
                            "system": system,
                            "qid": item.qid,
                            "question": item.question,
                            "budget": budget,
                            "tokens": sum(lines[k][1] for k in packed),
                            "fragments": len(packed),
                            "coverage": round(share, 4),
                            "answered": share >= COVERED,
                        }
                        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    if progress:
                        progress.advance(1)
                if progress:
                    progress.finish()
                for budget in budgets:
                    rows.append(
                        {
                            "system": system,
                            "budget": budget,
                            "answered": round(answered[budget] / len(items), 4),
                            "coverage": round(statistics.fmean(coverage[budget]), 4),
                            "questions": len(items),
                            "search_ms_p50": round(statistics.median(timings) * 1000, 2),
                        }
                    )
        scale = search_at_sizes(index, pages, items, sizes, systems=systems, progress=progress)
    result: dict[str, Any] = {"meta": meta, "rows": rows}
    if scale:
        result["scale"] = scale
    (out / "knowledge.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "knowledge.md").write_text(markdown(result), encoding="utf-8")
    return result


class ReplayExtractor:
    """Knowledge already extracted, given again for the same text (copies of pages);
    text it has not seen goes to ``inner``."""

    def __init__(self, known: dict[str, list[SemanticRef]], inner: Extractor) -> None:
        self.known = known
        self.inner = inner
        self.name = inner.name
        self.version = inner.version

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        unseen = [m for m in messages if m.text not in self.known]
        fresh = iter(self.inner.extract(unseen)) if unseen else iter(())
        for message in messages:
            refs = self.known.get(message.text)
            if refs is None:
                refs = next(fresh)
                self.known[message.text] = refs
            if progress is not None:
                progress(1)
            yield list(refs)

    def settings(self) -> dict[str, object]:
        return self.inner.settings()


def _replaying(index: Index) -> KnowledgeBase:
    """The index's knowledge base, extracting each distinct fragment text once."""
    base = index.knowledge
    stored = index.store.refs_for_messages(
        [int(k) for (k,) in index.sql("SELECT mkey FROM messages")]
    )
    texts = dict(index.sql("SELECT mkey, text FROM messages"))
    known = {texts[k]: list(refs) for k, refs in stored.items()}
    make = base.parts.ingestor

    def ingestor(memory: MemoryInfo) -> Ingestor:
        made = make(memory)
        made.extractor = ReplayExtractor(known, made.extractor)
        return made

    return KnowledgeBase(replace(base.parts, ingestor=ingestor))


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def search_at_sizes(
    index: Index,
    pages: Path,
    items: Sequence[FAQItem],
    sizes: Sequence[int],
    *,
    systems: Sequence[str] = SEARCH_MODES,
    samples: int = 100,
    progress: ProgressSink | None = None,
) -> list[dict[str, Any]]:
    """Search latency per mode with ``sizes`` fragments in the index (copies of the
    pages added until there are that many); one row per size and mode."""
    base = _replaying(index)
    questions = [i.question for i in items[:samples]]
    scope = Scope(tables=("knowledge",), shared=True)
    rows: list[dict[str, Any]] = []
    copies = 0
    for size in sorted(sizes):
        started = time.perf_counter()
        while _fragments(index) < size:
            copies += 1
            folder = pages.parent / "copy"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for page in sorted(pages.iterdir()):
                shutil.copyfile(page, folder / f"copy{copies}-{page.name}")
            report = base.add(folder, shared=True, progress=progress)
            shutil.rmtree(folder, ignore_errors=True)
            if not report.fragments_added:
                raise ConfigError("copies of the pages added no fragments", hint="report a bug")
        built = time.perf_counter() - started
        fragments = _fragments(index)
        for system in systems:
            rank(index.engine, questions[0], scope, system)  # caches built, not timed
            timings = []
            for question in questions:
                begun = time.perf_counter()
                rank(index.engine, question, scope, system)
                timings.append((time.perf_counter() - begun) * 1000)
            rows.append(
                {
                    "size": size,
                    "fragments": fragments,
                    "system": system,
                    "searches": len(timings),
                    "p50_ms": round(statistics.median(timings), 2),
                    "p95_ms": round(_percentile(timings, 0.95), 2),
                    "build_s": round(built, 1),
                }
            )
    return rows


def _fragments(index: Index) -> int:
    row = index.sql("SELECT count(*) FROM fragments")
    return int(row[0][0])


def markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    budgets = sorted({r["budget"] for r in rows})
    systems = list(dict.fromkeys(r["system"] for r in rows))
    by = {(r["system"], r["budget"]): r for r in rows}
    meta = result["meta"]
    lines = [
        "# Document knowledge recall",
        "",
        f"{meta['questions']} questions from FAQ pages ({', '.join(meta['data'])}), asked "
        "of the pages indexed without their question headings. Answered: the share of "
        f"questions with at least {COVERED:.0%} of their answer passage in the packed "
        "context. No setting was chosen on these questions (held out).",
        "",
        "| system | " + " | ".join(f"{b:,} tokens" for b in budgets) + " | search p50 |",
        "|---|" + "---:|" * (len(budgets) + 1),
    ]
    for system in systems:
        cells = [f"{by[(system, b)]['answered']:.3f}" for b in budgets]
        lines.append(
            f"| {system} | "
            + " | ".join(cells)
            + f" | {by[(system, budgets[0])]['search_ms_p50']:.1f} ms |"
        )
    if "structured" in systems and "hybrid" in systems:
        leads = [by[("structured", b)]["answered"] - by[("hybrid", b)]["answered"] for b in budgets]
        lines += [
            "",
            "Structured minus hybrid: "
            + ", ".join(f"{d:+.3f} at {b:,}" for d, b in zip(leads, budgets, strict=True))
            + ".",
        ]
    pdf = meta.get("pdf")
    if pdf:
        lines += [
            "",
            f"Loading {pdf['pdf']} ({pdf['pages']} pages): {pdf['pages_per_second']} "
            "pages/s (text, page ranges, outline).",
        ]
    scale = result.get("scale")
    if scale:
        lines += [
            "",
            "Search latency with more fragments (the pages copied; p50 / p95):",
            "",
            "| fragments | " + " | ".join(systems) + " |",
            "|---:|" + "---:|" * len(systems),
        ]
        for size in sorted({r["size"] for r in scale}):
            at = {r["system"]: r for r in scale if r["size"] == size}
            cells = [f"{at[s]['p50_ms']:.1f} / {at[s]['p95_ms']:.1f} ms" for s in systems]
            fragments = next(iter(at.values()))["fragments"]
            lines.append(f"| {fragments:,} | " + " | ".join(cells) + " |")
    add = meta.get("add", {})
    if add:
        lines += [
            "",
            f"Indexed {add['documents']} pages into {add['fragments']} fragments "
            f"({add['tokens']:,} tokens) in {add['seconds']} s: "
            f"{add['fragments_per_second']} fragments/s end to end.",
        ]
    return "\n".join(lines) + "\n"


def pdf_pages_per_second(pdf: Path) -> dict[str, Any]:
    """How fast a PDF loads (text page by page, outline, structure): pages per second,
    best of three. ``pdf`` may be gzipped (Debian ships its FAQ so)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = pdf
        if pdf.suffix == ".gz":
            path = Path(scratch) / pdf.with_suffix("").name
            with gzip.open(pdf, "rb") as source, path.open("wb") as target:
                shutil.copyfileobj(source, target)
        timings: list[float] = []
        pages = 0
        for _ in range(3):
            started = time.perf_counter()
            document = load_document(path)
            timings.append(time.perf_counter() - started)
            pages = len(document.pages)
    best = min(timings)
    return {
        "pdf": str(pdf),
        "pages": pages,
        "seconds": round(best, 3),
        "pages_per_second": round(pages / best, 1),
    }
