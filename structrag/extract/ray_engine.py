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
A successful ingest removes them.

Because the knowledge is the same pickled tuples the local worker processes send, an
index built with ``--engine ray`` is identical to one built locally (the test suite checks
that, on a local cluster started with ``ray.init(num_cpus=2)``).

Ray is an optional dependency: ``pip install "structrag[ray]"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import pickle
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from structrag.errors import ConfigError
from structrag.extract.base import Progress
from structrag.extract.spacy_extractor import SpacyExtractor, pack_refs, unpack_refs
from structrag.models import Message, SemanticRef
from structrag.nlp.matmul import for_extraction

#: Messages per batch sent to one actor (and per shard).
BATCH_MESSAGES = 256

#: Batches in flight per actor: one being extracted, one waiting, so an actor never idles
#: while its last result travels back.
IN_FLIGHT_PER_ACTOR = 2


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

    def extract(self, messages: list[Message]) -> Any:
        import pyarrow as pa

        rows = [pickle.dumps(pack_refs(refs)) for refs in self.extractor.extract(messages)]
        return pa.table({"refs": pa.array(rows, type=pa.binary())})


def batch_key(extractor: SpacyExtractor, batch: Sequence[Message]) -> str:
    """The name of a batch's shard: what the extractor is and what the messages are."""
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            [extractor.name, extractor.version, extractor.settings()], sort_keys=True
        ).encode()
    )
    for m in batch:
        digest.update(json.dumps([m.conversation, m.id, m.content_hash()]).encode())
    return digest.hexdigest()[:32]


class RayExtractor:
    """The spaCy extractor, run by Ray actors (see the module). ``address`` is a running
    cluster's (``auto``, or ``HOST:PORT``); None starts a local Ray with ``workers`` CPUs
    unless this process is connected to one already. ``workers`` is the number of actors
    (default: the cluster's CPUs)."""

    def __init__(
        self,
        extractor: SpacyExtractor,
        *,
        address: str | None = None,
        workers: int | None = None,
        shards: Path | None = None,
        batch_messages: int | None = None,
    ) -> None:
        self.inner = extractor
        self.name = extractor.name
        self.version = extractor.version
        self.address = address
        self.workers = workers
        self.shards = shards
        self.batch_messages = batch_messages or BATCH_MESSAGES
        #: Batches extracted by actors and batches read back from shards, over this
        #: extractor's life.
        self.batches_extracted = 0
        self.batches_reused = 0
        self._ray: ModuleType | None = None
        self._started = False
        self._actors: list[Any] = []

    def settings(self) -> dict[str, object]:
        return self.inner.settings()

    # -- the cluster -------------------------------------------------------------------------

    def _connect(self) -> ModuleType:
        ray = self._ray or import_ray()
        self._ray = ray
        if not ray.is_initialized():
            local = self.address is None
            ray.init(
                address=self.address,
                num_cpus=(self.workers or os.cpu_count() or 1) if local else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=True,
                logging_level="warning",
            )
            self._started = True
        return ray

    def _pool(self) -> list[Any]:
        """The actors, started on first use (a resumed ingest may need none)."""
        if not self._actors:
            ray = self._connect()
            count = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            actor = ray.remote(num_cpus=1)(_Actor)
            config = (self.inner.model, self.inner.ner, self.inner.batch_size)
            self._actors = [actor.remote(*config) for _ in range(count)]
        return self._actors

    def close(self) -> None:
        """Stop the actors, and the local Ray this extractor started."""
        if self._ray is not None:
            for a in self._actors:
                with contextlib.suppress(Exception):
                    self._ray.kill(a)
            self._actors = []
            if self._started:
                self._ray.shutdown()
                self._started = False

    def discard_shards(self) -> None:
        """Remove the shards (after a successful ingest: nothing is left to resume)."""
        if self.shards is not None and self.shards.is_dir():
            for shard in self.shards.glob("*.parquet"):
                shard.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.shards.rmdir()

    # -- extraction ---------------------------------------------------------------------------

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        step = self.batch_messages
        batches = [list(messages[i : i + step]) for i in range(0, len(messages), step)]
        keys = [batch_key(self.inner, b) for b in batches]
        pending: deque[tuple[int, Any]] = deque()  # (batch number, result ref or None)
        submitted = 0
        try:
            for i, batch in enumerate(batches):
                submitted = self._submit(batches, keys, pending, submitted, i)
                number, future = pending.popleft()
                assert number == i
                table = self._result(keys[i], future)
                for message, cell in zip(batch, table.column("refs").to_pylist(), strict=True):
                    yield unpack_refs(message, pickle.loads(cell))
                if progress:
                    progress(len(batch))
        finally:
            if self._ray is not None:
                for _, future in pending:
                    if future is not None:
                        with contextlib.suppress(Exception):
                            self._ray.cancel(future)

    def _submit(
        self,
        batches: list[list[Message]],
        keys: list[str],
        pending: deque[tuple[int, Any]],
        submitted: int,
        current: int,
    ) -> int:
        """Send the batches up to a window ahead of ``current`` (a batch with a shard is
        read, not sent); returns how many have been sent or found so far."""
        while submitted < len(batches) and submitted <= current + self._window():
            if self._shard(keys[submitted]) is not None:
                pending.append((submitted, None))
            else:
                actors = self._pool()
                actor = actors[submitted % len(actors)]
                pending.append((submitted, actor.extract.remote(batches[submitted])))
            submitted += 1
        return submitted

    def _window(self) -> int:
        return IN_FLIGHT_PER_ACTOR * (len(self._actors) or self.workers or 2)

    def _shard(self, key: str) -> Path | None:
        if self.shards is None:
            return None
        path = self.shards / f"{key}.parquet"
        return path if path.is_file() else None

    def _result(self, key: str, future: Any) -> Any:
        """The batch's table: read from its shard, or from the actor (and then saved)."""
        import pyarrow.parquet as pq

        if future is None:
            shard = self._shard(key)
            assert shard is not None
            self.batches_reused += 1
            return pq.read_table(shard)
        assert self._ray is not None
        table = self._ray.get(future)
        self.batches_extracted += 1
        if self.shards is not None:
            self.shards.mkdir(parents=True, exist_ok=True)
            part = self.shards / f".{key}.{os.getpid()}.part"
            pq.write_table(table, part)
            part.replace(self.shards / f"{key}.parquet")
        return table
