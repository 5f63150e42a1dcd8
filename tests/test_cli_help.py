"""Every ``--help`` of the command line reads as plain text: no reStructuredText markup
from the docstrings (````x````, ``:func:`x```), every option says what it does, and the
ingest formats listed are the importers' own."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from structrag.cli import cli
from structrag.importers import FORMATS


def _tree(
    command: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    """``structrag`` and every command and sub-command under it, with their paths."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.commands[name]
            found.extend(_tree(sub, (*path, name)))
    return found


COMMANDS = _tree(cli)
#: rst markup that means something in a docstring and nothing on a terminal.
MARKUP = re.compile(r"``|:[a-z]+(?::[a-z]+)?:`|`_(?!\w)")


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_tree_has_every_command() -> None:
    paths = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "ingest", "conversations", "sql", "memory add", "knowledge search"} <= paths
    assert {"bench serve", "bench recall"} <= paths


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "-")
def test_help_has_no_markup(path: tuple[str, ...]) -> None:
    text = _help(path)
    leaked = [line.strip() for line in text.splitlines() if MARKUP.search(line)]
    assert not leaked, f"structrag {' '.join(path)} --help shows markup: {leaked}"


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "-")
def test_every_option_has_help(path: tuple[str, ...]) -> None:
    command = dict(COMMANDS)[path]
    missing = [
        option.opts[0]
        for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.help
    ]
    assert not missing, f"structrag {' '.join(path)}: options without help: {missing}"


def test_ingest_help_names_every_format() -> None:
    text = " ".join(_help(("ingest",)).split())
    listed = text.split("Formats: ", 1)[1].split(". Every input", 1)[0]
    named = re.findall(r"(?:^|, | and )(\w+)", re.sub(r" \([^)]*\)", "", listed))
    assert named == list(FORMATS), listed
    from structrag.cli.ingest import _FORMAT_NOTES  # the notes in brackets: of formats

    assert set(_FORMAT_NOTES) <= set(FORMATS)


@pytest.mark.parametrize(("word", "option"), [("version", "--version"), ("help", "--help")])
def test_an_option_given_as_a_command_is_pointed_at(word: str, option: str) -> None:
    result = CliRunner().invoke(cli, [word])
    assert result.exit_code == 2
    assert f"No such command '{word}'. Did you mean 'structrag {option}'?" in result.output
    assert "conversations" not in result.output
    # a word near a command still gets click's suggestion
    near = CliRunner().invoke(cli, ["conversation"])
    assert near.exit_code == 2 and "Did you mean 'conversations'?" in near.output
