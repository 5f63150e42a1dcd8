"""Importers: one input file -> a :class:`ParsedSource`, chosen by ``--format`` or detected.

Formats: ``json`` and ``jsonl`` (generic messages), ``transcript`` (``SPEAKER: text``),
``webvtt``, ``locomo`` and ``typeagent`` (a KnowPro index with its LLM-extracted knowledge).
Detection looks at the extension first and then at the content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structrag.errors import UnknownFormatError
from structrag.importers.base import LoadOptions, ParsedSource, parse_json, read_text
from structrag.importers.locomo import load_locomo, looks_like_locomo
from structrag.importers.messages_json import load_json, load_jsonl
from structrag.importers.transcript import load_transcript
from structrag.importers.typeagent import load_typeagent, looks_like_typeagent
from structrag.importers.webvtt import load_webvtt

FORMATS: tuple[str, ...] = ("json", "jsonl", "transcript", "webvtt", "locomo", "typeagent")
_ALIASES = {"vtt": "webvtt", "txt": "transcript", "ndjson": "jsonl", "knowpro": "typeagent"}

__all__ = ["FORMATS", "LoadOptions", "ParsedSource", "detect_format", "load_source"]


def _canonical(fmt: str, path: Path) -> str:
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS:
        raise UnknownFormatError(
            path,
            f"unknown format {fmt!r}",
            hint=f"choose one of: {', '.join(FORMATS)}",
        )
    return name


def detect_format(path: Path, text: str) -> tuple[str, Any]:
    """Guess a file's format; returns it and the parsed JSON when JSON had to be read."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl", None
    if suffix == ".vtt" or text.lstrip("\ufeff \n").startswith("WEBVTT"):
        return "webvtt", None
    stripped = text.lstrip()
    if suffix == ".json" or stripped.startswith(("{", "[")):
        first_line = stripped.split("\n", 1)[0].strip()
        if suffix != ".json" and first_line.startswith("{") and first_line.endswith("}"):
            rest = stripped.split("\n", 1)[1].strip() if "\n" in stripped else ""
            if rest.startswith("{"):
                return "jsonl", None
        data = parse_json(path, text)
        if looks_like_locomo(data):
            return "locomo", data
        if looks_like_typeagent(data):
            return "typeagent", data
        return "json", data
    if suffix in (".txt", ".md", ".transcript", ""):
        return "transcript", None
    raise UnknownFormatError(
        path,
        f"cannot tell the format of a {suffix!r} file",
        hint=f"pass --format with one of: {', '.join(FORMATS)}",
    )


def load_source(
    path: str | Path, *, format: str | None = None, options: LoadOptions | None = None
) -> ParsedSource:
    """Read and check one input file. Raises :class:`~structrag.errors.InputError`."""
    path = Path(path)
    options = options or LoadOptions()
    text = read_text(path, options.encoding)
    data: Any = None
    fmt = _canonical(format, path) if format else None
    if fmt is None:
        fmt, data = detect_format(path, text)
    if fmt == "jsonl":
        return load_jsonl(path, text, options)
    if fmt == "json":
        return load_json(path, text, options, data)
    if fmt == "locomo":
        return load_locomo(path, text, options, data)
    if fmt == "typeagent":
        return load_typeagent(path, text, options, data)
    if fmt == "webvtt":
        return load_webvtt(path, text, options)
    return load_transcript(path, text, options)
