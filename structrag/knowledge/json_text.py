"""The text of a JSON document: its string values, each under its JSON path.

Configuration files and FAQ dumps keep their prose in string values; keys, numbers and
punctuation are structure, not text. Every non-blank string becomes a paragraph of the
text (joined with blank lines, in document order) and a :class:`Section` whose path is
its JSON path split at the keys, with array indexes kept on their key:
``{"install": {"steps": ["a", "b", "c"]}}`` gives ``c`` the path
``("install", "steps[2]")``, written ``install.steps[2]`` by :func:`json_path`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from structrag.knowledge.document import Section

__all__ = ["JsonText", "json_path", "json_strings"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class JsonText:
    text: str
    sections: tuple[Section, ...]
    #: A top-level ``"title"`` (or ``"name"``) string, if there is one.
    title: str | None


def _key(key: str) -> str:
    # Keys that would read ambiguously in a dotted path are quoted, JSON-style.
    if _IDENTIFIER.match(key):
        return key
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'["{escaped}"]'


def json_path(path: tuple[str, ...]) -> str:
    """A section path written as one JSON path: ``install.steps[2]``."""
    out = ""
    for part in path:
        out += part if not out or part.startswith("[") else "." + part
    return out


def json_strings(data: object) -> JsonText:
    """Every non-blank string value of parsed JSON ``data``, with its path."""
    parts: list[str] = []
    sections: list[Section] = []
    size = 0
    # Depth-first in document order; an explicit stack, because a deeply nested document
    # must not hit Python's recursion limit.
    stack: list[tuple[tuple[str, ...], object]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not value.strip():
                continue
            if parts:
                parts.append(SEPARATOR)
                size += len(SEPARATOR)
            sections.append(Section(path, size, size + len(value)))
            parts.append(value)
            size += len(value)
        elif isinstance(value, dict):
            children = [((*path, _key(str(k))), v) for k, v in value.items()]
            stack.extend(reversed(children))
        elif isinstance(value, list):
            head, last = path[:-1], path[-1] if path else ""
            items = [((*head, f"{last}[{i}]"), v) for i, v in enumerate(value)]
            stack.extend(reversed(items))
    title = None
    if isinstance(data, dict):
        for key in ("title", "name"):
            candidate = data.get(key)
            if isinstance(candidate, str) and candidate.strip():
                title = candidate.strip()
                break
    return JsonText("".join(parts), tuple(sections), title)
