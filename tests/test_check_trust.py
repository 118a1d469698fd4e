"""`skillvc check` trusts the base, not the head: a pull request cannot control its own gate.

Each test is one way a pull request could fool or exploit the check (issue 9, "The pull
request controls its own gate"): the verdict must come from the base's skillvc.toml and task
files, no code or server named only by the head may be reached, and every change of what decides
the verdict is reported and fails unless a trusted caller allows it.
"""

# The imported ``loopback`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from conftest import git
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture
from test_eval import (  # noqa: F401 - demo is a fixture
    HARMFUL_RULE,
    SKILL,
    _loopback_target,
    add_rules,
    commit_all,
    demo,
    format_repo,
    run_cli,
    trained,
)

from skillvc.review.evaluation import compare
from skillvc.workspace.workspace import open_workspace

CONFIG_HINT = (
    "Hint: The check judged the change by the base's settings and tasks; a maintainer who "
    "accepts the new ones reruns it with --allow-config-change."
)


def pull_request(repo: Path) -> None:
    """Start the pull request's branch from main (the base)."""
    git(repo, "checkout", "-q", "-b", "pr")


def edit_config(repo: Path, old: str, new: str) -> None:
    path = repo / "skillvc.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_pr_side_scorer_and_harness_never_run(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PR that swaps in its own python scorer (and a command harness) to pass a worse skill:
    neither runs, the base's scorer finds the regression, and the change is reported."""
    trained(demo)
    pull_request(demo)
    add_rules(demo, HARMFUL_RULE)
    marker = tmp_path / "pr-code-ran"
    module = f"pr_scorer_{uuid.uuid4().hex[:8]}"
    (demo / f"{module}.py").write_text(
        f"open({str(marker)!r}, 'w').write('scorer')\n\ndef grade(output, item):\n    return 1.0\n"
    )
    edit_config(
        demo,
        'scorer = "exact"',
        f'scorer = "python"\nscorer_options = {{ function = "{module}:grade" }}',
    )
    touch = f"open({str(marker)!r}, 'w').write('harness')"
    edit_config(
        demo,
        'model = "sim:support"\ntemperature = 0.0',
        f'model = "sim:support"\ntemperature = 0.0\nharness = "command"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(touch)}]',
    )
    git(demo, "add", ".")
    commit_all(demo, "Pass every item")

    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--json")
    assert not marker.exists()
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "regression"  # judged by the base's exact scorer
    assert data["comparison"]["diff"] < 0
    assert data["config_changes"] == [
        "target.command",
        "target.harness",
        "tasks.scorer",
        "tasks.scorer_options.function",
    ]
    assert data["changes_allowed"] is False
    assert result.stderr.splitlines() == [
        "Error: The change edits skillvc.toml (target.command, target.harness, tasks.scorer, "
        "tasks.scorer_options.function), which the check takes from main only.",
        CONFIG_HINT,
    ]

    # A trusted caller may accept the new settings; the verdict is still the base's.
    allowed = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--allow-config-change")
    assert not marker.exists()
    assert allowed.exit_code == 7
    assert allowed.stderr.startswith("Error: The skill scores ")
    assert "skillvc.toml differs at the working tree: target.command, target.harness" in (
        allowed.stdout
    )

    # In eval the repository's own config runs as configured (the user's own repo).
    run_cli(demo, monkeypatch, "eval", "--split", "val")
    assert marker.exists()


def test_a_base_scorer_module_edited_by_the_pr_runs_as_committed_at_base(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base's python scorer is imported from the base's tree, not the PR's copy."""
    trained(demo)
    module = f"grader_{uuid.uuid4().hex[:8]}"
    grader = demo / f"{module}.py"
    grader.write_text(
        "from skillvc.tasks.scorers import extract_answer, normalize_answer\n\n"
        "def grade(output, item):\n"
        "    got = normalize_answer(extract_answer(output))\n"
        "    return any(got == normalize_answer(t) for t in item.targets)\n"
    )
    edit_config(
        demo,
        'scorer = "exact"',
        f'scorer = "python"\nscorer_options = {{ function = "{module}:grade" }}',
    )
    git(demo, "add", ".")
    commit_all(demo, "A python scorer")
    pull_request(demo)
    add_rules(demo, HARMFUL_RULE)
    marker = tmp_path / "pr-code-ran"
    grader.write_text(f"def grade(output, item):\n    open({str(marker)!r}, 'w')\n    return 1.0\n")
    commit_all(demo, "Grade generously")

    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--json")
    assert not marker.exists()
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "regression" and data["config_changes"] == []
    assert result.stderr.startswith("Error: The skill scores ")


def _second_server() -> LoopbackServer:
    return LoopbackServer().start()


def test_pr_side_base_url_gets_no_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """A PR that points [target] base_url at its own server: the key never reaches it."""
    _loopback_target(loopback, monkeypatch)
    monkeypatch.delenv("OPENAI_BASE_URL")
    key = "sk-ci-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("CI_MODEL_KEY", key)
    root = format_repo(tmp_path / "repo", "promptfoo", "openai:loopback-sim")
    edit_config(
        root,
        "max_retries = 0",
        f'max_retries = 0\nbase_url = "{loopback.url}/v1"\napi_key_env = "CI_MODEL_KEY"',
    )
    commit_all(root, "The base's server")
    attacker = _second_server()
    try:
        attacker.responder = loopback.responder
        edit_config(root, f"{loopback.url}/v1", f"{attacker.url}/v1")
        with (root / SKILL).open("a", encoding="utf-8") as f:
            f.write("\n- Answer in one word.\n")
        result = run_cli(root, monkeypatch, "check", "-q", "--base", "HEAD")
        assert result.exit_code == 7, result.output
        assert result.stderr.splitlines()[0] == (
            "Error: The change edits skillvc.toml (target.base_url), which the check takes from "
            "HEAD only."
        )
        allowed = run_cli(
            root, monkeypatch, "check", "-q", "--base", "HEAD", "--allow-config-change"
        )
        # Allowed, the change is judged on the base's server: this edit scores worse there.
        assert allowed.exit_code == 7 and allowed.stderr.startswith("Error: The skill scores ")
        assert attacker.requests == []
        assert len(loopback.requests) == 20  # 10 val items, base and head, cached the 2nd time
        assert {r.headers["authorization"] for r in loopback.requests} == {f"Bearer {key}"}
        assert key not in result.output + allowed.output
    finally:
        attacker.stop()


def test_pr_that_removes_the_val_items_it_breaks_is_reported_and_fails(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained(demo)
    pull_request(demo)
    add_rules(demo, HARMFUL_RULE)
    broken = compare(open_workspace(demo), "main", None, "val").down
    assert broken
    val = demo / "evals" / "val.jsonl"
    rows = [line for line in val.read_text().splitlines() if json.loads(line)["id"] not in broken]
    val.write_text("".join(f"{row}\n" for row in rows))
    commit_all(demo, "Escalate gold customers; drop outdated tickets")
    # Judged by its own task set, the change would not look like a regression.
    own = compare(open_workspace(demo), "main", None, "val")
    assert own.diff is not None and own.diff >= 0

    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main")
    assert result.exit_code == 7
    assert f"val items at the working tree: removed {', '.join(broken)}." in result.stdout
    assert "Task files that differ at the working tree: evals/val.jsonl." in result.stdout
    assert "The verdict uses skillvc.toml and the task files of main." in result.stdout
    assert result.stdout.splitlines()[-1].startswith("The skill scores ")
    assert result.stderr.splitlines() == [
        "Error: The change edits task file evals/val.jsonl, which the check takes from main only.",
        CONFIG_HINT,
    ]
    data = json.loads(run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--json").stdout)
    assert data["verdict"] == "regression"
    assert data["task_changes"]["val"] == {"added": [], "removed": list(broken), "edited": []}
    assert data["task_changes"]["test"] == {"added": [], "removed": [], "edited": []}
    assert data["task_files_changed"] == ["evals/val.jsonl"]
    assert data["comparison"]["n"] == len(rows) + len(broken)  # the base's val set
    # The same through git: --head names the pull request, whatever the working tree holds.
    git(demo, "checkout", "-q", "main")
    by_rev = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--head", "pr", "--json")
    assert by_rev.exit_code == 7
    assert json.loads(by_rev.stdout)["task_changes"] == data["task_changes"]


def test_renamed_skill_is_compared_not_waved_through(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(demo, "mv", "skills/acme-returns", "skills/acme-refunds")
    edit_config(demo, "skills/acme-returns/SKILL.md", "skills/acme-refunds/SKILL.md")
    git(demo, "add", "skillvc.toml")
    commit_all(demo, "Rename the skill")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1")
    assert result.exit_code == 7, result.output
    assert "nothing to compare" not in result.output
    lines = result.stdout.splitlines()
    assert "skillvc.toml differs at the working tree: skill.path." in lines
    assert (
        "The skill moved at the working tree: skills/acme-returns/SKILL.md -> "
        "skills/acme-refunds/SKILL.md."
    ) in lines
    assert lines[-1].endswith(", the same as 0.333 at HEAD~1.")
    assert result.stderr.splitlines()[0] == (
        "Error: The change edits skillvc.toml (skill.path) and the skill's path "
        "(skills/acme-returns/SKILL.md -> skills/acme-refunds/SKILL.md), which the check takes "
        "from HEAD~1 only."
    )
    allowed = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1", "--allow-config-change")
    assert allowed.exit_code == 0, allowed.output
    # A rename that also makes the skill worse fails even when the rename is allowed.
    (demo / "skills/acme-refunds/SKILL.md").write_text(
        (demo / "skills/acme-refunds/SKILL.md")
        .read_text()
        .replace("## Policies\n\n", f"## Policies\n\n- {HARMFUL_RULE}\n", 1)
    )
    worse = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1", "--allow-config-change")
    assert worse.exit_code == 7 and worse.stderr.startswith("Error: The skill scores ")


def test_deleted_skill_fails(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(demo, "rm", "-q", SKILL)
    commit_all(demo, "Remove the skill")
    for extra in ((), ("--allow-config-change",)):
        result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1", *extra)
        assert result.exit_code == 7
        assert result.stderr.splitlines() == [
            f"Error: The change deletes the skill {SKILL}: it exists at HEAD~1 but not in the "
            "working tree.",
            "Hint: Restore the file, or move it with 'git mv' and point [skill] path in "
            "skillvc.toml at its new place.",
        ]


def test_unreadable_or_hostile_head_config_is_reported_not_used(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (demo / "skillvc.toml").write_text("[[[ not toml")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD", "--json")
    assert result.exit_code == 7
    data = json.loads(result.stdout)
    assert data["config_error"] == "skillvc.toml is not valid TOML"
    assert data["verdict"] == "config_changed" and data["comparison"]["diff"] == 0
    assert result.stderr.startswith("Error: The change edits skillvc.toml, which the check ")

    git(demo, "checkout", "-q", "--", "skillvc.toml")
    edit_config(demo, 'val = "evals/val.jsonl"', 'val = "/etc/passwd"')
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD", "--json")
    data = json.loads(result.stdout)
    assert data["config_changes"] == ["tasks.val"]
    assert data["task_error"] == "[tasks] names /etc/passwd, a path outside the repository"
    assert data["task_files_changed"] == ["/etc/passwd"]
    assert "root:" not in result.output

    git(demo, "rm", "-q", "-f", "skillvc.toml")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD")
    assert result.exit_code == 7
    assert "skillvc.toml is deleted at the working tree." in result.stdout
    assert (
        result.stdout.splitlines()[-1]
        == "OK: the skill scores 0.333 on val, the same as 0.333 at HEAD."
    )


def test_unchanged_config_reports_no_changes(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Comments, spacing and spelled-out defaults are not changes."""
    edit_config(demo, "[train]", "# a comment\n[train]\nmax_failure_rate = 0.25")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "pass"
    assert (data["config_changes"], data["task_files_changed"], data["task_error"]) == (
        [],
        [],
        None,
    )
    assert data["skill"] == {"base": SKILL, "head": SKILL}
    assert set(data["task_changes"]) == {"train", "val", "test"}


def test_no_config_at_base_has_nothing_to_compare(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(demo, "rm", "-q", "--cached", "skillvc.toml")
    commit_all(demo, "No config yet")
    git(demo, "add", "skillvc.toml")
    commit_all(demo, "Add the config")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "pass" and data["comparison"] is None
    assert data["message"] == "OK: skillvc.toml does not exist at HEAD~1; nothing to compare."


def test_event_log_committed_by_the_pr_is_refused(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log answers repeated calls; one that came with the change could hold made-up ones."""
    assert run_cli(demo, monkeypatch, "eval", "--split", "val").exit_code == 0
    pull_request(demo)
    git(demo, "add", "-f", ".skillvc/events.db")
    commit_all(demo, "Cache some answers")
    for args in (("--base", "main"), ("--base", "main", "--head", "pr")):
        result = run_cli(demo, monkeypatch, "check", "-q", *args, "--allow-config-change")
        assert result.exit_code == 4
        assert result.stderr.splitlines() == [
            "Error: .skillvc/ is committed to the repository, so the check cannot trust the "
            "model answers cached in it.",
            "Hint: Untrack it ('git rm -r --cached .skillvc'), commit, and run the check again.",
        ]
