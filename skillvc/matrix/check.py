"""``skillvc check --matrix``: the change paired on every ``[targets.<name>]`` model of BASE.

Run after the ordinary check (which gates the primary ``[target]`` and refuses a head that
changes ``skillvc.toml`` or the task files): as there, BASE's config names the models and BASE's
exported tree holds the task files and scorer files; the head brings only the skill.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from skillvc.core.config import CONFIG_FILE, parse_config
from skillvc.core.progress import Progress
from skillvc.matrix.scores import TargetChange, change_of, require_targets, with_target
from skillvc.repo.skillrepo import SkillRepo
from skillvc.review.evaluation import read_skill
from skillvc.review.trust import _decode, _read_at, compare_in_tree
from skillvc.workspace.workspace import Workspace


def check_matrix(
    root: Path,
    base: str,
    head: str | None,
    split: str,
    *,
    skill: str | None = None,
    alpha: float = 0.05,
    workers: int | None = None,
    progress: Progress | None = None,
) -> list[TargetChange]:
    """BASE vs HEAD (None: the working tree) on each [targets.<name>] model of BASE's config."""
    with SkillRepo(root) as repo:
        raw = _read_at(repo, CONFIG_FILE, base)
        if raw is None:
            return []
        config = parse_config(_decode(raw, f"{CONFIG_FILE} at {base}"), root)
        if skill is not None:
            config = config.for_skill(skill)
        require_targets(config)
        reader = Workspace(root=root, config=config, _repo=repo)
        base_version, head_version = read_skill(reader, base), read_skill(reader, head)
        changes = []
        with tempfile.TemporaryDirectory(prefix="skillvc-matrix-") as tmp:
            tree = Path(tmp)
            repo.export_tree(repo.resolve(base), tree)
            ws = Workspace(root=root, config=dataclasses.replace(config, root=tree), _repo=repo)
            for name, model in config.targets.items():
                comparison = compare_in_tree(
                    with_target(ws, model),
                    base_version,
                    head_version,
                    split,
                    tree,
                    workers=workers,
                    progress=progress,
                )
                changes.append(change_of(name, comparison, alpha))
    return changes
