"""``skillvc.toml``: the committed configuration of a skills repository.

Every hyperparameter has a paper default here (SkillOpt: 4 epochs, batch 40, minibatch 8,
learning rate 4 -> 2 with cosine decay) and can be overridden on the command line. Unknown keys
are errors, because a typo such as ``learning_rte`` silently ignored would train the wrong thing.

Many skills, one repository: ``[skills.<name>]`` tables (``path`` plus the keys of ``[skill]``,
and optional ``[skills.<name>.tasks|target|optimizer|train]`` overrides) instead of one
``[skill]``; the top-level sections are then every skill's defaults. ``Config.for_skill(name)``
is one skill's effective ``Config`` (what the rest of skillvc works on); the multi-skill config
itself names no skill, so asking it for ``skill_path`` is an error (exit 2), never SKILL.md.
A single ``[skill]`` file loads exactly as it always did.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.errors import ConfigError, NotInitialised, UnknownConfigName
from skillvc.core.suggest import config_line, did_you_mean
from skillvc.inputs import reader as inputs
from skillvc.secrets import looks_secret, register_names, register_values, url_passwords

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_FILE = "skillvc.toml"
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # "${NAME}" in [target] env
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HARNESSES = ("chat", "command", "claude-code", "codex")


@dataclass
class SkillConfig:
    path: str = "SKILL.md"
    max_bytes: int = 16000  # size budget: training refuses edits that grow the skill past it
    max_tokens: int = 5000  # cap on the skill sent to a model (estimated bytes/4; preflight.py)
    # Skill packages (skillvc.packages): a directory path, ``package = true`` or ``include``
    # makes the skill its directory's text files; the chat harness appends the files SKILL.md
    # links to, up to ``reference_bytes``.
    package: bool = False
    include: list[str] | None = None  # default: *.md and *.txt at any depth
    exclude: list[str] = field(default_factory=list)
    reference_bytes: int = 16000
    # What the optimizer sees of a package's files besides SKILL.md, in characters
    # (skillvc.packages.prompt: an equal share each, head and tail kept).
    optimizer_chars: int = 24000


@dataclass
class TasksConfig:
    train: str | None = None
    val: str | None = None
    test: str | None = None
    path: str | None = None  # one file with a split field (or split by ratio)
    skillopt_dir: str | None = None  # <dir>/{train,val,test}/items.json
    # Which of SkillOpt's environments skillopt_dir holds (its env.name: searchqa, docvqa, ...)
    # and the directory its items' files are under (images, documents, workbooks); see
    # skillvc.tasks.skillopt. The environment's verifier is then the default scorer.
    skillopt_env: str | None = None
    data_root: str | None = None
    split_field: str = "split"
    split_ratio: list[float] = field(default_factory=lambda: [0.6, 0.2, 0.2])
    split_seed: int = 0
    scorer: str = "exact"
    scorer_options: dict[str, Any] = field(default_factory=dict)
    input_template: str = "{input}"
    allow_overlap: bool = False
    # An interactive environment, "path/to/world.py:Class" (reset(item) -> str, step(action)
    # -> (observation, reward, done)); each target reply is an action (skillvc.models.tools).
    environment: str | None = None


@dataclass
class ToolsConfig:
    """``[tools]``: what a chat target may call while it works on an item (skillvc.models.tools)."""

    python: list[str] = field(default_factory=list)  # modules: each public typed function a tool
    mcp: list[list[str]] = field(default_factory=list)  # stdio MCP servers' argv, one per server
    code: bool = False  # a ``python`` tool that runs code in the rollout's scratch directory
    max_turns: int = 8  # model turns per rollout, the answer's included
    timeout_s: float = 30.0  # per tool call
    max_result_chars: int = 8000  # a tool result given back to the model is cut past this

    @property
    def enabled(self) -> bool:
        return bool(self.python or self.mcp or self.code)


@dataclass
class ModelConfig:
    model: str = "sim:support"
    harness: str = "chat"  # chat | command | claude-code | codex
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    azure: bool = False
    azure_endpoint: str | None = None
    api_version: str | None = None
    deployment: str | None = None
    # chat | responses: the OpenAI API an openai: model is called through (Chat Completions,
    # or the Responses API); recorded in snapshots and cache keys only when not "chat".
    api: str = "chat"
    timeout_s: float = 120.0
    max_retries: int = 5
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    # agent presets (harness = "claude-code" | "codex"; skillvc.models.agents)
    executable: str | None = None  # default: the preset's program on PATH
    files: list[str] = field(default_factory=list)  # setup files copied into its config dir
    args: list[str] = field(default_factory=list)  # extra arguments after the preset's own
    # command harness
    command: list[str] = field(default_factory=list)
    skill_install_path: str = ".claude/skills/{name}/SKILL.md"
    input_mode: str = "stdin"  # stdin | arg
    task_timeout_s: float = 300.0
    # The agent's environment beyond the allowlist; "${NAME}" reads a variable (see README).
    env: dict[str, str] = field(default_factory=dict)
    # sync | batch: "batch" sends each wave's fresh calls as one provider batch at half the
    # price (skillvc.models.batch); like the executor, not part of a run's identity.
    mode: str = "sync"
    batch_poll_s: float = 60.0  # seconds between status checks of a pending batch
    # Set from [tools] and [tasks] environment for the target (never keys of [target] itself):
    # the backend that runs the tool loop reads them from the role's own config.
    tools: ToolsConfig | None = None
    environment: str | None = None


@dataclass
class TrainConfig:
    epochs: int = 4
    batch_size: int = 40
    minibatch_size: int = 8
    learning_rate: int = 4
    min_learning_rate: int = 2
    lr_schedule: str = "cosine"  # cosine | linear | constant
    gate_metric: str = "hard"  # hard | soft | mixed
    samples: int = 1  # runs of each item per skill version; scores are their mean
    # > 0: the gain must also be significant (e.g. 0.9). Unset: 0.8 with attribution, else 0.
    gate_confidence: float | None = None
    # Edit-level credit: take a passing bundle apart and commit only the edits that earn their
    # place (training/attribution.py). False: the paper's bundle gate, exactly.
    attribution: bool = True
    # Attribution on a stochastic target ([target] temperature > 0): sets the rounds of fresh
    # val draws a test may run (an undecided gate up to 2 x (gate_rounds - 1) more, an
    # attribution test up to 2 x gate_rounds; pooled, training/significance.py).
    gate_rounds: int = 3
    workers: int = 16
    seed: int = 42
    buffer: bool = True
    slow_update: bool = True
    # The first epoch whose end runs the slow update. 1: every epoch end, the first comparing
    # the seed skill with epoch 1's. 2: SkillOpt's schedule (the paper's reference code), which
    # compares two epochs' final skills only, from the end of epoch 2.
    slow_update_from_epoch: int = 1
    slow_update_gate: bool = True
    meta_skill: bool = True
    early_stop: bool = True
    branch: str | None = None  # train on this branch (created from HEAD) instead of the current one
    budget_usd: float | None = None
    max_failure_rate: float = 0.25
    rejected_buffer_size: int = 20
    # Optimizer answers per reflection minibatch (sample index 0..n-1), deduplicated by
    # normalised edit text: one stubborn answer does not decide the step (issue 46).
    proposals: int = 1
    # skillvc's own proposal beside the optimizer's: worked examples of the expected answers'
    # form when most of a step's failures give the expected content in another form
    # (training/forms.py). The gate decides whether it helps, as for any edit. Recorded in a
    # run's config only when on, so a run from before it resumes without it.
    form_examples: bool = True
    # The same for a label task (a batch's expected answers are a few short labels, as a
    # queue or a category): worked examples of failures whose expected label the target missed
    # (training/forms.py ``label_edit``). Off by default until the simulator's label world
    # models worked examples (docs/benchmarks.md); recorded only when on, as form_examples.
    label_examples: bool = False
    train_description: bool = False  # edits may replace the frontmatter description too
    # Start the next stage's rollouts with the current skill while a candidate is gated; the
    # run's record is the same either way (see training/prefetch.py).
    speculate: bool = True
    # Where fresh target calls run (skillvc.models.executors). Not part of a run's identity: they
    # change where the work happens, never its result, so a run may resume on another one.
    executor: str = "threads"  # threads | ray
    ray_address: str | None = None  # None: RAY_ADDRESS, else a local cluster
    ray_num_cpus: float = 1.0  # per task
    ray_memory_mb: int | None = None  # per task
    ray_resource: str | None = None  # a custom resource each task needs one unit of
    ray_max_retries: int = 3  # resubmissions of a task whose worker or node was lost
    # "all": a candidate the gate accepts is also scored on every [targets.<name>] model and
    # rejected when any of them gets significantly worse (skillvc.matrix); "none": off.
    gate_targets: str = "none"
    gate_targets_alpha: float = 0.05  # one-sided sign test on paired per-item outcomes


EXECUTION_KEYS = (
    "executor",
    "ray_address",
    "ray_num_cpus",
    "ray_memory_mb",
    "ray_resource",
    "ray_max_retries",
)


@dataclass
class HarvestConfig:
    """[harvest]: its presence is the project's opt-in to learning from its agent sessions."""

    source: str = "claude-code"  # claude-code | codex
    dirs: list[str] = field(default_factory=list)  # transcript directories of this project
    tasks: str = "evals/harvested.jsonl"  # the reviewed, redacted task set (in the repo)
    min_support: int = 3  # sessions a task kind must recur in
    similarity: float = 0.6  # token-set Jaccard threshold of two normalised prompts
    budget_usd: float | None = None  # the nightly budget when --budget-usd is not given
    branch_prefix: str = "skillvc/sleep"


@dataclass
class RoutingConfig:
    """[routing]: the trigger set a library's routing is measured and trained on
    (skillvc.routing): which skill an agent loads for a prompt, or none."""

    train: str | None = None  # the splits, as in [tasks] (train/val/test, path, ...)
    val: str | None = None
    test: str | None = None
    path: str | None = None
    split_field: str = "split"
    split_ratio: list[float] = field(default_factory=lambda: [0.6, 0.2, 0.2])
    split_seed: int = 0
    allow_overlap: bool = False
    model: str | None = None  # the selector; None: [target] model (with [target]'s settings)
    train_body: bool = False  # train the bodies too, in alternating steps (--routing --body)
    tools: bool = True  # the pick through a select_skill tool where the provider has tools
    epochs: int | None = None  # None: [train] epochs
    batch_size: int | None = None  # None: [train] batch_size
    edits: int = 2  # description edits gated per step (each gated on its own)
    # skillvc's own edit beside the optimizer's: the skill that missed the most of a step's
    # prompts gains up to three of them, quoted (skillvc/routing/derive.py).
    quote_prompts: bool = True
    # One description a step asked of the optimizer for a single skill, from its own train
    # requests against its neighbours' (skillvc/routing/induce.py).
    induce: bool = True


@dataclass
class JudgeConfig:
    """[judge]: how well the ``judge`` scorer must agree with a person before it may gate
    training or ``skillvc check`` (skillvc.judge)."""

    labels: str | None = None  # a JSONL of items, outputs and a person's 0/1 or score
    min_accuracy: float = 0.8
    min_kappa: float = 0.6
    require_calibration: bool = False  # an uncalibrated judge may not gate either
    holdout: float = 0.3  # share of the labels held back when the rubric is trained


@dataclass
class Config:
    root: Path
    skill: SkillConfig = field(default_factory=SkillConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    target: ModelConfig = field(default_factory=ModelConfig)
    optimizer: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    harvest: HarvestConfig | None = None  # None: this project has not opted in to harvesting
    # More target models a skill is scored on (skillvc.matrix), by name: [targets.<name>]
    # tables with the keys of [target], each over [target]'s own values.
    targets: dict[str, ModelConfig] = field(default_factory=dict)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    routing: RoutingConfig | None = None  # None: no [routing] trigger set
    # Many skills: the raw [skills.<name>] tables and the top-level sections (their defaults);
    # skill_name is the table this Config was resolved for (None: a single-[skill] config).
    skills: dict[str, dict[str, Any]] = field(default_factory=dict)
    shared: dict[str, dict[str, Any]] = field(default_factory=dict)
    skill_name: str | None = None

    @property
    def many(self) -> bool:
        """True for a ``[skills.<name>]`` config (resolved for one skill or not)."""
        return bool(self.skills)

    @property
    def skill_names(self) -> list[str]:
        """The skills this config trains, in file order (one name for a ``[skill]`` config)."""
        if self.skills:
            return list(self.skills)
        return [Path(self.skill.path).parent.name or Path(self.skill.path).stem]

    def for_skill(self, name: str) -> Config:
        """The effective config of skill ``name`` (a ``[skills.<name>]`` table); a single-skill
        config is its own and only skill's."""
        if not self.skills:
            return self
        if name not in self.skills:
            from skillvc.core.errors import UnknownSkill

            raise UnknownSkill(
                f"{CONFIG_FILE} has no skill {name!r} (it lists {listing(self.skill_names)})."
            )
        return _resolve_skill(self, name)

    def all_skills(self) -> list[Config]:
        """Every skill's effective config, in file order."""
        return [self.for_skill(name) for name in self.skill_names]

    def require_named(self) -> None:
        """Raise SkillNotNamed (exit 2, naming the skills) for a many-skill config that was not
        resolved for one skill: a command that needs one skill got no ``--skill``."""
        if self.skills and self.skill_name is None:
            from skillvc.core.errors import SkillNotNamed

            raise SkillNotNamed(
                f"{CONFIG_FILE} lists {len(self.skills)} skills: {listing(self.skill_names)}.",
                hint=f"Name one with --skill NAME, e.g. --skill {self.skill_names[0]}.",
            )

    @property
    def skill_path(self) -> Path:
        """The skill file; PathOutsideRepo when [skill] path leaves the work tree."""
        from skillvc.core.paths import inside_repo

        self.require_named()  # never a default SKILL.md for a config that lists many
        where = f"[skills.{self.skill_name}] path" if self.skill_name else "[skill] path"
        path = inside_repo(self.root, self.skill.path, f"{where} in {CONFIG_FILE}")
        return path / "SKILL.md" if self._names_directory(path) else path

    def _names_directory(self, path: Path) -> bool:
        return self.skill.path.endswith(("/", "\\")) or path.is_dir()

    @property
    def package_dir(self) -> str | None:
        """The skill package's directory (posix, root-relative; "" = the root), or None for
        a single-file skill: [skill] path names a directory, or sets package or include."""
        from skillvc.core.paths import inside_repo

        self.require_named()
        # Checked as skill_path checks it, so either one refuses a bad path in the same words.
        where = f"[skills.{self.skill_name}] path" if self.skill_name else "[skill] path"
        raw = inside_repo(self.root, self.skill.path, f"{where} in {CONFIG_FILE}")
        if not (self._names_directory(raw) or self.skill.package or self.skill.include):
            return None
        parent = self.skill_path.parent.relative_to(self.root).as_posix()
        return "" if parent == "." else parent

    @property
    def skill_relpath(self) -> str:
        """[skill] path, checked and normalised (posix, relative to the root)."""
        return self.skill_path.relative_to(self.root).as_posix()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (recorded in ``run.started``); holds no secrets by design."""
        snapshot = {
            name: dataclasses.asdict(getattr(self, name))
            for name in ("skill", "tasks", "target", "optimizer", "train")
        } | {"prices": self.prices}
        for key in EXECUTION_KEYS:  # how a run executes is not what it computes
            snapshot["train"].pop(key, None)
        for role in ("target", "optimizer"):
            for key in MODE_KEYS:
                snapshot[role].pop(key, None)
            for key in _ATTACHED:  # recorded as [tools] and [tasks] environment
                snapshot[role].pop(key, None)
            _drop_defaults(snapshot[role])
        # Recorded only when set, so the run ids of runs without them stay as they were.
        if self.tools.enabled:
            snapshot["tools"] = dataclasses.asdict(self.tools)
        if snapshot["tasks"].get("environment") is None:
            snapshot["tasks"].pop("environment", None)
        if self.train.proposals == 1:  # recorded only when set: run ids stay as they were
            snapshot["train"].pop("proposals", None)
        for key in ("form_examples", "label_examples"):
            if not getattr(self.train, key):  # recorded only when on (resume.started_config)
                snapshot["train"].pop(key, None)
        if self.train.gate_targets == "none":
            # Off, the matrix gate is no part of what a run computes (run ids stay as before).
            for key in ("gate_targets", "gate_targets_alpha"):
                snapshot["train"].pop(key, None)
        else:
            snapshot["targets"] = {
                n: _drop_defaults(dataclasses.asdict(m)) for n, m in self.targets.items()
            }
        return snapshot


# ModelConfig keys added after runs were recorded, left out of a snapshot at their default so
# the run ids and "already trained" checks of runs without them stay as they were.
_NEW_MODEL_DEFAULTS = {"api": "chat"}


def _drop_defaults(model: dict[str, Any]) -> dict[str, Any]:
    for key, default in _NEW_MODEL_DEFAULTS.items():
        if model.get(key) == default:
            model.pop(key)
    return model


_SECTIONS = {
    "skill": SkillConfig,
    "tasks": TasksConfig,
    "target": ModelConfig,
    "optimizer": ModelConfig,
    "train": TrainConfig,
    "harvest": HarvestConfig,
    "judge": JudgeConfig,
    "tools": ToolsConfig,
    "routing": RoutingConfig,
}
# SkillOpt's environments (``[tasks] skillopt_env``) and the scorer each is verified by.
SKILLOPT_SCORERS = {
    "searchqa": "exact",
    "livemathematicianbench": "livemath",
    "livemath": "livemath",
    "docvqa": "anls",
    "officeqa": "officeqa",
    "spreadsheetbench": "spreadsheet",
    "alfworld": "reward",
}
_ATTACHED = ("tools", "environment")  # ModelConfig fields set from other sections, not by users


def _coerce(section: str, key: str, value: Any, default: Any, typ: Any) -> Any:
    """Check a TOML value against the dataclass field; ints are accepted where floats are."""
    expected = str(typ)
    ok = True
    if isinstance(default, bool) or expected == "bool":
        ok = isinstance(value, bool)
    elif expected.startswith("int"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected.startswith("float"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif expected.startswith("str"):
        ok = isinstance(value, str)
    elif expected.startswith("list"):
        ok = isinstance(value, list)
    elif expected.startswith("dict"):
        ok = isinstance(value, dict)
    if value is None and "None" in expected:
        ok = True
    if not ok:
        raise ConfigError(
            f"[{section}] {key} = {_show(value)} in {CONFIG_FILE} has the wrong type "
            f"(expected {_type_name(expected)})."
        )
    return value


def _build(section: str, cls: type, values: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    obj = cls()
    for key, value in values.items():
        if key not in fields:
            known = [k for k in fields if k not in _ATTACHED]
            raise UnknownConfigName(
                f"Unknown key '{key}' in [{section}] of {CONFIG_FILE}",
                hint=did_you_mean(
                    key, known, listed=f"Keys of [{section}]", then=f"Rename it in {CONFIG_FILE}."
                ),
                section=section,
                key=key,
            )
        setattr(obj, key, _coerce(section, key, value, getattr(obj, key), fields[key].type))
    return obj


def parse_config(text: str, root: Path) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE} is not valid TOML ({exc}).") from None
    try:
        return _parse(data, root)
    except UnknownConfigName as exc:  # name the line, which only the text knows
        raise exc.at(config_line(text, exc.section, exc.key)) from None


def _parse(data: dict[str, Any], root: Path) -> Config:
    config = Config(root=root)
    for section, values in data.items():
        if section == "skills":
            config.skills = _skill_tables(values)
            continue
        if section == "prices":
            config.prices = values
            continue
        if section == "targets":
            config.targets = _target_tables(values, data.get("target", {}))
            continue
        if section not in _SECTIONS:
            known = [*_SECTIONS, "prices", "skills", "targets"]
            raise UnknownConfigName(
                f"Unknown section [{section}] in {CONFIG_FILE}",
                hint=did_you_mean(
                    section, known, listed="Sections", then="Rename the table.", quote="[]"
                ),
                section=section,
            )
        if not isinstance(values, dict):
            raise ConfigError(f"'{section}' in {CONFIG_FILE} must be a table ([{section}]).")
        if section in ("target", "optimizer") and set(values) & set(_ATTACHED):
            key = sorted(set(values) & set(_ATTACHED))[0]
            where = "[tools]" if key == "tools" else "[tasks] environment"
            raise ConfigError(
                f"'{key}' is not a key of [{section}] in {CONFIG_FILE}.",
                hint=f"Set it in {where}: it applies to the target.",
            )
        if section == "tasks" and values.get("environment") and "scorer" not in values:
            values = {**values, "scorer": "reward"}  # an episode is scored by its reward
        if section == "tasks" and values.get("skillopt_env") and "scorer" not in values:
            env = str(values["skillopt_env"]).lower()  # an unknown name is refused on loading
            values = {**values, "scorer": SKILLOPT_SCORERS.get(env, "exact")}
        setattr(config, section, _build(section, _SECTIONS[section], values))
    attach_tools(config)
    if config.skills:
        if "path" in data.get("skill", {}):
            raise ConfigError(
                f"{CONFIG_FILE} has both [skill] path and [skills.<name>] tables.",
                hint="Move [skill] path into a [skills.<name>] table (one per skill).",
            )
        config.shared = {k: dict(v) for k, v in data.items() if k in _SECTIONS}
        config.all_skills()  # every skill's effective config is checked now, not at first use
    validate(config)
    return config


def attach_tools(config: Config) -> None:
    """Give the target's config what its backend needs to run the tool loop: ``[tools]`` and
    ``[tasks] environment`` (the backend is built from the role's config alone)."""
    config.target.tools = config.tools if config.tools.enabled else None
    config.target.environment = config.tasks.environment


# A skill's name is part of refs and tags (refs/skillvc/rejected/<skill>/...), so git's rules
# apply (and no dots: a dotted TOML key would nest tables); case is free.
SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SKILL_SUBSECTIONS = ("tasks", "target", "optimizer", "train")


def listing(names: list[str], shown: int = 5) -> str:
    """ "a, b and c" or "a, b, c, d, e and 12 more" (for one-sentence errors)."""
    if len(names) <= shown:
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return ", ".join(names[:shown]) + f" and {len(names) - shown} more"


def _skill_tables(values: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(values, dict) or not values:
        raise ConfigError(
            f"'skills' in {CONFIG_FILE} must hold one [skills.<name>] table per skill.",
            hint='For example: [skills.support] path = "skills/support/SKILL.md".',
        )
    for name, table in values.items():
        if not isinstance(table, dict):
            raise ConfigError(f"skills.{name} in {CONFIG_FILE} must be a table ([skills.{name}]).")
        if not SKILL_NAME.match(name):
            raise ConfigError(
                f"[skills.{name}] in {CONFIG_FILE}: a skill name is letters, digits, '-' and "
                "'_' (it names git refs and tags).",
                hint="Rename the table, e.g. after the skill's directory.",
            )
        if "path" not in table:
            raise ConfigError(f"[skills.{name}] in {CONFIG_FILE} has no path.")
    return values


def _resolve_skill(base: Config, name: str) -> Config:
    """Skill ``name``'s effective config: its table over the top-level sections."""
    table = base.skills[name]
    config = dataclasses.replace(base, skill_name=name)
    own = {k: v for k, v in table.items() if k not in _SKILL_SUBSECTIONS}
    config.skill = _build(f"skills.{name}", SkillConfig, base.shared.get("skill", {}) | own)
    for section in _SKILL_SUBSECTIONS:
        values = table.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(
                f"'skills.{name}.{section}' in {CONFIG_FILE} must be a table "
                f"([skills.{name}.{section}])."
            )
        _build(f"skills.{name}.{section}", _SECTIONS[section], values)  # names the table
        merged = base.shared.get(section, {}) | values
        setattr(config, section, _build(section, _SECTIONS[section], merged))
    attach_tools(config)
    validate(config)
    return config


MODE_KEYS = ("mode", "batch_poll_s")  # per role; like EXECUTION_KEYS, left out of snapshots


def with_execution(config: Config, current: Config) -> Config:
    """``config`` (a run's recorded snapshot) with ``current``'s execution settings: they are
    not recorded, so a resumed run executes the way skillvc.toml says now."""
    train = dataclasses.replace(
        config.train, **{k: getattr(current.train, k) for k in EXECUTION_KEYS}
    )
    roles = {
        role: dataclasses.replace(
            getattr(config, role), **{k: getattr(getattr(current, role), k) for k in MODE_KEYS}
        )
        for role in ("target", "optimizer")
    }
    return dataclasses.replace(config, train=train, **roles)


def parse_config_dict(data: dict[str, Any], root: Path) -> Config:
    """A Config from a snapshot (``Config.to_dict``), e.g. the one recorded in ``run.started``."""
    config = Config(root=root, prices=dict(data.get("prices", {})))
    for section, cls in _SECTIONS.items():
        if section in data:
            setattr(config, section, _build(section, cls, dict(data[section])))
    if "targets" in data:
        config.targets = _target_tables(data["targets"], {})
    attach_tools(config)
    validate(config)
    return config


def _unreadable_config(message: str) -> ConfigError:
    if "UTF" in message:
        return ConfigError(message, hint=f"Save {CONFIG_FILE} as UTF-8 (TOML files must be UTF-8).")
    return ConfigError(
        message, hint=f"Make {CONFIG_FILE} a regular text file (not a pipe, device or link to one)."
    )


def load_config(root: Path) -> Config:
    path = root / CONFIG_FILE
    if not path.exists():
        raise NotInitialised(f"No {CONFIG_FILE} in {root}.")
    if path.is_dir():
        raise ConfigError(
            f"{CONFIG_FILE} in {root} is a directory, not a file.",
            hint=f"Move the directory aside and run 'skillvc init' to write a {CONFIG_FILE}.",
        )
    # A pipe or device is refused by name, never waited on; a BOM (Notepad) is dropped.
    text = inputs.read_text(
        path, CONFIG_FILE, max_bytes=inputs.CONFIG_MAX_BYTES, error=_unreadable_config
    )
    return parse_config(text, root)


def override(config: Config, section: str, **values: Any) -> Config:
    """Apply command-line overrides (``None`` means "not given") to one section."""
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return config
    current = dataclasses.asdict(getattr(config, section))
    merged = _build(section, _SECTIONS[section], current | given)
    config = dataclasses.replace(config, **{section: merged})
    validate(config)
    return config


def _refuse_control_paths(config: Config) -> None:
    """Every path setting without control characters, checked when the config is read, so
    commands that read a path through git (check, at BASE) refuse it as eval and train do."""
    from skillvc.core.paths import refuse_control

    refuse_control(config.skill.path, f"[skill] path in {CONFIG_FILE}")
    for name, table in config.skills.items():
        path = table.get("path") if isinstance(table, dict) else None
        if isinstance(path, str):
            refuse_control(path, f"[skills.{name}] path in {CONFIG_FILE}")
    for key in ("train", "val", "test", "path", "skillopt_dir", "data_root"):
        value = getattr(config.tasks, key)
        if isinstance(value, str):
            refuse_control(value, f"[tasks] {key} in {CONFIG_FILE}")


def validate(config: Config) -> None:
    from skillvc.core.pricing import price_for

    for role in ("target", "optimizer"):
        _validate_env(role, getattr(config, role))
    _register_secrets(config)
    for model in config.prices:  # a malformed price fails now, not after the first paid call
        price_for(model, config.prices)
    check_ranges(config)
    _refuse_control_paths(config)
    t = config.train
    if t.lr_schedule not in ("cosine", "linear", "constant"):
        raise ConfigError(f"lr_schedule '{t.lr_schedule}' is not one of cosine, linear, constant.")
    if t.gate_metric not in ("hard", "soft", "mixed"):
        raise ConfigError(f"gate_metric '{t.gate_metric}' is not one of hard, soft, mixed.")
    if t.min_learning_rate > t.learning_rate:
        raise ConfigError("[train] min_learning_rate must not exceed learning_rate.")
    if t.executor not in ("threads", "ray"):
        raise ConfigError(f"[train] executor '{t.executor}' is not one of threads, ray.")
    _validate_acting(config)
    for role in ("target", "optimizer"):
        m: ModelConfig = getattr(config, role)
        if ":" not in m.model:
            raise ConfigError(
                f"[{role}] model '{m.model}' must name a backend, e.g. 'openai:gpt-4o-mini', "
                "'anthropic:claude-sonnet-4-5' or 'sim:support'."
            )
        if m.harness not in HARNESSES:
            raise ConfigError(
                f"[{role}] harness '{m.harness}' is not one of {', '.join(HARNESSES)}."
            )
        for name in ("files", "args"):
            if not all(isinstance(v, str) for v in getattr(m, name)):
                raise ConfigError(f"[{role}] {name} must be a list of strings.")
        if m.mode not in ("sync", "batch"):
            raise ConfigError(f"[{role}] mode '{m.mode}' is not one of sync, batch.")
        _validate_api(f"[{role}]", m)
        batchable = m.model.split(":", 1)[0] in ("openai", "anthropic")
        if m.mode == "batch" and (m.harness == "command" or m.azure or not batchable):
            raise ConfigError(
                f'[{role}] mode = "batch" needs an openai: or anthropic: model (not Azure, not '
                f"the command harness); this one is '{m.model}'.",
                hint='Set mode = "sync" for this model.',
            )
    validate_matrix(config)


def _validate_api(where: str, m: ModelConfig) -> None:
    """``api`` names an OpenAI API, and "responses" only where skillvc can send it."""
    if m.api not in ("chat", "responses"):
        raise ConfigError(f"{where} api '{m.api}' is not one of chat, responses.")
    if m.api == "chat":
        return
    if not m.model.startswith("openai:") or m.harness != "chat" or m.azure or m.mode != "sync":
        raise ConfigError(
            f'{where} api = "responses" needs an openai: model with the chat harness, not '
            f"Azure and not mode = \"batch\"; this one is '{m.model}'.",
            hint=f'Remove api = "responses" from {where}, or leave it "chat".',
        )


# Allowed ranges of every number in skillvc.toml, checked when the file loads and after each
# command-line override. (section, key): (low, high, low_open, high_open); None = unbounded.
# The upper bounds are far above any sensible setting: they exist to catch typos (an extra
# zero on epochs) before a run spends money, not to tune anything.
_MODEL_RANGES: dict[str, tuple[float | None, float | None, bool, bool]] = {
    "temperature": (0, 2, False, False),
    "max_tokens": (1, 1_000_000, False, False),
    "timeout_s": (0, 86_400, True, False),
    "max_retries": (0, 100, False, False),
    "batch_poll_s": (0, 86_400, True, False),
    "requests_per_minute": (0, 1_000_000, True, False),
    "tokens_per_minute": (0, 1_000_000_000, True, False),
    "task_timeout_s": (0, 86_400, True, False),
}
_RANGES: dict[tuple[str, str], tuple[float | None, float | None, bool, bool]] = {
    ("skill", "max_bytes"): (1, 10_000_000, False, False),
    ("skill", "max_tokens"): (1, 10_000_000, False, False),
    ("skill", "reference_bytes"): (0, 10_000_000, False, False),
    ("skill", "optimizer_chars"): (0, 10_000_000, False, False),
    ("train", "epochs"): (1, 1000, False, False),
    ("train", "slow_update_from_epoch"): (1, 1000, False, False),
    ("train", "batch_size"): (1, 100_000, False, False),
    ("train", "minibatch_size"): (1, 10_000, False, False),
    ("train", "learning_rate"): (1, 1000, False, False),
    ("train", "min_learning_rate"): (1, 1000, False, False),
    ("train", "samples"): (1, 100, False, False),
    ("train", "workers"): (1, 1024, False, False),
    ("train", "gate_confidence"): (0, 1, False, True),
    ("train", "gate_rounds"): (1, 100, False, False),
    ("train", "budget_usd"): (0, None, True, False),
    ("train", "max_failure_rate"): (0, 1, False, False),
    ("train", "rejected_buffer_size"): (0, 10_000, False, False),
    ("train", "proposals"): (1, 16, False, False),
    ("train", "ray_num_cpus"): (0, 1024, False, False),
    ("train", "ray_memory_mb"): (1, 10_000_000, False, False),
    ("train", "ray_max_retries"): (0, 100, False, False),
    **{
        (role, key): bounds
        for role in ("target", "optimizer")
        for key, bounds in _MODEL_RANGES.items()
    },
}


def _describe(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """The allowed range in words, e.g. "between 1 and 1000" or "more than 0"."""
    if high is None:
        return f"{'more than' if low_open else 'at least'} {_show(low)}"
    if low_open or high_open:
        return (
            f"{'more than' if low_open else 'at least'} {_show(low)} and "
            f"{'below' if high_open else 'at most'} {_show(high)}"
        )
    return f"between {_show(low)} and {_show(high)}"


def check_ranges(config: Config) -> None:
    """Every number is finite and inside its range; ``split_ratio`` is 2 or 3 usable weights.

    Raises one ``ConfigError`` naming the key, the value and the allowed range.
    """
    for (section, key), (low, high, low_open, high_open) in _RANGES.items():
        value = getattr(getattr(config, section), key)
        if value is None:
            continue  # optional keys (max_tokens, budget_usd, ...) mean "not set"
        ok = isinstance(value, (int, float)) and math.isfinite(value)
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value < high if high_open else value <= high
        if not ok:
            raise ConfigError(
                f"[{section}] {key} = {_show(value)} is out of range: it must be "
                f"{_describe(low, high, low_open, high_open)}.",
                hint=f"Set [{section}] {key} in {CONFIG_FILE} (or the matching command-line "
                "option) to a value in that range.",
            )
    ratio = config.tasks.split_ratio
    good = (
        isinstance(ratio, list)
        and 2 <= len(ratio) <= 3
        and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
            for w in ratio
        )
        and sum(ratio) > 0
    )
    if not good:
        raise ConfigError(
            f"[tasks] split_ratio = {_show(ratio)} must be a list of 2 or 3 finite, "
            "non-negative numbers with a positive sum.",
            hint="Use e.g. split_ratio = [0.6, 0.2, 0.2] in [tasks] of skillvc.toml.",
        )


def _show_repr(value: Any) -> str:
    """``repr(value)``, or only its type when it looks like a credential (see ``_show``)."""
    return _show(value) if isinstance(value, str) and looks_secret(value) else repr(value)


def _show(value: Any) -> str:
    """A value as the user wrote it in TOML: nan, inf, 0.5, "x" (not Python's repr); a string
    that looks like a credential is named by its type only (a config mistake must not print a
    key on the terminal, in CI logs or in ``doctor``)."""
    if isinstance(value, str) and looks_secret(value):
        return "a string that looks like a credential (not shown)"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # -10 reads back as the user wrote it, not as -10.0
    return repr(value)


_TYPE_NAMES = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "list": "a list",
    "dict": "a table",
}


def _type_name(expected: str) -> str:
    """ "int | None" -> "an integer"; "list[str]" -> "a list" (None means "leave the key out")."""
    base = expected.split("|")[0].split("[")[0].strip()
    return _TYPE_NAMES.get(base, expected)


def _validate_env(role: str, m: ModelConfig) -> None:
    if m.api_key_env is not None and not _ENV_NAME.match(m.api_key_env):
        # A key pasted where its variable's name belongs: say so without echoing it.
        raise ConfigError(
            f"[{role}] api_key_env in {CONFIG_FILE} must name an environment variable; it holds "
            f"{_show(m.api_key_env)}.",
            hint=f"Put the key in a variable (export MY_KEY=...) and write api_key_env = "
            f'"MY_KEY" under [{role}]; if that was a real key, rotate it.',
        )
    if m.env and m.harness == "chat":
        raise ConfigError(
            f"[{role}] env applies only to agent harnesses (command, claude-code, codex)."
        )
    for name, value in m.env.items():
        if not _ENV_NAME.match(name) or not isinstance(value, str):
            raise ConfigError(
                f"[{role}] env {name} = {_show_repr(value)} must be a variable name with a "
                "string value.",
                hint='For example: env = { ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}" }.',
            )


def _register_secrets(config: Config) -> None:
    """Tell the scrubber which of this config's settings lead to secrets (skillvc.secrets)."""
    for m in (config.target, config.optimizer):
        refs = [r for v in m.env.values() for r in ENV_REFERENCE.findall(v)]
        register_names([m.api_key_env, *refs])
        register_values(url_passwords(m.base_url or "") + url_passwords(m.azure_endpoint or ""))


# -- [targets] and [judge] (skillvc.matrix, skillvc.judge) ----------------------------------


def _target_tables(values: Any, target: Any) -> dict[str, ModelConfig]:
    """``[targets.<name>]`` tables, each over ``[target]``'s values (a table may name only a
    model)."""
    if not isinstance(values, dict):
        raise ConfigError(
            f"'targets' in {CONFIG_FILE} must hold one [targets.<name>] table per model.",
            hint='For example: [targets.small] model = "openai:gpt-4o-mini".',
        )
    base = dict(target) if isinstance(target, dict) else {}
    tables: dict[str, ModelConfig] = {}
    for name, table in values.items():
        if not isinstance(table, dict):
            raise ConfigError(
                f"targets.{name} in {CONFIG_FILE} must be a table ([targets.{name}])."
            )
        if not SKILL_NAME.match(name) or name == "target":
            raise ConfigError(
                f"[targets.{name}] in {CONFIG_FILE}: a target's name is letters, digits, '-' "
                "and '_', and not 'target' (the name of [target] in tables).",
                hint="Rename the table, e.g. after the model.",
            )
        if "model" not in table:
            raise ConfigError(f"[targets.{name}] in {CONFIG_FILE} has no model.")
        tables[name] = _build(f"targets.{name}", ModelConfig, base | table)
    return tables


def _validate_acting(config: Config) -> None:
    """[tools] and [tasks] environment: where the tool loop can run, one sentence each."""
    acting = "[tools]" if config.tools.enabled else "[tasks] environment"
    if not (config.tools.enabled or config.tasks.environment):
        return
    if config.target.harness != "chat":
        raise ConfigError(
            f'{acting} needs harness = "chat" in [target] (it is "{config.target.harness}").',
            hint="An agent CLI (command, claude-code, codex) brings its own tools; remove "
            f"{acting} or use the chat harness.",
        )
    if config.target.mode == "batch":
        raise ConfigError(
            f'{acting} needs mode = "sync" in [target]: a tool-using rollout takes several '
            "turns, and a provider batch answers one.",
            hint='Set mode = "sync" in [target].',
        )
    if config.train.executor != "threads":
        raise ConfigError(
            f'{acting} runs with executor = "threads" only: the tools run in this process.',
            hint='Set executor = "threads" in [train] (the default).',
        )
    if config.tools.max_turns < 1 or config.tools.timeout_s <= 0:
        raise ConfigError("[tools] max_turns must be at least 1 and timeout_s above 0.")


def validate_matrix(config: Config) -> None:
    """[targets.<name>] models, [train] gate_targets and [judge] thresholds, one sentence each."""
    for name, m in config.targets.items():
        where = f"[targets.{name}]"
        register_names([m.api_key_env])
        register_values(url_passwords(m.base_url or "") + url_passwords(m.azure_endpoint or ""))
        if ":" not in m.model:
            raise ConfigError(
                f"{where} model '{m.model}' must name a backend, e.g. 'openai:gpt-4o-mini'."
            )
        if m.harness not in HARNESSES:
            raise ConfigError(
                f"{where} harness '{m.harness}' is not one of {', '.join(HARNESSES)}."
            )
        if m.mode != "sync":
            raise ConfigError(
                f'{where} mode = "{m.mode}": the matrix scores its models with mode = "sync" only.',
                hint=f'Set mode = "sync" in {where}.',
            )
        _validate_api(where, m)
        _validate_env(f"targets.{name}", m)
        for key, (low, high, low_open, high_open) in _MODEL_RANGES.items():
            value = getattr(m, key)
            ok = value is None or (
                math.isfinite(value)
                and (value > low if low_open else value >= (low or 0))
                and (high is None or value <= high)
            )
            if not ok:
                raise ConfigError(
                    f"{where} {key} = {_show(value)} is out of range: it must be "
                    f"{_describe(low, high, low_open, high_open)}."
                )
    t = config.train
    if t.gate_targets not in ("none", "all"):
        raise ConfigError(f"[train] gate_targets '{t.gate_targets}' is not one of none, all.")
    if t.gate_targets == "all" and not config.targets:
        raise ConfigError(
            '[train] gate_targets = "all" needs the models to gate on, and no '
            "[targets.<name>] table is configured.",
            hint='Add e.g. [targets.small] model = "openai:gpt-4o-mini" to skillvc.toml.',
        )
    if not (0 < t.gate_targets_alpha < 0.5):
        raise ConfigError(
            f"[train] gate_targets_alpha = {_show(t.gate_targets_alpha)} is out of range: it "
            "must be more than 0 and below 0.5."
        )
    j = config.judge
    for key in ("min_accuracy", "min_kappa"):
        value = getattr(j, key)
        if not (math.isfinite(value) and -1 <= value <= 1):
            raise ConfigError(
                f"[judge] {key} = {_show(value)} is out of range: it must be between -1 and 1."
            )
    if not (math.isfinite(j.holdout) and 0 < j.holdout < 1):
        raise ConfigError(
            f"[judge] holdout = {_show(j.holdout)} is out of range: it must be more than 0 "
            "and below 1."
        )
