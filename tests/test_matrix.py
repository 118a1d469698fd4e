"""A skill across models: `eval --matrix`, `check --matrix`, `drift`, the training matrix gate.

Two simulated target models of one toy world: ``sim:support`` and ``sim:support-literal``, which
over-reads "Late deliveries earn store credit" (simworld.VARIANTS), so the edit that adds that
rule helps the first and hurts the second. Real git repos, the real event log, the simulator.
"""

# The imported ``demo`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import git
from test_eval import SKILL, commit_all, demo, run_cli  # noqa: F401 - demo is a fixture

from skillvc.core.config import parse_config
from skillvc.core.errors import ConfigError
from skillvc.models import simworld
from skillvc.training.matrix_stats import binomial_tail, cohen_kappa, sign_test, wilson

LATE = simworld.rule("late deliveries earn").text
TARGETS = '\n[targets.literal]\nmodel = "sim:support-literal"\n'


def matrix_repo(repo: Path, *, gate: bool = False, epochs: int = 2, seed: int = 7) -> Path:
    """The demo with a second target model and a skill that states five true rules."""
    config = repo / "skillvc.toml"
    text = config.read_text(encoding="utf-8").replace("epochs = 3", f"epochs = {epochs}")
    text = text.replace("seed = 7", f"seed = {seed}")
    if gate:
        text = text.replace(f"seed = {seed}", f'seed = {seed}\ngate_targets = "all"')
    config.write_text(text + TARGETS, encoding="utf-8")
    skill = repo / SKILL
    rules = "".join(f"- {r.text}\n" for r in simworld.GOOD[:5])
    old = "- After 14 days from delivery, deny all returns.\n"
    skill.write_text(skill.read_text(encoding="utf-8").replace(old, rules), encoding="utf-8")
    commit_all(repo, "Five true rules and a second target model")
    return repo


def add_late_rule(repo: Path) -> None:
    skill = repo / SKILL
    text = skill.read_text(encoding="utf-8")
    skill.write_text(text.replace("## Policies\n\n", f"## Policies\n\n- {LATE}\n", 1), "utf-8")


def test_eval_matrix_scores_every_model_and_split(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix_repo(demo)
    result = run_cli(demo, monkeypatch, "eval", "--matrix", "-q", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [t["model"] for t in data["targets"]] == ["sim:support", "sim:support-literal"]
    assert data["splits"] == ["val", "test"] and len(data["cells"]) == 4
    for cell in data["cells"]:
        low, high = cell["interval"]
        assert low <= cell["mean"] <= high and cell["n"] == 30
        # The Wilson interval of the cell's own count, recomputed here.
        assert (low, high) == pytest.approx(wilson(round(cell["mean"] * 30), 30))
    again = run_cli(demo, monkeypatch, "eval", "--matrix", "-q")
    assert again.exit_code == 0, again.output
    lines = again.stdout.splitlines()
    assert lines[0].endswith("on 2 target models (mean [95% interval]):")
    assert any(line.startswith("literal  sim:support-literal") for line in lines)
    assert lines[-1] == "model calls 120 (0 made, 120 answered from the log)"


def test_check_matrix_catches_a_regression_on_one_model(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix_repo(demo)
    add_late_rule(demo)
    plain = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD")
    assert plain.exit_code == 0, plain.output  # the primary model alone sees no regression
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD", "--matrix", "--json")
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    (row,) = data["matrix"]
    assert row["target"] == "literal" and row["regression"] is True
    assert row["worse"] > row["better"] and row["p"] < 0.05
    assert row["p"] == pytest.approx(binomial_tail(row["better"], row["better"] + row["worse"]))
    assert result.stderr.startswith(
        "Error: The change makes target model literal (sim:support-literal) significantly "
        "worse on val ("
    )
    # A change that helps both models passes.
    commit_all(demo, "late rule")
    git(demo, "reset", "-q", "--hard", "HEAD~1")
    skill = demo / SKILL
    skill.write_text(
        skill.read_text("utf-8").replace(
            "## Policies\n\n", f"## Policies\n\n- {simworld.GOOD[6].text}\n", 1
        ),
        "utf-8",
    )
    # (The primary model sees a noise-sized drop: allowed, so the matrix decides.)
    args = ("check", "-q", "--base", "HEAD", "--matrix", "--allow-drop", "0.05")
    ok = run_cli(demo, monkeypatch, *args)
    assert ok.exit_code == 0, ok.output
    assert "literal  sim:support-literal" in ok.stdout


def test_drift_tells_when_to_retrain(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    matrix_repo(demo)
    calm = run_cli(demo, monkeypatch, "drift", "--target", "literal", "-q", "--json")
    assert calm.exit_code == 0, calm.output
    assert json.loads(calm.stdout)["retrain"] is False
    add_late_rule(demo)
    commit_all(demo, "late rule")
    run_cli(demo, monkeypatch, "eval", "HEAD", "-q")  # the current model's scores, recorded
    result = run_cli(demo, monkeypatch, "drift", "--target", "sim:support-literal", "-q")
    assert result.exit_code == 7, result.output
    assert result.stdout.startswith("current target sim:support: scores from the event log")
    assert result.stderr.startswith("Error: Retrain: the skill at HEAD scores ")
    bad = run_cli(demo, monkeypatch, "drift", "--target", "nonsense", "-q")
    assert bad.exit_code == 5 and "neither a [targets.<name>] table" in bad.stderr


def _gates(repo: Path) -> list[dict[str, object]]:
    with sqlite3.connect(repo / ".skillvc" / "events.db") as db:
        rows = db.execute("SELECT payload FROM events WHERE type = 'gate' ORDER BY id").fetchall()
    return [json.loads(r[0]) for r in rows]


def test_training_with_gate_targets_all_refuses_the_edit(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    free = Path(shutil.copytree(demo, tmp_path / "free"))
    # Seed 3: the simulated optimizer proposes the late rule (it does at 6 of seeds 1-9; its
    # path follows the prompts' text, which the reflection's analysis changed again).
    matrix_repo(free, seed=3)
    matrix_repo(demo, gate=True, seed=3)
    # The paper's bundle gate, so the edit passes the primary gate and only the matrix decides.
    ungated = run_cli(free, monkeypatch, "train", "-q", "--no-attribution")
    assert ungated.exit_code == 0, ungated.output
    assert LATE in (free / SKILL).read_text("utf-8")  # accepted on sim:support alone
    gated = run_cli(demo, monkeypatch, "train", "-q", "--no-attribution")
    assert gated.exit_code == 0, gated.output
    assert LATE not in (demo / SKILL).read_text("utf-8")
    vetoed = [g for g in _gates(demo) if (g.get("targets") or {}).get("vetoed")]
    assert vetoed and all(g["decision"] == "rejected" for g in vetoed)
    row = vetoed[0]["targets"]["targets"][0]  # type: ignore[index]
    assert row["target"] == "literal" and row["regression"] and row["worse"] > row["better"]
    with sqlite3.connect(demo / ".skillvc" / "events.db") as db:
        (projected,) = db.execute(
            "SELECT json_extract(payload, '$.matrix_calls.literal') FROM events "
            "WHERE type = 'run.projected'"
        ).fetchone()
    assert projected == 2 * 30 * (2 * 3 + 2)  # val twice per gate: 6 steps, 2 slow updates
    # A run without the matrix gate records no projection for it and keeps its run id form.
    assert all("targets" not in g for g in _gates(free))
    # The report shows the ungated run's best skill vs its seed on every model.
    report = run_cli(free, monkeypatch, "report", "--matrix")
    assert report.exit_code == 0, report.output
    table = report.stdout.split("## Across target models (val: seed ")[1].splitlines()
    assert table[4].startswith("| target | `sim:support` | ")
    assert table[5].startswith("| literal | `sim:support-literal` | ")
    assert table[5].endswith("| **significantly worse** |")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[train]\ngate_targets = "all"\n', 'gate_targets = "all" needs the models to gate on'),
        ('[train]\ngate_targets = "some"\n', "gate_targets 'some' is not one of none, all."),
        ('[targets.x]\nharness = "chat"\n', "[targets.x] in skillvc.toml has no model."),
        ('[targets.x]\nmodel = "sim:support"\ncolour = 1\n', "Unknown key 'colour' in [targets.x]"),
        ('[targets.x]\nmodel = "gpt"\n', "[targets.x] model 'gpt' must name a backend"),
        ('[targets.x]\nmodel = "sim:a"\ntemperature = 9\n', "[targets.x] temperature = 9 is out"),
        ("[judge]\nmin_kappa = 2\n", "[judge] min_kappa = 2 is out of range"),
        ("[judge]\nholdout = 1\n", "[judge] holdout = 1 is out of range"),
    ],
)
def test_new_keys_are_validated(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[skill]\npath = "SKILL.md"\n' + extra, tmp_path)
    assert message in info.value.message


def test_targets_inherit_the_target_table(tmp_path: Path) -> None:
    text = '[target]\nmodel = "sim:support"\ntemperature = 0.5\n' + TARGETS
    config = parse_config(text, tmp_path)
    assert config.targets["literal"].model == "sim:support-literal"
    assert config.targets["literal"].temperature == 0.5
    # Off, the matrix is no part of a run's identity: the snapshot is as before.
    assert "targets" not in config.to_dict() and "gate_targets" not in config.to_dict()["train"]


def test_statistics() -> None:
    assert binomial_tail(0, 5) == pytest.approx(1 / 32)
    assert binomial_tail(5, 5) == 1.0
    assert sign_test([1, -1, -1, 0, -0.5]) == (1, 3, pytest.approx(5 / 16))
    low, high = wilson(8, 10) or (0, 0)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)  # the textbook values
    assert wilson(0, 0) is None
    assert cohen_kappa([(1, 1), (0, 0), (1, 0), (0, 0)]) == pytest.approx(0.5)
