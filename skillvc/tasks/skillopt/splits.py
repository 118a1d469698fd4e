"""SkillOpt's materialised split directories (``data/<env>_split/{train,val,test}/``) read as
task rows, one environment at a time.

A row is what ``skillvc.tasks.taskset`` makes an item of: ``id``, ``input`` (the text the model
gets, as SkillOpt's rollout builds it), targets (``answers``/``target``), ``metadata`` (what the
environment's scorer needs), ``files`` (repository paths copied into the rollout's scratch
directory) and ``images`` (repository paths sent with the input).

Invariants:

* Files an item points to resolve under ``data_root`` (a directory inside the repository,
  the repository itself by default) and must exist when the set loads; a missing one is a
  ``TaskSetError`` naming the item, the file and where it was looked for.
* An answer workbook (SpreadsheetBench) is never among ``files``: the model must not see it.
  Its repository path and SHA-256 are in the metadata (so the set's hash covers it) and its
  absolute path in the row's ``answer_workbooks`` field (outside the hash), for the scorer.
* ALFWorld items point into ``$ALFWORLD_DATA`` and are played, not read: their game files are
  checked by the environment (``skillvc.tasks.skillopt.alfworld``), not here.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skillvc.core.errors import TaskSetError
from skillvc.inputs import reader as inputs
from skillvc.tasks import taskset

SPLITS = ("train", "val", "test")
ENVS = ("searchqa", "livemathematicianbench", "docvqa", "officeqa", "spreadsheetbench", "alfworld")
ALIASES = {"livemath": "livemathematicianbench"}
TOOLS_HINT = {
    "officeqa": 'python = ["skillvc.tasks.skillopt.tools.officeqa"]',
    "spreadsheetbench": "code = true",
}
Row = tuple[dict[str, Any], str]  # the row and where it is ("item 3", "line 7")


def env_name(given: str) -> str:
    """The canonical name of ``[tasks] skillopt_env``; TaskSetError for an unknown one."""
    name = ALIASES.get(given.strip().lower(), given.strip().lower())
    if name not in ENVS:
        from skillvc.core.suggest import did_you_mean

        raise TaskSetError(
            f"[tasks] skillopt_env is {given!r}, which is not one of SkillOpt's environments.",
            hint=did_you_mean(given, list(ENVS), listed="They are", then="Set one of them."),
        )
    return name


def detect(split_dir: Path) -> str | None:
    """Which environment a split directory's train items look like (None: SearchQA's rows, or
    nothing recognisable), so a missing ``skillopt_env`` can be named."""
    train = split_dir / "train"
    if any(train.glob("*.csv")):
        return "docvqa"
    try:
        items = json.loads((train / "items.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    first = items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}
    if "gamefile" in first:
        return "alfworld"
    if "spreadsheet_path" in first or "answer_position" in first:
        return "spreadsheetbench"
    if "correct_choice" in first or "mcq" in first:
        return "livemathematicianbench"
    if "image_path" in first or "questionId" in first:
        return "docvqa"
    if "source_files" in first or "uid" in first:
        return "officeqa"
    return None


def read_split(
    env: str, split_dir: Path, name: str, data_root: Path, root: Path
) -> tuple[str, list[Row]]:
    """The rows of one split (``name``) of an environment's split directory, and the file they
    were read from (a repository path, for messages and item sources)."""
    return _READERS[env](split_dir / name, _Where(root, data_root, env))


class _Where:
    """The repository, the data root, and the environment, for resolving an item's files."""

    def __init__(self, root: Path, data_root: Path, env: str) -> None:
        self.root = root.resolve()
        self.data_root = data_root.resolve()
        self.env = env
        self._by_name: dict[str, list[Path]] | None = None

    def rel(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def shown(self, path: Path) -> str:
        try:
            return self.rel(path)
        except ValueError:
            return str(path)

    def under_root(self, given: str, what: str, item: str) -> Path:
        path = (self.data_root / given).resolve()
        if not path.is_relative_to(self.data_root) and not path.is_relative_to(self.root):
            raise TaskSetError(f"Item {item!r}'s {what} {given!r} leads out of data_root.")
        if not path.exists():
            raise TaskSetError(
                f"Item {item!r}'s {what} {given} is not under data_root "
                f"({self.shown(self.data_root)}).",
                hint="Set [tasks] data_root to the directory the items' paths are relative to "
                "(it must be inside the repository).",
            )
        return path

    def find(self, file_name: str, item: str) -> Path:
        """A document named ``file_name`` anywhere under data_root (OfficeQA names files, not
        paths); a ``transformed/`` copy is preferred, as SkillOpt's document tools do."""
        if self._by_name is None:
            index: dict[str, list[Path]] = {}
            for path in sorted(self.data_root.rglob("*")):
                if path.is_file():
                    index.setdefault(path.name, []).append(path)
            self._by_name = index
        found = self._by_name.get(Path(file_name).name, [])
        if not found:
            raise TaskSetError(
                f"Item {item!r} names the document {file_name}, which is nowhere under "
                f"data_root ({self.shown(self.data_root)}).",
                hint="Set [tasks] data_root to the OfficeQA documents' directory (SkillOpt's "
                "env.data_dirs, e.g. data/officeqa_docs_official).",
            )
        return next((p for p in found if "transformed" in p.parts), found[0])


def _text(path: Path, where: _Where) -> str:
    from skillvc.secrets.taskfiles import warn_task_file

    text = inputs.read_text(
        path,
        f"Task file {where.shown(path)}",
        max_bytes=inputs.TASKS_MAX_BYTES,
        error=TaskSetError,
        missing=lambda message: TaskSetError(
            message, hint="Check [tasks] skillopt_dir and skillopt_env in skillvc.toml."
        ),
    )
    warn_task_file(where.shown(path), text)
    return text


def _json_items(split: Path, where: _Where) -> tuple[str, Iterator[Row]]:
    files = sorted(split.glob("*.json"))
    if not files:
        raise TaskSetError(
            f"{where.shown(split)} holds no .json items file.",
            hint="SkillOpt's split directories hold {train,val,test}/items.json.",
        )
    display = where.shown(files[0])
    try:
        value = inputs.loads(_text(files[0], where))
    except (ValueError, RecursionError) as exc:
        raise TaskSetError(f"{display} is not valid JSON ({exc}).") from None
    if isinstance(value, dict):
        value = value.get("data", value.get("items"))
    if not isinstance(value, list):
        raise TaskSetError(f"{display} must hold a list of items.")
    rows = []
    for number, entry in enumerate(value, start=1):
        if not isinstance(entry, dict):
            raise TaskSetError(f"{display} item {number} is not a JSON object.")
        rows.append((entry, f"item {number}"))
    return display, iter(rows)


def _csv_or_json(split: Path, where: _Where) -> tuple[str, Iterator[Row]]:
    files = sorted(split.glob("*.csv"))
    if not files:
        return _json_items(split, where)
    display = where.shown(files[0])
    reader = csv.DictReader(io.StringIO(_text(files[0], where), newline=""))
    return display, iter([(dict(row), f"line {reader.line_num}") for row in reader])


def _list_field(value: Any) -> list[str]:
    """A list given as a list, a JSON or Python list literal, lines, or commas (not inside a
    file name ending in .txt)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value).strip()
    if not text:
        return []
    if text[0] == "[":
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(parsed, list):
                return [str(v).strip() for v in parsed if str(v).strip()]
    if "\n" in text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    if "," in text and not text.lower().endswith(".txt"):
        return [part.strip() for part in text.split(",") if part.strip()]
    return [text]


def _need(row: dict[str, Any], keys: tuple[str, ...], display: str, at: str) -> Any:
    for key in keys:
        value = row.get(key)
        if value not in (None, "", [], {}):
            return value
    raise TaskSetError(f"{display} {at} has no {' or '.join(keys)}.")


# -- each environment ---------------------------------------------------------------------------


def _livemath(split: Path, where: _Where) -> tuple[str, list[Row]]:
    display, rows = _json_items(split, where)
    out = []
    for row, at in rows:
        mcq: dict[str, Any] = row["mcq"] if isinstance(row.get("mcq"), dict) else {}
        question = str(mcq.get("question") or row.get("question") or "").strip()
        raw = mcq.get("choices") or row.get("choices") or []
        if isinstance(raw, dict):
            raw = [{"label": k, "text": raw[k]} for k in sorted(raw)]
        choices = []
        for index, choice in enumerate(raw if isinstance(raw, list) else []):
            if isinstance(choice, dict):
                label = str(choice.get("label") or chr(65 + index)).strip()
                text = str(choice.get("text") or choice.get("content") or "").strip()
            else:
                label, text = chr(65 + index), str(choice).strip()
            if text:
                choices.append({"label": label, "text": text})
        correct = mcq.get("correct_choice") or row.get("correct_choice") or {}
        label = str(correct.get("label", "") if isinstance(correct, dict) else correct)
        label = label.strip().upper().rstrip(".):")
        if not question or not choices or not label:
            raise TaskSetError(
                f"{display} {at} is not a LiveMathematicianBench item (it needs question, "
                "choices and correct_choice)."
            )
        month, no = str(row.get("month") or "").strip(), row.get("no")
        item_id = row.get("id") or (f"{month}:{no}" if month and no is not None else None)
        listed = "\n".join(f"{c['label']}. {c['text']}" for c in choices)
        reference = "\n\n".join(
            f"{name}:\n{row[key].strip()}"
            for key, name in (("theorem", "Theorem"), ("sketch", "Proof sketch"))
            if isinstance(row.get(key), str) and row[key].strip()
        )
        types = row.get("theorem_type")
        out.append(
            (
                {
                    "id": item_id,
                    "input": f"## Question\n{question}\n\n## Choices\n{listed}",
                    "target": label,
                    "choices": [c["text"] for c in choices],
                    "metadata": {
                        "choices": choices,
                        "task_type": ", ".join(types) if isinstance(types, list) else types or "",
                        "paper_link": row.get("paper_link") or "",
                    },
                    **({"reference": reference} if reference else {}),
                },
                at,
            )
        )
    return display, out


def _docvqa(split: Path, where: _Where) -> tuple[str, list[Row]]:
    display, rows = _csv_or_json(split, where)
    out = []
    for row, at in rows:
        question = str(row.get("question") or "")
        question, _, document = question.partition("document_path:")
        answers = _list_field(row.get("answers") or row.get("answer") or row.get("ground_truth"))
        item_id = str(row.get("questionId") or row.get("id") or "").strip()
        image = str(row.get("image_path") or document or "").strip()
        if not question.strip() or not answers or not image:
            raise TaskSetError(
                f"{display} {at} is not a DocVQA item (it needs question, answer and image_path)."
            )
        path = where.under_root(image, "image", item_id or at)
        task_type = str(row.get("topic") or row.get("category") or "docvqa").strip()
        out.append(
            (
                {
                    "id": item_id or None,
                    "input": question.strip(),
                    "answers": answers,
                    "images": [where.rel(path)],
                    "metadata": {
                        "task_type": task_type or "docvqa",
                        "docId": str(row.get("docId") or ""),
                    },
                },
                at,
            )
        )
    return display, out


def _officeqa(split: Path, where: _Where) -> tuple[str, list[Row]]:
    display, rows = _csv_or_json(split, where)
    out = []
    for row, at in rows:
        item_id = str(row.get("uid") or row.get("id") or "").strip()
        question = str(_need(row, ("question",), display, at)).strip()
        gold = str(_need(row, ("ground_truth", "answer"), display, at)).strip()
        names = _list_field(row.get("source_files"))
        hints = _list_field(row.get("source_docs"))
        files = [where.find(name, item_id or at) for name in names]
        parts = [f"## Question\n{question}"]
        listed = "\n".join(f"- {p.name}" for p in files) or "- none"
        parts.append(f"## Candidate Files\n{listed}")
        if hints:
            parts.append("## Source Hints\n" + "\n".join(f"- {h}" for h in hints))
        category = str(row.get("category") or row.get("difficulty") or "officeqa").strip()
        out.append(
            (
                {
                    "id": item_id or None,
                    "input": "\n\n".join(parts),
                    "target": gold,
                    "files": [where.rel(p) for p in files],
                    "metadata": {"task_type": category or "officeqa", "source_files": names},
                },
                at,
            )
        )
    return display, out


# SpreadsheetBench's test-case file names in a task directory: numbered input/answer pairs,
# numbered init/golden pairs (Verified 400), or one bare initial/golden pair.
_CASE_PAIRS = (("_input.xlsx", "_answer.xlsx"), ("_init.xlsx", "_golden.xlsx"))


def spreadsheet_cases(task_dir: Path) -> list[tuple[str, Path, Path]]:
    """(number, input workbook, answer workbook) of each test case, by number."""
    cases = []
    for given, wanted in _CASE_PAIRS:
        for path in sorted(task_dir.glob(f"*{given}")):
            answer = path.with_name(path.name[: -len(given)] + wanted)
            if answer.is_file():
                cases.append((path.name.split("_", 1)[0], path, answer))
    bare = (task_dir / "initial.xlsx", task_dir / "golden.xlsx")
    if not cases and bare[0].is_file() and bare[1].is_file():
        cases.append(("1", *bare))
    return cases


def output_name(number: str) -> str:
    return f"{number}_output.xlsx"


def _spreadsheet(split: Path, where: _Where) -> tuple[str, list[Row]]:
    display, rows = _json_items(split, where)
    out = []
    for row, at in rows:
        item_id = str(_need(row, ("id",), display, at))
        instruction = str(_need(row, ("instruction",), display, at)).strip()
        position = str(row.get("answer_position") or "").strip()
        sheet = str(row.get("answer_sheet") or "").strip()
        if position and sheet and "!" not in position:
            position = f"{sheet}!{position}"
        task_dir = where.under_root(
            str(row.get("spreadsheet_path") or f"spreadsheet/{item_id}"), "spreadsheet", item_id
        )
        cases = spreadsheet_cases(task_dir)
        if not cases:
            raise TaskSetError(
                f"Item {item_id!r}'s spreadsheet directory {where.shown(task_dir)} has no test "
                "case (N_<id>_input.xlsx with N_<id>_answer.xlsx, N_<id>_init.xlsx with "
                "N_<id>_golden.xlsx, or initial.xlsx with golden.xlsx)."
            )
        kind = str(row.get("instruction_type") or "")
        lines = "\n".join(f"- {i.name} -> write {output_name(n)}" for n, i, _ in cases)
        parts = [
            f"# Instruction\n{instruction}",
            f"# Input files (in the working directory)\n{lines}",
        ]
        if kind:
            parts.append(f"# Instruction type\n{kind}")
        if position:
            parts.append(f"# Answer position\n{position}")
        parts.append(
            "Manipulate each input spreadsheet according to the instruction and save each "
            "result as its output file in the working directory."
        )
        out.append(
            (
                {
                    "id": item_id,
                    "input": "\n\n".join(parts),
                    "files": [where.rel(i) for _, i, _ in cases],
                    "answer_workbooks": {n: str(a) for n, _, a in cases},
                    "metadata": {
                        "task_type": kind or "other",
                        "answer_position": position,
                        "cases": [
                            {
                                "no": n,
                                "output": output_name(n),
                                "answer": where.rel(a),
                                "answer_sha256": hashlib.sha256(a.read_bytes()).hexdigest(),
                            }
                            for n, _, a in cases
                        ],
                    },
                },
                at,
            )
        )
    return display, out


def _alfworld(split: Path, where: _Where) -> tuple[str, list[Row]]:
    display, rows = _json_items(split, where)
    out = []
    for row, at in rows:
        gamefile = str(_need(row, ("gamefile",), display, at))
        task_type = str(row.get("task_type") or "").strip()
        out.append(
            (
                {
                    "id": row.get("id"),
                    # The episode's first observation (reset) is what the model reads; this
                    # text names the game for listings and the log.
                    "input": f"ALFWorld game {gamefile}",
                    "metadata": {"gamefile": gamefile, "task_type": task_type or "alfworld"},
                },
                at,
            )
        )
    return display, out


_READERS: dict[str, Callable[[Path, _Where], tuple[str, list[Row]]]] = {
    "livemathematicianbench": _livemath,
    "docvqa": _docvqa,
    "officeqa": _officeqa,
    "spreadsheetbench": _spreadsheet,
    "alfworld": _alfworld,
}


taskset.SKILLOPT_FORMATS.append(taskset.SkillOptFormats(env_name, detect, read_split))
