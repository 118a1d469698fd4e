"""`skillvc apply`: a hand-written diff becomes recorded edits and one commit, or nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git

from skillvc.cli import cli
from skillvc.store import open_store

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture
def repo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = copy_repo(demo_seed, tmp_path / "repo")
    monkeypatch.chdir(path)
    return path


def diff_of(repo: Path, old: str, new: str) -> Path:
    """A `git diff` of the skill with ``old`` replaced by ``new``; the file is restored."""
    skill = repo / SKILL
    text = skill.read_text()
    skill.write_text(text.replace(old, new))
    patch = repo.parent / "change.diff"
    patch.write_text(git(repo, "diff", "--", SKILL) + "\n")
    skill.write_text(text)
    return patch


def test_a_patch_becomes_recorded_edits_and_one_commit(repo: Path) -> None:
    patch = diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.")
    before = git(repo, "rev-parse", "HEAD")
    result = CliRunner().invoke(cli, ["apply", str(patch), "-m", "Shorter style rule"])
    assert result.exit_code == 0, result.output
    assert "1 edit(s) recorded" in result.output
    assert git(repo, "rev-parse", "HEAD~1") == before
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == SKILL
    assert "Keep the reply short.\n" in (repo / SKILL).read_text()
    assert git(repo, "status", "--porcelain") == ""
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query("SELECT event_id, source, content FROM proposed_edits")
    assert [(r["source"], r["content"]) for r in rows] == [("human", "Keep the reply short.\n")]
    assert f"Skillvc-Event: {rows[0]['event_id']}" in git(repo, "log", "-1", "--format=%B")
    blame = json.loads(CliRunner().invoke(cli, ["blame", "--json"]).output)
    line = next(b for b in blame if b["text"] == "Keep the reply short.")
    assert line["human"] is True and line["commit"] == git(repo, "rev-parse", "HEAD")


def test_a_patch_that_no_longer_applies_writes_nothing(repo: Path) -> None:
    patch = diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.")
    skill = repo / SKILL
    skill.write_text(skill.read_text().replace("Keep the reply short and friendly.", "Be brief."))
    git(repo, "commit", "-qam", "someone else changed the line")
    head = git(repo, "rev-parse", "HEAD")
    result = CliRunner().invoke(cli, ["apply", str(patch)])
    assert result.exit_code == 5
    assert f"Error: The patch does not apply to {SKILL}: missing" in result.output
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""


def test_a_patch_into_a_protected_region_is_refused(repo: Path) -> None:
    skill = repo / SKILL
    skill.write_text(
        skill.read_text() + "\n<!-- skillvc:protected slow-update -->\nOld.\n"
        "<!-- /skillvc:protected slow-update -->\n"
    )
    git(repo, "commit", "-qam", "a protected region")
    patch = diff_of(repo, "\nOld.\n", "\nNew.\n")
    result = CliRunner().invoke(cli, ["apply", str(patch)])
    assert result.exit_code == 5 and "protected" in result.output
    assert "Old." in skill.read_text()
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM proposed_edits")[0]["n"] == 0
