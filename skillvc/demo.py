"""``skillvc demo``: a skills repo from the bundled example, trained offline with ``sim:``.

The example (``templates/demo``) is a seed skill and 120 tickets of the simulator's world. Its
settings live in the committed ``skillvc.toml``, so resetting the repo to its seed commit and
running ``skillvc train`` there reproduces the same run and the same skill.
"""

from __future__ import annotations

from pathlib import Path

from skillvc.errors import StateConflict
from skillvc.repo import SkillRepo
from skillvc.resources import read_bytes
from skillvc.training.loop import Progress, RunSummary, train
from skillvc.workspace import init_workspace, open_workspace

DEMO_FILES = {
    "skills/acme-returns/SKILL.md": "demo/SKILL.md",
    "evals/train.jsonl": "demo/evals/train.jsonl",
    "evals/val.jsonl": "demo/evals/val.jsonl",
    "evals/test.jsonl": "demo/evals/test.jsonl",
    "skillvc.toml": "demo/skillvc.toml",
}


def create_demo_repo(directory: Path) -> SkillRepo:
    """Write the example into ``directory`` (empty or new) and commit it as the seed."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise StateConflict(
            f"{directory} is not empty.", hint="Pick a new directory with --dir DIR."
        )
    for target, source in DEMO_FILES.items():
        path = directory / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(read_bytes("templates", source))
    repo = SkillRepo.init(directory)
    git = repo.git_repo.git
    # The demo must run on a machine where git has no identity configured yet.
    git.config("user.name", "skillvc demo")
    git.config("user.email", "demo@skillvc.invalid")
    init_workspace(directory)
    git.add("--", ".gitignore", *DEMO_FILES)
    git.commit("-q", "-m", "Seed skill, task set and skillvc.toml for the skillvc demo")
    return repo


def run_demo(directory: Path, progress: Progress | None = None) -> RunSummary:
    create_demo_repo(directory)
    return train(open_workspace(directory), progress=progress)
