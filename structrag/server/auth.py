"""Tokens, and what each may reach.

A server bound to loopback may run open (no token); on any other address it needs
tokens. With tokens, every request to ``/v1`` and ``/mcp`` carries ``Authorization:
Bearer TOKEN``. A token grants the whole index (``"*"``), or only the memories of some
agents: such a token reaches ``/v1/agents/{agent}/...`` of its agents, the MCP tools on
their memories, and nothing else (403, and no data). A token file maps tokens to grants::

    {"tokens": {"k7Yq...admin": "*", "Zp3x...bot": ["support-bot", "sales-bot"]}}

Tokens are compared in constant time; the server prints and stores only their
fingerprints (:func:`~structrag.server.discovery.fingerprint`).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path

from structrag.errors import ConfigError, StructragError
from structrag.server.discovery import fingerprint

#: Tokens shorter than this are refused: they can be guessed.
MIN_TOKEN_CHARS = 16
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"


class AccessDenied(StructragError, PermissionError):
    """A request outside its token's scope (HTTP 403)."""


class NotAuthenticated(StructragError, PermissionError):
    """A request without a valid token to a server that wants one (HTTP 401)."""


@dataclass(frozen=True)
class Grant:
    """What a request may reach: the whole index (``agents`` None) or some agents'
    memories. ``name`` says who it is in logs: a token's fingerprint, or ``open``."""

    agents: frozenset[str] | None
    name: str

    @property
    def whole_index(self) -> bool:
        return self.agents is None

    def require_index(self) -> None:
        """Refuse unless the grant covers the whole index."""
        if self.agents is not None:
            raise AccessDenied(
                "this token reaches the memories of "
                f"{', '.join(sorted(self.agents)) or 'no agent'} only, not the whole index",
                hint="use /v1/agents/{agent}/... of those agents, or a token granted '*'",
            )

    def require_agent(self, agent: str) -> None:
        """Refuse unless the grant covers ``agent``'s memories."""
        if self.agents is not None and agent not in self.agents:
            raise AccessDenied(
                f"this token does not reach agent {agent!r}",
                hint="a token file grants each token '*' or a list of agents",
            )


#: Everything: a server without tokens (loopback only), or the stdio MCP server.
OPEN = Grant(None, "open")


class Tokens:
    """The tokens a server accepts, and the grant of each."""

    def __init__(self, grants: dict[str, Grant] | None = None) -> None:
        self._grants = dict(grants or {})

    @property
    def required(self) -> bool:
        return bool(self._grants)

    @property
    def fingerprints(self) -> tuple[str, ...]:
        return tuple(sorted(g.name for g in self._grants.values()))

    @classmethod
    def of(cls, token: str | None = None, token_file: str | Path | None = None) -> Tokens:
        """One token for the whole index, and/or a token file."""
        grants: dict[str, Grant] = {}
        if token_file is not None:
            grants.update(_read_token_file(Path(token_file)))
        if token:
            _check_token(token, "--token")
            grants[token] = Grant(None, fingerprint(token))
        return cls(grants)

    def resolve(self, authorization: str | None) -> Grant:
        """The grant of a request's ``Authorization`` header."""
        if not self._grants:
            return OPEN
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise NotAuthenticated(
                "this server wants a token",
                hint="send 'Authorization: Bearer TOKEN' (the CLI reads STRUCTRAG_TOKEN)",
            )
        found: Grant | None = None
        for token, grant in self._grants.items():
            # Compare with every token, in constant time, so timing says nothing.
            if hmac.compare_digest(token.encode("utf-8"), given.strip().encode("utf-8")):
                found = grant
        if found is None:
            raise NotAuthenticated(
                "the token is not one this server accepts",
                hint=f"fingerprint of the token sent: {fingerprint(given.strip())}",
            )
        return found


def _check_token(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_CHARS or token != token.strip():
        raise ConfigError(
            f"a token from {where} is shorter than {MIN_TOKEN_CHARS} characters or has "
            "spaces around it",
            hint=f"make one with {MAKE_TOKEN}",
        )


def _read_token_file(path: Path) -> dict[str, Grant]:
    example = '{"tokens": {"TOKEN": "*", "OTHER-TOKEN": ["support-bot"]}}'
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigError(f"the token file {path} is not JSON: {exc}", hint=example) from exc
    table = data.get("tokens", data) if isinstance(data, dict) else None
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"the token file {path} maps no tokens", hint=example)
    grants: dict[str, Grant] = {}
    for token, scope in table.items():
        _check_token(token, str(path))
        if scope == "*":
            grants[token] = Grant(None, fingerprint(token))
        elif (
            isinstance(scope, list)
            and scope
            and all(isinstance(a, str) and a.strip() for a in scope)
        ):
            grants[token] = Grant(frozenset(a.strip() for a in scope), fingerprint(token))
        else:
            raise ConfigError(
                f"the token file {path} grants token {fingerprint(token)} {scope!r}",
                hint="grant each token '*' (the whole index) or a list of agent names",
            )
    return grants
