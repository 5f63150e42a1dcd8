"""Where and how a benchmark ran: date, machine, load, git commit, command line."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structrag

if TYPE_CHECKING:
    from structrag.query.settings import RankingSettings


def memory_bytes() -> int | None:
    """Physical memory of the machine."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def git_commit() -> str | None:
    """The commit of the structrag checkout that runs (None outside a git checkout)."""
    root = Path(structrag.__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        out = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{out}{'+dirty' if dirty else ''}" if out else None


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed (``structrag bench ...``), quoted for a shell."""
    args = list(sys.argv if argv is None else argv)
    if args and Path(args[0]).name in ("structrag", "__main__.py"):
        args[0] = "structrag"
    return shlex.join(args)


def environment(command: str | None = None) -> dict[str, Any]:
    """Date, machine, load average, versions and commit, for a results file."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    ram = memory_bytes()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "ram_gb": round(ram / 2**30, 1) if ram else None,
            "python": platform.python_version(),
            "load_average": load,
        },
        "structrag": structrag.__version__,
        # The structured ranking depends on string hash order in one place (the entity
        # graph's neighbours), so figures move slightly between processes unless it is set.
        "python_hash_seed": os.environ.get("PYTHONHASHSEED") or "random",
        "git_commit": git_commit(),
        "command": command if command is not None else command_line(),
    }


def _json_safe(value: Any) -> Any:
    """Settings values as JSON holds them: dict keys as strings, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def settings_meta(settings: RankingSettings) -> dict[str, Any]:
    """The ranking settings a run used, for a results file: ``defaults`` (whether they
    are the shipped ones), ``changed`` (the fields that differ from those) and ``values``
    (every field)."""
    from structrag.query.settings import DEFAULT_SETTINGS

    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    changed = {k: v for k, v in values.items() if getattr(DEFAULT_SETTINGS, k) != v}
    return {
        "defaults": not changed,
        "changed": _json_safe(changed),
        "values": _json_safe(values),
    }
