"""Tests for skillvc.repo.skillrepo against real git repositories in temp dirs."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from skillvc.core.errors import (
    ConfigError,
    DirtySkillFile,
    NotAGitRepo,
    SkillFileMissing,
    SkillvcError,
    StateConflict,
    UnknownRevision,
)
from skillvc.repo import skillrepo as repo_module
from skillvc.repo.skillrepo import SkillRepo, ensure_gitignore

SKILL = "skills/support/SKILL.md"
NEW_SKILL = b"---\nname: support\n---\n# Support\n\n- Be very polite.\n"


def git(cwd: Path, *args: str, input: str | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, input=input
    )
    return out.stdout.strip()


def status(cwd: Path) -> str:
    return git(cwd, "status", "--porcelain=v1", "--untracked-files=all")


@pytest.fixture
def repo(skill_repo: Path) -> Iterator[SkillRepo]:
    with SkillRepo(skill_repo) as r:
        yield r


# -- opening ----------------------------------------------------------------------------------


def test_not_a_git_repo_names_the_path(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(NotAGitRepo, match="plain is not inside a git repository"):
        SkillRepo(outside)
    assert SkillRepo.find(outside) is None


def test_opens_from_a_subdirectory(skill_repo: Path) -> None:
    with SkillRepo(skill_repo / "skills" / "support") as r:
        assert r.root.resolve() == skill_repo.resolve()


def test_init_fresh_directory(tmp_path: Path) -> None:
    with SkillRepo.init(tmp_path / "fresh") as r:
        assert (tmp_path / "fresh" / ".git").is_dir()
        assert r.current_branch() == "main"
        assert r.head_sha() is None


def test_init_existing_repo_keeps_it(skill_repo: Path) -> None:
    head = git(skill_repo, "rev-parse", "HEAD")
    with SkillRepo.init(skill_repo) as r:
        assert r.head_sha() == head
        assert r.current_branch() == "main"
    assert git(skill_repo, "rev-parse", "HEAD") == head


# -- revisions and reading --------------------------------------------------------------------


def test_resolve(repo: SkillRepo) -> None:
    head = git(repo.root, "rev-parse", "HEAD")
    assert repo.resolve("HEAD") == head
    assert repo.resolve(head[:8]) == head
    for bad in ("nope", "-v", "", "HEAD~5"):
        with pytest.raises(UnknownRevision):
            repo.resolve(bad)


def test_read_file(repo: SkillRepo) -> None:
    assert repo.read_file(SKILL) == (repo.root / SKILL).read_bytes()
    with pytest.raises(SkillFileMissing, match="skills/none.md does not exist in revision HEAD"):
        repo.read_file("skills/none.md")
    with pytest.raises(SkillFileMissing):
        repo.read_file("skills/support")  # a directory, not a file
    with pytest.raises(UnknownRevision):
        repo.read_file(SKILL, "no-such-branch")


def test_paths_outside_the_repo_are_refused(repo: SkillRepo, tmp_path: Path) -> None:
    for bad in ("../x.md", ".git/config", str(tmp_path / "elsewhere.md")):
        with pytest.raises(SkillvcError):
            repo.read_file(bad)
    assert repo.read_file(str(repo.root / SKILL)) == repo.read_file("./" + SKILL)


# -- commit_file ------------------------------------------------------------------------------


def test_commit_file_changes_exactly_one_path_and_keeps_user_changes(repo: SkillRepo) -> None:
    root = repo.root
    (root / "notes.txt").write_text("notes v1\n")
    (root / "staged.txt").write_text("staged v1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "more files")
    old_head = git(root, "rev-parse", "HEAD")
    # The user's work in progress, in other files: staged, unstaged, partly both, untracked.
    (root / "staged.txt").write_text("staged v2\n")
    git(root, "add", "staged.txt")
    (root / "staged.txt").write_text("staged v3 unstaged\n")
    (root / "notes.txt").write_text("notes v2 unstaged\n")
    (root / "scratch.txt").write_text("untracked\n")
    status_before = status(root)
    cached_before = git(root, "diff", "--cached")
    unstaged_before = git(root, "diff")

    sha = repo.commit_file(
        SKILL,
        NEW_SKILL,
        "Be very polite\n\nThe optimizer asked for it.",
        trailers={"Skillvc-Event": "ev-1", "Skillvc-Run": "run-7"},
    )

    assert git(root, "rev-parse", "HEAD") == sha
    assert git(root, "rev-parse", "main") == sha
    assert git(root, "rev-parse", "HEAD^") == old_head
    stat_out = git(root, "show", "--stat", "--format=", "HEAD")
    assert SKILL in stat_out and "1 file changed" in stat_out
    assert git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD") == SKILL
    message = git(root, "log", "-1", "--format=%B")
    assert message.startswith("Be very polite\n\nThe optimizer asked for it.\n\n")
    trailers = git(root, "interpret-trailers", "--parse", input=message + "\n")
    assert trailers == "Skillvc-Event: ev-1\nSkillvc-Run: run-7"
    # The skill file is updated in the working tree and in the index, and nothing else moved.
    assert (root / SKILL).read_bytes() == NEW_SKILL
    assert git(root, "show", f":{SKILL}") == NEW_SKILL.decode().rstrip("\n")
    assert not repo.is_dirty(SKILL)
    assert status(root) == status_before
    assert git(root, "diff", "--cached") == cached_before
    assert git(root, "diff") == unstaged_before
    assert (root / "scratch.txt").read_text() == "untracked\n"
    assert not list((root / "skills" / "support").glob(".*tmp"))
    assert not list(Path(git(root, "rev-parse", "--git-dir")).glob("skillvc-index-*"))


@pytest.mark.parametrize("kind", ["unstaged", "staged", "untracked"])
def test_dirty_skill_file_is_refused(skill_repo: Path, kind: str) -> None:
    path = SKILL
    if kind == "untracked":
        path = "skills/fresh/SKILL.md"
        (skill_repo / path).parent.mkdir(parents=True)
    target = skill_repo / path
    target.write_text("my own edit\n")
    if kind == "staged":
        git(skill_repo, "add", path)
    head = git(skill_repo, "rev-parse", "HEAD")
    before = status(skill_repo)
    with SkillRepo(skill_repo) as r:
        assert r.is_dirty(path)
        expected = "is not committed yet" if kind == "untracked" else "has uncommitted changes"
        with pytest.raises(DirtySkillFile, match=f"^{path} {expected}.$"):
            r.commit_file(path, NEW_SKILL, "edit")
    assert git(skill_repo, "rev-parse", "HEAD") == head
    assert target.read_text() == "my own edit\n"
    assert status(skill_repo) == before


def test_clean_file_is_not_dirty_even_when_others_are(repo: SkillRepo) -> None:
    (repo.root / "other.txt").write_text("x\n")
    assert not repo.is_dirty(SKILL)
    repo.ensure_clean(SKILL)


def test_stale_expected_parent_leaves_the_branch(repo: SkillRepo) -> None:
    first = repo.head_sha()
    second = repo.commit_file(SKILL, NEW_SKILL, "second")
    with pytest.raises(StateConflict):
        repo.commit_file(SKILL, b"third\n", "third", expected_parent=first)
    assert git(repo.root, "rev-parse", "main") == second
    assert (repo.root / SKILL).read_bytes() == NEW_SKILL
    assert not repo.is_dirty(SKILL)


def test_head_moving_during_commit_is_a_conflict(
    repo: SkillRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = repo._build_pinned  # commit_file builds through it, for one file

    def racing_build(*args: Any, **kwargs: Any) -> str:
        sha = original(*args, **kwargs)
        git(repo.root, "commit", "-q", "--allow-empty", "-m", "someone else")
        return sha

    monkeypatch.setattr(repo, "_build_pinned", racing_build)
    before = (repo.root / SKILL).read_bytes()
    with pytest.raises(StateConflict, match="HEAD moved away"):
        repo.commit_file(SKILL, NEW_SKILL, "mine")
    assert git(repo.root, "log", "-1", "--format=%s", "main") == "someone else"
    assert (repo.root / SKILL).read_bytes() == before


def test_failure_after_the_ref_moved_rolls_back(
    repo: SkillRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.head_sha()
    before = (repo.root / SKILL).read_bytes()

    def broken_write(target: Path, content: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(repo_module, "write_atomic", broken_write)
    with pytest.raises(OSError, match="disk full"):
        repo.commit_file(SKILL, NEW_SKILL, "edit")
    assert git(repo.root, "rev-parse", "main") == head
    assert (repo.root / SKILL).read_bytes() == before
    assert status(repo.root) == ""


def test_commit_nested_new_skill_path(repo: SkillRepo) -> None:
    path = "skills/deep/er/still/SKILL.md"
    sha = repo.commit_file(path, b"# Deep\n", "add deep skill")
    files = git(repo.root, "ls-tree", "-r", "--name-only", sha).splitlines()
    assert sorted(files) == sorted([SKILL, path])
    assert git(repo.root, "ls-tree", sha, "--", path).startswith("100644 blob ")
    assert (repo.root / path).read_bytes() == b"# Deep\n"
    assert status(repo.root) == ""


def test_commit_on_unborn_branch(git_repo: Path) -> None:
    with SkillRepo(git_repo) as r:
        sha = r.commit_file("SKILL.md", b"# First\n", "first skill")
        assert r.commit_info(sha).parents == ()
        assert r.current_branch() == "main"
    assert git(git_repo, "rev-parse", "main") == sha
    assert status(git_repo) == ""


def test_failure_on_unborn_branch_leaves_it_unborn(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_write(target: Path, content: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(repo_module, "write_atomic", broken_write)
    with SkillRepo(git_repo) as r, pytest.raises(OSError):
        r.commit_file("SKILL.md", b"# First\n", "first skill")
    with SkillRepo(git_repo) as r:
        assert r.head_sha() is None
        assert r.current_branch() == "main"
    assert not (git_repo / "SKILL.md").exists()


def test_commit_on_detached_head_moves_only_head(repo: SkillRepo) -> None:
    main = repo.head_sha()
    git(repo.root, "checkout", "-q", "--detach")
    assert repo.current_branch() is None
    sha = repo.commit_file(SKILL, NEW_SKILL, "detached edit")
    assert git(repo.root, "rev-parse", "HEAD") == sha
    assert git(repo.root, "rev-parse", "main") == main


def test_executable_bit_is_kept(repo: SkillRepo) -> None:
    target = repo.root / SKILL
    target.chmod(0o755)
    git(repo.root, "add", SKILL)
    git(repo.root, "commit", "-q", "-m", "make it executable")
    sha = repo.commit_file(SKILL, NEW_SKILL, "edit")
    assert git(repo.root, "ls-tree", sha, "--", SKILL).startswith("100755 ")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert status(repo.root) == ""


def test_bad_trailers_are_refused(repo: SkillRepo) -> None:
    head = repo.head_sha()
    with pytest.raises(ValueError):
        repo.commit_file(SKILL, NEW_SKILL, "x", trailers={"Bad Key": "v"})
    with pytest.raises(ValueError):
        repo.commit_file(SKILL, NEW_SKILL, "x", trailers={"Key": "two\nlines"})
    assert repo.head_sha() == head


# -- identity ---------------------------------------------------------------------------------


def test_missing_identity_is_a_clear_error(
    repo: SkillRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME"):
        monkeypatch.delenv(var)
    monkeypatch.delenv("GIT_COMMITTER_EMAIL")
    monkeypatch.delenv("EMAIL", raising=False)
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    # Without this, a host with a proper domain name lets git guess an identity.
    git(repo.root, "config", "user.useConfigOnly", "true")
    head = repo.head_sha()
    with pytest.raises(SkillvcError, match="no author identity") as info:
        repo.ensure_identity()
    assert "git config user.name" in info.value.hint
    assert "user.email" in info.value.hint
    with pytest.raises(SkillvcError, match="no author identity"):
        repo.commit_file(SKILL, NEW_SKILL, "edit")
    assert repo.head_sha() == head
    assert not repo.is_dirty(SKILL)


def test_identity_present(repo: SkillRepo) -> None:
    repo.ensure_identity()


# -- build_commit, candidates, tags and refs --------------------------------------------------


def test_build_commit_touches_nothing(repo: SkillRepo) -> None:
    head = repo.head_sha()
    (repo.root / "wip.txt").write_text("wip\n")
    git(repo.root, "add", "wip.txt")
    before = status(repo.root)
    sha = repo.build_commit(SKILL, NEW_SKILL, "built", head, {"Skillvc-Event": "e9"})
    assert repo.head_sha() == head
    assert status(repo.root) == before
    assert repo.read_file(SKILL, sha) == NEW_SKILL
    assert git(repo.root, "rev-parse", f"{sha}^") == head
    # wip.txt is only in the user's index, so it must not leak into the built tree.
    assert "wip.txt" not in git(repo.root, "ls-tree", "-r", "--name-only", sha)


def test_store_candidate(repo: SkillRepo) -> None:
    head = repo.head_sha()
    assert head is not None
    ref = "refs/skillvc/rejected/run-1/3"
    sha = repo.store_candidate(ref, SKILL, NEW_SKILL, "rejected edit", head, {"Skillvc-Step": "3"})
    assert git(repo.root, "rev-parse", ref) == sha
    assert repo.head_sha() == head
    assert status(repo.root) == ""
    assert (repo.root / SKILL).read_bytes() != NEW_SKILL
    diff = git(repo.root, "diff", "HEAD", ref)
    assert "+- Be very polite." in diff and f"b/{SKILL}" in diff
    assert repo.refs("refs/skillvc/rejected/") == {ref: sha}
    assert repo.refs("refs/skillvc/rej") == {ref: sha}
    assert repo.refs("refs/skillvc/accepted/") == {}
    assert repo.commit_info(ref).trailers == {"Skillvc-Step": "3"}
    with pytest.raises(ValueError):
        repo.store_candidate("refs/heads/main", SKILL, NEW_SKILL, "no", head)


def test_tags_live_under_skillvc(repo: SkillRepo) -> None:
    first = repo.head_sha()
    assert first is not None
    second = repo.commit_file(SKILL, NEW_SKILL, "second")
    repo.tag("best", first)
    repo.tag("skillvc/release", second, message="Released skill")
    assert git(repo.root, "cat-file", "-t", "refs/tags/skillvc/best") == "commit"
    assert git(repo.root, "cat-file", "-t", "refs/tags/skillvc/release") == "tag"
    assert repo.refs("refs/tags/skillvc/") == {
        "refs/tags/skillvc/best": first,
        "refs/tags/skillvc/release": second,
    }
    repo.tag("best", second)  # force is the default
    assert repo.resolve("skillvc/best") == second
    with pytest.raises(StateConflict, match="skillvc/best already exists"):
        repo.tag("best", first, force=False)
    assert repo.resolve("skillvc/best") == second
    with pytest.raises(UnknownRevision):
        repo.tag("x", "no-such-rev")


# -- history ----------------------------------------------------------------------------------


def test_commit_info(repo: SkillRepo) -> None:
    parent = repo.head_sha()
    sha = repo.commit_file(SKILL, NEW_SKILL, "Subject line\n\nBody.", {"Skillvc-Event": "e1"})
    info = repo.commit_info("HEAD")
    assert info.sha == sha
    assert info.parents == (parent,)
    assert info.subject == "Subject line"
    assert info.message == "Subject line\n\nBody.\n\nSkillvc-Event: e1"
    assert info.trailers == {"Skillvc-Event": "e1"}
    assert datetime.fromisoformat(info.authored_at).tzinfo is not None
    assert repo.commit_info(f"{sha}^").trailers == {}


def test_find_trailer(repo: SkillRepo) -> None:
    a = repo.commit_file(SKILL, b"a\n", "a", {"Skillvc-Event": "intent-a"})
    b = repo.commit_file(SKILL, b"b\n", "b", {"Skillvc-Event": "intent-b", "Skillvc-Run": "r"})
    assert repo.find_trailer("Skillvc-Event", "intent-a") == a
    assert repo.find_trailer("Skillvc-Event", "intent-b") == b
    assert repo.find_trailer("skillvc-event", "intent-b") == b
    assert repo.find_trailer("Skillvc-Event", "intent-c") is None
    assert repo.find_trailer("Skillvc-Event", "intent-b", rev=a) is None
    assert repo.find_trailer("Skillvc-Event", "intent-a", max_count=1) is None
    # Only real trailers count, not the same text in a message body.
    repo.commit_file(SKILL, b"c\n", "c\n\nSkillvc-Event: intent-z\n\nnot a trailer block")
    assert repo.find_trailer("Skillvc-Event", "intent-z") is None


def test_find_trailer_on_unborn_branch(git_repo: Path) -> None:
    with SkillRepo(git_repo) as r:
        assert r.find_trailer("Skillvc-Event", "x") is None
        assert r.log_file("SKILL.md") == []


def test_log_file_blame_and_diff(repo: SkillRepo) -> None:
    seed = repo.head_sha()
    assert seed is not None
    base = b"line one\nline two\nline three\n"
    c1 = repo.commit_file(SKILL, base, "rewrite")
    (repo.root / "other.txt").write_text("unrelated\n")
    git(repo.root, "add", "other.txt")
    git(repo.root, "commit", "-q", "-m", "unrelated commit")
    c2 = repo.commit_file(SKILL, b"line one\nline TWO\nline three\n", "shout")

    assert [i.sha for i in repo.log_file(SKILL)] == [c2, c1, seed]
    assert [i.subject for i in repo.log_file(SKILL)] == ["shout", "rewrite", "seed skill"]
    assert [i.sha for i in repo.log_file(SKILL, max_count=2)] == [c2, c1]
    assert [i.sha for i in repo.log_file(SKILL, rev=c1)] == [c1, seed]
    assert [i.subject for i in repo.log_file("other.txt")] == ["unrelated commit"]

    assert repo.blame(SKILL) == [(c1, "line one"), (c2, "line TWO"), (c1, "line three")]
    assert repo.blame(SKILL, c1) == [(c1, "line one"), (c1, "line two"), (c1, "line three")]
    with pytest.raises(SkillFileMissing):
        repo.blame("missing.md")

    diff = repo.diff(c1, c2, SKILL)
    assert f"--- a/{SKILL}" in diff
    assert "-line two\n+line TWO\n" in diff
    assert diff.endswith("\n")
    assert repo.diff(c2, c2, SKILL) == ""
    with pytest.raises(UnknownRevision):
        repo.diff(c1, "nope", SKILL)


# -- .gitignore -------------------------------------------------------------------------------


def test_ensure_gitignore(tmp_path: Path) -> None:
    assert ensure_gitignore(tmp_path, ".skillvc/") is True
    assert (tmp_path / ".gitignore").read_text() == ".skillvc/\n"
    assert ensure_gitignore(tmp_path, ".skillvc/") is False
    assert (tmp_path / ".gitignore").read_text() == ".skillvc/\n"


def test_ensure_gitignore_without_final_newline(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules")
    assert ensure_gitignore(tmp_path, ".skillvc/") is True
    assert (tmp_path / ".gitignore").read_text() == "node_modules\n.skillvc/\n"
    assert ensure_gitignore(tmp_path, ".skillvc/") is False
    assert ensure_gitignore(tmp_path, "node_modules") is False


def test_ignored_file_at_the_skill_path_counts_as_dirty(repo: SkillRepo) -> None:
    assert ensure_gitignore(repo.root, "drafts/")
    git(repo.root, "add", ".gitignore")
    git(repo.root, "commit", "-q", "-m", "ignore drafts")
    (repo.root / "drafts").mkdir()
    (repo.root / "drafts" / "SKILL.md").write_text("precious\n")
    assert repo.is_dirty("drafts/SKILL.md")
    assert os.path.exists(repo.root / "drafts" / "SKILL.md")


def test_remove_stale_temp_files_left_by_a_killed_write(skill_repo: Path) -> None:
    skill = skill_repo / "skills" / "support" / "SKILL.md"
    stale = skill.with_name(".SKILL.md.skillvc-0badf00d.tmp")
    stale.write_bytes(b"half a skill")
    other = skill.with_name("notes.tmp")
    other.write_text("the user's")
    removed = SkillRepo(skill_repo).remove_stale_temp_files("skills/support/SKILL.md")
    assert removed == [stale] and not stale.exists()
    assert other.exists() and skill.read_text().startswith("---")


def test_ensure_gitignore_recognises_equivalent_entries(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"caf\xe9/\n.skillvc\n")  # latin-1, not UTF-8
    assert ensure_gitignore(tmp_path, "/.skillvc/") is False
    assert (tmp_path / ".gitignore").read_bytes() == b"caf\xe9/\n.skillvc\n"


# -- review fixes -----------------------------------------------------------------------------


def test_new_skill_file_at_an_ignored_path_is_committed(repo: SkillRepo) -> None:
    # `git add` refuses new ignored paths; that used to undo the commit with a raw git error.
    assert ensure_gitignore(repo.root, "drafts/")
    git(repo.root, "add", ".gitignore")
    git(repo.root, "commit", "-q", "-m", "ignore drafts")
    sha = repo.commit_file("drafts/SKILL.md", b"new\n", "add a draft skill")
    assert repo.head_sha() == sha
    assert repo.read_file("drafts/SKILL.md") == b"new\n"
    assert (repo.root / "drafts" / "SKILL.md").read_bytes() == b"new\n"
    assert not repo.is_dirty("drafts/SKILL.md")


def test_a_symlinked_skill_file_is_refused_not_replaced(repo: SkillRepo) -> None:
    os.symlink("support/SKILL.md", repo.root / "skills" / "LINK.md")
    git(repo.root, "add", "skills/LINK.md")
    git(repo.root, "commit", "-q", "-m", "link")
    head = repo.head_sha()
    with pytest.raises(SkillvcError, match="is a symbolic link in git"):
        repo.commit_file("skills/LINK.md", b"new\n", "m")
    assert repo.head_sha() == head
    assert (repo.root / "skills" / "LINK.md").is_symlink()


def test_the_git_directory_is_refused_whatever_its_case(repo: SkillRepo) -> None:
    with pytest.raises(SkillvcError, match="not a file path inside the repository"):
        repo.read_file(".GIT/config")


def test_git_errors_are_one_clean_sentence(repo: SkillRepo) -> None:
    sha = repo.head_sha()
    assert sha is not None
    with pytest.raises(SkillvcError) as info:
        repo.tag("bad..tag", sha)  # git refuses the name; its reason comes through cleanly
    text = str(info.value)
    assert "stderr" not in text and "fatal:" not in text and "\n" not in text


def test_an_invalid_branch_name_is_refused_before_git_runs(repo: SkillRepo) -> None:
    with pytest.raises(ConfigError, match="'bad..name' is not a valid git branch name."):
        repo.switch_branch("bad..name")


def test_a_skill_file_never_committed_says_so(git_repo: Path) -> None:
    (git_repo / "README.md").write_text("x\n")
    git(git_repo, "add", "README.md")
    git(git_repo, "commit", "-qm", "first")
    (git_repo / "SKILL.md").write_text("# new\n")
    with pytest.raises(DirtySkillFile, match="SKILL.md is not committed yet.") as info:
        SkillRepo(git_repo).ensure_clean("SKILL.md")
    assert "git add SKILL.md" in info.value.hint
