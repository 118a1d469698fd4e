"""Reviewing a skill package (issue 14 item 3, read side): diff, blame FILE, log -p, report,
show and apply understand a package's several files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git, make_demo_seed, make_package_repo, seed_env
from helpers import add_protected_region

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.review.history import LOG_KEYS
from skillvc.training.loop import train as train_run
from skillvc.training.significance import stated
from skillvc.workspace.workspace import open_workspace

DIR = "skills/acme-returns"
SKILL = f"{DIR}/SKILL.md"
FORMS = f"{DIR}/references/forms.md"
CHECKLIST = f"{DIR}/references/checklist.md"
FORMS_TEXT = (
    "# Forms and special cases\n\n- Billing errors go to the billing team: escalate them.\n"
)


@pytest.fixture
def package_repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skills/acme-returns/: SKILL.md linking references/forms.md, an unlinked notes.md and a
    script (no package file); [skill] path names the directory. As in test_packages.py."""
    monkeypatch.chdir(git_repo)  # restored after the test
    return make_package_repo(
        git_repo, FORMS_TEXT, {"references/notes.md": "Unlinked notes.\n", "run.sh": "echo hi\n"}
    )


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.output


def run_json(*args: str) -> Any:
    code, out = run(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def train() -> None:
    code, out = run("train", "-q")
    assert code == 0, out


def git_applies(repo: Path, patch: str, *args: str) -> bool:
    """Whether real git accepts ``patch`` against the working tree (``--check``: no write)."""
    path = repo.parent / "check.diff"
    path.write_text(patch)
    done = subprocess.run(
        ["git", "apply", "--check", *args, str(path)], cwd=repo, capture_output=True, text=True
    )
    return done.returncode == 0


def changed_in(repo: Path, rev: str) -> list[str]:
    return git(repo, "show", "--name-only", "--format=", rev).split()


# -- training history of a package ------------------------------------------------------------

DEMO = "skills/acme-support"  # the package demo's skill


@pytest.fixture(scope="module")
def demo_trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`skillvc demo --package`'s repository after its training run with the package-aware
    simulator (sim:support-package), made once per module; tests work on copies."""
    root = tmp_path_factory.mktemp("package-demo") / "repo"
    make_demo_seed(root, package=True)
    with seed_env(root):
        # The paper's bundle gate: its history has the several-file candidates these review
        # tests read (attribution, the default, commits fewer and smaller ones).
        train_run(open_workspace(root), overrides={"train": {"attribution": False}})
    return root


@pytest.fixture
def trained(demo_trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the trained package demo, as the current directory. Its history has what the
    tests read: accepted and rejected candidates that change several files, reference files
    edited and created (and linked) by training."""
    repo = copy_repo(demo_trained, tmp_path / "repo")
    monkeypatch.chdir(repo)
    gates = _gates()
    for decision in ("accepted", "rejected"):
        assert _several(gates, decision), [(g["decision"], g["files"]) for g in gates]
    assert _created(repo), "training created no reference file"
    return repo


def _gates() -> list[dict[str, Any]]:
    """Every gate decision with its diff, oldest first."""
    return list(reversed(run_json("log", "-p")))


def _several(gates: list[dict[str, Any]], decision: str) -> list[dict[str, Any]]:
    """The step candidates with this decision that changed several files."""
    return [
        g
        for g in gates
        if g["kind"] == "step" and g["decision"] == decision and len(g["files"]) > 1
    ]


def _created(repo: Path) -> list[str]:
    """The reference files training created (on the branch), oldest first."""
    seed = git(repo, "rev-list", "--max-parents=0", "HEAD")
    log = git(repo, "log", "--reverse", "--diff-filter=A", "--name-only", "--format=", f"{seed}..")
    return log.split()


def makes(repo: Path, patch: str, commit: str) -> bool:
    """Whether ``patch``, applied by real git to the tree of ``commit``'s parent, gives exactly
    ``commit``'s tree (in a scratch index: the working tree is not touched)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch, "index"))}
        diff = Path(scratch, "change.diff")
        diff.write_text(patch)

        def call(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
            )

        call("read-tree", f"{commit}~1")
        if call("apply", "--cached", str(diff)).returncode != 0:
            return False
        tree = call("write-tree").stdout.strip()
    return tree == git(repo, "rev-parse", f"{commit}^{{tree}}")


def test_log_p_shows_every_file_a_package_candidate_changes(trained: Path) -> None:
    gates = [g for g in _gates() if g["patch"]]
    for gate in gates:
        # One commit per candidate (on the branch or its rejected ref), changing exactly the
        # files its gate lists, and the diff is that very change: git rebuilds the commit.
        commit = gate["commit"]
        assert gate["files"] == changed_in(trained, commit)
        assert makes(trained, gate["patch"], commit), gate["patch"]
        assert '{"files"' not in gate["patch"]  # the bundle is never shown as text
        parent = set(git(trained, "ls-tree", "-r", "--name-only", f"{commit}~1").split())
        for path in gate["files"]:
            old = f"a/{path}" if path in parent else "/dev/null"  # a file training created
            assert f"--- {old}\n+++ b/{path}\n@@ " in gate["patch"]
        if gate["ref"].startswith("refs/skillvc/rejected/"):
            assert git(trained, "rev-parse", gate["ref"]) == commit
    created = _created(trained)
    assert any(f"--- /dev/null\n+++ b/{created[0]}\n" in g["patch"] for g in gates)
    rejected = _several(gates, "rejected")[0]
    forms = [e for e in rejected["edits"] if e.get("file")]
    assert forms and len(forms) < len(rejected["edits"])  # SKILL.md's edits name no file
    code, text = run("log", "--rejected", "-p")
    assert code == 0
    assert f"    files: {', '.join(rejected['files'])}\n" in text
    assert f"    {forms[0]['op']} in {forms[0]['file']}" in text
    path = rejected["files"][1]
    before = set(git(trained, "ls-tree", "-r", "--name-only", f"{rejected['commit']}~1").split())
    old = f"a/{path}" if path in before else "/dev/null"  # a file the candidate created
    assert f"    --- {old}\n    +++ b/{path}\n" in text


def test_show_names_the_files_of_a_gate_a_commit_and_an_edit(trained: Path) -> None:
    accepted = _several(_gates(), "accepted")[0]
    by_gate = run_json("show", str(accepted["id"]))["entry"]
    by_commit = run_json("show", accepted["commit"][:10])["entry"]
    assert by_gate == by_commit
    assert (by_gate["files"], by_gate["patch"]) == (accepted["files"], accepted["patch"])
    code, text = run("show", accepted["commit"][:10])
    assert code == 0
    assert f"files: {', '.join(accepted['files'])}" in text
    assert all(f"+++ b/{path}\n" in text.replace("    ", "") for path in accepted["files"])
    edit = next(e for e in accepted["edits"] if e.get("file"))
    assert f"    {edit['op']} in {edit['file']}" in text
    shown = run_json("show", edit["id"])
    assert shown["event"]["payload"]["edit"]["file"] == edit["file"]
    assert accepted["id"] in shown["gates"]


def test_report_shows_each_candidates_files_and_diff(trained: Path) -> None:
    gates = _gates()
    report = run_json("report")
    steps = {s["id"]: s for s in report["steps"]}
    for gate in gates:
        step = steps[gate["id"]]
        # --json keeps its keys and adds the files (a single-file skill's steps have none).
        assert set(step) == set(LOG_KEYS) | {"patch", "files"}
        assert (step["files"], step["patch"]) == (gate["files"], gate["patch"])
    accepted, rejected = _several(gates, "accepted")[0], _several(gates, "rejected")[0]
    code, md = run("report")
    assert code == 0
    # The accepted step's section: an edit line each, naming the file of a reference's edit.
    section = re.split(r"\n#+ ", md.split(f"#### Step {accepted['step']} — ")[1])[0]
    edit_lines = [line for line in section.splitlines() if line.startswith("- **")]
    assert len(edit_lines) == len(accepted["edits"])
    for line, edit in zip(edit_lines, accepted["edits"], strict=True):
        named = f"- **{edit['op']}** in `{edit['file']}`" if edit.get("file") else None
        assert line.startswith(named) if named else " in `" not in line.split("**")[2][:5]
    assert f"<details><summary>Diff of {', '.join(accepted['files'])}</summary>" in section
    for path in accepted["files"]:
        assert f"+++ b/{path}\n" in section
    files = ", ".join(f"`{f}`" for f in rejected["files"])
    assert f"Files: {files}\n\n```diff\n--- a/{rejected['files'][0]}\n" in md
    code, page = run("report", "--html", "-")
    assert code == 0
    edit = next(e for e in accepted["edits"] if e.get("file"))
    assert f"<b>{edit['op']}</b> in <code>{edit['file']}</code>" in page
    assert f'<span class="file">+++ b/{accepted["files"][-1]}</span>' in page
    assert "Files: " + ", ".join(f"<code>{f}</code>" for f in accepted["files"]) in page


def test_blame_a_reference_file_gives_the_training_commits_evidence(trained: Path) -> None:
    accepted = {g["commit"]: g for g in _gates() if g["decision"] in ("accepted", "forced")}
    seed = git(trained, "rev-list", "--max-parents=0", "HEAD")
    trained_lines = 0
    for path in sorted((trained / DEMO / "references").iterdir()):
        name = f"references/{path.name}"
        lines = run_json("blame", name)
        assert run_json("blame", f"{DEMO}/{name}") == lines  # from the root: the same file
        assert [x["text"] for x in lines] == path.read_text().splitlines()
        for line in lines:
            if line["commit"] == seed:
                assert line["human"] and line["run"] is None
                continue
            # Every line training wrote carries the evidence of the gate behind its commit.
            gate = accepted[line["commit"]]
            assert (line["run"], line["step"], line["human"]) == (gate["run"], gate["step"], False)
            assert f"{DEMO}/{name}" in gate["files"]
            assert line["val_gain"] == pytest.approx(gate["val_after"] - gate["val_before"])
            trained_lines += 1
    assert trained_lines
    # A created file: every line is training's, the first from the commit that created it
    # together with its link in SKILL.md.
    created = _created(trained)[0]
    lines = run_json("blame", created)
    creator = git(trained, "log", "--diff-filter=A", "--format=%H", "--", created)
    gate = accepted[creator]
    assert lines[0]["commit"] == creator and not any(x["human"] for x in lines)
    assert f"{DEMO}/SKILL.md" in gate["files"]
    # SKILL.md's lines of that same commit carry the same evidence; blame alone is SKILL.md.
    skill = run_json("blame")
    ours = [x for x in skill if x["commit"] == gate["commit"]]
    assert ours and all((x["run"], x["step"]) == (gate["run"], gate["step"]) for x in ours)
    code, text = run("blame", created)
    assert code == 0
    # Each line shows the gain and significance of the edit that wrote it (issue 21).
    first = lines[0]
    assert first["edit_gain"] is not None
    sure = "" if first["p_value"] is None else " " + stated(first["p_value"], first["alpha"])
    who = f"{gate['run']} step {gate['step']} {first['edit_gain']:+.3f}{sure}"
    head = text.splitlines(keepends=True)[0]
    assert head.startswith(f"{gate['commit'][:8]} {who} ")  # the one verdict, with its alpha
    assert head.endswith(f"    1| {first['text']}\n")


def test_diff_covers_every_file_with_scores_by_bundle(trained: Path) -> None:
    gate = _several(_gates(), "accepted")[0]
    data = run_json("diff", f"{gate['commit']}~1", gate["commit"])
    assert data["path"] == DEMO and data["files"] == gate["files"] == sorted(gate["files"])
    assert data["patch"] == gate["patch"]
    # Known scores match a package version by its bundle (the gate's before and after).
    assert data["scores"] == {"a": {"val": gate["val_before"]}, "b": {"val": gate["val_after"]}}
    code, text = run("diff", f"{gate['commit']}~1", gate["commit"])
    assert code == 0
    assert text.startswith(f"A: {gate['commit']}~1  (val {gate['val_before']:.3f})\nB: ")
    assert text.endswith(gate["patch"])
    # No argument: HEAD against the working tree of the package, new files included.
    (trained / DEMO / "references" / "zz.md").write_text("New notes.\n")
    skill = trained / DEMO / "SKILL.md"
    skill.write_text(skill.read_text().replace("Keep the reply short and friendly.", "Be brief."))
    data = run_json("diff")
    assert data["b"] == "worktree"
    assert data["files"] == [f"{DEMO}/SKILL.md", f"{DEMO}/references/zz.md"]
    assert (
        f"--- /dev/null\n+++ b/{DEMO}/references/zz.md\n@@ -0,0 +1 @@\n+New notes.\n"
        in (data["patch"])
    )
    assert data["scores"]["b"] == {}
    assert git_applies(trained, data["patch"], "-R")
    # An evaluation of the working tree is found by the bundle of its files.
    code, out = run("eval", "--split", "val", "--json", "-q")
    assert code == 0, out
    assert run_json("diff")["scores"]["b"] == {"val": json.loads(out)["mean"]}


def test_a_sim_support_package_run_reads_as_diffs_of_skill_md(package_repo: Path) -> None:
    train()  # sim:support: SKILL.md edits only
    gates = run_json("log", "-p")
    assert gates and all(g["files"] == [SKILL] for g in gates if g["patch"])
    for gate in gates:
        assert gate["patch"].startswith(f"--- a/{SKILL}\n+++ b/{SKILL}\n@@ ")
        assert '{"files"' not in gate["patch"]
    report = run_json("report")
    assert all('{"files"' not in (s.get("patch") or "") for s in report["steps"])


# -- apply: a diff of several package files is one edit set ----------------------------------


def worktree_diff(repo: Path, *new: str) -> str:
    """`git diff` of the working tree's changes (``new`` files included), then undone."""
    for path in new:
        git(repo, "add", "-N", path)
    diff = git(repo, "diff") + "\n"
    for path in new:
        git(repo, "rm", "-q", "--cached", path)
        (repo / path).unlink()
    git(repo, "checkout", "--", ".")
    assert git(repo, "status", "--porcelain") == ""
    return diff


def edit_events(repo: Path) -> list[dict[str, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [e.payload for e in store.events(types=["edit.proposed"])]


def test_a_two_file_diff_is_one_commit_and_edits_that_name_their_file(package_repo: Path) -> None:
    skill, forms = package_repo / SKILL, package_repo / FORMS
    skill.write_text(skill.read_text().replace("Keep the reply short and friendly.", "Be brief."))
    forms.write_text(forms.read_text() + "- Gold customers get an exchange.\n")
    diff = worktree_diff(package_repo)
    head = git(package_repo, "rev-parse", "HEAD")
    code, out = run("apply", "--no-gate", "-", "-m", "Exchange rule", input=diff)
    assert code == 0, out
    sha = git(package_repo, "rev-parse", "HEAD")
    assert out == (f"Committed {sha[:10]}: 2 edit(s) to {SKILL}, {FORMS} recorded (events 1, 2).\n")
    assert git(package_repo, "rev-parse", "HEAD~1") == head
    assert changed_in(package_repo, "HEAD") == [SKILL, FORMS]
    assert git(package_repo, "status", "--porcelain") == ""
    assert "Be brief." in skill.read_text() and forms.read_text().endswith("exchange.\n")
    events = edit_events(package_repo)
    assert [(e["source"], e["edit"].get("file")) for e in events] == [
        ("human", None),
        ("human", "references/forms.md"),
    ]
    assert events[1]["edit"]["content"].endswith("- Gold customers get an exchange.\n")
    assert "Skillvc-Event: 1, 2" in git(package_repo, "log", "-1", "--format=%B")
    # blame on the reference file: the new line is the applied commit's, the rest the seed's.
    lines = run_json("blame", "references/forms.md")
    assert [(x["commit"], x["human"]) for x in lines] == [(head, True)] * 3 + [(sha, True)]
    assert lines[-1]["text"] == "- Gold customers get an exchange."
    # The same diff back from skillvc: both files, in order, as git writes them.
    data = run_json("diff", "HEAD~1", "HEAD")
    assert data["files"] == [SKILL, FORMS]
    assert git_applies(package_repo, data["patch"], "-R")
    shown = run_json("show", events[1]["edit"]["id"])
    assert shown["event"]["payload"]["edit"]["file"] == "references/forms.md"


def test_a_new_file_that_skill_md_links_to_is_added(package_repo: Path) -> None:
    skill = package_repo / SKILL
    skill.write_text(skill.read_text() + "Check [the checklist](references/checklist.md).\n")
    (package_repo / CHECKLIST).write_text("# Checklist\n\n- Check the tier.\n")
    diff = worktree_diff(package_repo, CHECKLIST)
    assert "\nnew file mode 100644\n" in diff  # as git writes it
    code, out = run("apply", "--no-gate", "-", "-m", "A checklist", input=diff)
    assert code == 0, out
    assert changed_in(package_repo, "HEAD") == [SKILL, CHECKLIST]
    assert (package_repo / CHECKLIST).read_text() == "# Checklist\n\n- Check the tier.\n"
    assert git(package_repo, "status", "--porcelain") == ""
    events = edit_events(package_repo)
    assert events[-1]["edit"] | {"id": ""} == {
        "id": "",
        "op": "add",
        "target": "",
        "content": "# Checklist\n\n- Check the tier.\n",
        "anchor": None,
        "rationale": "",
        "file": "references/checklist.md",
    }
    data = run_json("diff", "HEAD~1", "HEAD")
    assert f"--- /dev/null\n+++ b/{CHECKLIST}\n@@ -0,0 +1,3 @@\n+# Checklist\n" in data["patch"]
    lines = run_json("blame", "references/checklist.md")
    assert {x["commit"] for x in lines} == {git(package_repo, "rev-parse", "HEAD")}


PATCH_HINT = "Hint: Produce the diff with 'git diff' against the current skill file."
SKILL_HUNK = (
    f"--- a/{SKILL}\n+++ b/{SKILL}\n@@ -17,3 +17,3 @@\n \n-Keep the reply short and friendly.\n"
    "+Be brief.\n \n"
)


def refused(repo: Path, diff: str) -> tuple[int, str]:
    """`skillvc apply -` with ``diff``; asserts that nothing was written."""
    head = git(repo, "rev-parse", "HEAD")
    files = {p: p.read_bytes() for p in (repo / DIR).rglob("*") if p.is_file()}
    code, out = run("apply", "--no-gate", "-", input=diff)
    assert code != 0, out
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert {p: p.read_bytes() for p in (repo / DIR).rglob("*") if p.is_file()} == files
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM events")[0]["n"] == 0
    return code, out


def test_the_skill_hunk_alone_applies(package_repo: Path) -> None:
    """The refusals below add a section to SKILL_HUNK: it must be fine on its own."""
    code, out = run("apply", "--no-gate", "-", input=SKILL_HUNK)
    assert code == 0, out
    assert changed_in(package_repo, "HEAD") == [SKILL]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            "--- a/evals/val.jsonl\n+++ b/evals/val.jsonl\n@@ -1 +1 @@\n-x\n+y\n",
            f"Error: The diff patches evals/val.jsonl, which is outside the skill package {DIR}/."
            f"\nHint: Give apply a diff of the package's files only, e.g. 'git diff -- {DIR}/'.",
        ),
        (
            f"diff --git a/{DIR}/references/notes.md b/{DIR}/references/notes.md\n"
            "deleted file mode 100644\nindex 3b18e51..0000000\n"
            f"--- a/{DIR}/references/notes.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-Unlinked notes.\n",
            f"Error: The diff deletes {DIR}/references/notes.md; apply changes and adds files of "
            f"the skill package {DIR}/, never deletes one.\n{PATCH_HINT}",
        ),
        (
            f"diff --git a/{FORMS} b/{DIR}/references/forms2.md\nsimilarity index 100%\n"
            f"rename from {FORMS}\nrename to {DIR}/references/forms2.md\n",
            f"Error: The diff renames {FORMS} to {DIR}/references/forms2.md; apply changes the "
            f"files of the skill package {DIR}/ in place.\n{PATCH_HINT}",
        ),
        (
            f"--- /dev/null\n+++ b/{DIR}/references/extra.md\n@@ -0,0 +1 @@\n+Extra.\n",
            f"Error: The diff creates {DIR}/references/extra.md, but no link from SKILL.md "
            "leads to it, so no agent would read it.\n"
            "Hint: Add a Markdown link to references/extra.md in SKILL.md in the same diff.",
        ),
        (
            f"--- /dev/null\n+++ b/{DIR}/fix.sh\n@@ -0,0 +1 @@\n+echo fix\n",
            f"Error: The diff creates {DIR}/fix.sh, which the skill package's include and "
            "exclude globs leave out.\nHint: Name the file to match [skill] include in "
            "skillvc.toml (default: *.md and *.txt files).",
        ),
        (
            f"--- a/{DIR}/run.sh\n+++ b/{DIR}/run.sh\n@@ -1 +1 @@\n-echo hi\n+echo ho\n",
            f"Error: The diff patches {DIR}/run.sh, which is not a file of the skill package "
            f"{DIR}/.\n{PATCH_HINT}",
        ),
        (
            f"diff --git a/{FORMS} b/{FORMS}\nindex 1..2 100644\n"
            f"Binary files a/{FORMS} and b/{FORMS} differ\n",
            f"Error: The diff of {FORMS} is a binary patch, not a text diff.\n{PATCH_HINT}",
        ),
        (
            f"--- a/{FORMS}\n+++ b/{FORMS}\n@@ -3 +3,2 @@\n"
            " - Billing errors go to the billing team: escalate them.\n"
            "+- See [the refund form](refund.md).\n",
            f"Error: The patch breaks a link: {FORMS}: the link to 'refund.md' names no file "
            "of the package.\nHint: Link only to files of the package; a new file comes with "
            "its own section (--- /dev/null) in the same diff.",
        ),
        (
            f"--- a/{FORMS}\n+++ b/{FORMS}\n@@ -3 +3 @@\n-- Billing goes elsewhere.\n+- B.\n",
            f"Error: The patch does not apply to {FORMS}: hunk @@ -3,1 +3,1 @@ expects line 3 "
            "to read '- Billing goes elsewhere.', but it reads '- Billing errors go to the "
            "billing team: escalate them.', and the hunk matches nowhere within 10 lines of "
            f"there.\n{PATCH_HINT}",
        ),
        (
            "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-x\n+y\n",
            "Error: The diff names '../../etc/passwd', which leads out of the repository.\n"
            "Hint: Use a path relative to the repository root, inside it (not under .git/ or "
            ".skillvc/).",
        ),
    ],
    ids=[
        "outside",
        "delete",
        "rename",
        "unlinked-new",
        "not-included-new",
        "not-a-package-file",
        "binary",
        "broken-link",
        "no-match",
        "out-of-repo",
    ],
)
def test_a_refused_package_diff_writes_nothing(
    package_repo: Path, section: str, message: str
) -> None:
    code, out = refused(package_repo, SKILL_HUNK + section)
    assert code == 5
    assert out == message + "\n"


def test_a_new_file_already_in_the_working_tree_is_not_overwritten(package_repo: Path) -> None:
    (package_repo / CHECKLIST).write_text("mine\n")
    diff = (
        f"--- a/{SKILL}\n+++ b/{SKILL}\n@@ -19 +19,2 @@\n"
        " For special cases read [the forms](references/forms.md).\n"
        "+Check [the checklist](references/checklist.md).\n"
        f"--- /dev/null\n+++ b/{CHECKLIST}\n@@ -0,0 +1 @@\n+# Checklist\n"
    )
    head = git(package_repo, "rev-parse", "HEAD")
    code, out = run("apply", "--no-gate", "-", input=diff)
    assert code == 4
    assert out == (
        f"Error: The diff creates {CHECKLIST}, but the working tree already has it.\n"
        "Hint: Move that file aside (or remove it), then apply the diff again.\n"
    )
    assert (package_repo / CHECKLIST).read_text() == "mine\n"
    assert git(package_repo, "rev-parse", "HEAD") == head
    (package_repo / CHECKLIST).unlink()
    code, out = run("apply", "--no-gate", "-", input=diff)
    assert code == 0, out
    assert changed_in(package_repo, "HEAD") == [SKILL, CHECKLIST]


# -- blame FILE: which files it takes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["evals/train.jsonl"],
            f"Error: evals/train.jsonl is outside the skill package {DIR}/.\n"
            "Hint: Name one of its files: SKILL.md, references/forms.md, references/notes.md.",
        ),
        (
            ["references/nope.md"],
            f"Error: references/nope.md is neither a file of the skill package {DIR}/ nor a git "
            "revision.\nHint: Name one of its files: SKILL.md, references/forms.md, "
            "references/notes.md, or a revision.",
        ),
        (
            ["HEAD", f"{DIR}/run.sh"],
            f"Error: {DIR}/run.sh is not a file of the skill package {DIR}/.\n"
            "Hint: Name one of its files: SKILL.md, references/forms.md, references/notes.md.",
        ),
        (
            ["HEAD", "../../etc/passwd"],
            f"Error: ../../etc/passwd is outside the skill package {DIR}/.\n"
            "Hint: Name one of its files: SKILL.md, references/forms.md, references/notes.md.",
        ),
    ],
)
def test_blame_names_only_package_files(package_repo: Path, args: list[str], message: str) -> None:
    code, out = run("blame", *args)
    assert code == 3
    assert out == message + "\n"


def test_blame_takes_a_revision_and_a_package_file(
    package_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = package_repo / FORMS
    forms.write_text(forms.read_text() + "- New.\n")
    git(package_repo, "commit", "-qam", "a rule")
    at_head = run_json("blame", "references/forms.md")
    assert len(at_head) == 4
    assert len(run_json("blame", "HEAD~1", "references/forms.md")) == 3
    monkeypatch.chdir(package_repo / DIR / "references")  # from the current directory too
    assert run_json("blame", "forms.md") == at_head
    assert run_json("blame", "HEAD~1") == run_json("blame", "HEAD~1", "../SKILL.md")


# -- a single-file skill is unchanged ---------------------------------------------------------


def test_a_single_file_skills_diff_is_as_before(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(skill_repo)
    assert run("init", "--target", "sim:support")[0] == 0
    path = skill_repo / "skills/support/SKILL.md"
    path.write_text(path.read_text().replace("- Be polite.", "- Be kind."))
    code, out = run("diff")
    assert code == 0
    assert out == (
        "A: HEAD  (no score recorded; skillvc eval HEAD)\n"
        "B: working tree  (no score recorded; skillvc eval)\n"
        "--- a/skills/support/SKILL.md\n+++ b/skills/support/SKILL.md\n"
        "@@ -5,7 +5,7 @@\n # Support\n \n ## Rules\n-- Be polite.\n+- Be kind.\n"
        " - Quote the order number.\n \n <!-- SLOW_UPDATE_START -->\n"
    )
    data = run_json("diff")
    assert list(data) == ["a", "b", "path", "scores", "patch"]  # no "files"
    assert data["path"] == "skills/support/SKILL.md"


def test_with_many_skills_a_diff_inside_a_package_applies_to_that_skill(
    package_repo: Path,
) -> None:
    other = package_repo / "skills" / "other" / "SKILL.md"
    other.parent.mkdir()
    other.write_text("# Other\n\n- A rule.\n")
    toml = package_repo / "skillvc.toml"
    text = toml.read_text().replace(f'path = "{DIR}"\n', "")
    tables = (
        f'\n[skills.returns]\npath = "{DIR}"\n\n[skills.other]\npath = "skills/other/SKILL.md"\n'
    )
    toml.write_text(text + tables)
    git(package_repo, "add", ".")
    git(package_repo, "commit", "-qm", "two skills")
    forms = package_repo / FORMS
    forms.write_text(forms.read_text() + "- Gold customers get an exchange.\n")
    diff = worktree_diff(package_repo)  # forms.md only: its +++ path is inside the package
    code, out = run("apply", "--no-gate", "-", input=diff)
    assert code == 0, out
    assert changed_in(package_repo, "HEAD") == [FORMS]
    assert edit_events(package_repo)[0]["edit"]["file"] == "references/forms.md"


def test_a_hunk_in_a_protected_region_of_a_reference_file_is_refused(package_repo: Path) -> None:
    forms = package_repo / FORMS
    add_protected_region(package_repo, forms, "notes", "a protected region in the forms")
    forms.write_text(forms.read_text().replace("\nOld.\n", "\nNew.\n"))
    diff = worktree_diff(package_repo)
    code, out = refused(package_repo, SKILL_HUNK + diff)
    assert code == 5
    assert out == (
        f"Error: The patch does not apply to {FORMS}: protected (The target occurs only in or "
        "across a protected region.).\n"
        f"{PATCH_HINT}\n"
    )


def test_a_new_reference_file_opening_with_a_rule_line_is_not_frontmatter(
    package_repo: Path,
) -> None:
    # A reference file has no frontmatter: a leading --- line is text, not a broken header.
    skill = package_repo / SKILL
    skill.write_text(skill.read_text() + "Check [the checklist](references/checklist.md).\n")
    (package_repo / CHECKLIST).write_text("---\n\n# Checklist\n\n- Check the tier.\n")
    code, out = run("apply", "--no-gate", "-", input=worktree_diff(package_repo, CHECKLIST))
    assert code == 0, out
    assert (package_repo / CHECKLIST).read_text() == "---\n\n# Checklist\n\n- Check the tier.\n"
