"""`show` speaks text for every event type and any commit that touches a skill; `eval` gives
answers as text; `calls` lists and searches model calls like `llm logs`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.core.events import EVENT_TYPES
from skillvc.core.store import open_store
from skillvc.views.events import RENDERERS, event_text

SKILL = "skills/acme-returns/SKILL.md"

# One payload per event type, shaped as the code that appends it writes it, and a phrase its
# text must contain. Keyed by type: a new type in the catalogue fails the test below until it
# has a renderer and a sample here.
SAMPLES: dict[str, tuple[dict[str, Any], str]] = {
    "run.started": (
        {
            "models": {"target": "sim:support", "optimizer": "sim:opt"},
            "base_commit": "1daf243fa0e9096a",
            "branch": "main",
            "dataset": {"hash": "dfdd81a91b32", "counts": {"train": 60, "val": 30}},
            "config": {"train": {"epochs": 3, "seed": 7}},
        },
        "target sim:support, optimizer sim:opt",
    ),
    "run.resumed": ({"budget_usd": 5.0}, "with a budget of $5"),
    "package.rendered": ({"included": ["references/a.md"], "cut": []}, "references/a.md"),
    "baseline": ({"n": 30, "val": 0.5}, "scores 0.500 on val"),
    "run.finished": (
        {"baseline_val": 0.3, "best_val": 0.9, "steps": 9, "accepted": 3, "rejected": 4},
        "val 0.300 -> 0.900",
    ),
    "run.stopped": ({"reason": "budget", "message": "Run stopped."}, "reason: budget"),
    "step.started": ({"batch": ["t-1", "t-2"], "lr": 4, "total_steps": 9}, "batch of 2: t-1"),
    "rollout": ({"split": "val", "item": "t-9", "hard": 0.0, "reason": "got x"}, "item t-9"),
    "model.call": ({"role": "target", "model": "sim:support"}, "target sim:support"),
    "model.error": (
        {"role": "optimizer", "model": "m", "kind": "BackendError", "error": "HTTP 500."},
        "HTTP 500.",
    ),
    "edit.proposed": (
        {"edit": {"op": "add", "content": "- Be kind.", "id": "abcdef12"}, "source": "human"},
        "add: - Be kind. [abcdef12]",
    ),
    "edits.merged": ({"edits": [{"id": "abcdef1234", "support": 3}]}, "abcdef12 support 3"),
    "edits.selected": ({"selected": ["aaaa1111"], "dropped": ["bbbb2222"], "lr": 1}, "bbbb2222"),
    "reflection.retried": ({"reason": "every edit repeats", "items": ["t-1"]}, "t-1"),
    "edits.released": ({"released": 2, "reason": "a noisy target"}, "2 held edits released"),
    "edits.held": ({"held": 1, "reason": "deterministic"}, "1 edits still held back"),
    "edit.unmatched": ({"reason": "no-op", "detail": "Already there."}, "(no-op): Already"),
    "reflection.failed": ({"kind": "failures", "error": "not JSON"}, "error: not JSON"),
    "edit.refused": ({"reason": "no op"}, "a malformed edit, refused: no op"),
    "step.empty": ({"reason": "no edit could be applied"}, "no candidate: no edit"),
    "gate": (
        {
            "decision": "rejected",
            "before": {"mean": 0.5, "n": 4},
            "after": {"mean": 0.25, "n": 4},
            "flipped": {"gained": [], "lost": ["t-3"]},
        },
        "- t-3",
    ),
    "commit.intent": ({"accepted": True, "gate_id": 12, "parent": "abc"}, "gate event 12"),
    "commit.done": ({"sha": "0123456789abcdef", "ref": "refs/heads/main"}, "0123456789"),
    "slow_update": ({"gated": True, "guidance": "- new advice"}, "+- new advice"),
    "meta_update": ({"notes": "AVOID: x", "error": None}, "AVOID: x"),
    "checkpoint": (
        {"sha": "ef301df2194427", "tag": "skillvc/r/best", "val": 0.8},
        "skillvc/r/best",
    ),
    "evaluation": (
        {"rev": "HEAD", "sha": "abc", "split": "val", "mean": 0.5, "n": 2, "items": []},
        "HEAD (abc) on val: 0.500",
    ),
    "routing.started": (
        {"library": [{"name": "pdf"}, {"name": "docx"}], "models": {"target": "sim:routing"}},
        "library: pdf, docx",
    ),
    "routing.evaluated": (
        {"label": "baseline", "split": "val", "library": 0.5, "n": 4, "skills": {"pdf": {}}},
        "baseline on val: library 0.500",
    ),
    "routing.body": ({"skill": "pdf", "epoch": 1, "run": "run-1"}, "pdf epoch 1: run run-1"),
    "routing.finished": (
        {"before": {"library": 0.5}, "after": {"library": 0.75}, "steps": 2, "accepted": 1},
        "val library 0.500 -> library 0.750",
    ),
    "run.projected": ({"calls": {"target": 40}, "tokens": 1000, "cost_usd": 0.5}, "40 target"),
    "harvest.started": ({"source": "claude-code", "dirs": ["/x"]}, "claude-code transcripts"),
    "harvest.session": ({"source": "codex", "session": "s1", "exchanges": [{}]}, "1 task"),
    "harvest.kind": ({"kind": "k1", "name": "refunds", "support": 4, "items": ["h1"]}, "kind k1"),
    "harvest.rubric": ({"kind": "k1", "rubric": "Score 1 if polite.", "by": "user"}, "polite"),
    "harvest.reviewed": ({"items": ["h1", "h2"], "by": "me"}, "2 items approved by me"),
    "harvest.finished": ({"sessions_read": 3, "kinds": ["k1"]}, "kinds: k1"),
    "sleep.finished": ({"date": "2026-11-25", "status": "trained"}, "2026-11-25: trained"),
    "run.abandoned": (
        {"reason": "settings changed", "by": "run-new", "changes": ["target.model: a -> b"]},
        "changed: target.model: a -> b",
    ),
    "speculation.wasted": ({"items": ["train:t-1"], "jobs": 1}, "1 rollouts started"),
    "batch.submitting": ({"provider": "openai", "n": 12}, "state: submitting"),
    "batch.submitted": ({"batch_id": "batch_1", "provider": "openai", "n": 12}, "batch_1 holds"),
    "batch.ended": ({"batch_id": "batch_1", "provider": "openai", "n": 12}, "state: ended"),
    "judge.calibrated": (
        {
            "model": "sim:judge-20",
            "n": 40,
            "labels": "labels.jsonl",
            "accuracy": 0.8,
            "accuracy_interval": [0.65, 0.9],
            "kappa": 0.6,
            "trusted": False,
        },
        "accuracy 0.800 [0.650, 0.900], kappa 0.600",
    ),
    "tasks.drafted": (
        {"items": [{"id": "d1"}], "model": "sim:x", "skill": "SKILL.md", "dropped": {"secret": 1}},
        "dropped: 1 secret",
    ),
    "tasks.reviewed": (
        {"item": "d1", "origin": "draft", "decision": "approved", "by": "review page"},
        "item d1 (draft) approved by review page",
    ),
    "label.recorded": ({"item": "d1", "output": "abc", "label": 0, "note": "vague"}, "fail: vague"),
    "skill.worth": (
        {"baseline_label": "no skill", "split": "val", "diff": 0.25, "n": 8, "stated": "p = 0.03"},
        "vs no skill on val: +0.250 over 8 items; p = 0.03",
    ),
}


def test_every_event_type_has_a_text() -> None:
    assert set(RENDERERS) == set(EVENT_TYPES)
    assert set(SAMPLES) == set(EVENT_TYPES), "add a sample for the new event type"
    for i, name in enumerate(EVENT_TYPES):
        payload, phrase = SAMPLES[name]
        event = {"id": i, "type": name, "run_id": "run-x", "payload": payload, "step": None}
        text = event_text(event)
        head, *lines = text.splitlines()
        assert head.startswith(f"event {i}  {name}  run run-x"), head
        assert lines and phrase in text, (name, text)
        assert not any(line.lstrip().startswith(("{", "[")) for line in lines), text
        # An old event without its keys still reads, never raises.
        assert event_text(event | {"payload": {}}).startswith(f"event {i}  {name}")


# -- on a trained repository ------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(demo_trained_one_epoch: tuple[Path, Any]) -> Path:
    return demo_trained_one_epoch[0]  # read-only: every test works on its own copy (``repo``)


@pytest.fixture
def repo(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "repo"
    shutil.copytree(trained, path)
    monkeypatch.chdir(path)
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_show_prints_text_for_every_event_in_a_run(repo: Path) -> None:
    with open_store(repo / ".skillvc/events.db") as store:
        firsts = store.query("SELECT type, MIN(id) AS id FROM events GROUP BY type")
    assert len(firsts) >= 15
    for row in firsts:
        result = run("show", str(row["id"]))
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert not any(line.startswith(("{", "  {", '  "')) for line in lines), result.output


def test_show_of_a_gate_lists_flipped_items_with_answers(repo: Path) -> None:
    with open_store(repo / ".skillvc/events.db") as store:
        gate = next(
            g
            for g in store.events(types=["gate"])
            if g.payload.get("flipped", {}).get("gained") or g.payload["flipped"].get("lost")
        )
    result = run("show", str(gate.id))
    assert result.exit_code == 0, result.output
    flipped = gate.payload["flipped"]
    assert (
        f"  flipped: {len(flipped['gained'])} now right, {len(flipped['lost'])} now wrong "
        "(answer before -> after)" in result.output
    )
    item = (flipped["gained"] or flipped["lost"])[0]
    line = next(x for x in result.output.splitlines() if x.strip().startswith(f"+ {item}"))
    before, after = line.split(item, 1)[1].split(" -> ")
    assert before.strip() and after.strip() and before.strip() != after.strip()
    data = json.loads(run("show", str(gate.id), "--json").output)
    assert {f["item"] for f in data["flips"]} == set(flipped["gained"] + flipped["lost"])


def test_show_of_apply_and_hand_commits(repo: Path) -> None:
    skill = repo / SKILL
    text = skill.read_text()
    skill.write_text(text.replace("## Style", "## Style\n\nAnswer in English."))
    git(repo, "commit", "-qam", "a hand edit")
    hand = run("show", "HEAD")
    assert hand.exit_code == 0, hand.output
    assert hand.output.splitlines()[1:4] == [
        "    a hand edit",
        f"    skill files: {SKILL}",
        "    a hand commit: no edit events (not made by skillvc)",
    ]
    assert "    +Answer in English." in hand.output

    skill.write_text(skill.read_text().replace("Answer in English.", "Answer in French."))
    # Unstripped: the hunk's last context line is blank.
    diff = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True).stdout
    git(repo, "checkout", "--", SKILL)
    applied = CliRunner().invoke(cli, ["apply", "--no-gate", "-", "-m", "French"], input=diff)
    assert applied.exit_code == 0, applied.output
    shown = run("show", "HEAD")
    assert shown.exit_code == 0, shown.output
    assert "    French" in shown.output and "recorded edits (events" in shown.output
    assert "Answer in French." in shown.output

    (repo / "NOTES.md").write_text("notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-qm", "notes")
    other = run("show", "HEAD")
    assert other.exit_code != 0 and "is a commit that touches no skill" in other.output


def test_eval_gives_answers_as_text_in_every_format(repo: Path) -> None:
    data = json.loads(run("eval", "-q", "--json").output)
    item = data["items"][0]
    assert "<answer>" in item["output"] and len(item["output_blob"]) == 64
    nl = run("eval", "-q", "--nl").output.splitlines()
    assert json.loads(nl[0])["output"] == item["output"]
    csv_text = run("eval", "-q", "--csv").output
    assert "output,output_blob" in csv_text.splitlines()[0]
    assert "<answer>" in csv_text


def test_calls_lists_and_searches_model_calls(repo: Path) -> None:
    with open_store(repo / ".skillvc/events.db") as store:
        total = len(store.events(types=["model.call"]))
        run_id = store.query("SELECT run_id FROM runs")[0]["run_id"]
    assert len(json.loads(run("calls", "--json").output)) == 3  # like llm logs' default
    everything = json.loads(run("calls", "-n", "0", "--json").output)
    assert len(everything) == total
    assert [c["id"] for c in everything] == sorted((c["id"] for c in everything), reverse=True)

    optimizer = json.loads(run("calls", "-n", "0", "--role", "optimizer", "--json").output)
    assert optimizer and {c["role"] for c in optimizer} == {"optimizer"}
    assert len(json.loads(run("calls", "-n", "0", "--run", run_id, "--json").output)) == total
    assert json.loads(run("calls", "--run", "run-none", "--json").output) == []

    # Case-insensitive, over prompts and answers: the answers that name no rule.
    found = json.loads(run("calls", "-n", "0", "-q", "NO SPECIFIC RULE", "--json").output)
    assert found and len(found) < total
    assert all(
        "no specific rule" in (c["response"] + json.dumps(c["messages"])).lower() for c in found
    )
    text = run("calls", "-n", "1", "-q", "no specific rule", "--role", "target")
    assert text.exit_code == 0 and text.output.startswith("# model call ")
    assert "## Response" in text.output
    none = run("calls", "-q", "no-such-word-anywhere")
    assert none.exit_code == 0 and "No model calls match." in none.output
