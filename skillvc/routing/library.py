"""The library an agent routes between: every skill's name, description and file.

Invariants:
- A skill's name is its frontmatter ``name`` (what an agent is shown), else its
  ``[skills.<name>]`` table name (else its directory); it never changes in training.
- A library version is read from one place: the working tree, or one git revision. Its
  identity (``Library.key``) is the canonical JSON of its names and descriptions, which is all
  routing sees.
- ``with_description`` rewrites only the skill file's ``description:`` line
  (``skillvc.models.agents.description``), within the Agent Skills limits (1,024 characters,
  no angle brackets).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from skillvc.core.config import Config
from skillvc.core.errors import ConfigError, SkillDocumentError
from skillvc.core.hashing import content_id
from skillvc.models.agents.description import MAX_CHARS, DescriptionRefused, with_description
from skillvc.repo.skillrepo import SkillRepo
from skillvc.skill.skilldoc import SkillDocument

__all__ = ["MAX_CHARS", "DescriptionRefused", "Library", "LibrarySkill", "load_library"]


@dataclass(frozen=True)
class LibrarySkill:
    name: str  # as listed to the agent
    table: str  # the [skills.<name>] table (the name itself for a single [skill])
    path: str  # the skill file, repository-relative
    text: str  # the whole file

    @property
    def description(self) -> str:
        try:
            fm = SkillDocument.parse(self.text).frontmatter or {}
        except SkillDocumentError:
            return ""
        value = fm.get("description")
        return " ".join(value.split()) if isinstance(value, str) else ""


@dataclass(frozen=True)
class Library:
    skills: tuple[LibrarySkill, ...]

    def __iter__(self) -> Iterator[LibrarySkill]:
        return iter(self.skills)

    def __len__(self) -> int:
        return len(self.skills)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def get(self, name: str) -> LibrarySkill:
        for s in self.skills:
            if s.name == name:
                return s
        raise KeyError(name)

    def listing(self) -> list[tuple[str, str]]:
        """(name, description) per skill, in file order: what the agent sees."""
        return [(s.name, s.description) for s in self.skills]

    @property
    def key(self) -> str:
        return content_id({"skills": [list(pair) for pair in self.listing()]}, length=16)

    @property
    def text_key(self) -> str:
        """The identity of every skill file's whole text: what an agent selector is given."""
        return content_id({"texts": [[s.name, s.text] for s in self.skills]}, length=16)

    def descriptions(self) -> dict[str, str]:
        return dict(self.listing())

    def with_description(self, name: str, description: str) -> Library:
        """The library with skill ``name``'s description replaced (DescriptionRefused when
        the new one breaks the limits or the file has no one-line description)."""
        out = []
        for s in self.skills:
            if s.name == name:
                doc = with_description(SkillDocument.parse(s.text), description)
                s = dataclasses.replace(s, text=doc.render().decode("utf-8"))
            out.append(s)
        return Library(tuple(out))


def _name(config: Config, text: str, fallback: str) -> str:
    try:
        fm = SkillDocument.parse(text).frontmatter or {}
    except SkillDocumentError:
        fm = {}
    given = fm.get("name")
    return given.strip() if isinstance(given, str) and given.strip() else fallback


def load_library(
    config: Config,
    repo: SkillRepo | None = None,
    rev: str | None = None,
    *,
    read: Callable[[Config], bytes | None] | None = None,
) -> Library:
    """Every skill of the config, read from the working tree (``rev`` None) or ``rev``;
    ``read``: each skill's file as that function gives it (``skillvc check`` reads a pull
    request's files its own way, ``rev`` then only names where)."""
    configs: Sequence[Config] = config.all_skills() if config.many else [config]
    skills: list[LibrarySkill] = []
    for c in configs:
        rel = c.skill_relpath
        if read is not None:
            raw = read(c)
        elif rev is None or repo is None:
            raw = c.skill_path.read_bytes() if c.skill_path.is_file() else None
        else:
            raw = repo.read_file(rel, rev) if repo.has_file(rel, rev) else None
        if raw is None:
            raise ConfigError(
                f"The skill file {rel} does not exist"
                + (f" at {rev}." if rev else " in the working tree."),
                hint="Check the skill paths in skillvc.toml.",
            )
        text = raw.decode("utf-8", errors="replace")
        broken = SkillDocument.parse(text).frontmatter_error
        if broken is not None:  # its description would read as none, and route nothing
            raise ConfigError(
                f"The frontmatter of {rel}"
                + (f" at {rev}" if rev else "")
                + f" cannot be read ({broken}), so neither can its description.",
                hint='Quote a description that holds ": " (description: "Plans: charges").',
            )
        table = c.skill_name or c.skill_names[0]
        skills.append(LibrarySkill(_name(c, text, table), table, rel, text))
    names = [s.name for s in skills]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"Two skills of the library are both named {dupes[0]!r}: an agent could not "
            "tell them apart.",
            hint="Give each skill its own frontmatter name.",
        )
    return Library(tuple(skills))
