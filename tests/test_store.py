from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlite_utils
from helpers import edit_dict, gate_payload, record_gate

from skillvc.core.errors import Locked, NotADatabase, SchemaTooNew, SkillvcError, UnknownEventId
from skillvc.core.events import EVENT_TYPES, EventType, upcast
from skillvc.core.migrations import MIGRATIONS, SCHEMA_VERSION, VIEWS
from skillvc.core.store import EventStore, open_store


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    s = open_store(tmp_path / "events.db")
    yield s
    s.close()


def test_blank_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    open_store(path).close()
    db = sqlite_utils.Database(path)
    assert {"events", "blobs"} <= set(db.table_names())
    assert set(VIEWS) <= set(db.view_names())
    assert [m.name for m in MIGRATIONS.applied(db)] == [m.name for m in MIGRATIONS._migrations]
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Opening again applies nothing twice.
    open_store(path).close()
    assert len(MIGRATIONS.applied(sqlite_utils.Database(path))) == len(MIGRATIONS._migrations)


def test_a_log_of_schema_2_gains_the_package_file_columns_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    db = sqlite_utils.Database(path)
    MIGRATIONS.apply(db, stop_before="m003_package_files")
    db.execute("PRAGMA user_version=2")
    gate = {"decision": "rejected", "kind": "step", "edits": [{"id": "e1", "op": "add"}]}
    row = {"type": "gate", "payload": json.dumps(gate), "run_id": "r", "seq": 1}
    db["events"].insert({**row, "created_at": "2026-01-01T00:00:00Z"})
    db.conn.commit()
    assert "file" not in {c.name for c in db["rejected_edits"].columns}
    db.close()
    with open_store(path) as store:
        rows = store.query("SELECT edit_id, file FROM rejected_edits")
        files = store.query("SELECT files FROM gates")
    assert rows == [{"edit_id": "e1", "file": None}] and files == [{"files": None}]
    assert sqlite_utils.Database(path).execute("PRAGMA user_version").fetchone()[0] == 3


def test_events_are_append_only_in_the_database_itself(store: EventStore) -> None:
    event = store.append("run.started", {"a": 1}, run_id="r1", seq=1)
    store.put_blob("hello")
    raw = sqlite3.connect(store.path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE events SET payload = '{}' WHERE id = ?", (event.id,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM events")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM blobs")
    assert store.get(event.id).payload == {"a": 1}


def test_run_events_are_idempotent_by_seq(store: EventStore) -> None:
    first = store.append("step.started", {"lr": 4}, run_id="r1", seq=1, step=1, epoch=1)
    again = store.append("step.started", {"lr": 4}, run_id="r1", seq=1, step=1, epoch=1)
    assert again.id == first.id
    assert store.count() == 1
    with pytest.raises(SkillvcError, match="diverged at event 1") as diverged:
        store.append("gate", {}, run_id="r1", seq=1)
    # What to do next, and the likely cause short of a bug: a run started with an earlier skillvc.
    assert "skillvc train --new" in diverged.value.hint
    assert "earlier skillvc" in diverged.value.hint
    assert store.next_seq("r1") == 2


def test_cache_events_are_idempotent_by_key(store: EventStore) -> None:
    a = store.append("model.call", {"response": "x"}, key="k1")
    b = store.append("model.call", {"response": "y"}, key="k1")
    assert b.id == a.id and b.payload == {"response": "x"}
    assert store.find("model.call", "k1").id == a.id
    assert store.find("model.call", "nope") is None


def test_blobs_are_content_addressed(store: EventStore) -> None:
    h1 = store.put_blob("skill text ✓")
    h2 = store.put_blob("skill text ✓")
    assert h1 == h2 and len(h1) == 64
    assert store.get_blob(h1) == "skill text ✓"
    assert store.query("SELECT COUNT(*) AS n FROM blobs")[0]["n"] == 1
    with pytest.raises(UnknownEventId):
        store.get_blob("0" * 64)


def test_unknown_event_id(store: EventStore) -> None:
    with pytest.raises(UnknownEventId, match="No event with id 99"):
        store.get(99)


@pytest.fixture
def fresh_db(tmp_path: Path) -> Path:
    """A new, closed event log file."""
    path = tmp_path / "events.db"
    open_store(path).close()
    return path


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_text("this is a text file, not sqlite\n" * 10)
    with pytest.raises(NotADatabase, match="is not a SQLite database"):
        open_store(path)


def test_schema_from_newer_skillvc_is_refused(fresh_db: Path) -> None:
    path = fresh_db
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaTooNew, match="newer than this skillvc"):
        open_store(path)


def test_unknown_applied_migration_is_refused(fresh_db: Path) -> None:
    path = fresh_db
    db = sqlite_utils.Database(path)
    db["_sqlite_migrations"].insert(
        {"migration_set": "skillvc", "name": "m999_future", "applied_at": "2030-01-01"}
    )
    # Without a version stamp, the names of the applied migrations still give it away.
    db.execute("PRAGMA user_version=0")
    db.close()
    with pytest.raises(SchemaTooNew, match="m999_future"):
        open_store(path)


def test_upcasting_old_payloads_on_read(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    old = store.append("edit.proposed", {"edit": {"op": "add", "text": "x"}})
    assert old.version == 1
    upgraded = EventType(
        "edit.proposed",
        2,
        "renamed text -> content",
        upcasters={1: lambda p: {"edit": {"op": p["edit"]["op"], "content": p["edit"]["text"]}}},
    )
    monkeypatch.setitem(EVENT_TYPES, "edit.proposed", upgraded)
    read = store.get(old.id)
    assert read.version == 2
    assert read.payload == {"edit": {"op": "add", "content": "x"}}
    # Stored row is untouched.
    raw = store.query("SELECT payload, version FROM events WHERE id = ?", [old.id])[0]
    assert raw["version"] == 1 and '"text"' in raw["payload"]
    assert upcast("unknown.type", 1, {"x": 1}) == (1, {"x": 1})


def test_transaction_rolls_back_together(store: EventStore) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.append("rollout", {"i": 1}, run_id="r", seq=1)
        store.append("rollout", {"i": 2}, run_id="r", seq=2)
        raise RuntimeError("boom")
    assert store.count() == 0


def test_concurrent_appends_from_threads(store: EventStore) -> None:
    def work(n: int) -> None:
        for i in range(50):
            store.append("model.call", {"n": n, "i": i}, key=f"{n}-{i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count() == 200


def test_views_answer_sql_over_gate_events(store: EventStore) -> None:
    store.append(
        "run.started", {"models": {"target": "sim:a", "optimizer": "sim:b"}}, run_id="r1", seq=1
    )
    edit = edit_dict("e1", "add", "Be brief.", "answers too long")
    store.append("edit.proposed", {"edit": edit, "source": "optimizer"}, run_id="r1", seq=2)
    accepted = gate_payload("accepted", 0.5, 0.7, 10, [edit])
    record_gate(store, accepted, run_id="r1", seq=3, step=1, commit=("abc123", "refs/heads/main"))
    rejected = gate_payload("rejected", 0.7, 0.7, 10, [dict(edit, id="e2", content="Be rude.")])
    record_gate(store, rejected, run_id="r1", seq=5, step=2)
    assert store.query("SELECT edit_id, op FROM proposed_edits") == [{"edit_id": "e1", "op": "add"}]
    assert store.query("SELECT edit_id FROM accepted_edits") == [{"edit_id": "e1"}]
    assert store.query("SELECT edit_id, content FROM rejected_edits") == [
        {"edit_id": "e2", "content": "Be rude."}
    ]
    gates = store.query("SELECT step, decision, commit_sha, val_after FROM gates ORDER BY step")
    assert gates == [
        {"step": 1, "decision": "accepted", "commit_sha": "abc123", "val_after": 0.7},
        {"step": 2, "decision": "rejected", "commit_sha": None, "val_after": 0.7},
    ]
    for step in (1, 2):
        store.append("step.started", {"lr": 4}, run_id="r1", seq=10 + step, step=step)
    runs = store.query("SELECT run_id, status, steps, accepted, rejected FROM runs")
    assert runs == [
        {"run_id": "r1", "status": "unfinished", "steps": 2, "accepted": 1, "rejected": 1}
    ]


def _hold_lock(db: str, ready: multiprocessing.Event, release: multiprocessing.Event) -> None:
    s = EventStore(db)
    with s.writer_lock():
        ready.set()
        release.wait(10)


def test_second_writer_gets_a_clear_error_and_readers_still_work(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    open_store(db).close()
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(db), ready, release))
    holder.start()
    try:
        assert ready.wait(20)
        s = open_store(db)
        with (
            pytest.raises(Locked, match=r"Another skillvc train is running .*pid \d+"),
            s.writer_lock(),
        ):
            pass
        assert s.count() == 0  # reading works while the writer holds the lock
    finally:
        release.set()
        holder.join(20)
    with s.writer_lock():  # released when the holder ends
        pass
    s.close()


def test_reads_from_other_threads_never_see_an_open_transaction(store: EventStore) -> None:
    # One connection serves every thread: without a lock around reads, a worker thread's
    # cache look-up saw rows of another thread's transaction that was then rolled back.
    inside, read_done = threading.Event(), threading.Event()
    seen: list[object] = []

    def reader() -> None:
        inside.wait(5)
        seen.append(store.find("model.call", "k"))
        read_done.set()

    t = threading.Thread(target=reader)
    t.start()
    with pytest.raises(RuntimeError), store.transaction():
        store.append("model.call", {"response": "x"}, key="k")
        inside.set()
        # The reader must wait for the transaction to end rather than read inside it.
        assert not read_done.wait(0.3)
        raise RuntimeError("roll back")
    t.join(5)
    assert seen == [None]


def test_concurrent_first_opens_migrate_once(tmp_path: Path) -> None:
    # Two commands opening a fresh log at once used to fail with "table events already
    # exists", "database is locked", or a NotADatabase error for a merely busy file.
    path = tmp_path / "events.db"
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def opener() -> None:
        barrier.wait(5)
        try:
            EventStore(path).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(MIGRATIONS.applied(sqlite_utils.Database(path))) == len(MIGRATIONS._migrations)


def test_a_busy_database_is_not_called_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skillvc.core.store as store_module

    monkeypatch.setattr(store_module, "_BUSY_TIMEOUT", 0.2)
    path = tmp_path / "events.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(SkillvcError, match="stayed locked by another process") as info:
            EventStore(path)
        assert not isinstance(info.value, NotADatabase)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_key_stored_meanwhile_by_another_process_is_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.db"
    mine, theirs = open_store(path), open_store(path)
    try:
        # Both looked the key up and missed; the other process appended first.
        monkeypatch.setattr(mine, "_existing", lambda *args: None)
        first = theirs.append("model.call", {"response": "theirs"}, key="k")
        again = mine.append("model.call", {"response": "mine"}, key="k")
        assert again.id == first.id and again.payload == {"response": "theirs"}
        assert mine.count() == 1
    finally:
        mine.close()
        theirs.close()


def test_run_event_with_a_key_already_stored_at_another_seq(store: EventStore) -> None:
    first = store.append("commit.done", {"sha": "a"}, run_id="r", seq=3, key="gate:7")
    again = store.append("commit.done", {"sha": "a"}, run_id="r", seq=5, key="gate:7")
    assert again.id == first.id
    assert store.count() == 1


def test_a_failed_commit_does_not_leave_the_transaction_open(store: EventStore) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction():
        store.append("rollout", {"i": 1}, run_id="r", seq=1)
        raise Boom
    assert not store.conn.in_transaction
    store.append("rollout", {"i": 1}, run_id="r", seq=1)
    assert store.count() == 1


def test_a_refused_log_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.db"
    open_store(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def spy(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", spy)
    with pytest.raises(SchemaTooNew):
        open_store(path)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        opened[0].execute("SELECT 1")
