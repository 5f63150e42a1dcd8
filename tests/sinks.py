"""Progress sinks for tests."""

from __future__ import annotations


class Interrupt:
    """A progress sink that stops the ingest after ``after`` messages, like Ctrl-C (or a
    crash half-way)."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.seen = 0

    def start(self, total: int, label: str) -> None:
        pass

    def advance(self, n: int) -> None:
        self.seen += n
        if self.seen >= self.after:
            raise KeyboardInterrupt

    def finish(self) -> None:
        pass
