"""The exception hierarchy: one root, small subclasses that say what went wrong and what to do.

Every error a user can cause derives from :class:`StructragError`; the CLI turns these into
a one-paragraph message and a non-zero exit code, never a traceback. Subclasses mix in a
builtin exception where the meaning matches, so ``except ValueError`` still works.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def shown_path(path: str | Path) -> str:
    """A path as an error message shows it: bytes that are not UTF-8 (a file name from an
    old archive, say) appear as ``\xff`` instead of breaking the message."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class StructragError(Exception):
    """Root of every error structrag raises on purpose."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class InputError(StructragError, ValueError):
    """An input file that cannot be read or parsed; names the file and the position."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = shown_path(path)
        self.line = line
        self.column = column
        where = self.path
        if line is not None:
            where += f", line {line}"
            if column is not None:
                where += f", column {column}"
        super().__init__(f"{where}: {message}", hint=hint)
        self.detail = message


class InputErrors(InputError):
    """Several inputs that cannot be ingested, found by one check of them all (each one's
    error in ``errors``, in input order); ``path`` and ``line`` are the first one's."""

    def __init__(
        self, errors: Sequence[InputError], *, more: bool = False, hint: str | None = None
    ):
        self.errors = list(errors)
        first = self.errors[0]
        self.path, self.line, self.column = first.path, first.line, first.column
        count = f"more than {len(self.errors)}" if more else str(len(self.errors))
        self.detail = f"{count} inputs cannot be ingested; nothing was written"
        listing = "".join(
            f"\n  {e.message}" + (f"\n    ({e.hint})" if e.hint else "") for e in self.errors
        )
        if more:
            listing += "\n  (the check stopped there)"
        StructragError.__init__(self, f"{self.detail}:{listing}", hint=hint)


class UnknownFormatError(InputError):
    """The input format could not be detected, or the named format does not exist."""


class IndexStateError(StructragError, RuntimeError):
    """The index directory is missing, locked by another process, or from another version."""


class CheckpointFailed(IndexStateError):
    """The write committed (to the store's log), then DuckDB could not write its
    checkpoint (a full disk) and closed the store: what committed is kept (opening the
    index replays the log), but nothing more can be written in this process."""


class NotFoundError(StructragError, LookupError):
    """A conversation, message or semantic ref that the caller named does not exist."""


class QuerySyntaxError(StructragError, ValueError):
    """A query expression that does not parse; carries the position and a caret snippet.

    ``line`` and ``column`` count from 1 (``column`` in characters). ``snippet`` is the
    error's line and a caret under the error: at most :data:`SNIPPET_SIDE` columns each
    side of it (``…`` marks what is cut), tabs expanded, wide characters (CJK, emoji)
    counted as two columns so that the caret stands under the character in a terminal.
    The message names the line too when the query has several."""

    def __init__(self, query: str, position: int, message: str, *, hint: str | None = None):
        self.query = query
        self.position = max(0, min(position, len(query)))
        line_start = query.rfind("\n", 0, self.position) + 1
        line_end = query.find("\n", self.position)
        if line_end == -1:
            line_end = len(query)
        self.line = query.count("\n", 0, self.position) + 1
        self.column = self.position - line_start + 1
        shown, caret = _caret_window(query[line_start:line_end], self.position - line_start)
        self.snippet = f"{shown}\n{caret}"
        where = f"column {self.column}"
        if "\n" in query:
            where = f"line {self.line}, {where}"
        super().__init__(
            f"query syntax error at position {self.position} ({where}): "
            f"{message}\n  {shown}\n  {caret}",
            hint=hint,
        )
        self.detail = message


#: How many columns of a query a syntax error shows on each side of the caret.
SNIPPET_SIDE = 40
_TAB = 8


def _cells(line: str) -> list[tuple[str, int]]:
    """Each character of a line as a terminal shows it, with its width in columns: tabs
    expanded, wide characters two columns, combining marks none, control characters as
    U+FFFD."""
    cells: list[tuple[str, int]] = []
    column = 0
    for char in line:
        if char == "\t":
            width = _TAB - column % _TAB
            shown = " " * width
        elif unicodedata.category(char) in ("Mn", "Me", "Cf"):
            shown, width = char, 0
        elif unicodedata.category(char) == "Cc" or char in "\u2028\u2029":
            shown, width = "\ufffd", 1
        else:
            shown, width = char, 2 if unicodedata.east_asian_width(char) in "WF" else 1
        cells.append((shown, width))
        column += width
    return cells


def _caret_window(line: str, index: int) -> tuple[str, str]:
    """The part of ``line`` around character ``index`` and a caret line under it."""
    cells = _cells(line)
    starts = [0]
    for _, width in cells:
        starts.append(starts[-1] + width)
    at = starts[min(index, len(cells))]
    first = 0
    while at - starts[first] > SNIPPET_SIDE:
        first += 1
    last = len(cells)
    while starts[last] - at > SNIPPET_SIDE + 1 and last > index + 1:
        last -= 1
    while first < len(cells) and cells[first][1] == 0 and first < index:
        first += 1  # do not start on a combining mark
    left = "…" if first > 0 else ""
    right = "…" if last < len(cells) else ""
    shown = left + "".join(text for text, _ in cells[first:last]) + right
    return shown, " " * (at - starts[first] + len(left)) + "^"


class QueryError(StructragError, ValueError):
    """A query that parses but cannot run (unknown property, bad date, empty scope)."""


class QueryPlanError(QuerySyntaxError, QueryError):
    """A query that parses but cannot run (a pattern that matches everything, a boosted
    scope with nothing to prefer), with the position and caret of the part at fault. A
    :class:`QueryError` too, as the compiler's error for the same query built as an AST,
    without text, is. The parser raises it for patterns; the compiler, for a boosted
    scope (which keeps where it was written)."""


class ConfigError(StructragError, ValueError):
    """A setting that is missing or invalid (LLM endpoint, embedding model, budget)."""


class ExtractionError(StructragError, RuntimeError):
    """Knowledge extraction failed for a message (the LLM path records these per message)."""


class MemoryInputError(StructragError, ValueError):
    """A memory call with arguments that cannot work (empty text, an unknown memory table,
    a budget below one token ...)."""


class LLMError(StructragError, RuntimeError):
    """An LLM endpoint failed after retries, or returned output that did not validate."""


def check_count(name: str, value: int | None, error: type[StructragError] = ConfigError) -> None:
    """Raise ``error`` unless ``value`` (a count of results asked for; None: no limit, where
    the caller allows it) is at least 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise error(f"{name} must be at least 1 (a whole number), not {value!r}")


class Committed:
    """What a write had committed when Ctrl-C stopped it (see :class:`WriteInterrupted`).

    ``done``: each change that committed, one line each ("added memory m-1 to bot/default
    (messages)"); ``unfinished``: what did not finish and what becomes of it ("the room's
    compaction did not finish ..."), or None; ``data``: the same as JSON, shaped as the
    command's ``--json`` output would have been."""

    def __init__(
        self, done: Sequence[str], data: dict[str, Any], unfinished: Sequence[str] = ()
    ) -> None:
        self.done = list(done)
        self.data = dict(data)
        self.unfinished = list(unfinished)

    def __str__(self) -> str:
        said = "; ".join([*self.done[:1], *(f"then {d}" for d in self.done[1:])])
        return "; ".join([f"{said} before the interruption", *self.unfinished])

    def as_dict(self) -> dict[str, Any]:
        """``data``, marked as interrupted, with the lines above."""
        return {
            **self.data,
            "interrupted": True,
            "committed": self.done,
            "unfinished": self.unfinished,
        }


class WriteInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a DuckDB query it stopped) after a write had committed: what did commit
    is in ``committed`` (a :class:`Committed`); the interrupt itself is ``__cause__``.
    A :class:`KeyboardInterrupt`, so ``except KeyboardInterrupt`` still catches it. An
    interrupt before the commit is raised as it came: a write commits whole or not at
    all, so nothing of it was written."""

    def __init__(self, committed: Committed) -> None:
        super().__init__(str(committed))
        self.committed = committed


def first_line(exc: BaseException) -> str:
    """An exception's message in one line (its first), or its type's name when it has
    none: what an error names of the error it wraps."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
