"""From a bare SKILL.md to a trained skill offline: ``init``, ``tasks draft``, ``review --yes``
and ``train`` with the simulator (``sim:tasks``), as a new user without a key would go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.coldstart.draft import copies_skill, shingles
from skillvc.models import simdraft

SKILL = """---
name: invoice-helper
description: Answer customers' questions about their invoices.
---
# Invoice helper

Answer a customer's question about an invoice in two sentences or fewer.

## Rules
- When a customer asks for a refund after 30 days, offer store credit instead.
- Escalate to the finance team if a payment fails three times.
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_a_bare_skill_is_drafted_reviewed_and_trained_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "skills"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "SKILL.md").write_text(SKILL, encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a bare skill")
    monkeypatch.chdir(repo)

    init = run("init", "--target", "sim:tasks", "--optimizer", "sim:tasks")
    drafted = run("tasks", "draft", "-n", "30")
    pending = run("train")
    reviewed = run("review", "--yes")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "drafted and reviewed tasks")
    trained = run("train", "-q")

    assert init.exit_code == 0, init.output
    assert drafted.exit_code == 0, drafted.output
    lines = drafted.stdout.splitlines()
    assert lines[0].startswith("Drafted 30 items for SKILL.md with sim:tasks (draft-1, prompt ")
    assert lines[0].endswith("); dropped: none.")
    assert lines[1:5] == [
        "kinds: 20 typical, 7 edge, 3 should not apply",
        "splits: 18 train, 6 val, 6 test",
        "input length: 58-109 characters (median 82)",
        "sections covered: 1 of 2 (none for: Invoice helper)",
    ]
    assert lines[-1] == (
        "They are pending: nothing trains or gates on them until you approve them with "
        "'skillvc review'."
    )
    # Nothing drafted is used before a person approves it.
    assert pending.exit_code == 5
    assert pending.stderr.splitlines()[-2:] == [
        "Error: Training needs train and val items (found 0 train, 0 val; 30 drafted items "
        "await review and never train or gate before a person approves them).",
        "Hint: Approve the drafts with 'skillvc review'.",
    ]

    assert reviewed.exit_code == 0, reviewed.output
    assert len(reviewed.stdout.splitlines()) == 30
    val = [json.loads(line) for line in (repo / "evals" / "val.jsonl").read_text().splitlines()]
    assert {row["status"] for row in val} == {"approved"}
    assert val[0]["input"] == (
        "Situation today, customer asks for refund after 30 days. How do you want me to respond?"
    )
    assert val[0]["target"] == ["Offer store credit instead"]

    assert trained.exit_code == 0, trained.output
    assert "credential" not in trained.stderr  # the rows' provenance is no secret
    assert "val  0.000 -> 1.000  (the split that decides what is kept)" in trained.stdout
    skill = (repo / "SKILL.md").read_text(encoding="utf-8")
    assert '- When the input mentions "payment", answer "Escalate to the finance team".' in skill
    assert git(repo, "log", "--format=%s", "-1").startswith("skillvc: add ")


def test_simulated_drafts_pass_the_drafts_checks_and_a_second_draft_takes_new_framings() -> None:
    first = simdraft.draft_items(SKILL, 12, set())
    second = simdraft.draft_items(SKILL, 40, {item["input"] for item in first})

    own = shingles(SKILL)
    texts = [t for item in first + second for t in (item["input"], *item["targets"])]
    assert not any(copies_skill(t, own) for t in texts)
    assert len({item["input"] for item in first + second}) == len(first) + len(second)
    assert [item["kind"] for item in first] == ["typical"] * 9 + ["edge"] * 2 + ["should_not_apply"]
    # The framings the first left (10 typical and 5 edge a rule) and a tenth not applying.
    assert [item["kind"] for item in second] == ["typical"] * 11 + ["edge"] * 8 + [
        "should_not_apply"
    ] * 4
    assert simdraft.rules("# A skill\n\nPlain prose with no rule in it.\n") == []
