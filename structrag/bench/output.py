"""The benchmarks' files: data read as UTF-8 with clean errors, results written whole or
not at all.

A benchmark writes its files (``recall.jsonl``, ``recall.json``, ``recall.md`` ...) under
temporary names in the output directory and renames them into place together once the
run has finished: a run that fails or is interrupted leaves the previous results as they
were, never a truncated JSONL beside the tables of another run.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from structrag.errors import ConfigError, InputError, shown_path
from structrag.importers.base import read_text

#: What a data file that is not UTF-8 should become (the benchmarks have no option for
#: another encoding: ``--encoding`` is the token encoding there).
UTF8_HINT = (
    "re-save the file as UTF-8 (for example `iconv -f latin1 -t utf-8 FILE > NEW`): the "
    "benchmarks read their files as UTF-8"
)


def utf8_error(exc: InputError, path: Path) -> InputError:
    """The importers' error for bytes that do not decode, with the benchmarks' hint in
    place of theirs (which names an --encoding option the benchmarks do not have); other
    errors as they are."""
    if exc.hint and "--encoding" in exc.hint:
        return InputError(path, exc.detail, line=exc.line, column=exc.column, hint=UTF8_HINT)
    return exc


def read_utf8(path: Path) -> str:
    """A data file's text; bytes that are not UTF-8 are an error naming their line and
    column (the importers' decoding, with the benchmarks' hint)."""
    try:
        return read_text(path)
    except InputError as exc:
        raise utf8_error(exc, path) from None


def prepare_out(directory: Path, option: str = "--out") -> Path:
    """Create a benchmark's output directory (and its parents) and check that files can be
    written there: a path that cannot be one (under a file, in ``/proc``), or one not
    writable, is a one-line error naming ``option``, before any work is done."""
    directory = Path(directory)
    where = shown_path(directory)
    hint = f"point {option} at a new or existing directory you can write to"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(
            f"cannot create the output directory {where}: a file is in the way", hint=hint
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot create the output directory {where}: {exc.strerror or exc}", hint=hint
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write to the output directory {where}", hint=hint)
    return directory


class Outputs:
    """Files staged in ``directory`` (``.NAME.PID.tmp``), moved to ``NAME`` by
    :meth:`commit`; removed when the ``with`` block ends without a commit."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._staged: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        """Where to write ``name`` for now (the same path each time it is asked)."""
        if name not in self._staged:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._staged[name] = self.directory / f".{name}.{os.getpid()}.tmp"
        return self._staged[name]

    def write_text(self, name: str, text: str) -> Path:
        path = self.path(name)
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self) -> list[Path]:
        """Move every staged file to its name; returns the final paths."""
        done = []
        for name, staged in self._staged.items():
            final = self.directory / name
            staged.replace(final)
            done.append(final)
        self._staged.clear()
        return done

    def discard(self) -> None:
        for staged in self._staged.values():
            staged.unlink(missing_ok=True)
        self._staged.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.discard()


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file beside it and a rename."""
    with Outputs(path.parent) as files:
        files.write_text(path.name, text)
        files.commit()
