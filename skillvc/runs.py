"""The runs table (``skillvc runs``): one row per training run, read from the event log.

Calls, tokens and cost count the model calls each run itself made (answers it reused from the
log cost nothing and are not counted again). JSON keys are stable; the README lists them.
"""

from __future__ import annotations

from typing import Any

from skillvc.store import EventStore

RUN_KEYS = (
    "run",
    "status",
    "started_at",
    "target_model",
    "optimizer_model",
    "steps",
    "accepted",
    "rejected",
    "baseline_val",
    "best_val",
    "baseline_test",
    "test",
    "calls",
    "tokens",
    "cost_usd",
    "unpriced_calls",
    "best_commit",
)


def list_runs(store: EventStore, limit: int | None = None) -> list[dict[str, Any]]:
    sql = "SELECT * FROM runs ORDER BY started_at DESC, run_id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = store.query(sql)
    usage = {
        r["run_id"]: r
        for r in store.query(
            "SELECT run_id, COUNT(*) AS calls, "
            "SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)) AS tokens, "
            "SUM(cost_usd) AS cost_usd, SUM(cost_usd IS NULL) AS unpriced "
            "FROM model_calls GROUP BY run_id"
        )
    }
    out = []
    for r in rows:
        u = usage.get(r["run_id"], {})
        out.append(
            {
                "run": r["run_id"],
                "status": r["status"],
                "started_at": r["started_at"],
                "target_model": r["target_model"],
                "optimizer_model": r["optimizer_model"],
                "steps": r["steps"],
                "accepted": r["accepted"],
                "rejected": r["rejected"],
                "baseline_val": r["baseline_val"],
                "best_val": r["best_val"],
                "baseline_test": r["baseline_test"],
                "test": r["test"],
                "calls": u.get("calls", 0),
                "tokens": u.get("tokens", 0) or 0,
                # No calls of its own (all answered from the log) costs nothing, not "unknown".
                "cost_usd": None if u.get("unpriced") else (u.get("cost_usd") or 0.0),
                "unpriced_calls": u.get("unpriced", 0) or 0,
                "best_commit": r["best_commit"],
            }
        )
    return out
