"""From SkillOpt (issue 40 items 2-4): its configs translated, its run directories imported.

Fixtures (tests/fixtures/skillopt/README.md): SkillOpt's shipped configs (MIT, copied with its
license) and a run directory SkillOpt 0.2.0 itself wrote in bench_vs_skillopt's fake world.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner, Result
from conftest import copy_repo, git

from skillvc.cli import cli
from skillvc.core.config import load_config, parse_config_dict
from skillvc.core.store import open_store
from skillvc.integrations.skillopt import config as skillopt
from skillvc.training.setup import find_unfinished

FIXTURES = Path(__file__).parent / "fixtures" / "skillopt"
CONFIGS = sorted((FIXTURES / "configs").glob("*/*.yaml"))
RUN = FIXTURES / "run"


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# -- configs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shipped_config_translates_with_nothing_dropped(path: Path) -> None:
    merged = skillopt.load(path)
    t = skillopt.translate(merged, source=str(path))
    config = parse_config_dict(tomllib.loads(t.text), Path("/tmp"))
    # Every setting of the merged config has exactly one fate, and the untranslated are listed.
    keys = {f"{s}.{k}" for s, values in merged.items() for k in values}
    assert {s.key for s in t.settings} == keys
    assert t.untranslated, "SkillOpt's merge batch and slow-update samples have no equivalent"
    for line in t.untranslated_lines():
        assert f"#   {line}" in t.text
    # SkillOpt's recipe.
    assert (config.train.attribution, config.train.slow_update_from_epoch) == (False, 2)
    assert (config.train.epochs, config.train.batch_size, config.train.minibatch_size) == (4, 40, 8)
    assert (config.train.learning_rate, config.train.min_learning_rate) == (4, 2)
    assert (config.train.lr_schedule, config.train.slow_update_gate) == ("cosine", False)
    assert config.target.model == config.optimizer.model == "openai:gpt-5.5"
    assert config.target.azure and config.target.reasoning_effort == "medium"


def test_env_configs_name_their_split_scorer_and_tools() -> None:
    def tasks(env: str) -> tuple[object, ...]:
        c = parse_config_dict(
            tomllib.loads(
                skillopt.translate(skillopt.load(FIXTURES / f"configs/{env}/default.yaml")).text
            ),
            Path("/tmp"),
        )
        return (c.tasks.skillopt_dir, c.tasks.skillopt_env, c.tasks.scorer, c.tools.code,
                c.tools.python, c.tools.max_turns if c.tools.enabled else None)  # fmt: skip

    assert tasks("searchqa") == ("data/searchqa_split", "searchqa", "exact", False, [], None)
    assert tasks("spreadsheetbench") == (
        "data/spreadsheetbench_split", "spreadsheetbench", "spreadsheet", True,
        ["skillvc.tasks.skillopt.tools.spreadsheet"], 30,
    )  # fmt: skip
    assert tasks("officeqa")[2:5] == ("officeqa", False, ["skillvc.tasks.skillopt.tools.officeqa"])
    assert tasks("docvqa")[2] == "anls" and tasks("alfworld")[2] == "reward"


def test_base_chain_overrides_and_secrets(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "b.yaml").write_text(
        "train:\n  num_epochs: 4\n  batch_size: 40\nmodel:\n  azure_openai_api_key: sk-abc123\n"
    )
    (tmp_path / "c.yaml").write_text("_base_: base/b.yaml\ntrain:\n  batch_size: 16\n")
    merged = skillopt.load(tmp_path / "c.yaml", ["num_epochs=2", "gradient.minibatch_size=4"])
    assert merged["train"] == {"num_epochs": 2, "batch_size": 16}
    t = skillopt.translate(merged)
    parsed = tomllib.loads(t.text)
    assert parsed["train"]["epochs"] == 2 and parsed["train"]["minibatch_size"] == 4
    assert "sk-abc123" not in t.text
    assert parsed["target"]["api_key_env"] == "AZURE_OPENAI_API_KEY"
    (tmp_path / "loop.yaml").write_text("_base_: loop.yaml\n")
    with pytest.raises(Exception, match="inherits from itself"):
        skillopt.load(tmp_path / "loop.yaml")


def test_init_from_skillopt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = FIXTURES / "configs" / "spreadsheetbench" / "default.yaml"
    result = run(tmp_path, monkeypatch, "init", "--from-skillopt", str(config), "train.seed=7")
    assert result.exit_code == 0
    assert result.stdout == (
        f"Wrote skillvc.toml from the SkillOpt config {config}; review it, then commit it.\n"
        f"Initialised a git repository in {tmp_path}.\n"
        "Created .skillvc/ (the event log, local state).\n"
        "Added /.skillvc/ to .gitignore.\n"
    )
    assert result.stderr == (
        "6 SkillOpt settings have no equivalent in skillvc (listed at the end of skillvc.toml "
        "too):\n"
        "  train.train_size = 80: skillvc trains on the whole train split: cut the split to "
        "this many items\n"
        "  gradient.merge_batch_size = 8: skillvc merges a step's proposals in one pass "
        "(skillvc.training.aggregate)\n"
        "  gradient.analyst_workers = 16: one pool of concurrent calls: [train] workers (from "
        "env.workers)\n"
        "  optimizer.slow_update_samples = 20: skillvc's slow update compares on batch_size "
        "train items\n"
        '  optimizer.longitudinal_pair_policy = "mixed": skillvc\'s slow update shows every '
        "item whose outcome changed or stayed failed\n"
        '  env.mode = "multi": no equivalent in skillvc\n'
        "Before training:\n"
        "  - Azure OpenAI without an endpoint in the config: export AZURE_OPENAI_ENDPOINT (or "
        "set azure_endpoint) before training.\n"
        "  - Azure OpenAI: skillvc signs in with an API key; export AZURE_OPENAI_API_KEY "
        "(SkillOpt's default was Entra ID through the Azure CLI).\n"
    )
    loaded = load_config(tmp_path)
    assert (loaded.train.seed, loaded.tasks.data_root) == (7, "data/spreadsheetbench_verified_400")
    again = run(tmp_path, monkeypatch, "init", "--from-skillopt", str(config))
    assert again.exit_code == 5
    assert again.stderr == (
        f"Error: {tmp_path / 'skillvc.toml'} already exists; --from-skillopt writes a new one "
        "and never replaces it.\n"
        "Hint: Move it aside (or run in another directory), then run the command again.\n"
    )
    bare = run(tmp_path, monkeypatch, "init", "train.seed=7")
    assert bare.exit_code == 2
    assert "KEY=VALUE overrides (train.seed=7) go with --from-skillopt CONFIG.yaml." in bare.stderr


# -- runs ---------------------------------------------------------------------------------------


def _digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A skills repository whose skill is SkillOpt's seed, initialised and committed."""
    skill = git_repo / "skills" / "acme-returns" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    shutil.copy(RUN / "skills" / "skill_v0000.md", skill)
    assert run(git_repo, monkeypatch, "init", "--skill", str(skill)).exit_code == 0
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "seed")
    return git_repo


def test_import_a_real_skillopt_run(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _digest(RUN)
    result = run(repo, monkeypatch, "import-skillopt", str(RUN))
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (
        f"Imported {RUN} as run skillopt-1be786f3 (finished): 4 steps, 3 accepted (commits on "
        "branch skillvc/skillopt-1be786f3), 1 rejected "
        "(refs/skillvc/rejected/skillopt-1be786f3/), 2 slow updates.\n"
        "See it with: skillvc runs; skillvc report --run skillopt-1be786f3\n"
    )
    assert _digest(RUN) == before
    assert (
        git(repo, "status", "--porcelain") == "" and git(repo, "branch", "--show-current") == "main"
    )
    subjects = git(repo, "log", "--format=%s", "main..skillvc/skillopt-1be786f3").splitlines()
    assert [s.rsplit("[", 1)[-1] for s in subjects] == [
        "epoch 2]", "step 4]", "epoch 1]", "step 2]", "step 1]"
    ]  # fmt: skip
    trailers = git(repo, "log", "-1", "--format=%(trailers)", "skillvc/skillopt-1be786f3~1")
    assert "Skillvc-Run: skillopt-1be786f3" in trailers
    assert "val hard 0.500 -> 0.750, n=4, 1 better, 0 worse" in trailers
    best = git(repo, "show", "skillvc/skillopt-1be786f3/best:skills/acme-returns/SKILL.md")
    assert best == (RUN / "best_skill.md").read_text().strip()
    assert git(repo, "rev-parse", "--verify", "-q", "refs/skillvc/rejected/skillopt-1be786f3/3")
    runs = run(repo, monkeypatch, "runs", "--json").stdout
    assert '"run": "skillopt-1be786f3"' in runs and '"accepted": 3' in runs
    report = run(repo, monkeypatch, "report", "--run", "skillopt-1be786f3").stdout
    assert "| step 4 | 2 | 2 | ✅ accepted | 0.500 → 0.750 |" in report
    rejected = run(repo, monkeypatch, "log", "--rejected").stdout
    assert "rejected step 3 (epoch 2)  run skillopt-1be786f3" in rejected
    # Again: nothing new, nothing written.
    with open_store(repo / ".skillvc" / "events.db") as store:
        count = store.count()
    again = run(repo, monkeypatch, "import-skillopt", str(RUN))
    assert again.stdout == (f"Run skillopt-1be786f3 was imported already; nothing new in {RUN}.\n")
    with open_store(repo / ".skillvc" / "events.db") as store:
        assert store.count() == count
    # A directory that changed what was imported is refused.
    changed = shutil.copytree(RUN, tmp_path / "changed")
    history = changed / "history.json"
    history.write_text(history.read_text().replace('"edit_budget": 2', '"edit_budget": 3'))
    refused = run(repo, monkeypatch, "import-skillopt", str(changed))
    assert (refused.exit_code, refused.stderr) == (
        5,
        f"Error: {changed} has changed since run skillopt-1be786f3 was imported from it "
        "(event 36, step.started, differs); the log keeps what was imported.\n"
        "Hint: Import the changed directory into another repository, or restore it.\n",
    )


def test_a_damaged_run_imports_what_is_whole(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(RUN, damaged)
    text = (damaged / "history.json").read_text()
    (damaged / "history.json").write_text(text[: len(text) // 2])  # a run killed mid-write
    for name in ("steps/step_0004/candidate_skill.md", "skills/skill_v0004.md", "summary.json"):
        (damaged / name).unlink()
    result = run(repo, monkeypatch, "import-skillopt", str(damaged))
    assert result.exit_code == 0
    assert result.stderr == (
        "skipped: history.json: not valid JSON\n"
        "skipped: history.json: damaged; each step's step_record.json read instead\n"
        "skipped: step 4: accepted, but its candidate skill is missing\n"
    )
    assert result.stdout.startswith(
        "Imported " + str(damaged) + " as run skillopt-1be786f3 (unfinished in SkillOpt): "
        "3 steps, 2 accepted"
    )
    with open_store(repo / ".skillvc" / "events.db") as store:
        # An imported run is never resumed by 'skillvc train'.
        assert find_unfinished(store) is None
        assert store.events(run_id="skillopt-1be786f3", types=["run.finished"]) == []


# -- the paper's skills ---------------------------------------------------------------------------


def test_eval_a_skill_file(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(demo_seed, tmp_path / "repo")
    (repo / "baselines").mkdir()
    shutil.copy(RUN / "best_skill.md", repo / "baselines" / "gpt5.5_skill.md")
    result = run(repo, monkeypatch, "eval", "--skill-file", "baselines/gpt5.5_skill.md", "-q")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == (
        "skills/acme-returns/SKILL.md at --skill-file baselines/gpt5.5_skill.md on val: "
        "0.367 ± 0.089 (hard, n=30)"
    )
    assert git(repo, "status", "--porcelain") == "?? baselines/"
    outside = run(repo, monkeypatch, "eval", "--skill-file", str(RUN / "best_skill.md"))
    assert (outside.exit_code, outside.stderr) == (
        5,
        f"Error: --skill-file {RUN / 'best_skill.md'} is outside the repository; skillvc reads "
        "nothing outside it.\n"
        "Hint: Copy the file into the repository (it need not be committed), then name it.\n",
    )


def test_an_interrupted_run_then_finished_adds_what_is_new(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What SkillOpt had written when it was stopped after step 3 (before epoch 2 ended).
    part = shutil.copytree(RUN, tmp_path / "part")
    history = json.loads((part / "history.json").read_text())
    (part / "history.json").write_text(json.dumps(history[:3]))
    for name in ("steps/step_0004", "slow_update/epoch_02", "meta_skill/epoch_02"):
        shutil.rmtree(part / name)
    for name in ("skills/skill_v0004.md", "summary.json", "best_skill.md"):
        (part / name).unlink()
    first = run(repo, monkeypatch, "import-skillopt", str(part))
    assert "(unfinished in SkillOpt): 3 steps, 2 accepted" in first.stdout
    then = run(repo, monkeypatch, "import-skillopt", str(RUN))
    assert "(finished): 4 steps, 3 accepted" in then.stdout
    log = git(repo, "log", "--format=%s", "main..skillvc/skillopt-1be786f3").splitlines()
    assert len(log) == 5 and log[1].endswith("[step 4]")
