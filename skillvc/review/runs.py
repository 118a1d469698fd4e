"""The runs table (``skillvc runs``): one row per training run, read from the event log.

What a run used is ``skillvc.models.usage.run_usage``: the model calls the run itself made (its
``model.call`` events, over every process that worked on it). Answers it reused from the log
cost nothing and are not counted again. ``train``'s summary, ``runs`` and ``report`` all read it.
Costs are summed exactly (``Fraction``), so the figure does not depend on the order of rows.

Prompt caching: ``cache_hit_ratio`` is the share of the run's input tokens the providers read
from their prompt cache (``cached_tokens / input_tokens`` of its own calls; None without input
tokens). ``prompt_tokens`` of a call counts every input token, cached ones included.

Steps and slow updates are counted apart: ``accepted``/``rejected`` are step candidates only,
``slow_updates_*`` the epoch-end slow updates. JSON keys are stable; the README lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillvc.core.events import read_payload
from skillvc.core.store import EventStore
from skillvc.models.usage import RunUsage, sum_usage, usage_by_run
from skillvc.review.curves import OF_SKILL, run_curve

# The counts of a run's steps and gates (a report's "counts").
RUN_COUNTS = (
    "steps",
    "accepted",
    "rejected",
    "slow_updates",
    "slow_updates_accepted",
    "slow_updates_rejected",
)
RUN_KEYS = (
    "run",
    "status",
    "started_at",
    "target_model",
    "optimizer_model",
    *RUN_COUNTS,
    "baseline_val",
    "best_val",
    "baseline_test",
    "test",
    "calls",
    "tokens",
    "cost_usd",
    "unpriced_calls",
    "cached_tokens",
    "cache_hit_ratio",
    "best_commit",
    "val_curve",
)


def cache_text(cached_tokens: int, ratio: float | None) -> str | None:
    """The prompt-cache line of ``train``'s summary and ``report``; None when nothing was read
    from a provider's cache (then the line is left out, as for runs before caching)."""
    if not cached_tokens or ratio is None:
        return None
    return (
        f"prompt cache: {cached_tokens:,} input tokens read from the providers' cache "
        f"(cache hit ratio {ratio:.1%})"
    )


# Runs given up unfinished. A finished run is never abandoned (the runs view says finished).
_ABANDONED = (
    "SELECT a.run_id FROM events a WHERE a.type = 'run.abandoned' AND NOT EXISTS "
    "(SELECT 1 FROM events f WHERE f.type = 'run.finished' AND f.run_id = a.run_id)"
)


def list_runs(
    store: EventStore,
    limit: int | None = None,
    skill_path: str | None = None,
    *,
    abandoned: bool = False,
) -> list[dict[str, Any]]:
    """Runs, newest first; ``skill_path``: only the runs of that skill; ``abandoned``: also
    the runs given up unfinished (replaced by ``train --new`` or new settings), whose status
    is then ``abandoned``."""

    conditions, params = ([OF_SKILL], [skill_path]) if skill_path is not None else ([], [])
    if not abandoned:
        conditions.append(f"run_id NOT IN ({_ABANDONED})")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = f"SELECT * FROM runs{where} ORDER BY started_at DESC, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = store.query(sql, params)
    usage = usage_by_run(store)
    gone = {r["run_id"] for r in store.query(_ABANDONED)} if abandoned else set()
    if skill_path is None:  # a routing run trains the whole library, no one skill
        rows = sorted(
            [*rows, *_routing_rows(store, abandoned)],
            key=lambda r: (r["started_at"], r["run_id"]),
            reverse=True,
        )[:limit]
        gone |= {r["run_id"] for r in rows if r.get("abandoned")}
    out = []
    for r in rows:
        u = usage.get(r["run_id"], RunUsage())
        out.append(
            {
                "run": r["run_id"],
                "status": "abandoned" if r["run_id"] in gone else r["status"],
                "started_at": r["started_at"],
                "target_model": r["target_model"],
                "optimizer_model": r["optimizer_model"],
                "steps": r["steps"],
                "accepted": r["accepted"],
                "rejected": r["rejected"],
                "slow_updates": r["slow_updates"],
                "slow_updates_accepted": r["slow_updates_accepted"],
                "slow_updates_rejected": r["slow_updates_rejected"],
                "baseline_val": r["baseline_val"],
                "best_val": r["best_val"],
                "baseline_test": r["baseline_test"],
                "test": r["test"],
                "calls": u.calls,
                "tokens": u.tokens,
                # No calls of its own (all answered from the log) costs nothing, not "unknown".
                "cost_usd": u.known_cost,
                "unpriced_calls": u.unpriced_calls,
                "cached_tokens": u.cached_tokens,
                "cache_hit_ratio": u.cache_hit_ratio,
                "best_commit": r["best_commit"],
                "val_curve": r["val_curve"]
                if "val_curve" in r
                else [p.val for p in run_curve(store, r["run_id"]).points],
            }
        )
    return out


# Routing runs (skillvc.routing.train) log routing.started/routing.finished, not run.*: a body
# run's resume looks for an unfinished run.started, which a routing run must never be. Their
# scores are the library's (share of trigger prompts routed right), not a task score.
_ROUTING_RUNS = """
    SELECT s.run_id, s.created_at AS started_at,
           json_extract(s.payload, '$.models.target') AS target_model,
           json_extract(s.payload, '$.models.optimizer') AS optimizer_model,
           f.payload AS finished,
           (SELECT x.type FROM events x WHERE x.run_id = s.run_id
             AND x.type IN ('run.stopped', 'run.resumed') ORDER BY x.id DESC LIMIT 1) AS last,
           EXISTS (SELECT 1 FROM events a WHERE a.run_id = s.run_id
             AND a.type = 'run.abandoned') AS abandoned
    FROM events s LEFT JOIN events f ON f.run_id = s.run_id AND f.type = 'routing.finished'
    WHERE s.type = 'routing.started'
      AND s.id = (SELECT MIN(m.id) FROM events m WHERE m.type = 'routing.started'
                  AND m.run_id = s.run_id)
"""


def _routing_rows(store: EventStore, abandoned: bool) -> list[dict[str, Any]]:
    """Routing runs as rows of the runs table: steps and description gates counted, the
    library score on val at the start and the end (the curve: after each step), on test."""
    out = []
    for r in store.query(_ROUTING_RUNS):
        if r["abandoned"] and (r["finished"] or not abandoned):
            continue
        done = read_payload(r["finished"]) if r["finished"] else None
        curve, steps, accepted, rejected = _routing_curve(store, r["run_id"])
        status = "finished" if done else ("stopped" if r["last"] == "run.stopped" else "unfinished")
        test_before = ((done or {}).get("test_before") or {}).get("library")
        out.append(
            {
                "run_id": r["run_id"],
                "started_at": r["started_at"],
                "status": status,
                "abandoned": bool(r["abandoned"]),
                "target_model": r["target_model"],
                "optimizer_model": r["optimizer_model"],
                "steps": steps,
                "accepted": accepted,
                "rejected": rejected,
                "slow_updates": 0,
                "slow_updates_accepted": 0,
                "slow_updates_rejected": 0,
                "baseline_val": curve[0] if curve else None,
                "best_val": ((done or {}).get("after") or {}).get("library"),
                "baseline_test": test_before,
                "test": ((done or {}).get("test_after") or {}).get("library"),
                "best_commit": (done or {}).get("head"),
                "val_curve": curve,
            }
        )
    return out


def _routing_curve(store: EventStore, run_id: str) -> tuple[list[float], int, int, int]:
    """(the library score on val at the start and after each step, steps, accepted gates,
    rejected gates) of a routing run."""
    rows = store.query(
        "SELECT type, step, payload FROM events WHERE run_id = ? AND (type = 'step.started' "
        "OR (type = 'gate' AND json_extract(payload, '$.kind') = 'routing') OR (type = "
        "'routing.evaluated' AND json_extract(payload, '$.label') = 'baseline' "
        "AND json_extract(payload, '$.split') = 'val')) ORDER BY id",
        [run_id],
    )
    curve: list[float] = []
    steps = accepted = rejected = 0
    for r in rows:
        p = read_payload(r["payload"])
        if r["type"] == "routing.evaluated":
            curve = [p["library"]] if p.get("library") is not None else []
        elif r["type"] == "step.started":
            steps += 1
            if curve:
                curve.append(curve[-1])
        elif p.get("decision") == "accepted":
            accepted += 1
            after = (p.get("after") or {}).get("mean")
            if curve and after is not None:
                curve[-1] = after
        else:
            rejected += 1
    return curve, steps, accepted, rejected


@dataclass(frozen=True)
class PhaseUsage:
    """What one phase of a run used: the baseline, a step, an epoch's end or the final test."""

    phase: str  # "baseline", "step", "epoch end" or "test"
    step: int | None  # the step, or the last step before an epoch's end
    epoch: int | None
    usage: RunUsage


def usage_by_phase(store: EventStore, run_id: str) -> list[PhaseUsage]:
    """``run_usage`` split by phase; the phases add up to it exactly.

    A ``model.call`` event carries a step only for some roles, so each call is given the phase
    of the next event the run logged after it: every stage logs its results (rollouts, edits,
    the gate) after its calls. Calls still pending when the log ends go to the last phase.
    """
    rows = store.query(
        "SELECT type, step, epoch, json_extract(payload, '$.split') AS split, "
        "json_extract(payload, '$.prompt_tokens') AS prompt_tokens, "
        "json_extract(payload, '$.completion_tokens') AS completion_tokens, "
        "json_extract(payload, '$.cached_tokens') AS cached_tokens, "
        "json_extract(payload, '$.cost_usd') AS cost_usd "
        "FROM events WHERE run_id = ? ORDER BY id",
        [run_id],
    )
    phases: dict[tuple[str, int | None, int | None], list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    last_step: int | None = None
    key: tuple[str, int | None, int | None] = ("baseline", 0, None)
    for r in rows:
        if r["type"] == "model.call":
            pending.append(r)
            continue
        if r["type"] in ("run.started", "run.resumed", "run.stopped"):
            continue
        if r["step"] is not None:
            last_step = r["step"]
            key = ("step", r["step"], r["epoch"])
        elif r["split"] == "test" or r["type"] in ("evaluation", "run.finished"):
            key = ("test", None, None)
        elif last_step is None:
            key = ("baseline", 0, None)
        else:
            key = ("epoch end", last_step, r["epoch"])
        phases.setdefault(key, []).extend(pending)
        pending = []
    if pending:
        phases.setdefault(key, []).extend(pending)
    return [
        PhaseUsage(phase, step, epoch, sum_usage(calls))
        for (phase, step, epoch), calls in phases.items()
        if calls
    ]
