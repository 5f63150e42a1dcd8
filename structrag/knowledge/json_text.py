"""The text of a JSON document: its values, each written with its key path, under its
JSON path.

Configuration files and FAQ dumps keep what they say in their values, and what a value
means in its keys: ``{"service": {"owner": "Team Falcon"}}`` says who owns the service,
not only "Team Falcon". Every string (not blank), number and boolean becomes a paragraph
of the text (joined with blank lines, in document order) written ``key path: value``
(``service.owner: Team Falcon``, ``port: 8080``, ``debug: true``; a value with no key
above it, in a top-level array, is written alone), and a :class:`Section` whose path is
its JSON path split at the keys, with array indexes kept on their key:
``{"install": {"steps": ["a", "b", "c"]}}`` gives ``c`` the path
``("install", "steps[2]")``, written ``install.steps[2]`` by :func:`json_path`. ``null``,
blank strings and empty arrays and objects carry nothing and are left out.
"""

from __future__ import annotations

import math
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


def _scalar(value: object) -> str | None:
    """A value as the text says it (JSON's spelling for booleans); None for what carries
    nothing (null, a blank string, a number that is not finite)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    return None


def json_strings(data: object) -> JsonText:
    """Every string (not blank), number and boolean of parsed JSON ``data``, written with
    its key path, and its section (see the module docstring)."""
    parts: list[str] = []
    sections: list[Section] = []
    size = 0
    # Depth-first in document order; an explicit stack, because a deeply nested document
    # must not hit Python's recursion limit.
    stack: list[tuple[tuple[str, ...], object]] = [((), data)]
    while stack:
        path, value = stack.pop()
        shown = _scalar(value)
        if shown is not None:
            # A path of array indexes alone ("[0][1]") names no key: the value stands alone.
            keyed = any(not part.startswith("[") or part.startswith('["') for part in path)
            line = f"{json_path(path)}: {shown}" if keyed else shown
            if parts:
                parts.append(SEPARATOR)
                size += len(SEPARATOR)
            sections.append(Section(path, size, size + len(line)))
            parts.append(line)
            size += len(line)
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
