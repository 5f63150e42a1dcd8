"""An ingest's text index segment, written by a process of its own.

Whoosh is pure Python: indexing a message and writing the segment at the end hold the
interpreter's lock. Written in the ingest's own process, the segment (0.4 s for
``locomo_dev.json``'s 2,760 messages, 3-4 s for a file of 25,000) competed for that lock
with the store's merge and the conversations' digests, on one core while the other
idled: the three came one after the other. Here a child process takes the documents as
the ingest extracts them and writes the segment while the ingest merges the store and
makes the digests on the other core.

The child is a fresh interpreter (``python -m structrag.store.segment_process FOLDER``):
nothing of the ingest's memory is copied into it, it needs no ``__main__`` guard in the
caller's script, and it starts in ~0.2 s while the ingest reads its input. Documents go
to it pickled over its standard input in batches; its answer (done, or the error it met)
comes back over its standard output; what it prints on standard error goes to
``segment.log`` in the staging folder, quoted in the error when it stops unexpectedly. It
runs in a session of its own, so a Ctrl-C in the terminal does not reach it (the ingest
decides what to do); a failed or interrupted ingest kills it, and it gives up the segment
when its input closes before the end, as when the ingest's process dies.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from structrag.errors import IndexStateError

if TYPE_CHECKING:
    from structrag.store.protocols import IndexedMessage

#: Documents sent to the child at a time.
BATCH = 256
#: Where the child's standard error goes, in the staging folder.
LOG_NAME = "segment.log"
#: How long the child is given to end once it has answered, or its input broke.
CANCEL_SECONDS = 10.0
#: The longest error message the child sends back.
MESSAGE_CHARS = 2_000


class SegmentProcess:
    """The parent's end: :meth:`add` documents, then :meth:`finish` (the segment is
    written into ``path``, a Whoosh index the caller created) or :meth:`cancel`."""

    def __init__(self, path: Path) -> None:
        self._log = path.parent / LOG_NAME
        # the child finds structrag and Whoosh where this process found them, even when
        # a script put them on sys.path itself
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                # -P: the current folder does not go first on its path (nothing there
                # shadows whoosh or numpy)
                [sys.executable, "-P", "-m", "structrag.store.segment_process", str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal is the ingest's to handle
            )
        self._batch: list[tuple[Any, ...]] = []

    def add(self, message: IndexedMessage) -> None:
        self._batch.append(
            (
                message.mkey,
                message.conversation,
                message.speaker,
                message.first_ref,
                message.terms,
                message.knowledge,
                message.content,
            )
        )
        if len(self._batch) >= BATCH:
            self._send(self._batch)
            self._batch = []

    def _send(self, item: list[tuple[Any, ...]] | None) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            pickle.dump(item, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
        except OSError as exc:  # a broken pipe: the child is gone, maybe saying why
            self._raise_error(self._reply())
            raise self._stopped() from exc

    def finish(self) -> None:
        """Send what is left, let the child write the segment and wait for it; raises
        what it met (an ``OSError`` as such: a full disk reads as one)."""
        self._send(self._batch)
        self._batch = []
        self._send(None)
        assert self._process.stdin is not None
        self._process.stdin.close()
        reply = self._reply()
        if reply != ("ok",):
            self._raise_error(reply)
            raise self._stopped()

    def _reply(self) -> tuple[Any, ...] | None:
        """What the child answered (None: nothing), once it has ended."""
        stdout = self._process.stdout
        if stdout is None or stdout.closed:
            return None
        try:
            reply = pickle.load(stdout)
        except (OSError, EOFError, pickle.UnpicklingError):
            reply = None
        finally:
            stdout.close()
            self._ended()
        return reply if isinstance(reply, tuple) else None

    @staticmethod
    def _raise_error(reply: tuple[Any, ...] | None) -> None:
        """Raise the error the child answered with, if it answered one."""
        if reply is None or reply[0] != "error":
            return
        _, kind, message, errno = reply
        if errno is not None:
            raise OSError(errno, message)
        raise IndexStateError(
            f"the text index segment could not be written: {kind}: {message}",
            hint="nothing of this ingest was written; run it again",
        )

    def cancel(self) -> None:
        """Stop the child now, giving up its segment. It is killed rather than told: the
        extraction workers forked since it started hold its input open too. Safe while
        :meth:`finish` runs on another thread (which then raises): the child is killed
        before its pipes are closed, as closing one waits for a write or read on it to
        end, and that would last as long as the child does."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def _ended(self) -> int:
        """The child's exit code, once it has ended (it is killed if it has not soon)."""
        try:
            return self._process.wait(CANCEL_SECONDS)
        except subprocess.TimeoutExpired:  # it answered, or its input broke, yet it runs
            self._process.kill()
            return self._process.wait()

    def _stopped(self) -> IndexStateError:
        code = self._ended()
        try:
            said = self._log.read_text(errors="replace").strip().splitlines()[-3:]
        except OSError:
            said = []
        detail = f": {' / '.join(said)}" if said else ""
        return IndexStateError(
            f"the process writing the text index segment stopped (exit code {code}){detail}",
            hint="nothing of this ingest was written; run it again (its memory, or a signal "
            "sent to it, may have stopped it)",
        )


def _serve(path: str, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """The child's work: index what comes in until None, then write the segment."""
    from whoosh import index

    from structrag import faults
    from structrag.store.whoosh_documents import DocumentFields, add_document

    writer: Any = None
    try:
        writer = index.open_dir(path).writer(limitmb=64)
        while True:
            try:
                batch = pickle.load(stdin)
            except EOFError:  # the ingest gave up
                writer.cancel()
                return 1
            if batch is None:
                break
            for fields in batch:
                add_document(writer, DocumentFields(*fields))
        faults.point("segment-write")
        writer.commit(merge=False)
    except Exception as exc:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.cancel()
        errno = exc.errno if isinstance(exc, OSError) else None
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        # kept short: the answer must fit the pipe while the ingest may still be writing
        pickle.dump(("error", type(exc).__name__, message[:MESSAGE_CHARS], errno), stdout)
        stdout.flush()
        return 1
    pickle.dump(("ok",), stdout)
    stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the answer goes out on a copy of standard output; anything printed goes to the log
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with answer:
        return _serve(args[0], sys.stdin.buffer, answer)


if __name__ == "__main__":
    sys.exit(main())
