"""Small inconsistencies a new user met (issue 45, item 7): `demo -q` is quiet, `show` names a
diff's file as `log -p` does, and `init` says what `doctor` will refuse in a skill file. (`check`
with no change: tests/test_one_verdict.py; the README's diff and the docs extra:
tests/test_readme.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from tests.conftest import git


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliRunner]:
    root = tmp_path_factory.mktemp("everyday") / "acme"
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root), "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root, result


def test_demo_q_prints_nothing_on_stderr(demo) -> None:
    _, result = demo
    assert result.stderr == ""  # it said "Creating the demo skills repo in ..."
    assert result.stdout.startswith("run run-")


def test_show_names_the_repository_path_as_log_p_does(demo, monkeypatch) -> None:
    root, _ = demo
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, ["log", "--json", "-p"], catch_exceptions=False)
    entry = next(e for e in json.loads(result.stdout) if e["decision"] == "accepted")
    path = "skills/acme-returns/SKILL.md"
    assert f"--- a/{path}\n+++ b/{path}\n" in entry["patch"]
    for ident in (str(entry["id"]), entry["commit"][:10]):
        shown = CliRunner().invoke(cli, ["show", ident], catch_exceptions=False).stdout
        assert f"    --- a/{path}\n    +++ b/{path}\n" in shown, ident  # was a/SKILL.md
        data = json.loads(CliRunner().invoke(cli, ["show", ident, "--json"]).stdout)
        assert data["entry"]["patch"] == entry["patch"]


def test_init_says_what_doctor_will_refuse_and_how_to_fix_it(git_repo: Path, monkeypatch) -> None:
    skill = git_repo / "skills" / "support" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("# Support\n\nAnswer politely.\n")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "a skill without frontmatter")
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(
        cli, ["init", "--target", "sim:support", "--optimizer", "sim:support"]
    )
    assert result.exit_code == 0, result.output
    problem = (
        "skills/support/SKILL.md: a SKILL.md must start with YAML frontmatter holding name "
        "and description."
    )
    assert (
        "Fix before training ('skillvc doctor' and 'skillvc train' refuse it): "
        f"{problem}\n"
        "Add these lines at the top of skills/support/SKILL.md (the name is its directory's):\n"
        "---\nname: support\ndescription: What the skill does and when to use it.\n---\n"
    ) in result.stdout
    doctor = CliRunner().invoke(cli, ["doctor"])
    assert f"FAIL  skill: {problem}" in doctor.stdout
    # The lines init gave make the skill pass doctor's check.
    skill.write_text(
        "---\nname: support\ndescription: What the skill does and when to use it.\n---\n"
        + skill.read_text()
    )
    doctor = CliRunner().invoke(cli, ["doctor"])
    assert "ok    skill: skills/support/SKILL.md passes its format rules." in doctor.stdout
