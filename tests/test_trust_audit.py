"""An attacker's second look at `skillvc check` (issue 9, re-checked with new variants).

Each test is one way a pull request could still fool or misuse the check after the first round
of fixes: a symlinked skill, the PR's own ``.gitattributes``, symlinks leading out of the
repository, and strings the PR controls that the check prints.
"""

# The imported ``demo`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from conftest import git
from test_eval import (  # noqa: F401 - demo is a fixture
    HARMFUL_RULE,
    SKILL,
    commit_all,
    demo,
    run_cli,
    trained,
)

OUTSIDE_HINT = (
    "Hint: Use a path relative to the repository root, inside it (not under .git/ or .skillvc/)."
)


def symlink_skill(repo: Path) -> Path:
    """Keep the skill's text in shared/SKILL.md and make the configured path a relative
    symlink to it (the usual layout for ``.claude/skills/``); return the real file."""
    real = repo / "shared" / "SKILL.md"
    real.parent.mkdir()
    git(repo, "mv", SKILL, "shared/SKILL.md")
    os.symlink("../../shared/SKILL.md", repo / SKILL)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "The skill's text lives in shared/")
    return real


def test_a_symlinked_skill_is_checked_by_its_text_not_the_link(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the link's blob compared "../../shared/SKILL.md" with itself (or with the real
    text), so any edit of the real file passed."""
    trained(demo)
    real = symlink_skill(demo)
    git(demo, "checkout", "-q", "-b", "pr")
    text = real.read_text(encoding="utf-8")
    real.write_text(text.replace("## Policies\n\n", f"## Policies\n\n- {HARMFUL_RULE}\n", 1))
    commit_all(demo, "A harmful edit of the real file")

    for args in (["pr"], []):  # the revision, then the working tree
        result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", *args, "--json")
        assert result.exit_code == 7, result.output
        data = json.loads(result.stdout)
        assert data["verdict"] == "regression"
        assert data["comparison"]["a_mean"] > 0.5  # the base's real text, not the link's

    # diff shows the edit of the text (it showed the whole text replaced by the link's).
    diff = run_cli(demo, monkeypatch, "diff", "main", "pr")
    assert diff.exit_code == 0, diff.output
    changed = [line for line in diff.stdout.splitlines() if line[:1] in "+-"]
    assert changed == [f"--- a/{SKILL}", f"+++ b/{SKILL}", f"+- {HARMFUL_RULE}"]

    # eval at a revision reads the same text as in the working tree.
    at_rev = json.loads(run_cli(demo, monkeypatch, "eval", "pr", "--json").stdout)
    worktree = json.loads(run_cli(demo, monkeypatch, "eval", "--json").stdout)
    assert at_rev["mean"] == worktree["mean"]


@pytest.mark.parametrize("target", ["/etc/passwd", "../../.git/config", "../../../outside"])
def test_a_head_skill_symlinked_out_of_the_repository_is_refused(
    demo: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    git(demo, "checkout", "-q", "-b", "pr")
    (demo / SKILL).unlink()
    os.symlink(target, demo / SKILL)
    git(demo, "add", "-A")
    commit_all(demo, "Point the skill elsewhere")

    at_rev = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "pr")
    worktree = run_cli(demo, monkeypatch, "check", "-q", "--base", "main")
    # .git/config is not in the committed tree: as a revision it is a dangling link.
    if target.endswith(".git/config"):
        assert at_rev.exit_code == 7, at_rev.output
        assert at_rev.stderr.startswith(f"Error: The change deletes the skill {SKILL}")
        reason = "is a symlink into .git/ or .skillvc/"
    else:
        assert at_rev.exit_code == 5, at_rev.output
        assert at_rev.stderr.splitlines() == [
            f"Error: {SKILL} in revision pr is a symbolic link that leads out of the "
            "repository or loops.",
            OUTSIDE_HINT,
        ]
        reason = "passes through a symlink that leads out of the repository"
    assert worktree.exit_code == 5, worktree.output
    assert worktree.stderr.splitlines() == [
        f"Error: The working tree names '{SKILL}', which {reason}.",
        OUTSIDE_HINT,
    ]
    assert "root:" not in at_rev.output + worktree.output


def test_the_prs_gitattributes_do_not_rewrite_the_base_tasks(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git falls back to the working tree's .gitattributes when it writes out the base: a PR's
    working-tree-encoding turned the base's task files into another encoding (UTF-7 keeps
    them readable while it rewrites every non-ASCII target)."""
    git(demo, "checkout", "-q", "-b", "pr")
    (demo / "evals" / ".gitattributes").write_text("*.jsonl working-tree-encoding=UTF-16\n")
    # Only the new file: 'add -A' (or 'commit -a') re-reads a task file whose index entry is
    # racily clean (written in the index's second) and dies converting its UTF-8 from UTF-16.
    git(demo, "add", "evals/.gitattributes")
    git(demo, "commit", "-q", "-m", "Re-encode the task files on checkout")

    for args in (["pr"], []):
        result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", *args)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[-1] == (
            "OK: the skill scores 0.333 on val, the same as 0.333 at main."
        )


def test_strings_the_pr_controls_cannot_print_lines_of_their_own(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item id or a skillvc.toml key holding a line break printed a line of the PR's
    choosing, e.g. a GitHub Actions workflow command (``::error::``) or a fake verdict."""
    git(demo, "checkout", "-q", "-b", "pr")
    val = demo / "evals" / "val.jsonl"
    item = json.loads(val.read_text(encoding="utf-8").splitlines()[0])
    item["id"] = "x\n::error::pwned\u2028OK\x1b[2J"
    with val.open("a", encoding="utf-8") as f:
        f.write(json.dumps(item) + "\n")
    config = demo / "skillvc.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + '\n[extra]\n"k\\n::warning::key" = 1\n',
        encoding="utf-8",
    )
    commit_all(demo, "Print lines of my own")

    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "pr")
    assert result.exit_code == 7, result.output
    lines = result.output.splitlines()
    assert not [line for line in lines if line.startswith("::")]
    assert "skillvc.toml differs at pr: extra.k\\n::warning::key." in lines
    assert "val items at pr: added x\\n::error::pwned\\u2028OK\\x1b[2J." in lines
    assert result.stderr.splitlines()[0] == (
        "Error: The change edits skillvc.toml (extra.k\\n::warning::key) and task file "
        "evals/val.jsonl, which the check takes from main only."
    )
    # --json keeps the ids exactly (JSON escapes them itself).
    data = json.loads(
        run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "pr", "--json").stdout
    )
    assert data["task_changes"]["val"]["added"] == ["x\n::error::pwned\u2028OK\x1b[2J"]


def test_validate_prints_one_line_per_problem_whatever_the_path(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow runs `skillvc validate` on the PR's files: a skill path holding a line
    break printed a line of the PR's choosing."""
    folder = demo / "skills" / "x\n::error::pwned"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nBody.\n")
    result = run_cli(demo, monkeypatch, "validate", str(folder / "SKILL.md"))
    assert result.exit_code == 5, result.output
    assert result.stdout.splitlines() == [
        "skills/x\\n::error::pwned/SKILL.md: frontmatter name 'x' must equal its directory "
        "name 'x\\n::error::pwned'."
    ]


@pytest.mark.parametrize("name", [".SkillVC", ".skillvc.", ".skill\u200cvc"])
def test_an_event_log_committed_under_another_spelling_is_refused(
    demo: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A Windows or macOS runner checks .SKILLVC/events.db out where the check reads its log
    (and macOS ignores U+200C in names): made-up answers under another spelling."""
    git(demo, "checkout", "-q", "-b", "pr")
    planted = demo / name / "events.db"
    planted.parent.mkdir()
    planted.write_bytes(b"made-up answers")
    git(demo, "add", "-f", "--", str(planted))
    commit_all(demo, "Cache some answers")
    escaped = name.replace("\u200c", "\\u200c")
    for args in ([], ["pr"]):
        result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", *args)
        assert result.exit_code == 4, result.output
        assert result.stderr.splitlines() == [
            f"Error: {escaped}/ is committed to the repository, so the check cannot trust the "
            "model answers cached in it.",
            f"Hint: Untrack it ('git rm -r --cached {shlex.quote(name)}'), commit, and run the "
            "check again.",
        ]


AGENT = """\
import sys
from skillvc.models import simworld
skill = open(sys.argv[1], encoding="utf-8").read()
task = sys.stdin.read()
# The skill can make this agent fail: on the gold tickets its harmful rule breaks.
if "FAIL-ON-GOLD" in skill and "Tier: gold" in task and "billing-error" not in task:
    sys.exit(1)
print(simworld.answer(skill, task, salt="agent"))
"""


def test_a_head_that_makes_the_target_fail_on_the_items_it_breaks_cannot_pass(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed items are left out of the pairing, and max_failure_rate (0.25) let 7 of 30 fail:
    a skill that makes its agent fail on the items it breaks passed (+0.000 over the 23 left)."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    config = demo / "skillvc.toml"
    text = config.read_text(encoding="utf-8")
    old = 'model = "sim:support"\ntemperature = 0.0'
    assert old in text
    command = json.dumps([sys.executable, str(agent), "{skill_path}"])
    config.write_text(
        text.replace(old, f'model = "command:agent"\nharness = "command"\ncommand = {command}', 1)
    )
    trained(demo)  # commits the config too
    git(demo, "checkout", "-q", "-b", "pr")
    skill = demo / SKILL
    rules = f"## Policies\n\n- {HARMFUL_RULE}\n- FAIL-ON-GOLD\n"
    skill.write_text(skill.read_text(encoding="utf-8").replace("## Policies\n\n", rules, 1))
    commit_all(demo, "Escalate gold tickets")

    result = run_cli(
        demo, monkeypatch, "check", "-q", "--base", "main", "pr", "--allow-drop", "0.1"
    )
    assert result.exit_code == 6, result.output
    assert result.stderr.splitlines() == [
        "Error: 7 val items that main scored failed at pr (ticket-064, ticket-069, ticket-070, "
        "ticket-071, ticket-075 and 2 more), so the check cannot decide: a failed item is left "
        "out of the comparison.",
        "Hint: Run the check again; if the same items fail again, the change makes the target "
        "fail on them ('skillvc eval' lists the errors).",
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [("nan", "nan is not a number"), ("inf", "inf is not in the range 0.0<=x<=1.0")],
)
def test_allow_drop_must_be_a_drop_on_the_0_to_1_scale(
    demo: Path, monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    """--allow-drop nan passed FloatRange and every comparison with it is false: any
    regression passed."""
    git(demo, "checkout", "-q", "-b", "pr")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "main", "--allow-drop", value)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: Invalid value for '--allow-drop': {reason}."


@pytest.mark.parametrize(
    ("option", "path", "reason"),
    [
        ("--train", "../../../etc/passwd", "leads out of the repository"),
        ("--val", "link.jsonl", "passes through a symlink that leads out of the repository"),
        ("--test", ".git/config", "is under .git/ or .skillvc/"),
    ],
)
def test_init_refuses_task_files_outside_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, path: str, reason: str
) -> None:
    """init wrote them into skillvc.toml (exit 0) and only the first eval refused them."""
    repo = tmp_path / "repo"
    (repo / "skills" / "x").mkdir(parents=True)
    (repo / "skills" / "x" / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nBody.\n")
    os.symlink("/etc/passwd", repo / "link.jsonl")
    git(tmp_path, "init", "-q", str(repo))
    result = run_cli(repo, monkeypatch, "init", "--skill", "skills/x/SKILL.md", option, path)
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines() == [
        f"Error: {option} names '{path}', which {reason}.",
        OUTSIDE_HINT,
    ]
    assert not (repo / "skillvc.toml").exists()
