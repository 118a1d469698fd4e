"""`skillvc apply`: a hand-written diff becomes recorded edits and one commit, or nothing."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git
from helpers import add_protected_region

from skillvc.cli import cli
from skillvc.core.store import open_store

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture
def repo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = copy_repo(demo_seed, tmp_path / "repo")
    monkeypatch.chdir(path)
    return path


def diff_of(repo: Path, old: str, new: str) -> Path:
    """A `git diff` of the skill with ``old`` replaced by ``new``; the file is restored."""
    skill = repo / SKILL
    text = skill.read_text()
    skill.write_text(text.replace(old, new))
    patch = repo.parent / "change.diff"
    patch.write_text(git(repo, "diff", "--", SKILL) + "\n")
    skill.write_text(text)
    return patch


def test_a_patch_becomes_recorded_edits_and_one_commit(repo: Path) -> None:
    patch = diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.")
    before = git(repo, "rev-parse", "HEAD")
    result = CliRunner().invoke(cli, ["apply", str(patch), "-m", "Shorter style rule"])
    assert result.exit_code == 0, result.output
    assert "1 edit(s) recorded" in result.output
    assert git(repo, "rev-parse", "HEAD~1") == before
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == SKILL
    assert "Keep the reply short.\n" in (repo / SKILL).read_text()
    assert git(repo, "status", "--porcelain") == ""
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query("SELECT event_id, source, content FROM proposed_edits")
    assert [(r["source"], r["content"]) for r in rows] == [("human", "Keep the reply short.\n")]
    assert f"Skillvc-Event: {rows[0]['event_id']}" in git(repo, "log", "-1", "--format=%B")
    blame = json.loads(CliRunner().invoke(cli, ["blame", "--json"]).output)
    line = next(b for b in blame if b["text"] == "Keep the reply short.")
    assert line["human"] is True and line["commit"] == git(repo, "rev-parse", "HEAD")


def test_apply_refuses_a_regression_on_val_unless_forced(repo: Path) -> None:
    # Moving the 14-day rule and the style line: the simulated target scores worse on val.
    patch = repo.parent / "change.diff"
    patch.write_text(
        headed(f"a/{SKILL}", f"b/{SKILL}")
        + headed(
            f"a/{SKILL}",
            f"b/{SKILL}",
            "@@ -12 +12 @@\n-- After 14 days from delivery, deny all returns.\n"
            "+- After 30 days, deny all returns.\n",
        )
    )
    head = git(repo, "rev-parse", "HEAD")
    refused = CliRunner().invoke(cli, ["apply", "-q", str(patch)])
    assert refused.exit_code == 7, refused.output
    first = refused.output.splitlines()[0]
    assert re.fullmatch(
        r"Error: The patch makes the skill score worse on val: (\d\.\d{3}) -> (\d\.\d{3}) "
        r"\(-\d\.\d{3} ± \d\.\d{3} s\.e\.; [1-9]\d* worse, \d+ better of \d+; p=[\d.e-]+ sign\); "
        r"nothing was committed\.",
        first,
    ), first
    assert "Hint: Pass --force to commit it anyway" in refused.output
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.events(types=["edit.proposed"]) == []
        calls = len(store.events(types=["model.call"]))

    forced = CliRunner().invoke(cli, ["apply", "-q", "--force", str(patch)])
    assert forced.exit_code == 0, forced.output
    assert (
        forced.output.startswith("Val: ")
        and "\nA drop, committed because of --force.\n" in forced.output
    )
    assert git(repo, "rev-parse", "HEAD~1") == head
    with open_store(repo / ".skillvc/events.db") as store:  # the gate's scores were reused
        assert len(store.events(types=["model.call"])) == calls


def test_apply_without_the_gate_makes_no_model_call(repo: Path) -> None:
    patch = diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.")
    result = CliRunner().invoke(cli, ["apply", "--no-gate", str(patch)])
    assert result.exit_code == 0 and "Val:" not in result.output
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.events(types=["model.call"]) == []


def test_a_patch_that_no_longer_applies_writes_nothing(repo: Path) -> None:
    patch = diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.")
    skill = repo / SKILL
    skill.write_text(skill.read_text().replace("Keep the reply short and friendly.", "Be brief."))
    git(repo, "commit", "-qam", "someone else changed the line")
    head = git(repo, "rev-parse", "HEAD")
    result = CliRunner().invoke(cli, ["apply", str(patch)])
    assert result.exit_code == 5
    # The hunk's context no longer matches at its line (nor near it): refused with the line it
    # expected, never placed wherever its text happens to be found.
    assert result.output == (
        f"Error: The patch does not apply to {SKILL}: hunk @@ -14,4 +14,4 @@ expects line 17 "
        "to read 'Keep the reply short and friendly.', but it reads 'Be brief.', and the hunk "
        "matches nowhere within 10 lines of there.\n"
        "Hint: Produce the diff with 'git diff' against the current skill file.\n"
    )
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""


def test_a_patch_into_a_protected_region_is_refused(repo: Path) -> None:
    add_protected_region(repo, repo / SKILL, "slow-update", "a protected region")
    patch = diff_of(repo, "\nOld.\n", "\nNew.\n")
    result = CliRunner().invoke(cli, ["apply", str(patch)])
    assert result.exit_code == 5 and "protected" in result.output
    assert "Old." in (repo / SKILL).read_text()
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM proposed_edits")[0]["n"] == 0


# -- the diff names the file ------------------------------------------------------------------

OUT_HINT = (
    "Hint: Use a path relative to the repository root, inside it (not under .git/ or .skillvc/)."
)
PATCH_HINT = "Hint: Produce the diff with 'git diff' against the current skill file."
# The hunk of diff_of(repo, "Keep the reply short and friendly.", "Keep the reply short.").
HUNK = (
    "@@ -14,4 +14,4 @@\n \n ## Style\n \n"
    "-Keep the reply short and friendly.\n+Keep the reply short.\n"
)


def apply_text(repo: Path, diff: str | bytes) -> tuple[int, str]:
    """`skillvc apply -` with ``diff`` on stdin; asserts a refusal leaves no trace."""
    head = git(repo, "rev-parse", "HEAD")
    skill = (repo / SKILL).read_bytes()
    # --no-gate (issue 24): these tests are about reading diffs, not about scoring them.
    result = CliRunner().invoke(cli, ["apply", "--no-gate", "-"], input=diff)
    if result.exit_code != 0:
        assert git(repo, "rev-parse", "HEAD") == head
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / SKILL).read_bytes() == skill
        with open_store(repo / ".skillvc/events.db") as store:
            assert store.query("SELECT COUNT(*) AS n FROM events")[0]["n"] == 0
    return result.exit_code, result.output


def headed(source: str, target: str, hunk: str = HUNK) -> str:
    return f"--- {source}\n+++ {target}\n{hunk}"


def test_a_diff_of_another_file_is_refused(repo: Path) -> None:
    code, output = apply_text(repo, headed("a/skills/pdf/SKILL.md", "b/skills/pdf/SKILL.md"))
    assert code == 5
    assert output == (
        f"Error: The diff patches skills/pdf/SKILL.md, which is not the configured skill {SKILL}."
        f"\nHint: Give apply a diff of the skill only, e.g. 'git diff -- {SKILL}'.\n"
    )


@pytest.mark.parametrize(
    ("source", "target", "named", "reason"),
    [
        (
            "a/../../etc/passwd",
            "b/../../etc/passwd",
            "../../etc/passwd",
            "leads out of the repository",
        ),
        ("/etc/passwd", "/etc/passwd", "/etc/passwd", "is an absolute path"),
        (f"a/{SKILL}", "b/../../etc/passwd", "../../etc/passwd", "leads out of the repository"),
        ("a/.git/config", "b/.git/config", ".git/config", "is under .git/ or .skillvc/"),
        (
            "a/.skillvc/events.db",
            "b/.skillvc/events.db",
            ".skillvc/events.db",
            "is under .git/ or .skillvc/",
        ),
    ],
)
def test_a_diff_path_outside_the_repo_is_refused(
    repo: Path, source: str, target: str, named: str, reason: str
) -> None:
    code, output = apply_text(repo, headed(source, target))
    assert code == 5
    assert output == f"Error: The diff names {named!r}, which {reason}.\n{OUT_HINT}\n"


def test_a_diff_through_a_symlink_out_of_the_repo_is_refused(repo: Path) -> None:
    (repo / "etc").symlink_to("/etc")
    git(repo, "add", "etc")
    git(repo, "commit", "-qm", "a link out")
    code, output = apply_text(repo, headed("a/etc/passwd", "b/etc/passwd"))
    assert code == 5
    assert output == (
        "Error: The diff names 'etc/passwd', which passes through a symlink that leads out of "
        f"the repository.\n{OUT_HINT}\n"
    )


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (
            "/dev/null",
            f"b/{SKILL}",
            f"The diff creates {SKILL}; apply only changes the existing skill {SKILL}.",
        ),
        (
            f"a/{SKILL}",
            "/dev/null",
            f"The diff deletes {SKILL}; apply only changes the existing skill {SKILL}.",
        ),
        (
            f"a/{SKILL}",
            "b/skills/new/SKILL.md",
            f"The diff renames {SKILL} to skills/new/SKILL.md; apply only changes the skill "
            f"{SKILL} in place.",
        ),
    ],
)
def test_new_deleted_and_renamed_files_are_refused(
    repo: Path, source: str, target: str, message: str
) -> None:
    code, output = apply_text(repo, headed(source, target))
    assert code == 5
    assert output == f"Error: {message}\n{PATCH_HINT}\n"


def test_several_files_are_refused_unless_all_are_the_skill(repo: Path) -> None:
    skill_part = headed(f"a/{SKILL}", f"b/{SKILL}")
    other = headed("a/evals/val.jsonl", "b/evals/val.jsonl", "@@ -1 +1 @@\n-x\n+y\n")
    code, output = apply_text(repo, skill_part + other)
    assert code == 5
    assert output.startswith(
        f"Error: The diff patches evals/val.jsonl, which is not the configured skill {SKILL}."
    )
    # Two sections of the skill apply one after the other, like `git apply`.
    second = headed(
        f"a/{SKILL}",
        f"b/{SKILL}",
        "@@ -12 +12 @@\n-- After 14 days from delivery, deny all returns.\n"
        "+- After 30 days, deny all returns.\n",
    )
    code, output = apply_text(repo, skill_part + second)
    assert code == 0, output
    assert "2 edit(s) recorded" in output
    text = (repo / SKILL).read_text()
    assert "- After 30 days, deny all returns.\n" in text and "Keep the reply short.\n" in text


def test_diffs_without_prefixes_and_with_quoted_paths_name_the_skill(repo: Path) -> None:
    code, output = apply_text(repo, headed(SKILL, SKILL))  # git diff --no-prefix
    assert code == 0, output
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    code, output = apply_text(repo, headed(f'"a/{SKILL}"', f'"b/{SKILL}"'))
    assert code == 0, output


# -- hunks match at their lines ---------------------------------------------------------------


def test_a_hunk_far_from_its_stated_line_is_refused(repo: Path) -> None:
    code, output = apply_text(
        repo, headed(f"a/{SKILL}", f"b/{SKILL}", HUNK.replace("-14,4 +14,4", "-2,4 +2,4"))
    )
    assert code == 5
    assert output == (
        f"Error: The patch does not apply to {SKILL}: hunk @@ -2,4 +2,4 @@ expects line 2 to "
        "read '', but it reads 'name: acme-returns', and the hunk matches nowhere within 10 "
        f"lines of there.\n{PATCH_HINT}\n"
    )


def test_a_hunk_a_few_lines_off_applies_at_the_nearest_match(repo: Path) -> None:
    code, output = apply_text(
        repo, headed(f"a/{SKILL}", f"b/{SKILL}", HUNK.replace("-14,4 +14,4", "-5,4 +5,4"))
    )
    assert code == 0, output  # 9 lines off: within the bound
    assert (repo / SKILL).read_text().endswith("## Style\n\nKeep the reply short.\n")


def test_an_insertion_goes_exactly_where_it_says(repo: Path) -> None:
    beyond = headed(f"a/{SKILL}", f"b/{SKILL}", "@@ -40,0 +41 @@\n+- New rule.\n")
    code, output = apply_text(repo, beyond)
    assert code == 5
    assert output == (
        f"Error: The patch does not apply to {SKILL}: hunk @@ -40,0 +41,1 @@ inserts after line "
        f"40, but the file has 17 lines.\n{PATCH_HINT}\n"
    )
    code, output = apply_text(repo, beyond.replace("-40,0 +41", "-13,0 +14"))
    assert code == 0, output
    assert (
        "- Always quote the order number in the reply.\n- New rule.\n" in (repo / SKILL).read_text()
    )


# -- input that is not a diff -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "The patch is empty."),
        (b"\n  \n", "The patch is empty."),
        (bytes(range(256)), "The patch is binary data (it has NUL bytes), not a unified diff."),
        (b"--- a/x\n\xff\xfe", "The patch is not UTF-8 text (bad byte at offset 8)."),
        (
            b"hello, this is not a diff\n",
            "The input is not a unified diff (it has no '--- a/FILE', '+++ b/FILE').",
        ),
    ],
)
def test_input_that_is_not_a_diff_is_one_sentence(repo: Path, data: bytes, message: str) -> None:
    code, output = apply_text(repo, data)
    assert code == 5
    assert output == f"Error: {message}\n{PATCH_HINT}\n"


def test_random_bytes_and_mangled_diffs_never_crash(repo: Path) -> None:
    good = headed(f"a/{SKILL}", f"b/{SKILL}").encode()
    rng = random.Random(9)
    inputs = [rng.randbytes(rng.randrange(1, 400)) for _ in range(40)]
    for _ in range(40):  # a real diff with a few bytes flipped, cut short or doubled
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.choice(b"-+@ \n,0123456789ab/\xff")
        inputs.append(bytes(data[: rng.randrange(1, len(data) + 1)]))
    for data in inputs:
        code, output = apply_text(repo, data)
        if code == 0:  # a flip that left a diff of the skill: undo the commit it made
            git(repo, "reset", "-q", "--hard", "HEAD~1")
            (repo / ".skillvc/events.db").unlink()
            for suffix in ("-wal", "-shm"):
                (repo / f".skillvc/events.db{suffix}").unlink(missing_ok=True)
            CliRunner().invoke(cli, ["init"])
            continue
        assert code in (3, 5), (data, output)
        lines = output.splitlines()
        assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")


def test_control_characters_in_a_diff_path_are_quoted(repo: Path) -> None:
    code, output = apply_text(repo, headed("a/\x1b[2Jx.md", "b/\x1b[2Jx.md"))
    assert code == 5
    assert output.startswith("Error: The diff patches '\\x1b[2Jx.md', which is not the configured")
    assert "\x1b" not in output


def test_a_utf16_diff_gets_its_own_sentence(repo: Path) -> None:
    diff = headed(f"a/{SKILL}", f"b/{SKILL}").encode("utf-16")  # with a BOM, like PowerShell
    code, output = apply_text(repo, diff)
    assert code == 5
    assert output == (
        "Error: The patch is UTF-16 text; skillvc reads diffs as UTF-8.\n"
        "Hint: Write the diff as UTF-8, e.g. git diff --output=fix.diff -- SKILL.md.\n"
    )
