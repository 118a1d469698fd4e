"""Shared fixtures. Tests never touch the real home directory or git identity."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.invalid")
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_API_VERSION",
        "SKILLVC_SIM_LATENCY_MS",
        "SKILLVC_RAISE_ERRORS",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


def git(cwd: Path, *args: str) -> str:
    """Run real git in ``cwd`` and return its stdout (stripped)."""
    out = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git repository on branch main in a temp dir."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


SAMPLE_SKILL = """---
name: support
description: Answer customer support questions for the Acme store.
---
# Support

## Rules
- Be polite.
- Quote the order number.

<!-- SLOW_UPDATE_START -->
Keep answers short.
<!-- SLOW_UPDATE_END -->
"""


@pytest.fixture
def skill_repo(git_repo: Path) -> Path:
    """A git repo with one committed skill at skills/support/SKILL.md."""
    path = git_repo / "skills" / "support" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(SAMPLE_SKILL)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "seed skill")
    return git_repo


@pytest.fixture(scope="session")
def demo_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's seed skills repo, made once per session; tests copy it (``copy_repo``), so
    every copy has the same seed commit sha and therefore the same run ids."""
    from skillvc.demo import create_demo_repo

    root = tmp_path_factory.mktemp("seed") / "repo"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        mp.setenv("HOME", str(root.parent))
        create_demo_repo(root)
    return root


def copy_repo(seed: Path, dest: Path) -> Path:
    shutil.copytree(seed, dest)
    return dest


# -- the real pre-commit framework, offline (see tests/test_pre_commit_framework.py) -----------

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def skillvc_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A committed copy of the files pre-commit installs skillvc from; (path, commit)."""
    copy = tmp_path_factory.mktemp("skillvc-src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("skillvc", "hooks", "templates"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, copy / name)
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", ".")
    git(copy, *identity, "commit", "-q", "-m", "skillvc")
    return copy, git(copy, "rev-parse", "HEAD")


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One per test process: pre-commit builds skillvc's environment once and reuses it."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def env(pre_commit_home: Path) -> dict[str, str]:
    paths = sysconfig.get_paths()
    site = os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    return {
        **os.environ,
        "PRE_COMMIT_HOME": str(pre_commit_home),
        "PYTHONPATH": site,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        # pip reads this variable inverted: "0" means --no-build-isolation.
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
