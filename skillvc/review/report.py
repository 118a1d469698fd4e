"""Read models for review: the pull-request report of a run, scores of a skill version, blame.

Everything here is a projection of the event log and the git history; nothing is written.
The Markdown report is meant for a pull-request description: short at the top (scores, cost,
a table of steps), long parts folded in ``<details>`` so it stays readable on GitHub.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skillvc.core.errors import UnknownEventId
from skillvc.core.events import read_payload
from skillvc.core.hashing import sha256_hex
from skillvc.core.store import EventStore
from skillvc.models.usage import run_usage
from skillvc.review.charts import mermaid_xychart
from skillvc.review.curves import Curve, run_curve
from skillvc.review.history import LogEntry, entry_patch, log_entries
from skillvc.review.runs import RUN_COUNTS, cache_text, list_runs, usage_by_phase

# The [train] settings a report shows.
SETTINGS = (
    "epochs",
    "batch_size",
    "minibatch_size",
    "learning_rate",
    "min_learning_rate",
    "lr_schedule",
    "gate_metric",
    "seed",
)


def _last_stop(store: EventStore, run_id: str) -> str:
    """Why a stopped run stopped, as the sentence it stopped with."""
    stops = store.events(run_id=run_id, types=["run.stopped"], newest_first=True, limit=1)
    if not stops:
        return ""
    p = stops[0].payload
    if p.get("message"):
        return str(p["message"])
    if p.get("reason") == "budget":
        return f"budget ${p.get('budget_usd', 0):.4f} reached after step {p.get('step')}."
    return f"{p.get('reason', 'unknown reason')}."


def latest_run(store: EventStore) -> str:
    rows = store.query(
        "SELECT run_id FROM events WHERE type = 'run.started' ORDER BY id DESC LIMIT 1"
    )
    if not rows:
        raise UnknownEventId(
            "No training run in the event log yet.", hint="Run 'skillvc train' first."
        )
    return str(rows[0]["run_id"])


def run_report(store: EventStore, run_id: str | None, skill_path: str) -> dict[str, Any]:
    """Everything the report shows, as JSON-able data (the ``--format json`` output), every
    string through the redaction pipeline; ``withheld`` says how many values that looked like
    credentials were removed (never which): a report is posted in pull requests."""
    from skillvc.secrets import redact_json_counted

    clean, withheld = redact_json_counted(_run_report(store, run_id, skill_path))
    return {**clean, "withheld": withheld}


def latest_worth(store: EventStore) -> dict[str, Any] | None:
    """The newest ``skill.worth`` event (``eval --baseline``), or None."""
    from skillvc.review.worth import latest_worth as newest

    return newest(store)


def _run_report(store: EventStore, run_id: str | None, skill_path: str) -> dict[str, Any]:
    run_id = run_id or latest_run(store)
    runs = {r["run"]: r for r in list_runs(store, abandoned=True)}
    if run_id not in runs:
        raise UnknownEventId(f"No run {run_id} in the event log.")
    started = store.events(run_id=run_id, types=["run.started"], limit=1)[0].payload
    finished = store.events(run_id=run_id, types=["run.finished"], limit=1)
    done = finished[0].payload if finished else {}
    entries = list(reversed(log_entries(store, run_id=run_id)))
    steps = []
    for e in entries:
        d = e.to_dict()
        d["patch"] = entry_patch(store, e, skill_path)
        steps.append(d)
    lrs = {
        ev.step: ev.payload.get("lr") for ev in store.events(run_id=run_id, types=["step.started"])
    }
    for ev in store.events(run_id=run_id, types=["step.empty"]):
        steps.append(
            {
                "id": ev.id,
                "kind": "step",
                "step": ev.step,
                "epoch": ev.epoch,
                "decision": "no candidate",
                "lr": lrs.get(ev.step),
                "reason": ev.payload.get("reason"),
                "edits": [],
                "commit": None,
                "val_before": None,
                "val_after": None,
            }
        )
    steps.sort(key=lambda d: d["id"])
    train = started.get("config", {}).get("train", {})
    usage = run_usage(store, run_id)
    status = runs[run_id]["status"]
    stop = _last_stop(store, run_id) if status in ("stopped", "abandoned") else None
    if status == "abandoned" and stop:  # a stopped run given up (a sleep's): say why it stopped
        status = "stopped"
    return {
        "run": run_id,
        "status": status,
        "stopped": stop if status == "stopped" else None,
        "models": started.get("models", {}),
        "base_commit": started.get("base_commit"),
        "best_commit": done.get("best_commit"),
        "dataset": started.get("dataset", {}),
        "settings": {k: train.get(k) for k in SETTINGS},
        # A stopped or unfinished run has no run.finished yet: its scores so far (the baseline
        # at least) come from the runs view, the same numbers `skillvc runs` shows.
        "scores": {
            "metric": train.get("gate_metric"),
            **{
                key: done[key] if done.get(key) is not None else runs[run_id][key]
                for key in ("baseline_val", "best_val", "baseline_test", "test")
            },
        },
        "counts": {key: runs[run_id][key] for key in RUN_COUNTS},
        "usage": {
            "calls": usage.calls,
            "tokens": usage.tokens,
            "cost_usd": usage.known_cost,
            "unpriced_calls": usage.unpriced_calls,
            "cached_tokens": usage.cached_tokens,
            "cache_hit_ratio": usage.cache_hit_ratio,
        },
        "usage_by_phase": [
            {
                "phase": u.phase,
                "step": u.step,
                "epoch": u.epoch,
                "calls": u.usage.calls,
                "tokens": u.usage.tokens,
                "cost_usd": u.usage.known_cost,
            }
            for u in usage_by_phase(store, run_id)
        ],
        "curve": run_curve(store, run_id).to_dict(),
        "steps": steps,
        "activation": _activation(store, run_id),
        "routing": _routing(store),
        "worth": latest_worth(store),
    }


def _routing(store: EventStore) -> dict[str, Any] | None:
    """The library's latest routing run, shown beside the body's scores (skillvc.routing)."""
    from skillvc.routing.train import latest_routing

    return latest_routing(store)


def p_text(step: Mapping[str, Any]) -> str:
    """A step's verdict at its own gate's alpha, the words every surface uses
    (``significance.stated``): ``p = 0.109, significant (alpha 0.2)``; "" when untested.
    ``⚠`` marks an accepted step that is not significant (the paper's bundle gate accepts any
    strict gain): a reviewer should see which gains chance could explain."""
    from skillvc.review.history import gate_alpha
    from skillvc.training.significance import significant, stated

    p_value = step.get("p_value")
    if not isinstance(p_value, (int, float)):
        return ""
    alpha = gate_alpha(step)
    text = stated(p_value, alpha)
    if step.get("decision") in ("accepted", "forced") and not significant(p_value, alpha):
        text = f"⚠ {text}"
    return text


def _p_suffix(step: dict[str, Any]) -> str:
    text = p_text(step)
    return f", {text}" if text else ""


def _activation(store: EventStore, run_id: str) -> dict[str, Any] | None:
    """How often an agent target loaded the skill in the run's rollouts (None: no agent)."""
    known = [
        ev.payload["activated"]
        for ev in store.events(run_id=run_id, types=["rollout"])
        if ev.payload.get("activated") is not None
    ]
    if not known:
        return None
    loaded = sum(1 for a in known if a)
    return {"loaded": loaded, "of": len(known), "rate": loaded / len(known)}


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def val_arrow(before: float | None, after: float | None, entry: dict[str, Any]) -> str:
    """A gate's val score before -> after (an early stop's bound; a forced step's none)."""
    if entry["decision"] == "forced":
        return f"{_s(before)} → (ungated)"
    if entry.get("early_stopped"):
        return (
            f"{_s(before)} → ≤{_s(_bound(entry))} (stopped early after "
            f"{entry.get('n_evaluated')} of {entry.get('n')})"
        )
    return f"{_s(before)} → {_s(after)}"


def _bound(entry: dict[str, Any]) -> float | None:
    bound = entry.get("val_after_bound")
    return bound if bound is not None else entry.get("val_after")


def _one_line(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _md_text(text: str | None, width: int = 160) -> str:
    # Edits quote skills, which hold tags such as <answer>: GitHub would render (or drop) them
    # as HTML, and a quoted </details> would end a folded section early. A lone backtick
    # would open a code span that swallows the rest of the line.
    text = _one_line(text, width)
    for char, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "\\`")):
        text = text.replace(char, escaped)
    return text


def _md_code(text: str | None, width: int = 60) -> str:
    """``text`` as an inline code span, which backticks in it must not end early."""
    text = _one_line(text, width)
    ticks = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fenced(lang: str, body: str) -> list[str]:
    """A fenced code block longer than any backtick run in ``body``: skills often hold ```
    blocks of their own, which would otherwise close the diff and spill it into the page."""
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    return [f"{fence}{lang}", body, fence]


def _edit_line(edit: dict[str, Any]) -> str:
    return "- " + edit_sentence(edit, _md_code, _md_text, "**{}**", "*{}*")


def edit_sentence(
    edit: dict[str, Any],
    code: Callable[[str | None, int], str],
    text: Callable[[str | None, int], str],
    bold: str,
    italic: str,
) -> str:
    """One edit as a sentence in a report's markup: ``code`` and ``text`` quote a value (cut to
    a width where the markup cuts), ``bold`` and ``italic`` are ``str.format`` patterns."""
    op = edit.get("op")
    # A skill package's edit to a file other than SKILL.md names it ("file" is absent else).
    into = f" in {code(edit['file'], 80)}" if edit.get("file") else ""
    if op == "add":
        where = f" after {code(edit.get('anchor'), 60)}" if edit.get("anchor") else ""
        head = f"{bold.format('add')}{into}{where}: “{text(edit.get('content'), 160)}”"
    elif op == "replace":
        head = (
            f"{bold.format('replace')}{into} “{text(edit.get('target'), 80)}” with "
            f"“{text(edit.get('content'), 160)}”"
        )
    else:
        head = f"{bold.format('delete')}{into} “{text(edit.get('target'), 160)}”"
    why = f" — {italic.format('why:')} {text(edit.get('rationale'), 240)}"
    return head + (why if edit.get("rationale") else "")


def _files_note(step: dict[str, Any]) -> str:
    """`` of a, b`` (the files a package's candidate changed) for its ``<summary>``, which is
    HTML: escaped. Single-file skills' steps have no ``files``."""
    files = step.get("files") or []
    return f" of {html.escape(', '.join(files))}" if files else ""


def _files_line(step: dict[str, Any]) -> list[str]:
    """The files a package's candidate changed, as a line above its diff."""
    files = step.get("files") or []
    return [f"Files: {', '.join(_md_code(f, 120) for f in files)}", ""] if files else []


def _flips(ids: list[str], way: str) -> str:
    shown = ", ".join(ids[:10]) + (", …" if len(ids) > 10 else "")
    return f"{len(ids)} {way}" + (f" ({shown})" if ids else "")


def _title(entry: dict[str, Any]) -> str:
    return "slow update" if entry["kind"] == "slow_update" else f"step {entry['step']}"


def _settings_line(report: dict[str, Any]) -> str:
    t = report["settings"]
    line = (
        f"Settings: epochs {t['epochs']}, batch {t['batch_size']}, minibatch "
        f"{t['minibatch_size']}, lr {t['learning_rate']} → {t['min_learning_rate']} "
        f"({t['lr_schedule']}), gate {t['gate_metric']}, seed {t['seed']}; dataset "
        f"`{report['dataset'].get('hash')}`."
    )
    if str(report["models"].get("target", "")).startswith("sim:"):
        line += " The target and optimizer are the offline simulator, a toy world, not a model."
    return line


def _counts(steps: list[dict[str, Any]]) -> dict[str, int]:
    """Steps and slow updates counted apart, from a report's rows."""

    def count(kind: str, decisions: tuple[str, ...]) -> int:
        return sum(1 for s in steps if s.get("kind", "step") == kind and s["decision"] in decisions)

    return {
        "steps": count("step", ("accepted", "forced", "rejected", "no candidate")),
        "accepted": count("step", ("accepted", "forced")),
        "rejected": count("step", ("rejected",)),
        "slow_updates": count("slow_update", ("accepted", "forced", "rejected")),
        "slow_updates_accepted": count("slow_update", ("accepted", "forced")),
        "slow_updates_rejected": count("slow_update", ("rejected",)),
    }


def _resume_hint(stopped: str) -> str:
    # A run stopped for its cost stops again when resumed as it was: it needs a budget.
    if "budget" in stopped or "projected to cost" in stopped:
        return "Resume it with `skillvc train --budget-usd N` (a budget above its cost so far)."
    return "Run `skillvc train` to resume it."


def _sha(commit: str | None, decision: str | None) -> str:
    """A kept commit as GitHub links it in a pull request: the full sha, bare (GitHub shows its
    first 7 characters as a link; in a code span it would be plain text). A rejected one lives
    on a local ref (refs/skillvc/rejected/...) GitHub does not have: a short sha as code."""
    if not commit:
        return "–"
    return commit if decision in ("accepted", "forced") else f"`{commit[:10]}`"


def render_markdown(report: dict[str, Any]) -> str:
    sc, usage = report["scores"], report["usage"]
    counts = report["dataset"].get("counts", {})
    cost = "price unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
    accepted = [s for s in report["steps"] if s["decision"] in ("accepted", "forced")]
    rejected = [s for s in report["steps"] if s["decision"] == "rejected"]
    n = report.get("counts") or _counts(report["steps"])
    empty = n["steps"] - n["accepted"] - n["rejected"]
    slow = (
        f"; {n['slow_updates']} slow updates ({n['slow_updates_accepted']} accepted, "
        f"{n['slow_updates_rejected']} rejected)"
        if n["slow_updates"]
        else ""
    )
    curve = Curve.from_dict(report["curve"]) if report.get("curve") else None
    chart = (
        [
            "",
            *mermaid_xychart(curve),
            "",
            "<sub>Step 0 is the baseline; the curve is read from "
            "the event log (`skillvc report --html` draws it with every decision marked).</sub>",
        ]
        if curve is not None and len(curve.points) > 1
        else []
    )
    withheld = report.get("withheld") or 0
    out = [
        f"## skillvc training run `{report['run']}` ({report['status']})",
        "",
        *(
            [
                f"{withheld} value(s) that looked like credentials were withheld from this report.",
                "",
            ]
            if withheld
            else []
        ),
        *(
            [f"Stopped: {_md_text(report['stopped'], 600)} {_resume_hint(report['stopped'])}", ""]
            if report.get("stopped")
            else []
        ),
        f"| {sc['metric'] or 'score'} | baseline | best |",
        "|---|---|---|",
        f"| val (n={counts.get('val', '?')}) | {_s(sc['baseline_val'])} | {_s(sc['best_val'])} |",
        f"| test (n={counts.get('test', '?')}) | {_s(sc['baseline_test'])} | {_s(sc['test'])} |",
        *(
            [
                "",
                f"**Worth:** {w['sentence']} ({_s(w.get('baseline_mean'))} -> "
                f"{_s(w.get('skill_mean'))} over {w.get('n')} items)",
            ]
            if (w := report.get("worth"))
            else []
        ),
        *chart,
        "",
        f"{n['steps']} steps: {n['accepted']} accepted, {n['rejected']} rejected, {empty} "
        f"with nothing to try{slow} · model calls {usage['calls']:,} · "
        f"tokens {usage['tokens']:,} · cost {cost} · target `{report['models'].get('target')}`, "
        f"optimizer `{report['models'].get('optimizer')}`",
        *(
            ["", f"{cache[0].upper()}{cache[1:]}."]
            if (cache := cache_text(usage.get("cached_tokens") or 0, usage.get("cache_hit_ratio")))
            else []
        ),
        *(
            [
                "",
                f"Skill loaded by the agent in {act['loaded']}/{act['of']} rollouts "
                f"({act['rate']:.0%}).",
            ]
            if (act := report.get("activation"))
            else []
        ),
        "",
        _settings_line(report),
        "",
        "### Steps",
        "",
        "| step | epoch | lr | decision | val | p | edits | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    icon = {"accepted": "✅ accepted", "forced": "⚠️ ungated", "rejected": "❌ rejected"}
    for s in report["steps"]:
        commit = _sha(s.get("commit"), s["decision"])
        if s["decision"] == "no candidate":
            out.append(
                f"| {_title(s)} | {s['epoch']} | {s['lr']} | – no candidate | – | – | 0 | – |"
            )
            continue
        out.append(
            f"| {_title(s)} | {s['epoch']} | {s['lr'] if s['lr'] is not None else '–'} | "
            f"{icon.get(s['decision'], s['decision'])} | "
            f"{val_arrow(s['val_before'], s['val_after'], s)} | "
            f"{p_text(s) or '–'} | "
            f"{len(s['edits'])} | {commit} |"
        )
    if not report["steps"]:  # a table of headers alone reads as a rendering fault
        out[-2:] = ["No step has run yet."]
    if accepted:
        out += ["", "### Accepted edits"]
        for s in accepted:
            flips = s.get("flipped") or {}
            gained, lost = flips.get("gained", []), flips.get("lost", [])
            out += [
                "",
                f"#### {_title(s).capitalize()} — {_sha(s.get('commit'), s['decision'])} "
                f"(val {val_arrow(s['val_before'], s['val_after'], s)}{_p_suffix(s)})",
                "",
            ]
            out += [_edit_line(e) for e in s["edits"]] or [
                "- guidance in the protected slow-update region"
            ]
            if gained or lost:
                out.append(f"- flipped on val: {_flips(gained, 'up')}, {_flips(lost, 'down')}")
            if s.get("patch"):
                out += [
                    "",
                    f"<details><summary>Diff{_files_note(s)}</summary>",
                    "",
                    *_fenced("diff", s["patch"].rstrip("\n")),
                    "",
                    "</details>",
                ]
    if rejected:
        out += ["", f"### Rejected candidates ({len(rejected)})", ""]
        for s in rejected:
            ref = f" · `{s['ref']}`" if s.get("ref") else ""
            out += [
                f"<details><summary>{_title(s).capitalize()}: val "
                f"{val_arrow(s['val_before'], s['val_after'], s)}{ref}</summary>",
                "",
            ]
            out += [_edit_line(e) for e in s["edits"]] or ["- slow-update guidance"]
            if s.get("patch"):
                out += ["", *_files_line(s), *_fenced("diff", s["patch"].rstrip("\n"))]
            out += ["", "</details>"]
    if report.get("routing"):  # the library's routing beside the body's task score
        from skillvc.routing.train import routing_markdown

        out += ["", *routing_markdown(report["routing"])]
    return "\n".join(out) + "\n"


# -- scores of a skill version ----------------------------------------------------------


def known_scores(store: EventStore, skill_text: str) -> dict[str, float]:
    """Scores the log holds for exactly this skill text: {"val": mean, "test": ...}. A skill
    package's text is its bundle (``SkillPackage.bundle``), as evaluations and gates record it."""
    digest = sha256_hex(skill_text)
    scores: dict[str, float] = {}
    for row in store.query("SELECT payload FROM events WHERE type = 'evaluation' ORDER BY id DESC"):
        p = read_payload(row["payload"])
        if p.get("skill") == digest and p.get("mean") is not None:
            scores.setdefault(p.get("split", "val"), p["mean"])
    if "val" not in scores:
        for row in store.query("SELECT payload FROM events WHERE type = 'gate' ORDER BY id DESC"):
            p = read_payload(row["payload"])
            if p.get("current") == digest and p.get("before", {}).get("mean") is not None:
                scores["val"] = p["before"]["mean"]
                break
            if (
                p.get("candidate") == digest
                and not p.get("early_stopped")
                and p.get("after", {}).get("mean") is not None
            ):
                scores["val"] = p["after"]["mean"]
                break
    return scores


# -- blame ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlameLine:
    number: int
    text: str
    commit: str
    run: str | None
    step: int | None
    kind: str | None  # step | slow_update | None for human lines
    val_before: float | None
    val_after: float | None
    author: str
    # The edit that wrote the line and its own evidence: its gain and p-value from
    # attribution's test, or the gate's when the candidate had that one edit (or it was the
    # last one standing, whose test is the gate).
    edit: str | None = None
    edit_gain: float | None = None
    p_value: float | None = None
    verdict: str | None = None
    alpha: float | None = None  # the alpha ``verdict`` is judged at

    @property
    def human(self) -> bool:
        return self.run is None

    def to_dict(self) -> dict[str, Any]:
        gain = (
            None
            if self.val_before is None or self.val_after is None
            else self.val_after - self.val_before
        )
        return {
            "line": self.number,
            "text": self.text,
            "commit": self.commit,
            "human": self.human,
            "author": self.author,
            "run": self.run,
            "step": self.step,
            "kind": self.kind,
            "val_before": self.val_before,
            "val_after": self.val_after,
            "val_gain": gain,
            "edit": self.edit,
            "edit_gain": self.edit_gain,
            "p_value": self.p_value,
            "verdict": self.verdict,
            "alpha": self.alpha,
        }


def blame(store: EventStore | None, repo: Any, relpath: str, rev: str = "HEAD") -> list[BlameLine]:
    """Each line of the skill with the commit that introduced it and the gate behind it."""
    lines = repo.blame(relpath, rev)
    info: dict[str, tuple[Any, ...]] = {}
    gates: dict[str, Any] = {}
    for sha, _ in lines:
        if sha in info:
            continue
        commit = repo.commit_info(sha)
        run = commit.trailers.get("Skillvc-Run")
        gate = None
        # A training step's commit, or skillvc apply's (Skillvc-Gate): its gate is the evidence.
        if (run or commit.trailers.get("Skillvc-Gate")) and store is not None:
            done = store.query(
                "SELECT payload FROM events WHERE type = 'commit.done' "
                "AND json_extract(payload, '$.sha') = ? LIMIT 1",
                [sha],
            )
            if done:
                gate_id = read_payload(done[0]["payload"]).get("gate_id")
                gate = store.get(int(gate_id)) if gate_id is not None else None
        author = repo.git_repo.git.log("-1", "--format=%an", sha)
        if gate is not None:
            p = gate.payload
            gates[sha] = p
            info[sha] = (
                run,
                gate.step,
                p.get("kind"),
                p.get("before", {}).get("mean"),
                p.get("after", {}).get("mean"),
                author,
            )
        else:
            info[sha] = (run, None, None, None, None, author)
    out = []
    for i, (sha, text) in enumerate(lines):
        evidence = (
            line_evidence(gates[sha], text) if sha in gates else (None, None, None, None, None)
        )
        edit, gain, p_value, words, alpha = evidence
        run, step, kind, before, after, author = info[sha]
        out.append(
            BlameLine(
                i + 1,
                text,
                sha,
                run,
                step,
                kind,
                before,
                after,
                author,
                edit=edit,
                edit_gain=gain,
                p_value=p_value,
                verdict=words,
                alpha=alpha,
            )
        )
    return out


def line_evidence(
    payload: Mapping[str, Any], text: str
) -> tuple[str | None, float | None, float | None, str | None, float]:
    """(edit id, its gain, its p-value, the verdict, the alpha it is judged at) for the line
    ``text`` a gate's commit wrote: the edit whose content holds the line, and that edit's own
    test (at attribution's alpha)."""
    from skillvc.review.history import gate_alpha, verdict

    line = " ".join(text.split())
    edits = list(payload.get("edits", []))
    edit = next(
        (
            e
            for e in edits
            if line
            and any(line == " ".join(c.split()) for c in (e.get("content") or "").splitlines())
        ),
        None,
    )
    before, after = payload.get("before", {}).get("mean"), payload.get("after", {}).get("mean")
    gate_gain = None if before is None or after is None else after - before
    if edit is None:
        return (
            None,
            gate_gain,
            payload.get("p_value"),
            verdict(payload.get("p_value"), gate_alpha(payload)),
            gate_alpha(payload),
        )
    tests = {t["edit"]: t for t in (payload.get("attribution") or {}).get("tests", [])}
    test = tests.get(edit.get("id"))
    alpha = gate_alpha(payload)
    # A commit of one edit: the gate compared exactly that change with the current skill, and
    # its claim stands when it was significant. Otherwise the edit's own test decided (the
    # gate of a pruned candidate whose edits won their own tests only checks for harm).
    alone = len(edits) == 1 and verdict(payload.get("p_value"), alpha) == "significant"
    if test is None or alone:
        p_value, gain = payload.get("p_value"), gate_gain
    else:
        p_value, gain = test.get("p_value"), test.get("gain")
        credit = payload.get("attribution") or {}
        if "alpha" in credit:  # the tests' own alpha (with rounds: less than the gate's)
            alpha = gate_alpha(credit)
    return edit.get("id"), gain, p_value, verdict(p_value, alpha), alpha


__all__ = ["BlameLine", "LogEntry", "blame", "known_scores", "render_markdown", "run_report"]
