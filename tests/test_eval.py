"""`skillvc eval`: scoring skill versions on a split, caching, comparison, task-file formats.

Everything runs for real: git repos in tmp dirs, the SQLite event log, the simulator, and the
OpenAI SDK against the loopback server on 127.0.0.1.
"""

# The imported ``loopback`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture

from skillvc.cli import cli
from skillvc.core.errors import TaskSetError, UnknownRevision
from skillvc.core.store import open_store
from skillvc.models import simworld
from skillvc.review.evaluation import evaluate
from skillvc.tasks.scorers import extract_answer, normalize_answer
from skillvc.tasks.taskset import load_taskset
from skillvc.workspace.workspace import init_workspace, open_workspace

SKILL = "skills/acme-returns/SKILL.md"
FIXTURES = Path(__file__).parent / "fixtures" / "eval"
GOOD_RULE = "If the wrong item was sent, exchange it for the right one."
HARMFUL_RULE = "Escalate every gold customer's ticket to a manager."
assert GOOD_RULE in {r.text for r in simworld.GOOD}
assert HARMFUL_RULE in {r.text for r in simworld.HARMFUL}


# -- helpers shared with test_check.py ----------------------------------------------------------


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(demo_seed, tmp_path / "demo"))


def add_rules(repo: Path, *rules: str) -> None:
    """Write rule lines at the top of the skill's "## Policies" list (a human edit)."""
    path = repo / SKILL
    text = path.read_text(encoding="utf-8")
    lines = "".join(f"- {rule}\n" for rule in rules)
    path.write_text(text.replace("## Policies\n\n", f"## Policies\n\n{lines}", 1), "utf-8")


def commit_all(repo: Path, message: str) -> None:
    git(repo, "commit", "-q", "-am", message)


def trained(repo: Path) -> None:
    """Commit a skill that states five of the true rules, as training might leave it."""
    add_rules(repo, *(r.text for r in simworld.GOOD[:5]))
    commit_all(repo, "Trained skill")


def count_events(repo: Path, type_: str) -> int:
    with open_store(repo / ".skillvc" / "events.db") as store:
        return len(store.events(types=[type_]))


def run_cli(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(repo)
    return CliRunner().invoke(cli, list(args))


def run_json(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    result = run_cli(repo, monkeypatch, *args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def sim_hard(skill: str, item_input: str, target: str, salt: str) -> float:
    """What the exact scorer must give the simulated target's answer (computed independently)."""
    got = extract_answer(simworld.answer(skill, item_input, salt=salt))
    return 1.0 if normalize_answer(got) == normalize_answer(target) else 0.0


# -- evaluating the demo ------------------------------------------------------------------------


def test_eval_scores_the_working_tree_and_a_revision(demo: Path) -> None:
    ws = open_workspace(demo)
    seed_sha = git(demo, "rev-parse", "HEAD")
    worktree = evaluate(ws, None, "val")
    assert (worktree.rev, worktree.sha, worktree.split) == (None, "worktree", "val")
    assert worktree.n == 30 and worktree.errors == 0
    values = [i.hard or 0.0 for i in worktree.items]
    assert [i.id for i in worktree.items] == [
        it.id for it in load_taskset(ws.config.tasks, demo).val
    ]
    assert worktree.mean == pytest.approx(sum(values) / 30)
    assert worktree.stderr == pytest.approx(statistics.stdev(values) / math.sqrt(30))
    skill = (demo / SKILL).read_text(encoding="utf-8")
    for item, result in zip(load_taskset(ws.config.tasks, demo).val, worktree.items, strict=True):
        assert result.hard == sim_hard(skill, item.input, item.targets[0], "sim:support|0")

    add_rules(demo, GOOD_RULE)
    commit_all(demo, "Exchange wrong items")
    at_seed = evaluate(ws, "HEAD~1", "val")
    assert at_seed.sha == seed_sha and at_seed.rev == "HEAD~1"
    assert at_seed.mean == worktree.mean and at_seed.skill == worktree.skill
    at_head = evaluate(ws, "HEAD", "val")
    assert at_head.sha == git(demo, "rev-parse", "HEAD")
    assert at_head.mean is not None and at_seed.mean is not None
    assert at_head.mean > at_seed.mean
    assert evaluate(ws, "HEAD", "test").n == 30


def test_re_evaluating_makes_no_model_call_and_records_once(demo: Path) -> None:
    ws = open_workspace(demo)
    first = evaluate(ws, "HEAD", "val")
    assert (first.calls, first.fresh_calls, first.recorded) == (30, 30, True)
    assert count_events(demo, "model.call") == 30
    again = evaluate(ws, "HEAD", "val")
    assert (again.calls, again.fresh_calls, again.recorded) == (30, 0, False)
    assert again.items == first.items and again.mean == first.mean
    assert again.tokens == first.tokens and again.event == first.event
    # The working tree holds the same skill: the same content, so the same evaluation.
    assert evaluate(ws, None, "val").event == first.event
    assert count_events(demo, "model.call") == 30
    assert count_events(demo, "evaluation") == 1
    evaluate(ws, "HEAD", "test")
    assert count_events(demo, "evaluation") == 2


def test_evaluation_event_payload(demo: Path) -> None:
    ws = open_workspace(demo)
    result = evaluate(ws, "main", "val", workers=3)
    with open_store(demo / ".skillvc" / "events.db") as store:
        event = store.get(result.event)
        assert store.get_blob(event.payload["skill"]) == (demo / SKILL).read_text("utf-8")
    p = event.payload
    assert event.type == "evaluation" and event.run_id is None and event.key
    assert p["rev"] == "main" and p["sha"] == git(demo, "rev-parse", "main")
    assert p["split"] == "val" and p["model"] == "sim:support" and p["metric"] == "hard"
    assert p["dataset"] == load_taskset(ws.config.tasks, demo).hash
    assert p["items"][0].keys() == {"id", "hard", "soft", "error", "output"}
    assert p["items"][0]["output"] == result.items[0].output is not None
    assert [i["hard"] for i in p["items"]] == [i.hard for i in result.items]
    assert (p["mean"], p["hard"], p["soft"], p["stderr"]) == (
        result.mean,
        result.hard,
        result.soft,
        result.stderr,
    )
    assert (p["n"], p["errors"], p["calls"], p["fresh_calls"]) == (30, 0, 30, 30)
    assert p["tokens"] == result.tokens > 0 and p["cost_usd"] == 0.0


def test_eval_cli_text_and_json(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_cli(demo, monkeypatch, "eval", "HEAD", "--split", "val")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"{SKILL} at HEAD (" in out and "on val: 0.333 ± " in out and "(hard, n=30)" in out
    assert "failures (20):" in out
    assert "ticket-061  expected 'escalate'  got 'refund'" in out
    assert "model calls 30 (30 made, 0 answered from the log)" in out and "cost $0.0000" in out
    data = run_json(demo, monkeypatch, "eval", "HEAD")
    assert data["fresh_calls"] == 0 and data["recorded"] is False
    assert set(data) >= {
        "rev",
        "sha",
        "skill",
        "split",
        "dataset",
        "model",
        "metric",
        "mean",
        "hard",
        "soft",
        "stderr",
        "n",
        "errors",
        "items",
        "failures",
        "calls",
        "fresh_calls",
        "tokens",
        "cost_usd",
        "unpriced_calls",
        "event",
    }
    assert len(data["failures"]) == 20 and data["items"][0]["expected"] == "escalate"


# -- comparing ----------------------------------------------------------------------------------


def test_compare_after_a_human_edit_that_improves(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_rules(demo, GOOD_RULE)
    commit_all(demo, "Exchange wrong items")
    data = run_json(demo, monkeypatch, "eval", "HEAD", "--compare", "HEAD~1")
    a, b = data["a"], data["b"]
    assert (a["rev"], b["rev"]) == ("HEAD~1", "HEAD")
    assert data["n"] == 30 and data["diff"] == pytest.approx(b["mean"] - a["mean"])
    assert data["diff"] > 0 and data["stderr"] > 0
    assert data["flipped"]["up"] and not data["flipped"]["down"]
    val = {it.id: it for it in load_taskset(open_workspace(demo).config.tasks, demo).val}
    assert all("Issue: wrong-item." in val[i].input for i in data["flipped"]["up"])
    text = run_cli(demo, monkeypatch, "eval", "HEAD", "--compare", "HEAD~1").stdout
    assert "paired difference (b - a) on val: +0.167" in text
    assert f"flipped up (b fixes): {len(data['flipped']['up'])}  ticket-" in text
    assert "flipped down (b breaks): 0" in text
    assert "(0 made, 60 answered from the log)" in text


def test_compare_after_a_human_edit_that_regresses(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained(demo)
    add_rules(demo, HARMFUL_RULE)  # left uncommitted: eval without REV scores the working tree
    data = run_json(demo, monkeypatch, "eval", "--compare", "main")
    assert data["b"]["sha"] == "worktree" and data["a"]["rev"] == "main"
    assert data["diff"] < 0 and data["flipped"]["down"]
    val = {it.id: it for it in load_taskset(open_workspace(demo).config.tasks, demo).val}
    assert all("Tier: gold." in val[i].input for i in data["flipped"]["down"])
    assert data["b_mean"] == pytest.approx(data["b"]["mean"])


# -- bad input ----------------------------------------------------------------------------------


def test_unknown_revision_is_one_clear_sentence(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UnknownRevision, match=r"^'nope' does not name a commit in "):
        evaluate(open_workspace(demo), "nope", "val")
    result = run_cli(demo, monkeypatch, "eval", "nope")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: 'nope' does not name a commit in ")
    assert "Hint: " in result.stderr
    for args in (("no-such-branch", "--compare", "HEAD"), ("HEAD", "--compare", "no-such-branch")):
        result = run_cli(demo, monkeypatch, "eval", *args)
        assert result.exit_code == 3 and "'no-such-branch' does not name a commit" in result.stderr
    # Both revisions are resolved before any evaluation starts.
    assert count_events(demo, "evaluation") == 0 and count_events(demo, "model.call") == 0


def test_unknown_split_is_one_clear_sentence(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        TaskSetError, match=r"^Unknown split 'dev' \(expected train, val or test\)\.$"
    ):
        evaluate(open_workspace(demo), None, "dev")
    result = run_cli(demo, monkeypatch, "eval", "--split", "dev")
    assert result.exit_code == 2
    assert (
        "Invalid value for '--split': 'dev' is not one of 'val', 'test', 'train'." in result.stderr
    )


def test_empty_split_and_missing_skill_file(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = demo / "skillvc.toml"
    toml.write_text(toml.read_text().replace('test = "evals/test.jsonl"\n', ""))
    result = run_cli(demo, monkeypatch, "eval", "--split", "test")
    assert result.exit_code == 5
    assert "Error: The test split of the task set has no items." in result.stderr
    git(demo, "rm", "-q", SKILL)
    result = run_cli(demo, monkeypatch, "eval")
    assert result.exit_code == 3 and f"The skill file {SKILL} does not exist." in result.stderr


# -- task-file formats, on the simulator and on an OpenAI-compatible server --------------------


def test_fixtures_are_simulator_items() -> None:
    """The fixture files hold generate_items output, converted to each format."""
    items = simworld.generate_items(24, 11)
    rows = [
        row
        for split in ("train", "val", "test")
        for row in json.loads((FIXTURES / "skillopt" / split / "items.json").read_text())
    ]
    assert rows == [
        {"id": i["id"], "question": i["input"], "context": "", "answers": [i["target"]]}
        for i in items
    ]
    items = simworld.generate_items(18, 12)
    lines = [
        json.loads(line)
        for split in ("val", "test")
        for line in (FIXTURES / "promptfoo" / f"{split}.jsonl").read_text().splitlines()
    ]
    assert lines == [
        {"vars": {"input": i["input"]}, "assert": [{"type": "equals", "value": i["target"]}]}
        for i in items
    ]


TASKS = {
    "skillopt": 'skillopt_dir = "data/split"\ninput_template = "{question}"\n',
    "promptfoo": 'val = "evals/val.jsonl"\ntest = "evals/test.jsonl"\n',
}


def format_repo(root: Path, layout: str, model: str) -> Path:
    """A fresh skills repo: the fixture skill, one task layout, and a committed skillvc.toml."""
    root.mkdir()
    (root / "skills" / "acme-returns").mkdir(parents=True)
    shutil.copy(FIXTURES / "SKILL.md", root / SKILL)
    if layout == "skillopt":
        shutil.copytree(FIXTURES / "skillopt", root / "data" / "split")
    else:
        shutil.copytree(FIXTURES / "promptfoo", root / "evals")
    init_workspace(root, skill=str(root / SKILL))
    (root / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n\n[tasks]\n{TASKS[layout]}scorer = "exact"\n\n'
        f'[target]\nmodel = "{model}"\nmax_retries = 0\n\n[optimizer]\nmodel = "{model}"\n\n'
        "[train]\nworkers = 4\n"
    )
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "Skill and tasks")
    return root


def expected_hard(root: Path, split: str, salt: str) -> list[float]:
    ws = open_workspace(root)
    skill = (root / SKILL).read_text(encoding="utf-8")
    items = load_taskset(ws.config.tasks, root).split(split)
    return [sim_hard(skill, it.input, it.targets[0], salt) for it in items]


@pytest.mark.parametrize("layout", ["skillopt", "promptfoo"])
def test_task_formats_evaluate_with_the_simulator(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = format_repo(tmp_path / "repo", layout, "sim:support")
    for split, n in (("val", 10), ("test", 6 if layout == "skillopt" else 8)):
        data = run_json(root, monkeypatch, "eval", "--split", split)
        assert data["n"] == n and data["errors"] == 0 and data["cost_usd"] == 0.0
        assert [i["hard"] for i in data["items"]] == expected_hard(root, split, "sim:support|0")
        assert 0 < data["mean"] < 1


def _loopback_target(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback server answers as the simulated target would (no salt: its own noise)."""

    def responder(body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
        return simworld.answer(system, user)

    server.responder = responder
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-fake-key")


@pytest.mark.parametrize("layout", ["skillopt", "promptfoo"])
def test_task_formats_evaluate_with_an_openai_compatible_server(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    _loopback_target(loopback, monkeypatch)
    root = format_repo(tmp_path / "repo", layout, "openai:loopback-sim")
    data = run_json(root, monkeypatch, "eval", "--split", "val")
    assert data["n"] == 10 and data["errors"] == 0 and data["fresh_calls"] == 10
    assert [i["hard"] for i in data["items"]] == expected_hard(root, "val", "")
    assert data["tokens"] == 10 * (11 + 7)  # the loopback's usage per call
    assert data["cost_usd"] is None and data["unpriced_calls"] == 10
    assert len(loopback.requests) == 10
    sent = loopback.requests[0].json
    assert sent["model"] == "loopback-sim"
    assert sent["messages"][0] == {"role": "system", "content": (root / SKILL).read_text()}
    # Again: every answer comes from the event log, no request reaches the server.
    text = run_cli(root, monkeypatch, "eval", "--split", "val").stdout
    assert len(loopback.requests) == 10
    assert "(0 made, 10 answered from the log)" in text and "cost price unknown" in text


def test_failed_calls_are_errors_not_zeros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    _loopback_target(loopback, monkeypatch)
    root = format_repo(tmp_path / "repo", "promptfoo", "openai:loopback-sim")
    loopback.error(500, "upstream exploded")
    loopback.error(500, "upstream exploded")
    ws = open_workspace(root)
    result = evaluate(ws, None, "val", workers=1)
    failed = [i for i in result.items if not i.ok]
    assert result.errors == 2 and result.n == 8 and len(failed) == 2
    assert all(
        i.hard is None and i.soft is None and "upstream exploded" in (i.error or "") for i in failed
    )
    scored = [i.hard or 0.0 for i in result.items if i.ok]
    assert result.mean == pytest.approx(sum(scored) / 8)
    assert count_events(root, "model.error") == 2
    # Only the two failed items are called again; they fail again: the same evaluation.
    loopback.error(500, "upstream exploded")
    loopback.error(500, "upstream exploded")
    text = run_cli(root, monkeypatch, "eval").stdout
    assert "(hard, n=8, 2 errors not scored)" in text and "errors, not scored (2):" in text
    assert "model calls 8 (0 made, 8 answered from the log, 2 failed)" in text
    assert count_events(root, "model.error") == 4 and count_events(root, "evaluation") == 1
    # The failed calls are retried on the next evaluation; a complete one is recorded apart.
    healed = evaluate(ws, None, "val")
    assert healed.errors == 0 and healed.n == 10 and healed.fresh_calls == 2
    assert healed.event != result.event and count_events(root, "evaluation") == 2


# -- review regressions: what the evaluation event's key covers ---------------------------------


def test_a_scorer_that_now_scores_differently_is_recorded_again(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings do not pin a python scorer down: its code can change behind the same
    function name. An evaluation whose numbers differ must be recorded, not folded into the
    event of the old numbers (which known_scores and the report would go on showing)."""
    monkeypatch.chdir(demo)
    (demo / "review_verdict_scorer.py").write_text(
        "from pathlib import Path\n\n"
        "def grade(output, item):\n"
        "    return float(Path('verdict.txt').read_text())\n"
    )
    toml = demo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            'scorer = "exact"\n',
            'scorer = "python"\nscorer_options = { function = "review_verdict_scorer:grade" }\n',
        )
    )
    ws = open_workspace(demo)
    (demo / "verdict.txt").write_text("1")
    first = evaluate(ws, None, "val")
    assert first.recorded and first.mean == 1.0
    (demo / "verdict.txt").write_text("0")
    changed = evaluate(ws, None, "val")
    assert changed.mean == 0.0 and changed.fresh_calls == 0
    assert changed.recorded and changed.event != first.event
    again = evaluate(ws, None, "val")
    assert not again.recorded and again.event == changed.event
    assert count_events(demo, "evaluation") == 2


def test_changing_an_unused_judge_does_not_record_the_evaluation_again(demo: Path) -> None:
    ws = open_workspace(demo)
    first = evaluate(ws, "HEAD", "val")
    toml = demo / "skillvc.toml"
    # The exact scorer never asks the judge (the optimizer's model), so this changes nothing.
    toml.write_text(toml.read_text().replace("temperature = 0.7", "temperature = 0.2"))
    again = evaluate(open_workspace(demo), "HEAD", "val")
    assert (again.recorded, again.event) == (False, first.event)
    assert count_events(demo, "evaluation") == 1


def test_recorded_is_right_while_another_process_writes_to_the_log(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'recorded' was inferred from the number of events, which a concurrent writer (a training
    run on the same log) also raises."""
    from skillvc.core.store import EventStore

    ws = open_workspace(demo)
    first = evaluate(ws, "HEAD", "val")
    original = EventStore.append

    def append_with_a_concurrent_writer(self: EventStore, type: str, *args: Any, **kw: Any) -> Any:
        if type == "evaluation":  # another writer appends just before us
            original(self, "model.error", {"role": "target", "error": "elsewhere"})
        return original(self, type, *args, **kw)

    monkeypatch.setattr(EventStore, "append", append_with_a_concurrent_writer)
    again = evaluate(ws, "HEAD", "val")
    assert (again.recorded, again.event) == (False, first.event)
