"""LoCoMo questions and the message ids of their evidence.

LoCoMo (github.com/snap-research/locomo, CC BY-NC 4.0) ships ten long two-person
conversations; each sample has a ``qa`` list of questions with an ``answer``, a
``category`` (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and
``evidence``: the ``dia_id`` of the turns that support the answer. The turns themselves
are imported by :mod:`structrag.importers.locomo`, whose message ids are those ``dia_id``
strings, so evidence recall is a set comparison of ids.

A few evidence strings in the released files are malformed (``"D8:6; D9:17"``,
``"D:11:26"``, ``"D"``); :func:`normalise_evidence` reads every ``D<session>:<turn>`` it
can find in them and drops what holds none. Evidence that names no turn of the
conversation is kept, so such a question can never be fully covered by any system.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structrag.errors import InputError

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
#: Said wherever figures of the structured system with its default settings appear.
IN_SAMPLE_NOTE = (
    "The default ranking settings were chosen on LoCoMo's locomo_dev conversations ("
    + ", ".join(DEFAULTS_CHOSEN_ON)
    + "), so the structured system's figures on them with those settings are in-sample."
)

_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


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
    """``D<session>:<turn>`` ids from LoCoMo evidence strings, in order, without repeats."""
    found: list[str] = []
    for item in items:
        for session, turn in _EVIDENCE_RE.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in found:
                found.append(dia_id)
    return tuple(found)


def conversation_id(path: Path, sample: dict[str, Any], index: int, count: int) -> str:
    """The conversation id the LoCoMo importer gives a sample (keep the two in step)."""
    sample_id = sample.get("sample_id")
    if sample_id is not None and str(sample_id).strip():
        return str(sample_id).strip()
    return path.stem if count == 1 else f"{path.stem}-{index + 1}"


def load_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (a list of samples, or one sample)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            path,
            "file not found",
            hint="LoCoMo is not shipped: get locomo10.json from github.com/snap-research/locomo",
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno
        ) from None
    samples = data if isinstance(data, list) else [data]
    if not samples or not all(
        isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in samples
    ):
        raise InputError(
            path,
            "not a LoCoMo file: expected a list of samples with a 'conversation' object",
            hint="the benchmark reads LoCoMo-format files such as locomo10.json",
        )
    return samples


def load_questions(paths: Sequence[str | Path], *, with_evidence: bool = True) -> list[Question]:
    """Every question of the LoCoMo files (or chat question sets,
    :mod:`structrag.bench.chats`), in file order (``with_evidence``: only those whose
    evidence names at least one turn)."""
    from structrag.bench.chats import load_set_questions, read_set

    questions: list[Question] = []
    for raw_path in paths:
        path = Path(raw_path)
        chat_set = read_set(path)
        if chat_set is not None:
            questions.extend(
                Question(**record)
                for record in load_set_questions(path, chat_set)
                if record["evidence"] or not with_evidence
            )
            continue
        samples = load_samples(path)
        for i, sample in enumerate(samples):
            conv = conversation_id(path, sample, i, len(samples))
            for j, qa in enumerate(sample.get("qa") or []):
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
                    continue
                evidence = normalise_evidence(qa.get("evidence") or [])
                if with_evidence and not evidence:
                    continue
                answer = qa.get("answer", qa.get("adversarial_answer"))
                questions.append(
                    Question(
                        qid=f"{conv}#{j}",
                        conversation=conv,
                        question=qa["question"],
                        category=int(qa.get("category") or 0),
                        evidence=evidence,
                        answer=None if answer is None else str(answer),
                    )
                )
    return questions


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


def turn_count(paths: Sequence[str | Path]) -> int:
    """How many turns (messages) the LoCoMo files hold."""
    total = 0
    for path in paths:
        for sample in load_samples(Path(path)):
            for key, turns in sample["conversation"].items():
                if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                    total += len(turns)
    return total
