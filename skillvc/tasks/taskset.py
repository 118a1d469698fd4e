"""Load task sets (train / val / test items) from JSONL, JSON or CSV files.

Invariants:

* Loading is all or nothing: any unreadable file, malformed row or integrity problem raises
  one ``TaskSetError`` whose message names the file and the line (or item); no partial set is
  ever returned.
* Every ``TaskItem`` has a non-empty ``input`` (the rendered model input) and an ``id`` that is
  either given in the row or derived from its content ("t" + 10 hex chars), so the same row
  gets the same id on every run and machine.
* Items needing a target (every scorer except those in ``TARGETLESS_SCORERS``) have at least
  one; targets and choices are always tuples of strings.
* ``TaskSet.hash`` depends only on the items' content (ids, inputs, targets, choices, metadata,
  scorer) in split order; never on paths, line numbers or the time of loading.
* Unless ``allow_overlap`` is set, ids are unique across the whole set and no input (compared
  with whitespace collapsed) appears in two splits. With ``allow_overlap`` such problems are
  listed in ``TaskSet.overlaps`` so the run can record them.
* A row whose ``status`` is ``pending`` (drafted, not yet approved by a person: ``skillvc
  tasks draft``) or ``rejected`` is no item: it never trains or gates. ``TaskSet.pending``
  counts the pending ones per task file, and the loader says once on stderr that they wait.
* Splitting one file by ratio is a pure function of (file content, ratio, seed).
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import json
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.config import TasksConfig
from skillvc.core.errors import TaskSetError
from skillvc.core.hashing import content_id, sha256_hex
from skillvc.core.paths import inside_repo
from skillvc.inputs import reader as inputs

SPLITS = ("train", "val", "test")
DEFAULT_TEMPLATE = "{input}"
SKILLOPT_TEMPLATE = "{question}\n\nContext: {context}"
INPUT_FIELDS = ("input", "question", "prompt", "query")  # query: skill-creator trigger sets
TARGET_FIELDS = ("target", "answer", "answers", "ideal", "expected")
SPLIT_ALIASES = {
    "train": "train",
    "val": "val",
    "validation": "val",
    "dev": "val",
    "test": "test",
}
# Scorers that judge an output on its own (or with options) and so need no target in the row.
# scorers.register_scorer(..., needs_target=False) adds plugin names here.
TARGETLESS_SCORERS: set[str] = {"json", "python", "command", "judge"}
# promptfoo assertion types we can map onto a built-in scorer.
PROMPTFOO_ASSERTS = {
    "equals": "exact",
    "contains": "includes",
    "icontains": "includes",
    "regex": "regex",
}
OVERLAP_HINT = "Set allow_overlap = true in [tasks] to accept this; the run records it."
DUPLICATE_HINT = (
    "Give every item its own id (or set allow_overlap = true in [tasks] to accept this; the "
    "run records it)."
)
MAX_NAMED = 5


@dataclass(frozen=True)
class TaskItem:
    """One task: the model input, the acceptable answers and where it came from."""

    id: str
    input: str  # the rendered model input (after input_template)
    targets: tuple[str, ...]  # acceptable answers (may be empty for json/python/... scorers)
    choices: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    scorer: str | None = None  # per-item override of the set's scorer
    fields: Mapping[str, Any] = field(default_factory=dict)  # the raw row (promptfoo: its vars)
    source: str = ""  # "evals/train.jsonl:12" (file:line, or file:item for JSON)
    # ``files``: repository files copied into the rollout's scratch directory, as (path,
    # sha256); ``images``: attached to the input, as (path, media type, base64 data).
    files: tuple[tuple[str, str], ...] = ()
    images: tuple[tuple[str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self._content(), "fields": dict(self.fields), "source": self.source}

    def _content(self) -> dict[str, Any]:
        """What the set hash covers: everything but the raw row and its location."""
        return (
            {
                "id": self.id,
                "input": self.input,
                "targets": list(self.targets),
                "choices": list(self.choices),
                "metadata": dict(self.metadata),
                "scorer": self.scorer,
            }
            | (  # only when given, so the hash of a set without them is what it was
                {"files": [list(f) for f in self.files]} if self.files else {}
            )
            | (
                {"images": [[p, t, sha256_hex(d)] for p, t, d in self.images]}
                if self.images
                else {}
            )
        )


@dataclass(frozen=True)
class TaskSet:
    """The three splits of a task set, checked for integrity, with a content hash."""

    train: tuple[TaskItem, ...]
    val: tuple[TaskItem, ...]
    test: tuple[TaskItem, ...]
    hash: str
    allow_overlap: bool = False
    overlaps: tuple[str, ...] = ()  # descriptions of overlaps that were allowed
    # Drafted rows awaiting review, per task file (left out of the items above).
    pending: Mapping[str, int] = field(default_factory=dict)

    def split(self, name: str) -> tuple[TaskItem, ...]:
        if name not in SPLITS:
            raise TaskSetError(
                f"Unknown split '{name}' (expected train, val or test).",
                hint="Name one of the splits train, val or test.",
            )
        items: tuple[TaskItem, ...] = getattr(self, name)
        return items

    def counts(self) -> dict[str, int]:
        return {name: len(self.split(name)) for name in SPLITS}


def taskset_hash(splits: Mapping[str, Sequence[TaskItem]]) -> str:
    """The content hash of a set: stable across runs, changes when any item changes."""
    return content_id({name: [item._content() for item in splits[name]] for name in SPLITS})


# -- reading one file -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    """A parsed row before it becomes an item, with its location for messages."""

    data: dict[str, Any]
    where: str  # "line 7" or "item 3", as used in error messages
    number: int  # the line or item number, for ``source``
    csv: bool = False  # CSV cells are strings: blank means absent, lists may be JSON


def read_items(
    path: Path, *, input_template: str = DEFAULT_TEMPLATE, scorer: str | None = None
) -> list[TaskItem]:
    """Read one task file (.jsonl, .json or .csv) into items.

    ``scorer`` is the set's scorer, used to decide whether rows need a target; ``None`` skips
    that check for rows without their own scorer override.
    """
    return _read_file(path, str(path), input_template, scorer)


def _read_file(
    path: Path,
    display: str,
    template: str,
    scorer: str | None,
    pending: dict[str, int] | None = None,
) -> list[TaskItem]:
    rows = _read_rows(path, display, pending)
    return [_make_item(row, display, template, scorer) for row in rows]


UNREVIEWED = ("pending", "rejected")  # ``status`` values of rows that are not items


def unreviewed(data: Mapping[str, Any]) -> bool:
    """A drafted row nobody approved yet (or one rejected): never an item."""
    return str(data.get("status") or "").strip().lower() in UNREVIEWED


_pending_said: set[str] = set()


def _say_pending(pending: Mapping[str, int]) -> None:
    """One sentence on stderr, once per process and set of files, about drafts that wait."""
    import sys

    if not sum(pending.values()):
        return
    said = "; ".join(f"{n} in {file}" for file, n in pending.items())
    if said in _pending_said:
        return
    _pending_said.add(said)
    total = sum(pending.values())
    print(
        f"note: {total} drafted task item{'s' if total != 1 else ''} await review and are "
        f"not used to train or gate ({said}); approve them with 'skillvc review'.",
        file=sys.stderr,
    )


def _read_rows(path: Path, display: str, pending: dict[str, int] | None = None) -> list[_Row]:
    """The rows of a task file that are items; ``pending`` counts, per file, those that wait."""
    rows = _read_rows_all(path, display)
    if pending is not None:
        waiting = sum(1 for r in rows if str(r.data.get("status") or "").lower() == "pending")
        if waiting:
            pending[display] = pending.get(display, 0) + waiting
    return [row for row in rows if not unreviewed(row.data)]


def _read_rows_all(path: Path, display: str) -> list[_Row]:
    suffix = path.suffix.lower()
    readers = {".jsonl": _jsonl_rows, ".json": _json_rows, ".csv": _csv_rows}
    if suffix not in readers:
        raise TaskSetError(
            f"Task file {display} has an unknown extension '{path.suffix}' "
            "(expected .jsonl, .json or .csv)."
        )
    text = _read_text(path, display)
    return list(readers[suffix](text, display))


def _read_text(path: Path, display: str) -> str:
    # One reader for every input file: a pipe or device is refused by name (never waited
    # on), the size is capped, the text is strict UTF-8 without a spreadsheet's BOM.
    text = inputs.read_text(
        path,
        f"Task file {display}",
        max_bytes=inputs.TASKS_MAX_BYTES,
        error=TaskSetError,
        missing=_missing_task_file,
    )
    from skillvc.secrets.taskfiles import warn_task_file

    warn_task_file(display, text)
    return text


def _missing_task_file(message: str) -> TaskSetError:
    return TaskSetError(message, hint="Check the file names under [tasks] in skillvc.toml.")


def _jsonl_rows(text: str, display: str) -> Iterator[_Row]:
    # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+0085, \x1c..., which
    # JSON allows unescaped inside strings (json.dumps(..., ensure_ascii=False) writes them).
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value = _parse_json(line, f"{display} line {number}", with_line=False)
        yield _Row(_require_object(value, display, f"line {number}"), f"line {number}", number)


def _json_limit(exc: ValueError | RecursionError) -> str:
    """What json.loads hit that is not a syntax error: a too long integer or too deep nesting."""
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return str(exc).split(":")[0]  # "Exceeds the limit (4300 digits) for integer string ..."


def _parse_json(text: str, where: str, *, with_line: bool) -> Any:
    """``json.loads`` whose failures are one TaskSetError sentence naming ``where``."""
    try:
        return inputs.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
        raise TaskSetError(f"{where} is not valid JSON ({exc.msg} at {at}).") from None
    except inputs.StrictJSONError as exc:
        raise TaskSetError(f"{where} cannot be used: {exc}.") from None
    except (ValueError, RecursionError) as exc:
        raise TaskSetError(f"{where} cannot be read ({_json_limit(exc)}).") from None


def _json_rows(text: str, display: str) -> Iterator[_Row]:
    value = _parse_json(text, display, with_line=True)
    if isinstance(value, dict):
        value = next((value[k] for k in ("items", "data") if isinstance(value.get(k), list)), None)
    if not isinstance(value, list):
        raise TaskSetError(
            f'{display} must hold a list of task objects or an object with an "items" or '
            '"data" list.'
        )
    for number, entry in enumerate(value, start=1):
        yield _Row(_require_object(entry, display, f"item {number}"), f"item {number}", number)


def _csv_rows(text: str, display: str) -> Iterator[_Row]:
    _check_quotes_closed(text, display)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            number = reader.line_num
            if None in row:  # DictReader puts surplus cells under the key None
                raise TaskSetError(
                    f"{display} line {number} has more cells than the header "
                    f"({len(reader.fieldnames or [])} columns)."
                )
            yield _Row(dict(row), f"line {number}", number, csv=True)
    except csv.Error as exc:
        raise TaskSetError(f"{display} line {reader.line_num} is not valid CSV ({exc}).") from None


def _check_quotes_closed(text: str, display: str) -> None:
    """Refuse a quoted cell still open at the end of the file.

    The csv module (not strict, so it reads what spreadsheets write) would swallow every
    later line into that one cell; the user would then hear that its row "has no target".
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    while True:
        try:
            next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise TaskSetError(
                    f'{display} line {start} opens a quoted cell (") that is never closed.',
                    hint='Close the quote; a " inside a quoted cell is written "".',
                ) from None
            return  # other strict-only complaints (a stray quote mid-cell) are tolerated
        start = reader.line_num + 1


_JSON_TYPE_NAMES = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _require_object(value: Any, display: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        kind = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
        raise TaskSetError(f"{display} {where} is not a JSON object (it is {kind}).")
    return value


# -- turning a row into an item ---------------------------------------------------------------


def _make_item(row: _Row, display: str, template: str, set_scorer: str | None) -> TaskItem:
    if _is_promptfoo(row.data):
        fields, targets, scorer = _promptfoo(row, display)
    else:
        fields, targets, scorer = row.data, None, None
    metadata = _metadata(_get(row, fields, "metadata"), row, display)
    if scorer is None:
        given = _get(row, fields, "scorer") or metadata.get("scorer")
        scorer = str(given) if given else None
    text = _render_input(fields, row, display, template)
    if targets is None:
        targets = _targets(row, fields)
    effective = scorer or set_scorer
    if not targets and effective is not None and effective not in TARGETLESS_SCORERS:
        raise TaskSetError(
            f"{display} {row.where} has no target (expected one of {', '.join(TARGET_FIELDS)})."
        )
    choices = _strings(_get(row, fields, "choices"), row, display, "choices")
    given_id = row.data.get("id", fields.get("id"))
    if given_id is None or given_id == "":
        item_id = "t" + content_id({"input": text, "targets": list(targets)})[:10]
    else:
        item_id = str(given_id)
    return TaskItem(
        id=item_id,
        input=text,
        targets=targets,
        choices=choices,
        metadata=metadata,
        scorer=scorer,
        fields=fields,
        source=f"{display}:{row.number}",
    )


def _is_promptfoo(data: Mapping[str, Any]) -> bool:
    return isinstance(data.get("vars"), dict)


def _promptfoo(
    row: _Row, display: str
) -> tuple[dict[str, Any], tuple[str, ...] | None, str | None]:
    """promptfoo test case: vars are the fields; the first usable assert gives the target."""
    fields: dict[str, Any] = dict(row.data["vars"])
    for key in ("id", "metadata"):  # promptfoo keeps these beside vars, not in them
        if key in row.data and key not in fields:
            fields[key] = row.data[key]
    asserts = row.data.get("assert") or []
    if not isinstance(asserts, list):
        raise TaskSetError(f"{display} {row.where} has an 'assert' that is not a list.")
    types = [a.get("type") for a in asserts if isinstance(a, dict)]
    for check in asserts:
        if isinstance(check, dict) and check.get("type") in PROMPTFOO_ASSERTS:
            value = check.get("value")
            return fields, _as_strings(value), PROMPTFOO_ASSERTS[check["type"]]
    if asserts:
        raise TaskSetError(
            f"{display} {row.where} has no supported assert (found "
            f"{', '.join(map(str, types)) or 'none'}; expected equals, contains, icontains or "
            "regex)."
        )
    return fields, None, None


def _get(row: _Row, fields: Mapping[str, Any], key: str) -> Any:
    """A field's value; in CSV a blank cell counts as absent and a JSON list/object is parsed."""
    value = fields.get(key)
    if not row.csv or not isinstance(value, str):
        return value
    stripped = value.strip()
    if not stripped:
        return None
    if key in ("answers", "choices", "metadata") and stripped[:1] in "[{":
        try:
            return inputs.loads(stripped)
        except (ValueError, RecursionError):  # JSONDecodeError, too many digits, too deep
            return value  # a cell that merely starts with a bracket is plain text
    return value


def _render_input(fields: Mapping[str, Any], row: _Row, display: str, template: str) -> str:
    if template == DEFAULT_TEMPLATE:
        for key in INPUT_FIELDS:
            value = _get(row, fields, key)
            # Blank text is no input: the model would get an empty user message.
            if value is not None and not (isinstance(value, str) and not value.strip()):
                return _input_text(value)
        raise TaskSetError(
            f"{display} {row.where} has no input (expected one of {', '.join(INPUT_FIELDS)}, "
            "or set input_template in [tasks])."
        )
    try:
        text = template.format_map(fields)
    except KeyError as exc:
        raise TaskSetError(
            f"{display} {row.where} has no field '{exc.args[0]}' used by input_template "
            f"{template!r}."
        ) from None
    except (ValueError, IndexError, AttributeError, TypeError) as exc:
        raise TaskSetError(
            f"input_template {template!r} cannot be rendered for {display} {row.where} ({exc})."
        ) from None
    if not text.strip():
        raise TaskSetError(f"{display} {row.where} renders to an empty input.")
    return text


def _input_text(value: Any) -> str:
    """Inputs are text; chat-style message lists (OpenAI evals) are flattened readably."""
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and "content" in m for m in value)
    ):
        if len(value) == 1:
            return str(value[0]["content"])
        return "\n\n".join(f"{m.get('role', 'user')}: {m['content']}" for m in value)
    return json.dumps(value, ensure_ascii=False)


def _targets(row: _Row, fields: Mapping[str, Any]) -> tuple[str, ...]:
    for key in TARGET_FIELDS:
        value = _get(row, fields, key)
        if value is not None:
            return _as_strings(value)
    return ()


def _as_strings(value: Any) -> tuple[str, ...]:
    """A target value as acceptable answers: a list gives several, anything else one."""
    if value is None:
        return ()
    if isinstance(value, list):
        return tuple(_scalar_text(v) for v in value if v is not None)
    return (_scalar_text(value),)


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    # JSON spelling (true, 3, {"a":1}) so a json scorer can json.loads the target back.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _strings(value: Any, row: _Row, display: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TaskSetError(f"{display} {row.where} has {name} that are not a list.")
    return tuple(_scalar_text(v) for v in value)


def _metadata(value: Any, row: _Row, display: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskSetError(f"{display} {row.where} has metadata that is not an object.")
    return dict(value)


# -- loading a whole set ----------------------------------------------------------------------


def load_taskset(config: TasksConfig, root: Path) -> TaskSet:
    """Load the configured task set (paths relative to ``root``) and check its integrity."""
    layouts = [
        name
        for name, given in (
            ("skillopt_dir", config.skillopt_dir),
            ("path", config.path),
            ("train/val/test", config.train or config.val or config.test),
        )
        if given
    ]
    if not layouts:
        raise TaskSetError(
            "No task files are configured.",
            hint="Set [tasks] train (and val, test), path or skillopt_dir in skillvc.toml.",
        )
    if len(layouts) > 1:
        raise TaskSetError(
            f"[tasks] sets both {layouts[0]} and {layouts[1]}; use one way to give the splits.",
            hint="Keep one of train/val/test, path or skillopt_dir in [tasks].",
        )
    pending: dict[str, int] = {}
    if config.skillopt_dir:
        splits = _load_skillopt(config, root)
    elif config.path:
        splits = _load_single(config, root, pending)
    else:
        splits = {
            name: _read_file(
                _inside(root, rel, name),
                _display(rel),
                config.input_template,
                config.scorer,
                pending,
            )
            if (rel := getattr(config, name))
            else []
            for name in SPLITS
        }
    splits = {name: [_attach(item, root) for item in items] for name, items in splits.items()}
    _say_pending(pending)
    problems = _overlaps(splits)
    if problems and not config.allow_overlap:
        shown = "; ".join(problems[:MAX_NAMED])
        more = f"; and {len(problems) - MAX_NAMED} more" if len(problems) > MAX_NAMED else ""
        duplicates = any(p.startswith("duplicate id") for p in problems)
        raise TaskSetError(
            f"The task set has {len(problems)} overlap(s): {shown}{more}.",
            hint=DUPLICATE_HINT if duplicates else OVERLAP_HINT,
        )
    return TaskSet(
        train=tuple(splits["train"]),
        val=tuple(splits["val"]),
        test=tuple(splits["test"]),
        hash=taskset_hash(splits),
        allow_overlap=config.allow_overlap,
        overlaps=tuple(problems),
        pending=pending,
    )


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_IMAGE_BYTES = 5_000_000  # the providers' own per-image limit is about this


def _attach(item: TaskItem, root: Path) -> TaskItem:
    """An item's ``files`` and ``images`` (lists of repository paths), read and hashed now, so
    the set's hash covers their content and a missing file is an error before any call."""
    named = {key: item.fields.get(key, item.metadata.get(key)) for key in ("files", "images")}
    if not any(named.values()):
        return item
    found: dict[str, list[Path]] = {}
    for key, value in named.items():
        if value in (None, [], ""):
            found[key] = []
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise TaskSetError(
                f"{item.source}: '{key}' must be a list of repository paths, "
                f"not {type(value).__name__}."
            )
        paths = [
            inside_repo(root, rel, f"'{key}' of item {item.id!r} ({item.source})") for rel in value
        ]
        for rel, path in zip(value, paths, strict=True):
            if not path.is_file():
                raise TaskSetError(
                    f"{item.source}: item {item.id!r} names {rel}, which does not exist."
                )
        found[key] = paths
    files = tuple(
        (p.relative_to(root).as_posix(), sha256_hex(p.read_bytes())) for p in found["files"]
    )
    images = []
    for path in found["images"]:
        media = IMAGE_TYPES.get(path.suffix.lower())
        data = path.read_bytes()
        if media is None or len(data) > MAX_IMAGE_BYTES:
            why = "is not a PNG, JPEG, GIF or WebP" if media is None else "is over 5 MB"
            raise TaskSetError(f"{item.source}: item {item.id!r}'s image {path.name} {why}.")
        rel = path.relative_to(root).as_posix()
        images.append((rel, media, base64.b64encode(data).decode("ascii")))
    return dataclasses.replace(item, files=files, images=tuple(images))


def _display(rel: str) -> str:
    return Path(rel).as_posix()


def _inside(root: Path, rel: str, key: str) -> Path:
    """A configured task path, refused (PathOutsideRepo) when it leaves the work tree."""
    return inside_repo(root, rel, f"[tasks] {key} in skillvc.toml")


def _load_skillopt(config: TasksConfig, root: Path) -> dict[str, list[TaskItem]]:
    # SkillOpt's SearchQA items carry question and context separately; the model sees both.
    template = (
        SKILLOPT_TEMPLATE if config.input_template == DEFAULT_TEMPLATE else config.input_template
    )
    base = Path(config.skillopt_dir or "")
    refuse_id_manifest(root, base)
    env = _skillopt_env(config, root, base)
    if env != "searchqa":
        return _load_skillopt_env(env, config, root, base)
    return {
        name: _read_file(
            _inside(root, (base / name / "items.json").as_posix(), "skillopt_dir"),
            (base / name / "items.json").as_posix(),
            template,
            config.scorer,
        )
        for name in SPLITS
    }


@dataclass(frozen=True)
class SkillOptFormats:
    """How skillopt_dir's environments other than SearchQA are read: ``env_name`` (the
    canonical name of skillopt_env, or TaskSetError), ``detect`` (which environment a split
    directory's items look like) and ``read_split`` ((env, split dir, split, data root, root)
    -> (file shown, [(row, "item 3")])). skillvc.tasks.skillopt registers them on import."""

    env_name: Callable[[str], str]
    detect: Callable[[Path], str | None]
    read_split: Callable[[str, Path, str, Path, Path], tuple[str, list[tuple[dict[str, Any], str]]]]


SKILLOPT_FORMATS: list[SkillOptFormats] = []


def _skillopt_env(config: TasksConfig, root: Path, base: Path) -> str:
    """``[tasks] skillopt_env``, or SearchQA (what skillopt_dir always read) when the items
    look like SearchQA's; items of another environment without it are refused by name."""
    if not SKILLOPT_FORMATS:  # skillvc.tasks.skillopt not loaded: SearchQA only
        return "searchqa"
    if config.skillopt_env:
        return SKILLOPT_FORMATS[-1].env_name(config.skillopt_env)
    seen = SKILLOPT_FORMATS[-1].detect(root / base)
    if seen is not None:
        raise TaskSetError(
            f"skillopt_dir {base.as_posix()} holds {seen} items, and [tasks] skillopt_env is "
            "not set.",
            hint=f'Set skillopt_env = "{seen}" in [tasks] (SkillOpt\'s env.name); '
            "docs/skillopt.md says what each environment needs.",
        )
    return "searchqa"


def _load_skillopt_env(
    env: str, config: TasksConfig, root: Path, base: Path
) -> dict[str, list[TaskItem]]:
    """The splits of one of SkillOpt's other environments (skillvc.tasks.skillopt.splits)."""
    if env == "alfworld" and not config.environment:
        raise TaskSetError(
            "ALFWorld's items are games to play: [tasks] environment is not set.",
            hint='Set environment = "skillvc.tasks.skillopt.alfworld:ALFWorld" in [tasks].',
        )
    data_root = root
    if config.data_root:
        data_root = _inside(root, config.data_root, "data_root")
        if not data_root.is_dir():
            raise TaskSetError(f"[tasks] data_root {config.data_root} is not a directory.")
    _inside(root, base.as_posix(), "skillopt_dir")
    out: dict[str, list[TaskItem]] = {}
    for name in SPLITS:
        display, rows = SKILLOPT_FORMATS[-1].read_split(env, root / base, name, data_root, root)
        out[name] = [
            _make_item(
                _Row(data, where, int(where.rsplit(" ", 1)[-1])),
                display,
                config.input_template,
                config.scorer,
            )
            for data, where in rows
        ]
    return out


# SkillOpt releases its paper splits as ID manifests (data/<benchmark>_id_split/ in
# github.com/microsoft/SkillOpt: split_manifest.json with "manifest_type": "id_split", and
# {train,val,test}/items.json holding only {"id": ...}); the items themselves are materialised
# from the source dataset, for SearchQA by its scripts/materialize_searchqa.py.
SKILLOPT_MANIFEST = "split_manifest.json"
SKILLOPT_SEARCHQA_MATERIALIZE = (
    "python scripts/materialize_searchqa.py --manifest-dir data/searchqa_id_split "
    "--output-dir data/searchqa_split"
)


def refuse_id_manifest(root: Path, base: Path) -> None:
    """Raise TaskSetError when the SkillOpt split directory holds IDs, not runnable items."""
    display = base.as_posix()
    # The split files first: a path leading out of the repository is refused naming them.
    train_items = _inside(root, (base / "train" / "items.json").as_posix(), "skillopt_dir")
    manifest: dict[str, Any] = {}
    manifest_path = _inside(root, (base / SKILLOPT_MANIFEST).as_posix(), "skillopt_dir")
    if manifest_path.is_file():
        try:
            loaded = inputs.loads(_read_text(manifest_path, display + "/" + SKILLOPT_MANIFEST))
        except (TaskSetError, ValueError, RecursionError):
            loaded = None
        manifest = loaded if isinstance(loaded, dict) else {}
    if manifest.get("manifest_type") != "id_split" and not _ids_only(train_items):
        return
    benchmark = str(manifest.get("benchmark") or "")
    source = manifest.get("source_url") or manifest.get("source_repo")
    counts = manifest.get("counts")
    shown = ""
    if isinstance(counts, dict) and all(isinstance(counts.get(s), int) for s in SPLITS):
        shown = " (" + " / ".join(f"{counts[s]:,} {s}" for s in SPLITS) + ")"
    where = f" from {source}" if source else ""
    if benchmark.lower() == "searchqa":
        how = (
            f"In a SkillOpt checkout run '{SKILLOPT_SEARCHQA_MATERIALIZE}' (it downloads"
            f"{where or ' the dataset'}), then set skillopt_dir to the directory it writes."
        )
    else:
        how = (
            f"Download the {benchmark + ' ' if benchmark else ''}items{where} and write them "
            "as {train,val,test}/"
            "items.json in another directory (SkillOpt's data/README.md says how), then set "
            "skillopt_dir to it."
        )
    raise TaskSetError(
        f"skillopt_dir {display} holds only an ID manifest"
        f"{' of ' + benchmark if benchmark else ''}{shown}: item IDs, not the questions and "
        "answers to run.",
        hint=how,
    )


def _ids_only(path: Path) -> bool:
    """True when the items.json at ``path`` is a non-empty list of objects with only an id."""
    try:
        items = inputs.loads(_read_text(path, path.name))
    except (TaskSetError, ValueError, RecursionError):
        return False  # unreadable: the normal loader says why
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(item, dict) and set(item) == {"id"} for item in items)
    )


def _load_single(
    config: TasksConfig, root: Path, pending: dict[str, int] | None = None
) -> dict[str, list[TaskItem]]:
    rel = config.path or ""
    display = _display(rel)
    rows = _read_rows(_inside(root, rel, "path"), display, pending)
    items = [_make_item(row, display, config.input_template, config.scorer) for row in rows]
    labels = [_split_label(row, config.split_field, display) for row in rows]
    if not any(label is not None for label in labels):
        return _ratio_split(items, config.split_ratio, config.split_seed)
    splits: dict[str, list[TaskItem]] = {name: [] for name in SPLITS}
    for row, item, label in zip(rows, items, labels, strict=True):
        if label is None:
            raise TaskSetError(
                f"{display} {row.where} has no '{config.split_field}' field, but other rows do."
            )
        splits[label].append(item)
    return splits


def _split_label(row: _Row, split_field: str, display: str) -> str | None:
    value = row.data.get(split_field)
    if value is None and _is_promptfoo(row.data):
        value = row.data["vars"].get(split_field)
    if value is None or (row.csv and str(value).strip() == ""):
        return None
    label = SPLIT_ALIASES.get(str(value).strip().lower())
    if label is None:
        raise TaskSetError(
            f"{display} {row.where} has {split_field} '{value}' "
            f"(expected one of {', '.join(SPLIT_ALIASES)})."
        )
    return label


def _ratio_split(
    items: list[TaskItem], ratio: Sequence[float], seed: int
) -> dict[str, list[TaskItem]]:
    """Deterministic shuffle with ``random.Random(seed)``, cut at the cumulative ratios."""
    weights = list(ratio) + [0.0] * (3 - len(ratio))
    if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise TaskSetError(
            f"[tasks] split_ratio {list(ratio)} must be two or three non-negative numbers "
            "with a positive sum.",
            hint="Use e.g. split_ratio = [0.6, 0.2, 0.2] in [tasks].",
        )
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    total = sum(weights)
    n = len(items)
    # Round half up at each cumulative cut so counts do not depend on banker's rounding.
    cut1 = math.floor(n * weights[0] / total + 0.5)
    cut2 = math.floor(n * (weights[0] + weights[1]) / total + 0.5)
    parts = (order[:cut1], order[cut1:cut2], order[cut2:])
    # Within a split keep file order: easier to read and still a pure function of the seed.
    return {
        name: [items[i] for i in sorted(part)] for name, part in zip(SPLITS, parts, strict=True)
    }


def _overlaps(splits: Mapping[str, Sequence[TaskItem]]) -> list[str]:
    """Duplicate ids anywhere and inputs shared by two splits, described for a human."""
    problems: list[str] = []
    by_id: dict[str, list[TaskItem]] = {}
    by_input: dict[str, dict[str, TaskItem]] = {}
    for name in SPLITS:
        for item in splits[name]:
            by_id.setdefault(item.id, []).append(item)
            # Only the first item per split counts: the check is about leakage between splits.
            by_input.setdefault(" ".join(item.input.split()), {}).setdefault(name, item)
    for item_id, items in by_id.items():
        if len(items) > 1:
            problems.append(f"duplicate id '{item_id}' ({', '.join(i.source for i in items)})")
    for per_split in by_input.values():
        if len(per_split) > 1:
            named = ", ".join(f"'{i.id}' in {s} ({i.source})" for s, i in per_split.items())
            problems.append(f"same input in {named}")
    return problems
