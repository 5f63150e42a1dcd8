"""Question sets over chat exports: the recall benchmark on conversations in any format
the importers read (WhatsApp exports, for instance), not only LoCoMo.

A question set is a JSON file::

    {"format": "structrag-chat-questions", "version": 1,
     "chats": {"lena_marco": {"file": "lena_marco.txt", "questions": [
         {"question": "What sports does Lena do?", "category": "multi-hop",
          "answer": "bouldering and swimming",
          "evidence": ["tomorrow bouldering with jana", "swimming was nice today"]}]}}}

``file`` is read by the importers (format detected), relative to the question set.
``category`` is one of LoCoMo's names (multi-hop, temporal, open-domain, single-hop,
adversarial), so the tables read the same. ``evidence`` names each supporting message by
a piece of its text: a message that holds it and no other message does (or, when several
do, the one message that is exactly that text). Writing evidence as text keeps a set
readable and checkable by hand; a piece that names no message, or several, is an error.
Every question needs its evidence (a non-empty list of such pieces): a question without
it, or with anything but text in it, is an error naming the chat and the question.
The conversation id is what the importer gives the file (its name without extension).

``benchmarks/data/informal/`` holds such a set: informal two-person chats written for
structrag (see its ``questions.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structrag.bench.output import utf8_error
from structrag.errors import InputError

FORMAT = "structrag-chat-questions"
#: LoCoMo's category numbers by name (see :data:`structrag.bench.locomo.CATEGORIES`).
CATEGORY_NUMBERS = {
    "multi-hop": 1,
    "temporal": 2,
    "open-domain": 3,
    "single-hop": 4,
    "adversarial": 5,
}


def read_set(path: Path) -> dict[str, Any] | None:
    """The question set in ``path``, or None when the file is not one (a LoCoMo file)."""
    if path.suffix.lower() != ".json":
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    chats = data.get("chats")
    if not isinstance(chats, dict) or not chats:
        raise InputError(path, "a chat question set needs a 'chats' object with chats in it")
    return data


def chat_files(path: Path, data: dict[str, Any]) -> list[Path]:
    """The chat files a question set asks about (what to ingest)."""
    files = []
    for name, chat in data["chats"].items():
        file = chat.get("file") if isinstance(chat, dict) else None
        if not isinstance(file, str) or not file:
            raise InputError(path, f"chat {name!r} has no 'file'")
        found = (path.parent / file).resolve()
        if not found.exists():
            raise InputError(path, f"chat {name!r}: {file} not found next to the question set")
        files.append(found)
    return files


def load_set(path: Path, data: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each chat's conversation id and its questions as plain records: ``qid``,
    ``conversation``, ``question``, ``category`` (LoCoMo's number), ``evidence`` (message
    ids) and ``answer``. A question without a 'question', with an unknown category or
    without evidence (a non-empty list of pieces of message text) is an error naming the
    chat and the question."""
    from structrag.importers import load_source

    found: list[tuple[str, list[dict[str, Any]]]] = []
    for (name, chat), file in zip(data["chats"].items(), chat_files(path, data), strict=True):
        try:
            source = load_source(file)
        except InputError as exc:
            raise utf8_error(exc, file) from None
        if len(source.conversations) != 1:
            raise InputError(path, f"chat {name!r}: {file.name} holds more than one conversation")
        conversation = source.conversations[0].id
        texts = [(m.id, m.text) for m in source.messages]
        questions = chat.get("questions")
        if questions is None:
            questions = []
        if not isinstance(questions, list):
            raise InputError(path, f"chat {name!r}: 'questions' must be a list of questions")
        records: list[dict[str, Any]] = []
        for j, item in enumerate(questions):
            where = f"chat {name!r}, question {j + 1}"
            if not isinstance(item, dict) or not isinstance(item.get("question"), str):
                raise InputError(path, f"{where}: expected an object with a 'question'")
            category = CATEGORY_NUMBERS.get(str(item.get("category", "")))
            if category is None:
                raise InputError(
                    path,
                    f"{where}: unknown category {item.get('category')!r}",
                    hint=f"use one of {', '.join(CATEGORY_NUMBERS)}",
                )
            evidence = [
                _message_for(path, where, piece, texts) for piece in _pieces(path, where, item)
            ]
            records.append(
                {
                    "qid": f"{conversation}#{j}",
                    "conversation": conversation,
                    "question": item["question"],
                    "category": category,
                    "evidence": tuple(dict.fromkeys(evidence)),
                    "answer": None if item.get("answer") is None else str(item["answer"]),
                }
            )
        found.append((conversation, records))
    return found


def load_set_questions(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The set's questions as plain records (see :func:`load_set`)."""
    return [record for _, records in load_set(path, data) for record in records]


def _pieces(path: Path, where: str, item: dict[str, Any]) -> list[str]:
    pieces = item.get("evidence")
    if not isinstance(pieces, list) or not pieces:
        raise InputError(
            path,
            f"{where}: 'evidence' must be a non-empty list of pieces of message text, not "
            f"{json.dumps(pieces)[:80]}",
            hint='e.g. "evidence": ["my cat Mochi threw up"]',
        )
    for k, piece in enumerate(pieces):
        if not isinstance(piece, str) or not piece.strip():
            raise InputError(
                path,
                f"{where}: evidence piece {k + 1} must be a piece of message text, not "
                f"{json.dumps(piece)[:80]}",
                hint='e.g. "evidence": ["my cat Mochi threw up"]',
            )
    return list(pieces)


def _message_for(path: Path, where: str, piece: str, texts: Sequence[tuple[str, str]]) -> str:
    """The id of the one message whose text holds ``piece`` (see the module docstring)."""
    holding = [(mid, text) for mid, text in texts if piece in text]
    if len(holding) > 1:
        holding = [(mid, text) for mid, text in holding if text.strip() == piece] or holding
    if len(holding) == 1:
        return holding[0][0]
    what = "no message holds" if not holding else f"{len(holding)} messages hold"
    raise InputError(
        path,
        f"{where}: {what} the evidence {piece!r}",
        hint="quote a piece of the message's text that no other message has",
    )
