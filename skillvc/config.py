"""``skillvc.toml``: the committed configuration of a skills repository.

Every hyperparameter has a paper default here (SkillOpt: 4 epochs, batch 40, minibatch 8,
learning rate 4 -> 2 with cosine decay) and can be overridden on the command line. Unknown keys
are errors, because a typo such as ``learning_rte`` silently ignored would train the wrong thing.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.errors import ConfigError, NotInitialised

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_FILE = "skillvc.toml"
HARNESSES = ("chat", "command", "claude-code", "codex")


@dataclass
class SkillConfig:
    path: str = "SKILL.md"
    max_bytes: int = 16000  # size budget: training refuses edits that grow the skill past it


@dataclass
class TasksConfig:
    train: str | None = None
    val: str | None = None
    test: str | None = None
    path: str | None = None  # one file with a split field (or split by ratio)
    skillopt_dir: str | None = None  # <dir>/{train,val,test}/items.json
    split_field: str = "split"
    split_ratio: list[float] = field(default_factory=lambda: [0.6, 0.2, 0.2])
    split_seed: int = 0
    scorer: str = "exact"
    scorer_options: dict[str, Any] = field(default_factory=dict)
    input_template: str = "{input}"
    allow_overlap: bool = False


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
    timeout_s: float = 120.0
    max_retries: int = 5
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    # agent presets (harness = "claude-code" | "codex"; skillvc.agents)
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
    gate_confidence: float = 0.0  # > 0: the gain must also be significant (e.g. 0.9)
    workers: int = 16
    seed: int = 42
    buffer: bool = True
    slow_update: bool = True
    slow_update_gate: bool = True
    meta_skill: bool = True
    early_stop: bool = True
    branch: str | None = None  # train on this branch (created from HEAD) instead of the current one
    budget_usd: float | None = None
    max_failure_rate: float = 0.25
    rejected_buffer_size: int = 20
    train_description: bool = False  # edits may replace the frontmatter description too


@dataclass
class Config:
    root: Path
    skill: SkillConfig = field(default_factory=SkillConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    target: ModelConfig = field(default_factory=ModelConfig)
    optimizer: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def skill_path(self) -> Path:
        return self.root / self.skill.path

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot (recorded in ``run.started``); holds no secrets by design."""
        return {
            name: dataclasses.asdict(getattr(self, name))
            for name in ("skill", "tasks", "target", "optimizer", "train")
        } | {"prices": self.prices}


_SECTIONS = {
    "skill": SkillConfig,
    "tasks": TasksConfig,
    "target": ModelConfig,
    "optimizer": ModelConfig,
    "train": TrainConfig,
}


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
            f"[{section}] {key} = {value!r} in {CONFIG_FILE} has the wrong type (expected {typ})."
        )
    return value


def _build(section: str, cls: type, values: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    obj = cls()
    for key, value in values.items():
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(
                f"Unknown key '{key}' in [{section}] of {CONFIG_FILE} (known keys: {known})."
            )
        setattr(obj, key, _coerce(section, key, value, getattr(obj, key), fields[key].type))
    return obj


def parse_config(text: str, root: Path) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE} is not valid TOML ({exc}).") from None
    config = Config(root=root)
    for section, values in data.items():
        if section == "prices":
            config.prices = values
            continue
        if section not in _SECTIONS:
            raise ConfigError(
                f"Unknown section [{section}] in {CONFIG_FILE} "
                f"(known: {', '.join([*_SECTIONS, 'prices'])})."
            )
        if not isinstance(values, dict):
            raise ConfigError(f"'{section}' in {CONFIG_FILE} must be a table ([{section}]).")
        setattr(config, section, _build(section, _SECTIONS[section], values))
    validate(config)
    return config


def parse_config_dict(data: dict[str, Any], root: Path) -> Config:
    """A Config from a snapshot (``Config.to_dict``), e.g. the one recorded in ``run.started``."""
    config = Config(root=root, prices=dict(data.get("prices", {})))
    for section, cls in _SECTIONS.items():
        if section in data:
            setattr(config, section, _build(section, cls, dict(data[section])))
    validate(config)
    return config


def load_config(root: Path) -> Config:
    path = root / CONFIG_FILE
    if not path.exists():
        raise NotInitialised(f"No {CONFIG_FILE} in {root}.")
    return parse_config(path.read_text(encoding="utf-8"), root)


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


def validate(config: Config) -> None:
    from skillvc.backends.pricing import price_for

    for model in config.prices:  # a malformed price fails now, not after the first paid call
        price_for(model, config.prices)
    t = config.train
    if t.lr_schedule not in ("cosine", "linear", "constant"):
        raise ConfigError(f"lr_schedule '{t.lr_schedule}' is not one of cosine, linear, constant.")
    if t.gate_metric not in ("hard", "soft", "mixed"):
        raise ConfigError(f"gate_metric '{t.gate_metric}' is not one of hard, soft, mixed.")
    for name in ("epochs", "batch_size", "minibatch_size", "workers", "samples"):
        if getattr(t, name) < 1:
            raise ConfigError(f"[train] {name} must be at least 1.")
    if not 0 <= t.gate_confidence < 1:
        raise ConfigError("[train] gate_confidence must be at least 0 and below 1 (e.g. 0.9).")
    if t.learning_rate < 1 or t.min_learning_rate < 1:
        raise ConfigError("[train] learning_rate and min_learning_rate must be at least 1 edit.")
    if t.min_learning_rate > t.learning_rate:
        raise ConfigError("[train] min_learning_rate must not exceed learning_rate.")
    if t.rejected_buffer_size < 0:
        raise ConfigError("[train] rejected_buffer_size must be at least 0.")
    if not 0 <= t.max_failure_rate <= 1:
        raise ConfigError("[train] max_failure_rate must be between 0 and 1 (e.g. 0.25).")
    if t.budget_usd is not None and not t.budget_usd > 0:  # also refuses NaN
        raise ConfigError("[train] budget_usd must be more than 0 (USD).")
    if config.skill.max_bytes < 1:
        raise ConfigError("[skill] max_bytes must be at least 1.")
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
        for key, value in m.env.items():
            if not isinstance(value, str):
                raise ConfigError(
                    f'[{role}.env] {key} = {value!r} must be a string ("${{NAME}}" for a secret).'
                )
        for name in ("files", "args"):
            if not all(isinstance(v, str) for v in getattr(m, name)):
                raise ConfigError(f"[{role}] {name} must be a list of strings.")
