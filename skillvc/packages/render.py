"""What the target receives of a skill package: a chat prompt, or the files an agent installs.

Invariants:
- Chat harness: with no linked files the system prompt is SKILL.md's text unchanged, so a
  package without references sends exactly what a single-file skill does. Linked files follow
  in order of first link, each whole under a header line ``## Reference file: <package path>``;
  a file that would take the appended text past ``budget`` bytes (UTF-8), or the whole prompt
  past ``cap`` bytes (the token cap, ``[skill] max_tokens`` x 4), is left out whole and named
  in ``cut``, never half-sent. So the cap holds for what the model receives as long as SKILL.md
  alone is under it (``skillvc.preflight.check_skill`` refuses it otherwise).
- Installing harnesses (``command``, ``claude-code``, ``codex``): SKILL.md is the system text as
  always and every other package file travels in ``TargetInput.files`` (package-relative path,
  text), which the harness writes beside the installed SKILL.md. The files are part of the
  call's cache key, so a changed reference file is a new call.
- A view takes a skill version's bundle (``SkillPackage.bundle``) and depends on nothing else:
  the same version always gets the same input, so training and ``skillvc eval`` share calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skillvc.packages.links import linked_files
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.preflight import BYTES_PER_TOKEN

if TYPE_CHECKING:
    from skillvc.config import Config
    from skillvc.repo import SkillRepo

HEADER = "## Reference file: {path}"
# Harnesses that install the skill as files for an agent (they get the whole package).
INSTALLING_HARNESSES = ("command", "claude-code", "codex")


@dataclass(frozen=True)
class TargetInput:
    """One skill version as the target gets it."""

    system: str  # the system prompt (chat), or SKILL.md's text (an installing harness)
    files: tuple[tuple[str, str], ...] = ()  # other package files to install, sorted by path
    included: tuple[str, ...] = field(default=(), compare=False)  # chat: linked files sent
    cut: tuple[str, ...] = field(default=(), compare=False)  # chat: linked files left out

    def to_dict(self) -> dict[str, list[str]]:
        """What ``package.rendered`` records of a chat rendering."""
        return {"included": list(self.included), "cut": list(self.cut)}


# The renderer the evaluator and prefetcher take: skill text (a bundle) -> target input.
TargetView = Callable[[str], TargetInput]
ChatRendering = TargetInput  # the chat form (kept for the name callers know)


def render_chat(package: SkillPackage, budget: int, cap: int | None = None) -> TargetInput:
    """The chat system prompt of ``package`` (see the module invariants)."""
    texts = package.texts()
    skill = texts.get(SKILL_FILE, "")
    if cap is not None:
        budget = min(budget, max(0, cap - len(skill.encode("utf-8"))))
    parts, included, cut, used = [skill], [], [], 0
    for name in linked_files(package):
        if name not in texts:
            continue
        block = f"\n\n{HEADER.format(path=name)}\n\n{texts[name]}"
        size = len(block.encode("utf-8"))
        if used + size > budget:
            cut.append(name)
            continue
        parts.append(block)
        included.append(name)
        used += size
    return TargetInput("".join(parts), (), tuple(included), tuple(cut))


def install_files(package: SkillPackage) -> TargetInput:
    """SKILL.md as the text to install and every other file to write beside it."""
    texts = package.texts()
    others = tuple((name, texts[name]) for name in package.names if name != SKILL_FILE)
    return TargetInput(texts.get(SKILL_FILE, ""), others)


def package_view(root: str, harness: str, budget: int, cap: int | None = None) -> TargetView:
    """``bundle -> TargetInput`` for one harness (memoised: one rendering per version)."""

    @functools.lru_cache(maxsize=64)
    def view(bundle: str) -> TargetInput:
        package = SkillPackage.from_bundle(root, bundle)
        if harness in INSTALLING_HARNESSES:
            return install_files(package)
        return render_chat(package, budget, cap)

    return view


def config_view(config: Config, root: str) -> TargetView:
    """The view of the configured target for a package at ``root``."""
    cap = config.skill.max_tokens * BYTES_PER_TOKEN
    return package_view(root, config.target.harness, config.skill.reference_bytes, cap)


def target_view(
    config: Config, repo: SkillRepo | None = None, rev: str | None = None, where: str = ""
) -> tuple[TargetView | None, SkillPackage | None]:
    """The configured skill's view and its package at ``rev`` (working tree when None):
    (None, None) for a single-file skill, whose text is sent as it is. A package with a broken
    relative link or a file that is not UTF-8 never reaches a model (SkillDocumentError)."""
    from skillvc.packages.model import load_package
    from skillvc.preflight import check_package_files

    package = load_package(config, repo, rev)
    if package is None:
        return None, None
    check_package_files(package, where)
    return config_view(config, package.root), package


def chat_rendering(config: Config, package: SkillPackage) -> TargetInput | None:
    """What the chat target is sent of ``package`` (None for an installing harness)."""
    if config.target.harness in INSTALLING_HARNESSES:
        return None
    return config_view(config, package.root)(package.bundle())
