"""Commands on an index that a running ``structrag serve`` owns go through it.

``structrag serve`` writes ``server.json`` into the index directory (see
:mod:`structrag.server.discovery`); ``ask``, ``query``, ``stats``, ``show``,
``conversations``, ``entities``, ``topics``, ``ingest`` and the ``memory`` commands find it
and send their request over HTTP instead of opening the files (which the server holds),
and print the same output. ``--no-server`` (or ``STRUCTRAG_NO_SERVER=1``) opens the files
without looking for a server (refused at once while a live one owns the index: it holds
the files until it stops); ``--verbose`` says which way a command went. A server that
wants a token gets ``STRUCTRAG_TOKEN``.

Standard library only (``urllib``): this runs on every command and must start quickly.
"""

from __future__ import annotations

import functools
import json
import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from structrag.errors import StructragError
from structrag.server.discovery import ServerInfo, find_server, fingerprint, opener

if TYPE_CHECKING:
    import urllib.error

F = TypeVar("F", bound=Callable[..., Any])
#: Seconds a request to the server may take (an ask takes milliseconds; a batch longer).
TIMEOUT = 600.0


class ServerError(StructragError):
    """An error the server answered with (its message, hint and position), or a server
    that did not answer."""

    def __init__(
        self, message: str, *, hint: str | None = None, code: str = "", position: Any = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.position = position


class Remote:
    """The server that owns an index, and how to ask it."""

    def __init__(self, info: ServerInfo, token: str | None) -> None:
        self.info = info
        self.token = token

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.call("POST", path, body=body)

    def patch(self, path: str, body: dict[str, Any], **params: Any) -> Any:
        return self.call("PATCH", path, body=body, params=params)

    def delete(self, path: str, **params: Any) -> Any:
        return self.call("DELETE", path, params=params)

    def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """One request; the answer's JSON, or :class:`ServerError` with the server's error."""
        import urllib.error
        import urllib.request

        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        url = self.info.url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with opener().open(request, timeout=TIMEOUT) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise _server_error(exc) from None
        except (OSError, ValueError) as exc:
            raise ServerError(
                f"the server at {self.info.url} (process {self.info.pid}) did not answer: {exc}",
                hint="run the command again once the server has stopped: it then opens the "
                "index files",
            ) from None


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _server_error(exc: urllib.error.HTTPError) -> ServerError:
    try:
        error = json.loads(exc.read().decode("utf-8"))["error"]
        return ServerError(
            str(error["message"]),
            hint=error.get("hint"),
            code=str(error.get("code", "")),
            position=error.get("position"),
        )
    except (ValueError, KeyError, TypeError, OSError):
        return ServerError(f"the server answered HTTP {exc.code} {exc.reason}")


@dataclass(frozen=True)
class Via:
    """How a command reaches an index: through its server (when one owns it) or not."""

    #: ``--no-server``, or ``STRUCTRAG_NO_SERVER=1``: open the files, not through a server
    #: (refused at once when a live one owns the index: see ``open_for``).
    no_server: bool = False
    verbose: bool = False

    def __post_init__(self) -> None:
        if not self.no_server and no_server_env():
            object.__setattr__(self, "no_server", True)  # the variable is the flag

    def server(self, db: str) -> Remote | None:
        """The server that owns ``db``, or None (none runs, or ``--no-server``)."""
        if self.no_server:
            self.say(f"opening {db} directly (--no-server)")
            return None
        info = find_server(db) if Path(db).is_dir() else None
        if info is None:
            self.say(f"no server owns {db}: opening the index files")
            return None
        token = os.environ.get("STRUCTRAG_TOKEN") or None
        if info.auth == "token" and token is None:
            raise ServerError(
                f"the server at {info.url} that owns {db} wants a token",
                hint="set STRUCTRAG_TOKEN to a token it accepts",
            )
        shown = f", token {fingerprint(token)}" if token else ""
        self.say(f"using the server at {info.url} (process {info.pid}{shown}) that owns {db}")
        return Remote(info, token)

    def say(self, text: str) -> None:
        if self.verbose:
            click.echo(f"note: {text}", err=True)


def no_server_env() -> bool:
    """Whether ``STRUCTRAG_NO_SERVER`` is set (to anything but empty or ``0``)."""
    return os.environ.get("STRUCTRAG_NO_SERVER", "").strip() not in ("", "0")


def via_options(func: F) -> F:
    """``--no-server`` and ``--verbose``, gathered into one ``via`` argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["via"] = Via(kwargs.pop("no_server"), kwargs.pop("verbose"))
        return func(*args, **kwargs)

    wrapper = click.option(
        "--verbose",
        "-v",
        is_flag=True,
        help="Say whether the command went through a server or opened the files.",
    )(wrapper)
    wrapper = click.option(
        "--no-server",
        is_flag=True,
        help="Open the index files instead of looking for a server. A running server holds "
        "them: while one owns the index this is refused at once. Env: STRUCTRAG_NO_SERVER=1.",
    )(wrapper)
    return wrapper  # type: ignore[return-value]


def agent_path(agent: str, tail: str = "") -> str:
    return f"/v1/agents/{urllib.parse.quote(agent, safe='')}{tail}"


def quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
