"""Extraction spread over a Ray cluster: ``structrag ingest --engine ray``.

The ingest itself does not change: every input is read and checked on the machine that
runs the command (the driver), which also holds the only writer of the index. What moves
to the cluster is the expensive part, extraction: the messages to extract are cut into
batches, each batch goes to one of ``workers`` Ray actors (each loads one spaCy pipeline,
once), and the knowledge comes back as an Arrow table, in order. The driver writes each
table as a Parquet shard under ``<index>/ray-shards/`` before it uses it, and an ingest
that dies (a crash, ``kill -9``, a lost cluster) leaves the shards behind: the next ingest
of the same files reads them instead of extracting those batches again. Shards are named
by what they hold (the extractor and its settings, and each message's conversation, id
and content hash), so a shard is only reused for exactly the messages it was made from.
A successful ingest removes the shards of the batches it used (those of another
file's interrupted ingest stay, for its turn). The name also holds spaCy's version and the
model package's (as installed on the driver), so a shard made by another pipeline is
never read; ``--force`` reads none (it means: extract again).

Batches only go to actors the cluster has placed (and that loaded their pipeline); an
actor still waiting for a CPU holds none, and joins when placed. When no actor starts
within ``ACTOR_START_TIMEOUT_S`` seconds (a cluster whose CPUs are all taken, by another
ingest say), the ingest stops and says how many CPUs are free.

Because the knowledge is the same pickled tuples the local worker processes send, an
index built with ``--engine ray`` is identical to one built locally (the test suite checks
that, on a local cluster started with ``ray.init(num_cpus=2)``).

Ray is an optional dependency: ``pip install "structrag[ray]"``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import pickle
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from structrag.errors import ConfigError, StructragError, first_line
from structrag.extract.base import Progress
from structrag.extract.spacy_extractor import SpacyExtractor, pack_refs, unpack_refs
from structrag.models import Message, SemanticRef
from structrag.nlp.matmul import for_extraction
from structrag.store.workspace import RAY_SHARDS_DIRNAME

#: A shard's Parquet metadata key for the messages it holds: JSON
#: ``[[conversation, message id, content hash], ...]``.
SHARD_MESSAGES_KEY = b"structrag.messages"

#: ``Store.message_hashes``: ``(conversation, id) -> (mkey, content hash, ordinal)``.
MessageHashes = Callable[[Iterable[str]], Mapping[tuple[str, str], tuple[int, int, int]]]


def sweep_ingested_shards(directory: Path, message_hashes: MessageHashes) -> int:
    """Remove the Ray shards (of the index at ``directory``) whose messages the index
    holds, each with the content it was extracted from: a file written since (by an
    ingest the shard's own was interrupted after, or by a local ingest), so nothing is
    left to resume from them. A shard of a message not in the index, or changed since,
    stays, and so does one that does not say what it holds. Returns how many were
    removed; costs one ``stat`` when there are no shards."""
    folder = directory / RAY_SHARDS_DIRNAME
    if not folder.is_dir():
        return 0
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return 0
    held: dict[Path, list[list[Any]]] = {}
    for shard in folder.glob("*.parquet"):
        try:
            metadata = pq.read_schema(shard).metadata or {}
            held[shard] = json.loads(metadata[SHARD_MESSAGES_KEY])
        except Exception:
            continue
    if not held:
        return 0
    current = message_hashes({m[0] for messages in held.values() for m in messages})
    removed = 0
    for shard, messages in held.items():
        if messages and all((c, i) in current and current[(c, i)][1] == h for c, i, h in messages):
            shard.unlink(missing_ok=True)
            removed += 1
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty
    return removed


#: Messages per batch sent to one actor (and per shard).
BATCH_MESSAGES = 256

#: Batches in flight per actor: one being extracted, one waiting, so an actor never idles
#: while its last result travels back.
IN_FLIGHT_PER_ACTOR = 2

#: Seconds to wait for the first actor to be placed and load its pipeline before the
#: ingest stops (the cluster has no free CPU, or cannot start an actor).
ACTOR_START_TIMEOUT_S = 120.0

#: Seconds to wait for a cluster's address to accept a connection.
CONNECT_TIMEOUT_S = 10.0

_TOKEN_HINT = (
    "the cluster uses token authentication (the default from Ray 2.5x): on this machine "
    "set RAY_AUTH_MODE=token and give it the head's token (copy the head's "
    "~/.ray/auth_token here, or set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH); on the head "
    "node itself, --address auto finds it"
)


def import_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`ConfigError` that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ConfigError(
            "--engine ray needs Ray, which is not installed",
            hint='pip install "structrag[ray]" (on the driver and on every node of the cluster)',
        ) from exc


class _Actor:
    """One spaCy pipeline on a Ray worker; ``extract`` turns a batch into an Arrow table
    (one row per message: its refs, packed)."""

    def __init__(self, model: str, ner: bool, batch_size: int) -> None:
        self.extractor = SpacyExtractor(model=model, ner=ner, workers=1, batch_size=batch_size)
        # Load the pipeline once, at start; an actor's process is its own.
        for_extraction(self.extractor.nlp)

    def ready(self) -> bool:
        """Answers once the actor is placed and its pipeline loaded."""
        return True

    def extract(self, messages: list[Message]) -> Any:
        import pyarrow as pa

        rows = [pickle.dumps(pack_refs(refs)) for refs in self.extractor.extract(messages)]
        return pa.table({"refs": pa.array(rows, type=pa.binary())})


@functools.cache
def _package_version(name: str) -> str:
    """An installed package's version ("" when it is not installed here)."""
    try:
        return importlib.metadata.version(name)
    except Exception:  # not installed, or not a package name (a model's path)
        return ""


def batch_key(extractor: SpacyExtractor, batch: Sequence[Message]) -> str:
    """The name of a batch's shard: what the extractor is (with spaCy's version and the
    model package's, as installed on the driver) and what the messages are."""
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            [
                extractor.name,
                extractor.version,
                extractor.settings(),
                _package_version("spacy"),
                _package_version(str(extractor.model)),
            ],
            sort_keys=True,
        ).encode()
    )
    for m in batch:
        digest.update(json.dumps([m.conversation, m.id, m.content_hash()]).encode())
    return digest.hexdigest()[:32]


# -- connecting ---------------------------------------------------------------------------


def _probe(address: str) -> None:
    """Fail at once when nothing answers at ``HOST:PORT`` (Ray itself retries for
    minutes)."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"--address {address!r} is not HOST:PORT",
            hint="pass auto (a cluster started on this machine), or the head's HOST:PORT "
            "(ray start --head prints it)",
        )
    try:
        with socket.create_connection(
            (host.strip("[]") or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S
        ):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ConfigError(
            f"no Ray cluster answers at {address} ({reason})",
            hint="check the address (ray start --head prints it; ray status shows the "
            "cluster), that the cluster runs, and that its port is reachable from here",
        ) from exc


@contextlib.contextmanager
def _stderr_captured() -> Iterator[list[str]]:
    """File descriptor 2 into a temporary file for the block (Ray's core prints a line a
    second while it retries a connection); its text is in the list afterwards."""
    said: list[str] = []
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield said
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            said.append(tmp.read().decode("utf-8", "replace"))


@contextlib.contextmanager
def _interrupt_deferred(ray: ModuleType) -> Iterator[None]:
    """Ctrl-C while a local Ray starts takes effect once it has started, and shuts it down
    then: interrupted half-way, ``ray.init`` leaves agents (``ray::DashboardAgent``,
    ``ray::RuntimeEnvAgent``) that nothing ends. Only in the main thread (elsewhere no
    signal arrives)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, lambda number, frame: caught.append(number))
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        # Ctrl-C as the process had it: ignored stays ignored, a handler of the
        # application's own is called; the default stops (with Ray shut down), also when
        # ray.init failed meanwhile (exit 130, not its error).
        if caught and previous is not signal.SIG_IGN:
            if callable(previous) and previous is not signal.default_int_handler:
                previous(signal.SIGINT, None)
            else:
                with contextlib.suppress(Exception):
                    ray.shutdown()
                raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_kept() -> Iterator[None]:
    """Keep this process's SIGTERM handler across ``ray.init`` (which installs its own,
    ending the process with ``sys.exit``): the CLI's stops an ingest as Ctrl-C does."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)


def _join_error(address: str, exc: BaseException, said: str) -> StructragError:
    """What a failed ``ray.init(address=...)`` means, in one line and a hint."""
    text = f"{type(exc).__name__} {exc} {said}"
    if "InvalidAuthToken" in text or "Unauthenticated" in text or "AuthenticationError" in text:
        return ConfigError(
            f"the Ray cluster at {address} refused this driver: it needs its authentication token",
            hint=_TOKEN_HINT,
        )
    if address == "auto" and not os.environ.get("RAY_ADDRESS"):
        return ConfigError(
            "--address auto found no running Ray cluster on this machine",
            hint="start one (ray start --head), pass the head's HOST:PORT, or drop "
            "--address for a local Ray started for this ingest",
        )
    return ConfigError(
        f"could not join the Ray cluster at {os.environ.get('RAY_ADDRESS') or address}: "
        f"{first_line(exc)}",
        hint="check the address (ray start --head prints it) and that the cluster runs "
        "(ray status); a stale cluster of this machine is ended by ray stop",
    )


_LOG_TAIL = re.compile(r"\s*Last \d+ lines of the Raylet logs:\s*$")


def _quiet_cluster_errors() -> Callable[[], None]:
    """Ray's driver prints what the cluster publishes as errors to stdout, where JSON
    output goes: a raylet that died comes with the last 20 lines of its log. While this
    extractor runs, such a message (and only such: other cluster errors stay as Ray
    prints them) is one line on stderr (the ingest then says what to do). Process-wide,
    as Ray's printer is: the function returned puts Ray's own back (``close``). Left as
    Ray has it when Ray's internals are not as expected."""
    try:
        worker = importlib.import_module("ray._private.worker")
    except ImportError:
        return lambda: None
    original = getattr(worker, "print_to_stdstream", None)
    if not callable(original) or getattr(original, "structrag_quiet", False):
        return lambda: None

    def one_line(data: Any, ignore_prefix: bool) -> Any:
        if (
            isinstance(data, dict)
            and data.get("pid") == "raylet"
            and any("lines of the Raylet logs" in str(line) for line in data.get("lines", []))
        ):
            firsts = [str(line).strip().splitlines()[:1] for line in data.get("lines", [])]
            short = [_LOG_TAIL.sub("", first[0]) for first in firsts if first]
            data = {**data, "lines": short, "is_err": True}
        return original(data, ignore_prefix)

    one_line.structrag_quiet = True  # type: ignore[attr-defined]
    setattr(worker, "print_to_stdstream", one_line)  # noqa: B010 (no stub for it)

    def restore() -> None:
        if getattr(worker, "print_to_stdstream", None) is one_line:
            setattr(worker, "print_to_stdstream", original)  # noqa: B010

    return restore


class RayExtractor:
    """The spaCy extractor, run by Ray actors (see the module). ``address`` is a running
    cluster's (``auto``, or ``HOST:PORT``); None starts a fresh local Ray with ``workers``
    CPUs (even when a cluster runs on this machine), unless this process is connected to
    one already. ``workers`` is the number of actors (default: the cluster's free CPUs).
    ``reuse`` False reads no shard (``--force``: extract again)."""

    def __init__(
        self,
        extractor: SpacyExtractor,
        *,
        address: str | None = None,
        workers: int | None = None,
        shards: Path | None = None,
        batch_messages: int | None = None,
        reuse: bool = True,
    ) -> None:
        self.inner = extractor
        self.name = extractor.name
        self.version = extractor.version
        self.address = address
        self.workers = workers
        self.shards = shards
        self.reuse = reuse
        self.batch_messages = batch_messages or BATCH_MESSAGES
        #: Batches extracted by actors and batches read back from shards, over this
        #: extractor's life.
        self.batches_extracted = 0
        self.batches_reused = 0
        self._ray: ModuleType | None = None
        self._started = False
        #: Puts Ray's own error printer back (see _quiet_cluster_errors), at close().
        self._loud: Callable[[], None] = lambda: None
        #: Actors placed (their pipeline loaded), with their batches in flight; actors
        #: still starting, by the reference their ``ready()`` answers on.
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._starting: dict[Any, Any] = {}
        self._starting_since = 0.0
        self._start_errors: list[BaseException] = []
        #: The shards this extractor read or wrote (discarded when the ingest is done).
        self._used: set[str] = set()

    def settings(self) -> dict[str, object]:
        return self.inner.settings()

    # -- the cluster -------------------------------------------------------------------------

    def _connect(self) -> ModuleType:
        ray = self._ray or import_ray()
        self._ray = ray
        if ray.is_initialized():
            return ray
        common: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": True,
            "logging_level": "warning",
        }
        self._loud = _quiet_cluster_errors()
        if self.address is None:
            # Started before ray.init returns: a start interrupted (Ctrl-C) is shut down
            # by close() too, its processes with it.
            self._started = True
            try:
                # "local": a new Ray of this process's own, even when a cluster runs on
                # this machine (or RAY_ADDRESS names one), which None would join.
                with _interrupt_deferred(ray), _sigterm_kept():
                    ray.init(
                        address="local", num_cpus=self.workers or os.cpu_count() or 1, **common
                    )
            except Exception as exc:
                raise StructragError(
                    f"could not start a local Ray: {first_line(exc)}",
                    hint="ray stop ends a Ray left over on this machine; or join a running "
                    "cluster with --address",
                ) from exc
            return ray
        _probe(self.address)
        self._started = True  # close() disconnects (and shuts down what an interrupt left)
        failure: BaseException | None = None
        with _stderr_captured() as said:
            try:
                with _sigterm_kept():
                    ray.init(address=self.address, **common)
            except Exception as exc:
                failure = exc
        if failure is not None:
            raise _join_error(self.address, failure, "".join(said)) from failure
        if said[0].strip():
            sys.stderr.write(said[0])
        return ray

    def _start_actors(self) -> None:
        """Start the actors (``workers``, or one per free CPU of the cluster)."""
        ray = self._connect()
        try:
            free = int(ray.available_resources().get("CPU", 0))
        except Exception as exc:
            raise self._lost(exc) from exc
        count = self.workers or max(1, free)
        actor = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        config = (self.inner.model, self.inner.ner, self.inner.batch_size)
        for _ in range(count):
            handle = actor.remote(*config)
            self._starting[handle.ready.remote()] = handle
        self._starting_since = time.monotonic()

    def _adopt(self, done: Sequence[Any]) -> None:
        """Actors whose ``ready()`` answered: placed (they take batches now), or failed."""
        assert self._ray is not None
        for ref in done:
            handle = self._starting.pop(ref, None)
            if handle is None:
                continue
            try:
                self._ray.get(ref)
            except Exception as exc:
                self._start_errors.append(exc)
                with contextlib.suppress(Exception):
                    self._ray.kill(handle)
                continue
            self._actors.append(handle)
            self._load.append(0)

    def _await_actor(self) -> None:
        """Wait until an actor is placed; fail when none is, in time."""
        if not self._actors and not self._starting:
            self._start_actors()
        ray = self._ray
        assert ray is not None
        deadline = self._starting_since + ACTOR_START_TIMEOUT_S
        while not self._actors:
            if not self._starting:
                cause = self._start_errors[-1] if self._start_errors else None
                raise StructragError(
                    "no Ray actor could start"
                    + (f": {first_line(cause)}" if cause is not None else ""),
                    hint="each node needs structrag with spaCy and its model (pip install "
                    '"structrag[ray]"); the batches extracted so far are kept: run the '
                    "same command again",
                ) from cause
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._unplaced()
            try:
                done, _ = ray.wait(list(self._starting), num_returns=1, timeout=min(left, 1.0))
            except Exception as exc:
                raise self._lost(exc) from exc
            self._adopt(done)

    def _unplaced(self) -> StructragError:
        assert self._ray is not None
        try:
            free = self._ray.available_resources().get("CPU", 0)
            total = self._ray.cluster_resources().get("CPU", 0)
            cpus = f"the cluster has {free:g} of its {total:g} CPUs free"
        except Exception:
            cpus = "the cluster did not say how many CPUs it has free"
        return StructragError(
            f"no Ray actor could be placed in {ACTOR_START_TIMEOUT_S:g}s: {cpus}",
            hint="pass --workers with at most the free CPUs, or free the cluster (another "
            "ingest may hold it: wait for it, or stop it); the batches extracted so far "
            "are kept: run the same command again",
        )

    def _lost(self, exc: BaseException) -> StructragError:
        kept = (
            f"the batches extracted so far are kept in {self.shards}: "
            if self.shards is not None
            else ""
        )
        return StructragError(
            f"the Ray cluster was lost during the ingest ({type(exc).__name__}: "
            f"{first_line(exc)[:120]})",
            hint=f"{kept}check the cluster (ray status; ray start), then run the same "
            "command again to go on",
        )

    def _free_slot(self) -> int | None:
        """The placed actor with the fewest batches in flight, if it has room for one."""
        if not self._actors:
            return None
        slot = min(range(len(self._actors)), key=self._load.__getitem__)
        return slot if self._load[slot] < IN_FLIGHT_PER_ACTOR else None

    def close(self) -> None:
        """Stop the actors, and the local Ray this extractor started (or was starting)."""
        if self._ray is not None:
            for a in [*self._actors, *self._starting.values()]:
                with contextlib.suppress(Exception):
                    self._ray.kill(a)
            self._actors, self._load = [], []
            self._starting = {}
            if self._started:
                self._ray.shutdown()
                self._started = False
        self._loud()

    def discard_shards(self, message_hashes: MessageHashes | None = None) -> None:
        """Remove the shards this extractor read or wrote (after a successful ingest: they
        have nothing left to resume), and, given the index's ``message_hashes``, those of
        messages the index now holds as they were (a file an interrupted ingest had
        written); another file's, left by an ingest interrupted before it was written,
        stay for that file's next ingest."""
        if self.shards is None or not self.shards.is_dir():
            return
        for key in self._used:
            (self.shards / f"{key}.parquet").unlink(missing_ok=True)
        self._used.clear()
        if message_hashes is not None:
            sweep_ingested_shards(self.shards.parent, message_hashes)
        with contextlib.suppress(OSError):
            self.shards.rmdir()  # only when empty

    # -- extraction ---------------------------------------------------------------------------

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        step = self.batch_messages
        batches = [list(messages[i : i + step]) for i in range(0, len(messages), step)]
        keys = [batch_key(self.inner, b) for b in batches]
        self._used.update(keys)
        run = _Run(self, batches, keys)
        try:
            for i, batch in enumerate(batches):
                table = run.table(i)
                for message, cell in zip(batch, table.column("refs").to_pylist(), strict=True):
                    yield unpack_refs(message, pickle.loads(cell))
                if progress:
                    progress(len(batch))
        finally:
            run.cancel()

    def _shard(self, key: str) -> Path | None:
        if self.shards is None or not self.reuse:
            return None
        path = self.shards / f"{key}.parquet"
        return path if path.is_file() else None

    def _save(self, key: str, table: Any, batch: Sequence[Message]) -> None:
        import pyarrow.parquet as pq

        if self.shards is not None:
            self.shards.mkdir(parents=True, exist_ok=True)
            part = self.shards / f".{key}.{os.getpid()}.part"
            # Which messages it holds, so that a shard of messages ingested since is
            # known to be spent (sweep_ingested_shards).
            held = json.dumps([[m.conversation, m.id, m.content_hash()] for m in batch])
            table = table.replace_schema_metadata({SHARD_MESSAGES_KEY: held})
            pq.write_table(table, part)
            part.replace(self.shards / f"{key}.parquet")


class _Run:
    """One :meth:`RayExtractor.extract` call: its batches sent, in order, to the placed
    actors with room, and their tables taken back in order."""

    def __init__(self, owner: RayExtractor, batches: list[list[Message]], keys: list[str]):
        self.owner = owner
        self.batches = batches
        self.keys = keys
        self.read = [owner._shard(k) is not None for k in keys]
        #: Batch number -> (result reference, actor slot), for the batches in flight.
        self.sent: dict[int, tuple[Any, int]] = {}
        self.next = 0

    def fill(self) -> None:
        """Send the next batches while a placed actor has room (a batch with a shard is
        read, not sent)."""
        owner = self.owner
        while self.next < len(self.batches):
            if self.read[self.next]:
                self.next += 1
                continue
            slot = owner._free_slot()
            if slot is None:
                return
            ref = owner._actors[slot].extract.remote(self.batches[self.next])
            owner._load[slot] += 1
            self.sent[self.next] = (ref, slot)
            self.next += 1

    def table(self, i: int) -> Any:
        """Batch ``i``'s table: read from its shard, or from its actor (and then saved)."""
        import pyarrow.parquet as pq

        owner = self.owner
        if self.read[i]:
            shard = owner._shard(self.keys[i])
            assert shard is not None
            owner.batches_reused += 1
            return pq.read_table(shard)
        while True:
            if owner._starting and owner._actors:
                owner._adopt(self._ready_now())
            self.fill()
            if i in self.sent:
                break
            # Nothing is in flight (batches go in order), so no actor is placed yet.
            owner._await_actor()
        ref, slot = self.sent[i]
        ray = owner._ray
        assert ray is not None
        try:
            while True:  # batch i's result; actors placed meanwhile join
                done, _ = ray.wait([ref, *owner._starting], num_returns=1, timeout=1.0)
                if any(d == ref for d in done):
                    break
                if done:
                    owner._adopt(done)
                    self.fill()
            table = ray.get(ref)
        except ray.exceptions.RayTaskError:
            raise  # the extractor failed on a message: a bug to see whole
        except Exception as exc:
            raise owner._lost(exc) from exc
        finally:
            del self.sent[i]
            owner._load[slot] -= 1
        self.fill()  # keep the actors busy while this table is used
        owner.batches_extracted += 1
        owner._save(self.keys[i], table, self.batches[i])
        return table

    def _ready_now(self) -> list[Any]:
        assert self.owner._ray is not None
        done, _ = self.owner._ray.wait(
            list(self.owner._starting), num_returns=len(self.owner._starting), timeout=0
        )
        return list(done)

    def cancel(self) -> None:
        """Cancel the batches still in flight (the caller stopped early)."""
        ray = self.owner._ray
        if ray is None:
            return
        for ref, slot in self.sent.values():
            with contextlib.suppress(Exception):
                ray.cancel(ref)
            if slot < len(self.owner._load):
                self.owner._load[slot] -= 1
        self.sent.clear()
