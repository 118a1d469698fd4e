"""An event log that names commits the repository lacks, and the git layouts skillvc runs in.

The log travels with ``.skillvc/`` (copied into a clone made after history was reset, kept
across a history rewrite) while its commits stay behind. ``train`` then says which run and
which commit the log and the repository disagree about and what to do (issue 43); every
reading command shows what it can. Submodules, linked worktrees and SHA-256 repositories are
trained in and read from as any other repository.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
READERS = (
    ("log",),
    ("log", "-p"),
    ("log", "--rejected", "-p"),
    ("log", "--json"),
    ("runs",),
    ("runs", "--json"),
    ("report",),
    ("report", "--json"),
    ("blame", SKILL),
    ("eval", "--json"),
    ("fsck",),
)


def invoke(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(root)
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo repository after one training run (made once; tests copy it)."""
    root = tmp_path_factory.mktemp("trained") / "repo"
    create_demo_repo(root)
    with pytest.MonkeyPatch.context() as mp:
        result = invoke(root, mp, "train", "-q", "--epochs", "1")
    assert result.exit_code == 0, result.output
    return root


def run_id(root: Path) -> str:
    return git(root, "for-each-ref", "--format=%(refname)", "refs/tags/skillvc/").split("/")[3]


def expected_error(root: Path, best: str) -> str:
    run = run_id(root)
    return (
        f"Error: The event log and this repository disagree: run {run} finished at commit "
        f"{best[:12]} (its best skill, on branch 'main', tag skillvc/{run}/best), which this "
        "repository does not have (a log copied from another clone, or kept across a history "
        "rewrite).\nHint: Fetch skillvc's refs from the repository the run was made in: git "
        "fetch origin 'refs/skillvc/*:refs/skillvc/*' 'refs/tags/skillvc/*:refs/tags/skillvc/*'"
        "; or start over with 'skillvc train --new' (the old log is kept).\n"
    )


def assert_readers_work(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for args in READERS:
        result = invoke(root, monkeypatch, *args)
        assert result.exit_code == 0, (args, result.output)
        assert "Traceback" not in result.output and "crashed" not in result.output, args


def test_a_log_copied_into_a_clone_made_after_a_reset(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    best = git(trained, "rev-parse", "main")
    fresh = tmp_path / "fresh"
    git(tmp_path, "init", "-q", "-b", "main", str(fresh))
    for name in ("skills", "evals", "skillvc.toml", ".gitignore"):
        source = trained / name
        if source.is_dir():
            shutil.copytree(source, fresh / name)
        elif source.exists():
            shutil.copy(source, fresh / name)
    git(fresh, "add", ".")
    git(fresh, "commit", "-qm", "History starts again")
    shutil.copytree(trained / ".skillvc", fresh / ".skillvc")

    result = invoke(fresh, monkeypatch, "train", "-q", "--epochs", "1")
    assert result.exit_code == 4
    assert result.output == expected_error(trained, best)
    assert_readers_work(fresh, monkeypatch)

    again = invoke(fresh, monkeypatch, "train", "-q", "--new", "--epochs", "1")
    assert again.exit_code == 0, again.output
    runs = invoke(fresh, monkeypatch, "runs").output
    assert run_id(trained) in runs and runs.count("finished") == 2  # the old log is kept


def test_a_log_kept_across_a_history_rewrite(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(trained, root)
    best = git(root, "rev-parse", "main")
    seed = git(root, "rev-list", "--max-parents=0", "main")
    # The trained commits are rewritten away: main restarts from the seed with a new commit,
    # skillvc's refs are dropped and the old objects pruned.
    git(root, "reset", "-q", "--hard", seed)
    (root / "NOTES.md").write_text("notes\n")
    git(root, "add", "NOTES.md")
    git(root, "commit", "-qm", "Rewritten history")
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/skillvc/", "refs/tags/")
    for ref in refs.splitlines():
        git(root, "update-ref", "-d", ref)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")

    result = invoke(root, monkeypatch, "train", "-q", "--epochs", "1")
    assert result.exit_code == 4
    assert result.output == expected_error(trained, best)
    assert_readers_work(root, monkeypatch)


def test_a_clone_without_skillvcs_refs_reads_and_trains(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain clone has main (the accepted commits) and no refs/skillvc/* (the refused
    candidates): readers show what they can, and training says it is up to date."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-tags", str(trained), str(clone))
    shutil.copytree(trained / ".skillvc", clone / ".skillvc")
    assert git(clone, "for-each-ref", "refs/skillvc/") == ""
    assert_readers_work(clone, monkeypatch)
    result = invoke(clone, monkeypatch, "train", "-q", "--epochs", "1")
    assert result.exit_code == 0, result.output


# -- git layouts ------------------------------------------------------------------------------


def train_and_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(root, monkeypatch, "train", "-q", "--epochs", "1")
    assert result.exit_code == 0, result.output
    assert git(root, "for-each-ref", "refs/tags/skillvc/") != ""
    assert_readers_work(root, monkeypatch)


def test_a_linked_worktree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "main"
    create_demo_repo(root)
    linked = tmp_path / "linked"
    git(root, "worktree", "add", "-q", "-b", "experiment", str(linked))
    train_and_read(linked, monkeypatch)
    assert git(root, "rev-parse", "experiment") == git(linked, "rev-parse", "HEAD")
    assert git(root, "log", "-1", "--format=%s", "main").startswith("Seed skill")


def test_a_submodule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    skills = tmp_path / "skills-origin"
    create_demo_repo(skills)
    outer = tmp_path / "outer"
    git(tmp_path, "init", "-q", "-b", "main", str(outer))
    subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(skills), "sk"],
        cwd=outer,
        check=True,
        capture_output=True,
    )
    git(outer, "commit", "-qm", "Add the skills as a submodule")
    train_and_read(outer / "sk", monkeypatch)
    assert git(outer / "sk", "log", "-1", "--format=%s").startswith("skillvc")


def test_a_sha256_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = tmp_path / "seed"
    create_demo_repo(seed)
    root = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", "--object-format=sha256", str(root))
    for name in ("skills", "evals", "skillvc.toml", ".gitignore"):
        source = seed / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        elif source.exists():
            shutil.copy(source, root / name)
    git(root, "add", ".")
    git(root, "commit", "-qm", "Seed skill")
    assert len(git(root, "rev-parse", "HEAD")) == 64
    train_and_read(root, monkeypatch)
