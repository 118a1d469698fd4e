"""Skill packages: a skill directory (SKILL.md plus reference files) as one versioned unit."""

from skillvc.packages.edits import PackageApplyResult, apply_package_edits
from skillvc.packages.links import RULE_LINK, broken_links, linked_files
from skillvc.packages.model import DEFAULT_INCLUDE, SKILL_FILE, SkillPackage, load_package
from skillvc.packages.render import ChatRendering, chat_renderer, render_chat, target_rendering

__all__ = [
    "DEFAULT_INCLUDE",
    "RULE_LINK",
    "SKILL_FILE",
    "ChatRendering",
    "PackageApplyResult",
    "SkillPackage",
    "apply_package_edits",
    "broken_links",
    "chat_renderer",
    "linked_files",
    "load_package",
    "render_chat",
    "target_rendering",
]
