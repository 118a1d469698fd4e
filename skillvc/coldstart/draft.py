"""``skillvc tasks draft``: the optimizer drafts a skill's task set, written as pending.

Invariants:
- Nothing drafted trains or gates before a person approves it: every row is written with
  ``"status": "pending"``, which the task loader skips (``skillvc.tasks.taskset.unreviewed``).
- Every row carries its provenance: the draft (a run id of its own), the model, the hash of the
  prompt it was drafted from, the model call's key in the event log (its first 16
  characters), and the date.
- A draft holding a secret (skillvc's detectors, or a redaction mark left by the log's
  scrubber) or a run of the skill's own text (``VERBATIM_WORDS`` words in a row) is dropped and
  counted, never written. So is a near-duplicate, of a kept draft or of an item already in the
  task files (normalised text, token-set Jaccard at least ``DUPLICATE_SIMILARITY``), and an
  answer that is no usable item (``malformed``).
- The split is a pure function of the drafts' order and the rows already there: kinds are
  spread over train/val/test in the pattern ``SPLIT_PATTERN`` (60/20/20), and as duplicates
  are removed first, no input is in two splits.
- The ``tasks.drafted`` event holds every written row, the counts dropped and the spread; the
  task files are where they go to be reviewed (``skillvc review``) and committed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillvc.core.errors import ConfigError, SkillvcError
from skillvc.core.hashing import content_id, sha256_hex
from skillvc.core.paths import inside_repo
from skillvc.core.store import EventStore
from skillvc.inputs import reader as inputs
from skillvc.models import prompts
from skillvc.sleep import mine
from skillvc.tasks.taskset import SPLITS
from skillvc.workspace.workspace import Workspace

Progress = Callable[[str], None]
KINDS = ("typical", "edge", "should_not_apply")
SPLIT_PATTERN = ("train", "val", "train", "test", "train")
DUPLICATE_SIMILARITY = 0.8
VERBATIM_WORDS = 12
MAX_MATERIAL_CHARS = 12_000
MAX_EXISTING_SHOWN = 40
DRAFTED_BY = "skillvc tasks draft"
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_WORD = re.compile(r"\w+")
_KIND_ALIASES = {
    "typical": "typical",
    "realistic": "typical",
    "normal": "typical",
    "edge": "edge",
    "edge_case": "edge",
    "edge case": "edge",
    "should_not_apply": "should_not_apply",
    "should not apply": "should_not_apply",
    "should-not-apply": "should_not_apply",
    "negative": "should_not_apply",
    "out_of_scope": "should_not_apply",
}


class DraftRefused(SkillvcError):
    """The task set is laid out in a way drafts cannot be written into."""

    exit_code = 5


@dataclass
class DraftResult:
    """What a draft wrote, dropped and how its items spread."""

    draft: str
    model: str
    prompt: str  # the prompt's hash
    call: str  # the model call's key in the event log
    items: list[dict[str, Any]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    spread: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # split -> task file written
    configured: list[str] = field(default_factory=list)  # [tasks] lines this draft added
    config_note: str | None = None  # lines to add by hand (a many-skill config)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- reading the skill ------------------------------------------------------------------------


def sections(skill: str) -> list[str]:
    """The skill's Markdown headings, in order (none inside code fences or frontmatter)."""
    out: list[str] = []
    fenced = False
    lines = skill.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        start = 0 if end is None else end + 1
    for line in lines[start:]:
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            out.append(match.group(1).strip())
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(text: str, size: int = VERBATIM_WORDS) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def copies_skill(text: str, skill_shingles: set[tuple[str, ...]]) -> bool:
    """Whether ``text`` holds ``VERBATIM_WORDS`` words in a row of the skill's own text."""
    return bool(skill_shingles) and not shingles(text).isdisjoint(skill_shingles)


def holds_secret(texts: Sequence[str]) -> bool:
    from skillvc.secrets import REDACTED, findings

    return any(REDACTED in t or findings(t) for t in texts)


# -- parsing the optimizer's answer -----------------------------------------------------------


def _strings(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v).strip() for v in value if str(v).strip()]
    return None


def parse_items(text: str) -> tuple[list[dict[str, Any]], int]:
    """The usable drafted items of an answer and how many were not (``malformed``)."""
    try:
        answer = prompts.parse_json_object(text, "items")
    except prompts.ParseError:
        return [], 1
    raw = answer.get("items")
    if not isinstance(raw, list):
        return [], 1
    items: list[dict[str, Any]] = []
    bad = 0
    for entry in raw:
        if not isinstance(entry, dict):
            bad += 1
            continue
        text_in = entry.get("input")
        targets = _strings(entry.get("targets", entry.get("target")))
        rubric = entry.get("rubric")
        rubric = rubric.strip() if isinstance(rubric, str) else ""
        if not isinstance(text_in, str) or not text_in.strip() or targets is None:
            bad += 1
            continue
        if not targets and not rubric:
            bad += 1
            continue
        kind = _KIND_ALIASES.get(str(entry.get("kind") or "").strip().lower(), "typical")
        items.append(
            {
                "input": text_in.strip(),
                "targets": targets,
                "rubric": rubric,
                "kind": kind,
                "section": str(entry.get("section") or "").strip(),
            }
        )
    return items, bad


# -- the task files ---------------------------------------------------------------------------


def task_files(ws: Workspace) -> tuple[dict[str, str], dict[str, str]]:
    """(split -> task file for drafts, split -> [tasks] key to add for those not configured)."""
    tasks = ws.config.tasks
    if tasks.path or tasks.skillopt_dir:
        layout = "path" if tasks.path else "skillopt_dir"
        raise DraftRefused(
            f"[tasks] gives the splits by {layout}; drafts are written to one JSONL file a split.",
            hint="Set [tasks] train, val and test (JSONL files) to draft into them.",
        )
    name = ws.config.skill_name if ws.config.many else None
    base = f"evals/{name}" if name else "evals"
    files: dict[str, str] = {}
    missing: dict[str, str] = {}
    for split in SPLITS:
        given = getattr(tasks, split)
        if given and not given.endswith(".jsonl"):
            raise DraftRefused(
                f"[tasks] {split} is {given}; drafts are written to JSONL task files.",
                hint=f"Point [tasks] {split} at a .jsonl file (it may be new).",
            )
        files[split] = given or f"{base}/{split}.jsonl"
        if not given:
            missing[split] = files[split]
    return files, missing


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every JSON object row of a JSONL task file (pending, rejected and approved alike)."""
    if not path.is_file():
        return []
    text = inputs.read_text(path, f"Task file {path.name}", max_bytes=inputs.TASKS_MAX_BYTES)
    rows = []
    for line in text.split("\n"):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue  # the loader names a bad line; a draft only needs the good ones
            if isinstance(value, dict):
                rows.append(value)
    return rows


def row_input(row: Mapping[str, Any]) -> str:
    for key in ("input", "question", "prompt", "query"):
        if isinstance(row.get(key), str):
            return str(row[key])
    return ""


def append_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    from skillvc.repo.skillrepo import write_atomic

    before = path.read_bytes() if path.is_file() else b""
    if before and not before.endswith(b"\n"):
        before += b"\n"
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    write_atomic(path, before + body.encode("utf-8"))


def configure_tasks(root: Path, missing: Mapping[str, str]) -> list[str]:
    """Add ``missing`` split files under ``[tasks]`` in skillvc.toml; the lines added.

    The file is edited as text (its comments stay) and loaded again; when the result does not
    load, or has no ``[tasks]`` header, the file is left as it was and nothing is added."""
    from skillvc.core.config import CONFIG_FILE, load_config
    from skillvc.repo.skillrepo import write_atomic

    path = root / CONFIG_FILE
    original = path.read_bytes()
    lines = original.decode("utf-8").split("\n")
    at = next((i for i, line in enumerate(lines) if line.strip() == "[tasks]"), None)
    if at is None:
        return []
    added = [f'{split} = "{rel}"' for split, rel in missing.items()]
    write_atomic(path, "\n".join(lines[: at + 1] + added + lines[at + 1 :]).encode("utf-8"))
    try:
        config = load_config(root)
        if any(getattr(config.tasks, s) != rel for s, rel in missing.items()):
            raise ConfigError("the added lines did not take")
    except SkillvcError:
        write_atomic(path, original)
        return []
    return added


# -- the library call -------------------------------------------------------------------------


def _client(ws: Workspace, store: EventStore, run_id: str) -> Any:
    from skillvc.models.clients import optimizer_client

    return optimizer_client(ws.config, store, run_id)


def material(ws: Workspace, sources: Sequence[str]) -> str:
    """The ``--from`` files (inside the repository only), scrubbed of secrets, capped."""
    from skillvc.secrets import scrub

    parts = []
    for name in sources:
        path = inside_repo(ws.root, name, "--from")
        text = inputs.read_text(path, f"The file {name}", max_bytes=inputs.TASKS_MAX_BYTES)
        parts.append(f"--- {Path(name).as_posix()} ---\n{scrub(text)}")
    joined = "\n\n".join(parts)
    if len(joined) > MAX_MATERIAL_CHARS:
        joined = joined[:MAX_MATERIAL_CHARS] + "\n[... cut]"
    return joined or "(none)"


def spread(rows: Sequence[Mapping[str, Any]], headings: Sequence[str]) -> dict[str, Any]:
    """Lengths of the inputs, counts per kind and split, and the skill's sections covered."""
    lengths = [len(row_input(r)) for r in rows]
    named = {" ".join(str(r["metadata"].get("section", "")).lower().split()) for r in rows}
    covered = [h for h in headings if " ".join(h.lower().split()) in named]
    return {
        "n": len(rows),
        "lengths": {
            "min": min(lengths, default=0),
            "median": int(statistics.median(lengths)) if lengths else 0,
            "max": max(lengths, default=0),
        },
        "kinds": {k: sum(1 for r in rows if r["metadata"]["kind"] == k) for k in KINDS},
        "splits": {s: sum(1 for r in rows if r["split"] == s) for s in SPLITS},
        "sections": {
            "covered": covered,
            "missing": [h for h in headings if h not in covered],
        },
    }


def draft(
    ws: Workspace,
    *,
    n: int = 20,
    sources: Sequence[str] = (),
    progress: Progress | None = None,
) -> DraftResult:
    """Ask the optimizer for ``n`` task items for the skill and write the usable ones as
    pending rows of the split files (configuring [tasks] when it names none)."""
    if n < 1:
        raise DraftRefused("Ask for at least one item (-n 1 or more).")
    say = progress or (lambda line: None)
    files, missing = task_files(ws)
    skill = ws.read_skill().decode("utf-8", errors="replace")
    headings = sections(skill)
    shown_material = material(ws, sources)
    existing = [r for split in SPLITS for r in read_rows(ws.root / files[split])]
    seen = [mine.normalise(row_input(r)) for r in existing if row_input(r)]
    with ws.store(create=True) as store, store.writer_lock("draft"):
        drafts = sum(1 for _ in store.events(types=["tasks.drafted"]))
        run_id = f"draft-{drafts + 1}"
        messages = prompts.render(
            "draft_tasks",
            n=n,
            skill=skill,
            sections=", ".join(headings) or "the whole document",
            material=shown_material,
            existing=[row_input(r)[:300] for r in existing[-MAX_EXISTING_SHOWN:]] or "(none)",
        )
        prompt_hash = sha256_hex(json.dumps(messages, sort_keys=True))[:16]
        say(f"asking {ws.config.optimizer.model} for {n} task items ...")
        # A new sample index each draft: the same skill and files would be answered from the
        # log with the same items, all of them duplicates by then.
        reply = _client(ws, store, run_id).call("optimizer", messages, sample=drafts)
        parsed, malformed = parse_items(reply.text)
        dropped: Counter[str] = Counter({"malformed": malformed})
        skill_shingles = shingles(skill)
        kept: list[dict[str, Any]] = []
        kept_tokens = [mine.tokens(s) for s in seen]
        for item in parsed:
            texts = [item["input"], *item["targets"], item["rubric"]]
            if holds_secret(texts):
                dropped["secret"] += 1
                continue
            if any(copies_skill(t, skill_shingles) for t in texts):
                dropped["skill_text"] += 1
                continue
            norm = mine.normalise(item["input"])
            tokens = mine.tokens(norm)
            if any(_near(norm, tokens, s, t) for s, t in zip(seen, kept_tokens, strict=True)):
                dropped["duplicate"] += 1
                continue
            if len(kept) >= n:
                dropped["over_n"] += 1
                continue
            seen.append(norm)
            kept_tokens.append(tokens)
            kept.append(item)
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        provenance = {
            "by": DRAFTED_BY,
            "draft": run_id,
            "model": ws.config.optimizer.model,
            "prompt": prompt_hash,
            # A prefix ('skillvc show' takes one; the event holds the whole key): a quoted
            # 32-hex key on every row reads as a credential to the task files' secret scan.
            "call": reply.key[:16],
            "date": date,
        }
        rows = _rows(kept, provenance, ws.config.tasks.scorer, offset=len(existing))
        result = DraftResult(run_id, ws.config.optimizer.model, prompt_hash, reply.key)
        result.items = rows
        result.dropped = {k: v for k, v in sorted(dropped.items()) if v}
        result.spread = spread(rows, headings)
        for split in SPLITS:
            mine_rows = [{k: v for k, v in r.items() if k != "split"} for r in rows]
            chosen = [r for r, full in zip(mine_rows, rows, strict=True) if full["split"] == split]
            if chosen:
                append_rows(inside_repo(ws.root, files[split], f"[tasks] {split}"), chosen)
                result.files[split] = files[split]
        if missing and rows:
            if ws.config.many:
                section = f"[skills.{ws.config.skill_name}.tasks]"
                result.config_note = f"Add to {section} in skillvc.toml: " + "; ".join(
                    f'{s} = "{f}"' for s, f in missing.items()
                )
            else:
                result.configured = configure_tasks(ws.root, missing)
                if not result.configured:
                    result.config_note = "Add to [tasks] in skillvc.toml: " + "; ".join(
                        f'{s} = "{f}"' for s, f in missing.items()
                    )
        store.append(
            "tasks.drafted",
            {
                "draft": run_id,
                "skill": ws.skill_relpath,
                "model": ws.config.optimizer.model,
                "prompt": prompt_hash,
                "call": reply.key,
                "date": date,
                "requested": n,
                "sources": [Path(s).as_posix() for s in sources],
                "items": rows,
                "dropped": result.dropped,
                "spread": result.spread,
                "files": result.files,
                "configured": result.configured,
            },
            run_id=run_id,
        )
    return result


def _near(norm: str, tokens: frozenset[str], other: str, other_tokens: frozenset[str]) -> bool:
    if norm == other:
        return True
    union = tokens | other_tokens
    return bool(union) and len(tokens & other_tokens) / len(union) >= DUPLICATE_SIMILARITY


def _rows(
    items: Sequence[Mapping[str, Any]],
    provenance: Mapping[str, Any],
    set_scorer: str,
    *,
    offset: int,
) -> list[dict[str, Any]]:
    """Task rows, kinds spread over the splits (``SPLIT_PATTERN``, continued after the rows
    already there): each kind's items take turns, so every kind reaches val as soon as it can."""
    order = sorted(range(len(items)), key=lambda i: (KINDS.index(items[i]["kind"]), i))
    split_of = {i: SPLIT_PATTERN[(offset + k) % len(SPLIT_PATTERN)] for k, i in enumerate(order)}
    rows = []
    for i, item in enumerate(items):
        metadata: dict[str, Any] = {"kind": item["kind"], "section": item["section"]}
        row: dict[str, Any] = {
            "id": "d" + content_id({"input": item["input"]})[:10],
            "input": item["input"],
            "split": split_of[i],
            "status": "pending",
            "provenance": dict(provenance),
        }
        if item["targets"]:
            row["target"] = list(item["targets"])
        if item["rubric"]:
            metadata["rubric"] = item["rubric"]
            if set_scorer != "judge":
                row["scorer"] = "judge"  # graded by its rubric whatever the set's scorer
        elif not item["targets"]:
            continue
        row["metadata"] = metadata
        rows.append(row)
    return rows
