"""A SkillOpt YAML config translated into a commented ``skillvc.toml``.

``load`` reads a config as SkillOpt's ``scripts/train.py --config`` does: ``_base_`` files merged
under it (a child's value wins, sections merge key by key), then ``key=value`` overrides
(``section.key=value``, or a bare key: one of SkillOpt's flat names such as ``batch_size``, else
an ``env`` key), values cast as SkillOpt casts them. A legacy flat config (every key at the top)
is read into the same sections.

``translate`` sorts every setting of the merged config into exactly one of three kinds, so none
is dropped silently:

- translated: a skillvc key carries it (``[train] batch_size = 40``);
- implied: its value is what skillvc does anyway (``accumulation = 1``, a blank setting, a
  setting of a backend the config does not use);
- untranslated: skillvc has no equivalent. These are listed in the file and by the CLI on
  stderr, grouped by reason.

The translation adds SkillOpt's recipe where skillvc's defaults differ from it: the paper's
bundle gate (``attribution = false``) and its slow-update schedule
(``slow_update_from_epoch = 2``). A secret (an API key in the YAML) is never copied: the file
names the environment variable to export instead, and listings show ``(set, not copied)``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.errors import SkillOptError

SECTIONS = ("model", "train", "gradient", "optimizer", "evaluation", "env")

# SkillOpt's flat (legacy and command-line) names of its structured keys, for flat configs and
# bare ``key=value`` overrides. Keys not listed here are env keys, as SkillOpt passes them.
FLAT_NAMES = {
    "model_backend": "model.backend",
    "optimizer_model": "model.optimizer",
    "target_model": "model.target",
    "num_epochs": "train.num_epochs",
    "edit_budget": "optimizer.learning_rate",
    "min_edit_budget": "optimizer.min_learning_rate",
    "meta_edit_budget": "optimizer.meta_learning_rate",
    "env": "env.name",
}
_STRUCTURED = (
    "model.optimizer_backend model.target_backend model.reasoning_effort "
    "train.train_size train.steps_per_epoch train.batch_size train.accumulation train.seed "
    "gradient.minibatch_size gradient.merge_batch_size gradient.analyst_workers "
    "gradient.failure_only optimizer.lr_scheduler optimizer.lr_control_mode "
    "optimizer.skill_update_mode optimizer.use_slow_update optimizer.slow_update_samples "
    "optimizer.slow_update_gate_with_selection optimizer.longitudinal_pair_policy "
    "optimizer.use_meta_skill evaluation.use_gate evaluation.gate_metric "
    "evaluation.gate_mixed_weight evaluation.sel_env_num evaluation.test_env_num "
    "evaluation.eval_test env.skill_init env.out_root"
)
for _dotted in _STRUCTURED.split():
    FLAT_NAMES.setdefault(_dotted.split(".", 1)[1], _dotted)

SECRET_WORDS = ("api_key", "secret", "password", "credential")


# -- reading ------------------------------------------------------------------------------------


def cast(text: str) -> Any:
    """A command-line value as SkillOpt casts it: true/yes, false/no, int, float, else text."""
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _structured(data: Mapping[str, Any]) -> dict[str, Any]:
    """The config in sections; top-level (flat) keys moved into theirs."""
    out: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            out[key] = _merge(out.get(key, {}), value)
        else:
            flat[key] = value
    for key, value in flat.items():
        section, name = FLAT_NAMES.get(key, f"env.{key}").split(".", 1)
        out.setdefault(section, {})
        out[section].setdefault(name, value)  # a section's own key wins in the same file
    return out


def _read_yaml(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    import yaml

    path = path.resolve()
    if path in seen:
        chain = " -> ".join(p.name for p in (*seen, path))
        raise SkillOptError(f"The SkillOpt config {path} inherits from itself ({chain}).")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        what = f" (the _base_ of {seen[-1]})" if seen else ""
        raise SkillOptError(f"No SkillOpt config at {path}{what}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillOptError(f"Cannot read the SkillOpt config {path}: {exc}.") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise SkillOptError(f"The SkillOpt config {path} is not valid YAML: {exc}.") from None
    if not isinstance(data, dict):
        raise SkillOptError(f"The SkillOpt config {path} is not a mapping of sections.")
    bases = data.pop("_base_", None)
    merged: dict[str, Any] = {}
    for base in [bases] if isinstance(bases, str) else list(bases or []):
        merged = _merge(merged, _read_yaml(path.parent / str(base), (*seen, path)))
    return _merge(merged, _structured(data))


def apply_override(config: dict[str, Any], item: str) -> None:
    """One ``section.key=value`` or ``key=value`` override, in place."""
    key, sep, text = item.partition("=")
    key = key.strip().lstrip("-")
    if not sep or not key:
        raise SkillOptError(
            f"The override {item!r} is not key=value.",
            hint="Write it as SkillOpt's --cfg-options take it: train.batch_size=20.",
        )
    if "." in key:
        section, name = key.split(".", 1)
    else:
        section, name = FLAT_NAMES.get(key, f"env.{key}").split(".", 1)
    config.setdefault(section, {})
    if not isinstance(config[section], dict):
        config[section] = {}
    config[section][name] = cast(text)


def load(path: str | Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The merged config of ``path`` (its ``_base_`` chain, then ``overrides``), in sections."""
    config = _read_yaml(Path(path), ())
    for item in overrides:
        apply_override(config, item)
    return config


# -- translating --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting of the SkillOpt config and what became of it."""

    key: str  # dotted: train.batch_size
    value: Any
    kind: str  # translated | implied | untranslated
    why: str  # where it went (translated), or why not

    def shown(self) -> str:
        return f"{self.key} = {show_value(self.key, self.value)}"


@dataclass
class Translation:
    """``skillvc.toml``'s text and where every SkillOpt setting went."""

    text: str
    settings: list[Setting]
    notes: list[str] = field(default_factory=list)  # what to do before training

    def of(self, kind: str) -> list[Setting]:
        return [s for s in self.settings if s.kind == kind]

    @property
    def untranslated(self) -> list[Setting]:
        return self.of("untranslated")

    def untranslated_lines(self) -> list[str]:
        """The untranslated settings, those of one reason on one line."""
        return [
            f"{', '.join(s.shown() for s in group)}: {why}"
            for why, group in _grouped(self.untranslated)
        ]


def _grouped(settings: Sequence[Setting]) -> list[tuple[str, list[Setting]]]:
    groups: dict[str, list[Setting]] = {}
    for s in settings:
        groups.setdefault(s.why, []).append(s)
    return list(groups.items())


def secret(key: str) -> bool:
    name = key.rsplit(".", 1)[-1].lower()
    return any(word in name for word in SECRET_WORDS) or name == "token" or name.endswith("_token")


def show_value(key: str, value: Any) -> str:
    """A value as a listing shows it; a secret's never (``(set, not copied)``)."""
    if secret(key) and value not in (None, ""):
        return "(set, not copied)"
    return toml_value(value) if value is not None else "null"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


def _blank(value: Any) -> bool:
    return value is None or value == "" or value == []


# The backends of SkillOpt's two roles and the settings that belong to each.
BACKEND_PREFIXES = {
    "openai_chat": (
        "azure_openai_",
        "optimizer_azure_openai_",
        "target_azure_openai_",
        "azure_endpoint",
        "azure_api_",
    ),
    "codex_exec": ("codex_exec_", "codex_trace_to_optimizer"),
    "claude_code_exec": ("claude_code_exec_",),
    "cursor_exec": ("cursor_exec_",),
    "copilot_exec": ("copilot_exec_",),
    "copilot_chat": ("copilot_chat_",),
    "qwen_chat": ("qwen_chat_", "optimizer_qwen_chat_", "target_qwen_chat_"),
    "minimax_chat": ("minimax_", "optimizer_minimax_", "target_minimax_"),
}
# ``model.backend`` names a default for both roles (SkillOpt's trainer: the optimizer stays on
# openai_chat unless the backend is a chat backend for both).
BACKEND_DEFAULTS = {
    "claude": ("claude_chat", "claude_chat"),
    "claude_chat": ("claude_chat", "claude_chat"),
    "codex": ("openai_chat", "codex_exec"),
    "codex_exec": ("openai_chat", "codex_exec"),
    "claude_code_exec": ("openai_chat", "claude_code_exec"),
    "qwen": ("openai_chat", "qwen_chat"),
    "qwen_chat": ("openai_chat", "qwen_chat"),
    "minimax": ("openai_chat", "minimax_chat"),
    "minimax_chat": ("openai_chat", "minimax_chat"),
    "copilot": ("copilot_chat", "copilot_chat"),
    "copilot_chat": ("copilot_chat", "copilot_chat"),
    "copilot_exec": ("openai_chat", "copilot_exec"),
    "cursor": ("openai_chat", "cursor_exec"),
    "cursor_exec": ("openai_chat", "cursor_exec"),
}
NO_BACKEND = {
    "copilot_chat": "GitHub Copilot CLI as a model backend has no equivalent in skillvc",
    "copilot_exec": "GitHub Copilot CLI as an agent has no preset in skillvc (the command "
    "harness can run it: docs/agents.md)",
    "cursor_exec": "Cursor's agent CLI has no preset in skillvc (the command harness can run "
    "it: docs/agents.md)",
}

# Per environment: [tasks] and [tools] lines beyond skillopt_dir (skillvc.tasks.skillopt).
ENV_TASKS: dict[str, dict[str, Any]] = {
    "alfworld": {"environment": "skillvc.tasks.skillopt.alfworld:ALFWorld"},
}
ENV_TOOLS: dict[str, dict[str, Any]] = {
    "officeqa": {"python": ["skillvc.tasks.skillopt.tools.officeqa"]},
    "spreadsheetbench": {"python": ["skillvc.tasks.skillopt.tools.spreadsheet"], "code": True},
}
ENV_ALIASES = {"livemath": "livemathematicianbench"}
# Each environment's verifier (skillvc.tasks.skillopt.scorers), the default with skillopt_env.
ENV_SCORERS = {
    "searchqa": "exact",
    "livemathematicianbench": "livemath",
    "docvqa": "anls",
    "officeqa": "officeqa",
    "spreadsheetbench": "spreadsheet",
    "alfworld": "reward",
}


class _Builder:
    """Collects the TOML tables and the fate of every setting."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.tables: dict[str, dict[str, tuple[Any, str]]] = {}
        self.settings: dict[str, Setting] = {}
        self.notes: list[str] = []

    def get(self, dotted: str, default: Any = None) -> Any:
        section, key = dotted.split(".", 1)
        value = self.config.get(section, {})
        return value.get(key, default) if isinstance(value, dict) else default

    def has(self, dotted: str) -> bool:
        section, key = dotted.split(".", 1)
        value = self.config.get(section, {})
        return isinstance(value, dict) and key in value

    def put(self, table: str, key: str, value: Any, comment: str = "") -> None:
        self.tables.setdefault(table, {})[key] = (value, comment)

    def mark(self, dotted: str, kind: str, why: str) -> None:
        if self.has(dotted) and dotted not in self.settings:
            self.settings[dotted] = Setting(dotted, self.get(dotted), kind, why)

    def to(self, dotted: str, table: str, key: str, comment: str = "", convert: Any = None) -> None:
        """Carry ``dotted`` to ``[table] key`` when it is set (a blank one is implied)."""
        if not self.has(dotted):
            return
        value = self.get(dotted)
        if _blank(value):
            self.mark(dotted, "implied", "blank: nothing to carry over")
            return
        self.put(table, key, convert(value) if convert else value, comment)
        self.mark(dotted, "translated", f"[{table}] {key}")

    def when(self, dotted: str, expected: Any, why_same: str, why_not: str) -> None:
        """Implied when the value is ``expected`` (what skillvc does), else untranslated."""
        if not self.has(dotted):
            return
        if expected is None and _blank(self.get(dotted)):
            self.mark(dotted, "implied", "blank: nothing to carry over")
            return
        same = self.get(dotted) == expected or (
            isinstance(expected, tuple) and self.get(dotted) in expected
        )
        self.mark(dotted, "implied" if same else "untranslated", why_same if same else why_not)


def translate(
    config: Mapping[str, Any], *, skill: str | None = None, source: str = ""
) -> Translation:
    """The ``skillvc.toml`` that runs ``config``'s recipe (see the module docstring).

    ``skill``: the skill file's path in the repository (default: the config's
    ``env.skill_init``, as written). ``source``: the config's path, for the file's header."""
    b = _Builder(config)
    _models(b)
    _schedule(b)
    _environment(b, skill)
    for section in SECTIONS:  # whatever no rule above knows
        values = config.get(section, {})
        for key in values if isinstance(values, dict) else ():
            value = values[key]
            if _blank(value):
                b.mark(f"{section}.{key}", "implied", "blank: nothing to carry over")
            else:
                b.mark(f"{section}.{key}", "untranslated", "no equivalent in skillvc")
    for key, value in config.items():
        if key not in SECTIONS:
            b.settings.setdefault(
                key, Setting(key, value, "untranslated", "not a section SkillOpt reads")
            )
    settings = list(b.settings.values())
    translation = Translation("", settings, list(dict.fromkeys(b.notes)))
    translation.text = _render(b, translation, source)
    return translation


def _models(b: _Builder) -> None:
    backend = str(b.get("model.backend") or "azure_openai")
    defaults = BACKEND_DEFAULTS.get(backend, ("openai_chat", "openai_chat"))
    roles = {
        "optimizer": str(b.get("model.optimizer_backend") or defaults[0]),
        "target": str(b.get("model.target_backend") or defaults[1]),
    }
    in_use = set(roles.values())
    b.mark(
        "model.backend",
        "translated",
        f"the roles' backends: optimizer {roles['optimizer']}, target {roles['target']}",
    )
    for role, kind in roles.items():
        b.mark(f"model.{role}_backend", "translated", f"[{role}] model and harness")
        name = str(b.get(f"model.{role}") or "")
        _role(b, role, kind, name)
        b.mark(f"model.{role}", "translated", f"[{role}] model")
    for suffix in (
        "endpoint", "api_version", "api_key", "auth_mode", "ad_scope", "managed_identity_client_id"
    ):  # fmt: skip
        if "openai_chat" in in_use:
            b.mark(
                f"model.azure_openai_{suffix}",
                "implied",
                "each role's own setting (optimizer_..., target_...) is used instead",
            )
    effort = b.get("model.reasoning_effort")
    if _blank(effort):
        b.mark("model.reasoning_effort", "implied", "blank: the models' default effort")
    else:
        for role, kind in roles.items():
            if kind in ("openai_chat", "claude_chat", "qwen_chat", "minimax_chat"):
                b.put(role, "reasoning_effort", effort)
        b.mark("model.reasoning_effort", "translated", "[target] and [optimizer] reasoning_effort")
    for key in ("rewrite_reasoning_effort", "rewrite_max_completion_tokens"):
        if b.get("optimizer.skill_update_mode", "patch") == "patch":
            b.mark(f"model.{key}", "implied", "used by SkillOpt's rewrite modes only (patch here)")
        else:
            b.mark(f"model.{key}", "untranslated", "skillvc has no rewrite mode")
    # Settings of backends no role uses.
    for key in list(b.config.get("model", {})):
        owner = next(
            (k for k, prefixes in BACKEND_PREFIXES.items() if key.startswith(prefixes)), None
        )
        if owner is not None and owner not in in_use:
            b.mark(f"model.{key}", "implied", f"the {owner} backend, which no role uses here")


def _role(b: _Builder, role: str, kind: str, name: str) -> None:
    def own(suffix: str) -> str:
        """The role's own setting when it is set, else the shared one (SkillOpt's rule)."""
        mine = f"model.{role}_{suffix}"
        return mine if not _blank(b.get(mine)) else f"model.{suffix}"

    if kind == "openai_chat":
        b.put(role, "model", f"openai:{name}")
        endpoint_key = own("azure_openai_endpoint")
        if _blank(b.get(endpoint_key)) and not _blank(b.get("model.azure_endpoint")):
            endpoint_key = "model.azure_endpoint"
        endpoint = b.get(endpoint_key)
        mode = str(b.get(own("azure_openai_auth_mode")) or "").lower()
        if mode == "openai_compatible":
            b.to(endpoint_key, role, "base_url", "SkillOpt's openai_compatible endpoint")
            b.mark(own("azure_openai_auth_mode"), "translated", f"[{role}] base_url (not Azure)")
            _key(b, own("azure_openai_api_key"), role, "OPENAI_API_KEY")
            for suffix in ("api_version", "ad_scope", "managed_identity_client_id"):
                b.mark(own(f"azure_openai_{suffix}"), "implied", "not used with a base_url")
        else:
            b.put(role, "azure", True, "SkillOpt's openai_chat backend is Azure OpenAI")
            if _blank(endpoint):
                b.notes.append(
                    "Azure OpenAI without an endpoint in the config: export "
                    "AZURE_OPENAI_ENDPOINT (or set azure_endpoint) before training."
                )
            else:
                b.to(endpoint_key, role, "azure_endpoint")
            version_key = own("azure_openai_api_version")
            if _blank(b.get(version_key)) and not _blank(b.get("model.azure_api_version")):
                version_key = "model.azure_api_version"
            b.to(version_key, role, "api_version")
            _key(b, own("azure_openai_api_key"), role, "AZURE_OPENAI_API_KEY")
            if mode in ("", "api_key", "key"):
                b.mark(own("azure_openai_auth_mode"), "implied", "skillvc signs in with an API key")
            else:
                b.mark(
                    own("azure_openai_auth_mode"),
                    "untranslated",
                    "skillvc signs in to Azure with an API key (AZURE_OPENAI_API_KEY), not "
                    "Entra ID (azure_cli, managed identity)",
                )
            if mode in ("", "api_key", "key"):
                b.notes.append(
                    "Azure OpenAI: skillvc signs in with an API key; export "
                    "AZURE_OPENAI_API_KEY (SkillOpt's default was Entra ID through the Azure CLI)."
                )
            for suffix in ("ad_scope", "managed_identity_client_id"):
                key = own(f"azure_openai_{suffix}")
                if _blank(b.get(key)) or suffix == "ad_scope" and mode in ("", "api_key", "key"):
                    b.mark(key, "implied", "Entra ID sign-in only, not used with an API key")
                else:
                    b.mark(key, "untranslated", "skillvc has no Entra ID sign-in")
    elif kind == "claude_chat":
        b.put(role, "model", f"anthropic:{name}")
    elif kind in ("codex_exec", "claude_code_exec"):
        preset = "codex" if kind == "codex_exec" else "claude-code"
        b.put(role, "model", f"openai:{name}" if kind == "codex_exec" else f"anthropic:{name}")
        b.put(role, "harness", preset, f"SkillOpt's {kind} backend")
        b.to(f"model.{kind}_path", role, "executable")
        prefix = "codex_exec_" if kind == "codex_exec" else "claude_code_exec_"
        for key in list(b.config.get("model", {})):
            if key.startswith(prefix) and key != f"{kind}_path":
                if _blank(b.get(f"model.{key}")):
                    b.mark(f"model.{key}", "implied", "blank: the preset's default")
                else:
                    b.mark(
                        f"model.{key}",
                        "untranslated",
                        f"the {preset} preset runs the CLI its own way: pass flags in "
                        f"[{role}] args (docs/agents.md)",
                    )
        b.mark(
            "model.codex_trace_to_optimizer",
            "implied",
            "skillvc shows an agent's trajectory to the optimizer",
        )
    elif kind == "qwen_chat":
        b.put(role, "model", f"openai:{name}")
        b.to(own("qwen_chat_base_url"), role, "base_url")
        b.to(own("qwen_chat_temperature"), role, "temperature", convert=float)
        b.to(own("qwen_chat_max_tokens"), role, "max_tokens", convert=int)
        b.to(own("qwen_chat_timeout_seconds"), role, "timeout_s", convert=float)
        _key(b, own("qwen_chat_api_key"), role, "OPENAI_API_KEY")
    elif kind == "minimax_chat":
        model = str(b.get("model.minimax_model") or name)
        b.put(role, "model", f"openai:{model}")
        b.mark("model.minimax_model", "translated", f"[{role}] model")
        b.to(own("minimax_base_url"), role, "base_url")
        b.to("model.minimax_temperature", role, "temperature", convert=float)
        b.to("model.minimax_max_tokens", role, "max_tokens", convert=int)
        _key(b, own("minimax_api_key"), role, "OPENAI_API_KEY")
        if _blank(b.get(own("minimax_base_url"))):
            b.notes.append(
                f"[{role}] MiniMax: set base_url to MiniMax's OpenAI-compatible /v1 address."
            )
    else:
        b.put(role, "model", f"openai:{name}")
        why = NO_BACKEND.get(kind, f"SkillOpt's {kind} backend has no equivalent in skillvc")
        b.mark(f"model.{role}_backend", "untranslated", why)
        b.notes.append(f"[{role}] ran on SkillOpt's {kind} backend: {why}; choose a model.")


def _key(b: _Builder, dotted: str, role: str, variable: str) -> None:
    if _blank(b.get(dotted)):
        b.mark(dotted, "implied", f"blank: the key comes from ${variable}")
        return
    b.put(role, "api_key_env", variable, "the key itself is never copied: export it")
    b.mark(dotted, "translated", f"[{role}] api_key_env = {variable!r} (export the key there)")
    b.notes.append(
        f"{dotted} holds a key, which skillvc.toml never holds: export {variable} instead."
    )


def _schedule(b: _Builder) -> None:
    b.to("train.num_epochs", "train", "epochs")
    accumulation = b.get("train.accumulation", 1) or 1
    if b.has("train.batch_size"):
        size = int(b.get("train.batch_size")) * int(accumulation)
        note = (
            f"{b.get('train.batch_size')} x accumulation {accumulation}" if accumulation > 1 else ""
        )
        b.put("train", "batch_size", size, note)
        b.mark("train.batch_size", "translated", "[train] batch_size")
    if accumulation == 1:
        b.mark("train.accumulation", "implied", "one batch per step, as skillvc steps")
    else:
        b.mark("train.accumulation", "translated", "[train] batch_size (x accumulation)")
    b.when(
        "train.train_size",
        0,
        "the whole train split, as skillvc trains",
        "skillvc trains on the whole train split: cut the split to this many items",
    )
    b.when("train.steps_per_epoch", (0, None), "derived from the split", "no equivalent in skillvc")
    b.to("train.seed", "train", "seed")
    b.to("gradient.minibatch_size", "train", "minibatch_size")
    b.when(
        "gradient.merge_batch_size",
        None,
        "",
        "skillvc merges a step's proposals in one pass (skillvc.training.aggregate)",
    )
    b.when(
        "gradient.analyst_workers",
        None,
        "",
        "one pool of concurrent calls: [train] workers (from env.workers)",
    )
    b.when(
        "gradient.failure_only",
        False,
        "skillvc reflects on failures and successes",
        "skillvc always reflects on failures and successes",
    )
    b.to("optimizer.learning_rate", "train", "learning_rate")
    b.to("optimizer.min_learning_rate", "train", "min_learning_rate")
    schedule = b.get("optimizer.lr_scheduler")
    if schedule in ("cosine", "linear", "constant"):
        b.to("optimizer.lr_scheduler", "train", "lr_schedule")
    else:
        b.when(
            "optimizer.lr_scheduler",
            None,
            "",
            "skillvc's schedules are cosine, linear and constant",
        )
    b.when(
        "optimizer.lr_control_mode",
        "fixed",
        "the schedule sets the budget, as in skillvc",
        "skillvc's budget always follows the schedule",
    )
    b.when(
        "optimizer.skill_update_mode",
        "patch",
        "bounded edits, as skillvc makes",
        "skillvc only edits (add, replace, delete); it has no rewrite mode",
    )
    b.when("optimizer.meta_learning_rate", None, "", "no equivalent in skillvc")
    b.to("optimizer.use_slow_update", "train", "slow_update")
    if b.get("optimizer.use_slow_update", True):
        b.put(
            "train",
            "slow_update_from_epoch",
            2,
            "SkillOpt's schedule: an empty guidance region after epoch 1, the first slow update "
            "at the end of epoch 2",
        )
    b.when(
        "optimizer.slow_update_samples",
        None,
        "",
        "skillvc's slow update compares on batch_size train items",
    )
    b.to(
        "optimizer.slow_update_gate_with_selection",
        "train",
        "slow_update_gate",
        "false: the guidance is applied ungated, as SkillOpt's default does",
    )
    if not b.has("optimizer.slow_update_gate_with_selection"):
        b.put("train", "slow_update_gate", False, "SkillOpt applies the guidance ungated")
    b.when(
        "optimizer.longitudinal_pair_policy",
        None,
        "",
        "skillvc's slow update shows every item whose outcome changed or stayed failed",
    )
    b.to("optimizer.use_meta_skill", "train", "meta_skill")
    for key in ("use_skill_aware_reflection",):
        b.when(f"optimizer.{key}", False, "off, and skillvc has no such mode", "no equivalent")
    for key in ("skill_aware_appendix_source", "skill_aware_consolidate_threshold"):
        if not b.get("optimizer.use_skill_aware_reflection", False):
            b.mark(f"optimizer.{key}", "implied", "skill-aware reflection is off")
    # The gate: the paper's bundle gate, strict improvement, on the whole val split.
    b.put(
        "train",
        "attribution",
        False,
        "the paper's bundle gate: a candidate is kept whole when it strictly beats the "
        "current skill on val",
    )
    b.when(
        "evaluation.use_gate",
        True,
        "skillvc gates every step",
        "skillvc always gates a step's candidate",
    )
    metric = b.get("evaluation.gate_metric")
    b.to("evaluation.gate_metric", "train", "gate_metric")
    if metric == "mixed":
        b.when(
            "evaluation.gate_mixed_weight",
            (0.5, 0.50),
            "skillvc's mixed metric is the mean of hard and soft (weight 0.5)",
            "skillvc's mixed metric weighs hard and soft equally (0.5)",
        )
    else:
        b.mark("evaluation.gate_mixed_weight", "implied", "used by the mixed metric only")
    b.when(
        "evaluation.sel_env_num",
        0,
        "the whole val split, as skillvc's gate evaluates",
        "skillvc's gate evaluates the whole val split: cut the split to this many items",
    )
    b.when(
        "evaluation.test_env_num",
        0,
        "the whole test split",
        "skillvc evaluates the whole test split: cut the split to this many items",
    )
    b.when(
        "evaluation.eval_test",
        True,
        "skillvc evaluates the test split at the end",
        "skillvc evaluates the test split whenever there is one: leave [tasks] test unset",
    )


def _environment(b: _Builder, skill: str | None) -> None:
    name = str(b.get("env.name") or "").strip().lower()
    env = ENV_ALIASES.get(name, name)
    if skill:
        b.put("skill", "path", skill)
        b.mark("env.skill_init", "translated", "[skill] path (given with --skill)")
    elif not _blank(b.get("env.skill_init")):
        b.to("env.skill_init", "skill", "path", "SkillOpt's env.skill_init")
    else:
        b.put("skill", "path", "SKILL.md", "SkillOpt started from a blank skill")
        b.mark("env.skill_init", "implied", "blank: SkillOpt starts from an empty skill")
    mode = b.get("env.split_mode", "ratio")
    if mode == "split_dir" or not _blank(b.get("env.split_dir")):
        b.to("env.split_dir", "tasks", "skillopt_dir", "train/, val/ and test/ items.json")
        b.mark("env.split_mode", "implied", "a split directory, read as [tasks] skillopt_dir")
        for key in ("data_path", "split_seed", "split_output_dir"):
            if _blank(b.get(f"env.{key}")) or key == "split_seed":
                b.mark(f"env.{key}", "implied", "used by SkillOpt's ratio split only")
    else:
        b.to("env.data_path", "tasks", "path", "skillvc splits it by split_ratio (its own split)")
        b.to("env.split_seed", "tasks", "split_seed")
        b.mark(
            "env.split_mode", "translated", "[tasks] path, split by skillvc (not SkillOpt's split)"
        )
        b.when("env.split_output_dir", None, "", "skillvc writes no split files")
    if env:
        b.put("tasks", "skillopt_env", env, "its items' format")
        if env in ENV_SCORERS:
            b.put("tasks", "scorer", ENV_SCORERS[env], "the environment's verifier")
        b.mark("env.name", "translated", "[tasks] skillopt_env")
        for key, value in ENV_TASKS.get(env, {}).items():
            b.put("tasks", key, value)
        for key, value in ENV_TOOLS.get(env, {}).items():
            b.put("tools", key, value, "the environment's tools, through the tool loop")
    b.to("env.data_root", "tasks", "data_root", "where the items' files are")
    dirs = b.get("env.data_dirs")
    if isinstance(dirs, list) and dirs:
        b.put("tasks", "data_root", dirs[0], "where the items' documents are")
        if len(dirs) == 1:
            b.mark("env.data_dirs", "translated", "[tasks] data_root")
        else:
            b.mark(
                "env.data_dirs", "untranslated", "skillvc reads one data_root: the first is used"
            )
    b.to("env.exec_timeout", "target", "timeout_s", "per target call", convert=float)
    b.to("env.max_completion_tokens", "target", "max_tokens")
    b.to("env.workers", "train", "workers", "concurrent model calls")
    turns = b.get("env.max_turns", b.get("env.max_tool_turns", b.get("env.max_steps")))
    for key in ("max_turns", "max_tool_turns", "max_steps"):
        if not b.has(f"env.{key}"):
            continue
        if int(b.get(f"env.{key}") or 0) <= 1:
            b.mark(f"env.{key}", "implied", "one answer per item, as a chat target without tools")
        else:
            b.put("tools", "max_turns", int(turns), "model turns per rollout")
            b.mark(f"env.{key}", "translated", "[tools] max_turns")
    b.when("env.limit", 0, "every item", "skillvc reads every item: cut the split files")
    b.when("env.out_root", None, "", "skillvc keeps a run in .skillvc/ and git, not a folder")
    b.when("env.max_api_workers", None, "", "one pool of concurrent calls: [train] workers")
    if env == "officeqa":
        for key in list(b.config.get("env", {})):
            if key.startswith("search_") or key == "max_queries_per_turn":
                b.mark(
                    f"env.{key}",
                    "untranslated",
                    "OfficeQA's web search: skillvc's OfficeQA tools read the item's documents "
                    "only (skillvc.tasks.skillopt.tools.officeqa)",
                )


def _render(b: _Builder, t: Translation, source: str) -> str:
    order = ["skill", "tasks", "tools", "target", "optimizer", "train"]
    lines = [
        f"# skillvc.toml translated from the SkillOpt config {source or '(a SkillOpt config)'}",
        "# by 'skillvc init --from-skillopt'. The [train] recipe is SkillOpt's: the paper's",
        "# bundle gate (attribution = false) and its slow-update schedule. Paths are as SkillOpt",
        "# had them, relative to this repository's root: copy or link the data here.",
        "",
    ]
    for table in order + sorted(set(b.tables) - set(order)):
        if table not in b.tables:
            continue
        lines.append(f"[{table}]")
        for key, (value, comment) in b.tables[table].items():
            line = f"{key} = {toml_value(value)}"
            lines.append(f"{line}  # {comment}" if comment else line)
        lines.append("")
    if t.notes:
        lines.append("# Before training:")
        lines.extend(f"# - {note}" for note in t.notes)
        lines.append("")
    untranslated = t.untranslated
    lines.append(
        f"# SkillOpt settings without an equivalent in skillvc ({len(untranslated)}); "
        "nothing above carries them:"
    )
    lines.extend(f"#   {line}" for line in t.untranslated_lines() or ["(none)"])
    lines.append("")
    implied = t.of("implied")
    lines.append(f"# SkillOpt settings whose value is what skillvc does anyway ({len(implied)}):")
    lines.extend(f"#   {s.shown()}: {s.why}" for s in implied)
    return "\n".join(lines) + "\n"


def write(
    root: Path, translation: Translation, *, exists: Callable[[Path], bool] = Path.exists
) -> Path:
    """Write ``translation`` as ``root``/skillvc.toml; an existing file is never replaced."""
    from skillvc.core.config import CONFIG_FILE

    path = root / CONFIG_FILE
    if exists(path):
        raise SkillOptError(
            f"{path} already exists; --from-skillopt writes a new one and never replaces it.",
            hint="Move it aside (or run in another directory), then run the command again.",
        )
    path.write_text(translation.text, encoding="utf-8")
    return path


def relative_paths(translation: Translation, root: Path) -> list[str]:
    """Notes for the config's paths that are absolute: inside ``root`` they should be relative,
    outside it skillvc will not read them."""
    notes = []
    for s in translation.settings:
        if s.kind != "translated" or not isinstance(s.value, str) or not os.path.isabs(s.value):
            continue
        where = Path(s.value)
        inside = where.is_relative_to(root)
        notes.append(
            f"{s.key} is the absolute path {s.value}: "
            + (
                "make it relative to the repository root."
                if inside
                else "skillvc reads nothing outside the repository; copy it in."
            )
        )
    return notes
