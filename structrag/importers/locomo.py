"""LoCoMo conversation files (github.com/snap-research/locomo, CC BY-NC 4.0).

A file is a list of samples (or one sample). Each sample has ``conversation`` with
``speaker_a``, ``speaker_b``, sessions ``session_N`` (lists of turns) and their dates
``session_N_date_time``. A turn has ``dia_id`` (the message id), ``speaker``, ``text`` (or
``clean_text``), optionally its own ``date_time``, and optionally ``blip_caption`` for a
shared image, which is appended to the text as ``[shares <caption>]`` so it can be found.
The conversation id is ``sample_id``, or the file name when there is none. Questions,
observations and summaries in the file are not messages and are not imported.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    StreamedSource,
    clean_text,
    expect,
    finish,
    json_path,
    merge_sources,
    parse_json,
)
from structrag.importers.json_stream import JsonSurvey, stream_items
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_SESSION_RE = re.compile(r"^session_(\d+)$")


def looks_like_locomo(data: Any) -> bool:
    sample = data[0] if isinstance(data, list) and data else data
    if not isinstance(sample, dict):
        return False
    conv = sample.get("conversation")
    return isinstance(conv, dict) and any(_SESSION_RE.match(k) for k in conv)


def load_locomo(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    samples = data if isinstance(data, list) else [data]
    if not samples:
        raise InputError(path, "the file holds no conversations")
    _one_named(path, options, len(samples))
    parts = [
        _load_sample(path, sample, i, len(samples), options) for i, sample in enumerate(samples)
    ]
    return merge_sources(path, "locomo", parts)


def stream_locomo(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A LoCoMo file checked and read again one sample at a time (see
    :func:`~structrag.importers.json_stream.stream_items`); None for a file that is not a
    list of samples (it is read whole)."""
    if not isinstance(survey.skeleton, list) or not survey.skeleton:
        return None
    count = survey.length()
    _one_named(path, options, count)
    return stream_items(
        path, "locomo", options, lambda sample, i: _load_sample(path, sample, i, count, options)
    )


def _one_named(path: Path, options: LoadOptions, count: int) -> None:
    if options.conversation and count > 1:
        raise InputError(
            path,
            f"--conversation names one conversation but the file holds {count}",
            hint="drop --conversation; each sample's 'sample_id' names its conversation",
        )


def _load_sample(
    path: Path, sample: Any, index: int, count: int, options: LoadOptions
) -> ParsedSource:
    where = f"[{index}]" if count > 1 else "the top level"
    expect(path, sample, dict, where, "a LoCoMo sample")
    conv = sample.get("conversation")
    expect(path, conv, dict, json_path(where, ".conversation"), "'conversation'")
    sample_id = sample.get("sample_id")
    if options.conversation:
        conv_id = options.conversation
    elif sample_id is not None and str(sample_id).strip():
        conv_id = str(sample_id).strip()
    else:
        conv_id = path.stem if count == 1 else f"{path.stem}-{index + 1}"
    participants = [
        conv[k].strip() for k in ("speaker_a", "speaker_b") if isinstance(conv.get(k), str)
    ]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION_RE.match(key)))
    if not sessions:
        raise InputError(
            path, f"at {json_path(where, '.conversation')}: no 'session_N' lists found"
        )
    raws: list[RawMessage] = []
    for number, key in sessions:
        turns = conv[key]
        if turns is None:
            continue
        expect(path, turns, list, json_path(where, f".conversation.{key}"), f"'{key}'")
        session_time = conv.get(f"{key}_date_time")
        for t, turn in enumerate(turns):
            raws.append(
                _turn(
                    path, turn, json_path(where, f".conversation.{key}[{t}]"), number, session_time
                )
            )
    speakers = participants or sorted({r.speaker for r in raws if r.speaker})
    for raw in raws:
        if not raw.recipients and raw.speaker:
            raw.recipients = tuple(s for s in speakers if s != raw.speaker)
    conversation = Conversation(
        id=conv_id,
        name=" & ".join(participants) if participants else None,
        metadata={"source": str(path), "format": "locomo", "speakers": participants},
    )
    return finish(path, "locomo", conversation, raws, parse_time=parse_datetime)


def _turn(path: Path, turn: Any, where: str, session: int, session_time: Any) -> RawMessage:
    expect(path, turn, dict, where, "a turn")
    dia_id = turn.get("dia_id")
    if dia_id is None or not str(dia_id).strip():
        raise InputError(
            path, f"at {where}: turn has no 'dia_id'", hint="every LoCoMo turn needs a dia_id"
        )
    speaker = turn.get("speaker")
    if speaker is not None and not isinstance(speaker, str):
        raise InputError(path, f"at {json_path(where, '.speaker')}: must be a string")
    body = turn.get("text")
    if body is None:
        body = turn.get("clean_text")
    if body is None:
        body = ""
    if not isinstance(body, str):
        raise InputError(path, f"at {json_path(where, '.text')}: must be a string")
    text = clean_text(body)
    metadata: dict[str, Any] = {"session": session}
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        # The caption joins the text (so it can be found); it is not repeated in metadata.
        caption = caption.strip()
        text = f"{text} [shares {caption}]" if text else f"[shares {caption}]"
    urls = turn.get("img_url")
    if urls:
        metadata["image_url"] = urls
    # The date becomes the message timestamp; a date that does not parse is kept as
    # metadata "time_text" (see importers.base.finish).
    timestamp = turn.get("date_time") or session_time
    return RawMessage(
        text=text,
        location=where,
        id=str(dia_id).strip(),
        speaker=speaker.strip() if speaker and speaker.strip() else None,
        timestamp=timestamp,
        tags=(f"session_{session}",),
        metadata=metadata,
    )
