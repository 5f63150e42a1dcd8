"""The chunker: exact offsets, the token bound, full coverage, overlap that never crosses a
heading, section paths and pages, determinism (hypothesis), and the splitting rules on the
fixture documents. Tokens are counted with the real cl100k_base vocabulary."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structrag.errors import ConfigError
from structrag.knowledge import Document, Fragment, Page, chunk, sections_from_headings
from structrag.knowledge.html_text import extract_html
from structrag.knowledge.json_text import json_strings
from structrag.knowledge.loaders import load_document
from structrag.knowledge.markdown import parse_markdown
from structrag.tokens import TiktokenCounter, get_counter

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "knowledge"
COUNTER = get_counter("cl100k_base")


def markdown_document(text: str, path: str = "doc.md") -> Document:
    structure = parse_markdown(text)
    return Document(
        path,
        "markdown",
        text,
        structure.title or "doc",
        "0" * 64,
        headings=structure.headings,
        sections=sections_from_headings(text, structure.headings),
        blocks=structure.blocks,
    )


def json_document(data: object) -> Document:
    result = json_strings(data)
    return Document("doc.json", "json", result.text, "doc", "0" * 64, sections=result.sections)


def pages_document(pages: list[str]) -> Document:
    text, ranges = "", []
    for number, page in enumerate(pages, start=1):
        if number > 1:
            text += "\n\n"
        ranges.append(Page(number, len(text), len(text) + len(page)))
        text += page
    return Document("doc.pdf", "pdf", text, "doc", "0" * 64, pages=tuple(ranges))


def _owners(document: Document) -> list[int]:
    """For every character, the index of the section holding it (-1: none)."""
    owner = [-1] * len(document.text)
    for i, section in enumerate(document.sections):
        owner[section.start : section.end] = [i] * (section.end - section.start)
    return owner


def check_invariants(
    document: Document, fragments: list[Fragment], max_tokens: int, overlap: int
) -> None:
    """Every promise of chunk(), checked on one result."""
    text = document.text
    owner = _owners(document)
    assert [f.index for f in fragments] == list(range(len(fragments)))
    covered = [False] * len(text)
    for f in fragments:
        # exact offsets, trimmed, within the budget
        assert f.text == text[f.start : f.end]
        assert f.text and f.text == f.text.strip()
        assert f.tokens == COUNTER.count(f.text) <= max_tokens
        for i in range(f.start, f.end):
            covered[i] = True
        # the section path: the longest one shared by all of the fragment's text
        paths = [
            document.sections[owner[i]].path if owner[i] >= 0 else ()
            for i in range(f.start, f.end)
            if not text[i].isspace()
        ]
        shared = paths[0]
        for path in paths[1:]:
            n = 0
            while n < min(len(shared), len(path)) and shared[n] == path[n]:
                n += 1
            shared = shared[:n]
        assert f.section == shared
        assert f.page == document.page_at(f.start)
        assert f.last_page == document.page_at(f.end - 1)
    # coverage: every non-whitespace character is in some fragment
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"not covered: {[text[i] for i in missing[:10]]}"
    for before, after in itertools.pairwise(fragments):
        assert before.start < after.start and before.end < after.end
        if after.start < before.end:
            # overlap: at most `overlap` tokens, inside one section
            assert overlap > 0
            assert COUNTER.count(text[after.start : before.end]) <= overlap
            if document.sections:
                assert owner[after.start] == owner[before.end - 1] == owner[after.end - 1]
    # blocks that fit stay whole
    for block in document.blocks:
        body = text[block.start : block.end].strip()
        start = block.start + text[block.start : block.end].find(body)
        if COUNTER.count(body) <= max_tokens:
            assert any(f.start <= start and start + len(body) <= f.end for f in fragments)


# -- property-based -----------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "the",
        "orchard",
        "pruning",
        "Zürich",
        "naïve",
        "日本語",
        "emoji🍎",
        "3.14",
        "e.g.",
        "end.",
        "Why?",
        "(aside)",
        "x" * 40,
        "https://example.org/a/very/long/path?with=query&and=more#fragment",
        "tab\there",
    ]
)
LONG_WORD = st.text(alphabet="abcdefghij0123456789", min_size=60, max_size=300)
SENTENCE = st.lists(st.one_of(WORDS, LONG_WORD), min_size=1, max_size=25).map(" ".join)
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=6).map(
    lambda s: re.sub(r"(?<=\.) ", "\n", " ".join(s), count=1)
)
HEADING = st.builds(
    lambda level, title: "#" * level + " " + title,
    st.integers(1, 4),
    st.lists(WORDS, min_size=1, max_size=3).map(" ".join),
)
CODE = st.lists(
    st.sampled_from(["x = 1", "# comment", "", "    indented()", "for i in range(3):"]),
    min_size=1,
    max_size=12,
).map(lambda lines: "```python\n" + "\n".join(lines) + "\n```")
MARKDOWN = st.lists(st.one_of(PARAGRAPH, HEADING, CODE), min_size=1, max_size=14).flatmap(
    lambda parts: st.lists(
        st.sampled_from(["\n\n", "\n", "\n\n\n", "\n  \n", "\r\n\r\n", "\r\n"]),
        min_size=len(parts),
        max_size=len(parts),
    ).map(lambda seps: "".join(p + s for p, s in zip(parts, seps, strict=True)))
)
HTML_ELEMENT = st.one_of(
    PARAGRAPH.map(lambda t: f"<p>{t}</p>"),
    st.builds(lambda n, t: f"<h{n}>{t}</h{n}>", st.integers(1, 3), SENTENCE),
    CODE.map(lambda c: f"<pre>{c}</pre>"),
    st.lists(st.lists(SENTENCE, min_size=1, max_size=3), min_size=1, max_size=4).map(
        lambda rows: (
            "<table>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
            + "</table>"
        )
    ),
    st.lists(SENTENCE, min_size=1, max_size=4).map(
        lambda items: "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
    ),
)
HTML = st.lists(HTML_ELEMENT, min_size=1, max_size=10).map(
    lambda parts: "<html><body>" + "\n".join(parts) + "</body></html>"
)
BUDGETS = st.integers(8, 90).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m // 2)))
JSON_VALUES = st.recursive(
    st.one_of(SENTENCE, st.integers(), st.just(""), st.none()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b c", "faq", "x.y", "ключ"]), inner, max_size=4),
    ),
    max_leaves=20,
)
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(text=MARKDOWN, budget=BUDGETS)
def test_markdown_documents_keep_every_promise(text: str, budget: tuple[int, int]) -> None:
    document = markdown_document(text)
    max_tokens, overlap = budget
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)
    # deterministic: the same input gives the same fragments, even with a fresh counter
    again = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=TiktokenCounter())
    assert again == fragments


@PROPERTY_SETTINGS
@given(html=HTML, budget=BUDGETS)
def test_html_documents_keep_every_promise(html: str, budget: tuple[int, int]) -> None:
    page = extract_html(html)
    document = Document(
        "doc.html",
        "html",
        page.text,
        "doc",
        "0" * 64,
        headings=page.headings,
        sections=sections_from_headings(page.text, page.headings),
        blocks=page.blocks,
    )
    max_tokens, overlap = budget
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)


@PROPERTY_SETTINGS
@given(text=st.text(min_size=1, max_size=600), budget=BUDGETS)
def test_any_text_keeps_every_promise(text: str, budget: tuple[int, int]) -> None:
    document = Document("t.txt", "text", text, "t", "0" * 64)
    max_tokens, overlap = budget
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)
    assert (not fragments) == (not text.strip())


@PROPERTY_SETTINGS
@given(data=JSON_VALUES, budget=BUDGETS)
def test_json_documents_keep_every_promise(data: object, budget: tuple[int, int]) -> None:
    document = json_document(data)
    max_tokens, overlap = budget
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)


@PROPERTY_SETTINGS
@given(pages=st.lists(st.one_of(PARAGRAPH, st.just("")), min_size=1, max_size=6), budget=BUDGETS)
def test_paged_documents_keep_every_promise(pages: list[str], budget: tuple[int, int]) -> None:
    document = pages_document(pages)
    max_tokens, overlap = budget
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)


# -- the rules, on the fixtures -----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "orchard_handbook.pdf",
        "quillmark_guide.md",
        "meeting_notes.txt",
        "coop_handbook.docx",
        "station_setup.html",
        "faq.json",
    ],
)
@pytest.mark.parametrize(("max_tokens", "overlap"), [(512, 20), (120, 12), (40, 6), (16, 0)])
def test_fixtures_keep_every_promise(name: str, max_tokens: int, overlap: int) -> None:
    document = load_document(FIXTURES / name)
    fragments = chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)
    check_invariants(document, fragments, max_tokens, overlap)


def test_small_documents_are_one_fragment() -> None:
    document = load_document(FIXTURES / "station_setup.html")
    (fragment,) = chunk(document, counter=COUNTER)
    assert fragment.text == document.text
    assert fragment.section == ("Setting up your Larkspur station",)


def test_markdown_sections_first_then_paragraphs() -> None:
    document = load_document(FIXTURES / "quillmark_guide.md")
    fragments = chunk(document, max_tokens=160, overlap=10, counter=COUNTER)
    by_text = {f.section: f for f in fragments}
    # a subsection that fits is one fragment of its own, heading included
    source = by_text[("Install", "From source")]
    assert source.text.startswith("## From source") and source.text.endswith("forty seconds.")
    # the introduction before the first heading is a fragment with the empty path
    assert fragments[0].section == () and fragments[0].text.startswith("---\ntitle:")
    # a top-level heading with no text of its own travels with the subsection after it
    assert any(f.text.startswith("# Install\n\nQuillmark needs") for f in fragments)
    # fragments never straddle two top-level sections
    for f in fragments:
        assert len({document.section_path(i)[:1] for i in range(f.start, f.end)} - {()}) <= 1


def test_sibling_sections_that_fit_share_a_fragment() -> None:
    document = markdown_document(
        "# Guide\n\n## A\n\nshort a.\n\n## B\n\nshort b.\n\n## C\n\n" + "long text. " * 80
    )
    fragments = chunk(document, max_tokens=60, overlap=0, counter=COUNTER)
    assert fragments[0].text == "# Guide\n\n## A\n\nshort a.\n\n## B\n\nshort b."
    assert fragments[0].section == ("Guide",)
    assert all(f.section == ("Guide", "C") for f in fragments[1:])


def test_heading_only_section_goes_with_what_follows() -> None:
    document = markdown_document("# Install\n\n## From PyPI\n\n" + "Run pip install now. " * 60)
    fragments = chunk(document, max_tokens=50, overlap=5, counter=COUNTER)
    assert fragments[0].text.startswith("# Install\n\n## From PyPI\n\nRun pip")
    assert fragments[0].section == ("Install",)
    assert {f.section for f in fragments[1:]} == {("Install", "From PyPI")}


def test_code_blocks_stay_whole_and_big_ones_split_at_lines() -> None:
    code = "```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(12)) + "\n```"
    document = markdown_document("Intro sentence here.\n\n" + code + "\n\nAfter the code.")
    whole = chunk(document, max_tokens=150, overlap=10, counter=COUNTER)
    assert len(whole) == 1
    block_tokens = COUNTER.count(code)
    fits = chunk(document, max_tokens=block_tokens, overlap=10, counter=COUNTER)
    assert any(f.text.startswith("```python") and f.text.endswith("```") for f in fits)
    split = chunk(document, max_tokens=30, overlap=0, counter=COUNTER)
    code_fragments = [f for f in split if "value_" in f.text]
    assert len(code_fragments) > 1
    for f in code_fragments:  # cut between lines, never inside one
        assert f.text.split("\n")[-1].endswith((")", "```")) or f.text.endswith("```")


def test_sentences_before_words_and_words_before_characters() -> None:
    prose = " ".join(f"Sentence number {i} talks about apples." for i in range(40))
    document = Document("p.txt", "text", prose, "p", "0" * 64)
    fragments = chunk(document, max_tokens=40, overlap=0, counter=COUNTER)
    assert all(f.text.endswith("apples.") for f in fragments)
    words = " ".join(["orchard"] * 300)  # no sentence ends: cut between words
    fragments = chunk(
        Document("w.txt", "text", words, "w", "0"), max_tokens=20, overlap=0, counter=COUNTER
    )
    assert all(set(f.text.split()) == {"orchard"} for f in fragments)
    blob = "ab12" * 400  # no spaces at all: cut between characters
    fragments = chunk(
        Document("b.txt", "text", blob, "b", "0"), max_tokens=20, overlap=0, counter=COUNTER
    )
    assert "".join(f.text for f in fragments) == blob
    assert all(f.tokens <= 20 for f in fragments)


def test_overlap_repeats_the_end_of_the_previous_fragment() -> None:
    document = load_document(FIXTURES / "meeting_notes.txt")
    fragments = chunk(document, max_tokens=60, overlap=12, counter=COUNTER)
    assert len(fragments) > 5
    overlaps = [
        COUNTER.count(document.text[after.start : before.end])
        for before, after in itertools.pairwise(fragments)
        if after.start < before.end
    ]
    assert len(overlaps) == len(fragments) - 1  # one section: every pair overlaps
    assert all(1 <= n <= 12 for n in overlaps)
    assert sum(overlaps) / len(overlaps) >= 6  # "about" the overlap asked for
    without = chunk(document, max_tokens=60, overlap=0, counter=COUNTER)
    assert all(a.end < b.start for a, b in itertools.pairwise(without))


def test_pdf_fragments_know_their_pages() -> None:
    document = load_document(FIXTURES / "orchard_handbook.pdf")
    fragments = chunk(document, max_tokens=120, overlap=10, counter=COUNTER)
    assert {f.page for f in fragments} == {1, 2, 3, 4}
    crossing = [f for f in fragments if f.page != f.last_page]
    assert crossing, "the orchard year runs from page 2 onto page 3"
    assert all((f.page, f.last_page) == (2, 3) for f in crossing)
    assert all(f.section == ("The orchard year",) for f in crossing)
    first_aid = next(f for f in fragments if "adrenaline" in f.text)
    assert first_aid.section == ("Safety on work days", "First aid")


def test_json_question_and_answer_share_a_fragment() -> None:
    document = load_document(FIXTURES / "faq.json")
    fragments = chunk(document, max_tokens=64, overlap=0, counter=COUNTER)
    faq = next(f for f in fragments if "How often are readings updated?" in f.text)
    assert "48 seconds" in faq.text
    assert faq.section == ("faq[1]",)


def test_docx_table_stays_whole() -> None:
    document = load_document(FIXTURES / "coop_handbook.docx")
    fragments = chunk(document, max_tokens=100, overlap=10, counter=COUNTER)
    (table,) = document.blocks
    holder = [f for f in fragments if f.start <= table.start and table.end <= f.end]
    assert holder and holder[0].section == ("Membership", "Fees")


def test_a_big_document_is_cut_quickly_and_evenly() -> None:
    paragraph = (
        "Winter pruning of the apples and pears happens in January and February, while the "
        "trees are dormant. We remove dead, diseased and crossing branches first."
    )
    text = "\n\n".join(f"{paragraph} ({i})" for i in range(1500))  # about 60k tokens
    document = Document("big.txt", "text", text, "big", "0" * 64)
    fragments = chunk(document, counter=COUNTER)
    assert 100 < len(fragments) < 160
    assert all(f.tokens <= 512 for f in fragments)
    assert sum(f.tokens for f in fragments[:-1]) / (len(fragments) - 1) > 400


def test_whitespace_only_document_has_no_fragments() -> None:
    assert chunk(Document("w.txt", "text", " \n\t ", "w", "0"), counter=COUNTER) == []


@pytest.mark.parametrize(("max_tokens", "overlap"), [(7, 0), (0, 0), (100, 51), (100, -1)])
def test_bad_settings_are_refused(max_tokens: int, overlap: int) -> None:
    document = Document("t.txt", "text", "some text", "t", "0")
    with pytest.raises(ConfigError):
        chunk(document, max_tokens=max_tokens, overlap=overlap, counter=COUNTER)


def test_fragments_serialise_to_json() -> None:
    document = load_document(FIXTURES / "quillmark_guide.md")
    fragments = chunk(document, max_tokens=120, overlap=10, counter=COUNTER)
    rows = [
        {"index": f.index, "start": f.start, "end": f.end, "section": list(f.section)}
        for f in fragments
    ]
    assert json.loads(json.dumps(rows)) == rows
