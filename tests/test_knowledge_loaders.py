"""Document loaders: every format reads its fixture with the right structure, and files
that cannot be read fail with the file's name and what to do. Real files throughout; the
binary fixtures come from tests/fixtures/knowledge/make_fixtures.py."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from structrag.errors import ConfigError, InputError, UnknownFormatError
from structrag.knowledge.document import Document, Heading, Section, sections_from_headings
from structrag.knowledge.html_text import extract_html
from structrag.knowledge.json_text import json_path, json_strings
from structrag.knowledge.loaders import SUPPORTED_EXTENSIONS, load_document, walk
from structrag.knowledge.markdown import parse_markdown
from structrag.knowledge.qa_data import load_squad, load_squad_from_package

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "knowledge"


def fixture(name: str) -> Path:
    return FIXTURES / name


def at(document: Document, needle: str) -> int:
    offset = document.text.find(needle)
    assert offset >= 0, f"{needle!r} not in the text"
    return offset


# -- every fixture ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt", "title"),
    [
        ("orchard_handbook.pdf", "pdf", "Heronsgate Orchard Volunteer Handbook"),
        ("quillmark_guide.md", "markdown", "Quillmark User Guide"),
        ("meeting_notes.txt", "text", "meeting_notes"),
        ("coop_handbook.docx", "docx", "Riverside Bike Co-op Member Handbook"),
        ("station_setup.html", "html", "Setting up your Larkspur station | Larkspur Weather"),
        ("faq.json", "json", "Larkspur Weather Station FAQ"),
    ],
)
def test_each_format_loads_with_title_and_the_hash_of_its_bytes(
    name: str, fmt: str, title: str
) -> None:
    path = fixture(name)
    document = load_document(path)
    assert document.format == fmt
    assert document.title == title
    assert document.path == str(path)
    assert document.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert document.text.strip()
    for section in document.sections:
        assert document.text[section.start : section.end].strip()
    for heading in document.headings:
        assert heading.title.split()[-1] in document.text[heading.start : heading.end]


def test_fixtures_stay_small() -> None:
    for path in FIXTURES.iterdir():
        assert path.stat().st_size < 64_000, f"{path.name} is too big for a fixture"


# -- PDF ----------------------------------------------------------------------------------


def test_pdf_pages_keep_their_numbers_and_ranges() -> None:
    document = load_document(fixture("orchard_handbook.pdf"))
    assert [p.number for p in document.pages] == [1, 2, 3, 4]
    reader = PdfReader(fixture("orchard_handbook.pdf"))
    for page in document.pages:
        assert document.text[page.start : page.end] == reader.pages[page.number - 1].extract_text()
    for before, after in zip(document.pages, document.pages[1:], strict=False):
        assert document.text[before.end : after.start] == "\n\n"
    assert document.page_at(at(document, "Safety on work days")) == 2
    assert document.page_at(at(document, "Contacts")) == 4
    assert document.page_at(document.pages[0].end) == 2  # the separator belongs to the next


def test_pdf_outline_becomes_headings_and_section_paths() -> None:
    document = load_document(fixture("orchard_handbook.pdf"))
    assert [(h.level, h.title) for h in document.headings] == [
        (1, "Welcome to Heronsgate Orchard"),
        (2, "Who looks after what"),
        (1, "Safety on work days"),
        (2, "First aid"),
        (1, "The orchard year"),
        (2, "Harvest and apple day"),
        (1, "Contacts"),
    ]
    for heading in document.headings:
        assert document.text[heading.start : heading.end] == heading.title
    assert document.section_path(at(document, "adrenaline")) == ("Safety on work days", "First aid")
    assert document.section_path(at(document, "Edition of March")) == ()
    # "The orchard year" runs from page 2 onto page 3
    silver = at(document, "silver")
    assert document.page_at(silver) == 2
    assert document.page_at(at(document, "leaf disease")) == 3
    assert document.section_path(at(document, "leaf disease")) == ("The orchard year",)


def test_pdf_with_only_an_owner_password_opens(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=fixture("orchard_handbook.pdf"))
    writer.encrypt(user_password="", owner_password="trust-only", algorithm="RC4-128")
    path = tmp_path / "restricted.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    document = load_document(path)
    assert "Heronsgate Orchard is a community orchard" in document.text
    assert len(document.pages) == 4


def test_pdf_without_outline_has_pages_but_no_sections(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=fixture("orchard_handbook.pdf"))
    writer.root_object.pop("/Outlines", None)
    buffer = io.BytesIO()
    writer.write(buffer)
    path = tmp_path / "plain.pdf"
    path.write_bytes(buffer.getvalue())
    document = load_document(path)
    assert len(document.pages) == 4
    assert document.headings == () and document.sections == ()


def test_encrypted_pdf_says_so_and_how_to_fix_it() -> None:
    with pytest.raises(InputError) as caught:
        load_document(fixture("encrypted.pdf"))
    assert caught.value.path == str(fixture("encrypted.pdf"))
    assert "encrypted" in caught.value.detail and "password" in caught.value.detail
    assert caught.value.hint is not None and "decrypt" in caught.value.hint


def test_image_only_pdf_says_so_and_suggests_ocr() -> None:
    with pytest.raises(InputError) as caught:
        load_document(fixture("scanned.pdf"))
    assert "no extractable text" in caught.value.detail
    assert caught.value.hint is not None and "OCR" in caught.value.hint


def test_a_file_that_is_not_a_pdf(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(b"<html>this was saved from a browser</html>")
    with pytest.raises(InputError, match="this is a text file, not a PDF") as caught:
        load_document(path)
    assert caught.value.path == str(path)
    assert caught.value.hint == "rename it to .html and add it again"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 an image, not text")
    with pytest.raises(InputError, match="not a readable PDF"):
        load_document(path)


def test_a_truncated_pdf(tmp_path: Path) -> None:
    data = fixture("orchard_handbook.pdf").read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError) as caught:
        load_document(path)
    assert caught.value.path == str(path)


# -- Markdown -----------------------------------------------------------------------------


def test_markdown_headings_code_blocks_and_section_paths() -> None:
    document = load_document(fixture("quillmark_guide.md"))
    assert [(h.level, h.title) for h in document.headings] == [
        (1, "Install"),
        (2, "From PyPI"),
        (2, "From source"),
        (1, "Configuration"),
        (2, "Environment variables"),
        (2, "Colour themes"),  # a setext heading
        (1, "Everyday commands"),
        (3, "Printing"),
        (1, "Troubleshooting"),
    ]
    assert [b.info for b in document.blocks] == ["sh", "sh", "toml", ""]
    for block in document.blocks:
        code = document.text[block.start : block.end]
        assert code.startswith(("```", "~~~")) and code.endswith(("```", "~~~"))
    # "# ..." inside the code blocks are comments, not headings
    assert document.section_path(at(document, "# an editable install")) == (
        "Install",
        "From source",
    )
    assert document.section_path(at(document, "# quillmark.toml")) == ("Configuration",)
    assert document.section_path(at(document, "Three themes")) == (
        "Configuration",
        "Colour themes",
    )
    assert document.section_path(at(document, "lays the notebook out")) == (
        "Everyday commands",
        "Printing",
    )
    assert document.section_path(0) == ()  # the front matter and the introduction


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("# Title #\n", [(1, "Title")]),
        ("#hashtag is not a heading\n", []),
        ("####### seven is too many\n", []),
        ("#\n## Empty above\n", [(2, "Empty above")]),
        ("   ### indented three\n", [(3, "indented three")]),
        ("    # indented four is code\n", []),
        ("Para line\n\n---\n", []),  # a rule after a blank line
        ("Two line\nheading\n===\n", [(1, "Two line heading")]),
        ("- item\n---\n", []),  # a list item, then a rule
        ("```\n# not a heading\n", []),  # an unclosed fence runs to the end
        ("````\n```\n# inside\n````\n# After\n", [(1, "After")]),
        ("~~~python\n# comment\n~~~\n## Real\n", [(2, "Real")]),
        ("---\ntitle: T\n---\n# H\n", [(1, "H")]),  # front matter is not a heading
    ],
)
def test_markdown_heading_rules(source: str, expected: list[tuple[int, str]]) -> None:
    assert [(h.level, h.title) for h in parse_markdown(source).headings] == expected


def test_markdown_unclosed_fence_is_one_block_to_the_end() -> None:
    text = "intro\n\n```python\nx = 1\n\n# not a heading\ny = 2\n"
    structure = parse_markdown(text)
    assert len(structure.blocks) == 1
    assert text[structure.blocks[0].start : structure.blocks[0].end] == text[7:].rstrip("\n")


def test_markdown_title_from_front_matter_or_first_h1(tmp_path: Path) -> None:
    assert parse_markdown("---\ntitle: 'Quoted'\n---\n# H\n").title == "Quoted"
    assert parse_markdown("## Sub\n# Main\n").title == "Main"
    path = tmp_path / "untitled-notes.md"
    path.write_text("no headings here\n")
    assert load_document(path).title == "untitled-notes"


def test_sections_from_headings_skipped_levels_and_preamble() -> None:
    text = "pre\n# A\na\n### C\nc\n## B\nb\n"
    headings = parse_markdown(text).headings
    sections = sections_from_headings(text, headings)
    assert [s.path for s in sections] == [(), ("A",), ("A", "C"), ("A", "B")]
    assert sections[0] == Section((), 0, 4)
    assert sections[-1].end == len(text)


# -- DOCX ---------------------------------------------------------------------------------


def test_docx_headings_tables_and_section_paths() -> None:
    document = load_document(fixture("coop_handbook.docx"))
    assert [(h.level, h.title) for h in document.headings] == [
        (1, "Membership"),
        (2, "Fees"),
        (2, "Leaving and refunds"),
        (1, "Workshop sessions"),
        (2, "Tool rules"),
        (2, "Women and non-binary sessions"),
        (1, "Parts and recycling"),
    ]
    (table,) = document.blocks
    assert table.kind == "table"
    rows = document.text[table.start : table.end].split("\n")
    assert rows[0] == "Membership | Yearly fee | Includes"
    assert rows[1] == "Standard | £45 | Workshop use, member prices on parts"
    # the merged cell is written once, not once per column it spans
    assert rows[-1] == "Concession applies to students, under-25s and anyone on benefits."
    assert document.section_path(at(document, "£45")) == ("Membership", "Fees")
    assert document.section_path(at(document, "Priyanka")) == (
        "Workshop sessions",
        "Women and non-binary sessions",
    )
    # the Title-style paragraph is text, not a section
    assert document.section_path(0) == ()


def test_a_file_that_is_not_a_docx(tmp_path: Path) -> None:
    path = tmp_path / "letter.docx"
    path.write_bytes(b"\xd0\xcf\x11\xe0 an old binary .doc renamed")
    with pytest.raises(InputError, match="not a readable Word document") as caught:
        load_document(path)
    assert caught.value.hint is not None and ".doc" in caught.value.hint


def test_a_docx_cut_short_is_called_damaged(tmp_path: Path) -> None:
    """A .docx is a zip: one cut short (an interrupted download) is damaged, and the hint
    says to save or download it again, not to save it as .docx."""
    whole = fixture("coop_handbook.docx").read_bytes()
    path = tmp_path / "handbook.docx"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match="damaged: the Word document cannot be read") as caught:
        load_document(path)
    assert caught.value.hint is not None and "re-download" in caught.value.hint
    # a whole zip of another kind (an .odt renamed) is no Word document, not a damaged one
    import zipfile

    with zipfile.ZipFile(path, "w") as other:
        other.writestr("content.xml", "<office:document-content/>")
    with pytest.raises(InputError, match="not a readable Word document"):
        load_document(path)
    # a whole zip whose Word part is broken is a damaged Word document
    with zipfile.ZipFile(fixture("coop_handbook.docx")) as good, zipfile.ZipFile(path, "w") as bad:
        for name in good.namelist():
            body = good.read(name)
            bad.writestr(name, body[: len(body) // 2] if name == "word/document.xml" else body)
    with pytest.raises(InputError, match="damaged: the Word document cannot be read"):
        load_document(path)


# -- HTML ---------------------------------------------------------------------------------


def test_html_keeps_visible_text_only() -> None:
    document = load_document(fixture("station_setup.html"))
    text = document.text
    for noise in (
        "Log in",  # navigation
        "dataLayer",  # script
        "font-family",  # style
        "cookies",  # hidden
        "Internal note",  # display: none
        "tracking pixel",  # noscript
        "site.css",
        "☁",  # aria-hidden
    ):
        assert noise not in text, noise
    assert "It takes about twenty minutes." in text
    assert "a 10 mm spanner" in text  # &nbsp; is a space
    assert "Temperature | ±0.3 °C | Yes" in text  # entities decoded, cells joined
    assert "once.\nThe antenna icon" in text  # <br> is a line break
    assert "© 2024 Larkspur Weather Ltd." in text  # the footer is visible text


def test_html_headings_pre_and_table_structure() -> None:
    document = load_document(fixture("station_setup.html"))
    assert [(h.level, h.title) for h in document.headings] == [
        (1, "Setting up your Larkspur station"),
        (2, "Before you start"),
        (2, "Pairing"),
        (3, "Checking the signal"),
        (2, "Calibration table"),
    ]
    code, table = document.blocks
    assert code.kind == "code" and table.kind == "table"
    assert document.text[code.start : code.end].split("\n")[2] == "4 bars  excellent, under 30 m"
    assert document.text[table.start : table.end].count("\n") == 3
    assert document.section_path(at(document, "Two bars or more")) == (
        "Setting up your Larkspur station",
        "Pairing",
        "Checking the signal",
    )


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<p>a<br/>b</p>", "a\nb"),
        ("<div hidden><div>x</div>still hidden</div><p>shown</p>", "shown"),
        ("<head><title>T</title><p>no closing head<body><p>body</p>", "body"),
        ("<pre>\n  indented\n\n  kept</pre>", "  indented\n\n  kept"),
        ("<pre>never closed\n  x", "never closed\n  x"),
        ("<p>one   two\n three</p><p>four</p>", "one two three\n\nfour"),
        ("<ul><li>a</li><li>b</li></ul>", "a\nb"),
        ("<svg><title>icon</title></svg><p>x</p>", "x"),
    ],
)
def test_html_text_rules(html: str, text: str) -> None:
    assert extract_html(html).text == text


def test_html_title_falls_back_to_first_heading_and_charset_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "old.htm"
    path.write_bytes(
        b'<html><head><meta charset="windows-1252"></head><body><h1>Caf\xe9 menu</h1>'
        b"<p>Cr\xe8me br\xfbl\xe9e</p></body></html>"
    )
    document = load_document(path)
    assert document.title == "Café menu"
    assert "Crème brûlée" in document.text


def test_html_without_visible_text(tmp_path: Path) -> None:
    path = tmp_path / "app.html"
    path.write_text("<html><head><script>render()</script></head><body></body></html>")
    with pytest.raises(InputError, match="no visible text"):
        load_document(path)


# -- JSON ---------------------------------------------------------------------------------


def test_json_strings_with_their_paths() -> None:
    document = load_document(fixture("faq.json"))
    paths = [s.path for s in document.sections]
    assert ("install", "steps[2]") in paths
    assert ("faq[1]", "answer") in paths
    assert ("support", '["warranty years"]') in paths
    assert ("limits", "notes") not in paths  # blank strings carry no text
    offset = at(document, "Place the sensor unit")
    assert json_path(document.section_path(offset)) == "install.steps[2]"
    assert "48 seconds" in document.text
    # Each value is written with its key path, numbers and booleans included.
    assert "install.steps[2]: Place the sensor unit" in document.text
    assert "limits.max_sensors: 7" in document.text
    assert "limits.operating_range_celsius[0]: -40" in document.text
    assert json_path(document.section_path(at(document, "max_sensors: 7"))) == (
        "limits.max_sensors"
    )
    for section in document.sections:
        assert "\n\n" not in document.text[section.start : section.end]


def test_json_paths_for_arrays_and_odd_keys() -> None:
    result = json_strings(["a", {"k": [["b"], {"x.y": "c"}]}])
    assert [(json_path(s.path), result.text[s.start : s.end]) for s in result.sections] == [
        ("[0]", "a"),
        ("[1].k[0][0]", "[1].k[0][0]: b"),
        ('[1].k[1]["x.y"]', '[1].k[1]["x.y"]: c'),
    ]


def test_json_values_keep_their_keys(tmp_path: Path) -> None:
    result = json_strings({"service": {"owner": "Team Falcon"}})
    assert result.text == "service.owner: Team Falcon"
    assert [json_path(s.path) for s in result.sections] == ["service.owner"]
    path = tmp_path / "config.json"
    path.write_text('{"port": 8080, "debug": true, "ratio": 0.5, "proxy": null}')
    document = load_document(path)
    assert document.text == "port: 8080\n\ndebug: true\n\nratio: 0.5"
    assert [json_path(s.path) for s in document.sections] == ["port", "debug", "ratio"]


def test_json_without_text(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"a": null, "b": [null, "", "  "], "c": {}}')
    with pytest.raises(InputError, match="holds no values"):
        load_document(path)


def test_json_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "a": "b",\n  "c" "d"\n}\n')
    with pytest.raises(InputError) as caught:
        load_document(path)
    assert (caught.value.line, caught.value.column) == (3, 7)


def test_deeply_nested_json_is_read_without_recursion(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 500 + '"bottom"' + "]" * 500)
    document = load_document(path)
    assert document.text == "bottom"
    assert json_path(document.sections[0].path) == "[0]" * 500


# -- text and the errors every format shares ----------------------------------------------


def test_text_file_has_no_structure() -> None:
    document = load_document(fixture("meeting_notes.txt"))
    assert document.sections == () and document.headings == () and document.pages == ()
    assert document.section_path(10) == () and document.page_at(10) is None
    assert document.text.startswith("Harbour Lane Allotments")


def test_encoding_option_for_text(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("Zürich, 3 März".encode("latin-1"))
    with pytest.raises(InputError) as caught:
        load_document(path)
    assert (caught.value.line, caught.value.column) == (1, 2)
    assert caught.value.hint is not None and "encoding" in caught.value.hint
    assert load_document(path, encoding="latin-1").text == "Zürich, 3 März"


@pytest.mark.parametrize("name", ["empty.txt", "empty.md", "empty.pdf", "empty.docx"])
def test_empty_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty") as caught:
        load_document(path)
    assert caught.value.path == str(path)


def test_whitespace_only_text(tmp_path: Path) -> None:
    path = tmp_path / "blank.md"
    path.write_text("  \n\n\t\n")
    with pytest.raises(InputError, match="only whitespace"):
        load_document(path)


@pytest.mark.parametrize(
    ("name", "hint"),
    [("scan.jpg", "convert"), ("old.doc", ".docx"), ("bundle.zip", "unzip"), ("README", "")],
)
def test_unsupported_extension(tmp_path: Path, name: str, hint: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"something")
    with pytest.raises(UnknownFormatError) as caught:
        load_document(path)
    assert caught.value.path == str(path)
    assert ".pdf" in caught.value.detail and ".md" in caught.value.detail
    assert caught.value.hint is not None and hint in caught.value.hint


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_document(tmp_path / "nowhere.md")
    with pytest.raises(InputError, match="folder") as caught:
        load_document(tmp_path)
    assert caught.value.hint is not None and "walk" in caught.value.hint


def test_extensions_are_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "NOTES.TXT"
    path.write_text("shouting\n")
    assert load_document(path).format == "text"
    assert set(SUPPORTED_EXTENSIONS.values()) == {"pdf", "markdown", "text", "docx", "html", "json"}


# -- walk ---------------------------------------------------------------------------------


def test_walk_expands_folders_skips_hidden_and_reports_the_rest(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "guides" / "deep").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / "__MACOSX").mkdir()
    for name in (
        "b.md",
        "a.txt",
        "guides/z.html",
        "guides/deep/c.json",
        ".hidden.md",
        ".git/HEAD.txt",
        "__MACOSX/a.txt",
        "photo.jpg",
    ):
        (docs / name).write_text("x")
    loose = tmp_path / "loose.pdf"
    loose.write_bytes(b"%PDF")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "e.md").write_text("x")
    (docs / "link").symlink_to(tmp_path / "elsewhere")

    result = walk([docs, loose, docs / "b.md", tmp_path / "missing.md"])
    assert [p.relative_to(tmp_path).as_posix() for p in result.files] == [
        "docs/a.txt",
        "docs/b.md",
        "docs/guides/deep/c.json",
        "docs/guides/z.html",
        "loose.pdf",
    ]
    skipped = {s.path.name: s.reason for s in result.skipped}
    assert set(skipped) == {"photo.jpg", "link", "missing.md"}
    assert "unsupported" in skipped["photo.jpg"]
    assert "not followed" in skipped["link"]
    assert skipped["missing.md"] == "not found"


def test_a_batch_goes_on_past_bad_files() -> None:
    result = walk([FIXTURES])
    loaded: list[str] = []
    failed: dict[str, str] = {}
    for path in result.files:
        try:
            loaded.append(load_document(path).format)
        except InputError as exc:
            failed[path.name] = exc.detail
    assert sorted(failed) == ["encrypted.pdf", "scanned.pdf"]
    assert sorted(loaded) == ["docx", "html", "json", "json", "markdown", "pdf", "text"]
    assert {s.path.name for s in result.skipped} == {"make_fixtures.py"}


def test_document_rejects_ranges_outside_the_text() -> None:
    with pytest.raises(ValueError, match="outside"):
        Document("x", "text", "abc", "x", "0", headings=(Heading(1, "h", 2, 9),))
    with pytest.raises(ValueError, match="overlap"):
        Document("x", "text", "abcdef", "x", "0", sections=(Section((), 0, 4), Section((), 2, 6)))


# -- the QA set loader (SQuAD format) -----------------------------------------------------


def test_squad_format_becomes_documents_passages_and_answer_spans(tmp_path: Path) -> None:
    qa = load_squad(fixture("mini_squad.json"))
    assert qa.version == "v2.0"
    assert [d.id for d in qa.documents] == ["Heronsgate_Orchard", "Riverside_Bike_Co-op"]
    orchard = qa.document("Heronsgate_Orchard")
    assert orchard.document.title == "Heronsgate Orchard"
    assert len(orchard.passages) == 2
    assert orchard.document.text[orchard.passages[1].start :].startswith("Stone fruit")
    # unanswerable (q3) and unfindable (q5) questions are left out, with a note for q5
    assert [q.id for q in qa.questions] == ["q1", "q2", "q4", "q6"]
    assert any("q5" in w for w in qa.warnings)
    for question in qa.questions:
        doc = qa.document(question.document_id)
        for answer in question.answers:
            assert doc.document.text[answer.start : answer.end] == answer.text
            passage = doc.passage_at(answer.start)
            assert passage is not None and passage.id == question.passage_id
    q1 = qa.questions[0]
    assert [a.text for a in q1.answers] == ["140", "140 fruit trees"]  # duplicates merged
    q2 = qa.questions[1]
    assert q2.answers[0].text == "the winter of 2011"  # found despite an offset that is off
    # the documents, written as files and loaded back, keep every offset
    files = qa.write_documents(tmp_path / "docs")
    for doc in qa.documents:
        assert load_document(files[doc.id]).text == doc.document.text


def test_squad_unanswerable_questions_on_request() -> None:
    qa = load_squad(fixture("mini_squad.json"), include_unanswerable=True)
    unanswerable = [q for q in qa.questions if not q.answers]
    assert [q.id for q in unanswerable] == ["q3"]


def test_squad_shape_errors_name_the_file_and_the_place(tmp_path: Path) -> None:
    path = tmp_path / "not_squad.json"
    path.write_text('{"data": [{"title": "x", "paragraphs": [{"context": 3}]}]}')
    with pytest.raises(InputError, match=r"data\[0\]\.paragraphs\[0\]\.context") as caught:
        load_squad(path)
    assert caught.value.path == str(path)


def test_squad_from_a_package_that_is_not_installed() -> None:
    with pytest.raises(ConfigError, match="not installed"):
        load_squad_from_package("structrag-no-such-qa-package", "data/dev.json")


SQUAD_FILE = os.environ.get("STRUCTRAG_SQUAD_JSON")


@pytest.mark.skipif(not SQUAD_FILE, reason="set STRUCTRAG_SQUAD_JSON to a SQuAD file")
def test_a_real_squad_file_loads_with_exact_spans() -> None:
    assert SQUAD_FILE is not None
    qa = load_squad(SQUAD_FILE)
    assert qa.documents and qa.questions
    for question in qa.questions:
        doc = qa.document(question.document_id)
        for answer in question.answers:
            assert doc.document.text[answer.start : answer.end] == answer.text
