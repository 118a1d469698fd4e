"""Reviewing a skill package (issue 14 item 3, read side): diff, blame FILE, log -p, report,
show and apply understand a package's several files."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc import backends
from skillvc.backends.base import CallRequest, CallResult
from skillvc.backends.sim import SimBackend
from skillvc.cli import cli
from skillvc.history import LOG_KEYS
from skillvc.prompts import prompt_kind
from skillvc.resources import read_bytes
from skillvc.store import open_store

DIR = "skills/acme-returns"
SKILL = f"{DIR}/SKILL.md"
FORMS = f"{DIR}/references/forms.md"
CHECKLIST = f"{DIR}/references/checklist.md"
FORMS_TEXT = (
    "# Forms and special cases\n\n- Billing errors go to the billing team: escalate them.\n"
)
LINK = "\nFor special cases read [the forms](references/forms.md).\n"
TRAIN_KEYS = "[train]\nepochs = 1\nbatch_size = 8\nminibatch_size = 4\nworkers = 2\nseed = 7\n"


def _lines(source: str, n: int) -> bytes:
    rows = read_bytes("templates", f"demo/evals/{source}.jsonl").decode().splitlines()
    return ("\n".join(rows[:n]) + "\n").encode()


@pytest.fixture
def package_repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skills/acme-returns/: SKILL.md linking references/forms.md, an unlinked notes.md and a
    script (no package file); [skill] path names the directory. As in test_packages.py."""
    folder = git_repo / DIR
    (folder / "references").mkdir(parents=True)
    seed = read_bytes("templates", "demo/SKILL.md").decode()
    (folder / "SKILL.md").write_text(seed + LINK, encoding="utf-8")
    (folder / "references" / "forms.md").write_text(FORMS_TEXT, encoding="utf-8")
    (folder / "references" / "notes.md").write_text("Unlinked notes.\n", encoding="utf-8")
    (folder / "run.sh").write_text("echo hi\n", encoding="utf-8")
    evals = git_repo / "evals"
    evals.mkdir()
    for split, n in (("train", 16), ("val", 16), ("test", 6)):
        (evals / f"{split}.jsonl").write_bytes(_lines(split, n))
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(
        cli, ["init", "--target", "sim:support", "--optimizer", "sim:support", "--seed", "7"]
    )
    assert result.exit_code == 0, result.output
    toml = git_repo / "skillvc.toml"
    text = toml.read_text().replace(f'path = "{SKILL}"', f'path = "{DIR}"')
    toml.write_text(text.split("\n[train]\n")[0] + "\n" + TRAIN_KEYS)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "package skill")
    return git_repo


class FormsSim:
    """``sim:support`` whose optimizer puts the special cases it proposes (every ``add`` but
    style rules) into references/forms.md: real training history that changes a reference
    file, and SKILL.md with it in one candidate, from the same honest toy world."""

    def __init__(self, model: str) -> None:
        self.inner = SimBackend("sim:support")
        self.model = model

    def complete(self, request: CallRequest) -> CallResult:
        result = self.inner.complete(request)
        if request.role != "optimizer" or prompt_kind(request.user) != "reflect":
            return result
        edits: list[dict[str, Any]] = json.loads(result.text)["edits"]
        for edit in edits:
            # Special cases go to the forms; style rules (tone) stay in SKILL.md.
            if edit.get("op") == "add" and "tone" not in edit.get("content", "").lower():
                edit.pop("anchor", None)
                edit["file"] = "references/forms.md"
        return dataclasses.replace(result, text=json.dumps({"edits": edits}))


@pytest.fixture
def forms_sim(monkeypatch: pytest.MonkeyPatch) -> None:
    """``formsim:support`` as a registered backend (the way a plugin registers one)."""
    backends._load_builtins()
    monkeypatch.setitem(backends._REGISTRY, "formsim", lambda config: FormsSim(config.model))


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.output


def run_json(*args: str) -> Any:
    code, out = run(*args, "--json")
    assert code == 0, out
    return json.loads(out)


def train(repo: Path, optimizer: str = "sim:support") -> None:
    """`skillvc train` with ``optimizer`` proposing the edits (the target stays sim:support)."""
    if optimizer != "sim:support":
        toml = repo / "skillvc.toml"
        head, _, tail = toml.read_text().partition("[optimizer]")
        toml.write_text(head + "[optimizer]" + tail.replace("sim:support", optimizer, 1))
        git(repo, "commit", "-qam", f"optimizer {optimizer}")
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


@pytest.fixture
def trained(package_repo: Path, forms_sim: None) -> Path:
    """Two real runs whose optimizer writes into references/forms.md. The first demands 99%
    confidence, so the gate refuses its gains: rejected candidates under refs/skillvc/. The
    second accepts them: commits of forms.md, and of SKILL.md with it."""
    toml = package_repo / "skillvc.toml"
    toml.write_text(toml.read_text() + "gate_confidence = 0.99\n")
    train(package_repo, "formsim:support")
    toml.write_text(toml.read_text().replace("gate_confidence = 0.99\n", ""))
    git(package_repo, "commit", "-qam", "the usual gate")
    train(package_repo)  # formsim:support still
    # The tests below read this history; a simulator that decides otherwise needs new ones.
    assert _two_files("accepted") and _two_files("rejected"), run_json("log")
    return package_repo


def _gates() -> list[dict[str, Any]]:
    """Every gate decision with its diff, oldest first."""
    return list(reversed(run_json("log", "-p")))


def _two_files(decision: str) -> dict[str, Any] | None:
    """The first step candidate with this decision that changed SKILL.md and forms.md."""
    return next(
        (
            g
            for g in _gates()
            if g["kind"] == "step" and g["decision"] == decision and g["files"] == [SKILL, FORMS]
        ),
        None,
    )


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
    assert {FORMS, SKILL} <= {f for g in gates for f in g["files"]}
    for gate in gates:
        # One commit per candidate (on the branch or its rejected ref), changing exactly the
        # files its gate lists, and the diff is that very change: git rebuilds the commit.
        commit = gate["commit"]
        assert gate["files"] == changed_in(trained, commit)
        assert makes(trained, gate["patch"], commit), gate["patch"]
        assert gate["patch"].startswith(f"--- a/{gate['files'][0]}\n+++ b/{gate['files'][0]}\n")
        assert '{"files"' not in gate["patch"]  # the bundle is never shown as text
        for path in gate["files"]:
            assert f"--- a/{path}\n+++ b/{path}\n@@ " in gate["patch"]
    rejected = _two_files("rejected")
    assert rejected is not None
    assert rejected["ref"].startswith("refs/skillvc/rejected/")
    assert git(trained, "rev-parse", rejected["ref"]) == rejected["commit"]
    assert {e.get("file") or "SKILL.md" for e in rejected["edits"]} == {
        "SKILL.md",
        "references/forms.md",
    }
    code, text = run("log", "-p", "--run", rejected["run"])
    assert code == 0
    assert f"    files: {SKILL}, {FORMS}\n" in text
    assert '    add in references/forms.md: "' in text
    assert f"    --- a/{FORMS}\n    +++ b/{FORMS}\n" in text


def test_show_names_the_files_of_a_gate_a_commit_and_an_edit(trained: Path) -> None:
    accepted = _two_files("accepted")
    assert accepted is not None
    by_gate = run_json("show", str(accepted["id"]))["entry"]
    by_commit = run_json("show", accepted["commit"][:10])["entry"]
    assert by_gate == by_commit
    assert by_gate["files"] == [SKILL, FORMS] and by_gate["patch"] == accepted["patch"]
    code, text = run("show", accepted["commit"][:10])
    assert code == 0
    assert f"files: {SKILL}, {FORMS}" in text and f"--- a/{FORMS}" in text
    assert '    add in references/forms.md: "' in text
    forms_edit = next(e for e in accepted["edits"] if e.get("file"))
    shown = run_json("show", forms_edit["id"])
    assert shown["event"]["payload"]["edit"]["file"] == "references/forms.md"
    assert accepted["id"] in shown["gates"]


def test_report_shows_each_candidates_files_and_diff(trained: Path) -> None:
    accepted, rejected = _two_files("accepted"), _two_files("rejected")
    assert accepted is not None and rejected is not None
    for gate, other in ((accepted, rejected), (rejected, accepted)):
        report = run_json("report", "--run", gate["run"])
        step = next(s for s in report["steps"] if s["id"] == gate["id"])
        # --json keeps its keys and adds the files (a single-file skill's steps have none).
        assert set(step) == set(LOG_KEYS) | {"patch", "files"}
        assert (step["files"], step["patch"]) == (gate["files"], gate["patch"])
        assert other["id"] not in {s["id"] for s in report["steps"]}
    forms_edit = next(e for e in accepted["edits"] if e.get("file"))
    code, md = run("report", "--run", accepted["run"])
    assert code == 0
    # The accepted step's section: an edit line each, naming the file of forms.md's edits.
    section = re.split(r"\n#+ ", md.split(f"#### Step {accepted['step']} — ")[1])[0]
    edit_lines = [line for line in section.splitlines() if line.startswith("- **")]
    assert len(edit_lines) == len(accepted["edits"])
    assert [" in `references/forms.md`" in line for line in edit_lines] == [
        bool(e.get("file")) for e in accepted["edits"]
    ]
    assert f"- **add** in `references/forms.md`: “{forms_edit['content']}”" in section
    assert f"<details><summary>Diff of {SKILL}, {FORMS}</summary>" in section
    assert f"```diff\n--- a/{SKILL}\n+++ b/{SKILL}\n" in section
    assert f"\n--- a/{FORMS}\n" in section
    code, md = run("report", "--run", rejected["run"])
    assert code == 0
    assert f"Files: `{SKILL}`, `{FORMS}`\n\n```diff\n--- a/{SKILL}\n" in md
    code, page = run("report", "--run", accepted["run"], "--html", "-")
    assert code == 0
    assert "<b>add</b> in <code>references/forms.md</code>: “" in page
    assert f'<span class="file">--- a/{FORMS}</span>' in page
    assert f"Files: <code>{SKILL}</code>, <code>{FORMS}</code>" in page


def test_blame_a_reference_file_gives_the_training_commits_evidence(trained: Path) -> None:
    accepted = {g["commit"]: g for g in _gates() if g["decision"] in ("accepted", "forced")}
    lines = run_json("blame", "references/forms.md")
    assert run_json("blame", FORMS) == lines  # from the repository root, the same file
    assert [x["text"] for x in lines] == (trained / FORMS).read_text().splitlines()
    seed = git(trained, "rev-list", "--max-parents=0", "HEAD")
    assert [x["commit"] for x in lines[:3]] == [seed] * 3 and all(x["human"] for x in lines[:3])
    assert len(lines) > 3
    for line in lines[3:]:  # every line training wrote carries its commit's gate evidence
        gate = accepted[line["commit"]]
        assert (line["run"], line["step"], line["human"]) == (gate["run"], gate["step"], False)
        assert line["val_gain"] == pytest.approx(gate["val_after"] - gate["val_before"])
    # SKILL.md's lines of the commit that changed both files carry the same evidence.
    two = _two_files("accepted")
    assert two is not None
    skill = run_json("blame")  # blame alone is SKILL.md
    assert [x["text"] for x in skill] == (trained / SKILL).read_text().splitlines()
    ours = [x for x in skill if x["commit"] == two["commit"]]
    assert ours and all((x["run"], x["step"]) == (two["run"], two["step"]) for x in ours)
    assert two["commit"] in {x["commit"] for x in lines}
    code, text = run("blame", "references/forms.md")
    assert code == 0
    line = next(x for x in lines if x["commit"] == two["commit"])
    who = f"{two['run']} step {two['step']} {line['val_gain']:+.3f}"
    assert f"{two['commit'][:8]} {who:<32.32} {line['line']:>4}| {line['text']}\n" in text


def test_diff_covers_every_file_with_scores_by_bundle(trained: Path) -> None:
    two = _two_files("accepted")
    assert two is not None
    data = run_json("diff", f"{two['commit']}~1", two["commit"])
    assert data["path"] == DIR and data["files"] == [SKILL, FORMS]
    assert data["patch"] == two["patch"]
    # Known scores match a package version by its bundle (the gate's before and after).
    assert data["scores"] == {"a": {"val": two["val_before"]}, "b": {"val": two["val_after"]}}
    code, text = run("diff", f"{two['commit']}~1", two["commit"])
    assert code == 0
    assert text.startswith(f"A: {two['commit']}~1  (val {two['val_before']:.3f})\nB: ")
    assert text.endswith(two["patch"])
    # No argument: HEAD against the working tree of the package, new files included.
    (trained / DIR / "references" / "zz.md").write_text("New notes.\n")
    skill = trained / SKILL
    skill.write_text(skill.read_text().replace("Keep the reply short and friendly.", "Be brief."))
    data = run_json("diff")
    assert data["b"] == "worktree" and data["files"] == [SKILL, f"{DIR}/references/zz.md"]
    assert (
        f"--- /dev/null\n+++ b/{DIR}/references/zz.md\n@@ -0,0 +1 @@\n+New notes.\n"
        in (data["patch"])
    )
    assert data["scores"]["b"] == {}
    assert git_applies(trained, data["patch"], "-R")
    # An evaluation of the working tree is found by the bundle of its files.
    code, out = run("eval", "--split", "val", "--json", "-q")
    assert code == 0, out
    assert run_json("diff")["scores"]["b"] == {"val": json.loads(out)["mean"]}


def test_a_sim_support_package_run_reads_as_diffs_of_skill_md(package_repo: Path) -> None:
    train(package_repo)  # today's simulator: SKILL.md edits only
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
    code, out = run("apply", "-", "-m", "Exchange rule", input=diff)
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
    code, out = run("apply", "-", "-m", "A checklist", input=diff)
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
    code, out = run("apply", "-", input=diff)
    assert code != 0, out
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert {p: p.read_bytes() for p in (repo / DIR).rglob("*") if p.is_file()} == files
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM events")[0]["n"] == 0
    return code, out


def test_the_skill_hunk_alone_applies(package_repo: Path) -> None:
    """The refusals below add a section to SKILL_HUNK: it must be fine on its own."""
    code, out = run("apply", "-", input=SKILL_HUNK)
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
    code, out = run("apply", "-", input=diff)
    assert code == 4
    assert out == (
        f"Error: The diff creates {CHECKLIST}, but the working tree already has it.\n"
        "Hint: Move that file aside (or remove it), then apply the diff again.\n"
    )
    assert (package_repo / CHECKLIST).read_text() == "mine\n"
    assert git(package_repo, "rev-parse", "HEAD") == head
    (package_repo / CHECKLIST).unlink()
    code, out = run("apply", "-", input=diff)
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
    code, out = run("apply", "-", input=diff)
    assert code == 0, out
    assert changed_in(package_repo, "HEAD") == [FORMS]
    assert edit_events(package_repo)[0]["edit"]["file"] == "references/forms.md"


def test_a_hunk_in_a_protected_region_of_a_reference_file_is_refused(package_repo: Path) -> None:
    forms = package_repo / FORMS
    forms.write_text(
        forms.read_text() + "\n<!-- skillvc:protected notes -->\nOld.\n"
        "<!-- /skillvc:protected notes -->\n"
    )
    git(package_repo, "commit", "-qam", "a protected region in the forms")
    forms.write_text(forms.read_text().replace("\nOld.\n", "\nNew.\n"))
    diff = worktree_diff(package_repo)
    code, out = refused(package_repo, SKILL_HUNK + diff)
    assert code == 5
    assert out == (
        f"Error: The patch does not apply to {FORMS}: protected (The target occurs only in or "
        "across a protected region.).\n"
        f"{PATCH_HINT}\n"
    )
