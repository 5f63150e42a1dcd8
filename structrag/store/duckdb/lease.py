"""One process's hold on the DuckDB file, given up when another process waits for it.

DuckDB lets one process write a database file, or many processes read it, never both at
once. So that a reader in one process and a writer in another can take turns, a process
holds its connection only while it is used: every use goes through :meth:`Lease.using`
(or :meth:`Lease.hold` for a transaction), and when another process is waiting for the
file (it leaves a note in ``<index>/.waiting/``), a watcher thread closes the connection
as soon as it is idle. The next use opens it again, waiting its turn in the same way.

Within a process, uses are serialised by one re-entrant lock: a DuckDB connection takes
one call at a time, and a transaction (held from its first statement to its commit) is
not interleaved with another thread's reads, so no thread reads half of a write.

A process that serves readers on threads of its own (``structrag serve``) pins its lease
(:meth:`Lease.pin`: the file is kept until the process closes it, and other processes
wait for it) and gives each reader thread a :class:`CursorLease`: a cursor of the same
database, which sees committed transactions only and reads while the writer writes.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

from structrag.errors import IndexStateError
from structrag.store.workspace import lock_timeout, process_alive

WAITING_DIRNAME = ".waiting"
#: How often the watcher looks for waiting processes while a connection is open.
WATCH_SECONDS = 0.05
#: An idle connection is given up this long after its last use when someone waits ...
IDLE_SECONDS = 0.1
#: ... and a busy one (used again and again) at its next use, once the waiter has waited
#: this long ...
FAIR_SECONDS = 0.5
#: ... letting the waiters in first for up to this long.
TURN_SECONDS = 2.0


class Waiting:
    """A note in ``.waiting/`` saying this process waits for the file (removed when done)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / WAITING_DIRNAME
        self.path: Path | None = None

    def __enter__(self) -> Waiting:
        return self

    def post(self) -> None:
        if self.path is not None:
            return
        path = self.directory / f"{os.getpid()}-{threading.get_ident()}"
        with contextlib.suppress(OSError):  # a read-only index directory: wait unannounced
            self.directory.mkdir(exist_ok=True)
            path.touch()
            self.path = path

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


def others_waiting(directory: Path) -> float | None:
    """How long the longest-waiting other live process has waited (None: nobody waits)."""
    try:
        entries = list(os.scandir(directory / WAITING_DIRNAME))
    except OSError:
        return None
    own = os.getpid()
    longest: float | None = None
    now = time.time()
    for entry in entries:
        pid_text = entry.name.split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == own:
            continue
        if not process_alive(int(pid_text)):
            with contextlib.suppress(OSError):
                Path(entry.path).unlink()  # a waiter that died
            continue
        try:
            waited = max(0.0, now - entry.stat().st_mtime)
        except OSError:
            continue
        longest = waited if longest is None else max(longest, waited)
    return longest


#: DuckDB's memory limit for the store. Its buffer pool may otherwise grow to 80% of the
#: machine's memory: a merge of a large ingest kept hundreds of MB it never gave back.
MEMORY_LIMIT = "1GB"


def connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file; when another process holds it, say so in ``.waiting/`` and
    wait (up to :func:`lock_timeout`), then give up with a one-line error."""
    deadline = time.monotonic() + lock_timeout()
    delay = 0.005
    with Waiting(path.parent) as waiting:
        while True:
            try:
                con = duckdb.connect(str(path), read_only=read_only)
                # Set, not passed to connect(): a connection opened with a configuration
                # of its own would shut out a user's plain duckdb.connect() of the file
                # in the same process (a notebook beside an Index).
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
                return con
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" not in text.lower():
                    raise IndexStateError(f"cannot open {path}: {text}") from exc
                if time.monotonic() >= deadline:
                    holder = re.search(r"PID (\d+)", text)
                    who = f" (process {holder.group(1)})" if holder else ""
                    server = _server_url(path.parent, holder.group(1) if holder else None)
                    if server is not None:
                        raise IndexStateError(
                            f"the index at {path.parent} is owned by the structrag server "
                            f"at {server}{who}; waited {lock_timeout():g} s",
                            hint=f"send requests to the server ({server}/openapi.json "
                            "describes its API; `structrag` commands with --db go through "
                            "it), or stop it to open the index files here",
                        ) from exc
                    raise IndexStateError(
                        f"the index at {path.parent} is in use by another process{who}; "
                        f"waited {lock_timeout():g} s",
                        hint="another command holds it (a long write, or a process that "
                        "keeps it busy): wait for it, raise STRUCTRAG_LOCK_TIMEOUT, or run "
                        "`structrag serve` and let every command go through it",
                    ) from exc
                waiting.post()
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except duckdb.Error as exc:
                raise IndexStateError(
                    f"{path} is not a structrag index or is damaged: {exc}",
                    hint="point --db at an index directory, or re-create the index",
                ) from exc


class Lease:
    """A connection to one DuckDB file, opened on use and given up when another process
    waits for the file and this one is not using it."""

    def __init__(
        self,
        path: Path,
        *,
        read_only: bool,
        on_open: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._on_open = on_open
        self._lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._holds = 0
        self._last_use = 0.0
        self._opened = 0  # how many times the file was opened (a new view of it each time)
        self._closed = False
        self._watcher: threading.Thread | None = None
        #: Set by the watcher when another process has waited long while this one kept
        #: the connection busy: the next use (not in the middle of one) gives way.
        self._turn_asked = False
        self._pinned = False

    def pin(self) -> None:
        """Keep the file from now on (open it now): no longer given up when another
        process waits, until :meth:`close`."""
        with self._lock:
            self._pinned = True
            self._connection()

    @property
    def opened(self) -> int:
        """How many times the connection was (re)opened: another process may have written
        the file in between."""
        return self._opened

    @contextlib.contextmanager
    def using(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection, for one use (its statements and their results)."""
        with self._lock:
            self._holds += 1
            try:
                yield self._connection()
            finally:
                self._holds -= 1
                self._last_use = time.monotonic()

    def hold(self) -> duckdb.DuckDBPyConnection:
        """Keep the connection (and this thread's exclusive use of it) until
        :meth:`let_go`: a transaction's span."""
        self._lock.acquire()
        self._holds += 1
        try:
            return self._connection()
        except BaseException:
            self._holds -= 1
            self._lock.release()
            raise

    def let_go(self) -> None:
        self._holds -= 1
        self._last_use = time.monotonic()
        self._lock.release()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._closed:
            raise IndexStateError("the index was closed")
        if self._turn_asked and self._holds == 1 and self._con is not None and not self._pinned:
            self._give_turn()
        if self._con is None:
            con = connect(self.path, read_only=self.read_only)
            try:
                if self._on_open is not None:
                    self._on_open(con)
            except BaseException:
                con.close()
                raise
            self._con = con
            self._opened += 1
            self._watch()
        return self._con

    def _watch(self) -> None:
        if self._watcher is not None and self._watcher.is_alive():
            return
        self._watcher = threading.Thread(
            target=_watch,
            args=(weakref.ref(self), self.path.parent),
            name=f"structrag-lease-{self.path.parent.name}",
            daemon=True,
        )
        self._watcher.start()

    def _give_turn(self) -> None:
        """Close the connection and let the processes that wait go first (until their
        notes are gone, or a while), then open it again (waiting if one of them has it)."""
        self._turn_asked = False
        self._release()
        deadline = time.monotonic() + TURN_SECONDS
        while others_waiting(self.path.parent) is not None and time.monotonic() < deadline:
            time.sleep(0.01)

    def _give_way(self, waited: float) -> bool:
        """Close the connection if another process waits and this one is idle; whether
        the watching is over."""
        if self._con is None or self._pinned:
            return True
        idle = time.monotonic() - self._last_use
        if waited >= FAIR_SECONDS:
            self._turn_asked = True
        if idle < IDLE_SECONDS:
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._holds == 0 and self._con is not None:
                self._release()
                return True
            return False
        finally:
            self._lock.release()

    def _release(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            with contextlib.suppress(duckdb.Error):
                con.close()

    def release(self) -> None:
        """Give the file up now (when not in use); the next use opens it again."""
        with self._lock:
            if self._holds == 0:
                self._release()

    def close(self) -> None:
        with self._lock:
            self._release()
            self._closed = True


class CursorLease(Lease):
    """A reader thread's connection to a pinned lease's database (a cursor of it: its
    own transactions, which see what the lease's connection committed). Never given up:
    it lives as long as the pinned lease."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(lease.path, read_only=True)
        lease.pin()
        with lease.using() as con:
            self._con = con.cursor()
        self._opened = 1
        self._pinned = True

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._closed or self._con is None:
            raise IndexStateError("the index was closed")
        return self._con

    def release(self) -> None:
        """Kept: a cursor is not the file, and reopening it is the pinned lease's job."""


def _watch(ref: weakref.ReferenceType[Lease], directory: Path) -> None:
    """The watcher thread: gives the connection up when another process waits. It holds
    the lease weakly, so a lease nobody closed is still collected (with its connection)."""
    while True:
        time.sleep(WATCH_SECONDS)
        lease = ref()
        if lease is None or lease._con is None:
            return
        waited = others_waiting(directory)
        if waited is not None and lease._give_way(waited):
            return
        del lease


def _server_url(directory: Path, pid: str | None) -> str | None:
    """The URL of the structrag server that owns the index (its ``server.json``, written
    by ``structrag serve``), when the process holding the file is that server."""
    import json

    try:
        data = json.loads((directory / "server.json").read_text(encoding="utf-8"))
        url, owner = str(data["url"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (pid is not None and int(pid) != owner) or not process_alive(owner):
        return None
    return url
