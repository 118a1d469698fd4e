"""``skillvc harvest``: agent transcripts -> redacted exchanges -> recurring kinds -> task set.

Invariants:
- Opt-in per project: nothing is read unless skillvc.toml has a [harvest] section, or the
  caller names the directories explicitly *and* confirms (``yes``).
- Only the files under the named directories are read (``transcripts.find_sessions``), and every
  text is redacted (``redact.Redactor``) before it is stored in the event log, sent to a model,
  written to the task file or returned for printing. Transcripts themselves are never copied.
- The event log is the source of truth: each transcript read is a ``harvest.session`` event
  keyed by its source and content hash (so a harvest reads only what is new since the last
  one), kinds, rubrics and reviews are events, and the task file is a projection of them.
- The task file holds only items of recurring kinds that a person reviewed (``--approve``,
  ``--yes``); nothing trains on an unreviewed item.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.config import HarvestConfig
from skillvc.core.errors import BadData, ConfigError, SkillvcError
from skillvc.core.hashing import content_id
from skillvc.core.store import EventStore
from skillvc.models import prompts
from skillvc.sleep import mine as mining
from skillvc.sleep import transcripts
from skillvc.sleep.redact import Redactor, secret_env_values
from skillvc.workspace.workspace import Workspace

Progress = Callable[[str], None]
MAX_TARGET_CHARS = 4000  # a final answer longer than this is cut: targets are for a judge
RUBRIC_EXAMPLES = 6
SEPARATOR = "\n\n"


class HarvestRefused(SkillvcError):
    """Harvesting was not opted in to for this project, or was asked to read nothing."""

    exit_code = 2


@dataclass
class KindView:
    """A recurring kind as ``--review`` shows it."""

    id: str
    name: str
    support: int
    rubric: str | None
    items: list[dict[str, Any]]  # task rows with a "reviewed" flag

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class HarvestResult:
    harvest: str | None
    sessions_read: int = 0
    sessions_new: int = 0
    sessions_seen: int = 0  # already harvested, skipped
    exchanges: int = 0
    kinds: list[KindView] = field(default_factory=list)
    one_offs: int = 0
    redactions: dict[str, int] = field(default_factory=dict)
    task_file: str | None = None
    items_written: int = 0
    unreviewed: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kinds"] = [k.to_dict() for k in self.kinds]
        return data


def check_config(config: HarvestConfig) -> None:
    if config.source not in transcripts.SOURCES:
        raise ConfigError(
            f"[harvest] source '{config.source}' is not one of {', '.join(transcripts.SOURCES)}."
        )
    if config.min_support < 1:
        raise ConfigError("[harvest] min_support must be at least 1.")
    if not 0 < config.similarity <= 1:
        raise ConfigError("[harvest] similarity must be more than 0 and at most 1.")
    if config.budget_usd is not None and not (
        math.isfinite(config.budget_usd) and config.budget_usd > 0
    ):
        raise ConfigError("[harvest] budget_usd must be more than 0.")


def settings(
    ws: Workspace, source: str | None, dirs: Sequence[str], yes: bool
) -> tuple[HarvestConfig, list[Path]]:
    """The harvest settings: [harvest] with the command line on top; refuses without opt-in."""
    configured = ws.config.harvest
    if configured is None and not (dirs and yes):
        raise HarvestRefused(
            "Harvesting agent sessions is opt-in per project, and skillvc.toml has no "
            "[harvest] section.",
            hint="Add [harvest] (source, dirs) to skillvc.toml, or name the transcript "
            "directory and pass --yes to harvest it once.",
        )
    config = dataclasses.replace(configured or HarvestConfig())
    if source is not None:
        config.source = source
    if dirs:
        config.dirs = list(dirs)
    check_config(config)
    if not config.dirs:
        raise HarvestRefused(
            "No transcript directory to harvest.",
            hint="Name one (skillvc harvest --from claude-code ~/.claude/projects/<project>) "
            "or set [harvest] dirs in skillvc.toml.",
        )
    paths = []
    for d in config.dirs:
        path = Path(os.path.expanduser(d))
        if not path.is_dir():
            raise HarvestRefused(
                f"The transcript directory {Redactor().redact(d)[0]} does not exist.",
                hint="Check the path (Claude Code: ~/.claude/projects/<project>, Codex: "
                "~/.codex/sessions).",
            )
        paths.append(path)
    return config, paths


def make_redactor(ws: Workspace) -> Redactor:
    from skillvc.models.calls import secret_values

    values = set(secret_env_values()) | {v for v in secret_values(ws.config) if len(v) >= 8}
    return Redactor(env_values=sorted(values, key=lambda v: (-len(v), v)), extra=[_shared_scrub])


def _shared_scrub(text: str) -> tuple[str, int]:
    """skillvc's own scrubber (the key shapes and secret values every log write is cleaned of)
    after the harvest's patterns, so a harvest never keeps what the log would refuse."""
    from skillvc.secrets import REDACTED, scrub

    cleaned = scrub(text)
    return cleaned, cleaned.count(REDACTED) - text.count(REDACTED)


# -- the projection ---------------------------------------------------------------------------


@dataclass
class State:
    """What the harvest events say: exchanges per session, rubrics, reviewed items."""

    sessions: dict[str, dict[str, Any]]  # source:session id -> the latest harvest.session
    seen: set[str]  # keys of the transcript versions already read
    rubrics: dict[str, str]
    reviewed: set[str]
    harvests: int
    # ``skillvc review``'s decisions on harvested items (``tasks.reviewed``, origin harvest):
    # rejected ones leave the task set, edited ones keep the person's input and target.
    rejected: set[str] = field(default_factory=set)
    edited: dict[str, dict[str, Any]] = field(default_factory=dict)

    def exchanges(self) -> list[dict[str, Any]]:
        return [x for s in self.sessions.values() for x in s["exchanges"]]


def load_state(store: EventStore) -> State:
    sessions: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    rubrics: dict[str, str] = {}
    reviewed: set[str] = set()
    harvests = 0
    rejected: set[str] = set()
    edited: dict[str, dict[str, Any]] = {}
    for ev in store.events(
        types=[
            "harvest.started",
            "harvest.session",
            "harvest.rubric",
            "harvest.reviewed",
            "tasks.reviewed",
        ]
    ):
        p = ev.payload
        if ev.type == "tasks.reviewed":
            if p.get("origin") == "harvest":
                item = str(p.get("item"))
                if p.get("decision") == "rejected":
                    rejected.add(item)
                else:
                    rejected.discard(item)
                if p.get("decision") == "edited":
                    edited[item] = dict(p.get("after") or {})
        elif ev.type == "harvest.started":
            harvests += 1
        elif ev.type == "harvest.session":
            seen.add(str(ev.key))
            # A transcript that grew (a resumed session) is read again: the newest wins.
            sessions[f"{p['source']}:{p['session']}"] = dict(p)
        elif ev.type == "harvest.rubric":
            rubrics[p["kind"]] = p["rubric"]
        else:
            reviewed.update(p.get("items", []))
    return State(sessions, seen, rubrics, reviewed, harvests, rejected, edited)


def item_id(exchange: Mapping[str, Any]) -> str:
    return "h" + content_id([exchange["session"], exchange["timestamp"], exchange["prompt"]], 10)


def task_rows(mined: mining.Mined) -> dict[str, list[dict[str, Any]]]:
    """Task rows per kind, in the repo's task format; splits alternate train/val per kind."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in mined.kinds:
        rows = []
        # The split follows the distinct input, so a prompt that recurs word for word lands in
        # one split only (a val item identical to a train item would not measure anything).
        distinct: dict[str, int] = {}
        for x in kind.members:
            i = distinct.setdefault(" ".join(str(x["prompt"]).split()), len(distinct))
            rows.append(
                {
                    "id": item_id(x),
                    "input": x["prompt"],
                    "target": x["answer"][:MAX_TARGET_CHARS],
                    "split": "val" if i % 2 == 1 else "train",
                    "metadata": {
                        "kind": kind.id,
                        "source": x["source"],
                        "session": x["session"],
                        "timestamp": x["timestamp"],
                        "file": x["file"],
                        "corrections": len(x["corrections"]),
                        "tool_errors": x["tool_errors"],
                        "redacted": x["redacted"],
                    },
                }
            )
        out[kind.id] = rows
    return out


def views(mined: mining.Mined, state: State) -> list[KindView]:
    rows = task_rows(mined)
    return [
        KindView(
            k.id,
            k.name,
            k.support,
            state.rubrics.get(k.id),
            [
                _edited(r, state.edited.get(r["id"])) | {"reviewed": r["id"] in state.reviewed}
                for r in rows[k.id]
                if r["id"] not in state.rejected
            ],
        )
        for k in mined.kinds
    ]


def _edited(row: dict[str, Any], edit: Mapping[str, Any] | None) -> dict[str, Any]:
    """A harvested row with a person's edit (``skillvc review``) applied."""
    if not edit:
        return row
    targets = edit.get("targets") or []
    return (
        row
        | {"input": edit.get("input") or row["input"]}
        | ({"target": targets[0]} if targets else {})
    )


def rewrite_task_file(ws: Workspace) -> int:
    """Write [harvest] tasks again from the events (after ``skillvc review`` rejected one)."""
    config = dataclasses.replace(ws.config.harvest or HarvestConfig())
    with ws.store(create=True) as store:
        state = load_state(store)
    return write_task_file(ws, config, views(mine_state(state, config), state))


def mine_state(state: State, config: HarvestConfig) -> mining.Mined:
    return mining.mine(
        state.exchanges(), min_support=config.min_support, threshold=config.similarity
    )


def write_task_file(ws: Workspace, config: HarvestConfig, kinds: Sequence[KindView]) -> int:
    """Write the reviewed items (only those) to [harvest] tasks; returns how many."""
    from skillvc.core.paths import inside_repo
    from skillvc.repo.skillrepo import write_atomic

    rows = [
        {k: v for k, v in item.items() if k != "reviewed"}
        for kind in kinds
        if kind.rubric is not None
        for item in kind.items
        if item["reviewed"]
    ]
    if not rows:
        return 0
    target = inside_repo(ws.root, config.tasks, "[harvest] tasks in skillvc.toml")
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    write_atomic(target, body.encode("utf-8"))
    return len(rows)


def combined_rubric(kinds: Sequence[KindView]) -> str:
    """One judge rubric for a set of kinds: each kind's rubric under its name."""
    parts = ["Each task is one of these recurring kinds; grade it by its kind's rubric."]
    for k in kinds:
        if k.rubric and any(i["reviewed"] for i in k.items):
            parts.append(f"Kind {k.id} (tasks like: {k.name}):\n{k.rubric}")
    return SEPARATOR.join(parts)


# -- rubric drafting --------------------------------------------------------------------------


def draft_rubric(client: Any, kind: mining.Kind) -> tuple[str, str]:
    """Ask the optimizer for a rubric from the kind's (redacted) examples; (rubric, call key)."""
    examples = [
        {
            "request": x["prompt"][:1500],
            "final_answer": x["answer"][:1500],
            "corrections": list(x["corrections"])[:3],
            "tool_errors": x["tool_errors"],
        }
        for x in kind.members[:RUBRIC_EXAMPLES]
    ]
    messages = prompts.render("rubric", kind=kind.name, examples=examples, max_lines=8)
    reply = client.call("optimizer", messages)
    try:
        rubric = str(prompts.parse_json_object(reply.text, "rubric")["rubric"]).strip()
    except prompts.ParseError:
        rubric = reply.text.strip()
    if not rubric:
        raise SkillvcError(
            f"The optimizer drafted an empty rubric for kind {kind.id}.",
            hint="Run the harvest again, or write the rubric with --rubric KIND TEXT.",
        )
    return rubric, reply.key


def _client(ws: Workspace, store: EventStore, run_id: str) -> Any:
    from skillvc.models.clients import optimizer_client

    return optimizer_client(ws.config, store, run_id)


# -- the library calls ------------------------------------------------------------------------


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def harvest(
    ws: Workspace,
    *,
    source: str | None = None,
    dirs: Sequence[str] = (),
    yes: bool = False,
    write: bool = True,
    progress: Progress | None = None,
) -> HarvestResult:
    """Read what is new in the transcript directories, mine kinds, draft rubrics, write tasks.

    ``yes`` also marks every mined item reviewed (and is the explicit opt-in when skillvc.toml
    has no [harvest] section). ``write`` False leaves the work tree alone (``skillvc sleep``
    commits the task set on its own branch instead).
    """
    say = progress or (lambda line: None)
    config, paths = settings(ws, source, dirs, yes)
    redactor = make_redactor(ws)
    totals: Counter[str] = Counter()
    with ws.store(create=True) as store, store.writer_lock("harvest"):
        state = load_state(store)
        run_id = f"harvest-{state.harvests + 1}"
        store.append(
            "harvest.started",
            {
                "harvest": run_id,
                "source": config.source,
                "dirs": [redactor.redact(str(p))[0] for p in paths],
                "min_support": config.min_support,
                "similarity": config.similarity,
            },
            run_id=run_id,
        )
        result = HarvestResult(run_id)
        for directory in paths:
            for path in transcripts.find_sessions(config.source, directory):
                result.sessions_read += 1
                key = f"{config.source}:{_file_sha(path)}"
                if key in state.seen:
                    result.sessions_seen += 1
                    continue
                payload = _session_payload(config.source, path, redactor, totals)
                store.append(
                    "harvest.session", payload | {"harvest": run_id}, run_id=run_id, key=key
                )
                result.sessions_new += 1
                # Lines of no known shape are skipped: say so, or a wrong --from reads as "0".
                odd = payload.get("skipped_lines") or 0
                say(
                    f"read {payload['file']}: {counted(len(payload['exchanges']), 'task prompt')}"
                    + (
                        f" ({counted(odd, 'line')} of no known {config.source} shape skipped)"
                        if odd
                        else ""
                    )
                )
        state = load_state(store)
        mined = mine_state(state, config)
        client = None
        for kind in mined.kinds:
            if kind.id in state.rubrics:
                continue
            client = client or _client(ws, store, run_id)
            rubric, call = draft_rubric(client, kind)
            store.append(
                "harvest.rubric",
                {
                    "harvest": run_id,
                    "kind": kind.id,
                    "rubric": rubric,
                    "by": "optimizer",
                    "call": call,
                },
                run_id=run_id,
            )
            say(f"drafted a rubric for kind {kind.id} ({kind.support} sessions)")
        state = load_state(store)
        kinds = views(mined, state)
        for view in kinds:
            store.append(
                "harvest.kind",
                {
                    "harvest": run_id,
                    "kind": view.id,
                    "name": view.name,
                    "support": view.support,
                    "items": [i["id"] for i in view.items],
                },
                run_id=run_id,
            )
        if yes:
            kinds = _approve(store, run_id, kinds, None, "yes")
        result.kinds = kinds
        result.exchanges = len(state.exchanges())
        result.one_offs = mined.one_offs
        result.redactions = dict(sorted(totals.items()))
        if write:
            result.items_written = write_task_file(ws, config, kinds)
            result.task_file = config.tasks if result.items_written else None
        result.unreviewed = sum(1 for k in kinds for i in k.items if not i["reviewed"])
        store.append(
            "harvest.finished",
            {
                "harvest": run_id,
                "sessions_read": result.sessions_read,
                "sessions_new": result.sessions_new,
                "exchanges": result.exchanges,
                "kinds": [k.id for k in kinds],
                "one_offs": result.one_offs,
                "redactions": result.redactions,
                "task_file": result.task_file,
                "items_written": result.items_written,
                "unreviewed": result.unreviewed,
            },
            run_id=run_id,
        )
    return result


def _session_payload(
    source: str, path: Path, redactor: Redactor, totals: Counter[str]
) -> dict[str, Any]:
    session = transcripts.read_session(source, path)
    file_name, _ = redactor.redact(str(path))
    session_id, _ = redactor.redact(session.session_id)
    rows = []
    for x in transcripts.exchanges(session):
        counts: Counter[str] = Counter()

        def clean(text: str, counts: Counter[str] = counts) -> str:
            out, n = redactor.redact(text)
            counts.update(n)
            return out

        rows.append(
            {
                "source": source,
                "session": session_id,
                "file": file_name,
                "timestamp": x.timestamp or session.started,
                "prompt": clean(x.prompt),
                "answer": clean(x.answer),
                "corrections": [clean(c) for c in x.corrections],
                "tool_calls": x.tool_calls,
                "tool_errors": x.tool_errors,
                "redacted": dict(sorted(counts.items())),
            }
        )
        totals.update(counts)
    return {
        "source": source,
        "session": session_id,
        "file": file_name,
        "started": session.started,
        "usage": session.usage,
        "skipped_lines": session.skipped,
        "exchanges": rows,
    }


def _approve(
    store: EventStore,
    run_id: str | None,
    kinds: list[KindView],
    names: Iterable[str] | None,
    by: str,
) -> list[KindView]:
    """Mark items reviewed: all of them (``names`` None) or those of the named kinds/items."""
    wanted = None if names is None else set(names)
    chosen = [
        i["id"]
        for k in kinds
        for i in k.items
        if not i["reviewed"] and (wanted is None or k.id in wanted or i["id"] in wanted)
    ]
    if chosen:
        store.append("harvest.reviewed", {"items": chosen, "by": by}, run_id=run_id)
    done = set(chosen)
    return [
        dataclasses.replace(
            k, items=[i | {"reviewed": i["reviewed"] or i["id"] in done} for i in k.items]
        )
        for k in kinds
    ]


def counted(n: int, noun: str) -> str:
    """``1 session``, ``2 sessions``: the counts harvest and sleep print."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def review(
    ws: Workspace,
    *,
    approve: Sequence[str] = (),
    approve_all: bool = False,
    rubrics: Mapping[str, str] | None = None,
) -> HarvestResult:
    """The mined kinds with their items and rubrics; approving or editing records an event.

    Unknown kind or item ids in ``approve`` or ``rubrics`` are an error, before anything is
    recorded.
    """
    config = dataclasses.replace(ws.config.harvest or HarvestConfig())
    with ws.store(create=True) as store, store.writer_lock("harvest"):
        state = load_state(store)
        mined = mine_state(state, config)
        kinds = views(mined, state)
        known = {k.id for k in kinds} | {i["id"] for k in kinds for i in k.items}
        for name in [*approve, *(rubrics or {})]:
            if name not in known:
                raise SkillvcError(
                    f"No harvested kind or item '{name}'.",
                    hint="List them with 'skillvc harvest --review'.",
                )
        kind_ids = {k.id for k in kinds}
        for name, text in (rubrics or {}).items():
            # A rubric belongs to a kind, and an empty one would leave the kind unscoreable:
            # sleep skips kinds without a rubric.
            if name not in kind_ids:
                raise SkillvcError(
                    f"'{name}' is an item, and a rubric belongs to a kind.",
                    hint="Give the kind's id (the 'kind k...' line of 'skillvc harvest --review').",
                )
            if not text.strip():
                raise BadData(
                    f"The rubric for kind {name} is empty.",
                    hint="Say what a correct answer does, e.g. --rubric "
                    f'{name} "The answer names the action the customer accepted."',
                )
        redactor = make_redactor(ws)
        for kind_id, text in (rubrics or {}).items():
            clean, _ = redactor.redact(text)
            store.append(
                "harvest.rubric", {"kind": kind_id, "rubric": clean, "by": "user"}, run_id=None
            )
        if rubrics:
            state = load_state(store)
            kinds = views(mined, state)
        if approve or approve_all:
            kinds = _approve(
                store,
                None,
                kinds,
                None if approve_all else approve,
                "yes" if approve_all else "approve",
            )
        result = HarvestResult(None, kinds=kinds, one_offs=mined.one_offs)
        result.exchanges = len(state.exchanges())
        if approve or approve_all or rubrics:
            result.items_written = write_task_file(ws, config, kinds)
            result.task_file = config.tasks if result.items_written else None
        result.unreviewed = sum(1 for k in kinds for i in k.items if not i["reviewed"])
    return result
