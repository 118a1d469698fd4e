"""A skills repository that skillvc manages: the git repo, ``skillvc.toml`` and ``.skillvc/``.

Layout of ``.skillvc/`` (local state, git-ignored):

    .skillvc/events.db       the event log (SQLite, WAL; -wal and -shm files beside it)
    .skillvc/train.lock      the one-writer lock of a training run (holds the pid)

``init`` is idempotent: re-running it changes nothing that exists and says so. In a repository
with several SKILL.md files it lists them all (``[skills.<name>]`` tables); ``init --skill X``
on such a config adds X's table when it is not listed yet.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillvc.core.config import CONFIG_FILE, Config, load_config
from skillvc.core.errors import (
    ConfigError,
    NotAGitRepo,
    NotInitialised,
    SkillDocumentError,
    SkillFileMissing,
)
from skillvc.core.paths import inside_repo
from skillvc.core.resources import read_text
from skillvc.core.store import EventStore, open_store
from skillvc.inputs import reader as inputs
from skillvc.skill.skills import skill_file

if TYPE_CHECKING:  # GitPython takes ~60 ms to import; read-only commands never need it
    from skillvc.repo.skillrepo import SkillRepo

STATE_DIR = ".skillvc"
DB_NAME = "events.db"
DEFAULT_TARGET = "openai:gpt-5.4-mini"
DEFAULT_OPTIMIZER = "anthropic:claude-sonnet-4-5"
_SKIP_DIRS = {".git", STATE_DIR, "node_modules", ".venv", "venv", "__pycache__"}


@dataclass
class Workspace:
    root: Path
    config: Config
    _repo: SkillRepo | None = None

    @property
    def repo(self) -> SkillRepo:
        """The git repository (opened on first use: read-only commands never need GitPython)."""
        if self._repo is None:
            from skillvc.repo.skillrepo import SkillRepo

            self._repo = SkillRepo(self.root)
        return self._repo

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def db_path(self) -> Path:
        return self.state_dir / DB_NAME

    @property
    def skill_relpath(self) -> str:
        return self.config.skill_relpath  # checked: never outside the work tree

    def store(self, *, create: bool = False) -> EventStore:
        """Open the event log; ``create`` makes ``.skillvc/`` when missing (fresh CI clones)."""
        if self.state_dir.exists() and not self.state_dir.is_dir():
            raise NotInitialised(
                f"{STATE_DIR} in {self.root} is a file, not skillvc's state directory.",
                hint=f"Move the file {STATE_DIR} aside, then run 'skillvc init' to recreate it.",
            )
        if not self.db_path.exists():
            if not create:
                raise NotInitialised(f"No event log at {STATE_DIR}/{DB_NAME} in {self.root}.")
            self.state_dir.mkdir(exist_ok=True)
        return open_store(self.db_path)

    def require_skill(self) -> Path:
        """The skill file's path; SkillFileMissing when it does not exist, SkillDocumentError
        naming what it is when it is not a regular file (a pipe, a device, a directory)."""
        path = self.config.skill_path
        what = f"The skill file {self.skill_relpath}"
        if not inputs.check_regular(path, what, SkillDocumentError):
            raise SkillFileMissing(f"{what} does not exist.")
        return path

    def read_skill(self) -> bytes:
        """The skill file's bytes, read as every input file is (regular file, size cap)."""
        path = self.require_skill()
        return inputs.read_bytes(
            path,
            f"The skill file {self.skill_relpath}",
            max_bytes=inputs.SKILL_MAX_BYTES,
            error=SkillDocumentError,
            missing=SkillFileMissing,
        )


def find_root(path: str | Path = ".") -> Path:
    """The working-tree root above ``path`` (where ``.git`` is), without starting git."""
    start = Path(path).resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    raise NotAGitRepo(f"{start} is not inside a git repository.")


def open_workspace(
    path: str | Path = ".", skill: str | None = None, *, any_skill: bool = False
) -> Workspace:
    """The workspace containing ``path``; raises NotAGitRepo or NotInitialised.

    Its config is the effective one of the skill ``skill`` names (``--skill``; implied when
    skillvc.toml has one). ``any_skill``: a command that needs no skill (runs, show) gets the
    whole config of a many-skill repository instead of an error asking for ``--skill``.
    """
    from skillvc.skill.skills import select_skill

    root = find_root(path)
    config = load_config(root)
    if skill is None and any_skill:
        return Workspace(root=root, config=config)
    return Workspace(root=root, config=select_skill(config, skill))


@dataclass
class InitResult:
    root: Path
    skill_path: str
    git_initialised: bool = False
    config_written: bool = False
    state_created: bool = False
    gitignore_updated: bool = False
    notes: list[str] = field(default_factory=list)
    skills: list[tuple[str, str]] = field(default_factory=list)  # (name, path) of a many config
    skill_added: str | None = None  # the table `init --skill` added to a many-skill config
    package: bool = False  # skill_path is a skill package's directory (SKILL.md links files)

    @property
    def changed(self) -> bool:
        return any(
            (
                self.git_initialised,
                self.config_written,
                self.state_created,
                self.gitignore_updated,
                self.skill_added,
            )
        )


def find_skill(root: Path) -> str:
    """The one ``SKILL.md`` under ``root`` (relative posix path), or a clear error."""
    found = find_skills(root)
    if len(found) > 1:
        raise ConfigError(
            f"Found {len(found)} SKILL.md files ({', '.join(found[:5])}).",
            hint="Choose the one to train with --skill PATH.",
        )
    return found[0]


def find_skills(root: Path) -> list[str]:
    """Every ``SKILL.md`` under ``root`` (relative posix paths, sorted); at least one."""
    found = []
    for directory, subdirs, files in os.walk(root):
        # Prune in place so big trees such as node_modules or .venv are never walked.
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
        if "SKILL.md" in files:
            found.append((Path(directory) / "SKILL.md").relative_to(root).as_posix())
    found.sort()
    if not found:
        raise SkillFileMissing(
            f"No SKILL.md found in {root}.", hint="Name the skill file with --skill PATH."
        )
    return found


def init_workspace(
    path: str | Path = ".",
    *,
    skill: str | None = None,
    target_model: str | None = None,
    optimizer_model: str | None = None,
    train_file: str | None = None,
    val_file: str | None = None,
    test_file: str | None = None,
    scorer: str = "exact",
    seed: int = 42,
) -> InitResult:
    """Set up skillvc in a skills repo (initialising git if needed). Safe to re-run."""
    from skillvc.repo.skillrepo import SkillRepo, ensure_gitignore

    root = Path(path).resolve()
    repo = SkillRepo.find(root)
    git_initialised = repo is None
    if repo is None:
        if not (root / CONFIG_FILE).exists():
            # Find the skill before `git init`, so a directory without one is left untouched.
            _skill_relpath(root, skill) if skill else find_skills(root)
        repo = SkillRepo.init(root)
    root = repo.root
    config_path = root / CONFIG_FILE

    # What both rendered configs (one skill, or a table each) take from the options.
    shared: dict[str, Any] = {
        "target_model": target_model or DEFAULT_TARGET,
        "optimizer_model": optimizer_model or DEFAULT_OPTIMIZER,
        "train_file": train_file,
        "val_file": val_file,
        "test_file": test_file,
        "scorer": scorer,
        "seed": seed,
    }
    if config_path.exists() and load_config(root).many:
        result = InitResult(root=root, skill_path="", git_initialised=git_initialised)
        result.notes.append(_add_skill(root, skill, result) if skill else _already(root))
    elif config_path.exists():
        config = load_config(root)
        skill_rel = config.skill.path
        given = _given_relpath(root, skill) if skill else None
        if given is not None and given not in (Path(skill_rel).as_posix(), skill_file(config)):
            raise ConfigError(
                f"{CONFIG_FILE} already trains {skill_rel}, not {skill}.",
                hint=f"Edit [skill] path in {CONFIG_FILE} to change it.",
            )
        result = InitResult(root=root, skill_path=skill_rel, git_initialised=git_initialised)
        result.notes.append(f"{CONFIG_FILE} already exists; left as it is.")
    elif not skill and len(all_found := find_skills(root)) > 1:
        skills = skill_tables(root, all_found)
        _write_config(root, render_many_config(skills=skills, **shared))
        result = InitResult(
            root=root, skill_path="", git_initialised=git_initialised, config_written=True
        )
        result.skills = [(s.name, s.path) for s in skills]
        result.notes.extend(s.line() for s in skills)
        result.notes.extend(s.note for s in skills if s.note and not s.links)
        result.notes.extend(unready_notes(root, all_found))
    else:
        skill_rel = _skill_relpath(root, skill) if skill else find_skill(root)
        if not (train_file or val_file or test_file):
            train_file, val_file, test_file = find_task_files(root, skill_rel)
        for option, given in (("--train", train_file), ("--val", val_file), ("--test", test_file)):
            if given:  # refused now, not at the first eval of the config written with it
                inside_repo(root, given, option)
        shared |= {"train_file": train_file, "val_file": val_file, "test_file": test_file}
        choice = skill_path_for(root, skill_rel)
        _write_config(
            root, render_config(skill_path=choice.path, package=bool(choice.links), **shared)
        )
        result = InitResult(
            root=root,
            skill_path=choice.path,
            git_initialised=git_initialised,
            config_written=True,
            package=bool(choice.links),
        )
        if choice.note:
            result.notes.append(choice.note)
        if train_file or val_file:
            found = ", ".join(f for f in (train_file, val_file, test_file) if f)
            result.notes.append(f"Task files: {found} (see [tasks] in {CONFIG_FILE}).")
        else:
            result.notes.append(
                f"No task files found: set [tasks] train and val in {CONFIG_FILE} before "
                "training (evals/{train,val,test}.jsonl, also in the skill's own directory, "
                "are found automatically)."
            )
            result.notes.extend(_skillopt_notes(root))
        result.notes.extend(unready_notes(root, [skill_rel]))

    state = root / STATE_DIR
    if not (state / DB_NAME).exists():
        state.mkdir(exist_ok=True)
        open_store(state / DB_NAME).close()
        result.state_created = True
    result.gitignore_updated = ensure_gitignore(root, f"/{STATE_DIR}/")
    if not result.changed:
        result.notes.append("Already initialised; nothing changed.")
    return result


TASK_DIRS = ("evals", "tasks", "data", ".")
TASK_SUFFIXES = (".jsonl", ".json", ".csv")


def unready_notes(root: Path, skill_rels: Sequence[str]) -> list[str]:
    """What ``init`` says of a skill file that breaks its format rules, which ``doctor`` and
    training refuse (``review.doctor.check_skill``): the first problem and how to fix it (a
    SKILL.md without frontmatter: the lines to add). A skill over its size budget passes (only
    growth past it is refused)."""
    from skillvc.skill.formats import RULE_SIZE, RULE_SKILL_FRONTMATTER, check_bytes

    notes = []
    for rel in skill_rels:
        raw = inputs.read_bytes(root / rel, rel, max_bytes=inputs.SKILL_MAX_BYTES)
        problems = [p for p in check_bytes(rel, raw) if p.rule != RULE_SIZE]
        if not problems:
            continue
        head = (
            "Fix before training ('skillvc doctor' and 'skillvc train' refuse it): "
            f"{problems[0].message}"
        )
        if problems[0].rule == RULE_SKILL_FRONTMATTER and not raw.lstrip().startswith(b"---"):
            name = Path(rel).parent.name or "my-skill"
            notes.append(
                "\n".join(
                    [
                        head,
                        f"Add these lines at the top of {rel} (the name is its directory's):",
                        "---",
                        f"name: {name}",
                        "description: What the skill does and when to use it.",
                        "---",
                    ]
                )
            )
        else:
            notes.append(f"{head}\n'skillvc validate {rel}' lists every problem.")
    return notes


def find_task_files(
    root: Path, skill: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """``train``/``val``/``test`` task files in a conventional place, as relative paths; None
    for a split without one. ``validation`` and ``dev`` count as val. The skill's own
    ``evals/`` (``skills/<name>/evals/`` for ``skills/<name>/SKILL.md``) comes first, as the
    skill's own; then evals/, tasks/, data/ and the top of the repository."""
    own = [(Path(skill).parent / "evals").as_posix()] if skill else []
    for directory in [d for d in own if d != "evals"] + list(TASK_DIRS):
        found: dict[str, str] = {}
        for split, names in (
            ("train", ("train",)),
            ("val", ("val", "validation", "dev")),
            ("test", ("test",)),
        ):
            for name in names:
                for suffix in TASK_SUFFIXES:
                    path = root / directory / f"{name}{suffix}"
                    if split not in found and path.is_file():
                        found[split] = path.relative_to(root).as_posix()
        if "train" in found or "val" in found:
            return found.get("train"), found.get("val"), found.get("test")
    return None, None, None


def _skillopt_notes(root: Path) -> list[str]:
    """A note per SkillOpt split directory (<dir>/{train,val}/items.json) under data/ or the
    top: the skillopt_dir line to add, or, for an ID manifest, why it cannot be used yet."""
    from skillvc.core.errors import TaskSetError
    from skillvc.tasks.taskset import refuse_id_manifest

    notes = []
    for parent in (root / "data", root):
        if not parent.is_dir():
            continue
        for directory in sorted(parent.iterdir()):
            if not (directory / "train" / "items.json").is_file():
                continue
            rel = directory.relative_to(root).as_posix()
            try:
                refuse_id_manifest(root, Path(rel))
            except TaskSetError as exc:
                notes.append(f"{exc.message} {exc.hint}")
                continue
            notes.append(f'SkillOpt split directory {rel}: set skillopt_dir = "{rel}" in [tasks].')
    return notes


def _given_relpath(root: Path, skill: str) -> str:
    """``--skill`` as a path relative to the root, however the user wrote it (when it exists)."""
    try:
        return _skill_relpath(root, skill)
    except (SkillFileMissing, ConfigError):
        return Path(skill).as_posix()


def _skill_relpath(root: Path, skill: str) -> str:
    candidate = Path(skill)
    full = candidate if candidate.is_absolute() else (Path.cwd() / candidate)
    if not full.exists():
        full = root / candidate
    if full.is_dir() and (full / "SKILL.md").is_file():
        full = full / "SKILL.md"  # `--skill skills/support` names the skill's directory
    if not full.is_file():
        raise SkillFileMissing(
            f"The skill file {skill} does not exist.",
            hint="Pass an existing file (or its directory) to --skill.",
        )
    try:
        rel = full.resolve().relative_to(root).as_posix()
    except ValueError:
        raise ConfigError(
            f"The skill file {skill} is outside the repository {root}.",
            hint="Move it into the repository first.",
        ) from None
    inside_repo(root, rel, "--skill")  # never a skill under .git/ or .skillvc/
    return rel


def render_config(
    *,
    skill_path: str,
    target_model: str,
    optimizer_model: str,
    train_file: str | None = None,
    val_file: str | None = None,
    test_file: str | None = None,
    scorer: str = "exact",
    seed: int = 42,
    package: bool = False,
) -> str:
    """The commented ``skillvc.toml`` written by ``init`` (templates/skillvc.toml);
    ``package``: ``skill_path`` is a skill package's directory."""
    lines = []
    for split, value in (("train", train_file), ("val", val_file), ("test", test_file)):
        lines.append(
            f'{split} = "{_toml(value)}"' if value else f'# {split} = "evals/{split}.jsonl"'
        )
    text = string.Template(read_text("templates", "skillvc.toml")).substitute(
        skill_path=_toml(skill_path),
        target_model=_toml(target_model),
        optimizer_model=_toml(optimizer_model),
        tasks_block="\n".join(lines),
        scorer=_toml(scorer),
        seed=int(seed),
    )
    return text.replace(_FILE_COMMENT, _PACKAGE_COMMENT, 1) if package else text


_FILE_COMMENT = "# The Markdown skill document being trained (relative to the repository root).\n"
_PACKAGE_COMMENT = (
    "# The skill package being trained: SKILL.md and the *.md and *.txt files of its directory\n"
    "# (relative to the repository root; include = [...] and exclude = [...] change the files).\n"
)


def _toml(value: str) -> str:
    """``value`` escaped for the inside of a TOML basic ("...") string.

    A quote or backslash in a path (legal in file names) would otherwise break the file.
    JSON's string escapes are all valid TOML escapes.
    """
    return json.dumps(value, ensure_ascii=False)[1:-1]


# -- many skills ------------------------------------------------------------------------------


@dataclass
class SkillTable:
    """One ``[skills.<name>]`` table ``init`` writes: the skill and the task files found for it."""

    name: str
    path: str  # the SKILL.md path, or a skill package's directory (``links`` not empty)
    train: str | None = None
    val: str | None = None
    test: str | None = None
    links: list[str] = field(default_factory=list)  # the files SKILL.md links (a package)
    note: str | None = None  # why a SKILL.md that links files stays one file

    def line(self) -> str:
        found = ", ".join(f for f in (self.train, self.val, self.test) if f)
        tasks = f"tasks {found}" if found else "no task files found: set its [skills.*.tasks]"
        if self.links:
            from skillvc.core.config import listing

            tasks = f"a skill package, SKILL.md links {listing(self.links, 3)}; {tasks}"
        return f"  {self.name}: {self.path} ({tasks})"

    def toml(self) -> str:
        lines = [f"\n[skills.{self.name}]", f'path = "{_toml(self.path)}"']
        splits = [
            (k, v) for k, v in (("train", self.train), ("val", self.val), ("test", self.test))
        ]
        if self.train or self.val:
            lines.append(f"\n[skills.{self.name}.tasks]")
            lines += [f'{k} = "{_toml(v)}"' for k, v in splits if v]
        return "\n".join(lines) + "\n"


def skill_tables(root: Path, paths: list[str]) -> list[SkillTable]:
    """A table per skill: named by its frontmatter name (else its directory), made unique."""
    from skillvc.core.config import SKILL_NAME
    from skillvc.skill.skills import frontmatter_name

    tables: list[SkillTable] = []
    taken: set[str] = set()
    for rel in paths:
        directory = Path(rel).parent
        name = frontmatter_name(root / rel)
        if name is None or not SKILL_NAME.match(name):
            name = re.sub(r"[^A-Za-z0-9_-]+", "-", directory.name or "skill").strip("-") or "skill"
        unique, n = name, 2
        while unique in taken:
            unique, n = f"{name}-{n}", n + 1
        taken.add(unique)
        train, val, test = skill_task_files(root, rel, unique)
        others = [p for p in paths if p != rel]
        choice = skill_path_for(root, rel, others)
        tables.append(SkillTable(unique, choice.path, train, val, test, choice.links, choice.note))
    return tables


@dataclass(frozen=True)
class SkillPathChoice:
    """What ``init`` writes as a skill's path, and why."""

    path: str  # the skill package's directory (``links`` not empty) or the SKILL.md path
    links: list[str]  # the files of its directory SKILL.md links to (empty: one file)
    note: str | None  # the sentence init prints about it (None: nothing to say)


def skill_path_for(root: Path, skill_rel: str, others: Sequence[str] = ()) -> SkillPathChoice:
    """A SKILL.md that links files of its directory (``references/forms.md``) is a skill
    package: init writes the directory. Otherwise, and for a SKILL.md at the top of the
    repository or in a directory that holds ``others`` (other skills), it writes the SKILL.md
    path: as a package those would take in every text file of the repository, or of the
    other skills. A SKILL.md that links nothing gets exactly the config it always did."""
    from skillvc.core.config import listing
    from skillvc.packages.links import directory_links

    directory = Path(skill_rel).parent.as_posix()
    if Path(skill_rel).name != "SKILL.md":
        return SkillPathChoice(skill_rel, [], None)
    if directory == ".":
        links = directory_links(root)
        if not links:
            return SkillPathChoice(skill_rel, [], None)
        note = (
            f"{skill_rel} links other files ({listing(links, 3)}), but it is at the top of the "
            "repository, so it is trained as one file; move it into its own directory to "
            "train it as a skill package."
        )
        return SkillPathChoice(skill_rel, [], note)
    links = directory_links(root / directory)
    if not links:
        return SkillPathChoice(skill_rel, [], None)
    if any(other.startswith(f"{directory}/") for other in others):
        note = (
            f"{skill_rel} links files of its directory, but {directory} holds other skills "
            "too, so it is trained as one file."
        )
        return SkillPathChoice(skill_rel, [], note)
    note = (
        f"{skill_rel} links files of its directory ({listing(links, 3)}), so the skill is "
        f'a package: path = "{directory}" trains SKILL.md with the *.md and *.txt files of '
        "its directory."
    )
    return SkillPathChoice(directory, links, note)


def skill_task_files(root: Path, skill_rel: str, name: str) -> tuple[str | None, ...]:
    """Task files of one skill: beside it (``<skill dir>/evals/``, ...) or ``evals/<name>/``."""
    directory = root / Path(skill_rel).parent
    for base in (directory, root / "evals" / name, root / "evals" / directory.name):
        if base.is_dir() and base != root:
            found = find_task_files(base)
            if found[0] or found[1]:
                return tuple(
                    None if f is None else (base / f).relative_to(root).as_posix() for f in found
                )
    return None, None, None


def render_many_config(
    *,
    skills: list[SkillTable],
    target_model: str,
    optimizer_model: str,
    train_file: str | None = None,
    val_file: str | None = None,
    test_file: str | None = None,
    scorer: str = "exact",
    seed: int = 42,
) -> str:
    """The ``skillvc.toml`` of a repository with many skills (templates/skillvc-many.toml);
    ``--train/--val/--test`` given to init become every skill's shared [tasks] files."""
    text = string.Template(read_text("templates", "skillvc-many.toml")).substitute(
        target_model=_toml(target_model),
        optimizer_model=_toml(optimizer_model),
        scorer=_toml(scorer),
        seed=int(seed),
        skills_block="".join(s.toml() for s in skills),
    )
    shared = [(k, v) for k, v in (("train", train_file), ("val", val_file), ("test", test_file))]
    given = "".join(f'{k} = "{_toml(v)}"\n' for k, v in shared if v)
    return text.replace("[tasks]\n", "[tasks]\n" + given, 1) if given else text


def _write_config(root: Path, text: str) -> None:
    """Write skillvc.toml and load it back; a file that does not load is removed again."""
    config_path = root / CONFIG_FILE
    config_path.write_text(text, encoding="utf-8")
    try:
        load_config(root)
    except BaseException:
        config_path.unlink(missing_ok=True)  # a re-run would keep a broken file "as it is"
        raise


def _already(root: Path) -> str:
    names = load_config(root).skill_names
    return f"{CONFIG_FILE} already exists (listing {len(names)} skills); left as it is."


def _add_skill(root: Path, skill: str, result: InitResult) -> str:
    """``init --skill X`` on a many-skill config: X is listed already, or its table is added."""
    from skillvc.core.config import listing
    from skillvc.skill.skills import find_skill_name

    config = load_config(root)
    name = find_skill_name(config, skill)
    if name is not None:
        return f"{CONFIG_FILE} already lists skill {name} ({config.skills[name]['path']})."
    rel = _skill_relpath(root, skill)
    table = skill_tables(root, [rel])[0]
    taken = set(config.skill_names)
    base, n = table.name, 2
    while table.name in taken:
        table.name, n = f"{base}-{n}", n + 1
    config_path = root / CONFIG_FILE
    before = config_path.read_bytes()
    config_path.write_bytes(before.rstrip(b"\n") + b"\n" + table.toml().encode("utf-8"))
    try:
        load_config(root)
    except BaseException:
        config_path.write_bytes(before)  # nothing half-added
        raise
    result.skill_added = table.name
    names = [*config.skill_names, table.name]
    added = (
        f"Added skill {table.name} ({table.path}) to {CONFIG_FILE}; it now lists {listing(names)}."
    )
    return f"{added} {table.note}" if table.note else added
