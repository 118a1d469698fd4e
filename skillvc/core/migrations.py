"""Schema migrations of the event log, applied by ``EventStore`` when it opens.

Never edit a migration that has shipped: add a new one and bump ``SCHEMA_VERSION``. Views are
read models for people (``sqlite-utils``, Datasette); they are documented in the README, and
changing one means dropping and recreating it in a new migration.
"""

from __future__ import annotations

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from skillvc.core.schema import SCHEMA_VERSION  # noqa: E402,F401 - re-exported for callers

MIGRATIONS = Migrations("skillvc")


@MIGRATIONS()
def m001_events_and_blobs(db: Database) -> None:
    db.execute(
        """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,          -- canonical JSON
            run_id TEXT,
            seq INTEGER,                    -- position within the run (replay idempotency)
            step INTEGER,
            epoch INTEGER,
            key TEXT,                       -- content hash of cache events (model calls)
            created_at TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 1
        )
        """
    )
    db.execute("CREATE INDEX events_type ON events (type, id)")
    db.execute("CREATE UNIQUE INDEX events_run_seq ON events (run_id, seq) WHERE seq IS NOT NULL")
    db.execute("CREATE UNIQUE INDEX events_type_key ON events (type, key) WHERE key IS NOT NULL")
    db.execute(
        """
        CREATE TABLE blobs (
            hash TEXT PRIMARY KEY,          -- sha256 of the UTF-8 content
            size INTEGER NOT NULL,
            content TEXT NOT NULL
        )
        """
    )
    for table in ("events", "blobs"):
        for action in ("UPDATE", "DELETE"):
            db.execute(
                f"""
                CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table}
                BEGIN SELECT RAISE(ABORT, 'skillvc {table} are append-only'); END
                """
            )
    _create_views(db)


def _json_columns(source: str, spec: str) -> str:
    """One ``json_extract`` column of ``source`` (``e.payload``) a line for each
    ``path[:name]`` of ``spec`` (the name is the path's when not given), each ending in a comma."""
    lines = []
    for item in spec.split():
        path, _, name = item.partition(":")
        lines.append(f"               json_extract({source}, '$.{path}') AS {name or path},")
    return "\n".join(lines)


# The columns of an edit in a gate's list of edits (``j``: json_each over it), of a proposed
# edit, a rollout and a model call.
_EDIT_FIELDS = _json_columns("j.value", "id:edit_id op target content anchor rationale")
_PROPOSED_FIELDS = _json_columns(
    "e.payload",
    "edit.id:edit_id edit.op:op edit.target:target edit.content:content edit.anchor:anchor "
    "edit.rationale:rationale",
)
_ROLLOUT_FIELDS = _json_columns(
    "e.payload", "item:task_id split hard soft error skill:skill_blob call:cache_key"
)
_CALL_FIELDS = _json_columns(
    "e.payload",
    "role model prompt_tokens completion_tokens latency_ms cost_usd prompt:prompt_blob",
)


def _edits_of_gates(decision: str) -> str:
    """One row per edit of the candidates whose gate decision matches ``decision``."""
    return f"""
        SELECT g.id AS gate_event_id, g.run_id, g.step, g.epoch,
{_EDIT_FIELDS}
               json_extract(g.payload, '$.before.mean') AS val_before,
               json_extract(g.payload, '$.after.mean') AS val_after
        FROM events g, json_each(json_extract(g.payload, '$.edits')) j
        WHERE g.type = 'gate' AND json_extract(g.payload, '$.decision') {decision}
    """


def _proposed_edits(extra: str = "") -> str:
    """One row per proposed edit; ``extra`` appends columns (later migrations)."""
    return f"""
        SELECT e.id AS event_id, e.run_id, e.step, e.epoch, e.created_at,
{_PROPOSED_FIELDS}
               json_extract(e.payload, '$.source') AS source{extra}
        FROM events e WHERE e.type = 'edit.proposed'
    """


# Columns and joins the views of migrations 001 and 002 share (the text is part of the schema:
# each view's SQL stays exactly what its migration created).
_RUN_HEAD = """\
        SELECT s.run_id, s.created_at AS started_at,
               CASE
                 WHEN f.id IS NOT NULL THEN 'finished'
                 WHEN (SELECT x.type FROM events x WHERE x.run_id = s.run_id
                        AND x.type IN ('run.stopped', 'run.resumed')
                        ORDER BY x.id DESC LIMIT 1) = 'run.stopped' THEN 'stopped'
                 ELSE 'unfinished'
               END AS status,
               json_extract(s.payload, '$.models.target') AS target_model,
               json_extract(s.payload, '$.models.optimizer') AS optimizer_model,
               (SELECT COUNT(*) FROM events t WHERE t.run_id = s.run_id
                  AND t.type = 'step.started') AS steps,"""
_RUN_TAIL = """\
               COALESCE(json_extract(f.payload, '$.baseline_val'),
                        (SELECT json_extract(b.payload, '$.val') FROM events b
                          WHERE b.run_id = s.run_id AND b.type = 'baseline')) AS baseline_val,
               json_extract(f.payload, '$.best_val') AS best_val,
               json_extract(f.payload, '$.baseline_test') AS baseline_test,
               json_extract(f.payload, '$.test') AS test,
               json_extract(f.payload, '$.best_commit') AS best_commit
        FROM events s
        LEFT JOIN events f ON f.run_id = s.run_id AND f.type = 'run.finished'
        WHERE s.type = 'run.started'"""
_CALL_COLUMNS = f"""\
        SELECT e.id AS event_id, e.run_id, e.step, e.created_at, e.key AS cache_key,
{_CALL_FIELDS}
               json_extract(e.payload, '$.response') AS response_blob"""


def _commit_of(gate: str) -> str:
    """The commit_sha and ref columns of the ``commit.done`` event of the gate aliased ``gate``."""
    return f"""\
               (SELECT json_extract(c.payload, '$.sha') FROM events c
                 WHERE c.type = 'commit.done' AND c.run_id = {gate}.run_id
                   AND json_extract(c.payload, '$.gate_id') = {gate}.id) AS commit_sha,
               (SELECT json_extract(c.payload, '$.ref') FROM events c
                 WHERE c.type = 'commit.done' AND c.run_id = {gate}.run_id
                   AND json_extract(c.payload, '$.gate_id') = {gate}.id) AS ref"""


_GATE_FIELDS_001 = _json_columns(
    "e.payload",
    "kind decision metric before.mean:val_before after.mean:val_after before.n:n "
    "after.n:n_evaluated early_stopped lr",
)
_GATE_FIELDS_002 = _json_columns(
    "g.payload", "kind decision metric before.n:n after.n:n_evaluated early_stopped test lr"
)

# The views as migration 001 created them. Frozen: later migrations replace views, they never
# change what an earlier migration did.
_VIEWS_001 = {
    "proposed_edits": _proposed_edits(),
    "gates": f"""
        SELECT e.id AS event_id, e.run_id, e.step, e.epoch, e.created_at,
{_GATE_FIELDS_001}
               json_array_length(json_extract(e.payload, '$.edits')) AS edits,
{_commit_of("e")}
        FROM events e WHERE e.type = 'gate'
    """,
    "accepted_edits": _edits_of_gates("IN ('accepted', 'forced')"),
    "rejected_edits": _edits_of_gates("= 'rejected'"),
    "model_calls": f"""
{_CALL_COLUMNS}
        FROM events e WHERE e.type = 'model.call'
    """,
    "runs": f"""
{_RUN_HEAD}
               (SELECT COUNT(*) FROM events g WHERE g.run_id = s.run_id AND g.type = 'gate'
                  AND json_extract(g.payload, '$.decision') IN ('accepted', 'forced')) AS accepted,
               (SELECT COUNT(*) FROM events g WHERE g.run_id = s.run_id AND g.type = 'gate'
                  AND json_extract(g.payload, '$.decision') = 'rejected') AS rejected,
{_RUN_TAIL}
    """,
}


def _create_views(db: Database) -> None:
    for name, sql in _VIEWS_001.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")


# -- 002: honest gates, rollouts, texts joined, steps and slow updates counted apart ---------

# An early-stopped candidate was evaluated only on the items the current skill fails first, so
# the mean of that subset is biased low; such a gate has val_after NULL and the bound that
# decided in val_after_bound (the best full mean the candidate could still have reached).
_GATE_COLUMNS_002 = """
               json_extract(g.payload, '$.before.mean') AS val_before,
               CASE WHEN json_extract(g.payload, '$.early_stopped') THEN NULL
                    ELSE json_extract(g.payload, '$.after.mean') END AS val_after,
               json_extract(g.payload, '$.after.bound') AS val_after_bound,
               json_extract(g.payload, '$.after.n') AS evaluated,
               json_extract(g.payload, '$.p_value') AS p_value,
               json_array_length(json_extract(g.payload, '$.flipped.gained')) AS flipped_up,
               json_array_length(json_extract(g.payload, '$.flipped.lost')) AS flipped_down
"""


def _edits_of_gates_002(decision: str, extra: str = "") -> str:
    """One row per edit of the candidates whose gate decision matches ``decision``; ``extra``
    appends columns (later migrations)."""
    return f"""
        SELECT g.id AS gate_event_id, g.run_id, g.step, g.epoch,
               json_extract(g.payload, '$.kind') AS kind,
{_EDIT_FIELDS}
               {_GATE_COLUMNS_002.rstrip()}{extra}
        FROM events g, json_each(json_extract(g.payload, '$.edits')) j
        WHERE g.type = 'gate' AND json_extract(g.payload, '$.decision') {decision}
    """


def _gate_count(kind: str, decision: str) -> str:
    return f"""(SELECT COUNT(*) FROM events g WHERE g.run_id = s.run_id AND g.type = 'gate'
                  AND COALESCE(json_extract(g.payload, '$.kind'), 'step') {kind}
                  AND json_extract(g.payload, '$.decision') {decision})"""


VIEWS = {
    **_VIEWS_001,
    "gates": f"""
        SELECT g.id AS event_id, g.run_id, g.step, g.epoch, g.created_at,
{_GATE_FIELDS_002}
               json_array_length(json_extract(g.payload, '$.edits')) AS edits,
               {_GATE_COLUMNS_002},
{_commit_of("g")}
        FROM events g WHERE g.type = 'gate'
    """,
    "accepted_edits": _edits_of_gates_002("IN ('accepted', 'forced')"),
    "rejected_edits": _edits_of_gates_002("= 'rejected'"),
    "rollouts": f"""
        SELECT e.id AS event_id, e.run_id, e.step, e.epoch, e.created_at,
{_ROLLOUT_FIELDS}
               b.content AS answer
        FROM events e
        LEFT JOIN blobs b ON b.hash = json_extract(e.payload, '$.output')
        WHERE e.type = 'rollout'
    """,
    "model_calls": f"""
{_CALL_COLUMNS},
               p.content AS prompt,
               r.content AS response
        FROM events e
        LEFT JOIN blobs p ON p.hash = json_extract(e.payload, '$.prompt')
        LEFT JOIN blobs r ON r.hash = json_extract(e.payload, '$.response')
        WHERE e.type = 'model.call'
    """,
    "runs": f"""
{_RUN_HEAD}
               {_gate_count("= 'step'", "IN ('accepted', 'forced')")} AS accepted,
               {_gate_count("= 'step'", "= 'rejected'")} AS rejected,
               {_gate_count("= 'slow_update'", "IS NOT NULL")} AS slow_updates,
               {_gate_count("= 'slow_update'", "IN ('accepted', 'forced')")}
                 AS slow_updates_accepted,
               {_gate_count("= 'slow_update'", "= 'rejected'")} AS slow_updates_rejected,
{_RUN_TAIL}
    """,
}
# Views migration 002 (re)creates: every one whose definition differs from 001's, and new ones.
_VIEWS_002 = ("gates", "accepted_edits", "rejected_edits", "rollouts", "model_calls", "runs")
_DEFINED_BY_002 = VIEWS  # frozen: VIEWS is rebound below to the latest definitions


@MIGRATIONS()
def m002_honest_views(db: Database) -> None:
    for name in _VIEWS_002:
        db.execute(f"DROP VIEW IF EXISTS {name}")
        db.execute(f"CREATE VIEW {name} AS {_DEFINED_BY_002[name]}")


# -- 003: skill packages: the file an edit changes, the files a candidate changes -------------

# ``file`` is NULL for the skill file itself (a one-file skill, or a package's SKILL.md): an
# edit names its file only when it is another file of a skill package (skillvc.packages), and
# a gate lists ``files`` (a JSON array of repository paths) only in a package's run. Both are
# appended, so every column keeps its position.


def _edits_of_gates_003(decision: str) -> str:
    """``_edits_of_gates_002`` with the edit's ``file``."""
    return _edits_of_gates_002(
        decision, extra=",\n               json_extract(j.value, '$.file') AS file"
    )


VIEWS = {
    **_DEFINED_BY_002,
    "proposed_edits": _proposed_edits(
        extra=",\n               json_extract(e.payload, '$.edit.file') AS file"
    ),
    # 002's gates with one more column.
    "gates": _DEFINED_BY_002["gates"]
    .rstrip()
    .removesuffix("FROM events g WHERE g.type = 'gate'")
    .rstrip()
    + """,
               json_extract(g.payload, '$.files') AS files
        FROM events g WHERE g.type = 'gate'
    """,
    "accepted_edits": _edits_of_gates_003("IN ('accepted', 'forced')"),
    "rejected_edits": _edits_of_gates_003("= 'rejected'"),
}
_VIEWS_003 = ("proposed_edits", "gates", "accepted_edits", "rejected_edits")


@MIGRATIONS()
def m003_package_files(db: Database) -> None:
    for name in _VIEWS_003:
        db.execute(f"DROP VIEW IF EXISTS {name}")
        db.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
