"""Skill packages: a skill directory (SKILL.md plus reference files) as one versioned unit."""

from skillvc.packages.carried import Carried, load_carried
from skillvc.packages.edits import PackageApplyResult, apply_package_edits
from skillvc.packages.links import RULE_LINK, broken_links, linked_files
from skillvc.packages.model import (
    BUNDLE_FORMAT,
    DEFAULT_INCLUDE,
    SKILL_FILE,
    SkillPackage,
    bundle_files,
    load_package,
    skill_file_text,
)
from skillvc.packages.render import (
    PackageVersion,
    TargetInput,
    TargetView,
    chat_rendering,
    package_view,
    render_chat,
)
from skillvc.packages.version import package_version, target_view

__all__ = [
    "BUNDLE_FORMAT",
    "Carried",
    "DEFAULT_INCLUDE",
    "RULE_LINK",
    "SKILL_FILE",
    "PackageApplyResult",
    "PackageVersion",
    "SkillPackage",
    "TargetInput",
    "TargetView",
    "apply_package_edits",
    "broken_links",
    "bundle_files",
    "chat_rendering",
    "linked_files",
    "load_carried",
    "load_package",
    "package_version",
    "package_view",
    "render_chat",
    "skill_file_text",
    "target_view",
]
