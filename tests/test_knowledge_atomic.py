"""Knowledge writes killed halfway: a ``knowledge remove``/``clear`` killed after its
transaction (before its documents' conversations are dropped) leaves nothing that the next
knowledge write does not finish, and a moved file's document is replaced in one
transaction, so a kill never leaves both documents (every fragment found twice)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from structrag import Index
from structrag.knowledge.base import KnowledgeBase

FIXTURES = Path(__file__).parent / "fixtures" / "knowledge"
NAMES = ("quillmark_guide.md", "meeting_notes.txt")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in NAMES:
        shutil.copy(FIXTURES / name, folder / name)
    return folder


def _renamed(tmp_path: Path) -> Path:
    """A folder of one document, added, whose file is then renamed (guide.md ->
    renamed.md): adding the folder again moves the document."""
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(FIXTURES / "quillmark_guide.md", folder / "guide.md")
    with Index(tmp_path / "ix") as index:
        index.knowledge.add(folder, shared=True)
    (folder / "guide.md").rename(folder / "renamed.md")
    return folder


def _killed(tmp_path: Path, fault: str, *args: str) -> None:
    """Run ``structrag ARGS --db ix`` and let it SIGKILL itself at ``fault``."""
    env = dict(os.environ, STRUCTRAG_FAULT=fault)
    done = subprocess.run(
        [sys.executable, "-m", "structrag", *args, "--db", str(tmp_path / "ix")],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr.decode(errors="replace")


def _empty_document_conversations(index: Index) -> list[str]:
    rows = index.sql(
        "SELECT conversation FROM conversations WHERE starts_with(conversation, 'doc:') "
        "AND conversation NOT IN (SELECT DISTINCT conversation FROM messages)"
    )
    return [str(r[0]) for r in rows]


def _document_id(index: Index, path: str) -> str:
    return next(d.document_id for d in index.knowledge.documents() if d.path == path)


def _add_inline(index: Index) -> None:
    index.knowledge.add("Zephyr the cat sleeps on the warm windowsill.", shared=True)


def _remove_again(index: Index, document_id: str) -> None:
    assert index.knowledge.remove(document_id) == 0


def _clear_nothing(index: Index) -> None:
    assert index.knowledge.clear(agent="nobody") == 0


NEXT_WRITES: dict[str, Callable[[Index, str], None]] = {
    "add": lambda index, _: _add_inline(index),
    "remove-again": _remove_again,
    "clear": lambda index, _: _clear_nothing(index),
}


@pytest.mark.parametrize("fault", ["text-commit", "knowledge-conversations"])
@pytest.mark.parametrize("next_write", sorted(NEXT_WRITES))
def test_a_killed_remove_is_finished_by_the_next_knowledge_write(
    tmp_path: Path, fault: str, next_write: str
) -> None:
    with Index(tmp_path / "ix") as index:
        index.knowledge.add(_folder(tmp_path), shared=True)
        document_id = _document_id(index, "quillmark_guide.md")
    _killed(tmp_path, fault, "knowledge", "remove", document_id)
    with Index(tmp_path / "ix") as index:
        # The delete committed; the document's conversation is left, empty.
        assert [d.path for d in index.knowledge.documents()] == ["meeting_notes.txt"]
        assert _empty_document_conversations(index) == [f"doc:{document_id}"]
        NEXT_WRITES[next_write](index, document_id)
        assert _empty_document_conversations(index) == []
        assert f"doc:{document_id}" not in {c.id for c in index.store.conversations()}
    with Index(tmp_path / "ix") as index:
        assert _empty_document_conversations(index) == []


@pytest.mark.parametrize("fault", ["text-commit", "knowledge-conversations"])
def test_a_killed_clear_is_finished_by_clearing_again(tmp_path: Path, fault: str) -> None:
    with Index(tmp_path / "ix") as index:
        index.knowledge.add(_folder(tmp_path), shared=True)
    _killed(tmp_path, fault, "knowledge", "clear", "--shared")
    with Index(tmp_path / "ix") as index:
        assert index.knowledge.documents() == []
        assert len(_empty_document_conversations(index)) == len(NAMES)
        assert index.knowledge.clear(shared=True) == 0
        assert _empty_document_conversations(index) == []


def _one_document(index: Index, path: str) -> None:
    """Only the moved file's document is left, under its new path: its text is found
    once, not twice."""
    documents = index.knowledge.documents()
    assert [d.path for d in documents] == [path]
    fragments = index.knowledge.show(documents[0].document_id)[1]
    stored = index.sql("SELECT count(*) FROM messages WHERE starts_with(conversation, 'doc:')")[0][
        0
    ]
    assert stored == len(fragments)
    assert int(index.sql("SELECT count(*) FROM fragments")[0][0]) == len(fragments)
    hits = index.knowledge.search("Quillmark", count=20, mode="text")
    texts = [h.fragment.text for h in hits]
    assert texts and len(texts) == len(set(texts))


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs."""


def test_a_move_is_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _renamed(tmp_path)

    def killed(self: KnowledgeBase, document_ids: list[str]) -> int:
        raise _Killed  # the moment a second transaction would start

    monkeypatch.setattr(KnowledgeBase, "_forget", killed)
    try:
        with Index(tmp_path / "ix") as index:
            report = index.knowledge.add(folder, shared=True)
            assert [d["status"] for d in report.documents] == ["moved"]
    except _Killed:
        pass  # what the old code, with its two transactions, gets: checked below
    monkeypatch.undo()
    with Index(tmp_path / "ix") as index:
        _one_document(index, "renamed.md")
        assert _empty_document_conversations(index) == []


def test_a_move_killed_at_its_commit_leaves_one_document(tmp_path: Path) -> None:
    folder = _renamed(tmp_path)
    _killed(tmp_path, "text-commit", "knowledge", "add", str(folder), "--shared")
    with Index(tmp_path / "ix") as index:
        _one_document(index, "renamed.md")
        # Adding the folder again changes nothing but the old conversation left empty.
        report = index.knowledge.add(folder, shared=True)
        assert [d["status"] for d in report.documents] == ["unchanged"]
        assert report.gone == []
        assert _empty_document_conversations(index) == []
        _one_document(index, "renamed.md")
