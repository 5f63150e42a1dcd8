"""The Ray engine on a cluster that cannot place every actor, or that is lost; its local
Ray beside a running cluster; connection failures as one line; shards keyed by spaCy's
version, never read with ``--force``, and removed only when spent; ``bench perf -q``.

On a local Ray started by the test (``ray.init(num_cpus=2)``, as in test_ray_engine.py).
Ctrl-C while a local Ray starts (its agents left running) is checked by hand: the timing
of a signal inside ``ray.init`` is too loose for a test."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from structrag import Index  # noqa: E402
from structrag.errors import StructragError  # noqa: E402
from structrag.extract import ray_engine  # noqa: E402
from structrag.extract.ray_engine import RayExtractor, batch_key  # noqa: E402
from structrag.extract.spacy_extractor import SpacyExtractor  # noqa: E402
from structrag.index import IngestOptions, ingest_into  # noqa: E402
from structrag.models import Message  # noqa: E402
from structrag.store.workspace import RAY_SHARDS_DIRNAME as SHARDS  # noqa: E402
from tests import ray_helpers  # noqa: E402
from tests.entry_helpers import run_marked  # noqa: E402
from tests.sinks import Interrupt  # noqa: E402

cluster = ray_helpers.cluster  # the module's local Ray (a module-scoped fixture)

EXAMPLE = Path(__file__).parent.parent / "examples" / "friends_chat.jsonl"
BATCH = 40


@pytest.fixture(scope="module")
def chats(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two inputs of ~120 messages each (3 batches of 40 each)."""
    root = tmp_path_factory.mktemp("chats")
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    paths = []
    for n in range(2):
        path = root / f"chat{n}.jsonl"
        out = [
            dict(row, id=f"{row['id']}-{copy}", conversation=f"friends-{n}")
            for copy in range(2)
            for row in rows
        ]
        path.write_text("\n".join(json.dumps(r) for r in out) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_engine, "BATCH_MESSAGES", BATCH)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` in a thread; fails (instead of hanging the suite) when it takes longer."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds}s (hangs)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- 1. actors the cluster cannot place -----------------------------------------------------


@pytest.mark.usefixtures("cluster", "small_batches")
def test_more_workers_than_cpus_finishes_on_the_actors_placed(
    chats: list[Path], tmp_path: Path
) -> None:
    """4 actors on 2 CPUs: two are never placed, and hold no batch."""

    def ingest() -> list[Any]:
        with Index(tmp_path / "index") as index:
            return index.ingest(chats, engine="ray", workers=4)

    reports = _within(180, ingest)
    assert [r.messages_added for r in reports] == [_lines(c) for c in chats]
    assert not (tmp_path / "index" / SHARDS).exists()


@pytest.mark.usefixtures("cluster", "small_batches")
def test_a_full_cluster_fails_in_time_and_says_how_many_cpus_are_free(
    chats: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_engine, "ACTOR_START_TIMEOUT_S", 3.0)

    @ray.remote(num_cpus=2)
    class Hog:
        def ready(self) -> bool:
            return True

    hog = Hog.remote()  # type: ignore[attr-defined]
    ray.get(hog.ready.remote())
    try:

        def ingest() -> None:
            with Index(tmp_path / "index") as index:
                index.ingest(chats[:1], engine="ray", workers=1)

        with pytest.raises(StructragError) as caught:
            _within(120, ingest)
    finally:
        ray.kill(hog)
    assert "0 of its 2 CPUs free" in str(caught.value)
    assert "--workers" in str(caught.value.hint)


# -- 2. a local Ray beside a running cluster ----------------------------------------------------


def test_without_address_a_local_ray_starts_beside_a_running_cluster(
    cluster: str, chats: list[Path], tmp_path: Path
) -> None:
    """RAY_ADDRESS names the test's cluster: ray.init(address=None, num_cpus=...) would
    join it and refuse num_cpus; the engine starts its own."""
    result = run_marked(
        *("ingest", str(chats[0]), "--db", str(tmp_path / "index"), "--engine", "ray"),
        *("--workers", "1", "--json", "-q"),
        env={**os.environ, "RAY_ADDRESS": cluster, "PYTHONWARNINGS": "ignore"},
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)[0]["messages_added"] == _lines(chats[0])


# -- 3. connection failures and a lost cluster -------------------------------------------------


def test_an_address_where_nothing_listens_fails_at_once_in_one_line(
    chats: list[Path], tmp_path: Path
) -> None:
    address = f"127.0.0.1:{_free_port()}"
    result = run_marked(
        *("ingest", str(chats[0]), "--db", str(tmp_path / "index")),
        *("--engine", "ray", "--address", address),
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"no Ray cluster answers at {address}" in result.stderr
    assert not (tmp_path / "index").exists()


def test_a_refused_token_says_how_to_give_it() -> None:
    said = "gcs_client.cc:210: Unauthenticated: RPC error: InvalidAuthToken: missing"
    error = ray_engine._join_error("10.0.0.1:6379", ConnectionError("failed"), said)
    assert "authentication token" in error.message
    assert "RAY_AUTH_MODE=token" in str(error.hint)
    assert "\n" not in error.message


@pytest.mark.usefixtures("cluster")
def test_a_lost_actor_stops_the_ingest_in_one_line_and_keeps_the_shards(
    chats: list[Path], tmp_path: Path
) -> None:
    directory, shards = tmp_path / "index", tmp_path / "index" / SHARDS
    first = RayExtractor(SpacyExtractor(workers=1), workers=1, shards=shards, batch_messages=20)

    class KillAfterFirstBatch(Interrupt):
        def advance(self, n: int) -> None:
            if self.seen == 0:
                for actor in first._actors:
                    ray.kill(actor)
            self.seen += n

    try:
        with Index(directory) as index, pytest.raises(StructragError) as caught:
            _within(
                120,
                lambda: index.ingest(chats[:1], extractor=first, progress=KillAfterFirstBatch(0)),
            )
    finally:
        first.close()
    assert "the Ray cluster was lost" in caught.value.message
    assert "kept" in str(caught.value.hint)
    kept = len(list(shards.glob("*.parquet")))
    assert kept >= 1
    second = RayExtractor(SpacyExtractor(workers=1), workers=1, shards=shards, batch_messages=20)
    try:
        with Index(directory) as index:
            index.ingest(chats[:1], extractor=second)
    finally:
        second.close()
    assert second.batches_reused == kept
    assert not shards.exists()


# -- 5. shard keys and --force ---------------------------------------------------------------


def test_the_shard_key_holds_spacys_version(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [Message(id="m1", conversation="c", ordinal=0, speaker="Ana", text="I adopted a cat.")]
    extractor = SpacyExtractor(workers=1)
    monkeypatch.setattr(ray_engine, "_package_version", lambda name: f"{name}-1")
    before = batch_key(extractor, batch)
    monkeypatch.setattr(ray_engine, "_package_version", lambda name: f"{name}-2")
    assert batch_key(extractor, batch) != before


@pytest.mark.usefixtures("cluster", "small_batches")
def test_force_extracts_again_without_reading_shards(
    chats: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[RayExtractor] = []

    class Recorded(RayExtractor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(ray_engine, "RayExtractor", Recorded)
    directory = tmp_path / "index"
    with pytest.raises(KeyboardInterrupt):
        ingest_into(
            directory, chats[:1], IngestOptions(engine="ray", workers=2), progress=Interrupt(60)
        )
    assert list((directory / SHARDS).glob("*.parquet"))
    ingest_into(directory, chats[:1], IngestOptions(engine="ray", workers=2, force=True))
    assert made[-1].batches_reused == 0
    assert made[-1].batches_extracted == -(-_lines(chats[0]) // BATCH)


# -- 6. which shards a finished ingest removes -------------------------------------------------


@pytest.mark.usefixtures("cluster", "small_batches")
def test_a_finished_ingest_keeps_another_files_shards(chats: list[Path], tmp_path: Path) -> None:
    """The second file's ingest was interrupted; an ingest of the first alone finishes
    and leaves the second's shards, which its next ingest reads."""
    directory, shards = tmp_path / "index", tmp_path / "index" / SHARDS
    options = IngestOptions(engine="ray", workers=2)
    with pytest.raises(KeyboardInterrupt):
        ingest_into(directory, chats[1:], options, progress=Interrupt(60))
    others = set(shards.glob("*.parquet"))
    assert others
    ingest_into(directory, chats[:1], options)
    assert set(shards.glob("*.parquet")) == others
    ingest_into(directory, chats, options)  # the second file, from its shards
    assert not shards.exists()


@pytest.mark.usefixtures("cluster", "small_batches")
def test_spent_shards_go_after_a_resume_and_after_a_local_ingest(
    chats: list[Path], tmp_path: Path
) -> None:
    """An ingest interrupted after its first file was written leaves shards of both; the
    next (local) ingest writes the second file: no shard is left to resume from."""
    directory, shards = tmp_path / "index", tmp_path / "index" / SHARDS
    extractor = RayExtractor(
        SpacyExtractor(workers=1), workers=2, shards=shards, batch_messages=BATCH
    )
    try:
        with Index(directory) as index, pytest.raises(KeyboardInterrupt):
            index.ingest(chats, extractor=extractor, progress=Interrupt(_lines(chats[0]) + 50))
    finally:
        extractor.close()
    assert len(list(shards.glob("*.parquet"))) > -(-_lines(chats[0]) // BATCH)
    with Index(directory) as index:
        index.ingest(chats, workers=1)
    assert not shards.exists()


# -- 7. bench perf -q ---------------------------------------------------------------------------


def test_bench_perf_quiet_children_print_no_progress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from structrag.bench import perf

    seen: list[object] = []

    def measure(*args: Any, progress: object = None, **kwargs: Any) -> dict[str, Any]:
        seen.append(progress)
        return {}

    monkeypatch.setattr(perf, "measure_corpus", measure)
    spec = {"paths": [], "directory": "x", "workers": 1, "questions": 1, "budget": 10, "seed": 0}
    perf._child([json.dumps({**spec, "quiet": True})])
    perf._child([json.dumps(spec)])
    assert seen[0] is None and seen[1] is not None
    capsys.readouterr()


class _FakeRay:
    def __init__(self) -> None:
        self.shut = 0

    def shutdown(self) -> None:
        self.shut += 1


@pytest.mark.parametrize("kind", ["ignored", "own", "default"])
def test_ctrl_c_while_ray_starts_is_what_the_process_made_it(kind: str) -> None:
    import os
    import signal

    from structrag.extract.ray_engine import _interrupt_deferred

    calls: list[int] = []
    handlers: dict[str, Any] = {
        "ignored": signal.SIG_IGN,
        "own": lambda number, frame: calls.append(number),
        "default": signal.default_int_handler,
    }
    before = signal.signal(signal.SIGINT, handlers[kind])
    fake = _FakeRay()
    try:
        if kind == "default":
            with pytest.raises(KeyboardInterrupt), _interrupt_deferred(fake):  # type: ignore[arg-type]
                os.kill(os.getpid(), signal.SIGINT)
            assert fake.shut == 1
        else:
            with _interrupt_deferred(fake):  # type: ignore[arg-type]
                os.kill(os.getpid(), signal.SIGINT)
            assert fake.shut == 0
            assert calls == ([signal.SIGINT] if kind == "own" else [])
        assert signal.getsignal(signal.SIGINT) is handlers[kind]
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_quiet_printer_trims_only_raylet_log_tails_and_is_put_back() -> None:
    import importlib

    from structrag.extract.ray_engine import _quiet_cluster_errors

    worker: Any = importlib.import_module("ray._private.worker")
    original = worker.print_to_stdstream
    seen: list[list[str]] = []
    worker.print_to_stdstream = lambda data, ignore_prefix: seen.append(data["lines"])
    try:
        restore = _quiet_cluster_errors()
        died = ["A worker died.\n  pid=1\n  Actor id: abc"]
        tail = ["The raylet died.\n Last 20 lines of the Raylet logs:\n a\n b"]
        worker.print_to_stdstream({"pid": "raylet", "lines": died}, False)
        worker.print_to_stdstream({"pid": "raylet", "lines": tail}, False)
        assert seen == [died, ["The raylet died."]]
        restore()
        assert not getattr(worker.print_to_stdstream, "structrag_quiet", False)
    finally:
        worker.print_to_stdstream = original
