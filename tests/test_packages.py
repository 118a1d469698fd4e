"""Skill packages (issue 14, item 1): a skill directory's files, what the chat target sees,
and the rule that every relative link resolves inside the package."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import PACKAGE_LINK, git, make_package_repo

from skillvc.cli import cli
from skillvc.core.config import load_config
from skillvc.core.errors import StateConflict
from skillvc.packages import (
    SkillPackage,
    apply_package_edits,
    broken_links,
    load_package,
    render_chat,
)
from skillvc.repo.skillrepo import SkillRepo
from skillvc.review.evaluation import evaluate
from skillvc.skill.edits import Edit, apply_edits
from skillvc.skill.skilldoc import SkillDocument
from skillvc.workspace.workspace import open_workspace

FORMS = (
    "# Forms and special cases\n\n"
    "- Billing errors go to the billing team: escalate them.\n"
    "- After 30 days from delivery, deny returns unless the item is defective.\n"
)


@pytest.fixture
def package_repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skills/acme-returns/: SKILL.md (linking references/forms.md), the reference, an unlinked
    notes.md and a script; [skill] path names the directory."""
    monkeypatch.chdir(git_repo)  # restored after the test
    return make_package_repo(
        git_repo, FORMS, {"references/notes.md": "Unlinked notes.\n", "run.sh": "echo hi\n"}
    )


def test_a_directory_path_is_a_package_of_its_text_files(package_repo: Path) -> None:
    config = load_config(package_repo)
    assert config.skill_relpath == "skills/acme-returns/SKILL.md"
    assert config.package_dir == "skills/acme-returns"
    package = load_package(config)
    assert package is not None
    assert package.names == ["SKILL.md", "references/forms.md", "references/notes.md"]
    with SkillRepo(package_repo) as repo:
        committed = load_package(config, repo, "HEAD")
    assert committed == package


def test_include_and_exclude_globs_choose_the_files(package_repo: Path) -> None:
    toml = package_repo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            'path = "skills/acme-returns"',
            'path = "skills/acme-returns"\ninclude = ["*.md", "*.sh"]\nexclude = ["notes.md"]',
        )
    )
    package = load_package(load_config(package_repo))
    assert package is not None
    assert package.names == ["SKILL.md", "references/forms.md", "run.sh"]


def test_a_single_file_skill_is_no_package(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(skill_repo)
    assert CliRunner().invoke(cli, ["init", "--target", "sim:support"]).exit_code == 0
    config = load_config(skill_repo)
    assert config.package_dir is None
    assert load_package(config) is None


def test_every_file_round_trips_byte_for_byte_and_only_skill_md_has_frontmatter() -> None:
    files = {
        "SKILL.md": b"\xef\xbb\xbf---\r\nname: x\r\n---\r\nBody [r](references/a.md)\r\n",
        "references/a.md": b"---\ntitle: not frontmatter\n---\n# A\n",
        "references/b.txt": b"plain\ntext without newline at end",
    }
    package = SkillPackage("skills/x", files)
    for name, raw in files.items():
        assert package.document(name).render() == raw
    assert package.document("SKILL.md").frontmatter == {"name": "x"}
    reference = package.document("references/a.md")
    assert reference.frontmatter is None
    assert reference.body.startswith("---\ntitle: not frontmatter")
    assert reference.with_text(reference.text + "more\n").frontmatter is None


def test_the_chat_rendering_appends_linked_files_under_headers_within_the_budget() -> None:
    files = {
        "SKILL.md": b"Use [forms](references/forms.md), [big](big.md#part) and "
        b"[web](https://example.com), [again](./references/forms.md).\n",
        "references/forms.md": b"FORMS\n",
        "big.md": b"B" * 200,
        "unlinked.md": b"NEVER SENT\n",
    }
    package = SkillPackage("", files)
    whole = render_chat(package, budget=1000)
    assert whole.system == (
        files["SKILL.md"].decode()
        + "\n\n## Reference file: references/forms.md\n\nFORMS\n"
        + "\n\n## Reference file: big.md\n\n"
        + "B" * 200
    )
    assert whole.included == ("references/forms.md", "big.md")
    assert whole.cut == ()
    small = render_chat(package, budget=100)
    assert "NEVER SENT" not in small.system and "B" * 200 not in small.system
    assert small.included == ("references/forms.md",)
    assert small.cut == ("big.md",)
    bare = render_chat(SkillPackage("", {"SKILL.md": b"No links.\n"}), budget=1000)
    assert bare.system == "No links.\n"


def test_links_that_leave_the_package_or_name_no_file_are_broken() -> None:
    files = {
        "SKILL.md": b"[a](references/a.md) [gone](references/gone.md) [up](../other/SKILL.md)"
        b" [dir](references/) [mail](mailto:x@y.z) [anchor](#top)\n",
        "references/a.md": b"Back to [the skill](../SKILL.md).\n",
    }
    problems = broken_links(SkillPackage("skills/x", files))
    assert [p.message for p in problems] == [
        "skills/x/SKILL.md: the link to 'references/gone.md' names no file of the package.",
        "skills/x/SKILL.md: the link to '../other/SKILL.md' leaves the skill package.",
    ]


def test_validate_fails_a_broken_link_and_passes_a_sound_package(package_repo: Path) -> None:
    ok = CliRunner().invoke(cli, ["validate"])
    assert ok.exit_code == 0, ok.output
    skill = package_repo / "skills" / "acme-returns" / "SKILL.md"
    skill.write_text(skill.read_text() + "See [missing](references/missing.md).\n")
    bad = CliRunner().invoke(cli, ["validate"])
    assert bad.exit_code == 5
    assert (
        "skills/acme-returns/SKILL.md: the link to 'references/missing.md' names no file "
        "of the package." in bad.output
    )


def test_eval_sends_the_linked_reference_to_the_chat_target(package_repo: Path) -> None:
    ws = open_workspace(package_repo)
    linked = evaluate(ws, None, "val")
    skill = package_repo / "skills" / "acme-returns" / "SKILL.md"
    skill.write_text(skill.read_text().replace(PACKAGE_LINK, "\n"))  # same files, no link
    unlinked = evaluate(open_workspace(package_repo), None, "val")
    assert linked.mean is not None and unlinked.mean is not None
    # The simulated target knows a rule only when it is in what it receives.
    assert linked.mean > unlinked.mean
    systems = _target_systems(package_repo)
    with_link = [s for s in systems if "](references/forms.md)" in s]
    assert with_link and all(
        "\n\n## Reference file: references/forms.md\n\n" + FORMS in s for s in with_link
    )
    assert not any("Unlinked notes." in s for s in systems)
    assert any("## Reference file:" not in s for s in systems)  # the unlinked version


def _target_systems(repo: Path) -> list[str]:
    """The system prompts of every recorded target call."""
    with sqlite3.connect(repo / ".skillvc" / "events.db") as db:
        keys = [
            json.loads(row[0])["prompt"]
            for row in db.execute("SELECT payload FROM events WHERE type = 'model.call'")
            if json.loads(row[0])["role"] == "target"
        ]
        out = []
        for key in keys:
            (content,) = db.execute("SELECT content FROM blobs WHERE hash = ?", (key,)).fetchone()
            messages = json.loads(content)
            out.append("".join(m["content"] for m in messages if m["role"] == "system"))
    return out


def test_eval_refuses_a_package_with_a_broken_link(package_repo: Path) -> None:
    skill = package_repo / "skills" / "acme-returns" / "SKILL.md"
    skill.write_text(skill.read_text() + "[x](nowhere.md)\n")
    result = CliRunner().invoke(cli, ["eval", "--split", "val"])
    assert result.exit_code == 5
    assert "skills/acme-returns/SKILL.md: the link to 'nowhere.md' names no file" in result.output


def test_training_a_package_shows_the_target_the_linked_file(package_repo: Path) -> None:
    result = CliRunner().invoke(cli, ["train"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(package_repo / ".skillvc" / "events.db") as db:
        rows = list(db.execute("SELECT payload FROM events WHERE type = 'package.rendered'"))
    assert [json.loads(r[0]) for r in rows] == [{"included": ["references/forms.md"], "cut": []}]
    systems = _target_systems(package_repo)
    assert systems and all("## Reference file: references/forms.md" in s for s in systems)
    changed = git(package_repo, "log", "--name-only", "--format=", "main")
    assert set(re.findall(r"\S+", changed)) <= {
        "skills/acme-returns/SKILL.md",
        "skills/acme-returns/references/forms.md",
        "skills/acme-returns/references/notes.md",
        "skills/acme-returns/run.sh",
        "skillvc.toml",
        ".gitignore",
        "evals/train.jsonl",
        "evals/val.jsonl",
        "evals/test.jsonl",
    }


# -- edits that name their file ---------------------------------------------------------------


def _pkg() -> SkillPackage:
    return SkillPackage(
        "skills/x",
        {
            "SKILL.md": b"---\nname: x\n---\n# X\n\nSee [forms](references/forms.md).\n",
            "references/forms.md": b"# Forms\r\n\r\n- Old rule.\r\n",
        },
    )


def test_an_edit_without_file_is_exactly_the_single_file_edit() -> None:
    plain = Edit.from_dict({"op": "add", "content": "- New.", "rationale": "r"})
    assert plain.file == "SKILL.md"
    assert plain == Edit(op="add", content="- New.", rationale="r")
    assert "file" not in plain.to_dict()
    named = Edit.from_dict({"op": "add", "content": "- New.", "file": "./references/forms.md"})
    assert named.file == "references/forms.md"
    assert named.to_dict()["file"] == "references/forms.md"
    assert named.id != plain.id
    assert Edit.from_dict(named.to_dict()) == named


def test_package_edits_apply_to_the_files_they_name() -> None:
    edits = [
        Edit("replace", target="- Old rule.", content="- New rule.", file="references/forms.md"),
        Edit("add", content="- Skill rule.", file="SKILL.md"),
        Edit("add", content="# Checklist\n\n- Check.", file="references/checklist.md"),
    ]
    result = apply_package_edits(_pkg(), edits)
    assert result.applied == tuple(edits)
    assert result.unmatched == ()
    assert result.changed == ("SKILL.md", "references/checklist.md", "references/forms.md")
    assert result.created == ("references/checklist.md",)
    files = result.package.files
    assert files["references/forms.md"] == b"# Forms\r\n\r\n- New rule.\r\n"  # CRLF kept
    assert files["references/checklist.md"] == b"# Checklist\n\n- Check.\n"
    assert b"- Skill rule." in files["SKILL.md"] and files["SKILL.md"].startswith(b"---\nname: x")
    # The new file is not linked from SKILL.md: validate flags nothing (no broken link) and the
    # chat target is not sent it until SKILL.md links it.
    assert "references/checklist.md" not in render_chat(result.package, 10_000).included


def test_package_edits_never_leave_the_package_nor_delete_a_file() -> None:
    edits = [
        Edit("add", content="x", file="../elsewhere.md"),
        Edit("replace", target="a", content="b", file="references/missing.md"),
        Edit("delete", target="# Forms\n\n- Old rule.", file="references/forms.md"),
        Edit("replace", target="- Nowhere.", content="- B.", file="references/forms.md"),
    ]
    pkg = _pkg()
    result = apply_package_edits(pkg, edits)
    assert result.applied == () and result.changed == ()
    assert result.package.files == pkg.files
    assert [(u.reason, u.detail) for u in result.unmatched][:3] == [
        ("missing", "The edit names '../elsewhere.md', which is outside the skill package."),
        ("missing", "references/missing.md is not a file of the skill package."),
        (
            "format",
            "references/forms.md: the edit would leave the file empty; "
            "training never deletes a file.",
        ),
    ]
    last = result.unmatched[3]
    assert last.reason == "missing" and last.detail.startswith("references/forms.md: ")
    assert sorted(result.unmatched_by_file()) == [
        "../elsewhere.md",
        "references/forms.md",
        "references/missing.md",
    ]


def test_a_single_file_apply_reports_an_edit_naming_another_file() -> None:
    doc = SkillDocument.parse(b"# X\n")
    result = apply_edits(doc, [Edit("add", content="- A.", file="references/a.md")])
    assert result.applied == ()
    assert [(u.reason, u.detail) for u in result.unmatched] == [
        ("missing", "The edit names references/a.md, not SKILL.md.")
    ]


# -- one candidate = one commit of package files ----------------------------------------------


def test_a_package_edit_set_is_one_commit_touching_only_package_files(package_repo: Path) -> None:
    config = load_config(package_repo)
    package = load_package(config)
    assert package is not None
    edits = [
        Edit("add", content="- Gold customers get an exchange.", file="references/forms.md"),
        Edit("add", content="# Checklist\n\n- Check the tier.", file="references/checklist.md"),
        Edit("add", content="Also read [the checklist](references/checklist.md).", file="SKILL.md"),
    ]
    result = apply_package_edits(package, edits)
    assert result.unmatched == ()
    assert broken_links(result.package) == []
    with SkillRepo(package_repo) as repo:
        head = repo.head_sha()
        sha = repo.commit_files(
            {result.package.repo_path(n): result.package.files[n] for n in result.changed},
            "Train: three edits",
            {"Skillvc-Run": "r1"},
            expected_parent=head,
        )
        assert repo.head_sha() == sha
    touched = git(package_repo, "show", "--name-only", "--format=", sha).split()
    assert touched == [
        "skills/acme-returns/SKILL.md",
        "skills/acme-returns/references/checklist.md",
        "skills/acme-returns/references/forms.md",
    ]
    assert git(package_repo, "status", "--porcelain") == ""
    assert load_package(load_config(package_repo)) == result.package
    rendered = render_chat(result.package, 10_000)
    assert rendered.included == ("references/forms.md", "references/checklist.md")


def test_a_package_commit_refuses_a_moved_head_and_changes_nothing(package_repo: Path) -> None:
    before = git(package_repo, "rev-parse", "HEAD")
    git(package_repo, "commit", "-q", "--allow-empty", "-m", "someone else")
    with SkillRepo(package_repo) as repo, pytest.raises(StateConflict):
        repo.commit_files(
            {"skills/acme-returns/references/new.md": b"x\n"}, "m", expected_parent=before
        )
    assert not (package_repo / "skills" / "acme-returns" / "references" / "new.md").exists()
    assert git(package_repo, "status", "--porcelain") == ""
