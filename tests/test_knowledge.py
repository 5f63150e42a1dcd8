"""Document knowledge on a real index: files added as shared or per-agent knowledge, cut
into fragments that are extracted like messages, searched in every mode, replaced when
they change, removed without leaving anything behind, scoped by the query language, and
packed beside conversations by ``ask --sources``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag import Index, InputError, MemoryInputError, NotFoundError
from structrag.cli import cli
from structrag.query.settings import DEFAULT_SETTINGS
from structrag.tokens import get_counter

FIXTURES = Path(__file__).parent / "fixtures" / "knowledge"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DOCUMENTS = (
    "quillmark_guide.md",
    "orchard_handbook.pdf",
    "coop_handbook.docx",
    "station_setup.html",
    "faq.json",
    "meeting_notes.txt",
)
#: Every table a document's knowledge lives in (the ingest log, ``sources``, keeps a row
#: per add, as it does for conversations).
TABLES = (
    "messages",
    "semantic_refs",
    "entities",
    "entity_facets",
    "actions",
    "action_params",
    "topics",
    "tag_refs",
    "properties",
    "embeddings",
    "documents",
    "fragments",
    "conversations",
    "memory_access",
)


def _counts(index: Index) -> dict[str, int]:
    return {t: int(index.sql(f"SELECT count(*) FROM {t}")[0][0]) for t in TABLES}


def _folder(tmp_path: Path, names: tuple[str, ...] = DOCUMENTS) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in names:
        shutil.copy(FIXTURES / name, folder / name)
    return folder


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


@pytest.fixture
def loaded(index: Index, tmp_path: Path) -> Index:
    report = index.knowledge.add(_folder(tmp_path), shared=True)
    assert report.documents_added == len(DOCUMENTS) and not report.skipped
    return index


def test_documents_become_fragments_in_order_with_their_places(loaded: Index) -> None:
    documents = {d.path: d for d in loaded.knowledge.documents()}
    assert set(documents) == set(DOCUMENTS)
    pdf = documents["orchard_handbook.pdf"]
    assert pdf.pages == 4 and pdf.format == "pdf" and pdf.shared and pdf.agent is None
    rows = loaded.sql(
        "SELECT fragment_id, fragment_index, start_char, end_char, page, section, text, tokens "
        "FROM v_fragments WHERE document_id = ?",
        [pdf.document_id],
    )
    assert [r[1] for r in rows] == list(range(pdf.fragments)) and len(rows) >= 2
    counter = get_counter("cl100k_base")
    for fragment_id, index, start, end, page, _, text, tokens in rows:
        assert fragment_id == f"{pdf.document_id}-chunk-{index}"
        assert 0 <= start < end and len(text) == end - start
        assert page is not None and 1 <= page <= 4
        assert tokens == counter.count(text) <= 512
    guide = documents["quillmark_guide.md"]
    _, fragments = loaded.knowledge.show(guide.document_id)
    assert any("Install" in f.section or "Install" in f.text for f in fragments)
    # each fragment is a knowledge memory, extracted like a message, with spans in it
    spans = loaded.sql(
        "SELECT r.span_start, r.span_end, length(m.text) FROM semantic_refs r "
        "JOIN messages m USING (mkey) WHERE m.memory_table = 'knowledge'"
    )
    assert len(spans) > 50 and all(0 <= s < e <= n for s, e, n in spans)


def test_adding_again_changes_nothing_and_a_changed_file_replaces_its_fragments(
    index: Index, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, ("quillmark_guide.md", "meeting_notes.txt"))
    index.knowledge.add(folder, shared=True)
    before = _counts(index)
    generation = index.store.generation()
    again = index.knowledge.add(folder, shared=True)
    assert again.documents_unchanged == 2 and again.fragments_added == 0
    assert _counts(index) == before and index.store.generation() == generation

    guide = folder / "quillmark_guide.md"
    text = guide.read_text(encoding="utf-8")
    cut = text.index("# Configuration")
    guide.write_text(text[:cut].replace("Python 3.10", "Python 3.12"), encoding="utf-8")
    changed = index.knowledge.add(folder, shared=True)
    assert changed.documents_updated == 1 and changed.documents_unchanged == 1
    assert changed.fragments_removed >= 1 or changed.fragments_updated >= 1
    hits = index.knowledge.search("Which Python version does Quillmark need?", mode="text")
    assert hits and "Python 3.12" in hits[0].fragment.text
    assert not any("3.10" in h.fragment.text for h in hits)
    assert index.sql(
        "SELECT count(*) FROM semantic_refs r WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.mkey = r.mkey)"
    ) == [(0,)]
    assert index.sql(
        "SELECT count(*) FROM messages m WHERE m.memory_table = 'knowledge' "
        "AND m.mkey NOT IN (SELECT mkey FROM fragments)"
    ) == [(0,)]
    document = next(d for d in index.knowledge.documents() if d.path == "quillmark_guide.md")
    _, fragments = index.knowledge.show(document.document_id)
    assert "".join(f.text for f in fragments[:1]).startswith("---")
    assert all("Configuration" not in f.text for f in fragments)


def test_remove_and_clear_leave_nothing_behind(index: Index, tmp_path: Path) -> None:
    index.ingest([EXAMPLES / "friends_chat.jsonl"])
    before = _counts(index)
    index.knowledge.add(_folder(tmp_path), shared=True)
    index.knowledge.add("The wifi password of the studio is teapot-42.", agent="bot")
    assert _counts(index) != before
    first = index.knowledge.documents()[0]
    removed = index.knowledge.remove(first.document_id)
    assert removed == first.fragments
    with pytest.raises(NotFoundError):
        index.knowledge.show(first.document_id)
    assert index.knowledge.clear(shared=True) == len(DOCUMENTS) - 1
    assert index.knowledge.clear(agent="bot") == 1
    assert _counts(index) == before
    assert index.knowledge.search("wifi password", agent="bot", mode="text") == []
    with pytest.raises(MemoryInputError):
        index.knowledge.clear()


def test_a_knowledge_folder_says_whose_each_document_is(index: Index, tmp_path: Path) -> None:
    root = tmp_path / "knowledge"
    for owner, name in (("shared", "quillmark_guide.md"), ("alice", "orchard_handbook.pdf")):
        (root / owner).mkdir(parents=True)
        shutil.copy(FIXTURES / name, root / owner / name)
    (root / "bob").mkdir()
    (root / "bob" / "secret.md").write_text(
        "# Vault\n\nThe vault combination is 4-8-15-16. Bob keeps the spare key.\n",
        encoding="utf-8",
    )
    (root / "stray.txt").write_text("belongs to no one", encoding="utf-8")
    report = index.knowledge.add(root)
    owners = {d["path"]: (d["agent"], d["shared"]) for d in report.documents}
    assert owners == {
        "quillmark_guide.md": (None, True),
        "orchard_handbook.pdf": ("alice", False),
        "secret.md": ("bob", False),
    }
    assert [s["path"] for s in report.skipped] == [str(root / "stray.txt")]
    questions = ["What is the vault combination?", "Who keeps the spare key?", "vault key"]
    for question in questions:
        for mode in ("structured", "text", "vector", "hybrid"):
            for agent in ("alice", None):
                hits = index.knowledge.search(question, agent=agent, mode=mode, count=20)
                assert all(h.agent in (None, agent) for h in hits), (question, mode, agent)
                assert not any("vault" in h.fragment.text.lower() for h in hits)
    bob = index.knowledge.search("What is the vault combination?", agent="bob", mode="text")
    assert bob and bob[0].agent == "bob" and "4-8-15-16" in bob[0].fragment.text
    assert {d.path for d in index.knowledge.documents(agent="alice")} == {
        "quillmark_guide.md",
        "orchard_handbook.pdf",
    }
    # The ingest log names the files where they are (one source per owner).
    logged = {r[0] for r in index.sql("SELECT path FROM sources WHERE format = 'knowledge'")}
    assert logged == {
        str((root / "shared" / "quillmark_guide.md").resolve()),
        str((root / "alice" / "orchard_handbook.pdf").resolve()),
        str((root / "bob" / "secret.md").resolve()),
    }


def test_files_that_cannot_be_read_are_reported_and_the_rest_goes_on(
    index: Index, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, ("quillmark_guide.md",))
    for name in ("encrypted.pdf", "scanned.pdf"):
        shutil.copy(FIXTURES / name, folder / name)
    (folder / "empty.md").write_text("", encoding="utf-8")
    (folder / "slides.pptx").write_bytes(b"PK\x03\x04")
    report = index.knowledge.add(folder, shared=True)
    reasons = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert set(reasons) == {"encrypted.pdf", "scanned.pdf", "empty.md", "slides.pptx"}
    assert "encrypted" in reasons["encrypted.pdf"] and "OCR" in reasons["scanned.pdf"]
    assert "unsupported file type" in reasons["slides.pptx"]
    assert report.documents_added == 1
    with pytest.raises(Exception, match="no such file"):
        index.knowledge.add("missing-guide.md")


def test_a_file_added_again_within_its_folder_is_not_a_second_document(
    index: Index, tmp_path: Path
) -> None:
    """A document's id comes from its path as given: the file on its own, then its
    folder, would be two ids. The file is known by where it is on disk: added again by
    another path it is the same document (unchanged, or updated when it changed), and a
    search finds its fragment once. Another file with the same bytes is a document of its
    own; another owner gets its own."""
    folder = _folder(tmp_path, ("quillmark_guide.md",))
    guide = folder / "quillmark_guide.md"
    first = index.knowledge.add(guide, shared=True)
    (document,) = index.knowledge.documents()
    assert document.metadata["source_file"] == str(guide.resolve())
    again = index.knowledge.add(folder, shared=True)
    assert (first.documents_added, again.documents_added, again.documents_unchanged) == (1, 0, 1)
    assert [d.document_id for d in index.knowledge.documents()] == [document.document_id]
    hits = index.knowledge.search("install from PyPI")
    assert hits and len({h.fragment.text for h in hits}) == len(hits)
    guide.write_text(guide.read_text(encoding="utf-8") + "\nUpdated.\n", encoding="utf-8")
    edited = index.knowledge.add(folder, shared=True)
    assert (edited.documents_added, edited.documents_updated) == (0, 1)
    assert [d.document_id for d in index.knowledge.documents()] == [document.document_id]
    copy = tmp_path / "elsewhere" / "quillmark_guide.md"
    copy.parent.mkdir()
    copy.write_bytes(guide.read_bytes())
    assert index.knowledge.add(copy, shared=True).documents_added == 1
    both = index.knowledge.add([guide, folder], agent="bot")
    assert both.documents_added == 1 and both.warnings == [
        "quillmark_guide.md: given twice, added once"
    ]


def _readmes(tmp_path: Path) -> tuple[Path, Path]:
    """Two projects whose READMEs have the same path inside their folders."""
    projects = []
    for name, text in (
        ("projA", "Alpha is deployed to the Frankfurt region."),
        ("projB", "Beta is deployed to the Oregon region."),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
        projects.append(tmp_path / name)
    return projects[0], projects[1]


@pytest.mark.parametrize("together", [True, False])
def test_two_files_with_the_same_path_in_their_folders_are_two_documents(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, together: bool
) -> None:
    """``projA/README.md`` and ``projB/README.md`` are both ``README.md`` in the folders
    given: the second gets its path from the current folder, so it neither merges with
    nor replaces the first, and labels and citations tell them apart. Added again, each
    is unchanged."""
    monkeypatch.chdir(tmp_path)
    a, b = _readmes(tmp_path)
    if together:
        reports = [index.knowledge.add([Path("projA"), Path("projB")], shared=True)]
    else:
        reports = [index.knowledge.add(Path(p), shared=True) for p in ("projA", "projB")]
    assert sum(r.documents_added for r in reports) == 2
    assert not any(r.warnings or r.documents_updated for r in reports)
    documents = index.knowledge.documents()
    assert {d.path for d in documents} == {"README.md", "projB/README.md"}
    labels = {
        r[0]
        for r in index.sql(
            "SELECT json_extract_string(metadata, '$.label') FROM messages "
            "WHERE memory_table = 'knowledge'"
        )
    }
    assert labels == {"README.md §projA", "projB/README.md §projB"}
    for question, answer in (("Frankfurt", "Alpha"), ("Oregon", "Beta")):
        hits = index.knowledge.search(f"Where is it deployed? {question}", mode="text")
        assert hits and answer in hits[0].fragment.text
    again = index.knowledge.add([a, b], shared=True)
    assert (again.documents_unchanged, again.documents_added, again.warnings) == (2, 0, [])
    # A document whose file is gone is that file moved: its new place is recorded (and
    # its fragments kept), so a third README.md is a document of its own, not its move.
    moved = tmp_path / "projC"
    a.rename(moved)
    report = index.knowledge.add(moved, shared=True)
    assert (report.documents_updated, report.documents_added, report.fragments_updated) == (1, 0, 0)
    delta = tmp_path / "projD"
    delta.mkdir()
    (delta / "README.md").write_text("Delta is deployed to the Lisbon region.\n", encoding="utf-8")
    assert index.knowledge.add(delta, shared=True).documents_added == 1
    assert {d.path for d in index.knowledge.documents()} == {
        "README.md",
        "projB/README.md",
        "projD/README.md",
    }


def test_another_file_outside_the_current_folder_gets_its_absolute_path(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _readmes(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    report = index.knowledge.add([a, b], agent="bot")
    assert [d["path"] for d in report.documents] == ["README.md", (b / "README.md").as_posix()]
    hit = index.knowledge.search("Oregon region", agent="bot", mode="text")[0]
    assert hit.label == "projB/README.md §projB"  # an absolute path: its folder and name


def test_a_document_whose_fragments_went_missing_is_written_again(
    index: Index, tmp_path: Path
) -> None:
    """Same bytes, but its fragments were deleted another way: not unchanged, repaired."""
    from structrag.store.protocols import MemoryInfo

    index.knowledge.add(_folder(tmp_path, ("quillmark_guide.md",)), shared=True)
    (document,) = index.knowledge.documents()
    keys = [r[0] for r in index.sql("SELECT mkey FROM fragments")]
    parts = index.knowledge.parts
    with parts.writing("test"):
        parts.ingestor(MemoryInfo(table="knowledge")).write([], [], [], delete=keys)
    assert index.knowledge.search("install from PyPI", mode="text") == []
    report = index.knowledge.add(tmp_path / "docs", shared=True)
    assert report.documents_updated == 1 and report.fragments_added == document.fragments
    assert index.knowledge.documents()[0].fragments == document.fragments
    assert index.knowledge.search("install from PyPI", mode="text")


def test_a_fragment_over_two_pages_is_cited_with_both(tmp_path: Path) -> None:
    from structrag.knowledge.records import fragment_label

    assert fragment_label("handbook.pdf", 1, (), last_page=2) == "handbook.pdf pp. 1-2"
    assert fragment_label("handbook.pdf", 3, ("Safety",), last_page=3) == (
        "handbook.pdf p. 3 §Safety"
    )
    assert fragment_label("/home/me/docs/guide.md", None, ()) == "docs/guide.md"
    assert fragment_label("../docs/guide.md", None, ()) == "docs/guide.md"
    db = str(tmp_path / "ix")
    pdf = _folder(tmp_path, ("orchard_handbook.pdf",)) / "orchard_handbook.pdf"
    runner = CliRunner()
    assert runner.invoke(cli, ["knowledge", "add", str(pdf), "--db", db]).exit_code == 0
    with Index(db, read_only=True) as index:
        rows = index.sql(
            "SELECT f.document_id, f.page_start, f.page_end, "
            "json_extract_string(m.metadata, '$.label') FROM fragments f JOIN messages m "
            "USING (mkey)"
        )
        hits = index.knowledge.search("orchard", mode="text", count=50)
    spanning = [(first, last, label) for _, first, last, label in rows if last != first]
    assert spanning and all(f"pp. {first}-{last}" in label for first, last, label in spanning)
    assert any(" pp. " in h.label for h in hits)
    shown = runner.invoke(cli, ["knowledge", "show", rows[0][0], "--db", db])
    assert shown.exit_code == 0 and " pp. " in shown.output


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("missing_folder", "missing_folder: no such file or folder"),
        ("teapot-42", "teapot-42: no such file or folder"),
        ("my notes.txt", "my notes.txt: no such file"),
        ("https://example.com/handbook", "URLs are not fetched"),
    ],
)
def test_a_missing_path_is_an_error_not_text(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=error):
        index.knowledge.add(entry)
    assert index.knowledge.documents() == []
    result = CliRunner().invoke(cli, ["knowledge", "add", entry, "--db", str(tmp_path / "cli")])
    assert result.exit_code == 1 and error in str(result.exception)
    # Text of several words is text, even with a URL in it.
    text = f"The docs are at {entry} for everyone."
    assert index.knowledge.add(text, shared=True).documents_added == 1


def test_an_add_that_adds_nothing_fails(tmp_path: Path) -> None:
    """Every path skipped: the report is printed, and the command exits with 1; skipped
    files inside a folder are named by a path the user can find."""
    db = str(tmp_path / "ix")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02 not text")
    (folder / "empty.md").write_text("", encoding="utf-8")
    runner = CliRunner()
    for flags in ([], ["--json"], ["--dry-run"], ["--dry-run", "--json"]):
        result = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, *flags])
        assert result.exit_code == 1, (flags, result.output)
        assert "nothing to add" in str(result.exception)
        if "--json" in flags:
            skipped = json.loads(result.stdout)["skipped"]
            assert {s["path"] for s in skipped} == {
                str(folder / "binary.txt"),
                str(folder / "empty.md"),
            }
        else:
            assert f"skipped {folder / 'binary.txt'}:" in result.output
    (folder / "notes.md").write_text("The kettle is in the kitchen.\n", encoding="utf-8")
    for _ in range(2):  # added, then unchanged
        result = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_blank_text_is_refused_not_read_as_the_current_folder(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blank: str
) -> None:
    """``Path("")`` is the current folder: a blank item must not walk it."""
    _folder(tmp_path, ("quillmark_guide.md",))
    monkeypatch.chdir(tmp_path / "docs")
    with pytest.raises(MemoryInputError, match="needs text"):
        index.knowledge.add(blank)
    with pytest.raises(MemoryInputError, match="needs text"):
        index.knowledge.add(["The wifi password is teapot-42.", blank])
    assert index.knowledge.documents() == []


def test_a_dry_run_reports_and_writes_nothing(index: Index, tmp_path: Path) -> None:
    before = _counts(index)
    report = index.knowledge.add(_folder(tmp_path), shared=True, dry_run=True)
    assert report.dry_run and report.documents_added == len(DOCUMENTS)
    assert report.tokens > 1000 and report.pages == 4
    assert sum(d["fragments"] for d in report.documents) >= len(DOCUMENTS)
    assert _counts(index) == before


def test_a_dry_run_counts_the_fragments_the_add_writes(index: Index, tmp_path: Path) -> None:
    """A dry run's fragment counts (added, updated, unchanged, removed) are those the
    add then reports, for new documents and for an edited one."""

    def counts(report: object) -> tuple[int, ...]:
        names = ("added", "updated", "unchanged", "removed")
        return tuple(getattr(report, f"fragments_{n}") for n in names)

    folder = _folder(tmp_path)
    planned = index.knowledge.add(folder, shared=True, dry_run=True)
    done = index.knowledge.add(folder, shared=True)
    assert counts(planned) == counts(done) and done.fragments_added > len(DOCUMENTS)
    guide = folder / "quillmark_guide.md"
    text = guide.read_text()
    guide.write_text(text.replace("Quillmark", "Quillmark (QM)", 1)[: len(text) // 2])
    planned = index.knowledge.add(folder, shared=True, dry_run=True)
    done = index.knowledge.add(folder, shared=True)
    assert counts(planned) == counts(done)
    assert done.fragments_updated + done.fragments_removed > 0 and done.fragments_unchanged > 0


def test_inline_text_is_knowledge_too(index: Index) -> None:
    text = "The studio's wifi network is Lantern and its password is teapot-42."
    first = index.knowledge.add(text, agent="bot")
    again = index.knowledge.add(text, agent="bot")
    assert first.documents_added == 1 and again.documents_unchanged == 1
    hits = index.knowledge.search("what is the wifi password?", agent="bot")
    assert hits and hits[0].fragment.text == text and hits[0].path == "inline"
    assert {s.text.lower() for s in hits[0].spans} >= {"wifi", "password"}
    assert index.knowledge.search("what is the wifi password?", agent="other") == []
    assert index.sql("SELECT path FROM sources WHERE format = 'knowledge'") == [("inline text",)]


@pytest.mark.parametrize("mode", ["structured", "text", "vector", "hybrid"])
def test_search_finds_the_passage_in_every_mode(loaded: Index, mode: str) -> None:
    hits = loaded.knowledge.search("How do I decrypt an encrypted apple crate label?", mode=mode)
    assert len(hits) <= 5
    hits = loaded.knowledge.search(
        "Which fonts does Quillmark need for printing?", mode=mode, count=3
    )
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    if mode != "vector":  # static embeddings of long fragments rank it lower
        assert hits and any("Noto" in h.fragment.text for h in hits), mode
    best = hits[0].as_dict()
    assert best["fragment_id"].startswith(best["document_id"]) and best["path"]
    if mode == "vector":
        assert not loaded.knowledge.search("printing fonts", mode=mode, threshold=1.01)


def test_a_documents_fragments_are_turns_of_their_own(tmp_path: Path) -> None:
    # Fragments have no speaker: the text window must not make a whole document one turn
    # (every fragment would score with all of them), so they rank as message windows do.
    with Index(tmp_path / "ix") as index:
        index.knowledge.add(_folder(tmp_path), shared=True)
    ranked = []
    for turns in (True, False):
        settings = DEFAULT_SETTINGS.with_overrides(window_turns=turns)
        with Index(tmp_path / "ix", read_only=True, settings=settings) as index:
            result = index.query("source:knowledge quillmark fonts printing", limit=None)
            ranked.append([(m.id, m.score) for m in result.messages])
    assert ranked[0] == ranked[1] and len(ranked[0]) > 1


def test_query_scopes_for_documents(loaded: Index) -> None:
    loaded.ingest([EXAMPLES / "friends_chat.jsonl"])
    only_docs = loaded.query("source:knowledge install", limit=50)
    assert only_docs.messages and all(m.conversation.startswith("doc:") for m in only_docs.messages)
    no_docs = loaded.query("source:conversations bike", limit=50)
    assert all(not m.conversation.startswith("doc:") for m in no_docs.messages)
    guide = loaded.query('document:"quillmark_guide.md" commands', limit=50)
    assert guide.messages
    guide_id = next(d for d in loaded.knowledge.documents() if d.path == "quillmark_guide.md")
    assert {m.conversation for m in guide.messages} == {f"doc:{guide_id.document_id}"}
    section = loaded.query('section:"From PyPI"', limit=50)
    assert section.messages and all(
        "From PyPI" in loaded.show(m.id, m.conversation)["text"] for m in section.messages
    )
    assert loaded.query('section:"No Such Heading"', limit=50).messages == []


def test_ask_packs_documents_and_conversations_in_one_budget(loaded: Index) -> None:
    loaded.ingest([EXAMPLES / "friends_chat.jsonl"])
    answer = loaded.ask(
        "Where does Marco work, and how do I install Quillmark?",
        budget=1000,
        sources=("conversations", "knowledge"),
    )
    assert answer.context.tokens <= 1000
    lines = answer.context.text.splitlines()
    assert any(line.startswith("[quillmark_guide.md") for line in lines), lines
    assert any(": " in line and line.startswith("[") and "2024]" in line for line in lines)
    plain = loaded.ask("how do I install Quillmark?", budget=1000)
    assert not any(m.conversation.startswith("doc:") for m in plain.context.messages)


def test_the_memory_context_draws_on_the_agents_knowledge(index: Index) -> None:
    index.knowledge.add(
        "Refund policy: customers get a full refund within 30 days of purchase.", agent="bot"
    )
    index.knowledge.add("The office closes at 6 pm on Fridays.", shared=True)
    mem = index.memory("bot")
    mem.add("Hello, I bought a kettle last week.", user="sam", room="dm-sam")
    window = mem.context("Can I still get a refund?", room="dm-sam", budget=500)
    text = window.text
    assert "30 days" in text and window.tokens <= 500


def test_a_text_file_in_another_encoding_is_read_with_the_one_its_hint_names(
    tmp_path: Path,
) -> None:
    """The skip reason of a Latin-1 file names ``--encoding``; the command takes it."""
    db = str(tmp_path / "ix")
    notes = tmp_path / "notes.txt"
    notes.write_bytes("The café on Rua Augusta opens at seven.".encode("latin-1"))
    runner = CliRunner()
    skipped = runner.invoke(cli, ["knowledge", "add", str(notes), "--db", db, "--json"])
    assert skipped.exit_code == 1, skipped.output  # nothing was added
    (reason,) = [s["reason"] for s in json.loads(skipped.stdout)["skipped"]]
    assert "not valid utf-8" in reason and "--encoding latin-1" in reason
    added = runner.invoke(
        cli, ["knowledge", "add", str(notes), "--db", db, "--encoding", "latin-1", "--json"]
    )
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["documents_added"] == 1
    found = runner.invoke(cli, ["knowledge", "search", "café", "--db", db, "--json"])
    assert found.exit_code == 0, found.output
    assert "café on Rua Augusta" in json.loads(found.output)[0]["text"]


def test_a_byte_order_mark_names_the_encoding_beside_another_given(tmp_path: Path) -> None:
    """A folder of a Latin-1 file and a UTF-16 file (with its byte order mark) is added
    in one command: ``--encoding latin-1`` reads the first, the mark the second."""
    db = str(tmp_path / "ix")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "latin.txt").write_bytes("The café on Rua Augusta opens at seven.".encode("latin-1"))
    (docs / "wide.txt").write_bytes("The bakery in Zürich closes at noon.".encode("utf-16"))
    runner = CliRunner()
    added = runner.invoke(
        cli, ["knowledge", "add", str(docs), "--db", db, "--encoding", "latin-1", "--json"]
    )
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["documents_added"] == 2
    found = runner.invoke(cli, ["knowledge", "search", "bakery", "--db", db, "--json"])
    assert "bakery in Zürich" in json.loads(found.output)[0]["text"]


def test_ask_sources_as_a_string_or_none(index: Index, tmp_path: Path) -> None:
    """``sources="knowledge"`` is that source (not its letters); none at all says so."""
    from structrag import ConfigError

    index.knowledge.add(_folder(tmp_path, ("quillmark_guide.md",)), shared=True)
    named = index.ask("How do I install it?", sources="knowledge").context
    listed = index.ask("How do I install it?", sources=["knowledge"]).context
    assert named.text == listed.text and named.messages
    both = index.ask("How do I install it?", sources="conversations, knowledge").context
    assert both.message_ids == listed.message_ids
    with pytest.raises(ConfigError, match="no sources to ask"):
        index.ask("How do I install it?", sources=())
    with pytest.raises(ConfigError, match=r"unknown source\(s\): web"):
        index.ask("How do I install it?", sources="web")


def test_knowledge_commands(tmp_path: Path) -> None:
    db = str(tmp_path / "ix")
    runner = CliRunner()
    folder = _folder(tmp_path, ("quillmark_guide.md", "station_setup.html"))
    dry = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["documents_added"] == 2 and not (tmp_path / "ix").exists()
    dry = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would add 2 new" in dry.output and " added " not in dry.output
    assert dry.output.count("  new  ") == 2
    added = runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--agent", "bot"])
    assert added.exit_code == 0, added.output
    assert "added 2 new and 0 changed documents" in added.output
    listed = json.loads(runner.invoke(cli, ["knowledge", "list", "--db", db, "--json"]).output)
    assert listed == []  # the bot's documents are not shared
    listed = json.loads(
        runner.invoke(cli, ["knowledge", "list", "--db", db, "--agent", "bot", "--json"]).output
    )
    assert {d["path"] for d in listed} == {"quillmark_guide.md", "station_setup.html"}
    found = runner.invoke(
        cli,
        ["knowledge", "search", "install from PyPI", "--db", db, "--agent", "bot", "--json"],
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)
    assert hits[0]["path"] == "quillmark_guide.md" and hits[0]["spans"]
    shown = runner.invoke(cli, ["knowledge", "show", listed[0]["document_id"], "--db", db])
    assert shown.exit_code == 0 and "chunk-0" in shown.output
    gone = runner.invoke(cli, ["knowledge", "remove", listed[0]["document_id"], "--db", db])
    assert gone.exit_code == 0 and "removed" in gone.output
    missing = runner.invoke(cli, ["knowledge", "remove", "doc-nope", "--db", db])
    assert missing.exit_code == 1 and "no document" in str(missing.exception)
    both = runner.invoke(
        cli, ["knowledge", "add", str(folder), "--db", db, "--agent", "x", "--shared"]
    )
    assert both.exit_code == 2
    runner.invoke(cli, ["knowledge", "add", str(folder), "--db", db, "--shared"])
    asked = runner.invoke(
        cli,
        ["ask", "How do I install Quillmark?", "--db", db, "--sources", "knowledge,conversations"],
    )
    assert asked.exit_code == 0, asked.output
    assert "[quillmark_guide.md" in asked.output
    wrong = runner.invoke(cli, ["ask", "install", "--db", db, "--sources", "documents"])
    assert wrong.exit_code == 1 and "unknown source" in str(wrong.exception)
    cleared = runner.invoke(cli, ["knowledge", "clear", "--db", db, "--agent", "bot", "--json"])
    assert json.loads(cleared.output) == {"documents_removed": 1}


FAQ_PAGE = """# Kettle FAQ

## General

### Why does the kettle whistle twice?

The first whistle is the thermostat reaching ninety degrees; the second is the boil.
Descaling the element removes the early whistle, since limescale warms the sensor first.

### How do I descale the heating element?

Fill the kettle with equal parts white vinegar and water, leave it for an hour, then boil
clean water twice and pour it away. Citric acid works as well and leaves no smell.

## Safety

### Can the kettle run dry?

No: a bimetal cut-out switches the element off when the base passes one hundred and
twenty degrees, and the lamp blinks until the kettle is refilled with water.
"""


def test_the_knowledge_benchmark_answers_faq_questions_from_pages_without_them(
    tmp_path: Path,
) -> None:
    from structrag.bench.knowledge import build_set, run_knowledge

    pages = tmp_path / "faq"
    pages.mkdir()
    (pages / "kettle.md").write_text(FAQ_PAGE, encoding="utf-8")
    items = build_set([pages], tmp_path / "rewritten")
    assert [i.question for i in items] == [
        "Why does the kettle whistle twice?",
        "How do I descale the heating element?",
        "Can the kettle run dry?",
    ]
    rewritten = next((tmp_path / "rewritten").iterdir()).read_text(encoding="utf-8")
    assert "?" not in rewritten and "## Safety" in rewritten  # question headings left out
    descale = rewritten[items[1].start : items[1].end]
    assert descale.startswith("Fill the kettle") and descale.rstrip().endswith("no smell.")

    result = run_knowledge([pages], tmp_path / "out", budgets=(60, 1000), systems=("text",))
    rows = {r["budget"]: r for r in result["rows"]}
    assert rows[1000]["answered"] == 1.0  # the whole page fits: every passage is there
    assert rows[60]["answered"] < 1.0  # one short fragment cannot hold three passages
    records = (tmp_path / "out" / "knowledge.jsonl").read_text().splitlines()
    assert len(records) == 3 * 2
    assert "| text |" in (tmp_path / "out" / "knowledge.md").read_text()


#: Questions a user asks about using structrag, and words the README's answer holds.
README_QUESTIONS = [
    ("How do I install structrag?", "pip install"),
    ("How do I run the tests?", "make test"),
    ("Which chat export formats can I ingest?", "| format | what it reads"),
    ("How do I point structrag at an OpenAI-compatible LLM endpoint?", "STRUCTRAG_LLM_BASE_URL"),
    ("How do I find the messages a person sent with the query language?", "speaker:"),
    ("Which files does an index directory hold?", "structrag.duckdb"),
    ("How do I measure held-out recall on LoCoMo?", "bench loo"),
    ("How much would an LLM ingest cost before I run it?", "--dry-run"),
    ("How do I add a memory for an agent?", "memory add"),
    ("How do I search the documents I added as knowledge?", "knowledge search"),
]


@pytest.fixture(scope="module")
def readme_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = Path(__file__).resolve().parents[1]
    # Copied into a folder of a fixed name: an absolute path is cited by its folder and
    # name, and the checkout's folder name must not change what fits in a budget.
    here = tmp_path_factory.mktemp("readme")
    copy = here / "structrag"
    copy.mkdir()
    shutil.copy(root / "README.md", copy / "README.md")
    if (root / "docs").is_dir():
        shutil.copytree(root / "docs", copy / "docs")
    with Index(here / "ix") as ix:
        paths = [copy / "README.md"] + ([copy / "docs"] if (copy / "docs").is_dir() else [])
        report = ix.knowledge.add(paths, shared=True)
        assert report.fragments_added > 10
        yield ix


@pytest.mark.parametrize(("question", "phrase"), README_QUESTIONS)
def test_the_readme_as_knowledge_answers_questions_about_using_structrag(
    readme_index: Index, question: str, phrase: str
) -> None:
    answer = readme_index.ask(question, budget=1500, sources=("knowledge",))
    assert phrase in answer.context.text, answer.query


def test_asking_an_index_of_documents_alone_says_to_ask_them(tmp_path: Path) -> None:
    with Index(tmp_path / "ix") as index:
        index.knowledge.add("Employees get 25 vacation days a year.", shared=True)
        plain = index.ask("How many vacation days do employees get?", budget=300)
        assert not plain.context.messages
        assert any("--sources knowledge" in n for n in plain.notes)
        asked = index.ask("How many vacation days?", budget=300, sources=("knowledge",))
        assert "25 vacation days" in asked.context.text
        assert not any("--sources knowledge" in n for n in asked.notes)


def test_an_agent_lists_and_counts_the_shared_knowledge_it_searches(
    index: Index, tmp_path: Path
) -> None:
    index.knowledge.add(_folder(tmp_path), shared=True)
    bot = index.memory("bot")
    found = bot.search("Quillmark", table="knowledge", mode="text")
    assert found
    listed = {r.id for r in bot.recent(table="knowledge", count=1000)}
    assert {h.memory.id for h in found} <= listed
    assert bot.count(table="knowledge") == len(listed) > 0
    assert bot.count(table="messages") == 0 and bot.recent() == []


def test_an_add_stopped_half_way_names_the_documents_it_committed(tmp_path: Path) -> None:
    """Ctrl-C during an agent's documents, after the shared ones (written first) were
    committed: the interruption names them, and the index holds them whole."""
    from tests.sinks import Interrupt

    root = tmp_path / "knowledge"
    for owner in ("shared", "zed-bot"):
        (root / owner).mkdir(parents=True)
        for name in ("a", "b"):
            (root / owner / f"{name}.md").write_text(f"# {owner} {name}\n\nThe {name} notes.\n")
    with Index(tmp_path / "ix") as index:
        with pytest.raises(KeyboardInterrupt) as info:
            index.knowledge.add([root], progress=Interrupt(3))
        written = getattr(info.value, "written", None)
        assert written is not None
        assert sorted(written) == [str(root / "shared" / "a.md"), str(root / "shared" / "b.md")]
        stored = index.knowledge.documents(every=True)
        assert sorted((d.path, d.shared) for d in stored) == [("a.md", True), ("b.md", True)]
