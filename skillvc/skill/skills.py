"""Many skills in one repository: which skill of ``skillvc.toml`` a command acts on.

``--skill NAME`` matches, in this order, a ``[skills.<name>]`` table, a skill's path (the file
or its directory, from the current directory or the root) and a skill's frontmatter ``name``.
With one skill it is implied; with several, a command that needs one and got none stops with
exit 2 naming them (``SkillNotNamed``). A name that matches nothing is ``UnknownSkill`` (exit 3).
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import TYPE_CHECKING

from skillvc.core.config import CONFIG_FILE, Config, listing
from skillvc.core.errors import SkillvcError, UnknownEventId, UnknownSkill
from skillvc.inputs import reader as inputs

if TYPE_CHECKING:
    from skillvc.core.store import EventStore


def select_skill(config: Config, given: str | None, cwd: Path | None = None) -> Config:
    """The effective config of the skill ``given`` names (or of the only one)."""
    if given is None:
        config.require_named()
        return config
    name = find_skill_name(config, given, cwd)
    if name is None:
        raise UnknownSkill(
            f"{CONFIG_FILE} has no skill {given!r} (it lists {listing(config.skill_names)})."
        )
    return config.for_skill(name)


def find_skill_name(config: Config, given: str, cwd: Path | None = None) -> str | None:
    """The skill ``given`` names (table name, path or frontmatter name), or None."""
    names = config.skill_names
    if config.many and given in config.skills:
        return given
    skills = config.all_skills()
    wanted = _relpaths(config.root, given, cwd)
    files = [skill_file(skill) for skill in skills]
    for name, skill, file in zip(names, skills, files, strict=True):
        if _norm(skill.skill.path) in wanted or file in wanted:  # a package's SKILL.md too
            return name
    for name, skill, file in zip(names, skills, files, strict=True):
        try:
            named = frontmatter_name(skill.skill_path)
        except SkillvcError:  # a path outside the work tree is never read
            named = None
        if given in (named, Path(file or skill.skill.path).parent.name):
            return name
    return None


def skill_file(config: Config) -> str | None:
    """The skill's SKILL.md (a package directory's too), or None outside the work tree."""
    try:
        return config.skill_relpath
    except SkillvcError:
        return None


def frontmatter_name(path: Path) -> str | None:
    """The ``name`` in a skill file's frontmatter, or None (missing file, no such key)."""
    from skillvc.skill.skilldoc import SkillDocument

    try:
        raw = inputs.read_bytes(path, path.name, max_bytes=inputs.SKILL_MAX_BYTES)
        doc = SkillDocument.parse(raw)
    except (OSError, SkillvcError, ValueError):
        return None
    name = (doc.frontmatter or {}).get("name")
    return name if isinstance(name, str) else None


def _norm(path: str) -> str:
    return posixpath.normpath(Path(path).as_posix())


def _relpaths(root: Path, given: str, cwd: Path | None) -> set[str]:
    """``given`` as root-relative paths: the file itself and ``<dir>/SKILL.md``."""
    out = set()
    for base in (cwd or Path.cwd(), root):
        full = (base / given).resolve()
        for candidate in (full, full / "SKILL.md"):
            try:
                out.add(candidate.relative_to(root.resolve()).as_posix())
            except ValueError:
                continue
    return out


def run_ids_of(store: EventStore, skill_path: str) -> list[str]:
    """Runs that trained the skill at ``skill_path``, newest first (from ``run.started``)."""
    rows = store.query(
        "SELECT run_id FROM events WHERE type = 'run.started' "
        "AND json_extract(payload, '$.config.skill.path') = ? ORDER BY id DESC",
        [skill_path],
    )
    seen: dict[str, None] = {}
    for row in rows:  # a resumed run starts again: one entry per run
        seen.setdefault(str(row["run_id"]), None)
    return list(seen)


def run_skill_path(store: EventStore, run_id: str) -> str | None:
    """The skill path a run trained (its ``run.started`` config), or None for no such run."""
    rows = store.query(
        "SELECT json_extract(payload, '$.config.skill.path') AS path FROM events "
        "WHERE type = 'run.started' AND run_id = ? LIMIT 1",
        [run_id],
    )
    return str(rows[0]["path"]) if rows and rows[0]["path"] else None


def report_targets(
    config: Config, store: EventStore, run_id: str | None
) -> list[tuple[str | None, str | None, str]]:
    """(skill name, run id, skill path) of each run ``skillvc report`` covers: ``run_id``; else
    the latest run of the selected skill; else, with many skills, each skill's latest run."""
    if run_id is not None:
        path = run_skill_path(store, run_id)
        return [(config.skill_name, run_id, path or _path_or_default(config))]
    if not config.many or config.skill_name is not None:
        path = config.skill_relpath
        if not config.many:
            return [(None, None, path)]  # today's behaviour: the latest run of the log
        runs = run_ids_of(store, config.skill.path)
        if not runs:
            raise UnknownEventId(f"No run of skill {config.skill_name} in the event log.")
        return [(config.skill_name, runs[0], path)]
    out: list[tuple[str | None, str | None, str]] = []
    for skill in config.all_skills():
        runs = run_ids_of(store, skill.skill.path)
        if runs:
            out.append((skill.skill_name, runs[0], skill.skill_relpath))
    if not out:
        raise UnknownEventId("No runs yet in the event log.", hint="Run 'skillvc train' first.")
    return out


def _path_or_default(config: Config) -> str:
    return config.skill_relpath if not config.many or config.skill_name else "SKILL.md"
