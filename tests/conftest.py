"""Shared fixtures. Tests never touch the real home directory or git identity."""

from __future__ import annotations

import compileall
import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from loopback import loopback  # noqa: F401 - the fixture, for every test file

T = TypeVar("T")


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


def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every test process of this session shares: under xdist, the workers' base
    temp folders' parent (each worker's is ``<that>/popen-gwN``); else the base temp folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def session_lock(path: Path) -> Iterator[None]:
    """Held by one test process of the session at a time (``flock`` on ``path``)."""
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]
) -> T:
    """``make(folder)``'s result, made in ``<session_dir>/<name>`` by the first test process
    of the session that asks and read back (pickled) by the others, where each xdist worker
    made its own before. What ``make`` writes must then be read only, as session fixtures'
    folders already were."""
    shared = session_dir(tmp_path_factory)
    folder, result = shared / name, shared / f"{name}.pickle"
    with session_lock(shared / f"{name}.lock"):
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a process that failed here left
            folder.mkdir()
            result.write_bytes(pickle.dumps(make(folder)))
    return pickle.loads(result.read_bytes())


@pytest.fixture(scope="session")
def demo_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's seed skills repo, made once per session; tests copy it (``copy_repo``), so
    every copy has the same seed commit sha and therefore the same run ids."""
    return once_per_session(tmp_path_factory, "seed", lambda d: _seed(d / "repo"))


def _seed(root: Path) -> Path:
    make_demo_seed(root)
    return root


@pytest.fixture(scope="session")
def demo_trained(demo_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The demo trained with its defaults, once per session: (repo, its RunSummary).
    Never written to: modules that read it take a copy (``copy_repo``) or copy it per test."""
    make = lambda d: _trained_copy(demo_seed, d / "repo", {})  # noqa: E731
    return once_per_session(tmp_path_factory, "demo-trained", make)


@pytest.fixture(scope="session")
def demo_trained_one_epoch(
    demo_seed: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Any]:
    """``demo_trained``, one epoch long (``overrides={"train": {"epochs": 1}}``)."""
    make = lambda d: _trained_copy(demo_seed, d / "repo", {"train": {"epochs": 1}})  # noqa: E731
    return once_per_session(tmp_path_factory, "demo-trained-one-epoch", make)


def _trained_copy(seed: Path, dest: Path, overrides: dict[str, Any]) -> tuple[Path, Any]:
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace

    copy_repo(seed, dest)
    with seed_env(dest):
        return dest, train(open_workspace(dest), overrides=overrides)


def make_demo_seed(root: Path, package: bool = False) -> None:
    """``skillvc demo``'s seed repo at ``root`` (``--package``: the package demo's), made
    outside any test's environment, so its commits are the same in every session."""
    from skillvc.training.demo import create_demo_repo

    with seed_env(root):
        create_demo_repo(root, package=package)


@contextmanager
def seed_env(root: Path) -> Iterator[None]:
    """No git configuration but git's defaults, and a home beside ``root``: what session-wide
    seeds are made in (the per-test ``isolated_env`` is not there yet)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        mp.setenv("HOME", str(root.parent))
        yield


def pytest_configure(config: pytest.Config) -> None:
    """Compile the checkout's package once. Tests start many ``python -m skillvc`` processes
    that import it from the checkout (``helpers.train_env``); where PYTHONDONTWRITEBYTECODE is
    set (this sandbox, CI) no process caches what it compiles, so each one compiled every
    module again (about 0.3 s a process). Python still reads the compiled files it finds."""
    compileall.compile_dir(Path(__file__).resolve().parent.parent / "skillvc", quiet=1)


def copy_repo(seed: Path, dest: Path) -> Path:
    shutil.copytree(seed, dest)
    return dest


# -- the real pre-commit framework, offline (see tests/test_pre_commit_framework.py) -----------

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def skillvc_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A committed copy of the files pre-commit installs skillvc from; (path, commit).
    One for the whole session, made by the first worker that asks: pre-commit keys the
    environments it builds by repository path and commit, so the workers share them too."""
    shared = session_dir(tmp_path_factory)
    copy, done = shared / "skillvc-src", shared / "skillvc-src.rev"
    with session_lock(shared / "skillvc-src.lock"):
        if not done.exists():
            shutil.rmtree(copy, ignore_errors=True)  # what a worker that failed here left
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            for name in ("skillvc", "hooks", "templates"):
                shutil.copytree(ROOT / name, copy / name, ignore=ignore)
            for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
                shutil.copy2(ROOT / name, copy / name)
            identity = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
            git(copy, "init", "-q", "-b", "main")
            git(copy, "add", ".")
            git(copy, *identity, "commit", "-q", "-m", "skillvc")
            done.write_text(git(copy, "rev-parse", "HEAD"))
    return copy, done.read_text()


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One per session, shared by the xdist workers: pre-commit builds skillvc's environment
    once (10 s of CPU) and reuses it. pre-commit locks its store while it builds one, and a
    process that waited for the lock finds the environment built (pre_commit/repository.py)."""
    home = session_dir(tmp_path_factory) / "pre-commit-home"
    home.mkdir(exist_ok=True)
    return home


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
        # skillvc alone: its dependencies are this interpreter's, on PYTHONPATH. Resolving them
        # again and checking the whole site-packages for conflicts was most of pip's time.
        "PIP_NO_DEPS": "1",
        # virtualenv's seed wheels unpacked once per process, not once per test's HOME.
        "VIRTUALENV_OVERRIDE_APP_DATA": str(pre_commit_home / "virtualenv-app-data"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }


PACKAGE_DIR = "skills/acme-returns"
PACKAGE_LINK = "\nFor special cases read [the forms](references/forms.md).\n"
PACKAGE_TRAIN = "[train]\nepochs = 1\nbatch_size = 8\nminibatch_size = 4\nworkers = 2\nseed = 7\n"


def demo_rows(split: str, n: int) -> bytes:
    """The first ``n`` items of the demo's ``split`` task file."""
    from skillvc.core.resources import read_bytes

    rows = read_bytes("templates", f"demo/evals/{split}.jsonl").decode().splitlines()
    return ("\n".join(rows[:n]) + "\n").encode()


def make_package_repo(root: Path, forms: str, extra: dict[str, str] | None = None) -> Path:
    """A committed skills repo with the skill package ``skills/acme-returns/``: the demo's
    SKILL.md linking ``references/forms.md`` (``forms``), any ``extra`` files of the package
    directory, 16/16/6 demo items, and a skillvc.toml from ``skillvc init`` (``sim:support``,
    seed 7) whose ``[skill] path`` names the directory. The caller is chdir'ed into ``root``."""
    from click.testing import CliRunner

    from skillvc.cli import cli
    from skillvc.core.resources import read_bytes

    folder = root / PACKAGE_DIR
    (folder / "references").mkdir(parents=True)
    seed = read_bytes("templates", "demo/SKILL.md").decode()
    (folder / "SKILL.md").write_text(seed + PACKAGE_LINK, encoding="utf-8")
    (folder / "references" / "forms.md").write_text(forms, encoding="utf-8")
    for name, text in (extra or {}).items():
        (folder / name).write_text(text, encoding="utf-8")
    evals = root / "evals"
    evals.mkdir()
    for split, n in (("train", 16), ("val", 16), ("test", 6)):
        (evals / f"{split}.jsonl").write_bytes(demo_rows(split, n))
    os.chdir(root)
    result = CliRunner().invoke(
        cli, ["init", "--target", "sim:support", "--optimizer", "sim:support", "--seed", "7"]
    )
    assert result.exit_code == 0, result.output
    toml = root / "skillvc.toml"
    text = toml.read_text().replace(f'path = "{PACKAGE_DIR}/SKILL.md"', f'path = "{PACKAGE_DIR}"')
    toml.write_text(text.split("\n[train]\n")[0] + "\n" + PACKAGE_TRAIN)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "package skill")
    return root
