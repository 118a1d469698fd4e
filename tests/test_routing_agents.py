"""Routing read from a real agent's activation (issue 41, item 2b): with ``[target] harness =
"claude-code"`` or ``"codex"`` the whole library is installed in the agent's scratch folder and
the pick is the first skill its trajectory shows it loading.

Driven with the fake CLIs of ``tests/fixtures/agents`` (``fake_claude.py``, ``fake_codex.py``),
which speak the documented output formats and, like the real ones, find every installed skill
(``.claude/skills/<name>/SKILL.md``, ``.agents/skills/<name>/SKILL.md``) and load one: the
first (by folder name) whose description shares a word of five letters or more with the task,
by a ``Skill`` tool call (Claude Code) or a shell ``cat`` of its SKILL.md (Codex).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git
from test_agents import fake_cli

from skillvc.cli import cli as main
from skillvc.core.store import open_store
from skillvc.models import simrouting
from skillvc.models.agents.presets import loaded_skills
from skillvc.models.agents.trajectory import Step, Trajectory

SKILLS = {
    "csv": "Tables of values.",
    "pdf": "Portable documents (merge, split).",
    "slides": "Presentations and decks.",
}
VAL = [
    ("pdf-0", "Merge these two documents", "pdf"),
    ("pdf-1", "Split the report into pages", "pdf"),
    ("slides-0", "Build presentations for Monday", "slides"),
    ("csv-0", "Parse the spreadsheet export", "csv"),
    ("csv-1", "Clean the spreadsheet columns", "csv"),
    ("csv-2", "Sort spreadsheet rows by date", "csv"),
    ("none-0", "Tell me a joke", None),
]
TRAIN = [
    ("t-csv-0", "Dedupe the spreadsheet entries", "csv"),
    ("t-csv-1", "Total each spreadsheet column", "csv"),
    ("t-pdf-0", "Merge the contract documents", "pdf"),
]
GREEDY = "Spreadsheet tables and documents."  # wins csv's prompts, and takes pdf-0
GOOD = "Spreadsheet tables."


def _repo(root: Path, preset: str) -> Path:
    exe = fake_cli(root / "bin", preset)
    for name, description in SKILLS.items():
        path = root / "skills" / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n")
    folder = root / "evals" / "routing"
    folder.mkdir(parents=True)
    for split, rows in (("train", TRAIN), ("val", VAL)):
        lines = [json.dumps({"id": i, "input": p, "skill": s}) + "\n" for i, p, s in rows]
        (folder / f"{split}.jsonl").write_text("".join(lines))
    tables = "".join(f'[skills.{n}]\npath = "skills/{n}/SKILL.md"\n\n' for n in SKILLS)
    (root / "skillvc.toml").write_text(
        f'[target]\nmodel = "command:{preset}"\nharness = "{preset}"\nexecutable = "{exe}"\n\n'
        '[optimizer]\nmodel = "sim:routing"\n\n'
        "[train]\nepochs = 2\nbatch_size = 10\nworkers = 2\n\n"
        '[routing]\ntrain = "evals/routing/train.jsonl"\nval = "evals/routing/val.jsonl"\n'
        # The optimizer's edits and the gate alone (tests/test_routing.py: skillvc's own).
        "quote_prompts = false\ninduce = false\n\n" + tables
    )
    (root / ".gitignore").write_text(".skillvc/\nbin/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "library")
    return root


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("preset", ["claude-code", "codex"])
def test_eval_routing_reads_the_pick_from_the_agents_activation(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, preset: str
) -> None:
    monkeypatch.chdir(git_repo)
    _repo(git_repo, preset)
    result = _run("eval", "--routing", "--json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"] == preset and data["tools"] is False
    picks = {p["id"]: p["picked"] for p in data["picks"]}
    assert picks == {
        "pdf-0": "pdf",
        "pdf-1": "pdf",
        "slides-0": "slides",
        "csv-0": None,
        "csv-1": None,
        "csv-2": None,
        "none-0": None,
    }
    assert {p["via"] for p in data["picks"]} == {"agent"}
    assert data["library"] == pytest.approx(4 / 7, abs=1e-4)
    assert data["skills"]["csv"]["recall"] == 0.0 and data["skills"]["pdf"]["recall"] == 1.0
    assert data["confusion"]["csv"]["none"] == 3
    text = _run("eval", "--routing", "-q").stdout
    assert f"(picks by {preset} activation: the first skill the agent loaded)" in text

    # Each call gave the agent the whole library and the prompt alone; answered from the log
    # the second time.
    assert data["fresh_calls"] == 7
    again = json.loads(_run("eval", "--routing", "--json", "-q").stdout)
    assert again["fresh_calls"] == 0 and again["picks"] == data["picks"]
    with open_store(git_repo / ".skillvc" / "events.db") as store:
        calls = store.events(types=["model.call"])
        library = json.loads(store.get_blob(calls[0].payload["library"]))
        prompt = json.loads(store.get_blob(calls[0].payload["prompt"]))
    assert sorted(library) == ["csv/SKILL.md", "pdf/SKILL.md", "slides/SKILL.md"]
    assert library["pdf/SKILL.md"] == (git_repo / "skills" / "pdf" / "SKILL.md").read_text()
    assert [m["role"] for m in prompt] == ["user"]
    metas = [c.payload["meta"] for c in calls]
    assert {m["agent"] for m in metas} == {preset}
    assert sorted(m["picked"] or "none" for m in metas) == sorted(
        (p or "none") for p in picks.values()
    )


def test_train_routing_with_an_agent_selector_refuses_the_steal_and_keeps_the_fix(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    _repo(git_repo, "claude-code")

    def optimize(prompt: str, rng: random.Random) -> str:
        description = GOOD if GREEDY in prompt else GREEDY
        return json.dumps({"edits": [{"skill": "csv", "description": description}]})

    monkeypatch.setattr(simrouting, "optimize", optimize)
    result = _run("train", "--routing", "--json", "-q")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["accepted"], summary["rejected"]) == (1, 1)
    assert summary["before"]["library"] == pytest.approx(4 / 7, abs=1e-4)
    assert summary["after"]["library"] == pytest.approx(1.0)
    assert summary["after"]["skills"]["pdf"]["recall"] == 1.0

    with open_store(git_repo / ".skillvc" / "events.db") as store:
        gates = [e.payload for e in store.events(types=["gate"])]
    greedy, good = gates
    assert greedy["decision"] == "rejected"
    assert greedy["reason"] == "steals from pdf (1 prompts)"
    assert greedy["routing"]["skills"]["pdf"]["taken_by"] == {"csv": ["pdf-0"]}
    assert good["decision"] == "accepted" and good["p_value"] == 0.125
    # log shows why, and the p of each skill's loss.
    rejected = _run("log", "--rejected").stdout
    assert "    routing: steals from pdf (1 prompts)\n" in rejected
    assert (
        "    own val prompts lost (exact sign test of a loss): pdf lost 1, gained 0 (p = 0.5, "
        "within noise)\n" in rejected
    )
    entry = json.loads(_run("log", "--rejected", "--json").stdout)[0]
    assert entry["routing"]["steals"] == {"pdf": 1}
    described = (git_repo / "skills" / "csv" / "SKILL.md").read_text().splitlines()[2]
    assert described == f"description: {GOOD}"
    body = git(git_repo, "log", "-1", "--format=%B")
    assert "Skillvc-Routing: library 0.571 -> 1.000; csv recall 0.000 -> 1.000" in body


def test_the_first_skill_loaded_is_the_pick() -> None:
    names = ["csv", "pdf", "slides"]
    skill = Step("tool_call", json.dumps({"skill": "plugin:slides"}), "Skill")
    read = Step("tool_call", json.dumps({"file_path": "/w/.claude/skills/pdf/SKILL.md"}), "Read")
    both = Step("tool_call", "cat .agents/skills/pdf/SKILL.md .agents/skills/csv/SKILL.md", "shell")
    assert loaded_skills(Trajectory("claude-code", (skill, read)), names) == ["slides", "pdf"]
    assert loaded_skills(Trajectory("codex", (both,)), names) == ["pdf", "csv"]
    other = Step("tool_call", "ls .agents/skills", "shell")
    assert loaded_skills(Trajectory("codex", (other,)), names) == []


def test_check_measures_a_description_change_with_the_agent(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    _repo(git_repo, "codex")
    git(git_repo, "checkout", "-q", "-b", "greedy")
    path = git_repo / "skills" / "csv" / "SKILL.md"
    path.write_text(path.read_text().replace(SKILLS["csv"], GREEDY))
    git(git_repo, "commit", "-qam", "greedy csv")
    result = _run("check", "--base", "main", "-q", "--json")
    routing = json.loads(result.stdout)["routing"]
    assert routing["model"] == "command:codex" and routing["changed"] == ["csv"]
    assert routing["flipped"] == {"gained": ["csv-0", "csv-1", "csv-2"], "lost": ["pdf-0"]}
    assert routing["recall_losses"]["pdf"]["taken_by"] == {"csv": 1}
    assert routing["verdict"] == "pass"  # better overall (p = 0.3125); pdf's loss is 1 of 2


def test_a_skill_name_that_cannot_be_a_folder_is_refused_before_any_call() -> None:
    from skillvc.core.errors import ConfigError
    from skillvc.routing.library import Library, LibrarySkill
    from skillvc.routing.measure import library_files

    good = LibrarySkill("pdf", "pdf", "skills/pdf/SKILL.md", "---\nname: pdf\n---\n")
    assert [f.path for f in library_files(Library((good,)))] == ["pdf/SKILL.md"]
    bad = LibrarySkill("../pdf", "pdf", "skills/pdf/SKILL.md", "---\nname: ../pdf\n---\n")
    with pytest.raises(ConfigError, match="cannot be a folder"):
        library_files(Library((good, bad)))
