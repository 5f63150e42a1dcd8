"""What users read matches what exists: every CLI command and every view of the schema is
documented in the README, every ranking setting is in its table, and every file the README
links to exists."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import click
import pytest

from structrag.cli import cli
from structrag.query.settings import RankingSettings
from structrag.store.duckdb.schema import schema_sql

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[str]:
    found = []
    for name, command in group.commands.items():
        found.append(" ".join((*prefix, name)))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
    return found


@pytest.mark.parametrize("command", _commands(cli))
def test_every_command_is_in_the_readme(command: str) -> None:
    assert f"structrag {command}" in README, f"the README does not show `structrag {command}`"


VIEWS = re.findall(r"CREATE OR REPLACE VIEW (\w+)", schema_sql())


def test_the_schema_has_views() -> None:
    assert {"v_messages", "v_entities", "v_actions", "v_topics"} <= set(VIEWS)


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_is_in_the_readme(view: str) -> None:
    assert f"`{view}`" in README, f"the README does not document the view {view}"


@pytest.mark.parametrize("setting", [f.name for f in fields(RankingSettings)])
def test_every_ranking_setting_is_in_the_readme(setting: str) -> None:
    assert f"`{setting}`" in README, f"the README's settings table lacks {setting}"


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\(([^)#:]+)\)", README))))
def test_relative_links_exist(link: str) -> None:
    assert (ROOT / link).exists(), link
