"""Configured paths stay inside the work tree: no file outside the repo is ever read or logged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git

from skillvc.cli import cli
from skillvc.core.errors import PathOutsideRepo
from skillvc.core.paths import inside_repo

HINT = "Hint: Use a path relative to the repository root, inside it (not under .git/ or .skillvc/)."
# A line of /etc/passwd: it must never reach the event log or any output.
PASSWD_LINE = next(
    line for line in Path("/etc/passwd").read_text().splitlines() if line.startswith("root:")
)


def refusal(key: str, path: str, reason: str) -> str:
    return f"Error: {key} names {path!r}, which {reason}.\n{HINT}\n"


OUTSIDE = "leads out of the repository"
ABSOLUTE = "is an absolute path"
GIT_DIR = "is under .git/ or .skillvc/"
SYMLINK_OUT = "passes through a symlink that leads out of the repository"


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../../../../etc/passwd", OUTSIDE),
        ("skills/../../outside.md", OUTSIDE),
        ("/etc/passwd", ABSOLUTE),
        ("\\etc\\passwd", ABSOLUTE),
        ("C:/Windows/win.ini", ABSOLUTE),
        (".git/description", GIT_DIR),
        (".GIT/config", GIT_DIR),
        (".git", GIT_DIR),
        ("skills/.git/config", GIT_DIR),
        (".git./config", GIT_DIR),  # Windows drops the trailing dot
        (".g\u200cit/config", GIT_DIR),  # HFS+ ignores the zero-width non-joiner
        ("GIT~1/config", GIT_DIR),  # the Windows short name of .git
        (".skillvc/events.db", GIT_DIR),
        (".SkillVC/events.db", GIT_DIR),
        ("", "is not a file path"),
        ("skills/..", "is not a file path"),
    ],
)
def test_paths_outside_the_work_tree_are_refused(tmp_path: Path, path: str, reason: str) -> None:
    with pytest.raises(PathOutsideRepo) as caught:
        inside_repo(tmp_path, path, "[skill] path in skillvc.toml")
    assert caught.value.message == f"[skill] path in skillvc.toml names {path!r}, which {reason}."
    assert caught.value.exit_code == 5


def test_paths_inside_the_work_tree_resolve_against_the_root(tmp_path: Path) -> None:
    (tmp_path / "skills" / "a").mkdir(parents=True)
    (tmp_path / "skills" / "a" / "SKILL.md").write_text("# A\n")
    (tmp_path / "alias.md").symlink_to(tmp_path / "skills" / "a" / "SKILL.md")
    (tmp_path / "linked").symlink_to("skills")  # a relative link that stays inside
    assert inside_repo(tmp_path, "skills/a/SKILL.md", "k") == tmp_path / "skills/a/SKILL.md"
    assert inside_repo(tmp_path, "./skills/x/../a/SKILL.md", "k") == tmp_path / "skills/a/SKILL.md"
    assert inside_repo(tmp_path, "alias.md", "k") == tmp_path / "alias.md"
    assert inside_repo(tmp_path, "linked/a/SKILL.md", "k") == tmp_path / "linked/a/SKILL.md"
    assert inside_repo(tmp_path, "missing/file.md", "k") == tmp_path / "missing/file.md"
    assert inside_repo(tmp_path, ".github/x.md", "k") == tmp_path / ".github/x.md"
    assert inside_repo(tmp_path, "docs/.skillvc/x", "k") == tmp_path / "docs/.skillvc/x"


def test_symlinks_that_leave_the_tree_or_enter_git_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "evil.md").symlink_to("/etc/passwd")
    (root / "etc").symlink_to("/etc")
    (root / "up").symlink_to("..")
    (root / "config.md").symlink_to(".git/config")
    (root / "loop.md").symlink_to("loop.md")
    for path, reason in [
        ("evil.md", SYMLINK_OUT),
        ("etc/passwd", SYMLINK_OUT),
        ("up/repo/../secret.md", SYMLINK_OUT),
        ("up/other/x.md", SYMLINK_OUT),
        ("config.md", "is a symlink into .git/ or .skillvc/"),
        ("loop.md", "is a symlink that cannot be resolved"),
    ]:
        with pytest.raises(PathOutsideRepo, match="^k names .*, which " + reason):
            inside_repo(root, path, "k")


# -- every command that reads the skill or the task files ---------------------------------------


@pytest.fixture
def repo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = copy_repo(demo_seed, tmp_path / "repo")
    (path / "skills" / "evil.md").symlink_to("/etc/passwd")
    (path / "etc").symlink_to("/etc")
    git(path, "add", ".")
    git(path, "commit", "-qm", "links a pull request could add")
    monkeypatch.chdir(path)
    return path


def set_config(repo: Path, old: str, new: str) -> None:
    config = repo / "skillvc.toml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", "point the config elsewhere")


def log_bytes(repo: Path) -> bytes:
    """Everything the event log holds on disk, the WAL and shared-memory files included."""
    state = repo / ".skillvc"
    return b"".join(
        (state / name).read_bytes()
        for name in ("events.db", "events.db-wal", "events.db-shm")
        if (state / name).exists()
    )


SKILL_CASES = [
    ("../../../../etc/passwd", OUTSIDE),
    ("/etc/passwd", ABSOLUTE),
    (".git/description", GIT_DIR),
    ("skills/evil.md", SYMLINK_OUT),
    ("etc/passwd", SYMLINK_OUT),
]


@pytest.mark.parametrize(("path", "reason"), SKILL_CASES)
@pytest.mark.parametrize(
    "args", [["eval"], ["eval", "HEAD"], ["validate"], ["train"], ["diff", "HEAD"], ["blame"]]
)
def test_a_skill_path_outside_the_repo_is_never_read(
    repo: Path, path: str, reason: str, args: list[str]
) -> None:
    set_config(repo, 'path = "skills/acme-returns/SKILL.md"', f'path = "{path}"')
    head = git(repo, "rev-parse", "HEAD")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 5, result.output
    assert result.output == refusal("[skill] path in skillvc.toml", path, reason)
    assert PASSWD_LINE.encode() not in log_bytes(repo)
    assert git(repo, "rev-parse", "HEAD") == head


@pytest.mark.parametrize(("path", "reason"), SKILL_CASES)
def test_doctor_names_a_skill_path_outside_the_repo(repo: Path, path: str, reason: str) -> None:
    set_config(repo, 'path = "skills/acme-returns/SKILL.md"', f'path = "{path}"')
    result = CliRunner().invoke(cli, ["doctor"])
    # doctor reports every check and exits 6 when one failed (README, "skillvc doctor").
    assert result.exit_code == 6, result.output
    message = refusal("[skill] path in skillvc.toml", path, reason).splitlines()[0][7:]
    fix = HINT.removeprefix("Hint: ")
    assert f"FAIL  skill: {message} Fix: {fix}\n" in result.output
    assert PASSWD_LINE not in result.output


@pytest.mark.parametrize(
    ("key", "path", "reason"),
    [
        ("val", "../../../../etc/passwd.jsonl", OUTSIDE),
        ("val", "/etc/passwd", ABSOLUTE),
        ("val", ".git/description", GIT_DIR),
        ("val", "skills/evil.md", SYMLINK_OUT),
        ("train", "etc/passwd", SYMLINK_OUT),
    ],
)
@pytest.mark.parametrize("args", [["eval"], ["train"]])
def test_a_task_file_outside_the_repo_is_never_read(
    repo: Path, key: str, path: str, reason: str, args: list[str]
) -> None:
    set_config(repo, f'{key} = "evals/{key}.jsonl"', f'{key} = "{path}"')
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 5, result.output
    assert result.output == refusal(f"[tasks] {key} in skillvc.toml", path, reason)
    assert PASSWD_LINE.encode() not in log_bytes(repo)
    doctor = CliRunner().invoke(cli, ["doctor"])
    assert doctor.exit_code == 6
    message = refusal(f"[tasks] {key} in skillvc.toml", path, reason).splitlines()[0][7:]
    assert f"FAIL  tasks: {message}" in doctor.output
    assert PASSWD_LINE not in result.output + doctor.output


def test_task_file_layouts_path_and_skillopt_dir_are_checked(repo: Path) -> None:
    text = (repo / "skillvc.toml").read_text()
    start, end = text.index('train = "evals'), text.index('scorer = "exact"')
    for layout, shown, key in [
        ('path = "etc/passwd"\n', "etc/passwd", "path"),
        ('skillopt_dir = "../.."\n', "../../train/items.json", "skillopt_dir"),
        ('skillopt_dir = "/etc"\n', "/etc/train/items.json", "skillopt_dir"),
    ]:
        (repo / "skillvc.toml").write_text(text[:start] + layout + text[end:])
        result = CliRunner().invoke(cli, ["eval"])
        assert result.exit_code == 5, result.output
        assert result.output.startswith(f"Error: [tasks] {key} in skillvc.toml names {shown!r}")


def test_a_json_schema_file_outside_the_directory_is_refused(repo: Path) -> None:
    set_config(
        repo,
        'scorer = "exact"',
        'scorer = "json"\nscorer_options = { schema = "etc/passwd" }',
    )
    result = CliRunner().invoke(cli, ["eval"])
    assert result.exit_code == 5, result.output
    assert result.output == refusal("[tasks.scorer_options] schema", "etc/passwd", SYMLINK_OUT)
    assert PASSWD_LINE.encode() not in log_bytes(repo)


def test_a_skill_inside_the_repo_through_a_symlink_still_works(repo: Path) -> None:
    (repo / "current.md").symlink_to(os.path.join("skills", "acme-returns", "SKILL.md"))
    git(repo, "add", "current.md")
    git(repo, "commit", "-qm", "an alias for the skill")
    set_config(repo, 'path = "skills/acme-returns/SKILL.md"', 'path = "./current.md"')
    result = CliRunner().invoke(cli, ["validate"])
    assert result.exit_code == 0, result.output
    assert result.output == "Checked 1 file: no problems.\n"


def test_init_refuses_a_skill_under_git(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (git_repo / ".git" / "SKILL.md").write_text("# not a skill\n")
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(cli, ["init", "--skill", ".git/SKILL.md"])
    assert result.exit_code == 5
    assert result.output == refusal("--skill", ".git/SKILL.md", GIT_DIR)
    assert not (git_repo / "skillvc.toml").exists()
