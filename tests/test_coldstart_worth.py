"""The skill's worth: ``eval --baseline none`` pairs the skill with no skill at all, states the
one verdict, and ``report`` (Markdown and HTML) shows it; a skill that does not beat its
baseline says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.training.demo import create_demo_repo


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_skill_against_no_skill_and_against_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    create_demo_repo(root)
    monkeypatch.chdir(root)
    invoke("train", "-q")

    found = json.loads(invoke("eval", "--baseline", "none", "--json", "-q"))
    worth = found["worth"]
    assert worth["baseline_label"] == "no skill" and worth["baseline"] == "none"
    assert found["a"]["rev"] == "none"
    assert worth["diff"] > 0 and worth["up"] and not worth["down"]
    assert worth["beats"] is True and worth["verdict"] == "significant"
    assert worth["stated"].startswith("p = ") and worth["stated"].endswith("(alpha 0.2)")
    assert worth["sentence"] == f"the skill beats no skill on val: {worth['stated']}."

    text = invoke("eval", "--baseline", "none", "-q")
    assert "a  none (none): " in text
    assert text.rstrip().endswith(worth["sentence"])

    # Against itself: no difference, and it says it does not beat it.
    same = json.loads(invoke("eval", "--baseline", "HEAD", "--json", "-q"))["worth"]
    assert (same["diff"], same["beats"], same["verdict"]) == (0.0, False, "within noise")
    assert same["sentence"] == (
        "the skill does not beat the skill at HEAD on val: p = 1, within noise (alpha 0.2)."
    )
    markdown = invoke("report")
    assert f"**Worth:** {same['sentence']}" in markdown
    invoke("report", "--html", str(tmp_path / "run.html"))
    assert '<p id="worth"><strong>Worth:</strong> the skill does not beat the skill at HEAD' in (
        (tmp_path / "run.html").read_text()
    )
