"""The analytics notebooks in ``notebooks/`` run end to end: on an index of the bundled
example, and on LoCoMo's ``locomo_dev.json`` when it is there (``STRUCTRAG_LOCOMO``, default
``../shared/data/locomo/locomo_dev.json`` from the repository root). Each must run without
errors, write its PNG plots, and print something the index confirms."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from structrag import Index

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PNG = b"\x89PNG\r\n\x1a\n"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("pandas")


def locomo_path() -> tuple[Path | None, str]:
    """The LoCoMo file to run the notebooks on, or None and why not."""
    given = os.environ.get("STRUCTRAG_LOCOMO")
    path = Path(given) if given else ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
    if path.is_file():
        return path, ""
    how = "STRUCTRAG_LOCOMO" if given else "the default path (set STRUCTRAG_LOCOMO to another)"
    return None, f"no LoCoMo data at {path} ({how})"


@pytest.fixture(scope="module")
def locomo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, why = locomo_path()
    if path is None:
        pytest.skip(why)
    directory = tmp_path_factory.mktemp("locomo") / "index"
    with Index(directory) as ix:
        ix.ingest([path], workers=2)
    return directory


@pytest.fixture(scope="module")
def memories_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example with an agent's memories and a document beside it: their
    knowledge is in the views too (``memory_table``), and the notebooks leave it out."""
    directory = tmp_path_factory.mktemp("memories") / "index"
    with Index(directory) as ix:
        ix.ingest([ROOT / "examples" / "friends_chat.jsonl"])
        mem = ix.memory(agent="bot")
        for text in ("I have a dog named Biscuit.", "My dog Biscuit hates the rain."):
            mem.add(text, user="Marco", room="dm-marco")  # each also makes a fact
        ix.knowledge.add("Biscuit is a beagle. Biscuit likes the park.", shared=True)
    return directory


@pytest.fixture(params=["example", "locomo", "memories"])
def dataset(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(name, index directory): ``example_index`` comes from conftest."""
    name: str = request.param
    directory: Path = request.getfixturevalue(f"{name}_index")
    return name, directory


def run(notebook: Path, index: Path, figures: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Execute a notebook against an index; returns its text outputs (stdout, plain text)."""
    monkeypatch.setenv("STRUCTRAG_INDEX", str(index))
    monkeypatch.setenv("STRUCTRAG_FIGURES", str(figures))
    monkeypatch.delenv("STRUCTRAG_CONVERSATION", raising=False)
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    outputs: list[Any] = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # No warnings either (matplotlib's "No artists with labels found to put in legend" for
    # a speaker without mentions, say): they are printed to stderr, under the cell.
    warned = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    assert not [text for text in warned if "Warning" in text], warned
    assert any("image/png" in o.get("data", {}) for o in outputs)  # drawn inline as well
    # A kernel under load may flush one print's words in two stream outputs: streams are
    # joined as written, other outputs each on lines of their own.
    return "".join(
        o.text if o.output_type == "stream" else f"\n{o.get('data', {}).get('text/plain', '')}\n"
        for o in outputs
    )


def printed(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text, flags=re.MULTILINE)
    assert found, f"the notebook did not print {pattern!r}"
    return found


def column(index: Path, query: str, *params: Any) -> set[str]:
    """The first column of a query over the index, as strings."""
    with Index(index, read_only=True) as ix:
        return {str(row[0]) for row in ix.sql(query, params)}


def entity_names(index: Path, conversation: str | None = None) -> set[str]:
    return column(
        index,
        "SELECT DISTINCT name_lower FROM v_entities WHERE ? IS NULL OR conversation = ?",
        conversation,
        conversation,
    )


def check_who_talks(text: str, index: Path, dataset: str) -> None:
    top = printed(r"^most mentioned entity: (.+) \((\d+) messages\)$", text)
    assert top[1].lower() in entity_names(index)
    mentions = "SELECT DISTINCT conversation || '/' || message_id FROM v_entities " + (
        "WHERE name_lower = ? AND extractor <> 'metadata'"
    )
    said = column(index, mentions + " AND memory_table = 'messages'", top[1].lower())
    assert int(top[2]) == len(said)  # messages of conversations, not facts or documents
    if dataset == "memories":
        assert len(column(index, mentions, top[1].lower())) > len(said)
    speakers = column(index, "SELECT DISTINCT speaker FROM v_messages WHERE speaker IS NOT NULL")
    assert all(s in text for s in speakers)  # every speaker has a row in the tables
    if dataset in ("example", "memories"):
        assert (top[1], top[2]) == ("Biscuit", "7" if dataset == "example" else "9")


def check_entity_graph(text: str, index: Path, dataset: str) -> None:
    conversation = printed(r"^conversation: (.+)$", text)[1]
    central = printed(r"^most central entity: (.+)$", text)[1]
    assert central.lower() in entity_names(index, conversation)
    communities = int(printed(r"^(\d+) communities, modularity", text)[1])
    assert communities >= 2
    if dataset in ("example", "memories"):
        assert conversation == "friends"


def check_sql_over_views(text: str, index: Path, dataset: str) -> None:
    question = printed(r"^question: (.+) \(conversation (.+)\)$", text)
    answer = printed(r"^answer message: (\S+)$", text)[1]
    conversation, message_id = answer.split("/", 1)
    assert conversation == question[2]
    asked = printed(r"^ask's messages: (.+)$", text)[1].split(", ")
    assert answer in asked
    with Index(index, read_only=True) as ix:
        assert ix.show(message_id, conversation=conversation)["id"] == message_id
    if dataset in ("example", "memories"):
        assert (question[1], answer) == ("When did Marco adopt Biscuit?", "friends/m11")


Check = Callable[[str, Path, str], None]
NOTEBOOK_CHECKS: dict[str, tuple[list[str], Check]] = {
    "who_talks_about_what": (
        ["trends", "entities_per_speaker", "topics_per_speaker"],
        check_who_talks,
    ),
    "entity_graph": (["centrality", "graph"], check_entity_graph),
    "sql_over_views": (["top_verbs", "entity_lifelines"], check_sql_over_views),
}


@pytest.mark.parametrize("stem", sorted(NOTEBOOK_CHECKS))
def test_notebook_runs_on_an_index(
    stem: str, dataset: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, index = dataset
    figures = tmp_path / "figures"
    text = run(NOTEBOOKS / f"{stem}.ipynb", index, figures, monkeypatch)
    expected, check = NOTEBOOK_CHECKS[stem]
    written = sorted(p.name for p in figures.iterdir())
    assert written == sorted(f"{stem}-{figure}.png" for figure in expected)
    for png in figures.iterdir():
        data = png.read_bytes()
        assert data[:8] == PNG and len(data) > 5000, png
    check(text, index, name)


def test_an_index_without_conversations_is_named_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an index of documents only, the notebooks that read conversations say so and
    what to do, not a pandas traceback deep inside."""
    index = tmp_path / "docs"
    with Index(index) as ix:
        ix.knowledge.add("Biscuit is a beagle who likes the park.", shared=True)
    for stem in ("who_talks_about_what", "entity_graph", "sql_over_views"):
        with pytest.raises(nbclient.exceptions.CellExecutionError) as failed:
            run(NOTEBOOKS / f"{stem}.ipynb", index, tmp_path / "figures", monkeypatch)
        assert f"{index} holds no conversation messages" in str(failed.value), stem
        assert "structrag ingest FILE --db" in str(failed.value)


def test_top_actions_are_the_speakers_own(
    example_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sql_over_views' "top actions per speaker" counts the actions whose subject is the
    speaker ("I adopted a puppy"), not every action in the speaker's messages ("the dog
    chased every pigeon" in Sam's, "Ana says" in Priya's), and its example span is one
    with the usual object."""
    monkeypatch.setenv("STRUCTRAG_INDEX", str(example_index))
    monkeypatch.setenv("STRUCTRAG_FIGURES", str(tmp_path / "figures"))
    nb = nbformat.read(NOTEBOOKS / "sql_over_views.ipynb", as_version=4)
    top = next(i for i, c in enumerate(nb.cells) if c.source.startswith("top_actions = "))
    nb.cells = [
        *nb.cells[: top + 1],
        nbformat.v4.new_code_cell('print(top_actions.to_json(orient="records"))'),
    ]
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    rows = json.loads(nb.cells[-1].outputs[0]["text"])
    pairs = {(r["speaker"], r["verb"]) for r in rows}
    with Index(example_index, read_only=True) as ix:
        own = ix.sql("SELECT DISTINCT speaker, verb FROM v_actions WHERE subject = speaker")
    assert pairs <= {(str(speaker), str(verb)) for speaker, verb in own}
    assert ("Marco", "adopt") in pairs and ("Priya", "bake") in pairs
    assert not {("Sam", "chase"), ("Priya", "say")} & pairs
    for r in rows:
        if r["usual_object"]:
            assert r["usual_object"].lower() in r["example"].lower(), r


def test_a_notebook_lets_an_ingest_in(
    example_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook's kernel keeps the index open between cells: an ingest meanwhile goes
    ahead (a DuckDB connection of the notebook's own would hold the file until the kernel
    ends)."""
    index = tmp_path / "index"
    shutil.copytree(example_index, index)
    monkeypatch.setenv("STRUCTRAG_INDEX", str(index))
    monkeypatch.setenv("STRUCTRAG_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", "5")
    nb = nbformat.read(NOTEBOOKS / "sql_over_views.ipynb", as_version=4)
    nb.cells = nb.cells[:2]  # the kernel opens the index and reads it, and stays
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3")
    with client.setup_kernel():
        client.execute_cell(nb.cells[1], 1)
        more = tmp_path / "more.jsonl"
        more.write_text(
            json.dumps({"id": "x1", "speaker": "Zed", "text": "I bought a red kayak."}) + "\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "structrag", "ingest", str(more), "--db", str(index), "-q"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        nb.cells.append(nbformat.v4.new_code_cell('print(len(sql("SELECT * FROM v_messages")))'))
        client.execute_cell(nb.cells[2], 2)
    assert nb.cells[2].outputs[0]["text"].strip() == "47"  # and it reads the new message


def test_every_notebook_is_tested() -> None:
    found = {p.stem for p in NOTEBOOKS.glob("*.ipynb")} - {"bench_report"}
    assert found == set(NOTEBOOK_CHECKS)


@pytest.mark.parametrize("stem", sorted(NOTEBOOK_CHECKS))
def test_committed_notebook_is_clean(stem: str) -> None:
    """No outputs (they would go stale, and could hold LoCoMo text); valid Python; only
    the public API of structrag."""
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert not cell.outputs and cell.execution_count is None
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] != "structrag" or node.module == "structrag"
            if isinstance(node, ast.Import):
                assert not [a for a in node.names if a.name.startswith("structrag.")]
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("store", "text_index", "engine"), cell.source
