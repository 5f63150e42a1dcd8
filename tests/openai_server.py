"""A real HTTP server on 127.0.0.1 that speaks OpenAI's chat-completions protocol.

It answers ``POST /v1/chat/completions`` with scripted replies chosen by the text of the
request's first user message, so one conversation can hold a message that times out, one
that gets a 429 and one that is answered with malformed JSON. Tool-calling requests get a
tool call; other requests get the JSON as message content. Every request is recorded, so a
test can say "the second run made no call" by counting.

By default a message is answered with a grounded extraction built from its text: every
capitalised word (except "I") as an entity, and the first word longer than five letters
as a topic.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted reply.

    ``knowledge`` is sent as the tool call's arguments (or the content in JSON modes);
    ``raw`` replaces that text verbatim (malformed JSON); ``tool_call=False`` sends it as
    plain content even when the request offered tools (a model that ignores them);
    ``status`` other than 200 sends ``error`` with ``headers``; ``delay`` sleeps before
    answering (timeouts); ``drop`` closes the connection without answering.
    """

    knowledge: dict[str, Any] | None = None
    raw: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "scripted error"
    delay: float = 0.0
    usage: bool = True
    tool_call: bool = True
    drop: bool = False


@dataclass
class Recorded:
    at: float
    body: dict[str, Any]
    user_text: str
    status: int


def user_text(body: dict[str, Any]) -> str:
    """The first user message's text (re-asks append messages after it)."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def message_text(prompt: str) -> str:
    """The message text inside structrag's user prompt (after the ``Message:`` line)."""
    _, _, text = prompt.partition("Message:\n")
    return text


def grounded_knowledge(prompt: str) -> dict[str, Any]:
    """A plausible extraction of a message: capitalised words as entities, a topic."""
    text = message_text(prompt)
    names = []
    for word in re.findall(r"\b[A-Z][a-z]+\b", text):
        if word != "I" and word not in names:
            names.append(word)
    topics = [w.lower() for w in re.findall(r"\b[a-zA-Z]{6,}\b", text)][:1]
    return {
        "entities": [{"name": n, "types": ["thing"]} for n in names],
        "actions": [],
        "topics": topics,
    }


class FakeOpenAIServer:
    """The server; use :func:`serve` to run one for a test."""

    def __init__(self, default: Callable[[str], Reply] | None = None) -> None:
        self.default = default or (lambda prompt: Reply(knowledge=grounded_knowledge(prompt)))
        self.rules: list[tuple[str, list[Reply]]] = []
        self.requests: list[Recorded] = []
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0  # the most requests handled at once
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def on(self, contains: str, *replies: Reply) -> None:
        """Answer requests whose message contains ``contains`` with ``replies`` in turn;
        the last reply repeats."""
        self.rules.append((contains, list(replies)))

    def calls_for(self, contains: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if contains in r.user_text]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _choose(self, prompt: str) -> Reply:
        for contains, replies in self.rules:
            if contains in prompt:
                with self._lock:
                    n = self._seen.get(contains, 0)
                    self._seen[contains] = n + 1
                return replies[min(n, len(replies) - 1)]
        return self.default(prompt)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                prompt = user_text(body)
                reply = server._choose(prompt)
                with server._lock:
                    server.requests.append(Recorded(time.monotonic(), body, prompt, reply.status))
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                try:
                    self._reply(body, reply)
                finally:
                    with server._lock:
                        server.active -= 1

            def _reply(self, body: dict[str, Any], reply: Reply) -> None:
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if reply.status != 200:
                    error = {"message": reply.error, "type": "server_error", "code": reply.status}
                    self._send(reply.status, {"error": error}, reply.headers)
                    return
                self._send(200, completion(body, reply), reply.headers)

        return Handler


def completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A chat completion answering ``body`` with ``reply``: a tool call when the request
    offered tools, else message content."""
    text = reply.raw if reply.raw is not None else json.dumps(reply.knowledge or {})
    message: dict[str, Any] = {"role": "assistant", "content": None}
    tools = body.get("tools") or []
    if tools and reply.tool_call:
        name = tools[0]["function"]["name"]
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}
        ]
        finish = "tool_calls"
    else:
        message["content"] = text
        finish = "stop"
    out: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if reply.usage:
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
        out["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(text) // 4 + 1,
            "total_tokens": prompt_tokens + len(text) // 4 + 1,
        }
    return out


@contextmanager
def serve(
    rules: Sequence[tuple[str, Sequence[Reply]]] = (),
    default: Callable[[str], Reply] | None = None,
) -> Iterator[FakeOpenAIServer]:
    """Run a server for the duration of a ``with`` block."""
    server = FakeOpenAIServer(default)
    for contains, replies in rules:
        server.on(contains, *replies)
    server.start()
    try:
        yield server
    finally:
        server.stop()
