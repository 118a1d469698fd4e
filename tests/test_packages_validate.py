"""Skill packages (issue 14, item 5): validate, the pre-commit hook and init on a package.

Every repository here is a real git repository in a temp dir; every hook run is a real
`git commit`. The package is skills/acme-returns/ (SKILL.md linking references/forms.md,
which holds a protected region); [skill] path names the directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_packages
import test_pre_commit_framework as framework
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.core.config import load_config
from skillvc.integrations.hooks import install_hooks, validate
from skillvc.packages import apply_package_edits, load_package
from skillvc.repo.skillrepo import SkillRepo
from skillvc.skill.edits import Edit
from skillvc.training.optimize import apply_selected_package

DIR = "skills/acme-returns"
SKILL = f"{DIR}/SKILL.md"
FORMS = f"{DIR}/references/forms.md"
SKILL_TEXT = (
    "---\nname: acme-returns\ndescription: Handle returns for the Acme store.\n---\n"
    "# Returns\n\n- Refund within 30 days.\n\n"
    "For special cases read [the forms](references/forms.md).\n"
)
FORMS_TEXT = (
    "# Forms\n\n- Billing errors go to the billing team.\n\n"
    "<!-- skillvc:protected policy -->\nNever refund gift cards.\n"
    "<!-- /skillvc:protected policy -->\n"
)
CONFIG = f'[skill]\npath = "{DIR}"\n'
ORPHAN = (
    "{path}: no chain of links from SKILL.md leads to this file, so no agent is pointed to it "
    "and the chat target never sees it (link it from SKILL.md or a file SKILL.md links to, or "
    "leave it out with [skill] exclude)."
)


run_bounded = framework.run  # a command in its own process group, killed on timeout
package_repo = test_packages.package_repo  # the package with task files, initialised


def write(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def pkg(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(git_repo, SKILL, SKILL_TEXT)
    write(git_repo, FORMS, FORMS_TEXT)
    write(git_repo, "skillvc.toml", CONFIG)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "package")
    monkeypatch.chdir(git_repo)
    return git_repo


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def commit(root: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A real `git commit` (it runs the installed hooks); never raises on failure."""
    return subprocess.run(
        ["git", "commit", "-q", "-m", "change"],
        cwd=root,
        env={**os.environ, **(extra or {})},
        capture_output=True,
        text=True,
    )


# -- orphans ----------------------------------------------------------------------------------


def test_a_file_no_link_leads_to_is_a_warning_but_readme_and_license_are_not(pkg: Path) -> None:
    write(pkg, f"{DIR}/references/notes.md", "Unlinked notes.\n")
    write(pkg, f"{DIR}/README.md", "# acme-returns\n\nA skill for people to read about.\n")
    write(pkg, f"{DIR}/LICENSE.txt", "MIT\n")
    result = run("validate")
    assert result.exit_code == 0
    assert result.stdout == "Checked 5 files: no problems.\n"
    notes = f"{DIR}/references/notes.md"
    assert result.stderr == f"warning: {ORPHAN.format(path=notes)}\n"
    data = json.loads(run("validate", "--json").stdout)
    assert set(data) == {"ok", "files", "problems", "warnings"}  # the keys stay as they were
    assert data["ok"] is True
    assert data["files"] == [f"{DIR}/LICENSE.txt", f"{DIR}/README.md", SKILL, FORMS, notes]
    assert data["warnings"] == [
        {"path": notes, "rule": "package-orphan", "message": ORPHAN.format(path=notes)}
    ]


def test_a_reference_file_created_by_training_is_linked_or_flagged(pkg: Path) -> None:
    """Done when: a new reference file from training is linked from SKILL.md or flagged."""
    package = load_package(load_config(pkg))
    assert package is not None
    new = Edit("add", content="# Checklist\n\n- Check the tier.", file="references/checklist.md")
    link = Edit("add", content="Also read [the checklist](references/checklist.md).")
    # The training loop refuses the unlinked file (it would never reach an agent) ...
    alone = apply_selected_package(package, [new], max_bytes=16_000)
    assert alone.applied == () and [u.reason for u in alone.unmatched] == ["format"]
    linked = apply_selected_package(package, [new, link], max_bytes=16_000)
    assert linked.applied == (new, link) and linked.created == ("references/checklist.md",)
    # ... and one that gets into the package any other way is flagged by validate.
    created = apply_package_edits(package, [new]).package
    with SkillRepo(pkg) as repo:
        repo.commit_files(
            {f"{DIR}/references/checklist.md": created.files["references/checklist.md"]},
            "Add a checklist",
        )
    flagged = run("validate")
    assert flagged.exit_code == 0
    assert flagged.stderr == f"warning: {ORPHAN.format(path=f'{DIR}/references/checklist.md')}\n"
    write(pkg, SKILL, linked.package.files["SKILL.md"].decode())
    assert run("validate").stderr == ""


def test_a_file_only_another_reference_links_is_a_warning(pkg: Path) -> None:
    write(pkg, FORMS, FORMS_TEXT + "\nSee [the rates](rates.md).\n")
    write(pkg, f"{DIR}/references/rates.md", "# Rates\n")
    result = run("validate")
    assert result.exit_code == 0
    assert result.stderr == (
        f"warning: {DIR}/references/rates.md: only {FORMS} links to this file, not SKILL.md; "
        "the Agent Skills spec advises keeping file references one level deep from SKILL.md, "
        "and the chat target is sent only the files SKILL.md links (link it from SKILL.md).\n"
    )


# -- size guidance ----------------------------------------------------------------------------


def test_a_reference_over_the_body_guidance_is_a_warning(pkg: Path) -> None:
    rows = "".join(f"- Form {i}: fill in the order number.\n" for i in range(600))
    write(pkg, FORMS, "# Forms\n\n" + rows)
    result = run("validate", "--max-bytes", "100000")
    assert result.exit_code == 0
    assert result.stderr == (
        f"warning: {FORMS}: the reference file is 602 lines and about 5,674 tokens; an agent "
        "reads it whole, so keep it under the 500 lines and 5,000 tokens the Agent Skills spec "
        "recommends for SKILL.md's body (split it by topic and link each part where it is "
        "needed).\n"
        # 22,699 bytes and its header: more than the chat target's reference budget, too
        f"warning: {FORMS}: the chat target is not sent this file, which SKILL.md links: it "
        "would take the reference text sent after SKILL.md to 22,741 bytes, past [skill] "
        "reference_bytes = 16,000 (shorten it or the files linked before it, or raise "
        "reference_bytes).\n"
    )


def test_linked_files_the_chat_target_is_not_sent_are_named_with_the_limit(pkg: Path) -> None:
    write(pkg, SKILL, SKILL_TEXT + "And [the rates](references/rates.md).\n")
    write(pkg, f"{DIR}/references/rates.md", "# Rates\n\n" + "- Rate A is 5%.\n" * 20)
    config = pkg / "skillvc.toml"
    config.write_text(CONFIG + "reference_bytes = 300\n")
    # forms.md (187 bytes with its header) is sent; rates.md (371) would take the text to 558.
    cut = run("validate")
    assert cut.exit_code == 0
    assert cut.stderr == (
        f"warning: {DIR}/references/rates.md: the chat target is not sent this file, which "
        "SKILL.md links: it would take the reference text sent after SKILL.md to 558 bytes, "
        "past [skill] reference_bytes = 300 (shorten it or the files linked before it, or "
        "raise reference_bytes).\n"
    )
    config.write_text(CONFIG + "max_tokens = 100\n")  # 400 bytes; SKILL.md is 207
    capped = run("validate")
    assert capped.stderr == (
        f"warning: {DIR}/references/rates.md: the chat target is not sent this file, which "
        "SKILL.md links: it would take the prompt to 765 bytes, past the cap of [skill] "
        "max_tokens = 100 tokens (400 bytes; shorten SKILL.md or this file, or raise "
        "max_tokens).\n"
    )
    # An agent harness installs every file: nothing is cut.
    config.write_text(CONFIG + 'reference_bytes = 300\n[target]\nharness = "command"\n')
    assert run("validate").stderr == ""


def test_files_the_optimizer_sees_only_in_part_are_a_warning(pkg: Path) -> None:
    write(pkg, f"{DIR}/references/rates.md", "# Rates\n\n" + "- Rate A is 5%.\n" * 20)
    write(pkg, SKILL, SKILL_TEXT + "And [the rates](references/rates.md).\n")
    (pkg / "skillvc.toml").write_text(CONFIG + "optimizer_chars = 300\n")
    result = run("validate")
    assert result.exit_code == 0
    assert result.stderr == (
        f"warning: {DIR}/references/rates.md: the optimizer is shown only the start and end "
        "of this file (329 characters): the package's files besides SKILL.md hold 474 "
        "characters and share [skill] optimizer_chars = 300, so training cannot edit the "
        "part it does not see (trim or split them, or raise optimizer_chars).\n"
    )


# -- errors: encoding, markers, size budget ---------------------------------------------------


def test_a_reference_that_is_not_utf8_or_has_broken_markers_is_an_error(pkg: Path) -> None:
    write(pkg, FORMS, b"# Forms\n\n- Caf\xe9 orders.\n")
    bad = run("validate")
    assert bad.exit_code == 5
    assert bad.stdout == (
        f"{FORMS}: the file is not UTF-8 text (bad byte 0xe9 at offset 14); save it as UTF-8, "
        "or leave it out of the skill package with [skill] exclude.\n"
    )
    # eval refuses the same file before any model call (packages.checks.check_package_files)
    refused = run("eval", "--split", "val")
    assert refused.exit_code == 5
    assert (
        f"The skill package file {FORMS} in the working tree is not UTF-8 text (bad byte 0xe9 "
        "at offset 14)." in refused.stderr
    )
    write(pkg, FORMS, FORMS_TEXT.replace("<!-- /skillvc:protected policy -->\n", ""))
    markers = run("validate")
    assert markers.exit_code == 5
    assert markers.stdout == (
        f"{FORMS}: line 5: region 'policy' is never closed; it protects everything to the end "
        "of the document.\n"
    )
    # A leading '---' block in a reference file is text, not frontmatter: no problem.
    write(pkg, FORMS, "---\ntitle: [not yaml\n\n" + FORMS_TEXT)
    assert run("validate").exit_code == 0


def test_the_size_budget_applies_to_every_file_and_blocks_only_growth(pkg: Path) -> None:
    big = FORMS_TEXT + "- Rule.\n" * 60  # 140 + 480 bytes
    write(pkg, FORMS, big)
    over = f"{FORMS}: the file is {len(big):,} bytes, over the size budget of 300 bytes."
    tree = run("validate", "--max-bytes", "300")
    assert tree.exit_code == 0  # no earlier version to compare with: advice
    assert tree.stderr == f"warning: {over}\n"
    git(pkg, "add", FORMS)  # the commit grows it past the budget: refused
    staged = run("validate", "--staged", "--max-bytes", "300")
    assert staged.exit_code == 5
    assert staged.stdout == f"{over}\n"
    git(pkg, "commit", "-q", "--no-verify", "-m", "big forms")
    smaller = big.replace("- Rule.\n", "- R.\n", 10)  # still over, but smaller: advice
    write(pkg, FORMS, smaller)
    git(pkg, "add", FORMS)
    shrink = run("validate", "--staged", "--max-bytes", "300")
    assert shrink.exit_code == 0
    assert shrink.stderr == (
        f"warning: {FORMS}: the file is {len(smaller):,} bytes, over the size budget of 300 "
        "bytes.\n"
    )
    write(pkg, f"{DIR}/references/new.md", "x" * 400 + "\n")  # new, over: grew from nothing
    write(pkg, SKILL, SKILL_TEXT + "[new](references/new.md)\n")
    git(pkg, "add", ".")
    new = run("validate", "--staged", "--max-bytes", "300")
    assert new.exit_code == 5
    assert new.stdout == (
        f"{DIR}/references/new.md: the file is 401 bytes, over the size budget of 300 bytes.\n"
    )


# -- the pre-commit hook: the staged package --------------------------------------------------


@pytest.fixture
def hooked(pkg: Path) -> Path:
    install_hooks(pkg)
    return pkg


def test_a_staged_reference_that_breaks_a_link_fails_the_commit(hooked: Path) -> None:
    before = git(hooked, "rev-parse", "HEAD")
    write(hooked, FORMS, FORMS_TEXT + "\nSee [the rates](rates.md).\n")
    git(hooked, "add", FORMS)
    refused = commit(hooked)
    assert refused.returncode != 0
    assert f"{FORMS}: the link to 'rates.md' names no file of the package.\n" in refused.stderr
    assert "Error: 1 problem in 1 skill file." in refused.stderr
    assert git(hooked, "rev-parse", "HEAD") == before


def test_an_unstaged_broken_reference_does_not_fail_the_commit(hooked: Path) -> None:
    write(hooked, SKILL, SKILL_TEXT.replace("30 days", "45 days"))
    git(hooked, "add", SKILL)
    write(hooked, FORMS, FORMS_TEXT + "\nSee [the rates](rates.md).\n")  # not staged
    write(hooked, f"{DIR}/references/draft.md", b"\xff unstaged, untracked\n")
    result = commit(hooked)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # the staged package is sound and has no orphan
    assert git(hooked, "show", "--name-only", "--format=", "HEAD") == SKILL


def test_a_staged_hand_edit_of_a_protected_region_in_a_reference_fails(hooked: Path) -> None:
    write(hooked, FORMS, FORMS_TEXT.replace("gift cards", "gift cards or vouchers"))
    git(hooked, "add", FORMS)
    refused = commit(hooked)
    assert refused.returncode != 0
    assert (
        f"{FORMS}: protected region 'policy' differs from HEAD; protected regions are written "
        "by skillvc's slow update, not by hand.\n" in refused.stderr
    )
    allowed = commit(hooked, {"SKILLVC_ALLOW_PROTECTED": "1"})
    assert allowed.returncode == 0, allowed.stderr


def test_a_staged_deletion_of_a_linked_reference_fails(hooked: Path) -> None:
    git(hooked, "rm", "-q", FORMS)
    refused = commit(hooked)
    assert refused.returncode != 0
    assert (
        f"{SKILL}: the link to 'references/forms.md' names no file of the package.\n"
        in refused.stderr
    )


def test_validate_paths_inside_a_package_check_the_whole_package(pkg: Path) -> None:
    write(pkg, FORMS, FORMS_TEXT + "[gone](gone.md)\n")
    broken = f"{FORMS}: the link to 'gone.md' names no file of the package.\n"
    for given in (FORMS, f"{DIR}/references", DIR):
        result = run("validate", given)
        assert (result.exit_code, result.stdout) == (5, broken), given
    git(pkg, "add", FORMS)
    staged = run("validate", "--staged", FORMS)  # as the pre-commit framework passes it
    assert (staged.exit_code, staged.stdout) == (5, broken)


def test_the_hook_checks_every_package_of_a_many_skill_config(git_repo: Path) -> None:
    for name in ("alpha", "beta"):
        text = SKILL_TEXT.replace("acme-returns", name)
        write(git_repo, f"skills/{name}/SKILL.md", text)
        write(git_repo, f"skills/{name}/references/forms.md", FORMS_TEXT)
    write(git_repo, "skills/gamma/SKILL.md", SKILL_TEXT.replace("acme-returns", "gamma"))
    write(
        git_repo,
        "skillvc.toml",
        "".join(f'[skills.{n}]\npath = "skills/{n}"\n' for n in ("alpha", "beta"))
        + '[skills.gamma]\npath = "skills/gamma/SKILL.md"\n',
    )
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "three skills")
    install_hooks(git_repo)
    write(git_repo, "skills/beta/references/forms.md", FORMS_TEXT + "[x](x.md)\n")
    write(git_repo, "skills/gamma/SKILL.md", SKILL_TEXT.replace("acme-returns", "gamma") + "x\n")
    git(git_repo, "add", ".")
    refused = commit(git_repo)
    assert refused.returncode != 0
    beta = "skills/beta/references/forms.md"
    assert f"{beta}: the link to 'x.md' names no file of the package.\n" in refused.stderr
    checked = validate(staged=True, cwd=git_repo)  # what the hook ran, as a report
    assert checked.files == [
        "skills/beta/SKILL.md",
        "skills/beta/references/forms.md",
        "skills/gamma/SKILL.md",
    ]  # alpha is untouched by the commit, so it is not checked
    assert [p.path for p in checked.problems] == ["skills/beta/references/forms.md"]


def test_the_pre_commit_framework_checks_the_package_of_a_staged_reference(
    pkg: Path, skillvc_repo: tuple[Path, str], env: dict[str, str]
) -> None:
    """The shipped skillvc-validate hook, its files: widened to the skills directory (its
    default pattern passes SKILL.md only, so an edit of a reference alone would not run it)."""
    path, rev = skillvc_repo
    write(
        pkg,
        ".pre-commit-config.yaml",
        f"repos:\n  - repo: {path}\n    rev: {rev}\n    hooks:\n"
        "      - id: skillvc-validate\n        files: ^skills/\n",
    )
    git(pkg, "add", ".pre-commit-config.yaml")
    git(pkg, "commit", "-q", "-m", "pre-commit config")
    installed = run_bounded(pkg, env, sys.executable, "-m", "pre_commit", "install")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    write(pkg, FORMS, FORMS_TEXT + "\nSee [the rates](rates.md).\n")
    git(pkg, "add", FORMS)
    refused = run_bounded(pkg, env, "git", "commit", "-q", "-m", "edit forms")
    assert refused.returncode == 1
    assert f"{FORMS}: the link to 'rates.md' names no file of the package.\n" in refused.stderr
    write(pkg, f"{DIR}/references/rates.md", "# Rates\n")
    git(pkg, "add", ".")
    passed = run_bounded(pkg, env, "git", "commit", "-q", "-m", "edit forms")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert git(pkg, "log", "-1", "--format=%s") == "edit forms"


# -- init -------------------------------------------------------------------------------------


def test_init_makes_a_skill_whose_skill_md_links_files_a_package(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(git_repo, SKILL, SKILL_TEXT)
    write(git_repo, FORMS, FORMS_TEXT)
    monkeypatch.chdir(git_repo)
    result = run("init")
    assert result.exit_code == 0
    assert result.stdout == (
        "Wrote skillvc.toml (training the skill package skills/acme-returns); commit it.\n"
        "Created .skillvc/ (the event log, local state).\n"
        "Added /.skillvc/ to .gitignore.\n"
        "skills/acme-returns/SKILL.md links files of its directory (references/forms.md), so "
        'the skill is a package: path = "skills/acme-returns" trains SKILL.md with the *.md '
        "and *.txt files of its directory.\n"
        "No task files found: set [tasks] train and val in skillvc.toml before training "
        "(evals/{train,val,test}.jsonl, also in the skill's own directory, are found "
        "automatically).\n"
    )
    text = (git_repo / "skillvc.toml").read_text()
    assert '\npath = "skills/acme-returns"\n' in text
    config = load_config(git_repo)
    assert config.package_dir == DIR
    again = run("init", "--skill", SKILL)  # the SKILL.md of the package is the same skill
    assert again.exit_code == 0
    assert again.stdout == (
        "skillvc.toml already exists; left as it is.\nAlready initialised; nothing changed.\n"
    )


def test_init_keeps_a_skill_md_at_the_top_one_file_and_says_why(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(git_repo, "SKILL.md", SKILL_TEXT)
    write(git_repo, "references/forms.md", FORMS_TEXT)
    monkeypatch.chdir(git_repo)
    result = run("init")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "Wrote skillvc.toml (training SKILL.md); commit it."
    assert (
        "SKILL.md links other files (references/forms.md), but it is at the top of the "
        "repository, so it is trained as one file; move it into its own directory to train it "
        "as a skill package.\n" in result.stdout
    )
    assert load_config(git_repo).package_dir is None


def test_init_of_many_skills_lists_packages_and_adds_one_once(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(git_repo, "skills/alpha/SKILL.md", SKILL_TEXT.replace("acme-returns", "alpha"))
    write(git_repo, "skills/alpha/references/forms.md", FORMS_TEXT)
    write(git_repo, "skills/beta/SKILL.md", "---\nname: beta\ndescription: B.\n---\nBe brief.\n")
    monkeypatch.chdir(git_repo)
    result = run("init")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[-2:] == [
        "  alpha: skills/alpha (a skill package, SKILL.md links references/forms.md; no task "
        "files found: set its [skills.*.tasks])",
        "  beta: skills/beta/SKILL.md (no task files found: set its [skills.*.tasks])",
    ]
    text = (git_repo / "skillvc.toml").read_text()
    assert '[skills.alpha]\npath = "skills/alpha"\n' in text
    assert '[skills.beta]\npath = "skills/beta/SKILL.md"\n' in text
    write(git_repo, "skills/gamma/SKILL.md", "---\nname: gamma\ndescription: G.\n---\n[g](g.md)\n")
    write(git_repo, "skills/gamma/g.md", "G rules.\n")
    added = run("init", "--skill", "skills/gamma")
    assert added.stdout.splitlines()[0] == (
        "Added skill gamma (skills/gamma) to skillvc.toml; it now lists alpha, beta and gamma. "
        "skills/gamma/SKILL.md links files of its directory (g.md), so the skill is a package: "
        'path = "skills/gamma" trains SKILL.md with the *.md and *.txt files of its directory.'
    )
    for given in ("skills/gamma/SKILL.md", "skills/alpha/SKILL.md"):
        again = run("init", "--skill", given)
        name = given.split("/")[1]
        assert again.stdout.splitlines()[0] == (
            f"skillvc.toml already lists skill {name} (skills/{name})."
        )


def test_check_compares_the_skill_of_a_package_whose_path_is_its_directory(
    package_repo: Path,
) -> None:
    """init now writes a package's directory as [skill] path; the check reads the package
    (it used to stop with "The change deletes the skill skills/acme-returns") and scores it
    as eval does: SKILL.md with the linked reference appended for the chat target."""
    assert 'path = "skills/acme-returns"\n' in (package_repo / "skillvc.toml").read_text()
    result = run("check", "--base", "HEAD", "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "OK: the skill scores 0.438 on val, the same as 0.438 at HEAD."
    )
    assert json.loads(run("eval", "HEAD", "-q", "--json").stdout)["mean"] == 0.4375


def test_doctor_holds_a_packages_skill_md_to_the_agent_skills_rules(pkg: Path) -> None:
    from skillvc.review.doctor import check_skill

    write(pkg, SKILL, SKILL_TEXT.replace("name: acme-returns", "name: acme"))
    result = check_skill(load_config(pkg))
    assert (result.status, result.detail) == (
        "fail",
        f"{SKILL}: frontmatter name 'acme' must equal its directory name 'acme-returns'.",
    )
