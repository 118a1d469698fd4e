"""Consistent flags: --nl and --csv on table commands, `diff` with no argument, positional REV
for `blame` (with --rev kept as a hidden alias)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git
from helpers import copy_and_enter

from skillvc.cli import cli

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture(scope="module")
def trained(demo_trained_one_epoch: tuple[Path, object]) -> Path:
    return demo_trained_one_epoch[0]  # read-only: every test works on its own copy (``repo``)


@pytest.fixture
def repo(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copy_and_enter(trained, tmp_path / "demo", monkeypatch)


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize(
    "command", [["runs"], ["log"], ["log", "--rejected", "-n", "2"], ["eval", "-q"]]
)
def test_nl_and_csv_hold_the_json_rows(repo: Path, command: list[str]) -> None:
    data = json.loads(run(*command, "--json").stdout)
    rows = data["items"] if command[0] == "eval" else data
    assert rows
    assert [json.loads(line) for line in run(*command, "--nl").stdout.splitlines()] == rows

    table = csv_rows(run(*command, "--csv").stdout)
    assert list(table[0]) == list(rows[0])  # the header: the JSON keys, in order
    assert len(table) == len(rows)
    for row, obj in zip(table, rows, strict=True):
        for key, value in obj.items():
            if value is None:
                assert row[key] == ""
            elif isinstance(value, (dict, list)):
                assert json.loads(row[key]) == value
            else:
                assert row[key] == str(value)


def test_eval_compare_csv_pairs_the_items(repo: Path) -> None:
    data = json.loads(run("eval", "-q", "--compare", "HEAD", "--json").stdout)
    table = csv_rows(run("eval", "-q", "--compare", "HEAD", "--csv").stdout)
    assert [r["id"] for r in table] == [i["id"] for i in data["a"]["items"]]
    assert list(table[0])[:4] == ["id", "a_hard", "a_soft", "a_error"]


def test_json_nl_and_csv_exclude_each_other(repo: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "--json", "--csv"])
    assert result.exit_code == 2
    assert result.stderr.endswith("Error: Give one of --json, --nl and --csv.\n")


def test_diff_without_argument_shows_the_uncommitted_change(repo: Path) -> None:
    clean = run("diff").stdout
    assert clean.startswith("A: HEAD  (val ") and clean.endswith("(no change to the skill)\n")
    path = repo / SKILL
    path.write_text(path.read_text() + "- Be brief.\n")
    changed = run("diff").stdout
    assert changed.splitlines()[1] == "B: working tree  (no score recorded; skillvc eval)"
    assert "+- Be brief." in changed
    assert changed == run("diff", "HEAD").stdout


def test_blame_takes_a_positional_revision(repo: Path) -> None:
    seed = git(repo, "rev-list", "--max-parents=0", "HEAD")
    at_seed = run("blame", seed).stdout
    assert at_seed.splitlines()[0].startswith(f"{seed[:8]} human")
    assert run("blame", "--rev", seed).stdout == at_seed  # the old spelling still works
    assert run("blame", seed, SKILL).stdout == at_seed
    assert run("blame", SKILL).stdout == run("blame").stdout == run("blame", "HEAD").stdout
    assert run("blame").stdout != at_seed
    both = CliRunner().invoke(cli, ["blame", "--rev", seed, "HEAD"])
    assert both.exit_code == 2
    assert "Error: Give the revision once: skillvc blame REV [SKILL]." in both.stderr
