"""Documents and fragments on the DuckDB store (:class:`structrag.knowledge.records.KnowledgeRows`).

A fragment is a message (``memory_table = 'knowledge'``) of its document's conversation;
``fragments`` says where it sits in the document, ``documents`` describes the document.
Writes go through the store's connection, so inside a transaction they commit with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from structrag.knowledge.records import SOURCE_FILE, DocumentInfo, FragmentInfo, NewDocument
from structrag.naming import DOCUMENT_ROOM
from structrag.store.duckdb.reader import DuckDBReader
from structrag.store.duckdb.writer import to_json, utc_now

_DOCUMENT_SELECT = """
SELECT d.document_id, d.path, coalesce(d.title, ''), d.format, d.agent, d.shared, d.sha256,
       d.chars, d.pages, d.metadata, d.added_at,
       (SELECT count(*) FROM fragments f WHERE f.document_id = d.document_id),
       (SELECT coalesce(sum(f.tokens), 0) FROM fragments f WHERE f.document_id = d.document_id)
FROM documents d
"""
_FRAGMENT_SELECT = """
SELECT m.message_id, f.document_id, f.fragment_index, f.start_char, f.end_char, f.tokens,
       f.page_start, f.page_end, f.section, m.text, f.mkey
FROM fragments f JOIN messages m USING (mkey)
"""


def _document(row: tuple[Any, ...]) -> DocumentInfo:
    return DocumentInfo(
        document_id=str(row[0]),
        path=str(row[1]),
        title=str(row[2]),
        format=str(row[3]),
        agent=row[4],
        shared=bool(row[5]),
        sha256=str(row[6]),
        chars=int(row[7]),
        pages=None if row[8] is None else int(row[8]),
        metadata=json.loads(row[9]) if row[9] else {},
        added_at=row[10],
        fragments=int(row[11]),
        tokens=int(row[12]),
    )


def _fragment(row: tuple[Any, ...]) -> FragmentInfo:
    return FragmentInfo(
        fragment_id=str(row[0]),
        document_id=str(row[1]),
        index=int(row[2]),
        start=int(row[3]),
        end=int(row[4]),
        tokens=int(row[5]),
        page=None if row[6] is None else int(row[6]),
        page_end=None if row[7] is None else int(row[7]),
        section=tuple(row[8] or ()),
        text=str(row[9]),
    )


class DuckDBKnowledge:
    """Document and fragment rows, on the store's connection."""

    def __init__(self, store: DuckDBReader) -> None:
        self._sql = store.sql
        self._run = store._run

    def documents(
        self, *, agent: str | None = None, shared: bool | None = None, every: bool = False
    ) -> list[DocumentInfo]:
        params: list[Any] = []
        if every:
            where = "TRUE"
        else:
            clauses: list[str] = []
            if shared:
                clauses.append("d.shared")
            if agent is not None:
                clauses.append("(NOT d.shared AND d.agent = ?)")
                params.append(agent)
            where = " OR ".join(clauses) or "FALSE"
        rows = self._sql(f"{_DOCUMENT_SELECT} WHERE {where} ORDER BY d.path, d.document_id", params)
        return [_document(r) for r in rows]

    def document(self, document_id: str) -> DocumentInfo | None:
        rows = self._sql(f"{_DOCUMENT_SELECT} WHERE d.document_id = ?", [document_id])
        return _document(rows[0]) if rows else None

    def document_files(self, agent: str | None) -> dict[str, str]:
        rows = self._sql(
            f"SELECT json_extract_string(metadata, '$.{SOURCE_FILE}') AS file, path "
            "FROM documents WHERE shared = ? AND agent IS NOT DISTINCT FROM ? "
            "AND file IS NOT NULL ORDER BY document_id",
            [agent is None, agent],
        )
        found: dict[str, str] = {}
        for file, path in rows:
            found.setdefault(str(file), str(path))
        return found

    def fragments(self, document_id: str) -> list[FragmentInfo]:
        rows = self._sql(
            f"{_FRAGMENT_SELECT} WHERE f.document_id = ? ORDER BY f.fragment_index", [document_id]
        )
        return [_fragment(r) for r in rows]

    def fragments_by_keys(self, mkeys: Sequence[int]) -> dict[int, FragmentInfo]:
        keys = sorted({int(k) for k in mkeys})
        if not keys:
            return {}
        rows = self._sql(f"{_FRAGMENT_SELECT} WHERE f.mkey IN (SELECT unnest(?::BIGINT[]))", [keys])
        return {int(r[10]): _fragment(r) for r in rows}

    def stored_fragments(self, document_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        ids = sorted(set(document_ids))
        out: dict[str, dict[str, int]] = {d: {} for d in ids}
        if not ids:
            return out
        rows = self._sql(
            "SELECT f.document_id, m.message_id, f.mkey FROM fragments f JOIN messages m "
            "USING (mkey) WHERE f.document_id IN (SELECT unnest(?::VARCHAR[]))",
            [ids],
        )
        for document_id, fragment_id, mkey in rows:
            out[str(document_id)][str(fragment_id)] = int(mkey)
        return out

    def write_documents(self, documents: Sequence[NewDocument]) -> None:
        now = utc_now()
        for doc in documents:
            self._run(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (document_id) DO UPDATE SET path = excluded.path, "
                "title = excluded.title, format = excluded.format, sha256 = excluded.sha256, "
                "chars = excluded.chars, pages = excluded.pages, metadata = excluded.metadata, "
                "added_at = excluded.added_at",
                [
                    doc.document_id,
                    doc.agent,
                    doc.shared,
                    doc.path,
                    doc.title or None,
                    doc.format,
                    doc.sha256,
                    doc.chars,
                    doc.pages,
                    to_json(doc.metadata),
                    now,
                ],
            )
            # Where each fragment sits: rewritten whole (an edit earlier in the document
            # moves every later fragment, unchanged text or not).
            self._run("DELETE FROM fragments WHERE document_id = ?", [doc.document_id])
            if not doc.fragments:
                continue
            names = ("fid", "i", "s", "e", "t", "p", "pe", "sec")
            rows = [dict(zip(names, (*f[:7], list(f[7])), strict=True)) for f in doc.fragments]
            self._run(
                "INSERT INTO fragments SELECT m.mkey, ?, f.i, f.s, f.e, f.t, f.p, f.pe, f.sec "
                "FROM (SELECT unnest(?::STRUCT(fid VARCHAR, i INTEGER, s INTEGER, e INTEGER, "
                "t INTEGER, p INTEGER, pe INTEGER, sec VARCHAR[])[]) AS f) "
                "JOIN messages m ON m.conversation = ? AND m.message_id = f.fid",
                [doc.document_id, rows, doc.conversation],
            )

    def forget_documents(self, document_ids: Sequence[str]) -> None:
        """Delete document and fragment rows (the fragments' messages go in the same
        transaction; their conversations after it, :meth:`drop_empty_conversations`)."""
        ids = sorted(set(document_ids))
        if not ids:
            return
        self._run("DELETE FROM fragments WHERE document_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
        self._run("DELETE FROM documents WHERE document_id IN (SELECT unnest(?::VARCHAR[]))", [ids])

    def drop_empty_conversations(self) -> None:
        # Not in the transaction that deleted the fragments: DuckDB refuses to delete a
        # row whose referencing rows went in the same transaction.
        self._run(
            f"DELETE FROM conversations WHERE starts_with(conversation, '{DOCUMENT_ROOM}') "
            "AND conversation NOT IN (SELECT DISTINCT conversation FROM messages)"
        )
