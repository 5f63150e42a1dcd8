"""LoCoMo questions and the message ids of their evidence.

LoCoMo (github.com/snap-research/locomo, CC BY-NC 4.0) ships ten long two-person
conversations; each sample has a ``qa`` list of questions with an ``answer``, a
``category`` (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and
``evidence``: the ``dia_id`` of the turns that support the answer. The turns themselves
are imported by :mod:`structrag.importers.locomo`, whose message ids are those ``dia_id``
strings, so evidence recall is a set comparison of ids.

Evidence is matched against the ids of the conversation's own turns
(:func:`resolve_evidence`): an evidence string that is a turn's ``dia_id`` as written is
that turn (``"D01:04"``, ``"T1"``). Otherwise every ``D<session>:<turn>`` in it is read
(any case, zero-padded or not) and matched to the turn of that session and number. This
also reads the few malformed evidence strings of the released files (``"D8:6; D9:17"``,
``"D:11:26"``). Evidence that names no turn of the conversation is reported as a warning:
an id such as ``"D10:19"`` is kept (such a question can never be fully covered by any
system), a string that holds no id (``"D"``) is left out.

A question needs a ``question`` string and an integer ``category``; its ``evidence``, when
given, is a list of strings. Anything else is an error naming the file and the question.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.bench.output import read_utf8
from structrag.errors import ConfigError, InputError
from structrag.importers.base import file_sha256, json_path, too_deep

#: LoCoMo's question categories, by their number in the ``category`` field.
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

#: The conversations the default RankingSettings were chosen on: LoCoMo's development
#: split, ``locomo_dev`` (five of ``locomo10.json``'s ten).
DEFAULTS_CHOSEN_ON = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
#: Said wherever figures of the structured system with its default settings on those
#: conversations appear (see :func:`in_sample_note` for other data).
IN_SAMPLE_NOTE = (
    "The default ranking settings were chosen on LoCoMo's locomo_dev conversations ("
    + ", ".join(DEFAULTS_CHOSEN_ON)
    + "), so the structured system's figures on them with those settings are in-sample."
)
CATEGORY_HINT = (
    "give each question an integer 'category': LoCoMo's 1 multi-hop, 2 temporal, "
    "3 open-domain, 4 single-hop, 5 adversarial"
)
EVIDENCE_HINT = 'evidence is a list of turn ids (dia_id), e.g. ["D1:3", "D2:7"]'

_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_SESSION_RE = re.compile(r"session_\d+")


def category_name(category: int) -> str:
    return CATEGORIES.get(category, f"category-{category}")


@dataclass(frozen=True)
class Question:
    """One LoCoMo question, scoped to the conversation it is about."""

    qid: str
    conversation: str
    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str | None = None

    @property
    def category_name(self) -> str:
        return category_name(self.category)


def normalise_evidence(items: Iterable[Any]) -> tuple[str, ...]:
    """``D<session>:<turn>`` ids from LoCoMo evidence strings, in order, without repeats
    (the ids are not matched to any turn: see :func:`resolve_evidence`)."""
    found: list[str] = []
    for item in items:
        for session, turn in _EVIDENCE_RE.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in found:
                found.append(dia_id)
    return tuple(found)


def resolve_evidence(
    items: Sequence[str], turn_ids: Collection[str]
) -> tuple[tuple[str, ...], list[tuple[str, bool]]]:
    """The ids of the turns ``items`` name among ``turn_ids`` (a conversation's message
    ids), in order, without repeats, and what named no turn: ``(text, kept)`` pairs, kept
    when it reads as a ``D<session>:<turn>`` id (kept in its plain form)."""
    by_number: dict[tuple[int, int], str] = {}
    for turn_id in turn_ids:
        match = _EVIDENCE_RE.fullmatch(turn_id)
        if match is None:
            continue
        key = (int(match.group(1)), int(match.group(2)))
        if key not in by_number or turn_id == f"D{key[0]}:{key[1]}":
            by_number[key] = turn_id
    found: dict[str, None] = {}
    unknown: list[tuple[str, bool]] = []
    for item in items:
        text = item.strip()
        if text in turn_ids:
            found[text] = None
            continue
        numbers = _EVIDENCE_RE.findall(text)
        if not numbers:
            unknown.append((item, False))
        for session, turn in numbers:
            key = (int(session), int(turn))
            if key in by_number:
                found[by_number[key]] = None
            else:
                plain = f"D{key[0]}:{key[1]}"
                found[plain] = None
                unknown.append((plain, True))
    return tuple(found), unknown


def conversation_id(path: Path, sample: dict[str, Any], index: int, count: int) -> str:
    """The conversation id the LoCoMo importer gives a sample (keep the two in step)."""
    sample_id = sample.get("sample_id")
    if sample_id is not None and str(sample_id).strip():
        return str(sample_id).strip()
    return path.stem if count == 1 else f"{path.stem}-{index + 1}"


def turn_ids(sample: dict[str, Any]) -> list[str]:
    """The message ids the LoCoMo importer gives a sample's turns (their ``dia_id``)."""
    ids: list[str] = []
    for key, turns in sample["conversation"].items():
        if _SESSION_RE.fullmatch(key) and isinstance(turns, list):
            for turn in turns:
                dia_id = turn.get("dia_id") if isinstance(turn, dict) else None
                if dia_id is not None and str(dia_id).strip():
                    ids.append(str(dia_id).strip())
    return ids


def load_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (a list of samples, or one sample)."""
    path = Path(path)
    if not path.exists():
        raise InputError(
            path,
            "file not found",
            hint="LoCoMo is not shipped: get locomo10.json from github.com/snap-research/locomo",
        )
    text = read_utf8(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise too_deep(path) from None
    samples = data if isinstance(data, list) else [data]
    if not samples or not all(
        isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in samples
    ):
        raise InputError(
            path,
            "not a LoCoMo file: expected a list of samples with a 'conversation' object",
            hint="the benchmark reads LoCoMo-format files such as locomo10.json, and chat "
            "question sets (see structrag.bench.chats)",
        )
    return samples


@dataclass
class QuestionSet:
    """The questions of some data files, and what reading them found."""

    questions: list[Question] = field(default_factory=list)
    #: Every conversation of the data, in file order (with questions or not).
    conversations: list[str] = field(default_factory=list)
    #: Evidence that names no turn of its conversation, one line each.
    warnings: list[str] = field(default_factory=list)
    #: Questions left out because they have no evidence (``with_evidence``).
    without_evidence: int = 0
    #: The question each warning is about: (conversation, its number in the conversation).
    warning_at: list[tuple[str, int]] = field(default_factory=list)
    #: The questions left out for having no evidence, as (conversation, number).
    skipped_at: list[tuple[str, int]] = field(default_factory=list)


def check_distinct(paths: Sequence[Path]) -> None:
    """Refuse a data file given twice (``--data a.json --data ./a.json``): its questions
    would count twice."""
    seen: dict[Path, Path] = {}
    for path in paths:
        key = path.resolve()
        if key in seen:
            raise ConfigError(
                f"the data file {path} is given twice"
                + (f" (also as {seen[key]})" if str(seen[key]) != str(path) else ""),
                hint="give each data file once with --data",
            )
        seen[key] = path


def read_questions(
    paths: Sequence[str | Path], *, with_evidence: bool = True, require: bool = True
) -> QuestionSet:
    """Every question of the LoCoMo files (or chat question sets,
    :mod:`structrag.bench.chats`), in file order (``with_evidence``: only those whose
    evidence names a turn; ``require``: at least one, else an error).

    A conversation may come from one file only, once: question ids (``conv#j``) are
    unique."""
    from structrag.bench.chats import load_set, read_set

    files = [Path(p) for p in paths]
    check_distinct(files)
    result = QuestionSet()
    origin: dict[str, Path] = {}

    def claim(conversation: str, path: Path) -> None:
        if conversation in origin:
            other = origin[conversation]
            raise InputError(
                path,
                f"conversation {conversation!r} is given twice"
                + (" in this file" if other == path else f" (it is also in {other})"),
                hint="each conversation must come from one data file, once: its questions "
                "would count twice",
            )
        origin[conversation] = path
        result.conversations.append(conversation)

    for path in files:
        chat_set = read_set(path)
        if chat_set is not None:
            for conversation, records in load_set(path, chat_set):
                claim(conversation, path)
                result.questions.extend(Question(**record) for record in records)
            continue
        samples = load_samples(path)
        for i, sample in enumerate(samples):
            conv = conversation_id(path, sample, i, len(samples))
            claim(conv, path)
            where = f"[{i}]" if len(samples) > 1 else "the top level"
            _sample_questions(path, sample, conv, where, with_evidence, result)
    if require and not result.questions:
        names = ", ".join(str(p) for p in files) or "the data"
        raise InputError(
            names,
            "no question "
            + ("with evidence " if with_evidence else "")
            + f"to ask ({len(result.conversations)} conversation(s)"
            + (
                f", {result.without_evidence} question(s) without evidence naming a turn)"
                if result.without_evidence
                else ", no questions)"
            ),
            hint="a LoCoMo sample's 'qa' lists its questions, each with 'question', "
            "'category' and 'evidence' (turn ids such as \"D1:3\")",
        )
    return result


def _sample_questions(
    path: Path,
    sample: dict[str, Any],
    conv: str,
    where: str,
    with_evidence: bool,
    result: QuestionSet,
) -> None:
    """A LoCoMo sample's questions, checked, into ``result``."""
    qa = sample.get("qa")
    if qa is None:
        return
    if not isinstance(qa, list):
        raise InputError(
            path,
            f"at {json_path(where, '.qa')} (conversation {conv}): 'qa' must be a list of questions",
        )
    ids = turn_ids(sample)
    known = set(ids)
    for j, item in enumerate(qa):
        at = f"at {json_path(where, f'.qa[{j}]')} (conversation {conv}, question {j})"
        if not isinstance(item, dict):
            raise InputError(path, f"{at}: a question must be an object")
        text = item.get("question")
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, f"{at}: the question has no 'question' text")
        category = item.get("category")
        if not isinstance(category, int) or isinstance(category, bool):
            raise InputError(
                path,
                f"{at}: 'category' must be an integer, not {json.dumps(category)}"
                if "category" in item
                else f"{at}: the question has no 'category'",
                hint=CATEGORY_HINT,
            )
        raw = item.get("evidence")
        if raw is None:
            raw = []
        if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
            raise InputError(
                path,
                f"{at}: 'evidence' must be a list of strings, not {json.dumps(raw)[:80]}",
                hint=EVIDENCE_HINT,
            )
        evidence, unknown = resolve_evidence(raw, known)
        qid = f"{conv}#{j}"
        for piece, kept in unknown:
            result.warnings.append(
                f"{path.name}: question {qid}: evidence {piece!r} names no turn of {conv}"
                + ("; it counts as missed" if kept else "; left out")
            )
            result.warning_at.append((conv, j))
        if with_evidence and not evidence:
            result.without_evidence += 1
            result.skipped_at.append((conv, j))
            continue
        answer = item.get("answer", item.get("adversarial_answer"))
        result.questions.append(
            Question(
                qid=qid,
                conversation=conv,
                question=text,
                category=category,
                evidence=evidence,
                answer=None if answer is None else str(answer),
            )
        )


def question_number(qid: str) -> int:
    """A question's number in its conversation, from its id (``conv-26#12``: 12)."""
    return int(qid.rsplit("#", 1)[1])


def load_questions(
    paths: Sequence[str | Path], *, with_evidence: bool = True, require: bool = True
) -> list[Question]:
    """The questions of :func:`read_questions`."""
    return read_questions(paths, with_evidence=with_evidence, require=require).questions


def ingest_paths(paths: Sequence[str | Path]) -> list[Path]:
    """What to ingest for the benchmark's data files: a LoCoMo file itself, a chat
    question set's chat files."""
    from structrag.bench.chats import chat_files, read_set

    found: list[Path] = []
    for raw_path in paths:
        path = Path(raw_path)
        chat_set = read_set(path)
        found.extend(chat_files(path, chat_set) if chat_set is not None else [path])
    return found


def data_sha256(paths: Sequence[str | Path]) -> str:
    """One SHA-256 of the data: the data files' bytes and the files they make ingest (a
    chat question set's chats), in any order, so two runs can tell whether they read the
    same data."""
    files = {Path(p).resolve() for p in [*paths, *ingest_paths(paths)]}
    digests = sorted(file_sha256(p) for p in files)
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def in_sample_note(conversations: Iterable[str] | None) -> tuple[str, str]:
    """A label (``In-sample``, ``Not in-sample``, ``Partly in-sample``) and the sentence
    that says whether the structured system's default-settings figures on these
    conversations are in-sample (:data:`IN_SAMPLE_NOTE` when they are, or when the
    conversations are not known)."""
    if conversations is None:
        return "In-sample", IN_SAMPLE_NOTE
    names = list(dict.fromkeys(conversations))
    chosen = [c for c in names if c in DEFAULTS_CHOSEN_ON]
    if names and len(chosen) == len(names):
        return "In-sample", IN_SAMPLE_NOTE
    where = (
        "The default ranking settings were chosen on LoCoMo's locomo_dev conversations ("
        + ", ".join(DEFAULTS_CHOSEN_ON)
        + ")"
    )
    if not chosen:
        return "Not in-sample", (
            f"{where}; none of them is in this data, so the structured system's figures "
            "here are not in-sample."
        )
    return "Partly in-sample", (
        f"{where}; {', '.join(chosen)} of this data "
        + ("is" if len(chosen) == 1 else "are")
        + " among them, so the structured system's figures on "
        + ("it" if len(chosen) == 1 else "them")
        + f" are in-sample (the other {len(names) - len(chosen)} conversation(s) are not)."
    )


def turn_count(paths: Sequence[str | Path]) -> int:
    """How many turns (messages) the LoCoMo files hold."""
    total = 0
    for path in paths:
        for sample in load_samples(Path(path)):
            for key, turns in sample["conversation"].items():
                if _SESSION_RE.fullmatch(key) and isinstance(turns, list):
                    total += len(turns)
    return total
