"""What the target receives of a skill package: a chat prompt, or the files an agent installs.

Invariants:
- Chat harness: with no linked files the system prompt is SKILL.md's text unchanged, so a
  package without references sends exactly what a single-file skill does. Linked files follow
  in order of first link, each whole under a header line ``## Reference file: <package path>``;
  a file that would take the appended text past ``budget`` bytes (UTF-8), or the whole prompt
  past ``cap`` bytes (the token cap, ``[skill] max_tokens`` x 4), is left out whole and named
  in ``cut``, never half-sent. So the cap holds for what the model receives as long as SKILL.md
  alone is under it (``skillvc.skill.preflight.check_skill`` refuses it otherwise).
- Installing harnesses (``command``, ``claude-code``, ``codex``) get the whole directory:
  SKILL.md is the system text as always, every other package file travels in
  ``TargetInput.files`` (package-relative path, text) and the version's carried files
  (``skillvc.packages.carried``: scripts, assets, byte for byte with their executable bits) in
  ``TargetInput.carried``; the harness writes both beside the installed SKILL.md. All of them
  are part of the call's cache key (a carried file by its hash), so a changed reference file
  or script is a new call and an unchanged package is answered from the log.
- A view takes a skill version's bundle (``SkillPackage.bundle``) and the carried files it was
  made with, and depends on nothing else: the same version always gets the same input, so
  training and ``skillvc eval`` share calls. Training never edits a carried file, so one view
  serves every version of a run (with its base commit's carried files).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skillvc.packages.carried import Carried
from skillvc.packages.links import linked_files
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.packages.packagefile import PackageFile
from skillvc.skill.preflight import BYTES_PER_TOKEN

if TYPE_CHECKING:
    from skillvc.core.config import Config

HEADER = "## Reference file: {path}"
# Harnesses that install the skill as files for an agent (they get the whole package).
INSTALLING_HARNESSES = ("command", "claude-code", "codex")


@dataclass(frozen=True)
class TargetInput:
    """One skill version as the target gets it."""

    system: str  # the system prompt (chat), or SKILL.md's text (an installing harness)
    files: tuple[PackageFile, ...] = ()  # other package text files to install, sorted by path
    included: tuple[str, ...] = field(default=(), compare=False)  # chat: linked files sent
    cut: tuple[str, ...] = field(default=(), compare=False)  # chat: linked files left out
    # An installing harness: the carried files (scripts, assets) to install, sorted by path.
    carried: tuple[PackageFile, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        """What ``package.rendered`` records of a chat rendering."""
        return {"included": list(self.included), "cut": list(self.cut)}


# The renderer the evaluator and prefetcher take: skill text (a bundle) -> target input.
TargetView = Callable[[str], TargetInput]


def render_chat(package: SkillPackage, budget: int, max_tokens: int | None = None) -> TargetInput:
    """The chat system prompt of ``package`` (see the module invariants): linked files within
    ``budget`` bytes and the whole prompt within the token cap ``max_tokens`` (as bytes)."""
    texts = package.texts()
    skill = texts.get(SKILL_FILE, "")
    if max_tokens is not None:
        cap = max_tokens * BYTES_PER_TOKEN
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


def install_files(package: SkillPackage, carried: tuple[PackageFile, ...] = ()) -> TargetInput:
    """SKILL.md as the text to install, every other package file and the carried files to
    write beside it."""
    texts = package.texts()
    others = tuple(
        PackageFile(name, text=texts[name]) for name in package.names if name != SKILL_FILE
    )
    return TargetInput(texts.get(SKILL_FILE, ""), others, carried=carried)


def package_view(
    root: str,
    harness: str,
    budget: int,
    max_tokens: int | None = None,
    carried: tuple[PackageFile, ...] = (),
) -> TargetView:
    """``bundle -> TargetInput`` for one harness (memoised: one rendering per version); an
    installing harness also gets ``carried``, a chat target never does."""

    @functools.lru_cache(maxsize=64)
    def view(bundle: str) -> TargetInput:
        package = SkillPackage.from_bundle(root, bundle)
        if harness in INSTALLING_HARNESSES:
            return install_files(package, carried)
        return render_chat(package, budget, max_tokens)

    return view


def config_view(config: Config, root: str, carried: tuple[PackageFile, ...] = ()) -> TargetView:
    """The view of the configured target for a package at ``root`` carrying ``carried``."""
    skill = config.skill
    return package_view(
        root, config.target.harness, skill.reference_bytes, skill.max_tokens, carried
    )


def installs(config: Config) -> bool:
    """Whether the configured target installs the skill as files (and so gets carried ones)."""
    return config.target.harness in INSTALLING_HARNESSES


@dataclass(frozen=True)
class PackageVersion:
    """One version of a skill package as the configured target gets it."""

    package: SkillPackage
    carried: Carried
    view: TargetView

    @property
    def bundle(self) -> str:
        return self.package.bundle()

    def report(self) -> dict[str, list[str]]:
        """What ``skillvc eval`` says of it: the linked files the chat target is sent
        (``included``) and those left out for the size budget or the token cap (``cut``), the
        carried files an installing harness writes (``carried``) and the symbolic links left
        out of the package (``skipped``)."""
        given = self.view(self.bundle)
        return {
            "included": list(given.included),
            "cut": list(given.cut),
            "carried": [f.path for f in given.carried],
            "skipped": list(self.carried.skipped),
        }


def chat_rendering(config: Config, package: SkillPackage) -> TargetInput | None:
    """What the chat target is sent of ``package`` (None for an installing harness)."""
    if config.target.harness in INSTALLING_HARNESSES:
        return None
    return config_view(config, package.root)(package.bundle())
