"""`skillvc check`: the gate applied to any change, as CI runs it on a pull request."""

# The imported ``loopback`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture
from test_eval import (  # noqa: F401 - demo is a fixture
    GOOD_RULE,
    HARMFUL_RULE,
    _loopback_target,
    add_rules,
    commit_all,
    count_events,
    demo,
    format_repo,
    run_cli,
    trained,
)

from skillvc.review.evaluation import compare
from skillvc.workspace.workspace import open_workspace


def test_check_passes_an_improving_edit(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_rules(demo, GOOD_RULE)
    commit_all(demo, "Exchange wrong items")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("a  HEAD~1 (") and lines[1].startswith("b  the working tree: ")
    assert lines[2].startswith("paired difference (b - a) on val: +0.167")
    assert lines[-1] == "OK: the skill scores 0.500 on val, 0.167 above 0.333 at HEAD~1."
    assert result.stderr == ""


def test_check_fails_a_regressing_edit_with_exit_7(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained(demo)
    add_rules(demo, HARMFUL_RULE)
    c = compare(open_workspace(demo), "main", None, "val")
    assert c.diff is not None and c.a_mean is not None and c.b_mean is not None and c.diff < 0
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main")
    assert result.exit_code == 7
    assert result.stderr.splitlines() == [
        f"Error: The skill scores {c.b_mean:.3f} on val, {-c.diff:.3f} below {c.a_mean:.3f} "
        "at main.",
        "Hint: Look at the flipped items, or pass --allow-drop to tolerate a small drop.",
    ]
    assert f"flipped down (b breaks): {len(c.down)}  " in result.stdout
    # Everything was evaluated before: the check itself made no model call.
    assert "(0 made, 60 answered from the log)" in result.stdout


def test_allow_drop(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained(demo)
    add_rules(demo, HARMFUL_RULE)
    c = compare(open_workspace(demo), "main", None, "val")
    drop = -(c.diff or 0.0)
    assert drop > 0.02
    above = run_cli(demo, monkeypatch, "check", "--base", "main", "--allow-drop", f"{drop + 0.01}")
    assert above.exit_code == 0, above.output
    assert above.stdout.splitlines()[-1] == (
        f"OK: the skill scores {c.b_mean:.3f} on val, {drop:.3f} below {c.a_mean:.3f} at main, "
        f"within the allowed drop of {drop + 0.01:g}."
    )
    exact = run_cli(demo, monkeypatch, "check", "--base", "main", "--allow-drop", repr(drop))
    assert exact.exit_code == 0, "a drop equal to the allowance passes"
    below = run_cli(demo, monkeypatch, "check", "--base", "main", "--allow-drop", f"{drop - 0.01}")
    assert below.exit_code == 7
    assert f"(allowed drop {drop - 0.01:g})." in below.stderr
    negative = run_cli(demo, monkeypatch, "check", "--base", "main", "--allow-drop", "-0.1")
    assert negative.exit_code == 2


def test_check_json_and_head_revision(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained(demo)
    add_rules(demo, HARMFUL_RULE)
    commit_all(demo, "Escalate gold customers")
    git(demo, "checkout", "-q", "HEAD~2")  # the working tree is not what --head checks
    result = run_cli(demo, monkeypatch, "check", "--base", "main~1", "--head", "main", "--json")
    assert result.exit_code == 7
    data = json.loads(result.stdout)
    assert data["verdict"] == "regression" and data["allow_drop"] == 0.0
    assert (data["base"], data["head"], data["split"]) == ("main~1", "main", "val")
    comparison = data["comparison"]
    assert comparison["a"]["sha"] == git(demo, "rev-parse", "main~1")
    assert comparison["b"]["sha"] == git(demo, "rev-parse", "main")
    assert comparison["diff"] < 0 and comparison["flipped"]["down"]
    assert data["message"].startswith("The skill scores ") and data["message"].endswith("main~1.")
    positional = run_cli(demo, monkeypatch, "check", "-q", "--base", "main~1", "main", "--json")
    again = json.loads(positional.stdout)
    assert positional.exit_code == 7 and again["head"] == "main"
    assert (again["message"], again["comparison"]["diff"]) == (data["message"], comparison["diff"])
    both = run_cli(demo, monkeypatch, "check", "--base", "main~1", "--head", "main", "main")
    assert both.exit_code == 2
    assert "Error: Give the revision to check once: skillvc check --base BASE REV." in both.stderr
    same = run_cli(demo, monkeypatch, "check", "--base", "HEAD", "--json")
    assert same.exit_code == 0
    assert json.loads(same.stdout)["verdict"] == "pass"
    assert json.loads(same.stdout)["message"].endswith(", the same as 0.333 at HEAD.")


def test_check_in_a_fresh_clone(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI has the repository and skillvc.toml only: no .skillvc/, no earlier evaluations."""
    add_rules(demo, GOOD_RULE)
    commit_all(demo, "Exchange wrong items")
    clone = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(demo), str(clone))
    assert not (clone / ".skillvc").exists()
    result = run_cli(clone, monkeypatch, "check", "--base", "HEAD~1")
    assert result.exit_code == 0, result.output
    assert "(60 made, 0 answered from the log)" in result.stdout
    assert count_events(clone, "evaluation") == 2 and count_events(clone, "model.call") == 60
    again = run_cli(clone, monkeypatch, "check", "--base", "HEAD~1")
    assert again.exit_code == 0 and again.stdout == result.stdout.replace(
        "(60 made, 0 answered from the log)", "(0 made, 60 answered from the log)"
    )
    assert count_events(clone, "evaluation") == 2 and count_events(clone, "model.call") == 60
    assert git(clone, "status", "--porcelain") == ""  # .skillvc/ is ignored, nothing else written


def test_check_bad_input(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_cli(demo, monkeypatch, "check", "--base", "nope")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: 'nope' does not name a commit in ")
    result = run_cli(demo, monkeypatch, "check")
    assert result.exit_code == 2 and "Missing option '--base'" in result.stderr
    result = run_cli(demo, monkeypatch, "check", "--base", "HEAD", "--split", "dev")
    assert result.exit_code == 2 and "'dev' is not one of 'val', 'test', 'train'" in result.stderr


def test_check_refuses_to_decide_when_calls_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    _loopback_target(loopback, monkeypatch)
    root = format_repo(tmp_path / "repo", "promptfoo", "openai:loopback-sim")
    for _ in range(10):
        loopback.error(503, "overloaded")
    result = run_cli(root, monkeypatch, "check", "-q", "--base", "HEAD")
    assert result.exit_code == 6
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        "Error: 10 of 10 target calls failed evaluating HEAD on val, so the check cannot decide "
        "(first error: target call to openai:loopback-sim failed: "
    )
    assert "overloaded" in first


def test_check_passes_a_change_that_adds_the_skill(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = demo / "skills" / "acme-returns" / "SKILL.md"
    text = skill.read_text()
    git(demo, "rm", "-q", str(skill.relative_to(demo)))
    commit_all(demo, "no skill yet")
    base = git(demo, "rev-parse", "HEAD")
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(text)
    git(demo, "add", str(skill.relative_to(demo)))
    commit_all(demo, "add the skill")
    result = run_cli(demo, monkeypatch, "check", "--base", base)
    assert result.exit_code == 0, result.output
    assert "does not exist at" in result.output and "nothing to compare" in result.output
