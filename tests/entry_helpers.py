"""Running ``structrag`` as the process's entry point, with a mark of its teardown."""

from __future__ import annotations

import subprocess
import sys

#: ``python -c`` code that runs ``structrag ARGS`` as the console script does, and
#: prints "torn down" to stderr from an exit handler: present when the interpreter tore
#: down, absent when the command ended the process at once (structrag.cli._exit_now).
MARKED_ENTRY_POINT = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('torn down', file=sys.stderr))\n"
    "from structrag.cli import main\n"
    "sys.argv = ['structrag', *sys.argv[1:]]\n"
    "main()\n"
)


def run_marked(
    *args: str, timeout: float = 300, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """``structrag ARGS`` through :data:`MARKED_ENTRY_POINT`."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", MARKED_ENTRY_POINT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
