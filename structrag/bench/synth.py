"""Synthetic corpora for the scaling benchmark, replicated from real conversations.

Copy ``r`` of a LoCoMo sample becomes conversation ``syn<r>-<sample_id>``: its two
speakers get new first names from a fixed list (also in the turn texts, image captions
and questions, as whole words), and every session date moves forward by ``r * 5`` whole
weeks, so weekdays and the gaps between sessions stay as they were. Turn ids (``dia_id``)
and the questions' evidence (matched to the turns' ids) are kept; ids are unique within a
conversation, and conversation ids are unique across copies. Summaries and observations are dropped.
Dates written inside the text are not shifted.

A corpus of ``size`` messages is written as LoCoMo-format shards of at most
``shard_size`` messages (``part-0001.json`` ...), the last copy cut to hit ``size``
exactly; a question whose evidence was cut is dropped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from structrag.bench.locomo import load_samples, resolve_evidence, turn_ids
from structrag.errors import ConfigError
from structrag.importers.base import file_sha256
from structrag.timeparse import parse_datetime

# fmt: off
FIRST_NAMES = (
    "Aaron", "Abigail", "Adrian", "Aisha", "Alan", "Alice", "Amara", "Amir", "Anders",
    "Andrea", "Anika", "Arjun", "Astrid", "Beatrix", "Benedict", "Bianca", "Boris", "Bruno",
    "Camille", "Carmen", "Cedric", "Chiara", "Clara", "Colin", "Dalia", "Damian", "Daria",
    "Delia", "Dmitri", "Edgar", "Elena", "Elif", "Emeka", "Esther", "Ezra", "Fatima",
    "Felix", "Fiona", "Gabriel", "Greta", "Gustav", "Hana", "Harvey", "Helena", "Hugo",
    "Ines", "Ingrid", "Isaac", "Ivan", "Jasper", "Jonas", "Julia", "Kamal", "Katya",
    "Kenji", "Lara", "Leon", "Liam", "Lina", "Lorenzo", "Lucia", "Magnus", "Malik", "Marta",
    "Mateo", "Maya", "Miguel", "Milan", "Mira", "Nadia", "Nikolai", "Nina", "Noor", "Oscar",
    "Otto", "Paola", "Pavel", "Petra", "Quentin", "Rafael", "Rania", "Rosa", "Rufus",
    "Sabine", "Samir", "Selma", "Silas", "Sofia", "Stellan", "Tamsin", "Theo", "Tomas",
    "Uma", "Valentin", "Vera", "Viktor", "Wanda", "Xavier", "Yara", "Yusuf", "Zara",
    "Zoltan",
)
# fmt: on
WEEKS_PER_COPY = 5
LOCOMO_TIME = "%I:%M %p on %d %B, %Y"
_SESSION_RE = re.compile(r"^session_(\d+)$")


def locomo_time(value: dt.datetime) -> str:
    """LoCoMo's date format: ``1:56 pm on 8 May, 2023``."""
    text = value.strftime(LOCOMO_TIME)
    hour, rest = text.split(":", 1)
    return f"{int(hour)}:{rest[:3]}{rest[3:5].lower()}{rest[5:]}"


def shift_time(value: Any, weeks: int) -> Any:
    """A LoCoMo date string moved by whole weeks (returned unchanged if unparsable)."""
    if not isinstance(value, str):
        return value
    parsed = parse_datetime(value)
    if parsed is None:
        return value
    return locomo_time(parsed + dt.timedelta(weeks=weeks))


def name_pair(copy: int, taken: set[str]) -> tuple[str, str]:
    """Two distinct first names for a copy, none of them a name in the source data."""
    names = [n for n in FIRST_NAMES if n not in taken]
    if len(names) < 2:
        raise ConfigError("too few replacement names left", hint="extend FIRST_NAMES")
    count = len(names)
    a = copy % count
    b = (a + 1 + copy // count) % count
    if b == a:
        b = (b + 1) % count
    return names[a], names[b]


def _replacer(mapping: dict[str, str]) -> Any:
    if not mapping:
        return lambda text: text
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")\b"
    )

    def replace(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return pattern.sub(lambda m: mapping[m.group(1)], text)

    return replace


def _speakers(conversation: dict[str, Any]) -> list[str]:
    names = [conversation.get("speaker_a"), conversation.get("speaker_b")]
    found = [n.strip() for n in names if isinstance(n, str) and n.strip()]
    for key, turns in conversation.items():
        if _SESSION_RE.match(key) and isinstance(turns, list):
            for turn in turns:
                speaker = turn.get("speaker") if isinstance(turn, dict) else None
                if isinstance(speaker, str) and speaker.strip() and speaker.strip() not in found:
                    found.append(speaker.strip())
    return found


def replicate(
    sample: dict[str, Any], copy: int, taken: set[str], *, limit: int | None = None
) -> tuple[dict[str, Any], int]:
    """Copy ``copy`` of a LoCoMo sample (at most ``limit`` turns); returns it and its turn
    count."""
    conversation = sample["conversation"]
    speakers = _speakers(conversation)
    new_names = list(name_pair(copy, taken))
    mapping: dict[str, str] = {}
    for i, speaker in enumerate(speakers[:2]):
        mapping[speaker] = new_names[i]
        first = speaker.split()[0]
        if first != speaker:
            mapping[first] = new_names[i]
    replace = _replacer(mapping)
    weeks = copy * WEEKS_PER_COPY
    sample_id = str(sample.get("sample_id") or "conv")
    out_conv: dict[str, Any] = {}
    for key in ("speaker_a", "speaker_b"):
        if key in conversation:
            out_conv[key] = replace(conversation[key])
    kept: set[str] = set()
    count = 0
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := _SESSION_RE.match(key))
    )
    for _, key in sessions:
        turns = conversation[key]
        if not isinstance(turns, list) or (limit is not None and count >= limit):
            continue
        if limit is not None:
            turns = turns[: limit - count]
        rows = []
        for turn in turns:
            row = dict(turn)
            for field in ("speaker", "text", "clean_text", "blip_caption", "query"):
                if field in row:
                    row[field] = replace(row[field])
            if "date_time" in row:
                row["date_time"] = shift_time(row["date_time"], weeks)
            rows.append(row)
            kept.add(str(row.get("dia_id", "")).strip())
        count += len(rows)
        out_conv[key] = rows
        date_key = f"{key}_date_time"
        if date_key in conversation:
            out_conv[date_key] = shift_time(conversation[date_key], weeks)
    questions = []
    known = set(turn_ids(sample))
    qa_list = sample.get("qa")
    for qa in qa_list if isinstance(qa_list, list) else []:
        raw = qa.get("evidence") if isinstance(qa, dict) else None
        if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
            continue
        evidence, _ = resolve_evidence(raw, known)
        if not evidence or not set(evidence) <= kept:
            continue
        questions.append(
            {**qa, "question": replace(qa.get("question")), "evidence": list(evidence)}
        )
    copy_sample = {
        "sample_id": f"syn{copy}-{sample_id}",
        "conversation": out_conv,
        "qa": questions,
    }
    return copy_sample, count


def synthetic_samples(
    sources: Sequence[dict[str, Any]], size: int
) -> Iterator[tuple[dict[str, Any], int]]:
    """Copies of the source samples, round robin, until they hold ``size`` turns."""
    if size < 1:
        raise ConfigError(f"a corpus needs at least one message, not {size}")
    if not sources:
        raise ConfigError("no source conversations to replicate")
    taken = {name for s in sources for name in _speakers(s["conversation"])}
    taken |= {name.split()[0] for name in taken}
    total = 0
    copy = 0
    while total < size:
        sample = sources[copy % len(sources)]
        replica, count = replicate(sample, copy, taken, limit=size - total)
        copy += 1
        if count:
            total += count
            yield replica, count


def write_corpus(
    data: Sequence[Path], size: int, directory: Path, *, shard_size: int = 25_000
) -> list[Path]:
    """Write a synthetic corpus of ``size`` messages as LoCoMo shards; returns their paths.

    An existing complete corpus in ``directory`` (same size, the same source files with
    the same bytes) is reused.
    """
    data = [Path(p) for p in data]
    directory = Path(directory)
    sources = [s for path in data for s in load_samples(path)]
    marker = directory / "corpus.json"
    signature = {
        "size": size,
        "sources": [str(p) for p in data],
        "sha256": [file_sha256(p) for p in data],
        "shard_size": shard_size,
    }
    if marker.exists():
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            info = {}
        if (
            isinstance(info, dict)
            and info.get("signature") == signature
            and all((directory / name).exists() for name in info.get("shards", []))
        ):
            return [directory / name for name in info["shards"]]
        marker.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    shards: list[Path] = []
    batch: list[dict[str, Any]] = []
    in_batch = 0

    def flush() -> None:
        nonlocal batch, in_batch
        if not batch:
            return
        path = directory / f"part-{len(shards) + 1:04d}.json"
        with path.open("w", encoding="utf-8") as handle:
            json.dump(batch, handle, ensure_ascii=False)
        shards.append(path)
        batch, in_batch = [], 0

    for sample, count in synthetic_samples(sources, size):
        batch.append(sample)
        in_batch += count
        if in_batch >= shard_size:
            flush()
    flush()
    marker.write_text(
        json.dumps({"signature": signature, "shards": [p.name for p in shards]}, indent=2)
    )
    return shards
