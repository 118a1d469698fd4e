"""Routing beside the body (issue 41): ``skillvc check`` on a change of descriptions, ``train
--routing --body`` and routing runs in ``skillvc runs``.

On the bundled example library (``skillvc.routing.example``) with ``sim:routing`` as the
selector, where which skill loads depends on the descriptions' words; the bodies of the
``--body`` library train against ``sim:tasks``, which learns rules from a task set's targets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli as main
from skillvc.models import simrouting
from skillvc.routing.example import write_example

CSV_GOOD = "CSV files - rows, columns, delimited, header, comma."


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _describe(repo: Path, skill: str, description: str) -> None:
    path = repo / "skills" / skill / "SKILL.md"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = f"description: {description}\n"
    path.write_text("".join(lines))


@pytest.fixture
def library(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(git_repo)
    write_example(git_repo)
    (git_repo / ".gitignore").write_text(".skillvc/\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "library")
    return git_repo


def test_check_reports_the_routing_change_of_a_description(
    library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    selected = []
    real = simrouting.select
    monkeypatch.setattr(
        simrouting, "select", lambda system, prompt: selected.append(1) or real(system, prompt)
    )
    # A body edit leaves every name and description alone: nothing new, no selector call.
    git(library, "checkout", "-q", "-b", "body")
    path = library / "skills" / "csv" / "SKILL.md"
    path.write_text(path.read_text() + "\nQuote fields that hold commas.\n")
    git(library, "commit", "-qam", "body only")
    body = _run("check", "--base", "main", "-q", "--json")
    assert body.exit_code == 0, body.output
    assert json.loads(body.stdout)["routing"] is None and not selected

    # A description that routes csv's prompts: measured at both sides, reported beside.
    git(library, "checkout", "-q", "-b", "better", "main")
    _describe(library, "csv", CSV_GOOD)
    git(library, "commit", "-qam", "describe csv")
    better = _run("check", "--base", "main", "-q", "--json")
    assert better.exit_code == 0, better.output
    data = json.loads(better.stdout)
    routing = data["routing"]
    assert data["verdict"] == routing["verdict"] == "pass"
    assert routing["changed"] == ["csv"] and routing["n"] == 21
    assert routing["library_after"] > routing["library_before"]
    assert routing["flipped"] == {"gained": ["csv-val-0", "csv-val-1", "csv-val-2"], "lost": []}
    assert (routing["direction"], routing["p_value"], routing["alpha"]) == ("better", 0.125, 0.2)
    assert routing["significance"] == "significant"
    csv = routing["skills"]["csv"]
    assert (csv["recall_before"], csv["recall_after"]) == (0.0, 1.0)
    assert csv["f1_after"] > csv["f1_before"]
    assert set(routing["skills"]) == {"pdf", "docx", "xlsx", "pptx", "csv", "markdown"}
    calls = len(selected)
    text = _run("check", "--base", "main", "-q").stdout
    assert len(selected) == calls  # the same check again is answered from the log
    assert "== routing ==\nrouting on val (selector sim:routing; description changed: csv):" in (
        text
    )
    assert "routing significance: the working tree routes better (exact sign test on the " in text
    assert text.rstrip().endswith(
        "OK: the library routes better at the working tree: library score 0.190 at main -> "
        "0.333 on val (3 prompts gained, 0 lost; p = 0.125, significant (alpha 0.2))."
    )

    # The good description merged; a change that takes it back routes significantly worse
    # and fails as a body regression does.
    git(library, "checkout", "-q", "main")
    git(library, "merge", "-q", "--ff-only", "better")
    git(library, "checkout", "-q", "-b", "worse")
    _describe(library, "csv", "Work with data.")
    git(library, "commit", "-qam", "vague csv")
    worse = _run("check", "--base", "main", "-q")
    assert worse.exit_code == 7
    assert worse.stderr.startswith(
        "Error: The library routes significantly worse at the working tree: library score "
        "0.333 at main -> 0.190 on val (0 prompts gained, 3 lost; p = 0.125, significant "
        "(alpha 0.2)).\n"
    )
    assert "  csv                   0.857      0.000   1.000 -> 0.000  *" in worse.stdout

    # The trigger set is BASE's: a change that also drops csv's val prompts is measured on
    # BASE's 21 and fails for editing the trigger file.
    val = library / "evals" / "routing" / "val.jsonl"
    val.write_text("".join(ln for ln in val.read_text().splitlines(True) if '"csv-' not in ln))
    git(library, "commit", "-qam", "drop csv's val prompts")
    moved = _run("check", "--base", "main", "-q", "--json")
    assert moved.exit_code == 7
    routing = json.loads(moved.stdout)["routing"]
    assert routing["n"] == 21 and routing["trigger_files_changed"] == ["evals/routing/val.jsonl"]
    assert json.loads(moved.stdout)["verdict"] == "config_changed"
    assert moved.stderr.startswith(
        "Error: The change edits evals/routing/val.jsonl, which the routing check takes from "
        "main only.\n"
    )


def _body_library(repo: Path) -> None:
    """The example library with a task set for the pdf skill's body (sim:tasks) and one
    epoch: three request kinds, each answered by one tool."""
    write_example(repo)
    answers = {"merge": "use pdfunite", "split": "use pdfseparate", "encrypt": "use qpdf"}
    things = ["report", "invoice", "contract", "manual", "brochure", "statement", "thesis"]
    folder = repo / "evals" / "pdf"
    folder.mkdir(parents=True)
    for split, names in (("train", things[:4]), ("val", things[4:])):
        rows = [
            {"id": f"{verb}-{split}-{name}", "input": f"Please {verb} the {name} PDF", "target": a}
            for verb, a in answers.items()
            for name in names
        ]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    toml = repo / "skillvc.toml"
    table = '[skills.pdf]\npath = "skills/pdf/SKILL.md"\n'
    toml.write_text(
        toml.read_text()
        .replace("epochs = 2", "epochs = 1")
        .replace(
            table,
            table + '\n[skills.pdf.tasks]\ntrain = "evals/pdf/train.jsonl"\n'
            'val = "evals/pdf/val.jsonl"\nscorer = "exact"\n\n'
            '[skills.pdf.target]\nmodel = "sim:tasks"\n\n'
            '[skills.pdf.optimizer]\nmodel = "sim:tasks"\n',
        )
    )
    (repo / ".gitignore").write_text(".skillvc/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "library with a body task set")


def test_train_routing_and_body_side_by_side_resumes_and_lists_both_runs(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillvc.routing.train import RoutingTrainer

    monkeypatch.chdir(git_repo)
    _body_library(git_repo)
    real = RoutingTrainer.evaluate

    def evaluate(self: RoutingTrainer, library: Any, items: Any, split: str, label: Any) -> Any:
        if split == "test":  # killed after the body epoch, before the end
            raise KeyboardInterrupt
        return real(self, library, items, split, label)

    monkeypatch.setattr(RoutingTrainer, "evaluate", evaluate)
    assert _run("train", "--routing", "--body", "-q").exit_code != 0
    head = git(git_repo, "rev-parse", "HEAD")
    body_commit = git(git_repo, "log", "-1", "--format=%s")
    assert "[step 1]" in body_commit and 'When the input mentions \\"' not in body_commit
    monkeypatch.setattr(RoutingTrainer, "evaluate", real)

    resumed = _run("train", "--routing", "--body", "-q")
    assert resumed.exit_code == 0, resumed.output
    lines = resumed.stdout.splitlines()
    assert lines[0].startswith("routing run route-")
    # Routing F1 and recall beside the body's task val score.
    assert "  skill             f1 before   f1 after          recall  task val" in lines
    pdf = next(line for line in lines if line.startswith("  pdf "))
    assert pdf.endswith("0.000 -> 1.000  0.000 -> 1.000")  # routing recall, then task val
    assert next(line for line in lines if line.startswith("  csv ")).endswith("  -")
    assert git(git_repo, "rev-parse", "HEAD") == head  # the body epoch was not trained again
    # Both halves committed: description lines for routing, a rule in the pdf body.
    subjects = git(git_repo, "log", "--format=%s").splitlines()
    assert any("[routing step" in s for s in subjects) and body_commit in subjects
    skill = (git_repo / "skills" / "pdf" / "SKILL.md").read_text()
    assert 'When the input mentions "' in skill and "pdf" in skill.splitlines()[2]

    summary = json.loads(_run("train", "--routing", "--body", "--json", "-q").stdout)
    assert summary["status"] == "up_to_date"
    # Both runs in `skillvc runs`: the routing run with its library score.
    rows = json.loads(_run("runs", "--json").stdout)
    routing = next(r for r in rows if r["run"].startswith("route-"))
    body = [r for r in rows if r["run"].startswith("run-")]
    assert len(body) == 1 and body[0]["best_val"] == 1.0
    assert routing["status"] == "finished" and routing["best_val"] == summary["after"]["library"]
    assert routing["baseline_val"] == summary["before"]["library"]
    assert routing["val_curve"][0] == routing["baseline_val"]
    assert routing["val_curve"][-1] == pytest.approx(routing["best_val"], abs=1e-4)
    assert len(routing["val_curve"]) == routing["steps"] + 1
    assert routing["accepted"] >= 1 and routing["calls"] > 0
    table = _run("runs").stdout
    assert routing["run"] in table and body[0]["run"] in table
    log = json.loads(_run("log", "--run", routing["run"], "--json").stdout)
    assert log and all(e["kind"] == "routing" for e in log)
