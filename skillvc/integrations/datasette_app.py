"""``skillvc datasette``: the event log in Datasette, read-only, with metadata and canned queries.

Invariants:
- Datasette opens ``.skillvc/events.db`` in immutable mode (``-i``): it cannot write, and it
  serves the log as it was when the server started (a passive WAL checkpoint first folds in
  what earlier writers left in the ``-wal`` file).
- It listens on 127.0.0.1 only.
- Every column of every view has a description here (a test checks it against the database),
  so the metadata cannot fall behind the views.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

from skillvc.core.errors import SkillvcError, StateConflict

INSTALL_HINT = "Install the extra: pip install 'skillvc[datasette]'."

# What a column means, wherever it appears (a view-specific meaning overrides it below).
COLUMNS = {
    "event_id": "id of the event in the events table",
    "gate_event_id": "id of the gate event that decided the candidate",
    "run_id": "training run",
    "step": "step of the run (NULL for epoch-end work such as slow updates)",
    "epoch": "epoch of the run",
    "created_at": "when the event was logged (UTC)",
    "edit_id": "content hash of the edit",
    "op": "add, replace or delete",
    "target": "text the edit replaces or deletes",
    "content": "text the edit adds or puts in place",
    "anchor": "line an added text goes after",
    "rationale": "why the optimizer proposed the edit",
    "source": "optimizer, skillvc (its own worked-examples edit) or human (skillvc apply)",
    "file": "a skill package's file the edit changes (NULL: the skill file, SKILL.md)",
    "files": "a skill package's files the candidate changes (JSON array; NULL: one-file skill)",
    "kind": "step or slow_update",
    "decision": "accepted, rejected or forced (an ungated slow update)",
    "metric": "score the gate compared: hard, soft or mixed",
    "n": "val items the current skill has a score for",
    "n_evaluated": "val items the candidate was run on",
    "evaluated": "val items the candidate was run on (fewer than n when stopped early)",
    "early_stopped": "1 when the gate stopped once the candidate could no longer win",
    "test": "significance test behind p_value: sign or normal",
    "lr": "textual learning rate: edits allowed in the step",
    "edits": "number of edits in the candidate",
    "val_before": "val mean of the current skill",
    "val_after": "val mean of the candidate; NULL when the gate stopped early",
    "val_after_bound": "best full val mean the candidate could still have reached",
    "p_value": "one-sided p-value of 'the candidate is not better' (NULL: not tested)",
    "flipped_up": "val items the candidate passes and the current skill fails",
    "flipped_down": "val items the candidate fails and the current skill passes",
    "commit_sha": "git commit of the candidate (accepted, or kept under a rejected ref)",
    "ref": "git ref the commit is on",
    "task_id": "id of the task item",
    "split": "train, val or test",
    "hard": "0/1 score",
    "soft": "0..1 score",
    "error": "why the item has no score (a failed call); NULL when scored",
    "skill_blob": "hash of the skill text (blobs table)",
    "cache_key": "content hash of the model call",
    "answer": "the target's answer",
    "role": "target, optimizer or judge",
    "model": "model name",
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "latency_ms": "latency in milliseconds",
    "cost_usd": "cost in USD (NULL when the model has no price)",
    "prompt_blob": "hash of the prompt (blobs table)",
    "response_blob": "hash of the response (blobs table)",
    "prompt": "the prompt, as JSON messages",
    "response": "the response text",
    "started_at": "when the run started (UTC)",
    "status": "finished, stopped or unfinished",
    "target_model": "model that runs the skill",
    "optimizer_model": "model that proposes edits",
    "steps": "steps started",
    "accepted": "accepted step candidates (slow updates counted apart)",
    "rejected": "rejected step candidates (slow updates counted apart)",
    "slow_updates": "epoch-end slow-update candidates",
    "slow_updates_accepted": "slow updates accepted (or applied ungated)",
    "slow_updates_rejected": "slow updates rejected",
    "baseline_val": "val mean of the seed skill",
    "best_val": "val mean of the final skill",
    "baseline_test": "test mean of the seed skill",
    "best_commit": "commit of the final skill",
}

VIEWS = {
    "proposed_edits": "One row per edit proposed by a reflection (or by skillvc apply).",
    "gates": "One row per gate decision: a candidate (a step's edits or a slow update).",
    "accepted_edits": "One row per edit of an accepted candidate.",
    "rejected_edits": "One row per edit of a rejected candidate.",
    "rollouts": "One row per item run with a skill, with its score and the answer's text.",
    "model_calls": "One row per call that reached a model, with prompt and response text.",
    "runs": "One row per training run.",
}

_LAST_RUN = "(SELECT run_id FROM events WHERE type = 'run.started' ORDER BY id DESC LIMIT 1)"

QUERIES = {
    "rejected_edits_last_run": {
        "title": "Rejected edits of the last run",
        "sql": f"""SELECT step, kind, edit_id, op, target, content, rationale, val_before,
       val_after, val_after_bound, evaluated, p_value, flipped_up, flipped_down
FROM rejected_edits WHERE run_id = {_LAST_RUN}
ORDER BY gate_event_id, edit_id""",
    },
    # Each call is given the phase of the next event its run logged (every stage logs its
    # results after its calls), as skillvc.review.runs.usage_by_phase does.
    "cost_per_step": {
        "title": "Calls, tokens and cost per step of the last run",
        "sql": f"""WITH calls AS (
  SELECT c.id, c.run_id,
         COALESCE(json_extract(c.payload, '$.prompt_tokens'), 0)
           + COALESCE(json_extract(c.payload, '$.completion_tokens'), 0) AS tokens,
         json_extract(c.payload, '$.cost_usd') AS cost_usd,
         (SELECT n.id FROM events n WHERE n.run_id = c.run_id AND n.id > c.id
            AND n.type NOT IN ('model.call', 'run.started', 'run.resumed', 'run.stopped')
          ORDER BY n.id LIMIT 1) AS next_id
  FROM events c WHERE c.type = 'model.call' AND c.run_id = {_LAST_RUN}
), phased AS (
  SELECT calls.*, n.step AS own_step, n.epoch AS own_epoch,
         CASE
           WHEN n.id IS NULL THEN 'in progress'
           WHEN n.step IS NOT NULL THEN 'step'
           WHEN json_extract(n.payload, '$.split') = 'test'
                OR n.type IN ('evaluation', 'run.finished') THEN 'test'
           WHEN NOT EXISTS (SELECT 1 FROM events s WHERE s.run_id = n.run_id
                              AND s.id < n.id AND s.step IS NOT NULL) THEN 'baseline'
           ELSE 'epoch end'
         END AS phase,
         (SELECT s.step FROM events s WHERE s.run_id = n.run_id AND s.id <= n.id
            AND s.step IS NOT NULL ORDER BY s.id DESC LIMIT 1) AS last_step
  FROM calls LEFT JOIN events n ON n.id = calls.next_id
)
SELECT phase,
       CASE phase WHEN 'step' THEN own_step WHEN 'baseline' THEN 0
                  WHEN 'epoch end' THEN last_step END AS step,
       CASE phase WHEN 'step' THEN own_epoch WHEN 'epoch end' THEN own_epoch END AS epoch,
       COUNT(*) AS calls, SUM(tokens) AS tokens,
       -- as skillvc.models.usage: no partial sum when a call has no price;
       -- no float dust (0.61870001)
       CASE WHEN SUM(cost_usd IS NULL) > 0 THEN NULL ELSE ROUND(SUM(cost_usd), 10) END
         AS cost_usd,
       SUM(cost_usd IS NULL) AS unpriced_calls
FROM phased GROUP BY 1, 2, 3 ORDER BY MIN(id)""",
    },
    "flipped_items_per_gate": {
        "title": "Val items each gate flipped up (now passed) or down (now failed)",
        "sql": """SELECT g.id AS gate_event_id, g.run_id, g.step,
       json_extract(g.payload, '$.kind') AS kind,
       json_extract(g.payload, '$.decision') AS decision, 'up' AS way, f.value AS task_id
FROM events g, json_each(json_extract(g.payload, '$.flipped.gained')) f
WHERE g.type = 'gate'
UNION ALL
SELECT g.id, g.run_id, g.step, json_extract(g.payload, '$.kind'),
       json_extract(g.payload, '$.decision'), 'down', f.value
FROM events g, json_each(json_extract(g.payload, '$.flipped.lost')) f
WHERE g.type = 'gate'
ORDER BY gate_event_id, way DESC, task_id""",
    },
}


def metadata(view_columns: dict[str, list[str]], database: str = "events") -> dict[str, Any]:
    """Datasette metadata for the log: view and column descriptions and canned queries.

    ``view_columns`` are the views' columns as the database reports them.
    """
    tables: dict[str, Any] = {}
    for view, columns in view_columns.items():
        tables[view] = {
            "description": VIEWS.get(view, ""),
            "columns": {c: COLUMNS[c] for c in columns if c in COLUMNS},
        }
    tables["events"] = {"description": "The append-only event log (payload is JSON)."}
    tables["blobs"] = {"description": "Texts stored once by SHA-256: skills, prompts, answers."}
    return {
        "title": "skillvc event log",
        "description": "Training runs of skillvc, read-only. Start with runs, gates, rollouts.",
        "databases": {database: {"tables": tables, "queries": QUERIES}},
    }


def usable_port(port: int) -> int:
    """``port`` when it is free on 127.0.0.1 (0: a free one, chosen here so the address we
    print is the one served); a taken port is one clear error, not the server's traceback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise StateConflict(
                f"Port {port} on 127.0.0.1 is in use.",
                hint="Pick another with --port N, or --port 0 for a free one.",
            ) from None
        return int(probe.getsockname()[1])


def serve_command(db: Path, metadata_file: Path, port: int) -> list[str]:
    """The Datasette command line that serves ``db`` (see the module docstring)."""
    return [
        sys.executable,
        "-m",
        "datasette",
        "serve",
        "-i",
        str(db),
        "--metadata",
        str(metadata_file),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]


def prepare(store: Any, state_dir: Path) -> Path:
    """Check Datasette is there, fold the WAL into the log, write the metadata file beside it."""
    try:
        import datasette  # noqa: F401
    except ImportError:
        raise SkillvcError("Datasette is not installed.", hint=INSTALL_HINT) from None
    views = [r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'view'")]
    columns = {
        v: [r["name"] for r in store.query(f"SELECT name FROM pragma_table_info('{v}')")]
        for v in sorted(views)
    }
    # Immutable mode reads the database file alone: what the -wal file holds would be missing.
    store.query("PRAGMA wal_checkpoint(PASSIVE)")
    path = state_dir / "datasette-metadata.json"
    path.write_text(json.dumps(metadata(columns), indent=2) + "\n", encoding="utf-8")
    return path
