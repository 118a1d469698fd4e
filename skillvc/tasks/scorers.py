"""Scorers: turn a model output for a task item into a ``Score`` (hard 0/1 and soft 0..1).

Invariants:

* Every score has ``hard`` in {0.0, 1.0} and ``0.0 <= soft <= 1.0``; ``score_item`` checks
  this, so a plugin cannot smuggle a 7 into the averages.
* Answer-matching scorers (exact, includes, regex, numeric, f1, choice, json) look at
  ``extract_answer(output)``: the last ``<answer>...</answer>`` if there is one, else the
  whole output. An empty answer never scores, whatever the target.
* With several acceptable answers the best score over them wins.
* Scorers are pure functions of (options, item, output), except ``command`` (runs a program)
  and ``judge`` (asks a model through the caller's ``JudgeFn``).
* Misconfiguration (unknown name or option, bad pattern, missing judge) raises
  ``ScorerError`` when the scorer is built; anything a scorer raises while scoring is
  re-raised by ``score_item`` as ``ScorerError`` naming the scorer and the item.

Built-ins are registered with ``register_scorer`` exactly as a plugin would register its own.
A factory is called as ``factory(options, judge)`` and returns an object with ``name`` and
``score(item, output)``.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import json
import math
import os
import re
import string
import subprocess
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillvc.core.errors import BackendError, ScorerError
from skillvc.core.hashing import canonical_json
from skillvc.core.paths import inside_repo
from skillvc.inputs import reader as inputs
from skillvc.tasks import taskset as tasks
from skillvc.tasks.taskset import TaskItem

JudgeFn = Callable[[str, str], str]  # (system prompt, user prompt) -> model text


@dataclass(frozen=True)
class Score:
    hard: float  # 0.0 or 1.0
    soft: float  # 0.0 .. 1.0
    detail: str = ""


def metric_value(hard: float, soft: float, metric: str) -> float:
    """The score a gate compares: ``hard`` (0/1), ``soft`` (0..1) or ``mixed`` (their mean)."""
    if metric == "hard":
        return hard
    if metric == "soft":
        return soft
    return (hard + soft) / 2


class Scored:
    """What an item's result (a rollout, an evaluated item) offers: scores, or an error."""

    hard: float | None
    soft: float | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    def value(self, metric: str) -> float:
        assert self.hard is not None and self.soft is not None
        return metric_value(self.hard, self.soft, metric)


class Scorer(Protocol):
    @property
    def name(self) -> str: ...

    def score(self, item: TaskItem, output: str) -> Score: ...


ScorerFactory = Callable[[Mapping[str, Any], "JudgeFn | None"], Scorer]

_REGISTRY: dict[str, ScorerFactory] = {}


def register_scorer(name: str, factory: ScorerFactory, *, needs_target: bool = True) -> None:
    """Make ``name`` available to ``get_scorer``; a later registration replaces an earlier one.

    ``needs_target=False`` lets task rows for this scorer omit a target.
    """
    if not name or not isinstance(name, str):
        raise ScorerError(f"A scorer name must be a non-empty string, not {name!r}.")
    _REGISTRY[name] = factory
    if needs_target:
        tasks.TARGETLESS_SCORERS.discard(name)
    else:
        tasks.TARGETLESS_SCORERS.add(name)


def scorer_names() -> list[str]:
    return sorted(_REGISTRY)


def get_scorer(
    name: str, options: Mapping[str, Any] | None = None, *, judge: JudgeFn | None = None
) -> Scorer:
    """Build a scorer. Sub-tables named after scorers (options for per-item overrides, see
    ``score_item``) are left out of the options this scorer sees."""
    factory = _REGISTRY.get(name)
    if factory is None:
        from skillvc.core.suggest import did_you_mean

        raise ScorerError(
            f"Unknown scorer '{name}'.",
            hint=did_you_mean(
                name, scorer_names(), listed="Scorers", then="Set it as [tasks] scorer."
            )
            + " docs/tasks.md describes each scorer.",
        )
    own = {
        k: v for k, v in (options or {}).items() if not (k in _REGISTRY and isinstance(v, Mapping))
    }
    return factory(own, judge)


_OVERRIDES: dict[tuple[str, str, int], tuple[JudgeFn | None, Scorer]] = {}


@dataclass(frozen=True)
class Acted:
    """What a rollout that acted left besides its answer (``skillvc.models.tools``): an
    environment's last reward, why the loop stopped early, and the files it created or changed
    in its scratch directory (path -> ``{"size", "sha256", "text" | "base64"}``)."""

    reward: float | None = None
    failure: str | None = None
    files: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    environment: bool = False

    @classmethod
    def of(cls, meta: Mapping[str, Any], load: Callable[[str], str]) -> Acted | None:
        """From a reply's meta (``files_out`` is a blob there, read with ``load``); None for a
        rollout that did not act."""
        if "turns" not in meta:
            return None
        files = json.loads(load(meta["files_out"])) if meta.get("files_out") else {}
        reward = meta.get("reward")
        return cls(
            reward=float(reward) if isinstance(reward, (int, float)) else None,
            failure=meta.get("failure"),
            files=files,
            environment="reward" in meta,
        )

    def read(self, path: str) -> bytes | None:
        """A produced file's bytes (None: not produced, or past the size that comes back)."""
        entry = self.files.get(path)
        if entry is None:
            return None
        if "text" in entry:
            return str(entry["text"]).encode("utf-8")
        if "base64" in entry:
            return base64.b64decode(entry["base64"])
        return None


def score_item(
    item: TaskItem,
    output: str,
    default: Scorer,
    options: Mapping[str, Any] | None = None,
    *,
    judge: JudgeFn | None = None,
    acted: Acted | None = None,
) -> Score:
    """Score ``output`` with the item's own scorer if it names one, else with ``default``.

    ``options`` is the set's scorer_options; an override scorer gets the sub-table named after
    it (``[tasks.scorer_options.regex]``) or no options. Override scorers are built once per
    (name, options, judge) and cached.
    """
    scorer = default
    if item.scorer and item.scorer != default.name:
        scorer = _override(item.scorer, options, judge)
    try:
        acting = getattr(scorer, "score_acted", None)
        result = acting(item, output, acted) if acting is not None else scorer.score(item, output)
    except BackendError:
        # The judge's model call failed (it is recorded as a model.error): an infrastructure
        # failure, never a scorer fault. It keeps its own class, exit code (6) and hint, e.g.
        # "refused the key in ANTHROPIC_API_KEY", so the caller can treat it as an error.
        raise
    except ScorerError as exc:
        inner = exc.message.rstrip(".")
        inner = inner[:1].lower() + inner[1:]  # it continues our sentence
        raise ScorerError(
            f"Scorer '{scorer.name}' failed on item '{item.id}' ({inner}).",
            hint=exc.hint,
        ) from exc
    except Exception as exc:
        raise ScorerError(
            f"Scorer '{scorer.name}' failed on item '{item.id}' ({type(exc).__name__}: {exc})."
        ) from exc
    if (
        not isinstance(result, Score)
        or result.hard not in (0.0, 1.0)
        or not 0.0 <= result.soft <= 1.0
    ):
        raise ScorerError(
            f"Scorer '{scorer.name}' returned {result!r} for item '{item.id}' "
            "(expected a Score with hard 0 or 1 and soft in 0..1)."
        )
    return result


def _override(name: str, options: Mapping[str, Any] | None, judge: JudgeFn | None) -> Scorer:
    sub = (options or {}).get(name)
    own = dict(sub) if isinstance(sub, Mapping) else {}
    try:
        key = (name, canonical_json(own), id(judge))
    except TypeError:  # options that are not JSON-able: build afresh, do not cache
        return get_scorer(name, own, judge=judge)
    cached = _OVERRIDES.get(key)
    # Compare the judge by identity too: id() values are reused once an object is freed.
    if cached is None or cached[0] is not judge:
        cached = (judge, get_scorer(name, own, judge=judge))
        _OVERRIDES[key] = cached
    return cached[1]


# -- answer text --------------------------------------------------------------------------------

# An answer's text may not contain another opening tag: in "use the <answer> tag ...
# <answer>Paris</answer>" (a mention, then the answer) or in nested tags, the innermost wins.
_ANSWER_RE = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.IGNORECASE | re.DOTALL)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
# SQuAD removes ASCII string.punctuation (which includes symbols such as $ + < = > ^ ` | ~);
# we also remove every Unicode punctuation character (categories P*), e.g. « » ¿ — “ ”.
_ASCII_PUNCT = frozenset(string.punctuation)


def extract_answer(output: str | None) -> str:
    """The text of the last ``<answer>...</answer>`` if any, else the whole output; stripped."""
    if not output:  # None or "": a backend that gave no text has given no answer
        return ""
    found = _ANSWER_RE.findall(output)
    return str(found[-1] if found else output).strip()


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop a/an/the, collapse whitespace.

    Accents are kept ("Café" -> "café", which differs from "cafe").
    """
    text = text.lower()
    text = "".join(
        ch for ch in text if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def _check_options(name: str, options: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        known = ", ".join(allowed) or "none"
        raise ScorerError(f"Unknown option '{unknown[0]}' for the {name} scorer (known: {known}).")


def _number_option(name: str, options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScorerError(f"Option {key} of the {name} scorer must be a number, not {value!r}.")
    return float(value)


def _need_targets(name: str, item: TaskItem) -> tuple[str, ...]:
    if not item.targets:
        raise ScorerError(f"The {name} scorer needs a target, but the item has none.")
    return item.targets


def _binary(ok: bool, detail: str) -> Score:
    return Score(1.0 if ok else 0.0, 1.0 if ok else 0.0, detail)


# -- exact, includes, f1 --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExactScorer:
    name: str = "exact"

    def score(self, item: TaskItem, output: str) -> Score:
        answer = normalize_answer(extract_answer(output))
        if not answer:
            return _binary(False, "empty answer")
        for target in _need_targets(self.name, item):
            if answer == normalize_answer(target):
                return _binary(True, f"matched {target!r}")
        return _binary(False, f"got {answer!r}, expected {_show(item.targets)}")


@dataclass(frozen=True)
class IncludesScorer:
    name: str = "includes"

    def score(self, item: TaskItem, output: str) -> Score:
        # Pad with spaces so a target matches whole words only ("par" is not in "comparison").
        answer = f" {normalize_answer(extract_answer(output))} "
        if not answer.strip():
            return _binary(False, "empty answer")
        for target in _need_targets(self.name, item):
            norm = normalize_answer(target)
            if norm and f" {norm} " in answer:
                return _binary(True, f"contains {target!r}")
        return _binary(False, f"contains none of {_show(item.targets)}")


def f1_score(prediction: str, target: str) -> float:
    """SQuAD token F1 of two texts after normalisation; 0 when either is empty."""
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(target).split()
    common = sum((Counter(pred) & Counter(gold)).values())
    if not pred or not gold or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class F1Scorer:
    threshold: float = 1.0
    name: str = "f1"

    def score(self, item: TaskItem, output: str) -> Score:
        answer = extract_answer(output)
        best = max(f1_score(answer, t) for t in _need_targets(self.name, item))
        return Score(1.0 if best >= self.threshold else 0.0, best, f"token F1 {best:.3f}")


# -- regex ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegexScorer:
    pattern: re.Pattern[str] | None = None
    name: str = "regex"

    def score(self, item: TaskItem, output: str) -> Score:
        answer = extract_answer(output)
        if not answer:
            return _binary(False, "empty answer")
        if self.pattern is None:
            for target in _need_targets(self.name, item):
                if _compile(target, "target").search(answer):
                    return _binary(True, f"matches {target!r}")
            return _binary(False, f"matches none of {_show(item.targets)}")
        matches = list(self.pattern.finditer(answer))
        if not matches:
            return _binary(False, f"does not match {self.pattern.pattern!r}")
        if not self.pattern.groups or not item.targets:
            return _binary(True, f"matches {self.pattern.pattern!r}")
        # The last match is the model's final word, as with <answer> tags and numbers.
        last = matches[-1]
        captured = last.group("answer") if "answer" in self.pattern.groupindex else last.group(1)
        wanted = {normalize_answer(t) for t in item.targets}
        ok = captured is not None and normalize_answer(captured) in wanted
        return _binary(ok, f"captured {captured!r}, expected {_show(item.targets)}")


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ScorerError(f"The regex {what} {pattern!r} is not a valid pattern ({exc}).") from None


# -- numeric --------------------------------------------------------------------------------------

_NUMBER_RE = re.compile(
    r"""
    (?<![\w.])                       # not the tail of a word or of another number
    (?P<sign>[-+\u2212])?\$?(?P<sign2>[-+\u2212])?   # -$5 and $-5 both mean minus five
    (?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)? | \d+(?:\.\d*)? | \.\d+)
    (?P<exp>[eE][-+]?\d+)?
    """,
    re.VERBOSE,
)


def parse_numbers(text: str) -> list[float]:
    """All numbers in ``text``: "1,234.5", "-3", "1e3", "$1,000", "45%" (-> 45.0)."""
    numbers = []
    for m in _NUMBER_RE.finditer(text):
        value = float(m["digits"].replace(",", "") + (m["exp"] or ""))
        if (m["sign"] or m["sign2"] or "") in ("-", "\u2212"):
            value = -value
        numbers.append(value)
    return numbers


@dataclass(frozen=True)
class NumericScorer:
    abs_tol: float = 1e-6
    rel_tol: float = 0.0
    name: str = "numeric"

    def score(self, item: TaskItem, output: str) -> Score:
        found = parse_numbers(extract_answer(output))
        if not found:
            return _binary(False, "no number in the answer")
        value = found[-1]
        best = Score(0.0, 0.0, "")
        for target in _need_targets(self.name, item):
            numbers = parse_numbers(target)
            if len(numbers) != 1:
                raise ScorerError(f"The numeric target {target!r} is not one number.")
            result = self._compare(value, numbers[0])
            if (result.hard, result.soft) > (best.hard, best.soft):
                best = result
        return Score(best.hard, best.soft, f"got {value:g}, expected {_show(item.targets)}")

    def _compare(self, value: float, target: float) -> Score:
        if math.isclose(value, target, rel_tol=self.rel_tol, abs_tol=self.abs_tol):
            return Score(1.0, 1.0)
        if target == 0:
            return Score(0.0, 0.0)
        soft = 1.0 - abs(value - target) / abs(target)
        return Score(0.0, min(1.0, max(0.0, soft)))


# -- choice ---------------------------------------------------------------------------------------

_LONE_LETTER_RE = re.compile(r"^\(?([A-Za-z])\)?[.:)]?$")
_ANSWER_LETTER_RE = re.compile(
    r"\banswer\b(?:\s+is)?\s*[:\-]?\s*\(?([A-Z])\)?(?![\w])", re.IGNORECASE
)
_LEADING_LETTER_RE = re.compile(r"^\(?([A-Z])(?:\)|[.:])\s")


@dataclass(frozen=True)
class ChoiceScorer:
    name: str = "choice"

    def score(self, item: TaskItem, output: str) -> Score:
        if not item.choices:
            raise ScorerError("The choice scorer needs choices on the item, and it has none.")
        wanted = {self._target_index(item, t) for t in _need_targets(self.name, item)}
        picked = pick_choice(extract_answer(output), item.choices)
        expected = " or ".join(_letter(i) for i in sorted(wanted))
        if picked is None:
            return _binary(False, f"no choice picked; expected {expected}")
        return _binary(picked in wanted, f"picked {_letter(picked)}; expected {expected}")

    @staticmethod
    def _target_index(item: TaskItem, target: str) -> int:
        norm = normalize_answer(target)
        for i, choice in enumerate(item.choices):
            if norm and normalize_answer(choice) == norm:
                return i
        m = _LONE_LETTER_RE.match(target.strip())
        if m and _index(m.group(1), item.choices) is not None:
            return _index(m.group(1), item.choices)  # type: ignore[return-value]
        raise ScorerError(f"The target {target!r} is neither a choice letter nor a choice.")


def _letter(index: int) -> str:
    return chr(ord("A") + index)


def _index(letter: str, choices: tuple[str, ...]) -> int | None:
    i = ord(letter.upper()) - ord("A")
    return i if 0 <= i < len(choices) else None


def pick_choice(answer: str, choices: tuple[str, ...]) -> int | None:
    """Which choice an answer picks: its text, a letter ("B", "(B)", "Answer: B", "B) ...")."""
    answer = answer.strip()
    norm = normalize_answer(answer)
    normalized = [normalize_answer(c) for c in choices]
    if norm and norm in normalized:
        return normalized.index(norm)
    for regex, text in ((_LONE_LETTER_RE, answer), (_LEADING_LETTER_RE, answer)):
        m = regex.match(text)
        if m and (i := _index(m.group(1), choices)) is not None:
            return i
    letters = [m.group(1) for m in _ANSWER_LETTER_RE.finditer(answer) if m.group(1).isupper()]
    if letters and (i := _index(letters[-1], choices)) is not None:
        return i
    # Last resort: exactly one choice's text appears (as whole words) in the answer.
    padded = f" {norm} "
    present = [i for i, c in enumerate(normalized) if c and f" {c} " in padded]
    return present[0] if len(present) == 1 else None


# -- json -----------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class JsonScorer:
    schema: Mapping[str, Any] | None = None
    validator: Any = field(default=None, compare=False)
    name: str = "json"

    def score(self, item: TaskItem, output: str) -> Score:
        text = extract_answer(output)
        fenced = _FENCE_RE.findall(text)
        text = (fenced[-1] if fenced else text).strip()
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return Score(0.0, 0.0, f"not valid JSON ({exc.msg})")
        except (ValueError, RecursionError) as exc:
            # Model output, not a scorer fault: an integer past Python's digit limit raises a
            # plain ValueError, and "[[[[..." nested thousands deep a RecursionError.
            return Score(0.0, 0.0, f"unreadable JSON ({type(exc).__name__})")
        expected = [_json_target(t) for t in item.targets]
        try:
            if self.validator is not None:
                error = next(iter(self.validator.iter_errors(value)), None)
                if error is not None:
                    return Score(0.0, 0.5, f"fails the schema: {error.message}")
            if expected and not any(_json_equal(value, e) for e in expected):
                return Score(0.0, 0.5, "valid JSON, but not equal to the target")
        except RecursionError:  # valid, but nested too deep to validate or compare
            return Score(0.0, 0.5, "valid JSON, but nested too deeply to check")
        return Score(1.0, 1.0, "valid JSON")


def _json_target(target: str) -> Any:
    try:
        return json.loads(target)
    except (ValueError, RecursionError):  # JSONDecodeError, or too many digits / too deep
        raise ScorerError(f"The json target {target[:200]!r} is not valid JSON.") from None


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: like ==, except that true/false never equal 1/0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _make_json(options: Mapping[str, Any], judge: JudgeFn | None) -> JsonScorer:
    _check_options("json", options, ("schema",))
    schema = options.get("schema")
    if schema is None:
        return JsonScorer()
    if isinstance(schema, str):
        try:
            # Relative to the current directory, as a python scorer's module; never outside it.
            path = inside_repo(Path.cwd(), schema, "[tasks.scorer_options] schema")
            text = inputs.read_text(
                path,
                f"The json scorer's schema file {schema}",
                max_bytes=inputs.CONFIG_MAX_BYTES,
                error=ScorerError,
            )
            schema = inputs.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ScorerError(
                f"The json scorer's schema file {schema} cannot be read ({exc})."
            ) from None
    if not isinstance(schema, Mapping):
        raise ScorerError("The json scorer's schema option must be an object or a file path.")
    try:
        import jsonschema  # optional dependency: only needed when a schema is given
    except ImportError:
        raise ScorerError(
            "The json scorer's schema option needs the jsonschema package.",
            hint="pip install 'skillvc[jsonschema]'",
        ) from None
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ScorerError(
            f"The json scorer's schema is not a valid JSON schema ({exc.message})."
        ) from None
    return JsonScorer(schema=schema, validator=cls(schema))


# -- reward (an environment's) ----------------------------------------------------------------


@dataclass(frozen=True)
class RewardScorer:
    """An interactive environment's last reward: soft = the reward clipped to 0..1, hard = 1
    when it reaches ``threshold``. The default scorer of a ``[tasks] environment``."""

    threshold: float = 1.0
    name: str = "reward"

    def score(self, item: TaskItem, output: str) -> Score:
        raise ScorerError(
            "The reward scorer scores an environment's episodes, and this rollout played none.",
            hint="Set [tasks] environment, or choose another scorer in [tasks] scorer.",
        )

    def score_acted(self, item: TaskItem, output: str, acted: Acted | None) -> Score:
        if acted is None or not acted.environment:
            return self.score(item, output)
        if acted.reward is None:  # the episode never reached a step: nothing earned
            return Score(0.0, 0.0, acted.failure or "no reward")
        soft = min(1.0, max(0.0, acted.reward))
        detail = f"reward {acted.reward:g}" + (f"; {acted.failure}" if acted.failure else "")
        return Score(1.0 if acted.reward >= self.threshold else 0.0, soft, detail)


def _make_reward(options: Mapping[str, Any], judge: JudgeFn | None) -> RewardScorer:
    _check_options("reward", options, ("threshold",))
    return RewardScorer(_number_option("reward", options, "threshold", 1.0))


# -- python ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonScorer:
    function: Callable[[str, TaskItem], Any]
    threshold: float = 1.0
    name: str = "python"

    def score(self, item: TaskItem, output: str) -> Score:
        return self._convert(self.function(output, item))

    def _convert(self, result: Any) -> Score:
        if isinstance(result, Score):
            return result
        if isinstance(result, bool):
            return _binary(result, "")
        if isinstance(result, (int, float)) and 0.0 <= result <= 1.0:
            soft = float(result)
            return Score(1.0 if soft >= self.threshold else 0.0, soft)
        if isinstance(result, tuple) and len(result) == 2:
            hard, soft = (float(v) for v in result)
            if hard in (0.0, 1.0) and 0.0 <= soft <= 1.0:
                return Score(hard, soft)
        raise ScorerError(
            f"The python scorer's function returned {result!r} "
            "(expected a bool, a number in 0..1 or a (hard, soft) pair)."
        )

    def score_acted(self, item: TaskItem, output: str, acted: Acted | None) -> Score:
        """A function with a third parameter gets what the rollout did (``Acted``: its files,
        an environment's reward), or None for a rollout that did not act."""
        if self.takes_acted:
            return self._convert(self.function(output, item, acted))  # type: ignore[call-arg]
        return self.score(item, output)

    @property
    def takes_acted(self) -> bool:
        try:
            return len(inspect.signature(self.function).parameters) >= 3
        except (TypeError, ValueError):
            return False


def _make_python(options: Mapping[str, Any], judge: JudgeFn | None) -> PythonScorer:
    _check_options("python", options, ("function", "threshold"))
    spec = options.get("function")
    if not isinstance(spec, str) or ":" not in spec:
        raise ScorerError(
            'The python scorer needs option function = "module:function".',
            hint='Set [tasks.scorer_options] function = "my_scorers:grade".',
        )
    module_name, _, attr = spec.partition(":")
    cwd = os.getcwd()
    sys.path.insert(0, cwd)  # so a scorer module next to skillvc.toml imports without install
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ScorerError(
            f"The python scorer cannot import {module_name} ({type(exc).__name__}: {exc})."
        ) from None
    finally:
        sys.path.remove(cwd)
    function = getattr(module, attr, None)
    if not callable(function):
        raise ScorerError(f"The python scorer's function {spec} is not a callable in the module.")
    return PythonScorer(function, _number_option("python", options, "threshold", 1.0))


# -- command --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandScorer:
    argv: tuple[str, ...]
    timeout_s: float = 30.0
    threshold: float = 1.0
    name: str = "command"

    def score(self, item: TaskItem, output: str) -> Score:
        env = dict(os.environ)
        env["SKILLVC_TARGETS"] = json.dumps(list(item.targets), ensure_ascii=False)
        env["SKILLVC_ITEM"] = json.dumps(item.to_dict(), ensure_ascii=False, default=str)
        # Imported here: the backends package imports the config, which scorers need not.
        from skillvc.models.backends.command import communicate, start_process

        try:
            # Its own process group, killed whole on timeout: subprocess.run would kill only
            # the direct child and leave e.g. the grader started by "sh -c" running.
            proc = start_process(self.argv, stdin=True, env=env)
            stdout, stderr = communicate(proc, output or "", self.timeout_s)
        except subprocess.TimeoutExpired:
            raise ScorerError(
                f"The scoring command {self.argv[0]} took longer than {self.timeout_s:g}s."
            ) from None
        except OSError as exc:
            raise ScorerError(
                f"The scoring command {self.argv[0]} cannot run ({exc.strerror})."
            ) from None
        stdout = stdout.strip()
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or [""])[-1]
            return _binary(False, f"exit code {proc.returncode}: {tail}".rstrip(": "))
        value = _float(stdout)
        if value is None:
            return _binary(True, stdout[:200])
        if not 0.0 <= value <= 1.0:
            # "7" (out of 10) or "-1" is not a verdict we can read; passing it would be a guess.
            raise ScorerError(
                f"The scoring command {self.argv[0]} printed {stdout[:50]!r}, a number outside "
                "0..1.",
                hint="Print a score from 0 to 1 (or nothing, and let the exit code decide).",
            )
        return Score(1.0 if value >= self.threshold else 0.0, value, f"command score {value:g}")


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _make_command(options: Mapping[str, Any], judge: JudgeFn | None) -> CommandScorer:
    _check_options("command", options, ("argv", "timeout_s", "threshold"))
    argv = options.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ScorerError(
            "The command scorer needs option argv, a non-empty list of strings.",
            hint='Set [tasks.scorer_options] argv = ["python", "grade.py"].',
        )
    return CommandScorer(
        tuple(argv),
        _number_option("command", options, "timeout_s", 30.0),
        _number_option("command", options, "threshold", 1.0),
    )


# -- judge ----------------------------------------------------------------------------------------

DEFAULT_RUBRIC = "The output is correct if it gives the same answer as an acceptable answer."
JUDGE_SYSTEM = """You grade the output of an AI assistant on a task.

Rubric:
{rubric}

Think briefly, then end your reply with one line of the form
SCORE: <a number from 0 to 1>
where 1 means fully correct and 0 means wrong."""
_SCORE_LINE_RE = re.compile(r"SCORE:\s*\**\s*([-+]?\d*\.?\d+)", re.IGNORECASE)
_SCORE_JSON_RE = re.compile(r'"score"\s*:\s*([-+]?\d*\.?\d+)')


@dataclass(frozen=True)
class JudgeScorer:
    judge: JudgeFn
    rubric: str = DEFAULT_RUBRIC
    threshold: float = 0.5
    name: str = "judge"

    def prompts(self, item: TaskItem, output: str) -> tuple[str, str]:
        answers = "\n".join(f"- {t}" for t in item.targets) or "(none given)"
        user = (
            f"Task input:\n{item.input}\n\nAcceptable answers:\n{answers}\n\n"
            f"Output to grade:\n{output}"
        )
        return JUDGE_SYSTEM.format(rubric=self.item_rubric(item)), user

    def item_rubric(self, item: TaskItem) -> str:
        """The rubric for ``item``: the set's, with the item's own (``metadata.rubric``, as
        ``skillvc tasks draft`` writes it) after it; the item's alone in place of the default,
        which speaks of acceptable answers such an item may not have."""
        own = item.metadata.get("rubric")
        if not isinstance(own, str) or not own.strip():
            return self.rubric
        if self.rubric == DEFAULT_RUBRIC and not item.targets:
            return own.strip()
        return f"{self.rubric}\n\nFor this task:\n{own.strip()}"

    def score(self, item: TaskItem, output: str) -> Score:
        reply = self.judge(*self.prompts(item, output))
        value = parse_judge_score(reply)
        hard = 1.0 if value >= self.threshold else 0.0
        # The judge's reasoning is kept (short) because reflection learns from it.
        reason = " ".join(_SCORE_LINE_RE.sub("", reply).split())[:300]
        return Score(hard, value, f"judge score {value:g}" + (f": {reason}" if reason else ""))


def parse_judge_score(reply: str) -> float:
    """The judge's score: the last ``SCORE: x`` line, else ``{"score": x}``; must be 0..1."""
    found = _SCORE_LINE_RE.findall(reply) or _SCORE_JSON_RE.findall(reply)
    if not found:
        raise ScorerError(f"The judge's answer has no SCORE line: {reply.strip()[:200]!r}.")
    value = float(found[-1])
    if not 0.0 <= value <= 1.0:
        raise ScorerError(f"The judge's score {value:g} is outside 0..1.")
    return value


def read_rubric_file(name: Any) -> str:
    """The rubric in file ``name`` (relative to the current directory, as a json scorer's
    schema file; never outside it): a rubric kept in git and trained like a skill."""
    if not isinstance(name, str) or not name:
        raise ScorerError("Option rubric_file of the judge scorer must be a file path.")
    path = inside_repo(Path.cwd(), name, "[tasks.scorer_options] rubric_file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScorerError(
            f"The judge's rubric file {name} cannot be read ({exc}).",
            hint="Write the rubric there and commit it, or use the rubric option instead.",
        ) from None


def _make_judge(options: Mapping[str, Any], judge: JudgeFn | None) -> JudgeScorer:
    _check_options("judge", options, ("rubric", "rubric_file", "threshold"))
    if judge is None:
        raise ScorerError(
            "The judge scorer needs a [judge] model, and none is configured.",
            hint="Configure a judge model for the run, or choose another scorer.",
        )
    rubric = options.get("rubric", DEFAULT_RUBRIC)
    if "rubric_file" in options:
        rubric = read_rubric_file(options["rubric_file"])
    if not isinstance(rubric, str) or not rubric.strip():
        raise ScorerError("Option rubric of the judge scorer must be a non-empty string.")
    return JudgeScorer(judge, rubric, _number_option("judge", options, "threshold", 0.5))


# -- registration of the built-ins ------------------------------------------------------------


def _show(targets: tuple[str, ...]) -> str:
    return " or ".join(repr(t) for t in targets[:3]) + (" ..." if len(targets) > 3 else "")


def _plain(cls: Callable[[], Scorer], name: str) -> ScorerFactory:
    def factory(options: Mapping[str, Any], judge: JudgeFn | None) -> Scorer:
        _check_options(name, options, ())
        return cls()

    return factory


def _make_regex(options: Mapping[str, Any], judge: JudgeFn | None) -> RegexScorer:
    _check_options("regex", options, ("pattern",))
    pattern = options.get("pattern")
    if pattern is None:
        return RegexScorer()
    if not isinstance(pattern, str):
        raise ScorerError("Option pattern of the regex scorer must be a string.")
    return RegexScorer(_compile(pattern, "option pattern"))


def _make_numeric(options: Mapping[str, Any], judge: JudgeFn | None) -> NumericScorer:
    _check_options("numeric", options, ("abs_tol", "rel_tol"))
    return NumericScorer(
        _number_option("numeric", options, "abs_tol", 1e-6),
        _number_option("numeric", options, "rel_tol", 0.0),
    )


def _make_f1(options: Mapping[str, Any], judge: JudgeFn | None) -> F1Scorer:
    _check_options("f1", options, ("threshold",))
    return F1Scorer(_number_option("f1", options, "threshold", 1.0))


register_scorer("exact", _plain(ExactScorer, "exact"))
register_scorer("includes", _plain(IncludesScorer, "includes"))
register_scorer("regex", _make_regex)
register_scorer("numeric", _make_numeric)
register_scorer("f1", _make_f1)
register_scorer("choice", _plain(ChoiceScorer, "choice"))
register_scorer("json", _make_json, needs_target=False)
register_scorer("python", _make_python, needs_target=False)
register_scorer("reward", _make_reward, needs_target=False)
register_scorer("command", _make_command, needs_target=False)
register_scorer("judge", _make_judge, needs_target=False)
