"""Document knowledge, more defects: damaged files are skipped with their reason (the rest
of the batch is added), a file name that is not UTF-8, ``--encoding`` as the fallback for
files that are not UTF-8, the charset an HTML page declares, a damaged PDF page named in
a warning, chunking that stays linear on text with much whitespace, what ``ingest`` says
of the documents in a folder, hints, and the counts of an add. Real files in tmp_path,
real stores; the damaged PDFs and Word files are built here, byte by byte."""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest
from click.testing import CliRunner

from structrag import Index, InputError, MemoryInputError
from structrag.cli import cli
from structrag.importers import expand_inputs
from structrag.knowledge import Document, chunk, sections_from_headings
from structrag.knowledge.loaders import load_document
from structrag.knowledge.markdown import parse_markdown
from structrag.tokens import get_counter

# -- building damaged files ---------------------------------------------------------------


def _text_ops(text: str) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"


def _pdf(
    pages: list[bytes],
    *,
    filter_name: bytes = b"/FlateDecode",
    damaged: int | None = None,
    misnamed: int | None = None,
) -> bytes:
    """A PDF with a page per content stream (Flate-compressed, its filter named
    ``filter_name``); the stream of page ``damaged`` (1-based) has four bytes flipped
    after its compression, that of page ``misnamed`` names the filter ``/FlateDecod``."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids: list[int] = []
    for number, content in enumerate(pages, start=1):
        data = zlib.compress(content)
        if number == damaged:
            spoilt = bytearray(data)
            for k in range(len(data) // 3, len(data) // 3 + 4):
                spoilt[k] ^= 0xFF
            data = bytes(spoilt)
        named = b"/FlateDecod" if number == misnamed else filter_name
        objects.append(
            b"<< /Length %d /Filter %s >>\nstream\n" % (len(data), named) + data + b"\nendstream"
        )
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n" % (len(objects) + 1, xref))
    out.write(b"%%EOF\n")
    return out.getvalue()


def _docx(*paragraphs: str) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _member(data: bytes, name: str) -> tuple[int, int]:
    """Where a zip member's local header and its central directory record start."""
    raw = name.encode()
    local = 0
    while True:
        local = data.index(b"PK\x03\x04", local)
        size = struct.unpack("<H", data[local + 26 : local + 28])[0]
        if data[local + 30 : local + 30 + size] == raw:
            break
        local += 4
    central = 0
    while True:
        central = data.index(b"PK\x01\x02", central)
        size = struct.unpack("<H", data[central + 28 : central + 30])[0]
        if data[central + 46 : central + 46 + size] == raw:
            break
        central += 4
    return local, central


def _bad_deflate(data: bytes, name: str = "word/document.xml") -> bytes:
    """The member's compressed bytes start a deflate block of the reserved type: reading
    it raises ``zlib.error`` ("invalid block type")."""
    local, _ = _member(data, name)
    size, extra = struct.unpack("<HH", data[local + 26 : local + 30])
    out = bytearray(data)
    out[local + 30 + size + extra] = 0xFF
    return bytes(out)


def _unknown_method(data: bytes, name: str = "word/document.xml") -> bytes:
    """The member says it is compressed by a method zipfile does not know (98, PPMd):
    reading it raises ``NotImplementedError``."""
    local, central = _member(data, name)
    out = bytearray(data)
    out[local + 8 : local + 10] = struct.pack("<H", 98)
    out[central + 10 : central + 12] = struct.pack("<H", 98)
    return bytes(out)


PAGES = [
    _text_ops("The lemurs sleep in the north enclosure."),
    _text_ops("The otters are fed at noon by the river keeper."),
    _text_ops("The herons nest on the island in spring."),
]
GOOD_NOTE = "The kettle is in the kitchen, next to the blue teapot.\n"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


def _fragments_text(index: Index, document_id: str) -> str:
    return "\n".join(f.text for f in index.knowledge.show(document_id)[1])


def _by_path(report_documents: list[dict[str, object]]) -> dict[str, str]:
    return {str(d["path"]): str(d["document_id"]) for d in report_documents}


# -- 1. damaged files are skipped with their reason; the batch goes on ---------------------


def _damaged_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text(GOOD_NOTE, encoding="utf-8")
    (folder / "inflate.docx").write_bytes(_bad_deflate(_docx("Lemurs.", "Otters.")))
    (folder / "method.docx").write_bytes(_unknown_method(_docx("Lemurs.", "Otters.")))
    (folder / "filter.pdf").write_bytes(_pdf(PAGES[:1], filter_name=b"/FlateDecod"))
    deep = b"[" * 5000 + b" " + b"]" * 5000 + b" " + PAGES[0]
    (folder / "deep.pdf").write_bytes(_pdf([deep]))
    (folder / "number.json").write_text('{"n": ' + "7" * 5000 + "}", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("name", "cause", "detail"),
    [
        ("inflate.docx", zlib.error, "damaged: the Word document cannot be read (zlib.error"),
        ("method.docx", NotImplementedError, "damaged: the Word document cannot be read"),
        ("filter.pdf", NotImplementedError, "damaged: the text of page 1 could not be read"),
        ("deep.pdf", RecursionError, "damaged: the text of page 1 could not be read"),
        ("number.json", ValueError, "a number in the JSON has more digits than can be read"),
    ],
)
def test_a_damaged_file_is_an_input_error_with_its_cause(
    tmp_path: Path, name: str, cause: type[BaseException], detail: str
) -> None:
    path = _damaged_folder(tmp_path) / name
    with pytest.raises(InputError) as caught:
        load_document(path)
    assert caught.value.path == str(path)
    assert caught.value.detail.startswith(detail), caught.value.detail
    assert isinstance(caught.value.__cause__, cause)
    assert caught.value.hint


def test_damaged_files_are_skipped_and_the_good_ones_added(index: Index, tmp_path: Path) -> None:
    folder = _damaged_folder(tmp_path)
    report = index.knowledge.add(folder, shared=True)
    assert [d["path"] for d in report.documents] == ["notes.md"]
    assert report.documents_added == 1
    skipped = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert set(skipped) == {"inflate.docx", "method.docx", "filter.pdf", "deep.pdf", "number.json"}
    for name in ("inflate.docx", "method.docx", "filter.pdf", "deep.pdf"):
        assert skipped[name].startswith("damaged: "), skipped[name]
    assert [d.path for d in index.knowledge.documents()] == ["notes.md"]


def test_the_cli_adds_the_good_files_and_reports_the_damaged(tmp_path: Path) -> None:
    folder = _damaged_folder(tmp_path)
    db = tmp_path / "ix"
    runner = CliRunner()
    result = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output  # some files were added: status 0
    report = json.loads(result.stdout)
    assert [d["path"] for d in report["documents"]] == ["notes.md"]
    assert len(report["skipped"]) == 5
    text = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", str(db)])
    assert text.exit_code == 0, text.output
    assert f"skipped {folder / 'inflate.docx'}: damaged: " in text.output
    assert "Traceback" not in text.output


def test_an_add_of_damaged_files_only_fails_and_leaves_no_index(tmp_path: Path) -> None:
    folder = _damaged_folder(tmp_path)
    (folder / "notes.md").unlink()
    db = tmp_path / "new-index"
    result = CliRunner().invoke(cli, ["knowledge", "add", str(folder), "--db", str(db)])
    assert result.exit_code == 1
    assert "nothing to add: 5 paths skipped" in str(result.exception)
    assert not db.exists()  # no empty index left behind
    result = CliRunner().invoke(cli, ["knowledge", "add", "missing-folder", "--db", str(db)])
    assert result.exit_code == 1 and not db.exists()


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
def test_memory_errors_and_interrupts_are_not_taken_for_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    path = tmp_path / "fine.docx"
    path.write_bytes(_docx("Lemurs."))

    def fail(*args: object, **kwargs: object) -> None:
        raise error()

    monkeypatch.setattr(docx, "Document", fail)  # what docx_loader reads the file with
    with pytest.raises(error):
        load_document(path)


# -- 2. a file name that is not UTF-8 ------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_added_under_its_shown_name(
    index: Index, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    odd = folder / os.fsdecode(b"caf\xe9.txt")
    odd.write_text("The espresso machine descales on Fridays.\n", encoding="utf-8")
    (folder / "normal.txt").write_text(GOOD_NOTE, encoding="utf-8")
    first = index.knowledge.add(folder)
    ids = _by_path(first.documents)
    assert set(ids) == {"caf\\xe9.txt", "normal.txt"} and not first.skipped
    assert "descales" in _fragments_text(index, ids["caf\\xe9.txt"])
    (hit,) = index.knowledge.search("espresso descales", count=1, mode="text")
    assert hit.label == "caf\\xe9.txt"
    # the same bytes again: unchanged, under the same id (the file is found by its bytes)
    again = index.knowledge.add(folder)
    assert again.documents_unchanged == 2 and again.documents_added == 0 and not again.gone
    # given on its own (the CLI passes such a name as surrogate escapes)
    alone = index.knowledge.add(str(odd))
    assert alone.documents_unchanged == 1 and not alone.skipped
    # renamed: moved, not a second document and not gone
    odd.rename(folder / "cafe.txt")
    moved = index.knowledge.add(folder)
    (document,) = [d for d in moved.documents if d["status"] == "moved"]
    assert document["path"] == "cafe.txt"
    assert document["moved_from"] == {"document_id": ids["caf\\xe9.txt"], "path": "caf\\xe9.txt"}
    assert sorted(d.path for d in index.knowledge.documents()) == ["cafe.txt", "normal.txt"]


# -- 3. --encoding is the fallback for the files that are not UTF-8 ------------------------


def test_encoding_is_the_fallback_for_files_that_are_not_utf8(index: Index, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "utf8.md").write_text("# Zürich\n\nThe café opens at nine.\n", encoding="utf-8")
    (folder / "bom.txt").write_bytes("\ufeffCrème brûlée on Sundays.\n".encode())
    (folder / "latin1.txt").write_bytes("Das Büro in Köln schließt um fünf.\n".encode("latin-1"))
    (folder / "faq.json").write_text('{"city": "Zürich"}', encoding="utf-8")
    report = index.knowledge.add(folder, encoding="latin-1")
    assert not report.skipped
    ids = _by_path(report.documents)
    assert "The café opens at nine." in _fragments_text(index, ids["utf8.md"])
    assert _fragments_text(index, ids["bom.txt"]) == "Crème brûlée on Sundays."
    assert "Köln schließt um fünf" in _fragments_text(index, ids["latin1.txt"])
    assert _fragments_text(index, ids["faq.json"]) == "city: Zürich"


def test_encoding_option_help_and_an_unknown_encoding(index: Index, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["knowledge", "add", "--help"])
    assert "not valid UTF-8" in " ".join(result.output.split())
    (tmp_path / "a.txt").write_text(GOOD_NOTE, encoding="utf-8")
    with pytest.raises(MemoryInputError, match="unknown encoding 'no-such-codec'"):
        index.knowledge.add(tmp_path / "a.txt", encoding="no-such-codec")


# -- 4. the charset an HTML page declares ---------------------------------------------------


def _page(charset: str, body: bytes) -> bytes:
    return (
        b'<html><head><meta charset="' + charset.encode() + b'"><title>Menu</title></head>'
        b"<body><p>" + body + b"</p></body></html>"
    )


def test_html_charset_declarations_that_do_not_match_the_bytes(
    index: Index, tmp_path: Path
) -> None:
    folder = tmp_path / "pages"
    folder.mkdir()
    dessert = "Crème brûlée for the lemur keepers."
    (folder / "wrong.html").write_bytes(_page("utf-8", dessert.encode("latin-1")))
    (folder / "unknown.html").write_bytes(_page("x-unknown-enc", dessert.encode("utf-8")))
    (folder / "mislabelled.html").write_bytes(_page("ISO-8859-1", dessert.encode("utf-8")))
    (folder / "euro.html").write_bytes(_page("windows-1252", "Tea costs 2 €.".encode("cp1252")))
    # without --encoding: the page that is not in its declared charset is skipped, with a
    # hint that --encoding reads it
    plain = index.knowledge.add(folder, dry_run=True)
    (skipped,) = plain.skipped
    assert skipped["path"].endswith("wrong.html")
    assert "the page declares utf-8" in skipped["reason"] and "--encoding" in skipped["reason"]
    # with it, --encoding wins over the declaration the bytes break
    report = index.knowledge.add(folder, encoding="latin-1")
    assert not report.skipped
    ids = _by_path(report.documents)
    for name in ("wrong.html", "unknown.html", "mislabelled.html"):
        assert _fragments_text(index, ids[name]) == dessert, name
    # a declaration the bytes keep still counts (not --encoding): cp1252's euro sign
    assert _fragments_text(index, ids["euro.html"]) == "Tea costs 2 €."
    warnings = "\n".join(report.warnings)
    assert "unknown.html: the page declares the charset 'x-unknown-enc', which is unknown" in (
        warnings
    )
    assert (
        "mislabelled.html: the page declares the charset ISO-8859-1, but its bytes are UTF-8"
        in (warnings)
    )
    assert "wrong.html: the page declares the charset utf-8, but its bytes are not in it" in (
        warnings
    )
    assert "euro.html" not in warnings


# -- 5. a damaged PDF page is named in a warning --------------------------------------------


def test_a_damaged_pdf_page_is_named_and_the_others_are_added(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "zoo.pdf").write_bytes(_pdf(PAGES, damaged=2))
    document = load_document(folder / "zoo.pdf")
    assert [p.number for p in document.pages] == [1, 2, 3]
    assert "lemurs" in document.text and "herons" in document.text
    assert "otters" not in document.text
    (warning,) = document.warnings
    assert warning.startswith("page 2: its text could not be read (damaged stream: ")
    db = str(tmp_path / "ix")
    result = CliRunner().invoke(cli, ["knowledge", "add", str(folder / "zoo.pdf"), "--db", db])
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output and "zoo.pdf: page 2: its text could not be read" in (
        result.output
    )
    as_json = CliRunner().invoke(
        cli, ["knowledge", "add", str(folder / "zoo.pdf"), "--db", db, "--json"]
    )
    report = json.loads(as_json.stdout)
    assert any("page 2: its text could not be read" in w for w in report["warnings"])


def test_a_pdf_page_the_reader_fails_on_costs_that_page(index: Index, tmp_path: Path) -> None:
    path = tmp_path / "parts.pdf"
    path.write_bytes(_pdf(PAGES, misnamed=2))
    report = index.knowledge.add(path)
    assert report.documents_added == 1 and not report.skipped
    (warning,) = report.warnings
    assert warning.startswith(f"{path}: page 2: its text could not be read (NotImplementedError: ")
    text = _fragments_text(index, report.documents[0]["document_id"])
    assert "lemurs" in text and "herons" in text and "otters" not in text


# -- 7. chunking text with much whitespace stays linear -------------------------------------


class _CountingCounter:
    """The real tokenizer, counting how many characters it was given."""

    name = "cl100k_base"

    def __init__(self) -> None:
        self.inner = get_counter(self.name)
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)


def test_chunking_indented_text_tokenizes_each_character_a_few_times_only() -> None:
    """Lines indented ever deeper (170 KB): packing used to count the whole growing range
    once per line, over 20 times the text's length here, and quadratic in it."""
    text = "\n".join(" " * (2 * i) + f"line {i} of the indented text." for i in range(400))
    structure = parse_markdown(text)
    document = Document(
        "indented.md",
        "markdown",
        text,
        "indented",
        "0" * 64,
        headings=structure.headings,
        sections=sections_from_headings(text, structure.headings),
        blocks=structure.blocks,
    )
    counter = _CountingCounter()
    fragments = chunk(document, counter=counter)
    assert counter.chars <= 10 * len(text), counter.chars / len(text)
    real = get_counter("cl100k_base")
    assert all(real.count(f.text) <= 512 for f in fragments)
    assert all(f.text == text[f.start : f.end] for f in fragments)
    assert "line 399 of" in fragments[-1].text


# -- 8, 9. what ingest says of documents, and hints -----------------------------------------


def test_ingest_of_a_folder_says_its_documents_are_knowledge(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "chat.jsonl").write_text(
        '{"speaker": "Kevin", "text": "Hello", "timestamp": "2024-05-08T10:00:00"}\n',
        encoding="utf-8",
    )
    (folder / "handbook.pdf").write_bytes(_pdf(PAGES[:1]))
    (folder / "travel.docx").write_bytes(_docx("Trains leave at nine."))
    (folder / "old.bin").write_bytes(b"\x00\x01")
    (_, note), *_ = expand_inputs([folder]).skipped
    assert "handbook.pdf (is a PDF document, not a conversation: add it with `structrag " in note
    assert "travel.docx (is a Word document, not a conversation" in note
    assert "knowledge add`" in note
    assert "old.bin (no known kind (.bin))" in note


def test_ingest_of_a_word_file_named_txt_needs_no_new_name(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(_docx("Trains leave at nine."))
    result = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(tmp_path / "ix")])
    assert isinstance(result.exception, InputError)
    hint = str(result.exception.hint)
    assert "structrag knowledge add" in hint and "rename" not in hint
    assert load_document(path).text == "Trains leave at nine."  # as the hint says


def test_deep_json_as_a_document_is_not_called_a_conversation_export(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    with pytest.raises(InputError, match="nested too deeply") as caught:
        load_document(path)
    assert "conversation" not in str(caught.value.hint)
    assert "document" in str(caught.value.hint)
    # a conversation export nested that deep still says so
    result = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(tmp_path / "ix")])
    assert "no conversation export nests this deep" in str(result.exception)


def test_a_text_file_without_an_extension_is_told_to_take_txt(tmp_path: Path) -> None:
    path = tmp_path / "NOTES"
    path.write_text(GOOD_NOTE, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_document(path)
    assert caught.value.hint == (
        "if it is text, rename it to NOTES.txt (NOTES.md for Markdown) and add it again"
    )


# -- 10. the counts of an add ---------------------------------------------------------------


def test_an_unchanged_documents_fragments_count_as_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text(GOOD_NOTE, encoding="utf-8")
    (folder / "long.md").write_text(
        "\n\n".join(f"Paragraph {i} about the orchard's pear trees. " * 40 for i in range(8)),
        encoding="utf-8",
    )
    db = str(tmp_path / "ix")
    runner = CliRunner()
    first = json.loads(
        runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--json"]).stdout
    )
    fragments = sum(d["fragments"] for d in first["documents"])
    assert fragments > 2 and first["fragments_added"] == fragments
    assert first["fragments_unchanged"] == 0
    again = json.loads(
        runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--json"]).stdout
    )
    assert again["documents_unchanged"] == 2
    assert (again["fragments_added"], again["fragments_unchanged"]) == (0, fragments)
    (folder / "notes.md").write_text(GOOD_NOTE + "\nThe mugs are above it.\n", encoding="utf-8")
    third = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db])
    assert f"fragments 0 new, 1 changed, {fragments - 1} unchanged, 0 removed" in third.output
