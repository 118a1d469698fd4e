"""What the chat harness sends: SKILL.md as the system prompt, then the files it links to.

Invariants:
- With no linked files the rendering is SKILL.md's text unchanged, so a package without
  references (and every single-file skill, which never comes here) sends exactly what it did.
- Linked files follow in order of first link, each whole under a header line
  ``## Reference file: <package path>``; a file that would take the appended text past
  ``budget`` bytes (UTF-8) is left out whole, and is named in ``cut``, never half-sent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skillvc.packages.links import linked_files
from skillvc.packages.model import SKILL_FILE, SkillPackage

if TYPE_CHECKING:
    from skillvc.config import Config
    from skillvc.repo import SkillRepo

HEADER = "## Reference file: {path}"


@dataclass(frozen=True)
class ChatRendering:
    text: str  # the system prompt
    included: tuple[str, ...]  # linked files sent, in order
    cut: tuple[str, ...]  # linked files left out for the budget

    def to_dict(self) -> dict[str, list[str]]:
        return {"included": list(self.included), "cut": list(self.cut)}


def render_chat(package: SkillPackage, budget: int, skill_text: str | None = None) -> ChatRendering:
    """The chat system prompt of ``package``; ``skill_text`` stands in for SKILL.md's text
    (a candidate being evaluated), and its links decide which files follow."""
    texts = package.texts()
    if skill_text is not None:
        texts[SKILL_FILE] = skill_text
        files: Mapping[str, bytes] = {**package.files, SKILL_FILE: skill_text.encode("utf-8")}
        package = SkillPackage(package.root, files)
    skill = texts.get(SKILL_FILE, "")
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
    return ChatRendering("".join(parts), tuple(included), tuple(cut))


def chat_renderer(package: SkillPackage, budget: int) -> Callable[[str], str]:
    """``skill text -> system prompt`` for the evaluator (memoised: one rendering per text)."""

    @functools.lru_cache(maxsize=64)
    def render(skill_text: str) -> str:
        return render_chat(package, budget, skill_text).text

    return render


def target_rendering(
    config: Config, repo: SkillRepo | None = None, rev: str | None = None
) -> tuple[Callable[[str], str] | None, ChatRendering | None]:
    """What the evaluator needs for the configured skill: the chat renderer and the rendering
    of the skill as it stands (both None for a single-file skill or a non-chat harness).
    A package with a broken relative link never reaches a model (SkillDocumentError)."""
    from skillvc.errors import SkillDocumentError
    from skillvc.packages.links import broken_links
    from skillvc.packages.model import load_package

    if config.target.harness != "chat":
        return None, None
    package = load_package(config, repo, rev)
    if package is None:
        return None, None
    broken = broken_links(package)
    if broken:
        raise SkillDocumentError(
            f"{broken[0].message[:-1]}"
            + (f" (and {len(broken) - 1} more broken links)." if len(broken) > 1 else "."),
            hint="Fix the link or add the file it names, then run skillvc validate.",
        )
    budget = config.skill.reference_bytes
    return chat_renderer(package, budget), render_chat(package, budget)
