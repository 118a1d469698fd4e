"""Training a skill package (issue 14): what the optimizer is shown, and (with the
package-aware simulator, ``sim:support-package``) accepted edits to reference files, new
reference files linked from SKILL.md, commits that touch only package files, and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli
from skillvc.prompts import section
from skillvc.resources import read_bytes
from skillvc.store import open_store

FORMS = "# Forms and special cases\n\n- Billing errors go to the billing team: escalate them.\n"
LINK = "\nFor special cases read [the forms](references/forms.md).\n"
TRAIN_KEYS = "[train]\nepochs = 1\nbatch_size = 8\nminibatch_size = 4\nworkers = 2\nseed = 7\n"


def _lines(source: str, n: int) -> bytes:
    rows = read_bytes("templates", f"demo/evals/{source}.jsonl").decode().splitlines()
    return ("\n".join(rows[:n]) + "\n").encode()


def optimizer_prompts(repo: Path, kind: str) -> list[str]:
    """The user message of every recorded optimizer call of ``kind`` (reflect, ...), in order."""
    with open_store(repo / ".skillvc" / "events.db") as store:
        rows = store.query(
            "SELECT prompt_blob FROM model_calls WHERE role = 'optimizer' ORDER BY event_id"
        )
        prompts = [json.loads(store.get_blob(r["prompt_blob"]))[1]["content"] for r in rows]
    return [p for p in prompts if f"<!-- skillvc-prompt: {kind} -->" in p]


@pytest.fixture
def forms_repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skills/acme-returns/: the demo's SKILL.md linking references/forms.md; sim:support."""
    folder = git_repo / "skills" / "acme-returns"
    (folder / "references").mkdir(parents=True)
    seed = read_bytes("templates", "demo/SKILL.md").decode()
    (folder / "SKILL.md").write_text(seed + LINK, encoding="utf-8")
    (folder / "references" / "forms.md").write_text(FORMS, encoding="utf-8")
    evals = git_repo / "evals"
    evals.mkdir()
    for split, n in (("train", 16), ("val", 16), ("test", 6)):
        (evals / f"{split}.jsonl").write_bytes(_lines(split, n))
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(
        cli, ["init", "--target", "sim:support", "--optimizer", "sim:support", "--seed", "7"]
    )
    assert result.exit_code == 0, result.output
    toml = git_repo / "skillvc.toml"
    text = toml.read_text().replace(
        'path = "skills/acme-returns/SKILL.md"', 'path = "skills/acme-returns"'
    )
    toml.write_text(text.split("\n[train]\n")[0] + "\n" + TRAIN_KEYS)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "package skill")
    return git_repo


def test_the_reflection_prompt_shows_skill_md_as_skill_and_the_rest_as_package_files(
    forms_repo: Path,
) -> None:
    # Regression: the loop put the package's bundle (canonical JSON of every file) under
    # <skill>, so the optimizer saw SKILL.md JSON-escaped and the references twice.
    seed = (forms_repo / "skills" / "acme-returns" / "SKILL.md").read_text()
    result = CliRunner().invoke(cli, ["train", "-q"])
    assert result.exit_code == 0, result.output
    first = optimizer_prompts(forms_repo, "reflect")[0]
    assert section(first, "skill") == seed
    listing = json.loads(section(first, "package_files"))
    assert [(f["path"], f["linked"], f["text"]) for f in listing] == [
        ("references/forms.md", True, FORMS)
    ]
