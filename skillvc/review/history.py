"""Read models over the event log for people: ``skillvc log``, ``skillvc show``, curves.

A log entry is one gate decision (a candidate: the edits of one step, or a slow update) with
its evidence. ``show`` resolves what a person copies from any output (an event id, a
``RUN/SEQ`` trailer, an edit, commit or run id, a model call's key or a blob hash, or a unique
prefix of at least 6 hex characters of the last two) and dereferences the hashes of what it
shows: a model call comes with its messages and response text, a rollout with its task input,
answer text, score and reason. A skill package's candidate is diffed file by file: one
unified diff over every file it changes, named from the repository root. A curve is a run's
scores per step, read from its events alone (never from git or the working tree), so the
report, the HTML page and ``skillvc runs`` draw the same numbers. JSON keys are stable; the
README lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skillvc.core.errors import LogDamaged, UnknownEventId
from skillvc.core.events import DAMAGED, Event
from skillvc.core.store import EventStore
from skillvc.models.backends.base import text_of
from skillvc.review.curves import OF_SKILL

if TYPE_CHECKING:  # diffs parse skill documents (YAML, unidiff): only -p and reports need them
    from skillvc.packages.diff import VersionDiff
    from skillvc.repo.skillrepo import SkillRepo

LOG_KEYS = (
    "id",
    "run",
    "step",
    "epoch",
    "kind",
    "decision",
    "metric",
    "val_before",
    "val_after",
    "val_after_bound",
    "n",
    "n_evaluated",
    "early_stopped",
    "lr",
    "commit",
    "ref",
    "created_at",
    "edits",
    "unmatched",
    "flipped",
    "p_value",
    "test",
    "alpha",
    "verdict",
    "dropped",
)


@dataclass(frozen=True)
class LogEntry:
    gate: Event
    commit: str | None
    ref: str | None

    def to_dict(self, *, patch: str | None = None) -> dict[str, Any]:
        p = self.gate.payload
        data = {
            "id": self.gate.id,
            "run": self.gate.run_id,
            "step": self.gate.step,
            "epoch": self.gate.epoch,
            "kind": p.get("kind", "step"),
            "decision": p.get("decision"),
            "metric": p.get("metric"),
            "val_before": p.get("before", {}).get("mean"),
            # An early-stopped candidate's partial mean is biased (it is taken over the items
            # the current skill fails first): only the bound that decided is reported.
            "val_after": None if p.get("early_stopped") else p.get("after", {}).get("mean"),
            "val_after_bound": p.get("after", {}).get("bound"),
            "n": p.get("before", {}).get("n"),
            "n_evaluated": p.get("after", {}).get("n"),
            "early_stopped": bool(p.get("early_stopped", False)),
            "lr": p.get("lr"),
            "commit": self.commit,
            "ref": self.ref,
            "created_at": self.gate.created_at,
            "edits": list(p.get("edits", [])),
            "unmatched": list(p.get("unmatched", [])),
            "flipped": p.get("flipped", {"gained": [], "lost": []}),
            "p_value": p.get("p_value"),
            "test": p.get("test"),
            # How sure the decision is in plain words, at the alpha the gate used (a gate from
            # the paper's bundle gate, which records none: the review alpha of ``report``).
            "alpha": gate_alpha(p),
            "verdict": (
                ("no significant gain possible" if "alpha" in p else "no gain possible")
                if p.get("early_stopped") and p.get("p_value") is None
                else verdict(p.get("p_value"), gate_alpha(p))
            ),
            # Edits attribution took out of the candidate, with their test.
            "dropped": dropped_edits(p),
        }
        if "files" in p:  # a skill package: the repository paths the candidate changes
            data["files"] = list(p["files"])
        if p.get("kind") == "routing":  # a description's gate: why, and each skill's losses
            r = p.get("routing") or {}
            data["routing"] = {
                "reason": p.get("reason"),
                "steals": r.get("steals", {}),
                "losses": r.get("losses", {}),
                "skills": r.get("skills", {}),
            }
        if patch is not None:
            data["patch"] = patch
        return data


def gate_alpha(payload: Mapping[str, Any]) -> float:
    """The alpha a gate's significance is judged at (see ``LogEntry.to_dict``)."""
    from skillvc.training.significance import REVIEW_ALPHA, shown_alpha

    alpha = payload.get("alpha")
    return shown_alpha(alpha) if isinstance(alpha, (int, float)) else REVIEW_ALPHA


def dropped_edits(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Attribution's dropped edits of a gate: the edit, how it was dropped and its test. (A
    last edit standing that lost its own test is not dropped: the candidate is refused with
    it, on that test's p-value.)"""
    credit = payload.get("attribution") or {}
    edits = {e.get("id"): e for e in credit.get("bundle_edits", [])}
    kept = set(credit.get("kept", []))
    return [
        {
            **edits.get(t["edit"], {"id": t["edit"]}),
            **{k: t[k] for k in ("outcome", "up", "down", "p_value")},
        }
        for t in credit.get("tests", [])
        if t.get("outcome") != "kept" and t["edit"] not in kept
    ]


def verdict(p_value: Any, alpha: float) -> str:
    from skillvc.training.significance import verdict as words

    return words(p_value if isinstance(p_value, (int, float)) else None, alpha)


def _commit_for(store: EventStore, gate: Event) -> tuple[str | None, str | None]:
    done = store.find("commit.done", f"gate:{gate.id}")
    if done is None:
        return None, None
    return done.payload.get("sha"), done.payload.get("ref")


def log_entries(
    store: EventStore,
    *,
    decision: str | None = None,
    run_id: str | None = None,
    limit: int | None = None,
    skill_path: str | None = None,
) -> list[LogEntry]:
    """Gate decisions, newest first; ``decision`` is accepted, rejected or None for both;
    ``skill_path``: only runs of that skill (many skills in one repository)."""
    clauses, params = ["type = 'gate'"], []
    if skill_path is not None:
        clauses.append(OF_SKILL)
        params.append(skill_path)
    if decision == "accepted":
        clauses.append("json_extract(payload, '$.decision') IN ('accepted', 'forced')")
    elif decision == "rejected":
        clauses.append("json_extract(payload, '$.decision') = 'rejected'")
    if run_id is not None:
        known = store.query(
            "SELECT 1 FROM events WHERE type IN ('run.started', 'routing.started') "
            "AND run_id = ? LIMIT 1",
            [run_id],
        )
        if not known:
            raise UnknownEventId(f"No run {run_id} in the event log.")
        clauses.append("run_id = ?")
        params.append(run_id)
    entries = []
    for gate in _newest(store, clauses, params, limit):
        commit, ref = _commit_for(store, gate)
        entries.append(LogEntry(gate=gate, commit=commit, ref=ref))
    return entries


def _newest(
    store: EventStore, conditions: list[str], params: list[Any], limit: int | None
) -> list[Event]:
    """The events (aliased ``e`` in ``conditions``) that meet all ``conditions``, newest
    first, at most ``limit``."""
    sql = f"SELECT e.id FROM events e WHERE {' AND '.join(conditions)} ORDER BY e.id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [store.get(row["id"]) for row in store.query(sql, params)]


# Runs whose run.started config trained the skill at a path (its own runs, old ones included).


def entry_diff(store: EventStore, entry: LogEntry, path: str = "SKILL.md") -> VersionDiff:
    """The diff current -> candidate of a gate, from the skill blobs it references.

    A single-file skill's diff names ``path``. A package's (bundles) is one diff over every
    file the candidate changes, named from the package root its run trained (its
    ``run.started`` config; ``path`` when the run is unknown)."""
    from skillvc.packages import bundle_files
    from skillvc.packages.diff import VersionDiff, version_diff
    from skillvc.skill.skills import run_skill_path

    p = entry.gate.payload
    if not p.get("current") or not p.get("candidate"):
        return VersionDiff("", ())
    before, after = store.get_blob(p["current"]), store.get_blob(p["candidate"])
    if bundle_files(before) is not None or bundle_files(after) is not None:
        path = run_skill_path(store, str(entry.gate.run_id)) or path
    return version_diff(before, after, path)


def entry_patch(store: EventStore, entry: LogEntry, path: str = "SKILL.md") -> str:
    """The unified diff current -> candidate of a gate (``entry_diff``), as text."""
    return entry_diff(store, entry, path).patch


_MAX_SQLITE_INT = 2**63 - 1  # the largest id or seq SQLite can store


def _too_big(digits: str) -> bool:
    """More than SQLite can store (checked by length first: int() refuses 4,300+ digits)."""
    return len(digits) > len(str(_MAX_SQLITE_INT)) or int(digits) > _MAX_SQLITE_INT


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def resolve(store: EventStore, ident: str) -> Event:
    """An event from an event id, ``<run>/<seq>``, an edit id prefix, a commit sha prefix or a
    run id."""
    ident = ident.strip()
    # isdecimal, not isdigit: "²" is a digit that int() cannot read.
    if ident.isdecimal():
        if _too_big(ident):  # SQLite would raise OverflowError, not "no such id"
            raise UnknownEventId(f"No event with id {_short(ident)} in {store.path}.")
        return store.get(int(ident))
    run_id, _, seq = ident.rpartition("/")
    if run_id and seq.isdecimal():  # "<run>/<seq>", as in a commit's Skillvc-Event trailer
        if _too_big(seq):
            raise UnknownEventId(f"No event {_short(seq)} in run {_short(run_id)}.")
        rows = store.query("SELECT id FROM events WHERE run_id = ? AND seq = ?", [run_id, int(seq)])
        if not rows:
            raise UnknownEventId(f"No event {seq} in run {run_id}.")
        return store.get(rows[0]["id"])
    if len(ident) >= 4:
        # Escape LIKE's wildcards: a typed "%" or "_" must not match arbitrary ids.
        escaped = ident.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = escaped + "%"
        queries = [
            (
                "SELECT id FROM events WHERE type = 'edit.proposed' "
                "AND json_extract(payload, '$.edit.id') LIKE ? ESCAPE '\\' ORDER BY id LIMIT 2",
                "edit",
            ),
            (
                "SELECT id FROM events WHERE type = 'commit.done' "
                "AND json_extract(payload, '$.sha') LIKE ? ESCAPE '\\' ORDER BY id LIMIT 2",
                "commit",
            ),
            (
                "SELECT id FROM events WHERE type = 'run.started' AND run_id LIKE ? ESCAPE '\\' "
                "ORDER BY id LIMIT 2",
                "run",
            ),
        ]
        for sql, what in queries:
            rows = store.query(sql, [like])
            if len(rows) > 1 and what != "edit":
                raise UnknownEventId(
                    f"'{ident}' is ambiguous: it is the prefix of several {what} ids.",
                    hint="Give more characters.",
                )
            if rows:
                return store.get(rows[0]["id"])
    raise UnknownEventId(f"No event, edit, commit or run matches '{ident}'.")


MIN_HEX_PREFIX = 6  # characters of a blob hash or call key that name it, when unique
_HEX = re.compile(r"[0-9a-f]+")


def _by_prefix(store: EventStore, sql: str, prefix: str) -> list[Any]:
    """Column ``v`` of ``sql`` (a range over one hex column, ``? <= x < ?``) for ``prefix``."""
    return [r["v"] for r in store.query(sql, [prefix, prefix + "g"])]  # "g" sorts after "f"


def _looks_hashed(ident: str) -> bool:
    prefix = ident.strip().lower()
    return len(prefix) >= MIN_HEX_PREFIX and _HEX.fullmatch(prefix) is not None


def find_hashed(store: EventStore, ident: str) -> tuple[str, Any] | None:
    """("blob", hash) or ("call", event id) for a blob hash or model-call key, or a unique
    prefix of one (at least ``MIN_HEX_PREFIX`` hex characters); None when nothing matches.
    An ambiguous prefix is an error that lists the candidates."""
    if not _looks_hashed(ident):
        return None
    prefix = ident.strip().lower()
    blobs = _by_prefix(
        store,
        "SELECT hash AS v FROM blobs WHERE hash >= ? AND hash < ? ORDER BY hash LIMIT 6",
        prefix,
    )
    calls = _by_prefix(
        store,
        "SELECT key AS v FROM events WHERE type = 'model.call' AND key >= ? AND key < ? "
        "ORDER BY key LIMIT 6",
        prefix,
    )
    found = [("blob", b) for b in blobs] + [("call", k) for k in calls]
    if len(found) > 1:
        shown = ", ".join(f"{kind} {value[:16]}" for kind, value in found[:5])
        more = " and more" if len(found) > 5 else ""
        raise UnknownEventId(
            f"'{ident}' is ambiguous: it is the prefix of {shown}{more}.",
            hint="Give more characters.",
        )
    if not found:
        return None
    kind, value = found[0]
    if kind == "call":
        row = store.query("SELECT id FROM events WHERE type = 'model.call' AND key = ?", [value])
        return "call", row[0]["id"]
    return "blob", value


def prompt_messages(text: str) -> list[dict[str, str]] | None:
    """The messages of a model call's prompt blob (canonical JSON), or None for other text."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value
    ):
        return [{"role": m["role"], "content": m["content"]} for m in value]
    return None


def _blob_text(store: EventStore, digest: Any) -> str | None:
    if isinstance(digest, str) and store.has_blob(digest):
        return store.get_blob(digest)
    return None


def _call_view(store: EventStore, event: Event) -> dict[str, Any]:
    """A model call with its text: messages, response, tokens and cost."""
    p = event.payload
    prompt = _blob_text(store, p.get("prompt"))
    return {
        "role": p.get("role"),
        "model": p.get("model"),
        "params": p.get("params", {}),
        "sample": p.get("sample", 0),
        "messages": prompt_messages(prompt) if prompt is not None else None,
        "response": _blob_text(store, p.get("response")),
        "prompt_tokens": p.get("prompt_tokens"),
        "completion_tokens": p.get("completion_tokens"),
        "latency_ms": p.get("latency_ms"),
        "cost_usd": p.get("cost_usd"),
        "key": event.key,
        "trajectory": _trajectory(store, p.get("meta") or {}),
    }


def _trajectory(store: EventStore, meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """An acting rollout's (tool loop's or agent CLI's) steps, from its blob; None for a call
    that only answered."""
    text = _blob_text(store, meta.get("trajectory")) if meta.get("trajectory") else None
    if text is None:
        return None
    try:
        return dict(json.loads(text))
    except (ValueError, TypeError):
        return None


def _rollout_view(store: EventStore, event: Event) -> dict[str, Any]:
    """A rollout with its task input (the user message of its call), answer and score."""
    p = event.payload
    call = store.find("model.call", p["call"]) if p.get("call") else None
    view = _call_view(store, call) if call is not None else None
    messages = view["messages"] if view is not None else None
    task = "\n\n".join(text_of(m) for m in messages or [] if m["role"] == "user") or None
    return {
        "split": p.get("split"),
        "item": p.get("item"),
        "input": task,
        "answer": _blob_text(store, p.get("output")),
        "hard": p.get("hard"),
        "soft": p.get("soft"),
        "reason": p.get("reason"),
        "error": p.get("error"),
        "skill": p.get("skill"),
        "call": call.id if call is not None else None,
        "model": call.payload.get("model") if call is not None else None,
        "trajectory": view["trajectory"] if view is not None else None,
    }


def show(
    store: EventStore,
    ident: str,
    *,
    with_patch: bool = True,
    resolve_rev: Callable[[str], str | None] | None = None,
    commit_view: Callable[[str], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Everything the log knows about one event, with the evidence behind it.

    ``resolve_rev`` turns a git revision (``HEAD~2``, a tag) into a commit sha, so a
    training commit can be named the way git names it. ``commit_view`` describes any other
    commit that touches a skill (``skill_commit``: an ``apply`` or a hand commit).
    """
    try:
        event = resolve(store, ident)
    except UnknownEventId:
        hashed = find_hashed(store, ident)
        if hashed is not None and hashed[0] == "blob":
            text = store.get_blob(hashed[1])
            return {
                "blob": {"hash": hashed[1], "size": len(text), "content": text},
                "messages": prompt_messages(text),
            }
        if hashed is not None:
            return show(store, str(hashed[1]), with_patch=with_patch)
        sha = resolve_rev(ident) if resolve_rev is not None else None
        if sha is None and _looks_hashed(ident) and not ident.strip().isdecimal():
            raise UnknownEventId(
                f"No event, edit, commit, run, model call or blob matches '{ident}'."
            ) from None
        short = ident.strip().lower()
        if sha is None and _HEX.fullmatch(short) and not short.isdecimal():
            # Too short to be looked up as a blob or call key: say so, not just "no match".
            raise UnknownEventId(
                f"No event, edit, commit or run matches '{ident}'.",
                hint=f"A blob hash or model call key prefix needs at least {MIN_HEX_PREFIX} "
                "hex characters; list ids with 'skillvc log' or 'skillvc runs'.",
            ) from None
        if sha is None:
            raise
        try:
            event = resolve(store, sha)
        except UnknownEventId:
            described = commit_view(sha) if commit_view is not None else None
            if described is not None:
                return {"commit": described}
            raise UnknownEventId(
                f"{ident} ({sha[:10]}) is a commit that touches no skill."
                if commit_view is not None
                else f"{ident} ({sha[:10]}) is not a commit made by skillvc training."
            ) from None
    if DAMAGED in event.payload:  # nothing in it can be shown: say so, and how to repair
        raise LogDamaged(
            f"Event {event.id} ({event.type}) is damaged: {event.payload[DAMAGED]}.",
            hint="'skillvc fsck --repair' marked it so; the text it held is in the payload's "
            "'stored' field (SELECT payload FROM events WHERE id = ...)."
            if "stored" in event.payload
            else None,  # the class's hint: run fsck
        )
    if event.type in ("commit.intent", "commit.done") and "gate_id" in event.payload:
        event = store.get(int(event.payload["gate_id"]))  # a commit is shown by its evidence
    data: dict[str, Any] = {"event": event.to_dict()}
    if event.type == "gate":
        commit, ref = _commit_for(store, event)
        entry = LogEntry(gate=event, commit=commit, ref=ref)
        from skillvc.skill.skills import run_skill_path

        # The diff names the repository path, as `log -p` does (not a bare SKILL.md).
        path = run_skill_path(store, str(event.run_id)) or "SKILL.md"
        patch = entry_patch(store, entry, path) if with_patch else None
        data["entry"] = entry.to_dict(patch=patch)
    elif event.type == "edit.proposed":
        edit_id = event.payload.get("edit", {}).get("id")
        data["gates"] = [
            r["id"]
            for r in store.query(
                "SELECT g.id FROM events g, json_each(json_extract(g.payload, '$.edits')) j "
                "WHERE g.type = 'gate' AND json_extract(j.value, '$.id') = ? ORDER BY g.id",
                [edit_id],
            )
        ]
    elif event.type == "run.started":
        from skillvc.review.runs import list_runs

        data["run"] = next(
            (r for r in list_runs(store, abandoned=True) if r["run"] == event.run_id), None
        )
        data["entries"] = [e.to_dict() for e in reversed(log_entries(store, run_id=event.run_id))]
    elif event.type == "model.call":
        for name in ("prompt", "response"):
            digest = event.payload.get(name)
            if isinstance(digest, str) and store.has_blob(digest):
                data[name] = store.get_blob(digest)
        data["call"] = _call_view(store, event)
    elif event.type == "rollout":
        data["rollout"] = _rollout_view(store, event)
    if event.type == "gate":
        data["flips"] = gate_flips(store, event)
    elif event.type == "slow_update":
        data["previous"] = _previous_guidance(store, event)
    return data


def gate_flips(store: EventStore, gate: Event) -> list[dict[str, Any]]:
    """The items a gate flipped, each with its answer under the current skill and under the
    candidate (the val rollouts of each version; None when the log has none)."""
    from skillvc.tasks.scorers import extract_answer

    p = gate.payload
    flipped = p.get("flipped") or {}
    out = []
    for item in [*(flipped.get("gained") or []), *(flipped.get("lost") or [])]:
        answers = []
        for skill in (p.get("current"), p.get("candidate")):
            rows = store.query(
                "SELECT json_extract(payload, '$.output') AS output FROM events "
                "WHERE type = 'rollout' AND json_extract(payload, '$.skill') = ? "
                "AND json_extract(payload, '$.item') = ? "
                "AND json_extract(payload, '$.split') = 'val' ORDER BY id DESC LIMIT 1",
                [skill, item],
            )
            text = _blob_text(store, rows[0]["output"]) if rows else None
            answers.append(None if text is None else extract_answer(text))
        out.append({"item": item, "before": answers[0], "after": answers[1]})
    return out


def _previous_guidance(store: EventStore, event: Event) -> str:
    """The guidance the run's previous slow update wrote ("" for its first)."""
    rows = store.query(
        "SELECT json_extract(payload, '$.guidance') AS guidance FROM events "
        "WHERE type = 'slow_update' AND run_id = ? AND id < ? "
        "AND COALESCE(json_extract(payload, '$.skipped'), 0) = 0 ORDER BY id DESC LIMIT 1",
        [event.run_id, event.id],
    )
    return str(rows[0]["guidance"] or "") if rows else ""


def skill_commit(
    store: EventStore, repo: SkillRepo, skill_dirs: Sequence[str], rev: str
) -> dict[str, Any] | None:
    """A commit that touches a skill but is no training step (``skillvc apply``, a hand
    edit): its message, the skill files it changes, their diff, and the edit events its
    ``Skillvc-Event`` trailer names. None when it touches no file under ``skill_dirs``
    (skill files or package directories, repository paths; "" is the whole repository)."""
    info = repo.commit_info(rev)

    def in_skill(path: str) -> bool:
        return any(path == d or not d or path.startswith(d.rstrip("/") + "/") for d in skill_dirs)

    files = [path for _, path in repo.changed_files(info.sha) if in_skill(path)]
    if not files:
        return None
    patch = ""
    if info.parents:
        patch = "".join(repo.diff(info.parents[0], info.sha, path) for path in files)
    edits = []
    for ident in re.split(r"[,\s]+", info.trailers.get("Skillvc-Event", "")):
        if ident:
            try:
                edits.append(resolve(store, ident).to_dict())
            except UnknownEventId:
                continue  # a trailer of another clone's log
    return {
        "sha": info.sha,
        "subject": info.subject,
        "message": info.message,
        "authored_at": info.authored_at,
        "files": files,
        "edits": edits,
        "gate": applied_gate(store, info.sha),
        "patch": patch,
    }


def applied_gate(store: EventStore, sha: str) -> dict[str, Any] | None:
    """The gate ``skillvc apply`` ran before it made commit ``sha`` (a ``gate`` event of kind
    "apply" tied to it by ``commit.done``), with its id; None for any other commit."""
    rows = store.query(
        "SELECT g.id FROM events c JOIN events g ON g.id = json_extract(c.payload, '$.gate_id') "
        "WHERE c.type = 'commit.done' AND json_extract(c.payload, '$.sha') = ? "
        "AND g.type = 'gate' AND json_extract(g.payload, '$.kind') = 'apply' LIMIT 1",
        [sha],
    )
    if not rows:
        return None
    gate = store.get(int(rows[0]["id"]))
    return {"id": gate.id, **LogEntry(gate, sha, None).to_dict()}


# -- model calls (skillvc calls) -----------------------------------------------------------


def recent_calls(
    store: EventStore,
    *,
    limit: int | None = 3,
    query: str | None = None,
    role: str | None = None,
    run: str | None = None,
) -> list[dict[str, Any]]:
    """Model calls, newest first, with their messages and response as text (``llm logs``).

    ``query``: only calls whose prompt or response contains it (case-insensitive for ASCII
    letters); ``role``: target, optimizer or judge; ``run``: the calls a run made (an answer
    it reused from the log belongs to the run that paid for it).
    """
    conditions, params = ["e.type = 'model.call'"], []
    if query:
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append(
            "EXISTS (SELECT 1 FROM blobs b WHERE b.hash IN (json_extract(e.payload, '$.prompt'), "
            "json_extract(e.payload, '$.response')) AND b.content LIKE ? ESCAPE '\\')"
        )
        params.append(f"%{escaped}%")
    if role:
        conditions.append("json_extract(e.payload, '$.role') = ?")
        params.append(role)
    if run:
        conditions.append("e.run_id = ?")
        params.append(run)
    out = []
    for event in _newest(store, conditions, params, limit):
        out.append(
            {
                "id": event.id,
                "created_at": event.created_at,
                "run": event.run_id,
                "step": event.step,
            }
            | _call_view(store, event)
        )
    return out
