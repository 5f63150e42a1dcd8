"""Files beside the store that let processes share an index: the writer lock and the
staging folders of ingests in progress.

* **One writer at a time.** Every write (an ingest, a memory, a rebuild of the text index)
  holds ``<index>/.writer.lock`` (an ``flock``), so two processes never number new
  messages alike. Readers take it only to repair a text index left behind by a dead
  writer, and, when it is free (never waiting), to remove a killed rebuild's copy. A
  process waits for it up to ``STRUCTRAG_LOCK_TIMEOUT`` seconds, then says who holds
  it. Within a process the lock is shared by its threads (a server's background ingest
  and its memory writes); they serialise their commits among themselves.
* **Staging.** An ingest writes what it extracts into ``<index>/.staging/<pid>-<id>/``
  and merges it into the store at the end (see
  :mod:`structrag.store.duckdb.staging`); the folder of a process that died is removed
  by the next writer.
* **Ray shards.** An ingest with ``--engine ray`` keeps what its actors extracted in
  ``<index>/ray-shards/`` until it is done, so that one interrupted is resumed without
  extracting again (see :mod:`structrag.extract.ray_engine`). A successful ingest, by
  either engine, removes the shards of the messages the index then holds as they were
  extracted (:func:`structrag.extract.ray_engine.sweep_ingested_shards`); those of a
  file still to ingest stay.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from structrag.errors import ConfigError, IndexStateError

WRITER_LOCK = ".writer.lock"
STAGING_DIRNAME = ".staging"
RAY_SHARDS_DIRNAME = "ray-shards"


def holds_shards(directory: Path) -> bool:
    """Whether an interrupted Ray ingest left extracted knowledge in the index at
    ``directory`` (work the next ingest of the same files resumes from)."""
    return any((directory / RAY_SHARDS_DIRNAME).glob("*.parquet"))


def lock_timeout() -> float:
    """Seconds to wait for another process's hold on an index before giving up
    (``STRUCTRAG_LOCK_TIMEOUT``, default 10; unset or empty: the default). A value that
    is not a number of seconds, 0 or more, is a :class:`~structrag.errors.ConfigError`
    naming the variable (it was once read as 10 without a word)."""
    raw = os.environ.get("STRUCTRAG_LOCK_TIMEOUT", "").strip()
    if not raw:
        return 10.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise ConfigError(
            f"STRUCTRAG_LOCK_TIMEOUT={raw!r} is not a number of seconds, 0 or more",
            hint="set it to seconds to wait for another process's hold on an index, such "
            "as 10 or 0.5 (0: do not wait), or unset it for the default, 10",
        )
    return value


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (this one included)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLock:
    """The index's writer lock, held by this process while any of its threads writes."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / WRITER_LOCK
        self._guard = threading.Lock()
        self._count = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def held(self, what: str) -> Iterator[None]:
        """Hold the lock for ``what`` (said in the file, for the error another process
        gives when it waits too long)."""
        self.acquire(what)
        try:
            yield
        finally:
            self.release()

    def acquire(self, what: str, *, timeout: float | None = None) -> None:
        """Take the lock (again, in this process, at no cost), waiting for another
        process's up to ``timeout`` seconds (None: ``STRUCTRAG_LOCK_TIMEOUT``)."""
        with self._guard:
            if self._count:
                self._count += 1
                return
            self._fd = self._take(what, lock_timeout() if timeout is None else timeout)
            self._count = 1

    def try_acquire(self, what: str) -> bool:
        """Take the lock if nobody else holds it, without waiting; False when another
        process (or another :class:`WriterLock` of this one) holds it, or the lock file
        cannot be opened for writing (a read-only index directory). True: :meth:`release`
        it."""
        try:
            self.acquire(what, timeout=0)
        except IndexStateError:
            return False
        return True

    def busy(self) -> str | None:
        """Who holds the lock now, when someone other than this object does (a live
        process: ``flock`` goes with its holder), as written in the file (``process 12:
        ingest``, or ``a writer``); None when nobody does. Looks without taking it and
        without write access."""
        with self._guard:
            if self._count:
                return None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None  # no lock file: nobody ever took it (or it cannot be read)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read(fd) or "a writer"
            except OSError:
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self) -> None:
        with self._guard:
            self._count -= 1
            if self._count == 0 and self._fd is not None:
                fd, self._fd = self._fd, None
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _take(self, what: str, timeout: float) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise IndexStateError(
                f"cannot write the index at {self.path.parent}: {exc.strerror}",
                hint="check that you may write to the index directory; reading commands "
                "need no write access",
            ) from exc
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read(fd)
                    os.close(fd)
                    raise IndexStateError(
                        f"another process is writing the index at {self.path.parent}"
                        f"{f' ({holder})' if holder else ''}; waited {timeout:g} s",
                        hint="one process writes an index at a time: wait for it to finish, "
                        "raise STRUCTRAG_LOCK_TIMEOUT, or send the writes to a running "
                        "`structrag serve`",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"process {os.getpid()}: {what}".encode(), 0)
        return fd


def _read(fd: int) -> str:
    with contextlib.suppress(OSError):
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    return ""


def new_staging_folder(directory: Path) -> Path:
    """A fresh folder for one staged write, named after this process."""
    folder = directory / STAGING_DIRNAME / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    return folder


def remove_staging_folder(folder: Path) -> None:
    """Remove a staged write's folder (and the staging root, once empty)."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.parent.rmdir()


def sweep_staging(directory: Path) -> list[str]:
    """Remove the staging folders of processes that are gone (killed mid-ingest)."""
    root = directory / STAGING_DIRNAME
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and process_alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    with contextlib.suppress(OSError):
        root.rmdir()  # only when empty
    return removed
