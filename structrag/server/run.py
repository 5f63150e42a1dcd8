"""Starting and stopping: ``structrag serve`` (uvicorn) and ``structrag mcp`` (stdio).

The HTTP server writes ``server.json`` into the index directory once it listens and
removes it when it stops. It holds the index's writer lock from start to stop (it is the
index's only writer): a ``structrag ingest`` already writing the index is waited for
before the index is opened, and one started meanwhile (``--no-server``) is refused at its
start, not after its work. SIGTERM (or Ctrl-C) stops it gracefully: new connections are
refused and a request that still arrives gets a JSON 503, the running ingest job is
cancelled (its file rolls back), requests in flight are answered (for up to
``--grace`` seconds; a second Ctrl-C stops waiting), the write under way finishes, then
the index is closed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import uvicorn

from structrag import __version__
from structrag.errors import ConfigError, IndexStateError, shown_path
from structrag.server.auth import Tokens
from structrag.server.discovery import (
    ServerInfo,
    connect_url,
    find_server,
    is_loopback,
    remove_info,
    write_info,
)
from structrag.server.service import Service

log = logging.getLogger("structrag.server")
#: Connections the server's socket queues before it accepts them (uvicorn's default).
BACKLOG = 2048
#: Seconds uvicorn waits for requests in flight after SIGTERM before cutting them off
#: (``--grace``): long enough for a batch of 1,000 questions.
GRACEFUL_SECONDS = 60
#: Seconds an idle keep-alive connection stays open (an agent pauses between calls).
KEEP_ALIVE_SECONDS = 30


@dataclass(frozen=True)
class ServeOptions:
    """How ``structrag serve`` runs (the command's options)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    token_file: Path | None = None
    readers: int = 2
    max_body: int = 1 << 20
    max_upload: int = 512 << 20
    #: Request log: ``-`` for stderr, a file path, or None for none.
    access_log: str | None = "-"
    mcp: bool = True
    #: Serve a new, empty index when ``--db`` holds none (else that is an error).
    create: bool = False
    #: Seconds to wait for requests in flight when stopping (``--grace``).
    grace: float = GRACEFUL_SECONDS


class JsonLines(logging.Formatter):
    """Log records as JSON lines (the access log's messages are JSON already)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.name == "structrag.server.access":
            return message
        data = {
            "ts": datetime.now().isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": message,
        }
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        return json.dumps(data)


def configure_logging(access_log: str | None) -> None:
    """Server events and the request log as JSON lines (stderr, or a file)."""
    handler: logging.Handler = (
        logging.StreamHandler(sys.stderr)
        if access_log in (None, "-")
        else logging.FileHandler(str(access_log), encoding="utf-8")
    )
    handler.setFormatter(JsonLines())
    root = logging.getLogger("structrag.server")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    logging.getLogger("structrag.server.access").disabled = access_log is None
    # uvicorn's own warnings and errors (a connection it gave up on) as JSON lines too
    server = logging.getLogger("uvicorn")
    server.handlers[:] = [handler]
    server.setLevel(logging.WARNING)
    server.propagate = False


def check_address(host: str, tokens: Tokens) -> None:
    if not is_loopback(host) and not tokens.required:
        raise ConfigError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "read and change the index",
            hint="pass --token TOKEN (or --token-file FILE, or STRUCTRAG_SERVER_TOKEN), or "
            "bind to 127.0.0.1",
        )


def check_index(directory: Path, *, create: bool) -> None:
    """A ``--db`` that holds no index is an error (as for ``structrag stats``), not a new,
    empty index served in its place, unless ``create`` (``--create``)."""
    from structrag.store.duckdb.store import DB_FILENAME

    if create or (directory / DB_FILENAME).is_file():
        return
    shown = shown_path(directory)
    raise IndexStateError(
        f"no index at {shown}",
        hint=f"create one with `structrag ingest FILE --db {shown}`, or pass --create to "
        "start from a new, empty index",
    )


def check_not_served(directory: Path) -> None:
    found = find_server(directory)
    if found is not None:
        raise IndexStateError(
            f"a server already serves {directory} at {found.url} (process {found.pid})",
            hint="use it (commands on --db go through it), or stop it first",
        )


def wait_for_writer(directory: Path, *, poll: float = 0.2) -> None:
    """Wait while another process writes the index (a ``structrag ingest`` holds its writer
    lock), saying so once: opening the index now would keep the file from that process
    when it comes to commit, and its work would be lost."""
    from structrag.store.workspace import WRITER_LOCK

    path = directory / WRITER_LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no lock file (a new index), or none we may read: nobody writes
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if not told:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
                    print(
                        f"structrag serve: waiting for another process to finish writing "
                        f"{shown_path(directory)}{f' ({holder})' if holder else ''} before "
                        "serving it (Ctrl-C to give up)",
                        file=sys.stderr,
                        flush=True,
                    )
                    told = True
                time.sleep(poll)
    finally:
        os.close(fd)


def hold_writer_lock(service: Service, url: str) -> None:
    """Hold the index's writer lock for the server's life (its writes take it again, in
    this process, at no cost): another process's ingest on the files is refused at its
    start, naming the server, instead of failing at its commit after all its work."""
    what = f"structrag serve at {url}; send writes through it"
    lock = service.writer.writer_lock
    try:
        lock.acquire(what, timeout=0)
    except IndexStateError:  # an ingest began while the server opened the index
        wait_for_writer(service.writer.directory)  # says so, and waits for it
        lock.acquire(what, timeout=math.inf)


def listen_on(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the index is opened (uvicorn's own binding
    would log a bare error and exit after the index had been opened and warmed)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)  # SO_REUSEADDR lets another bind a port not yet listened on
    except OSError as exc:
        sock.close()
        in_use = exc.errno == errno.EADDRINUSE
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="another process listens there: pass another --port (0 picks a free one)"
            if in_use
            else "check --host (an address of this machine) and --port",
        ) from None
    return sock


class _Server(uvicorn.Server):
    """uvicorn, plus: ``server.json`` once listening, and SIGTERM reaching the service."""

    def __init__(self, config: uvicorn.Config, service: Service, tokens: Tokens) -> None:
        super().__init__(config)
        self.service = service
        self.tokens = tokens
        self.url: str | None = None
        #: The signal that stopped the server (SIGINT: Ctrl-C).
        self.stopped_by: int | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit or not getattr(self, "servers", None):
            return
        bound = self.servers[0].sockets[0].getsockname()
        self.url = connect_url(self.config.host, int(bound[1]))
        write_info(
            self.service.directory,
            ServerInfo(
                url=self.url,
                pid=_pid(),
                instance=self.service.instance,
                version=__version__,
                started=datetime.now(UTC).isoformat(timespec="seconds"),
                auth="token" if self.tokens.required else "none",
                token_fingerprints=self.tokens.fingerprints,
            ),
        )
        auth = "tokens required" if self.tokens.required else "open (loopback only)"
        print(
            f"structrag serve: {self.url} for {self.service.directory} ({auth}); "
            f"explorer {self.url}/, API {self.url}/v1, MCP {self.url}/mcp",
            file=sys.stderr,
            flush=True,
        )

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not uvicorn's: it raises the signal again once it has stopped, which would end
        # the process before the index is closed and server.json removed.
        self.service.begin_shutdown()
        self.stopped_by = self.stopped_by or sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for connections
        elif not self.should_exit:
            grace = self.config.timeout_graceful_shutdown
            log.info("stopping: answering the requests in flight (up to %s s)", grace)
        self.should_exit = True


def serve(directory: str | Path, options: ServeOptions) -> int | None:
    """Serve the index at ``directory`` until SIGTERM or Ctrl-C (see the module docstring);
    the signal that stopped it."""
    from structrag.server.app import create_app

    directory = Path(directory)
    tokens = Tokens.of(options.token, options.token_file)
    check_address(options.host, tokens)
    check_index(directory, create=options.create)
    check_not_served(directory)
    configure_logging(options.access_log)
    sock = listen_on(options.host, options.port)
    try:
        wait_for_writer(directory)
        check_not_served(directory)  # another server may have started while this one waited
    except BaseException:
        sock.close()
        raise
    started = time.perf_counter()
    try:
        service = Service(directory, readers=options.readers)
    except BaseException:
        sock.close()
        raise
    try:
        bound = sock.getsockname()
        hold_writer_lock(service, connect_url(options.host, int(bound[1])))
    except BaseException:
        sock.close()
        service.close()
        raise
    for note in service.notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        app = create_app(
            service,
            tokens=tokens,
            host=options.host,
            max_body=options.max_body,
            max_upload=options.max_upload,
            mcp=options.mcp,
        )
        config = uvicorn.Config(
            app,
            host=options.host,
            port=options.port,
            log_level="warning",
            log_config=None,  # its loggers write JSON lines (configure_logging)
            access_log=False,
            timeout_graceful_shutdown=max(1, round(options.grace)),
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
        logging.getLogger("structrag.server").info(
            "index open and warm in %.1f s", time.perf_counter() - started
        )
        server = _Server(config, service, tokens)
        server.run(sockets=[sock])
        return server.stopped_by
    finally:
        sock.close()
        service.close()
        with contextlib.suppress(Exception):
            service.writer.writer_lock.release()
        remove_info(directory, service.instance)


def serve_mcp_stdio(directory: str | Path, *, create: bool = False) -> None:
    """The MCP tools on stdio, on the index at ``directory`` (a local process: every tool
    reaches everything). Logs go to stderr; stdout is the protocol's.

    It has no reader threads (one agent's calls, one at a time), so nothing pins the
    index's file: between calls it gives the file up to any process that waits for it,
    as every command does (``structrag stats``, ``memory add`` work while it idles)."""
    import anyio

    from structrag.server.mcp_tools import build_mcp

    directory = Path(directory)
    check_index(directory, create=create)
    served = find_server(directory)
    if served is not None:
        raise IndexStateError(
            f"a server owns {directory}: point the agent at {served.url}/mcp (streamable "
            "HTTP) instead",
            hint="or stop the server to run the MCP server on stdio",
        )
    configure_logging("-")
    service = Service(directory, readers=0)
    try:
        anyio.run(build_mcp(service).run_stdio_async)
    finally:
        service.close()


def _pid() -> int:
    import os

    return os.getpid()
