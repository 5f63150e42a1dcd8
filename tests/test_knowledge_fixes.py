"""Document knowledge as a user meets it: files whose names lie about what they are,
documents given to ``ingest``, skip reasons that keep their place and what to do, JSON
values with their keys, a renamed or deleted file in a folder added again, citations in
``ask --json`` and ``query --json``, the ``document:`` scope as the user writes it, and
documents in ``structrag conversations`` and ``show``. Real indexes, real spaCy."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag import Index, InputError
from structrag.cli import cli
from structrag.importers.base import decode_text
from structrag.knowledge.loaders import load_document, walk

FIXTURES = Path(__file__).parent / "fixtures" / "knowledge"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _copy(folder: Path, name: str, as_name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (as_name or name)
    shutil.copy(FIXTURES / name, target)
    return target


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


# -- 1. what a file is, whatever its name -------------------------------------------------


def test_a_pdf_or_word_file_under_a_text_name_is_read_as_what_it_is(tmp_path: Path) -> None:
    pdf = load_document(_copy(tmp_path, "orchard_handbook.pdf", "handbook.md"))
    assert pdf.format == "pdf" and pdf.pages and "orchard" in pdf.text.lower()
    word = load_document(_copy(tmp_path, "coop_handbook.docx", "coop.txt"))
    assert word.format == "docx" and word.headings


def test_a_text_file_under_a_document_name_is_told_to_be_renamed(tmp_path: Path) -> None:
    path = _copy(tmp_path, "quillmark_guide.md", "guide.docx")
    with pytest.raises(InputError, match="this is a text file, not a Word document") as caught:
        load_document(path)
    assert caught.value.hint == "rename it to .md and add it again"
    path = _copy(tmp_path, "meeting_notes.txt", "notes.pdf")
    with pytest.raises(InputError, match="not a PDF") as caught:
        load_document(path)
    assert caught.value.hint == "rename it to .txt and add it again"


def test_reading_a_pdf_or_word_file_as_text_says_what_it_is_not_which_encoding() -> None:
    pdf = (FIXTURES / "orchard_handbook.pdf").read_bytes()
    with pytest.raises(InputError) as caught:
        decode_text(Path("handbook.md"), pdf)
    assert caught.value.hint is not None
    assert "this is a PDF file" in caught.value.hint and "rename it to .pdf" in caught.value.hint
    assert "--encoding" not in caught.value.hint and "knowledge add" in caught.value.hint
    word = (FIXTURES / "coop_handbook.docx").read_bytes()
    # latin-1 decodes any byte: the zip's NUL bytes are what stops it
    with pytest.raises(InputError, match="NUL bytes") as caught:
        decode_text(Path("coop.txt"), word, "latin-1")
    assert caught.value.hint is not None and "this is a Word file" in caught.value.hint
    assert "utf-16" not in caught.value.hint and "rename it to .docx" in caught.value.hint


def test_ingest_of_a_document_says_to_add_it_as_knowledge(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "ix")
    cases = {
        _copy(tmp_path, "orchard_handbook.pdf"): ("PDF document", ""),
        _copy(tmp_path, "orchard_handbook.pdf", "renamed.md"): ("PDF document", "its name"),
        _copy(tmp_path, "coop_handbook.docx", "coop.txt"): ("Word document", "its name"),
        _copy(tmp_path, "station_setup.html"): ("HTML document", ""),
    }
    for path, (what, rename) in cases.items():
        result = runner.invoke(cli, ["ingest", str(path), "--db", db])
        assert isinstance(result.exception, InputError), result.output
        assert what in result.exception.message
        assert f"structrag knowledge add {path}" in str(result.exception.hint)
        assert rename in str(result.exception.hint)
    prose = _copy(tmp_path, "quillmark_guide.md")
    result = runner.invoke(cli, ["ingest", str(prose), "--db", db])
    assert isinstance(result.exception, InputError), result.output
    assert "SPEAKER: text" in result.exception.message
    assert f"structrag knowledge add {prose}" in str(result.exception.hint)


# -- 2. skip reasons keep their place and what to do --------------------------------------


def test_skip_reasons_keep_line_column_and_hint(index: Index, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _copy(folder, "quillmark_guide.md")
    (folder / "broken.json").write_text('{\n  "a": "b",\n  "c" "d"\n}\n', encoding="utf-8")
    (folder / "data.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    report = index.knowledge.add(folder, shared=True)
    reasons = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert reasons["broken.json"].startswith("line 3, column 7: invalid JSON")
    assert "(fix the JSON at that position" in reasons["broken.json"]
    assert "unsupported file type '.csv'" in reasons["data.csv"]
    assert "(convert it to PDF, Markdown or text)" in reasons["data.csv"]
    found = walk([folder])
    assert any("(unzip" in s.reason or "(convert" in s.reason for s in found.skipped)


# -- 3. JSON values keep their keys -------------------------------------------------------


def test_a_json_config_is_knowledge_with_its_keys(index: Index, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"service": {"owner": "Team Falcon", "port": 8080, "debug": true}}')
    flags = tmp_path / "flags.json"
    flags.write_text('{"port": 8080, "debug": true}')
    report = index.knowledge.add([config, flags], shared=True)
    assert report.documents_added == 2 and not report.skipped
    hits = index.knowledge.search("service owner", mode="text")
    assert hits and "service.owner: Team Falcon" in hits[0].fragment.text
    assert "service.port: 8080" in hits[0].fragment.text
    assert "service.debug: true" in hits[0].fragment.text


# -- 4. a renamed file, a deleted file, a file that no longer loads -----------------------


def test_a_renamed_file_in_a_folder_added_again_is_moved(index: Index, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _copy(folder, "quillmark_guide.md")
    _copy(folder, "meeting_notes.txt")
    index.knowledge.add(folder, shared=True)
    before = {d.path: d.document_id for d in index.knowledge.documents()}
    (folder / "quillmark_guide.md").rename(folder / "guide.md")
    report = index.knowledge.add(folder, shared=True)
    assert (report.documents_added, report.documents_updated) == (0, 1)
    moved = next(d for d in report.documents if d["path"] == "guide.md")
    assert moved["status"] == "moved"
    assert moved["moved_from"] == {
        "document_id": before["quillmark_guide.md"],
        "path": "quillmark_guide.md",
    }
    assert sorted(d.path for d in index.knowledge.documents()) == ["guide.md", "meeting_notes.txt"]
    assert report.gone == []
    # nothing is left of the old document
    old = before["quillmark_guide.md"]
    assert index.sql("SELECT count(*) FROM fragments WHERE document_id = ?", [old]) == [(0,)]
    assert index.sql("SELECT count(*) FROM messages WHERE conversation = ?", [f"doc:{old}"]) == [
        (0,)
    ]
    again = index.knowledge.add(folder, shared=True)
    assert again.documents_unchanged == 2 and again.documents_updated == 0


def test_a_deleted_file_and_a_broken_file_are_reported_with_what_to_do(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _copy(folder, "quillmark_guide.md")
    _copy(folder, "meeting_notes.txt")
    (folder / "faq.json").write_text('{"q": "How?", "a": "Like this."}', encoding="utf-8")
    db = str(tmp_path / "ix")
    runner = CliRunner()
    assert runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db]).exit_code == 0
    listed = json.loads(runner.invoke(cli, ["knowledge", "list", "--db", db, "--json"]).output)
    ids = {d["path"]: d["document_id"] for d in listed}
    (folder / "meeting_notes.txt").unlink()
    (folder / "faq.json").write_text('{"q": "How?", "a": ', encoding="utf-8")
    result = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gone"] == [
        {
            "document_id": ids["meeting_notes.txt"],
            "path": "meeting_notes.txt",
            "file": str((folder / "meeting_notes.txt").resolve()),
        }
    ]
    (skipped,) = report["skipped"]
    assert f"the indexed copy ({ids['faq.json']}) is kept" in skipped["reason"]
    text = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db])
    assert f"`structrag knowledge remove {ids['meeting_notes.txt']}`" in text.output
    assert "is gone; the document is kept" in text.output


# -- 5, 6, 7: citations, the document: scope, conversations and show ----------------------


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An index of a chat and a folder of documents (added by a relative path)."""
    root = tmp_path_factory.mktemp("mixed")
    folder = root / "docs"
    _copy(folder, "orchard_handbook.pdf")
    _copy(folder, "quillmark_guide.md")
    db = str(root / "ix")
    runner = CliRunner()
    here = Path.cwd()
    os.chdir(root)
    try:
        added = runner.invoke(cli, ["knowledge", "add", "docs", "--db", db])
        assert added.exit_code == 0, added.output
        ingested = runner.invoke(
            cli, ["ingest", str(EXAMPLES / "friends_chat.jsonl"), "--db", db, "-q"]
        )
        assert ingested.exit_code == 0, ingested.output
    finally:
        os.chdir(here)
    yield db, root


def _json(args: list[str]) -> object:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ask_and_query_json_cite_fragments_with_fields(mixed: tuple[str, Path]) -> None:
    db, _ = mixed
    answer = _json(
        ["ask", "How do I install Quillmark?", "--db", db, "--sources", "knowledge", "--json"]
    )
    assert isinstance(answer, dict)
    first = answer["messages"][0]
    assert first["path"] == "quillmark_guide.md" and first["document_id"].startswith("doc-")
    assert {"page", "page_end", "section"} <= set(first) and isinstance(first["section"], list)
    pdf = _json(["query", "source:knowledge orchard", "--db", db, "--json"])
    assert isinstance(pdf, dict)
    pages = [m for m in pdf["messages"] if m.get("path") == "orchard_handbook.pdf"]
    assert pages and all(isinstance(m["page"], int) for m in pages)
    chat = _json(["query", "source:conversations Marco", "--db", db, "--json"])
    assert isinstance(chat, dict) and chat["messages"]
    assert all("document_id" not in m for m in chat["messages"])


def test_the_document_scope_as_the_user_writes_it(
    mixed: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, root = mixed
    monkeypatch.chdir(root)
    with Index(db) as index:

        def found(scope: str) -> int:
            return len(index.query(f"{scope} install", limit=50).messages)

        stored = found('document:"quillmark_guide.md"')
        assert stored
        assert found('document:"docs/quillmark_guide.md"') == stored  # as given to add
        assert found('document:"./docs/quillmark_guide.md"') == stored
        assert found(f'document:"{root / "docs" / "quillmark_guide.md"}"') == stored
        assert found('document:"%.md"') == 0  # not a LIKE pattern
        assert found('document:"quillmark_guide.m_"') == 0
        assert found('document:"nothere.pdf"') == 0
        notes = index.query('document:"nothere.pdf" install').notes
        assert any("no document 'nothere.pdf' in the index" in n for n in notes), notes
        named = index.query('document:"quillmark_guide.md" zzzqqq').notes
        assert not any("no document" in n for n in named), named


def test_a_conversation_with_knowledge_says_what_it_narrows(mixed: tuple[str, Path]) -> None:
    db, _ = mixed
    with Index(db) as index:
        for sources in (("knowledge",), ("conversations", "knowledge")):
            answer = index.ask("How do I install it?", conversation="friends", sources=sources)
            assert any("narrows conversations' messages only" in n for n in answer.notes)
        plain = index.ask("Who adopted a dog?", conversation="friends")
        assert not any("narrows" in n for n in plain.notes)


def test_conversations_list_documents_apart_and_show_names_a_fragments_place(
    mixed: tuple[str, Path],
) -> None:
    db, _ = mixed
    runner = CliRunner()
    listing = runner.invoke(cli, ["conversations", "--db", db])
    assert listing.exit_code == 0, listing.output
    assert "doc:doc-" not in listing.output
    assert "and 2 documents added as knowledge" in listing.output
    assert "`structrag knowledge list" in listing.output
    rows = _json(["conversations", "--db", db, "--json"])
    assert isinstance(rows, list)
    documents = [r for r in rows if r["kind"] == "document"]
    assert sorted(r["path"] for r in documents) == ["orchard_handbook.pdf", "quillmark_guide.md"]
    assert all(r["fragments"] >= 1 and r["title"] for r in documents)
    assert any(r["kind"] == "conversation" and r["messages"] for r in rows)
    guide = next(r for r in documents if r["path"] == "quillmark_guide.md")
    shown = runner.invoke(cli, ["show", f"{guide['document_id']}-chunk-0", "--db", db])
    assert shown.exit_code == 0, shown.output
    first = shown.output.splitlines()[0]
    assert "[quillmark_guide.md" in first and not first.endswith(" ?")
