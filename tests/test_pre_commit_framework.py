"""skillvc next to hook managers: the real pre-commit framework, husky's hooksPath, lefthook.

Every commit here is a real ``git commit`` run with a timeout, so a hook that calls itself
fails the test instead of forking until the machine says "Cannot fork".

Offline by construction: ``.pre-commit-hooks.yaml`` says ``language: python``, so pre-commit
builds a virtualenv and runs ``pip install .`` in a clone of the repository. The tests point
pip at nothing (``PIP_NO_INDEX=1``, ``PIP_CONFIG_FILE`` empty) and put this interpreter's
site-packages on ``PYTHONPATH``: pip then finds skillvc's build backend (hatchling, a test
dependency) already there, builds without isolation, installs skillvc alone (``PIP_NO_DEPS``:
its dependencies are on that path) and downloads nothing.
The repository pre-commit clones is a copy of this checkout's package files committed in a
temp dir, so the test does not depend on the checkout's git state. ``PRE_COMMIT_HOME`` is
shared by the session's test processes (pre-commit locks its store while it builds an
environment): the environment is built once, in a few seconds. Those fixtures (``skillvc_repo``,
``pre_commit_home``, ``env``) live in conftest.py, shared with the package tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git
from helpers import pushed_demo

from skillvc import __version__
from skillvc.cli import cli

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60  # seconds; a recursing hook never finishes
GOOD = "---\nname: alpha\ndescription: Handle alpha questions.\n---\nBe precise.\n"
BROKEN = "---\nname: alpha\ndescription: [unclosed\n---\nBe precise.\n"
PROBLEM = "skills/alpha/SKILL.md: frontmatter is not valid YAML"
ENTRY = (
    "  - repo: https://github.com/OWNER/skillvc\n"
    f"    rev: v{__version__}\n"
    "    hooks:\n"
    "      - id: skillvc-validate"
)
REFUSAL = (
    "Error: The pre-commit hook at .git/hooks/pre-commit is run by the pre-commit framework, "
    "so skillvc does not install its own or chain into it; add skillvc to "
    ".pre-commit-config.yaml instead.\n"
    "Hint: Add this entry under 'repos:' in .pre-commit-config.yaml, then run "
    f"'pre-commit install':\n{ENTRY}\n"
)


@pytest.fixture
def project(git_repo: Path, skillvc_repo: tuple[Path, str]) -> Path:
    """A skills repo whose .pre-commit-config.yaml runs skillvc-validate from the copy."""
    path, rev = skillvc_repo
    (git_repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {path}\n    rev: {rev}\n    hooks:\n      - id: skillvc-validate\n"
    )
    write(git_repo, GOOD)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "seed")
    return git_repo


def write(root: Path, text: str) -> None:
    path = root / "skills/alpha/SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def run(root: Path, env: dict[str, str] | None, *args: str) -> subprocess.CompletedProcess:
    """Run ``args`` in its own process group; on timeout the whole group is killed, so a
    recursing hook cannot outlive the test and keep forking."""
    proc = subprocess.Popen(
        list(args),
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


def pre_commit(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run(root, env, sys.executable, "-m", "pre_commit", *args)


def skillvc(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def commit_edit(root: Path, env: dict[str, str], text: str) -> subprocess.CompletedProcess:
    write(root, text)
    git(root, "add", "skills/alpha/SKILL.md")
    return run(root, env, "git", "commit", "-q", "-m", "edit")


def test_pre_commit_install_then_skillvc_refuses_and_commits_work(
    project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pre_commit(project, env, "install").returncode == 0
    framework_hook = (project / ".git/hooks/pre-commit").read_bytes()
    refused = skillvc(project, monkeypatch, "hooks", "install")
    assert refused.exit_code == 4
    assert refused.stderr == REFUSAL
    assert (project / ".git/hooks/pre-commit").read_bytes() == framework_hook
    assert not (project / ".git/hooks/pre-commit.legacy").exists()

    ok = commit_edit(project, env, GOOD.replace("precise", "brief"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = commit_edit(project, env, BROKEN)
    assert broken.returncode == 1
    assert broken.stderr.count(PROBLEM) == 1  # git passes the hooks' output on as stderr
    assert git(project, "log", "--format=%s") == "edit\nseed"


def test_skillvc_install_then_pre_commit_install_runs_each_hook_once(
    project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert skillvc(project, monkeypatch, "hooks", "install").exit_code == 0
    migrated = pre_commit(project, env, "install")
    assert "Running in migration mode" in migrated.stdout  # skillvc's hook is now .legacy

    ok = commit_edit(project, env, GOOD.replace("precise", "brief"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = commit_edit(project, env, BROKEN)
    assert broken.returncode == 1
    # Twice, not endlessly: skillvc's hook once as the framework's legacy hook (it does not
    # chain into itself from there), then the framework's own skillvc-validate.
    assert broken.stderr.count(PROBLEM) == 2
    assert "skillvc validate....." in broken.stderr
    assert git(project, "log", "--format=%s") == "edit\nseed"
    # Installing again is refused too: the hook is the framework's now, and the way to one
    # hook is the framework's entry plus 'pre-commit install -f', which drops the kept hook.
    again = skillvc(project, monkeypatch, "hooks", "install")
    assert again.exit_code == 4
    assert again.stderr == (
        "Error: The pre-commit hook at .git/hooks/pre-commit is run by the pre-commit "
        "framework, which also runs skillvc's hook kept at .git/hooks/pre-commit.legacy (its "
        "migration mode); add skillvc to .pre-commit-config.yaml instead.\n"
        "Hint: Add this entry under 'repos:' in .pre-commit-config.yaml, then run "
        f"'pre-commit install -f' (it drops pre-commit.legacy):\n{ENTRY}\n"
    )
    assert pre_commit(project, env, "install", "-f").returncode == 0
    assert not (project / ".git/hooks/pre-commit.legacy").exists()
    still = commit_edit(project, env, BROKEN.replace("alpha", "alpha2"))
    assert still.returncode == 1
    assert still.stderr.count("skills/alpha/SKILL.md: frontmatter") == 1  # the framework's only


def test_an_earlier_install_that_chained_into_pre_commit_is_refused_and_undone(
    project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What skillvc used to do after 'pre-commit install': the framework's script as .legacy."""
    hooks = project / ".git/hooks"
    assert pre_commit(project, env, "install").returncode == 0
    (hooks / "pre-commit").rename(hooks / "pre-commit.legacy")
    shutil.copy2(ROOT / "hooks/pre-commit", hooks / "pre-commit")
    refused = skillvc(project, monkeypatch, "hooks", "install")
    assert refused.exit_code == 4
    assert refused.stderr.startswith(
        "Error: skillvc's pre-commit hook chains into the pre-commit framework's script kept "
        "at .git/hooks/pre-commit.legacy, which makes the pre-commit framework run itself; "
        "add skillvc to .pre-commit-config.yaml instead.\n"
        "Hint: Run 'skillvc hooks uninstall' (it puts that script back), then: Add this entry"
    )
    assert skillvc(project, monkeypatch, "hooks", "uninstall").exit_code == 0
    ok = commit_edit(project, env, GOOD.replace("precise", "brief"))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_try_repo_runs_skillvc_validate_from_a_local_path(
    skillvc_repo: tuple[Path, str], git_repo: Path, env: dict[str, str]
) -> None:
    write(git_repo, BROKEN)
    good = git_repo / "skills/beta/SKILL.md"
    good.parent.mkdir()
    good.write_text(GOOD.replace("alpha", "beta"))
    (git_repo / "notes.md").write_text("---\n- not: a skill\n---\n")
    git(git_repo, "add", ".")
    result = pre_commit(
        git_repo, env, "try-repo", str(skillvc_repo[0]), "skillvc-validate", "--all-files"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "skillvc validate" in result.stdout
    assert "- exit code: 5" in result.stdout
    problems = [line for line in result.stdout.splitlines() if line.startswith("skills/")]
    assert len(problems) == 1 and problems[0].startswith(PROBLEM)  # beta and notes.md pass

    write(git_repo, GOOD)
    git(git_repo, "add", ".")
    passed = pre_commit(
        git_repo, env, "try-repo", str(skillvc_repo[0]), "skillvc-validate", "--all-files"
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "skillvc validate" in passed.stdout and "Passed" in passed.stdout


def test_a_plain_legacy_hook_runs_once_even_when_it_calls_the_hook_back(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = skill_repo / ".git/hooks"
    count = skill_repo.parent / "legacy-runs"
    (hooks / "pre-commit").write_text(
        f'#!/bin/sh\necho run >> "{count}"\n"$(dirname "$0")/pre-commit" "$@"\n'
    )
    (hooks / "pre-commit").chmod(0o755)
    assert skillvc(skill_repo, monkeypatch, "hooks", "install").exit_code == 0
    result = run(skill_repo, None, "git", "commit", "-q", "--allow-empty", "-m", "empty")
    assert result.returncode == 0, result.stderr
    assert count.read_text() == "run\n"


def test_husky_and_lefthook_are_recognised(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(skill_repo, "config", "core.hooksPath", ".husky/_")
    husky = skillvc(skill_repo, monkeypatch, "hooks", "install")
    assert husky.exit_code == 4
    assert husky.stderr == (
        "Error: git runs hooks from .husky/_ (core.hooksPath), which husky manages, so skillvc "
        "does not install its own; add skillvc to .husky/pre-commit instead.\n"
        "Hint: Add this line to .husky/pre-commit: skillvc validate --staged --quiet\n"
    )
    git(skill_repo, "config", "--unset", "core.hooksPath")
    hook = skill_repo / ".git/hooks/pre-commit"
    # the opening of the script 'lefthook install' writes
    hook.write_text('#!/bin/sh\n\nif [ "$LEFTHOOK" = "0" ]; then\n  exit 0\nfi\ncall_lefthook()\n')
    lefthook = skillvc(skill_repo, monkeypatch, "hooks", "install")
    assert lefthook.exit_code == 4
    assert lefthook.stderr == (
        "Error: The pre-commit hook at .git/hooks/pre-commit is run by lefthook, so skillvc does "
        "not install its own or chain into it; add skillvc to lefthook.yml instead.\n"
        "Hint: Add this to lefthook.yml:\npre-commit:\n  commands:\n    skillvc-validate:\n"
        "      run: skillvc validate --staged --quiet\n"
    )
    assert not (skill_repo / ".git/hooks/pre-commit.legacy").exists()


def test_skillvc_check_runs_on_push_once_given_the_stage(
    skillvc_repo: tuple[Path, str], tmp_path: Path, env: dict[str, str]
) -> None:
    root, bare = pushed_demo(tmp_path)
    remote_tip = git(root, "rev-parse", "HEAD")
    path, rev = skillvc_repo
    (root / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {path}\n    rev: {rev}\n    hooks:\n"
        "      - id: skillvc-check\n        stages: [pre-push]\n        verbose: true\n"
    )
    assert pre_commit(root, env, "install", "--hook-type", "pre-push").returncode == 0
    git(root, "add", ".pre-commit-config.yaml")
    git(root, "commit", "-q", "-m", "pre-commit config")  # the skill is unchanged: it passes
    result = run(root, env, "git", "push", "-q", "origin", "main")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skillvc check" in result.stdout and "Passed" in result.stdout
    # --base came from PRE_COMMIT_FROM_REF, the remote's tip before the push
    assert f" at {remote_tip}." in result.stdout
    assert git(bare, "rev-parse", "main") == git(root, "rev-parse", "HEAD")
