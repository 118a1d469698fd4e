"""``skillvc tasks draft`` over the real OpenAI SDK against the loopback server: the prompt, the
drops (duplicates, secrets, the skill's own text, malformed), the split, provenance, and the
pending state that train and eval refuse to use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git
from loopback import LoopbackServer, chat_messages

from skillvc.cli import cli

SKILL = """---
name: invoices
description: Turn a pasted invoice into the accounting team's booking line.
---
# Invoices

## Reading the invoice
Find the supplier, the invoice number, the net amount and the VAT rate on the invoice.

## Booking line
Write one line: supplier; invoice number; net amount with two decimals; VAT rate as a percent.

## Refusals
Never book an invoice without an invoice number; ask for it instead of guessing one.
"""

VERBATIM = "Write one line: supplier; invoice number; net amount with two decimals; VAT rate"
# A key shape the detectors know (an AWS access key id), built so no scanner flags this file.
SECRET = "AKIA" + "Z7Q3" * 4

DRAFTED = [
    {
        "input": "Acme GmbH invoice 2024-118, net 1200 EUR, VAT 19%. Book it.",
        "kind": "typical",
        "section": "Booking line",
        "targets": ["Acme GmbH; 2024-118; 1200.00; 19%"],
    },
    {  # a near-duplicate of the first (one word changed): dropped
        "input": "Acme GmbH invoice 2024-118, net 1200 EUR, VAT 19%. Book it please.",
        "kind": "typical",
        "section": "Booking line",
        "targets": ["Acme GmbH; 2024-118; 1200.00; 19%"],
    },
    {
        "input": "Book this: Blue Ltd, net 80.5, VAT 7 percent, invoice no. B-77.",
        "kind": "typical",
        "section": "Booking line",
        "targets": ["Blue Ltd; B-77; 80.50; 7%"],
    },
    {
        "input": "Here's an invoice from Nord AG for 300 EUR net at 19% VAT. Book it.",
        "kind": "edge",
        "section": "Refusals",
        "rubric": "The answer asks for the invoice number and books nothing.",
    },
    {
        "input": "What VAT rate applies to restaurant meals in Germany?",
        "kind": "should_not_apply",
        "section": "",
        "rubric": "The answer explains the rate and writes no booking line.",
    },
    {
        "input": "Translate this invoice's footer into French: 'Payable within 30 days'.",
        "kind": "should_not_apply",
        "rubric": "A French translation, no booking line.",
    },
    {
        "input": "Supplier Kite Co, invoice K-1, net 10, VAT 19%.",
        "kind": "typical",
        "section": "Reading the invoice",
        "targets": ["Kite Co; K-1; 10.00; 19%"],
    },
    {  # holds a credential: dropped
        "input": f"Book invoice Q-9 from Quill, net 55, VAT 19%; portal key {SECRET}",
        "kind": "typical",
        "targets": ["Quill; Q-9; 55.00; 19%"],
    },
    {  # copies the skill's own text: dropped
        "input": f"{VERBATIM} as a percent. Do that for invoice Z-1 from Zed, net 5, VAT 7%.",
        "kind": "typical",
        "targets": ["Zed; Z-1; 5.00; 7%"],
    },
    {"kind": "typical", "targets": ["no input"]},  # malformed
    {
        "input": "Invoice from Mira Srl, number M-2, 1.000,00 EUR net, 22% IVA.",
        "kind": "edge",
        "section": "Reading the invoice",
        "targets": ["Mira Srl; M-2; 1000.00; 22%"],
    },
]


def drafting_server(server: LoopbackServer, items: list[dict[str, Any]]) -> None:
    def respond(body: dict[str, Any]) -> str:
        text = "\n".join(str(m["content"]) for m in chat_messages(body))
        if "skillvc-prompt: draft_tasks" in text:
            return json.dumps({"items": items})
        return "ok"

    server.responder = respond


@pytest.fixture
def bare(git_repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a bare SKILL.md (no task files), initialised, models on loopback."""
    skill = git_repo / "skills" / "invoices" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    monkeypatch.chdir(git_repo)
    run("init", "--target", "openai:target-model", "--optimizer", "openai:drafter")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "skill")
    drafting_server(loopback, DRAFTED)
    return git_repo


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_draft_writes_pending_items_split_with_provenance_and_counts_the_drops(
    bare: Path, loopback: LoopbackServer
) -> None:
    out = run("tasks", "draft", "-n", "8", "--json").stdout
    result = json.loads(out)

    # The prompt: the skill, its sections and the number asked for, as the optimizer's call.
    [request] = [r for r in loopback.requests if "draft_tasks" in json.dumps(r.json)]
    prompt = chat_messages(request.json)[-1]["content"]
    assert "Draft 8 test tasks" in prompt
    assert "Reading the invoice, Booking line, Refusals" in prompt
    assert "Never book an invoice without an invoice number" in prompt
    assert request.json["model"] == "drafter"

    assert result["dropped"] == {"duplicate": 1, "malformed": 1, "secret": 1, "skill_text": 1}
    assert result["spread"]["n"] == 7
    assert result["spread"]["kinds"] == {"typical": 3, "edge": 2, "should_not_apply": 2}
    assert result["spread"]["sections"] == {
        "covered": ["Reading the invoice", "Booking line", "Refusals"],
        "missing": ["Invoices"],
    }
    written = {s: rows(bare / "evals" / f"{s}.jsonl") for s in ("train", "val", "test")}
    assert all(written.values()), written  # every split got items
    inputs = [r["input"] for split in written.values() for r in split]
    assert len(inputs) == len(set(inputs)) == 7  # no item in two splits
    assert SECRET not in (bare / "evals" / "train.jsonl").read_text()
    for row in (r for split in written.values() for r in split):
        assert row["status"] == "pending"
        assert row["provenance"]["model"] == "openai:drafter"
        assert row["provenance"]["prompt"] == result["prompt"]
        assert result["call"].startswith(row["provenance"]["call"])
        assert row["provenance"]["date"].count("-") == 2
        assert "split" not in row
        if "rubric" in row["metadata"]:
            assert row["scorer"] == "judge"  # graded by its own rubric
        else:
            assert row["target"]
    # [tasks] now names the files, and the draft is one event holding the rows.
    assert 'train = "evals/train.jsonl"' in (bare / "skillvc.toml").read_text()
    assert result["configured"] == [
        'train = "evals/train.jsonl"',
        'val = "evals/val.jsonl"',
        'test = "evals/test.jsonl"',
    ]

    # Pending items never train or gate: both refuse, saying why and what to do.
    refused = run("eval", code=5)
    assert "The val split of the task set has no approved items (7 drafted items await " in (
        refused.stderr
    )
    assert "skillvc review" in refused.stderr
    assert "note: 7 drafted task items await review and are not used to train or gate" in (
        refused.stderr
    )
    refused = run("train", code=5)
    assert "7 drafted items await review" in refused.stderr

    # A second draft gets a fresh answer (another sample), and everything in it is a duplicate.
    again = json.loads(run("tasks", "draft", "-n", "8", "--json").stdout)
    assert again["dropped"]["duplicate"] == 8 and again["items"] == []
    assert again["draft"] == "draft-2"


def test_the_text_output_reports_the_spread(bare: Path) -> None:
    out = run("tasks", "draft", "-n", "3").stdout
    assert "Drafted 3 items for skills/invoices/SKILL.md with openai:drafter" in out
    assert "dropped: 1 duplicate, 1 malformed, 4 over n, 1 secret, 1 skill text." in out
    assert "sections covered:" in out
    assert "nothing trains or gates on them until you approve them with 'skillvc review'" in out


def test_from_files_outside_the_repository_are_refused(bare: Path, tmp_path: Path) -> None:
    outside = tmp_path / "notes.md"
    outside.write_text("secret notes")
    result = run("tasks", "draft", "--from", str(outside), code=5)
    assert "--from" in result.stderr
