"""`skillvc report`, `diff` and `blame` on a trained demo repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli
from skillvc.training.loop import RunSummary

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture(scope="module")
def trained(demo_trained: tuple[Path, RunSummary]) -> tuple[Path, RunSummary]:
    return demo_trained  # read-only: every test works on its own copy (``repo``)


@pytest.fixture
def repo(trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, RunSummary]:
    path = tmp_path / "repo"
    shutil.copytree(trained[0], path)
    monkeypatch.chdir(path)
    return path, trained[1]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_report_markdown_for_a_pull_request(repo) -> None:
    path, summary = repo
    out = invoke("report").output
    assert out.startswith(f"## skillvc training run `{summary.run_id}` (finished)")
    assert f"| val (n=30) | {summary.baseline_val:.3f} | {summary.best_val:.3f} |" in out
    assert f"| test (n=30) | {summary.baseline_test:.3f} | {summary.test:.3f} |" in out
    assert f"{summary.accepted} accepted, {summary.rejected} rejected" in out
    assert "offline simulator, a toy world, not a model" in out
    table_rows = [
        line for line in out.splitlines() if line.startswith("| step ") and "epoch" not in line
    ]
    assert len(table_rows) == summary.steps
    assert "### Accepted edits" in out and "*why:*" in out
    # Steps and slow updates are counted apart; both kinds of candidate are listed.
    accepted = summary.accepted + summary.slow_updates_accepted
    rejected = summary.rejected + summary.slow_updates_rejected
    assert out.count("<details><summary>Diff</summary>") == accepted
    assert f"### Rejected candidates ({rejected})" in out
    assert out.count("<details>") == out.count("</details>")
    assert out.count("```diff") == (out.count("```") - 2) // 2  # and one ```mermaid


def test_report_json_has_steps_with_commits(repo) -> None:
    _, summary = repo
    data = json.loads(invoke("report", "--format", "json").output)
    assert data["run"] == summary.run_id and data["status"] == "finished"
    assert data["scores"]["best_val"] == summary.best_val
    decisions = [s["decision"] for s in data["steps"]]
    assert decisions.count("rejected") == summary.rejected + summary.slow_updates_rejected
    accepted = [s for s in data["steps"] if s["decision"] == "accepted"]
    assert all(s["commit"] and s["patch"].startswith("--- a/") for s in accepted)


def test_report_unknown_run(repo) -> None:
    result = CliRunner().invoke(cli, ["report", "--run", "run-nope"])
    assert result.exit_code == 3
    assert "Error: No run run-nope in the event log." in result.output


def test_diff_between_checkpoints_with_scores(repo) -> None:
    path, summary = repo
    base = git(path, "rev-list", "--max-parents=0", "HEAD")
    out = invoke("diff", base, f"skillvc/{summary.run_id}/best").output
    assert f"A: {base}  (val {summary.baseline_val:.3f})" in out
    assert f"B: skillvc/{summary.run_id}/best  (val {summary.best_val:.3f})" in out
    assert f"--- a/{SKILL}" in out and "\n+" in out
    data = json.loads(invoke("diff", base, "--json").output)
    assert data["b"] == "worktree" and data["scores"]["a"]["val"] == summary.baseline_val
    same = invoke("diff", "HEAD").output
    assert "(no change to the skill)" in same


def test_blame_separates_training_lines_from_human_ones(repo) -> None:
    path, summary = repo
    skill = path / SKILL
    skill.write_text(skill.read_text() + "\nHuman footnote.\n")
    git(path, "commit", "-qam", "a human line")
    lines = json.loads(invoke("blame", "--json").output)
    by_text = {entry["text"]: entry for entry in lines}
    assert by_text["Human footnote."]["human"] is True
    assert by_text["Human footnote."]["author"] == "Test Author"
    assert by_text["## Policies"]["human"] is True  # from the seed commit
    trained_lines = [entry for entry in lines if not entry["human"]]
    assert trained_lines and all(entry["run"] == summary.run_id for entry in trained_lines)
    step_lines = [entry for entry in trained_lines if entry["kind"] == "step"]
    assert step_lines and all(entry["val_gain"] > 0 for entry in step_lines)
    text = invoke("blame").output
    assert "human (Test Author)" in text and f"{summary.run_id} step" in text


def test_show_follows_a_commit_trailer_back_to_its_evidence(repo) -> None:
    path, summary = repo
    body = git(path, "log", "-1", "--format=%B", f"skillvc/{summary.run_id}/best")
    marker = next(
        line.split(": ", 1)[1] for line in body.splitlines() if line.startswith("Skillvc-Event: ")
    )
    shown = json.loads(invoke("show", marker, "--json").output)
    assert shown["event"]["type"] == "gate"
    assert shown["entry"]["commit"] == git(path, "rev-parse", f"skillvc/{summary.run_id}/best")
    assert shown["entry"]["patch"].startswith("--- a/")
    missing = CliRunner().invoke(cli, ["show", f"{summary.run_id}/99999"])
    assert missing.exit_code == 3 and f"No event 99999 in run {summary.run_id}." in missing.output


def test_show_accepts_git_revisions_and_summarises_runs(repo) -> None:
    path, summary = repo
    best = json.loads(invoke("show", f"skillvc/{summary.run_id}/best", "--json").output)
    assert best["entry"]["commit"] == git(path, "rev-parse", f"skillvc/{summary.run_id}/best")
    seed = git(path, "rev-list", "--max-parents=0", "HEAD")
    # Changed deliberately (issue 24): a commit that touches the skill but is no training
    # step (here the seed commit, which adds it) is shown, not refused.
    human = CliRunner().invoke(cli, ["show", seed])
    assert human.exit_code == 0 and human.output.startswith(f"commit {seed[:10]}")
    assert "a hand commit: no edit events" in human.output
    run = json.loads(invoke("show", summary.run_id, "--json").output)
    assert run["run"]["accepted"] == summary.accepted
    assert len(run["entries"]) == (
        summary.accepted
        + summary.rejected
        + summary.slow_updates_accepted
        + summary.slow_updates_rejected
    )
    text = invoke("show", summary.run_id).output
    assert text.startswith("run ") and f"{summary.run_id}  finished" in text
