"""How a command finds the server that owns an index: ``server.json`` in its directory.

``structrag serve`` writes the file once it listens: its address, process id, an
instance id, and whether it wants a token (with fingerprints of its tokens, never the
tokens). It removes the file when it stops. A file whose process is gone, or whose
address does not answer ``/health`` with the same instance id, is stale and ignored (a
server killed with ``kill -9`` leaves one behind; the next server replaces it).

Standard library only: the CLI reads this on every command that opens an index, and
must stay quick to start.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import urllib.request

FILENAME = "server.json"
#: Seconds the CLI waits for a server's ``/health`` before treating the file as stale.
HEALTH_TIMEOUT = 2.0


@cache
def opener() -> urllib.request.OpenerDirector:
    """What requests to a server go through: straight to it, whatever HTTP_PROXY says.
    (``urllib.request`` is imported here, when a server file is found: it is ~30 ms of
    every command's start otherwise.)"""
    import urllib.request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class ServerInfo:
    """What ``server.json`` says about the server that owns an index."""

    url: str
    pid: int
    instance: str
    version: str
    started: str
    #: ``none`` (open, loopback only) or ``token``.
    auth: str
    #: :func:`fingerprint` of each token the server accepts.
    token_fingerprints: tuple[str, ...] = ()


def fingerprint(token: str) -> str:
    """A short, one-way name for a token (what the server and error messages show)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def connect_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a server bound to ``host``: the wildcard
    addresses are reached through loopback."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def write_info(directory: Path, info: ServerInfo) -> Path:
    """Write ``server.json`` atomically (a reader never sees half of it)."""
    target = Path(directory) / FILENAME
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".server-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(asdict(info), handle, indent=2)
    Path(tmp).chmod(0o644)  # no secret in it; other users of the index may read it
    Path(tmp).replace(target)
    return target


def read_info(directory: Path) -> ServerInfo | None:
    """The server file of an index, or None (none, or unreadable)."""
    try:
        data = json.loads((Path(directory) / FILENAME).read_text(encoding="utf-8"))
        return ServerInfo(
            url=str(data["url"]),
            pid=int(data["pid"]),
            instance=str(data["instance"]),
            version=str(data.get("version", "")),
            started=str(data.get("started", "")),
            auth=str(data.get("auth", "none")),
            token_fingerprints=tuple(data.get("token_fingerprints") or ()),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_info(directory: Path, instance: str) -> None:
    """Remove ``server.json`` if it is this server's (a newer server may have replaced it)."""
    found = read_info(directory)
    if found is not None and found.instance == instance:
        with contextlib.suppress(OSError):
            (Path(directory) / FILENAME).unlink()


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def health(url: str, timeout: float = HEALTH_TIMEOUT) -> dict[str, object] | None:
    """A server's ``/health`` answer, or None when it does not answer."""
    try:
        with opener().open(f"{url}/health", timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_server(directory: str | Path) -> ServerInfo | None:
    """The live server that owns the index at ``directory``, or None (no file, or a stale
    one: its process is gone, or its address answers as another server or not at all)."""
    info = read_info(Path(directory))
    if info is None or not pid_alive(info.pid):
        return None
    answer = health(info.url)
    if answer is None or answer.get("instance") != info.instance:
        return None
    return info
