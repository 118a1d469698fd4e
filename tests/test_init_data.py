"""init finds a skill's own task files; a SkillOpt ID manifest is refused with how to fix it.

The manifest fixtures copy the layout of SkillOpt's released splits
(github.com/microsoft/SkillOpt, data/searchqa_id_split/: split_manifest.json and
{train,val,test}/items.json holding only ids).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillvc.cli import cli
from skillvc.core.config import TasksConfig, load_config
from skillvc.core.errors import TaskSetError
from skillvc.tasks.taskset import load_taskset
from skillvc.training.significance import effective_confidence

SEARCHQA_MANIFEST = {
    "benchmark": "SearchQA",
    "manifest_type": "id_split",
    "source_repo": "lucadiliello/searchqa",
    "source_url": "https://huggingface.co/datasets/lucadiliello/searchqa",
    "source_id_field": "key",
    "counts": {"train": 400, "val": 200, "test": 1400},
    "item_fields": ["id"],
}


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def id_split(root: Path, name: str, manifest: dict | None) -> None:
    base = root / name
    for i, split in enumerate(("train", "val", "test")):
        (base / split).mkdir(parents=True)
        items = [{"id": f"{split}-{n}"} for n in range(i + 2)]
        (base / split / "items.json").write_text(json.dumps(items))
    if manifest is not None:
        (base / "split_manifest.json").write_text(json.dumps(manifest))


def test_init_finds_the_task_files_in_the_skills_own_directory(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = skill_repo / "skills/support/evals"
    own.mkdir()
    for name in ("train.jsonl", "val.jsonl"):
        (own / name).write_text("")
    (skill_repo / "evals").mkdir()  # the skill's own come first
    (skill_repo / "evals/train.jsonl").write_text("")
    result = run(skill_repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert "Task files: skills/support/evals/train.jsonl, skills/support/evals/val.jsonl" in (
        result.output
    )
    config = (skill_repo / "skillvc.toml").read_text()
    assert 'train = "skills/support/evals/train.jsonl"' in config
    assert 'val = "skills/support/evals/val.jsonl"' in config
    # The written config trains with the README's defaults: attribution, and the gate's
    # confidence left to it (a written 0.0 made every attribution test a pass).
    train = load_config(skill_repo).train
    assert train.attribution and train.gate_confidence is None
    assert effective_confidence(train) == 0.8


def test_searchqa_id_manifest_is_refused_with_how_to_materialise(tmp_path: Path) -> None:
    id_split(tmp_path, "data/searchqa_id_split", SEARCHQA_MANIFEST)
    with pytest.raises(TaskSetError) as info:
        load_taskset(TasksConfig(skillopt_dir="data/searchqa_id_split"), tmp_path)
    assert info.value.message == (
        "skillopt_dir data/searchqa_id_split holds only an ID manifest of SearchQA (400 train / "
        "200 val / 1,400 test): item IDs, not the questions and answers to run."
    )
    assert info.value.hint == (
        "In a SkillOpt checkout run 'python scripts/materialize_searchqa.py --manifest-dir "
        "data/searchqa_id_split --output-dir data/searchqa_split' (it downloads from "
        "https://huggingface.co/datasets/lucadiliello/searchqa), then set skillopt_dir to the "
        "directory it writes."
    )


def test_id_only_items_without_a_manifest_are_refused_too(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    id_split(skill_repo, "data/officeqa_split", None)
    (skill_repo / "skillvc.toml").write_text(
        '[skill]\npath = "skills/support/SKILL.md"\n[tasks]\nskillopt_dir = "data/officeqa_split"\n'
    )
    result = run(skill_repo, monkeypatch, "eval")
    assert result.exit_code == 5
    assert result.stderr == (
        "Error: skillopt_dir data/officeqa_split holds only an ID manifest: "
        "item IDs, not the questions and answers to run.\n"
        "Hint: Download the items and write them as {train,val,test}/items.json "
        "in another directory (SkillOpt's data/README.md says how), then set skillopt_dir to "
        "it.\n"
    )


def test_a_materialised_split_next_to_a_manifest_loads(tmp_path: Path) -> None:
    base = tmp_path / "searchqa_split"
    for split in ("train", "val", "test"):
        (base / split).mkdir(parents=True)
        item = {"id": f"{split}1", "question": f"Q {split}?", "context": "c", "answers": ["a"]}
        (base / split / "items.json").write_text(json.dumps([item]))
    manifest = {**SEARCHQA_MANIFEST, "manifest_type": "materialized"}
    (base / "split_manifest.json").write_text(json.dumps(manifest))
    ts = load_taskset(TasksConfig(skillopt_dir="searchqa_split"), tmp_path)
    assert [item.id for item in ts.train] == ["train1"]
    assert ts.val[0].input == "Q val?\n\nContext: c"


def test_init_points_at_skillopt_split_directories(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    id_split(skill_repo, "data/searchqa_id_split", SEARCHQA_MANIFEST)
    base = skill_repo / "data/mine_split"
    for split in ("train", "val", "test"):
        (base / split).mkdir(parents=True)
        item = {"id": f"{split}1", "question": "Q?", "context": "c", "answers": ["a"]}
        (base / split / "items.json").write_text(json.dumps([item]))
    result = run(skill_repo, monkeypatch, "init")
    assert result.exit_code == 0, result.output
    assert 'SkillOpt split directory data/mine_split: set skillopt_dir = "data/mine_split" in ' in (
        result.output
    )
    assert (
        "skillopt_dir data/searchqa_id_split holds only an ID manifest of SearchQA (400 train / "
        "200 val / 1,400 test): item IDs, not the questions and answers to run. In a SkillOpt "
        "checkout run 'python scripts/materialize_searchqa.py"
    ) in result.output
