"""A new user's edge cases of curves, reports, show, progress and harvest (audit of issues
11, 12 and 15): each test is a case that once went wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli
from skillvc.core.store import open_store


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = Path(shutil.copytree(demo_seed, tmp_path / "demo"))
    monkeypatch.chdir(repo)
    return repo


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_a_run_stopped_before_its_first_step_reports_its_baseline_and_how_to_resume(
    demo: Path,
) -> None:
    # Priced like an expensive model: the projection stops the run after the baseline.
    with (demo / "skillvc.toml").open("a") as f:
        f.write('\n[prices."sim:support"]\ninput = 100\noutput = 100\n')
    git(demo, "commit", "-qam", "price the simulator")
    code, _ = run("train", "-q")
    assert code == 4
    _, runs = run("runs", "--json")
    code, report = run("report")
    assert code == 0
    assert "| val (n=30) | 0.333 | – |" in report  # the baseline `runs` shows, not "–"
    assert "### Steps\n\nNo step has run yet.\n" in report  # not a table of headers alone
    code, _ = run("report", "--html", "run.html")
    assert code == 0 and "No step has run yet." in (demo / "run.html").read_text()
    assert '"baseline_val": 0.333' in runs
    # The whole stop sentence, and a resume hint that would not stop again the same way.
    assert "so it stopped before its first step. Resume it with `skillvc train --budget-usd N`" in (
        report
    )
    # Datasette's cost_per_step agrees with the run's cost to the cent and beyond (no float dust).
    from skillvc.integrations.datasette_app import QUERIES

    with open_store(demo / ".skillvc" / "events.db") as store:
        (baseline,) = store.query(QUERIES["cost_per_step"]["sql"])
    cost = json.loads(runs)[0]["cost_usd"]
    assert baseline["phase"] == "baseline" and baseline["cost_usd"] == cost == 0.6187


def test_a_budget_needs_no_price_for_claude_code_which_reports_its_cost(
    demo_seed: Path, tmp_path: Path, isolated_env: Path
) -> None:
    from skillvc.core.errors import ConfigError
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace
    from tests.test_agents import agent_repo, fake_cli

    claude = agent_repo(
        demo_seed, tmp_path / "r1", "claude-code", fake_cli(tmp_path / "bin", "claude-code")
    )
    summary = train(open_workspace(claude), budget_usd=50.0)
    assert summary.status == "finished" and summary.cost_usd and summary.cost_usd > 0
    # Codex gives tokens but no cost: a budget still needs its price.
    codex = agent_repo(demo_seed, tmp_path / "r2", "codex", fake_cli(tmp_path / "bin", "codex"))
    with pytest.raises(ConfigError, match=r"--budget-usd needs a price for command:codex"):
        train(open_workspace(codex), budget_usd=50.0)


def test_a_sleep_whose_training_fails_leaves_no_branch_and_no_run_to_resume(
    demo: Path, tmp_path: Path, isolated_env: Path
) -> None:
    from tests.test_sleep import write_night

    project, _ = write_night(isolated_env, 1)
    # An agent CLI that fails on every task: the run stops after its baseline.
    agent = tmp_path / "broken-claude"
    agent.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "2.0.0 (Claude Code)" && exit 0\n'
        "echo 'API Error: 500'\nexit 1\n"
    )
    agent.chmod(0o755)
    toml = demo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            '[target]\nmodel = "sim:support"',
            '[target]\nmodel = "command:claude-code"\nharness = "claude-code"\n'
            f'executable = "{agent}"',
        )
    )
    git(demo, "commit", "-qam", "an agent target")
    before = git(demo, "for-each-ref", "--format=%(refname)", "refs/heads/")
    code, out = run(
        "sleep", "--yes", "-q", "--date", "2026-02-01", "--budget-usd", "1", str(project)
    )
    assert code != 0 and out.startswith("Error: ") and "API Error: 500" in out, out
    assert git(demo, "for-each-ref", "--format=%(refname)", "refs/heads/") == before
    assert git(demo, "worktree", "list").count("\n") == 0
    # A NaN budget is refused the same way: nothing left behind.
    code, out = run(
        "sleep", "--yes", "-q", "--date", "2026-02-01", "--budget-usd", "nan", str(project)
    )
    assert code == 5 and "Error: --budget-usd nan is not a number of dollars." in out
    assert git(demo, "for-each-ref", "--format=%(refname)", "refs/heads/") == before
    # The stopped run lived in the removed worktree: train does not try to resume it.
    with open_store(demo / ".skillvc" / "events.db") as store:
        (started,) = store.events(types=["run.started"])
        assert store.events(run_id=started.run_id, types=["run.abandoned"])


def test_a_rubric_must_name_a_kind_and_say_something(demo: Path, isolated_env: Path) -> None:
    from tests.test_sleep import write_night

    project, _ = write_night(isolated_env, 1)
    code, out = run("harvest", "--from", "claude-code", "--yes", str(project))
    assert code == 0, out
    review = CliRunner().invoke(cli, ["harvest", "--review"]).output
    kind = review.split("kind ", 1)[1].split()[0]
    item = review.split("[x] ", 1)[1].split()[0]
    code, out = run("harvest", "--review", "--rubric", kind, "  ")
    assert (code, out) == (
        5,
        f"Error: The rubric for kind {kind} is empty.\nHint: Say what a correct answer does, "
        f'e.g. --rubric {kind} "The answer names the action the customer accepted."\n',
    )
    code, out = run("harvest", "--review", "--rubric", item, "The answer is right.")
    assert code == 1 and out.startswith(
        f"Error: '{item}' is an item, and a rubric belongs to a kind."
    )
    # Nothing was recorded: the drafted rubric stands.
    assert "rubric: (no rubric yet)" not in CliRunner().invoke(cli, ["harvest", "--review"]).output


def test_a_sleep_over_one_off_requests_says_nothing_recurs(
    demo: Path, tmp_path: Path, isolated_env: Path
) -> None:
    import json

    from tests.test_sleep import claude_lines

    project = tmp_path / "project"
    project.mkdir()
    for n, prompt in enumerate(["Write a haiku about rust", "What is the capital of Peru?"]):
        session = f"0000000{n}-0000-0000-0000-000000000000"
        lines = claude_lines(
            session,
            f"2026-01-0{n + 1}T00:00:00.000Z",
            "/work/x",
            [{"prompt": prompt, "answer": "ok"}],
        )
        (project / f"{session}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out = run("sleep", "--yes", "-q", "--date", "2026-03-01", str(project))
    assert code == 0, out
    assert (
        "Warning: No recurring task yet: none of the 2 prompts harvested recurs in at least 3 "
        "sessions (min_support); nothing to review or train on.\n"
    ) in out
    assert git(demo, "for-each-ref", "--format=%(refname)", "refs/heads/") == "refs/heads/main"


def test_show_says_a_hash_prefix_needs_six_characters(demo: Path) -> None:
    code, out = run("eval", "-q", "--split", "val")
    assert code == 0, out
    with open_store(demo / ".skillvc" / "events.db") as store:
        blob = store.query(  # not all digits, which would read as an event id
            "SELECT hash FROM blobs WHERE substr(hash, 1, 5) GLOB '*[a-f]*' ORDER BY hash LIMIT 1"
        )[0]["hash"]
    code, out = run("show", blob[:6])
    assert code == 0 and out.startswith(f"# blob {blob}")
    code, out = run("show", blob[:5])
    assert (code, out) == (
        3,
        f"Error: No event, edit, commit or run matches '{blob[:5]}'.\nHint: A blob hash or "
        "model call key prefix needs at least 6 hex characters; list ids with 'skillvc log' "
        "or 'skillvc runs'.\n",
    )


def test_show_of_an_event_outside_any_run_says_no_run_none(demo: Path) -> None:
    code, out = run("eval", "-q", "--split", "val")
    assert code == 0, out
    with open_store(demo / ".skillvc" / "events.db") as store:
        (evaluation,) = store.events(types=["evaluation"])
    code, out = run("show", str(evaluation.id))
    assert code == 0
    # No "run ..." in the header; the payload as text (issue 24: no raw JSON in show).
    header, body = out.split("\n", 1)
    assert header == f"event {evaluation.id}  evaluation  {evaluation.created_at}"
    assert body.startswith("  the working tree (worktree) on val: ") and "{" not in body


def test_an_agent_executable_that_is_not_executable_or_a_directory_says_so(
    tmp_path: Path,
) -> None:
    from skillvc.core.config import ModelConfig
    from skillvc.core.errors import ConfigError
    from skillvc.models.harness import get_backend

    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\n")  # no x bit
    config = ModelConfig(model="command:claude-code", harness="claude-code", executable=str(script))
    with pytest.raises(ConfigError) as caught:
        get_backend(config, tmp_path)
    assert caught.value.message == f"Claude Code's executable '{script}' is not executable."
    assert caught.value.hint == (
        f"Make it executable with 'chmod +x {script}', or point executable at the real CLI."
    )
    config = ModelConfig(
        model="command:claude-code", harness="claude-code", executable=str(tmp_path)
    )
    with pytest.raises(ConfigError) as caught:
        get_backend(config, tmp_path)
    assert caught.value.message == f"Claude Code's executable '{tmp_path}' is a directory."


def test_datasette_on_a_taken_port_is_one_clear_error(demo: Path) -> None:
    import socket
    import subprocess
    import sys

    assert run("eval", "-q", "--split", "val")[0] == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(  # a subprocess: on success the command execs the server
            [sys.executable, "-m", "skillvc", "datasette", "--port", str(port)],
            cwd=demo,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert (result.returncode, result.stdout, result.stderr) == (
        4,
        "",
        f"Error: Port {port} on 127.0.0.1 is in use.\n"
        "Hint: Pick another with --port N, or --port 0 for a free one.\n",
    )


def test_csv_of_no_runs_or_gates_still_names_its_columns(demo: Path) -> None:
    from skillvc.review.history import LOG_KEYS
    from skillvc.review.runs import RUN_KEYS

    assert run("eval", "-q", "--split", "val")[0] == 0  # a log, but no training run
    assert run("runs", "--csv") == (0, ",".join(RUN_KEYS) + "\n")
    assert run("log", "--csv") == (0, ",".join(LOG_KEYS) + "\n")
    assert run("runs", "--nl") == (0, "")


def test_report_html_to_stdout_a_missing_directory_or_with_json(demo: Path) -> None:
    assert run("train", "-q", "--epochs", "1")[0] == 0
    code, page = run("report", "--html", "-")
    assert code == 0 and page.startswith("<!doctype html>") and not (demo / "-").exists()
    code, out = run("report", "--html", str(demo / "no" / "such" / "run.html"))
    assert code == 2 and (
        f"Error: Invalid value for '--html': the directory '{demo / 'no' / 'such'}' does not "
        "exist." in out
    )
    code, out = run("report", "--html", "run.html", "--json")
    assert code == 2 and "Error: Give one of --html and --json (or --format json)." in out
    assert not (demo / "run.html").exists()


def test_harvest_says_how_many_lines_it_could_not_read(demo: Path, tmp_path: Path) -> None:
    transcripts = tmp_path / "project"
    transcripts.mkdir()
    (transcripts / "s1.jsonl").write_text('garbage\n{"type": "user"\n[1]\n\n')
    result = CliRunner().invoke(
        cli, ["harvest", "--from", "claude-code", "--yes", str(transcripts)]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"read {transcripts / 's1.jsonl'}: 0 task prompts "
        "(3 lines of no known claude-code shape skipped)\n"
    )
