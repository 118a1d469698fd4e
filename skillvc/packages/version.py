"""A skill package's version as the target gets it, checked (``package_version``).

Above ``render`` and ``checks``: a version is rendered (``render.config_view``) only after
``checks.check_package_files`` passed, so a broken link or a non-UTF-8 file never reaches a
model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillvc.packages.carried import Carried, load_carried
from skillvc.packages.checks import check_package_files
from skillvc.packages.model import SkillPackage, load_package
from skillvc.packages.render import PackageVersion, TargetView, config_view, installs

if TYPE_CHECKING:
    from skillvc.core.config import Config
    from skillvc.repo.skillrepo import SkillRepo


def version_of(
    config: Config, package: SkillPackage, carried: Carried, where: str = ""
) -> PackageVersion:
    """``package`` with ``carried`` under ``config``'s target, checked: a package with a broken
    relative link or a file that is not UTF-8 never reaches a model (SkillDocumentError)."""
    check_package_files(package, where, carried.skipped)
    return PackageVersion(package, carried, config_view(config, package.root, carried.files))


def package_version(
    config: Config, repo: SkillRepo, rev: str | None = None, where: str = ""
) -> PackageVersion | None:
    """The configured skill package at ``rev`` (the working tree when None) with its carried
    files, checked (``version_of``); None for a single-file skill."""
    package = load_package(config, repo, rev)
    if package is None:
        return None
    carried = load_carried(config, package, repo, rev, read=installs(config))
    return version_of(config, package, carried, where)


def target_view(
    config: Config, repo: SkillRepo, rev: str | None = None, where: str = ""
) -> tuple[TargetView | None, SkillPackage | None]:
    """``package_version`` as (view, package); (None, None) for a single-file skill, whose
    text is sent as it is."""
    version = package_version(config, repo, rev, where)
    if version is None:
        return None, None
    return version.view, version.package
