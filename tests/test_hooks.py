"""`skillvc validate`, `skillvc hooks install/uninstall`, and the hooks run by real git.

Every hook here is executed by git itself (`git commit`, `git push` to a local bare repo);
nothing of skillvc is mocked. The pre-push tests that pin the base revision install the hook
with a recording stand-in for the Python interpreter, because `skillvc check` scores skills
and what matters there is which base the hook hands it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from conftest import SAMPLE_SKILL, git
from helpers import pushed_demo

from skillvc.cli import cli
from skillvc.core.resources import read_text
from skillvc.integrations.hooks import install_hooks, render_hook
from skillvc.repo.skillrepo import SkillRepo

SKILL = "skills/support/SKILL.md"
CONFIG = f'[skill]\npath = "{SKILL}"\n'
BAD_NAME = SAMPLE_SKILL.replace("name: support", "name: Support")
HAND_EDIT = SAMPLE_SKILL.replace("Keep answers short.", "Keep answers very short.")
NAME_PROBLEM = f"{SKILL}: frontmatter name 'Support' must be 1-64 characters of a-z, 0-9 and '-'."
PROTECTED_PROBLEM = (
    f"{SKILL}: protected region 'slow-update' differs from HEAD; protected regions are written "
    "by skillvc's slow update, not by hand."
)
PROTECTED_HINT = (
    "Hint: Undo the hand edits inside the protected regions and stage again, or, for a "
    "deliberate edit, commit with SKILLVC_ALLOW_PROTECTED=1 (or run validate with "
    "--allow-protected)."
)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch):
    def invoke(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Result:
        monkeypatch.chdir(cwd)
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def repo(skill_repo: Path) -> Path:
    """The sample skill repo with a committed skillvc.toml naming its skill."""
    (skill_repo / "skillvc.toml").write_text(CONFIG)
    git(skill_repo, "add", "skillvc.toml")
    git(skill_repo, "commit", "-q", "-m", "config")
    return skill_repo


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def commit(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """A real `git commit`, which runs the installed hooks; never raises on failure."""
    return subprocess.run(
        ["git", "commit", "-q", "-m", "change", *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD")


def stage_skill(root: Path, text: str) -> str:
    """Stage ``text`` as the skill file; the commit HEAD is at before committing it."""
    before = head(root)
    write(root, SKILL, text)
    git(root, "add", SKILL)
    return before


def hooks_path(root: Path) -> Path:
    return root / ".git" / "hooks"


# -- skillvc validate ---------------------------------------------------------------------------


def test_validate_checks_the_configured_skill(repo: Path, run) -> None:
    result = run(repo, "validate")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Checked 1 file: no problems.\n"
    assert run(repo, "validate", "-q").stdout == ""


def test_validate_without_config_checks_every_skill_file(skill_repo: Path, run) -> None:
    write(skill_repo, "other/notes/SKILL.md", BAD_NAME)
    result = run(skill_repo, "validate")
    assert result.exit_code == 5
    assert result.stdout == (
        "other/notes/SKILL.md: frontmatter name 'Support' must be 1-64 characters of a-z, 0-9 "
        "and '-'.\n"
    )
    assert result.stderr.startswith("Error: 1 problem in 1 skill file.\n")


def test_validate_without_config_or_paths_says_what_to_do(git_repo: Path, run) -> None:
    skill_repo = git_repo
    result = run(skill_repo, "validate")
    assert result.exit_code == 3
    assert result.stderr == (
        f"Error: No skillvc.toml in {skill_repo}.\n"
        "Hint: Run 'skillvc init' in the repository first.\n"
    )


def test_validate_paths_prints_one_line_per_problem_and_exits_5(repo: Path, run) -> None:
    write(repo, SKILL, BAD_NAME.replace("Keep answers short.", "x" * 16_000))
    size = len((repo / SKILL).read_bytes())
    result = run(repo / "skills", "validate", "support/SKILL.md")
    assert result.exit_code == 5
    # No earlier version to compare with: the size budget is a warning (it blocks growth only).
    assert result.stdout.splitlines() == [NAME_PROBLEM]
    assert result.stderr == (
        f"warning: {SKILL}: the file is {size:,} bytes, over the size budget of 16,000 bytes.\n"
        "Error: 1 problem in 1 skill file.\n"
        "Hint: Fix the files listed above (when committing: stage them and commit again).\n"
    )
    assert run(repo, "validate", "--max-bytes", "20000", SKILL).stdout == NAME_PROBLEM + "\n"


def test_validate_a_directory_checks_every_skill_file_under_it(repo: Path, run) -> None:
    write(repo, ".cursor/rules/py.mdc", "---\nalwaysApply: sometimes\n---\nx\n")
    write(repo, ".github/instructions/py.instructions.md", "---\napplyTo: '**/*.py'\n---\nx\n")
    write(repo, "notes/free.md", "---\n- not: checked\n---\n")
    result = run(repo, "validate", ".", "--json")
    assert result.exit_code == 5
    assert yaml.safe_load(result.stdout) == {
        "ok": False,
        "files": [
            ".cursor/rules/py.mdc",
            ".github/instructions/py.instructions.md",
            SKILL,
        ],
        "problems": [
            {
                "path": ".cursor/rules/py.mdc",
                "rule": "cursor-always-apply",
                "message": ".cursor/rules/py.mdc: frontmatter alwaysApply must be true or "
                "false, not 'sometimes'.",
            }
        ],
        "warnings": [],
    }


def test_validate_usage_errors(repo: Path, run) -> None:
    missing = run(repo, "validate", "nope.md")
    assert missing.exit_code == 3
    assert missing.stderr.startswith("Error: nope.md does not exist.\n")
    write(repo, "skills/new/SKILL.md", SAMPLE_SKILL)
    unstaged = run(repo, "validate", "--staged", "skills/new/SKILL.md")
    assert unstaged.exit_code == 3
    assert unstaged.stderr == (
        "Error: skills/new/SKILL.md is not in the index.\n"
        "Hint: Stage it with 'git add' first, or leave out --staged to check the file.\n"
    )


def test_validate_staged_paths_checks_the_index_version_of_those(repo: Path, run) -> None:
    """What the pre-commit framework runs: the files it passes, as staged, against HEAD."""
    write(repo, SKILL, HAND_EDIT)
    write(repo, "notes/other/SKILL.md", BAD_NAME)
    git(repo, "add", SKILL, "notes/other/SKILL.md")
    write(repo, SKILL, SAMPLE_SKILL)  # undone on disk, still hand-edited in the index
    result = run(repo / "skills", "validate", "--staged", "support/SKILL.md")
    assert result.exit_code == 5
    assert result.stdout == PROTECTED_PROBLEM + "\n"  # only the path given
    assert run(repo, "validate", "--staged", "notes").stdout == (
        "notes/other/SKILL.md: frontmatter name 'Support' must be 1-64 characters of a-z, 0-9 "
        "and '-'.\n"
    )


def test_validate_staged_reads_the_index_not_the_working_tree(repo: Path, run) -> None:
    write(repo, SKILL, BAD_NAME)
    assert run(repo, "validate", "--staged").stdout == "Checked 0 files: no problems.\n"
    git(repo, "add", SKILL)
    write(repo, SKILL, SAMPLE_SKILL)  # fixed on disk, still broken in the index
    result = run(repo, "validate", "--staged")
    assert result.exit_code == 5
    assert result.stdout == NAME_PROBLEM + "\n"


def test_validate_staged_refuses_hand_edits_of_protected_regions(repo: Path, run) -> None:
    write(repo, SKILL, HAND_EDIT)
    git(repo, "add", SKILL)
    result = run(repo, "validate", "--staged")
    assert result.exit_code == 5
    assert result.stdout == PROTECTED_PROBLEM + "\n"
    assert result.stderr == f"Error: 1 problem in 1 skill file.\n{PROTECTED_HINT}\n"
    assert run(repo, "validate", "--staged", "--allow-protected").exit_code == 0
    for value, code in (("1", 0), ("yes", 0), ("0", 5), ("", 5)):
        assert (
            run(repo, "validate", "--staged", env={"SKILLVC_ALLOW_PROTECTED": value}).exit_code
            == code
        )


def test_validate_staged_picks_skill_files_and_the_configured_skill(git_repo: Path, run) -> None:
    write(git_repo, "skillvc.toml", '[skill]\npath = "prompts/agent.md"\n')
    write(git_repo, "prompts/agent.md", "---\n[broken\n---\n")
    write(git_repo, "prompts/other.md", "---\n[broken\n---\n")
    write(git_repo, "rules/a.mdc", "---\nglobs: 1\n---\n")
    # A new file may bring its own protected regions: there was nothing to protect yet.
    write(git_repo, "skills/support/SKILL.md", SAMPLE_SKILL)
    git(git_repo, "add", ".")
    result = run(git_repo, "validate", "--staged", "--json")  # the first commit: unborn HEAD
    assert result.exit_code == 5
    report = yaml.safe_load(result.stdout)
    assert report["files"] == ["prompts/agent.md", "rules/a.mdc", "skills/support/SKILL.md"]
    assert [(p["path"], p["rule"]) for p in report["problems"]] == [
        ("prompts/agent.md", "frontmatter-yaml"),
        ("rules/a.mdc", "cursor-globs"),
    ]


# -- skillvc hooks install / uninstall ----------------------------------------------------------


def test_install_writes_the_shipped_hook_with_this_interpreter(repo: Path, run) -> None:
    result = run(repo, "hooks", "install")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Installed the pre-commit hook at .git/hooks/pre-commit.\n"
    hook = hooks_path(repo) / "pre-commit"
    text = hook.read_text()
    shipped = read_text("hooks", "pre-commit")
    assert "# skillvc-hook: pre-commit" in shipped.splitlines()[:3]
    assert text == shipped.replace("'@SKILLVC_PYTHON@'", sys.executable)
    assert text == render_hook("pre-commit")
    assert hook.stat().st_mode & stat.S_IXUSR
    assert not (hooks_path(repo) / "pre-push").exists()

    again = run(repo, "hooks", "install")
    assert again.stdout == "The pre-commit hook at .git/hooks/pre-commit is up to date.\n"
    assert hook.read_text() == text
    assert not (hooks_path(repo) / "pre-commit.legacy").exists()

    hook.write_text(text.replace(sys.executable, "/old/venv/bin/python"))
    assert run(repo, "hooks", "install").stdout == (
        "Updated the pre-commit hook at .git/hooks/pre-commit.\n"
    )
    assert hook.read_text() == text


def test_install_pre_push_and_uninstall(repo: Path, run) -> None:
    result = run(repo, "hooks", "install", "--pre-push")
    assert result.stdout.splitlines() == [
        "Installed the pre-commit hook at .git/hooks/pre-commit.",
        "Installed the pre-push hook at .git/hooks/pre-push.",
    ]
    pre_push = hooks_path(repo) / "pre-push"
    assert pre_push.read_text() == render_hook("pre-push")
    assert pre_push.stat().st_mode & stat.S_IXUSR
    assert "# skillvc-hook: pre-push" in read_text("hooks", "pre-push").splitlines()[:3]

    removed = run(repo, "hooks", "uninstall")
    assert removed.stdout.splitlines() == [
        "Removed the pre-commit hook at .git/hooks/pre-commit.",
        "Removed the pre-push hook at .git/hooks/pre-push.",
    ]
    assert not (hooks_path(repo) / "pre-commit").exists() and not pre_push.exists()
    assert run(repo, "hooks", "uninstall").stdout.splitlines() == [
        "No skillvc pre-commit hook was installed.",
        "No skillvc pre-push hook was installed.",
    ]


def test_existing_hook_is_kept_chained_and_restored(repo: Path, run) -> None:
    legacy_text = "#!/bin/sh\necho legacy ran >> legacy.log\n"
    existing = write(hooks_path(repo), "pre-commit", legacy_text)
    existing.chmod(0o755)
    result = run(repo, "hooks", "install")
    assert result.stdout == (
        "Installed the pre-commit hook at .git/hooks/pre-commit. Your previous hook is kept as "
        ".git/hooks/pre-commit.legacy and runs first.\n"
    )
    assert (hooks_path(repo) / "pre-commit.legacy").read_text() == legacy_text
    assert run(repo, "hooks", "install").stdout.endswith("is up to date.\n")  # legacy untouched
    assert (hooks_path(repo) / "pre-commit.legacy").read_text() == legacy_text

    write(repo, "README.md", "hello\n")
    git(repo, "add", "README.md")
    assert commit(repo).returncode == 0
    assert (repo / "legacy.log").read_text() == "legacy ran\n"

    # The kept hook still runs and can veto; it fails the commit before skillvc's check.
    (hooks_path(repo) / "pre-commit.legacy").write_text(
        "#!/bin/sh\necho 'legacy says no' >&2\nexit 3\n"
    )
    before = head(repo)
    write(repo, "README.md", "hello again\n")
    git(repo, "add", "README.md")
    blocked = commit(repo)
    assert blocked.returncode != 0
    assert "legacy says no" in blocked.stderr
    assert head(repo) == before

    (hooks_path(repo) / "pre-commit.legacy").write_text(legacy_text)
    assert run(repo, "hooks", "uninstall").stdout.splitlines()[0] == (
        "Removed the pre-commit hook; restored your previous hook at .git/hooks/pre-commit."
    )
    assert (hooks_path(repo) / "pre-commit").read_text() == legacy_text
    assert not (hooks_path(repo) / "pre-commit.legacy").exists()


def test_hook_in_the_way_with_legacy_taken_needs_force(repo: Path, run) -> None:
    write(hooks_path(repo), "pre-commit", "#!/bin/sh\necho newer\n").chmod(0o755)
    write(hooks_path(repo), "pre-commit.legacy", "#!/bin/sh\necho older\n").chmod(0o755)
    refused = run(repo, "hooks", "install")
    assert refused.exit_code == 4
    assert refused.stderr == (
        "Error: .git/hooks/pre-commit.legacy already exists, so the pre-commit hook at "
        ".git/hooks/pre-commit cannot be kept aside.\n"
        "Hint: Merge the two hooks by hand, or pass --force to keep the old pre-commit.legacy "
        "as pre-commit.legacy.N (which then no longer runs).\n"
    )
    assert (hooks_path(repo) / "pre-commit").read_text() == "#!/bin/sh\necho newer\n"

    forced = run(repo, "hooks", "install", "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout == (
        "Installed the pre-commit hook at .git/hooks/pre-commit. Your previous hook is kept as "
        ".git/hooks/pre-commit.legacy and runs first. The older pre-commit.legacy is kept as "
        "pre-commit.legacy.1 and no longer runs.\n"
    )
    assert (hooks_path(repo) / "pre-commit.legacy").read_text() == "#!/bin/sh\necho newer\n"
    assert (hooks_path(repo) / "pre-commit.legacy.1").read_text() == "#!/bin/sh\necho older\n"


def test_uninstall_leaves_other_hooks_alone(repo: Path, run) -> None:
    write(hooks_path(repo), "pre-commit", "#!/bin/sh\nexit 0\n")
    assert run(repo, "hooks", "uninstall").stdout.splitlines()[0] == (
        "The pre-commit hook at .git/hooks/pre-commit is not skillvc's; left it."
    )
    assert (hooks_path(repo) / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


def test_install_refuses_when_core_hooks_path_points_elsewhere(repo: Path, run) -> None:
    git(repo, "config", "core.hooksPath", ".githooks")
    result = run(repo, "hooks", "install")
    assert result.exit_code == 4
    line = f"{sys.executable} -m skillvc validate --staged || exit 1"
    assert result.stderr == (
        "Error: core.hooksPath is set to .githooks, so git does not run hooks from .git/hooks.\n"
        "Hint: Unset it with 'git config --unset core.hooksPath' and install again, or add this "
        f"line to .githooks/pre-commit yourself: {line}\n"
    )
    assert not (hooks_path(repo) / "pre-commit").exists()
    # Pointing at the default directory is no conflict.
    git(repo, "config", "core.hooksPath", ".git/hooks")
    assert run(repo, "hooks", "install").exit_code == 0


def test_install_refuses_a_hook_that_is_a_directory(repo: Path, run) -> None:
    """Kept aside as pre-commit.legacy it "ran first" and failed every commit."""
    (hooks_path(repo) / "pre-commit").mkdir(parents=True)
    result = run(repo, "hooks", "install")
    assert result.exit_code == 4
    assert result.stderr == (
        "Error: .git/hooks/pre-commit is a directory, not a hook git can run.\n"
        "Hint: Move it out of .git/hooks, then run 'skillvc hooks install' again.\n"
    )
    assert not (hooks_path(repo) / "pre-commit.legacy").exists()


@pytest.mark.parametrize("kind", ["file", "dangling symlink"])
def test_install_refuses_a_hooks_directory_that_is_not_one(repo: Path, run, kind: str) -> None:
    hooks = hooks_path(repo)
    shutil.rmtree(hooks, ignore_errors=True)
    if kind == "file":
        hooks.write_text("not a directory")
    else:
        hooks.symlink_to(repo / "no-such-dir")
    result = run(repo, "hooks", "install")  # was a crash (FileExistsError, exit 70)
    assert result.exit_code == 4
    assert result.stderr == (
        f"Error: {hooks} is not a directory, so git cannot run hooks from it.\n"
        "Hint: Move it aside (or fix the link), then run 'skillvc hooks install' again.\n"
    )


def test_workflow_command_prints_the_template(repo: Path, run) -> None:
    result = run(repo, "hooks", "workflow")
    assert result.stdout == read_text("templates", "github/skillvc-check.yml")


# -- the pre-commit hook run by git commit -------------------------------------------------------


@pytest.fixture
def hooked(repo: Path) -> Path:
    install_hooks(repo)
    return repo


def test_commit_of_a_good_edit_passes(hooked: Path) -> None:
    write(hooked, SKILL, SAMPLE_SKILL.replace("Be polite.", "Be polite and brief."))
    git(hooked, "add", SKILL)
    result = commit(hooked)
    assert result.returncode == 0, result.stderr
    assert result.stdout == result.stderr == ""  # the hook is quiet when all is well


def test_commit_with_bad_frontmatter_is_blocked(hooked: Path) -> None:
    before = stage_skill(hooked, BAD_NAME)
    result = commit(hooked)
    assert result.returncode != 0
    assert NAME_PROBLEM in result.stderr  # git sends hook output to stderr
    assert "Error: 1 problem in 1 skill file." in result.stderr
    assert head(hooked) == before
    # `git commit -a` stages into a temporary index; the hook reads that one.
    git(hooked, "reset", "-q")
    assert commit(hooked, "-a").returncode != 0
    assert head(hooked) == before


def test_commit_of_a_hand_edited_protected_region_is_blocked_unless_allowed(hooked: Path) -> None:
    before = stage_skill(hooked, HAND_EDIT)
    blocked = commit(hooked)
    assert blocked.returncode != 0
    assert PROTECTED_PROBLEM in blocked.stderr
    assert PROTECTED_HINT in blocked.stderr
    assert head(hooked) == before

    allowed = commit(hooked, env={"SKILLVC_ALLOW_PROTECTED": "1"})
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert head(hooked) != before


def test_skillvc_commits_do_not_run_hooks(hooked: Path) -> None:
    """A slow update rewrites a protected region through skillvc's plumbing, not `git commit`."""
    with SkillRepo(hooked) as skill_repo:
        sha = skill_repo.commit_file(
            SKILL,
            HAND_EDIT.encode(),
            "Slow update",
            trailers={"Skillvc-Run": "r1", "Skillvc-Event": "7"},
        )
    assert head(hooked) == sha


def test_hook_falls_back_to_skillvc_on_path(repo: Path, tmp_path: Path) -> None:
    """A hand copy of the shipped file (placeholder kept) finds skillvc on PATH."""
    hook = write(hooks_path(repo), "pre-commit", read_text("hooks", "pre-commit"))
    hook.chmod(0o755)
    bindir = tmp_path / "bin"
    write(bindir, "skillvc", f'#!/bin/sh\nexec {sys.executable} -m skillvc "$@"\n').chmod(0o755)
    write(repo, SKILL, BAD_NAME)
    git(repo, "add", SKILL)
    result = commit(repo, env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode != 0
    assert NAME_PROBLEM in result.stderr


# -- the pre-push hook run by git push ----------------------------------------------------------


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    """A local bare remote `origin` that already has main."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    return bare


def push(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "push", "-q", "origin", *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


@pytest.fixture
def recorder(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in interpreter that logs its arguments and exits with $RECORDER_EXIT."""
    log = tmp_path / "calls.log"
    script = write(
        tmp_path / "bin",
        "python",
        f'#!/bin/sh\necho "$*" >> {log}\nexit "${{RECORDER_EXIT:-0}}"\n',
    )
    script.chmod(0o755)
    return script, log


def new_commit(root: Path, name: str) -> str:
    write(root, name, name + "\n")
    git(root, "add", name)
    git(root, "commit", "-q", "--no-verify", "-m", name)
    return head(root)


def test_pre_push_checks_against_the_remote_tip_or_the_merge_base(
    repo: Path, remote: Path, recorder: tuple[Path, Path]
) -> None:
    python, log = recorder
    install_hooks(repo, pre_push=True, python=str(python))
    tip = head(repo)
    pushed = new_commit(repo, "a.txt")
    assert push(repo, "main").returncode == 0
    assert (
        log.read_text() == f"-m skillvc check --base {tip} --head {pushed} --allow-config-change\n"
    )

    # A new branch has no remote tip: its base is the merge-base with the default branch.
    log.unlink()
    main_tip = head(repo)
    git(repo, "switch", "-q", "-c", "feature")
    feature = new_commit(repo, "b.txt")
    git(repo, "switch", "-q", "main")  # the pushed commit is checked, not the checkout
    result = push(repo, "feature")
    assert result.returncode == 0, result.stderr
    assert (
        log.read_text()
        == f"-m skillvc check --base {main_tip} --head {feature} --allow-config-change\n"
    )
    git(repo, "switch", "-q", "feature")

    # A regression (exit 7) refuses the push; deleting a branch checks nothing.
    log.unlink()
    new_commit(repo, "c.txt")
    refused = push(repo, "feature", env={"RECORDER_EXIT": "7"})
    assert refused.returncode != 0
    assert git(remote, "rev-parse", "feature") != head(repo)
    assert push(repo, "--delete", "feature", env={"RECORDER_EXIT": "7"}).returncode == 0
    assert log.read_text().count("check") == 1


def test_pre_push_keeps_and_feeds_an_existing_hook(
    repo: Path, remote: Path, recorder: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _ = recorder
    seen = tmp_path / "legacy-stdin"
    write(hooks_path(repo), "pre-push", f"#!/bin/sh\ncat > {seen}\n").chmod(0o755)
    changes = install_hooks(repo, pre_push=True, python=str(python))
    assert [c.action for c in changes] == ["installed", "installed"]
    assert (hooks_path(repo) / "pre-push.legacy").exists()
    sha = new_commit(repo, "a.txt")
    assert push(repo, "main").returncode == 0
    assert seen.read_text().split()[:2] == ["refs/heads/main", sha]

    (hooks_path(repo) / "pre-push.legacy").write_text("#!/bin/sh\nexit 1\n")
    new_commit(repo, "b.txt")
    assert push(repo, "main").returncode != 0


@pytest.mark.skipif("check" not in cli.commands, reason="'skillvc check' is not registered yet")
def test_pre_push_runs_the_real_check(tmp_path: Path) -> None:
    root, bare = pushed_demo(tmp_path)
    install_hooks(root, pre_push=True)
    new_commit(root, "NOTES.txt")  # the skill is unchanged, so the check passes
    result = push(root, "main")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skillvc: checking refs/heads/main against" in result.stderr
    assert git(bare, "rev-parse", "main") == head(root)


def test_hook_without_skillvc_says_how_to_reinstall_it_never_by_index_name(
    repo: Path, tmp_path: Path
) -> None:
    install_hooks(repo, python=str(tmp_path / "gone" / "python"))
    (repo / SKILL).write_text(HAND_EDIT)
    git(repo, "add", SKILL)
    git_dir = os.path.dirname(shutil.which("git") or "/usr/bin/git")
    path = os.pathsep.join(dict.fromkeys([git_dir, "/usr/bin", "/bin"]))
    assert shutil.which("skillvc", path=path) is None
    result = commit(repo, env={"PATH": path, "PYTHONPATH": ""})
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == (
        "Reinstall it from its repository (pip install "
        "'git+https://github.com/OWNER/skillvc@COMMIT'; the 'skillvc' on the package index is not "
        "this project) and run 'skillvc hooks install' again, or skip once with --no-verify."
    )
    assert "pip install skillvc" not in result.stderr
