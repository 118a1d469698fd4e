"""``skillvc demo``: a skills repo from a bundled example, trained offline with ``sim:``.

Three examples: ``templates/demo`` (a one-file skill, ``sim:support``); with ``--package``,
``templates/demo-package`` (a skill package: SKILL.md linking two reference files, trained with
the package-aware world ``sim:support-package``), both on the same 120 tickets; and with
``--tools``, ``templates/demo-tools`` (a tool-using skill, ``sim:inventory``, whose target acts
through the real tool loop and the demo's real ``tools/inventory.py``). Their settings
live in the committed ``skillvc.toml``, so resetting the repo to its seed commit and running
``skillvc train`` there reproduces the same run and the same skill.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillvc.core.errors import StateConflict
from skillvc.core.resources import read_bytes
from skillvc.packages.links import reachable_files
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.repo.skillrepo import SkillRepo
from skillvc.training.loop import Progress, RunSummary, train
from skillvc.workspace.workspace import init_workspace, open_workspace

EVALS = {
    "evals/train.jsonl": "demo/evals/train.jsonl",
    "evals/val.jsonl": "demo/evals/val.jsonl",
    "evals/test.jsonl": "demo/evals/test.jsonl",
}
DEMO_FILES = {
    "skills/acme-returns/SKILL.md": "demo/SKILL.md",
    **EVALS,
    "skillvc.toml": "demo/skillvc.toml",
}
PACKAGE_DIR = "skills/acme-support"
PACKAGE_INTRO = f"""\
This demo trains a skill package: {PACKAGE_DIR}/SKILL.md and the reference files it
links (references/damage.md, references/returns.md). Its simulator, sim:support-package (a toy
world, not a model), counts a ticket topic's rules only in the file SKILL.md points the topic to,
so training edits reference files, and may create one (linked from SKILL.md) for a new topic."""
PACKAGE_DEMO_FILES = {
    f"{PACKAGE_DIR}/SKILL.md": "demo-package/SKILL.md",
    f"{PACKAGE_DIR}/references/damage.md": "demo-package/references/damage.md",
    f"{PACKAGE_DIR}/references/returns.md": "demo-package/references/returns.md",
    **EVALS,
    "skillvc.toml": "demo-package/skillvc.toml",
}


TOOLS_INTRO = """\
This demo trains a tool-using skill: skills/stock-check/SKILL.md answers stock questions, which
only the tool in tools/inventory.py can answer. Its simulator, sim:inventory (a toy world, not a
model), acts through the real tool loop: it calls the real tool when the skill tells it to."""
TOOLS_DEMO_FILES = {
    "skills/stock-check/SKILL.md": "demo-tools/SKILL.md",
    "tools/inventory.py": "demo-tools/tools/inventory.py",
    "evals/train.jsonl": "demo-tools/evals/train.jsonl",
    "evals/val.jsonl": "demo-tools/evals/val.jsonl",
    "evals/test.jsonl": "demo-tools/evals/test.jsonl",
    "skillvc.toml": "demo-tools/skillvc.toml",
}


def create_demo_repo(directory: Path, *, package: bool = False, tools: bool = False) -> SkillRepo:
    """Write the example into ``directory`` (empty or new) and commit it as the seed."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise StateConflict(
            f"{directory} is not empty.", hint="Pick a new directory with --dir DIR."
        )
    files = TOOLS_DEMO_FILES if tools else PACKAGE_DEMO_FILES if package else DEMO_FILES
    for target, source in files.items():
        path = directory / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(read_bytes("templates", source))
    repo = SkillRepo.init(directory)
    git = repo.git_repo.git
    # The demo must run on a machine where git has no identity configured yet.
    git.config("user.name", "skillvc demo")
    git.config("user.email", "demo@skillvc.invalid")
    init_workspace(directory)
    git.add("--", ".gitignore", *files)
    git.commit("-q", "-m", "Seed skill, task set and skillvc.toml for the skillvc demo")
    return repo


def run_demo(
    directory: Path,
    progress: Progress | None = None,
    *,
    package: bool = False,
    tools: bool = False,
) -> RunSummary:
    create_demo_repo(directory, package=package, tools=tools)
    return train(open_workspace(directory), progress=progress)


@dataclass(frozen=True)
class AcceptedCommit:
    """One accepted candidate of a run: its commit and the files it changes."""

    sha: str
    subject: str
    files: tuple[tuple[str, str], ...]  # (git status letter, repository path), by path


@dataclass(frozen=True)
class PackageChanges:
    """What a run did to a skill package's files (paths relative to the package)."""

    commits: list[AcceptedCommit]  # oldest first
    changed: list[str]  # files other than SKILL.md that accepted commits changed, sorted
    created: list[tuple[str, bool]]  # files they created, and whether SKILL.md links them


def accepted_commits(repo: SkillRepo, run_id: str, skill_path: str) -> list[AcceptedCommit]:
    """The commits run ``run_id`` made on the current branch (each changes the skill at
    ``skill_path``, a file or a package directory), oldest first."""
    out = []
    for info in reversed(repo.log_file(skill_path)):
        if info.trailers.get("Skillvc-Run") == run_id:
            out.append(AcceptedCommit(info.sha, info.subject, tuple(repo.changed_files(info.sha))))
    return out


def package_changes(repo: SkillRepo, run_id: str, package_dir: str) -> PackageChanges:
    """The accepted commits of run ``run_id`` on the package at ``package_dir``, the reference
    files they changed, and those they created with whether a chain of links from SKILL.md
    reaches them at the branch's head (training refuses a new file no link leads to)."""
    commits = accepted_commits(repo, run_id, package_dir)
    prefix = f"{package_dir}/" if package_dir else ""
    names = {p[len(prefix) :] for c in commits for _, p in c.files}
    added = {p[len(prefix) :] for c in commits for status, p in c.files if status == "A"}
    reachable = reachable_files(SkillPackage.from_rev(repo, package_dir, "HEAD"))
    return PackageChanges(
        commits,
        sorted(names - {SKILL_FILE}),
        [(name, name in reachable) for name in sorted(added)],
    )
