"""One verdict everywhere (issue 45, item 1): a step whose p-value lies between report's old
fixed 0.1 and its own gate's alpha is "significant (alpha 0.2)" on every surface, in the same
words (``significance.stated``), with the alpha shown. The HTML report's verdict is read in
headless Chromium by tests/test_small_screens.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.training.demo import create_demo_repo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo trained through the CLI (attribution on: the gate's alpha is 0.2), and what
    `train` printed."""
    root = tmp_path_factory.mktemp("verdict") / "repo"
    create_demo_repo(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = CliRunner().invoke(cli, ["train", "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root, result.stdout


@pytest.fixture
def repo(demo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.chdir(demo[0])
    return demo


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def between() -> dict:
    """The accepted step the old report called "not significant" at 0.1 while its gate, at
    alpha 0.2, called it significant (the demo has one: p = 0.109, 5 items up and 1 down)."""
    entries = json.loads(invoke("log", "--json"))
    [entry] = [
        e
        for e in entries
        if e["decision"] == "accepted" and e["p_value"] is not None and 0.1 < e["p_value"] <= 0.2
    ]
    assert entry["alpha"] == 0.2  # rounded: 1 - 0.8 is 0.19999999999999996 in floats
    assert entry["verdict"] == "significant"
    return entry


def said(entry: dict) -> str:
    return f"p = {entry['p_value']:.3g}, significant (alpha 0.2)"


def test_train_log_and_show_state_the_verdict_with_its_alpha(repo) -> None:
    _, trained = repo
    entry = between()
    line = next(x for x in trained.splitlines() if x.startswith(f"accepted step {entry['step']}:"))
    assert re.fullmatch(rf"accepted step {entry['step']}: {re.escape(said(entry))}(; .*)?", line)
    block = next(b for b in invoke("log").split("\n\n") if f"event {entry['id']} " in b)
    assert f"  sign test: {said(entry)}\n" in block + "\n"
    assert f"  sign test: {said(entry)}\n" in invoke("show", str(entry["id"]))


def test_blame_states_it_with_its_alpha(repo) -> None:
    entry = between()
    lines = json.loads(invoke("blame", "--json"))
    mine = [x for x in lines if x["commit"] == entry["commit"]]
    assert mine and all(x["alpha"] == 0.2 for x in mine)
    line = next(x for x in mine if x["p_value"] == entry["p_value"])
    text = invoke("blame").splitlines()[line["line"] - 1]
    gain = f"{line['edit_gain']:+.3f}"
    assert re.match(
        rf"{entry['commit'][:8]} {entry['run']} step {entry['step']} {re.escape(gain)} "
        rf"{re.escape(said(entry))} +{line['line']}\| ",
        text,
    ), text


def test_the_markdown_report_and_its_json_state_it_with_its_alpha(repo) -> None:
    entry = between()
    markdown = invoke("report")
    row = next(x for x in markdown.splitlines() if x.startswith(f"| step {entry['step']} |"))
    assert f"| {said(entry)} |" in row and "⚠" not in row
    assert f"#### Step {entry['step']} — {entry['commit']} (val " in markdown
    heading = next(x for x in markdown.splitlines() if x.startswith(f"#### Step {entry['step']} "))
    assert heading.endswith(f", {said(entry)})")
    steps = json.loads(invoke("report", "--json"))["steps"]
    step = next(s for s in steps if s["id"] == entry["id"])
    assert (step["verdict"], step["alpha"], step["p_value"]) == (
        "significant",
        0.2,
        entry["p_value"],
    )


def test_check_states_it_with_its_alpha_and_says_when_nothing_changed(repo) -> None:
    entry = between()
    root, _ = repo
    # The step's commit against the one before it: the same change, judged by check.
    base = f"{entry['commit']}~1"
    data = json.loads(invoke("check", "-q", "--base", base, entry["commit"], "--json"))
    sure = data["significance"]
    assert 0.1 < sure["p_value"] <= 0.2 and sure["alpha"] == 0.2
    assert sure["verdict"] == "significant" and sure["direction"] == "better"
    text = invoke("check", "-q", "--base", base, entry["commit"])
    assert (
        f"significance: {entry['commit']} is better (exact sign test on the flipped items): "
        f"p = {sure['p_value']:.3g}, significant (alpha 0.2)\n" in text
    )
    # No change at all: nothing to compare, not "the working tree is better with p = 1".
    text = invoke("check", "-q", "--base", "HEAD")
    assert (
        "significance: no change to compare (the skill at the working tree is the same as at "
        "HEAD)\n" in text
    )
    assert "p = 1" not in text and "warning:" not in text
    sure = json.loads(invoke("check", "-q", "--base", "HEAD", "--json"))["significance"]
    assert (sure["direction"], sure["p_value"]) == ("unchanged", None)
    assert sure["verdict"] == "not tested"
