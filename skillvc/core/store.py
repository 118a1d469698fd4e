"""The event store: an append-only SQLite log plus content-addressed blobs.

Invariants kept here:
- ``events`` and ``blobs`` are append-only; triggers in the database refuse UPDATE and DELETE,
  so no code path (ours or a user's SQL) can rewrite history.
- Migrations are applied when the store opens; a blank database and an old one take the same
  path. A database whose schema is newer than this code is refused, never downgraded.
- Run events are idempotent by ``(run_id, seq)`` and cache events by ``(type, key)``: appending
  the same event again returns the stored one, which is what makes resume-by-replay exact.
- No secret value is stored: every blob and payload passes through ``scrub_values`` first
  (``skillvc.secrets``), so whatever a caller forgot, the log never holds a key; payloads (a
  config snapshot's ``base_url``) also lose URL credentials. Blobs keep every other byte: a
  skill version must come back exactly as it was. Scrubbing is idempotent, so a caller that
  scrubbed already gets back the hash of exactly its text.
- WAL journaling lets readers (``skillvc log``) work while a run writes. One writer per repo
  holds ``train.lock`` (an OS file lock, released even when the process is killed).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillvc.core.errors import (
    Locked,
    LogDamaged,
    LogNotWritable,
    NotADatabase,
    NotASkillvcLog,
    SchemaTooNew,
    SkillvcError,
    StateConflict,
    UnknownEventId,
    storage_error,
)
from skillvc.core.events import DAMAGED, Event, current_version, event_from_row
from skillvc.core.hashing import canonical_json, sha256_hex
from skillvc.core.schema import SCHEMA_VERSION
from skillvc.secrets import scrub_json, scrub_stored_text, scrub_values

try:  # POSIX file locks; Windows is not supported for training (README: Limitations).
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

_COLUMNS = "id, type, payload, run_id, seq, step, epoch, key, created_at, version"
MIGRATIONS_TABLE = "_sqlite_migrations"  # where sqlite-utils records applied migrations


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


_BUSY_TIMEOUT = 30.0  # seconds to wait for another process's lock on the database


class EventStore:
    """An open event log, safe to share between threads.

    One sqlite3 connection serves every thread, so every statement - reads included - runs
    under one lock: a reader on a worker thread must never see the uncommitted rows of a
    transaction another thread has open on the same connection (they may be rolled back),
    nor have its half-read cursor aborted by that transaction's ROLLBACK.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            conn = sqlite3.connect(
                str(self.path),
                check_same_thread=False,
                isolation_level=None,
                timeout=_BUSY_TIMEOUT,
            )
            _enable_wal(conn)
        except sqlite3.OperationalError as exc:
            # "database is locked" is also an OperationalError (a DatabaseError): it means
            # busy, not corrupt, and must not be reported as "not a SQLite database".
            if "locked" in str(exc) or "busy" in str(exc):
                raise StateConflict(
                    f"The event log {self.path} stayed locked by another process for "
                    f"{_BUSY_TIMEOUT:.0f} s.",
                    hint="Wait for the other skillvc command to finish, then run this again.",
                ) from None
            # A read-only .skillvc/ (or log) is not a damaged log: never hint to move it aside.
            raise _unwritable(self.path, exc) or NotADatabase(
                f"{self.path} is not a SQLite database ({exc})."
            ) from None
        except sqlite3.DatabaseError as exc:
            raise NotADatabase(f"{self.path} is not a SQLite database ({exc}).") from None
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        self.conn = conn
        # Guards every use of ``conn`` (see the class docstring); re-entrant so a thread
        # inside ``transaction()`` can still read and append.
        self._write_lock = threading.RLock()
        self._sound = False  # quick-checked yet (see ensure_sound)
        try:
            with _writes(self.path):
                self._migrate()
        except BaseException:
            conn.close()  # a refused log must not stay open (Windows would keep it locked)
            raise

    @property
    def db(self) -> Any:
        """A sqlite-utils ``Database`` over the same connection (imported on first use)."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    # -- opening ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        # Fast path for every command after the first: the schema is current. (sqlite-utils and
        # the migration set are imported only when there may be work to do.)
        found = self.conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            r[0]
            for r in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if found == 0:  # blank, or from before user_version was set: migrations say whose
            ours = tables <= {MIGRATIONS_TABLE} or MIGRATIONS_TABLE in tables
            if not ours and {"events", "blobs"} <= tables:  # a log older than its record
                columns = {r[1] for r in self.conn.execute("PRAGMA table_info(events)")}
                ours = {"payload", "run_id", "seq", "key"} <= columns
        else:
            ours = {"events", "blobs"} <= tables
        if not ours:
            # Another application's database: migrating it would fail half-way ("table events
            # already exists") or, worse, add our tables to someone else's file.
            raise NotASkillvcLog(
                f"{self.path} is a SQLite database, but not a skillvc event log (it holds "
                f"{_listing(sorted(tables))})."
            )
        if found == SCHEMA_VERSION:
            return
        from skillvc.core.migrations import MIGRATIONS

        if found > SCHEMA_VERSION:  # checked before writing anything: the file may be read-only
            raise SchemaTooNew(
                f"{self.path} has schema version {found}, newer than this skillvc "
                f"understands ({SCHEMA_VERSION})."
            )
        # BEGIN IMMEDIATE takes the database's write lock before looking, so two processes
        # opening a fresh log at once migrate one after the other (the second then finds
        # nothing to do) instead of failing with "table events already exists" or
        # "database is locked".
        with self.transaction():
            found = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if found == SCHEMA_VERSION:
                return
            if found > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} has schema version {found}, newer than this skillvc "
                    f"understands ({SCHEMA_VERSION})."
                )
            known = {m.name for m in MIGRATIONS._migrations}
            unknown = [m.name for m in MIGRATIONS.applied(self.db) if m.name not in known]
            if unknown:
                raise SchemaTooNew(
                    f"{self.path} was migrated by a newer skillvc (unknown migration {unknown[0]})."
                )
            if MIGRATIONS.pending(self.db):
                MIGRATIONS.apply(self.db)  # nested in ours: sqlite-utils uses savepoints
            self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        with self._write_lock:
            self.conn.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- integrity ----------------------------------------------------------------------------

    def integrity(self, *, full: bool = False) -> list[str]:
        """SQLite's own findings about the file ("ok" is none): ``PRAGMA quick_check`` (pages,
        records, ordering; linear in the size, no index cross-check) or ``integrity_check``."""
        pragma = "integrity_check(100)" if full else "quick_check(20)"
        try:
            with self._write_lock:
                rows = self.conn.execute(f"PRAGMA {pragma}").fetchall()
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        found = [str(r[0]) for r in rows]
        return [] if found == ["ok"] else found

    def ensure_sound(self) -> None:
        """Raise LogDamaged when the log fails its quick check; checked once per open store,
        before its first write, so no command appends to a damaged log."""
        if self._sound:
            return
        problems = self.integrity()
        if problems:
            raise LogDamaged(
                f"The event log {self.path} is damaged ({problems[0]}); nothing was written to it."
            )
        self._sound = True

    # -- blobs ------------------------------------------------------------------------------

    def put_blob(self, text: str) -> str:
        """Store ``text`` (without secret values) once, addressed by its SHA-256; returns the
        hash of what was stored."""
        text = scrub_values(text)
        digest = sha256_hex(text)
        self.ensure_sound()
        with self._write_lock, _writes(self.path):
            self.conn.execute(
                "INSERT OR IGNORE INTO blobs (hash, size, content) VALUES (?, ?, ?)",
                (digest, len(text), text),
            )
        return digest

    def get_blob(self, digest: str) -> str:
        row = self._fetchone("SELECT content FROM blobs WHERE hash = ?", (digest,))
        if row is None:
            raise UnknownEventId(f"No blob {digest[:12]} in {self.path}.")
        return row[0]

    def has_blob(self, digest: str) -> bool:
        return self._fetchone("SELECT 1 FROM blobs WHERE hash = ?", (digest,)) is not None

    # -- appending --------------------------------------------------------------------------

    def append(
        self,
        type: str,
        payload: Mapping[str, Any],
        *,
        run_id: str | None = None,
        seq: int | None = None,
        step: int | None = None,
        epoch: int | None = None,
        key: str | None = None,
    ) -> Event:
        """Append one event, or return the identical one already stored.

        A run event re-emitted at the same ``(run_id, seq)`` must have the same type; anything
        else means the loop was not deterministic, which is a bug worth stopping for.
        """
        self.ensure_sound()
        with self._write_lock, _writes(self.path):
            existing = self._existing(type, run_id, seq, key)
            if existing is not None:
                return existing
            return self._insert(type, payload, run_id, seq, step, epoch, key)

    def append_many(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Append plain (non-idempotent) events in one transaction; returns how many."""
        rows = [
            (
                e["type"],
                _payload_json(e.get("payload", {})),
                e.get("run_id"),
                e.get("seq"),
                e.get("step"),
                e.get("epoch"),
                e.get("key"),
                _now(),
                current_version(e["type"]),
            )
            for e in events
        ]
        self.ensure_sound()
        with self._write_lock, _writes(self.path), self.transaction():
            self.conn.executemany(
                "INSERT INTO events (type, payload, run_id, seq, step, epoch, key, created_at, "
                "version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def _existing(
        self, type: str, run_id: str | None, seq: int | None, key: str | None
    ) -> Event | None:
        if run_id is not None and seq is not None:
            row = self._usable(self._row("WHERE run_id = ? AND seq = ?", (run_id, seq)))
            if row is not None and row.type != type:
                raise SkillvcError(
                    f"Replay of run {run_id} diverged at event {seq}: the log has {row.type}, "
                    f"the loop produced {type}.",
                    hint="Start a new run with 'skillvc train --new'. A run started with an "
                    "earlier skillvc can take another path where the training rules changed; "
                    "otherwise, please report this bug.",
                )
            return row
        if key is not None:
            return self._usable(self._row("WHERE type = ? AND key = ?", (type, key)))
        return None

    def _insert(
        self,
        type: str,
        payload: Mapping[str, Any],
        run_id: str | None,
        seq: int | None,
        step: int | None,
        epoch: int | None,
        key: str | None,
    ) -> Event:
        created = _now()
        version = current_version(type)
        body = _payload_json(payload)
        try:
            cur = self.conn.execute(
                "INSERT INTO events (type, payload, run_id, seq, step, epoch, key, created_at, "
                "version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (type, body, run_id, seq, step, epoch, key, created, version),
            )
        except sqlite3.IntegrityError:
            # Another process (say `skillvc eval` sharing the model-call cache) stored the
            # same (type, key) or (run_id, seq) since we looked, or a run event carries a
            # key already stored at another seq: the event is there, so return that one.
            found = self._existing(type, run_id, seq, None) if seq is not None else None
            if found is None and key is not None:
                found = self._row("WHERE type = ? AND key = ?", (type, key))
            if found is None:
                raise
            return found
        return Event(
            id=int(cur.lastrowid or 0),
            type=type,
            payload=json.loads(body),
            run_id=run_id,
            seq=seq,
            step=step,
            epoch=epoch,
            key=key,
            created_at=created,
            version=version,
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group appends so they land together or not at all."""
        self.ensure_sound()
        with self._write_lock, _writes(self.path):
            if self.conn.in_transaction:
                yield
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back by itself (disk full, I/O error); a
                # second ROLLBACK would then hide the real error. A failed COMMIT must not
                # leave the connection inside a transaction that every later append joins.
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    # -- reading ----------------------------------------------------------------------------

    def _fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._write_lock:  # see the class docstring: reads share the connection too
            return self.conn.execute(sql, params).fetchone()

    def _fetchall(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> tuple[list[str], list[Any]]:
        """Column names and every row, read in full while holding the connection's lock."""
        with self._write_lock:
            cur = self.conn.execute(sql, params)
            return [d[0] for d in cur.description or ()], cur.fetchall()

    def _row(self, where: str, params: Sequence[Any]) -> Event | None:
        with self._write_lock:
            cur = self.conn.execute(f"SELECT {_COLUMNS} FROM events {where} LIMIT 1", params)
            cur.row_factory = sqlite3.Row
            row = cur.fetchone()
        return event_from_row(row) if row is not None else None

    def _usable(self, event: Event | None) -> Event | None:
        """``event`` for code that replays its payload (a cached call, a run's event): a
        damaged one stops the command instead of being half-used."""
        if event is not None and DAMAGED in event.payload:
            raise LogDamaged(
                f"Event {event.id} ({event.type}) in {self.path} is damaged: "
                f"{event.payload[DAMAGED]}."
            )
        return event

    def get(self, event_id: int) -> Event:
        event = self._row("WHERE id = ?", (event_id,))
        if event is None:
            raise UnknownEventId(f"No event with id {event_id} in {self.path}.")
        return event

    def find(self, type: str, key: str) -> Event | None:
        """The cache event of ``type`` stored under ``key``, if any."""
        return self._usable(self._row("WHERE type = ? AND key = ?", (type, key)))

    def events(
        self,
        *,
        run_id: str | None = None,
        types: Sequence[str] | None = None,
        after_id: int = 0,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Event]:
        clauses: list[str] = ["id > ?"]
        params: list[Any] = [after_id]
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if types:
            clauses.append(f"type IN ({', '.join('?' for _ in types)})")
            params.extend(types)
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(clauses)} ORDER BY id"
        sql += " DESC" if newest_first else ""
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._write_lock:
            cur = self.conn.execute(sql, params)
            cur.row_factory = sqlite3.Row
            rows = cur.fetchall()
        return [event_from_row(r) for r in rows]

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict]:
        """Rows of a read-only SQL query (over the documented views) as dicts."""
        names, rows = self._fetchall(sql, params)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def next_seq(self, run_id: str) -> int:
        row = self._fetchone("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (run_id,))
        return int(row[0]) + 1

    def count(self) -> int:
        return int(self._fetchone("SELECT COUNT(*) FROM events")[0])

    # -- the writer lock --------------------------------------------------------------------

    def writer_lock(self, what: str = "train") -> contextlib.AbstractContextManager[None]:
        """Hold the one-writer lock for this repository's log, or raise ``Locked``."""
        return writer_lock_at(self.path, what)


@contextlib.contextmanager
def _writes(path: Path) -> Iterator[None]:
    """Report a full disk or a read-only log as one sentence (SQLite has undone the write)."""
    try:
        yield
    except (sqlite3.OperationalError, OSError) as exc:
        error = storage_error(exc, path)
        if error is None:
            raise
        raise error from None


def _unwritable(path: Path, exc: Exception) -> SkillvcError | None:
    """A ``LogNotWritable`` when opening failed because the log or its directory is read-only."""
    error = storage_error(exc, path)
    if error is not None:
        return error
    directory = path.parent
    if not os.access(directory, os.W_OK):
        return LogNotWritable(f"The event log {path} cannot be opened: {directory} is read-only.")
    if path.exists() and not os.access(path, os.W_OK):
        return LogNotWritable(f"The event log {path} cannot be opened: the file is read-only.")
    return None


def _kind(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file ("a character device")."""
    from skillvc.inputs.reader import file_kind

    try:
        return file_kind(os.stat(path).st_mode)
    except OSError:
        return None


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"the tables {shown}" if names else "no tables"


def _payload_json(payload: Mapping[str, Any]) -> str:
    """The canonical JSON of ``payload`` without secret values."""
    body = canonical_json(dict(payload))
    if scrub_stored_text(body) == body:  # the common case, one pass over the text
        return body
    # Scrub the strings, not the JSON text: a replacement must never cut through an escape.
    return canonical_json(scrub_json(dict(payload), urls=True))


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch ``conn``'s database to WAL, waiting out other processes that hold it.

    Changing the journal mode needs the database to itself and SQLite answers "database is
    locked" at once, without its busy timeout, while another connection uses it; so retry
    here. A log already in WAL mode (every open after the first) needs no change at all.
    """
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + _BUSY_TIMEOUT
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def open_store(path: str | Path, *, create: bool = True) -> EventStore:
    """Open (and migrate) the event log at ``path``."""
    path = Path(path)
    if not create and not path.exists():
        from skillvc.core.errors import NotInitialised

        raise NotInitialised(f"No event log at {path}.")
    if path.is_dir():
        raise NotADatabase(
            f"{path} is a directory, not the event log.",
            hint="Move the directory aside; 'skillvc init' then creates a fresh event log.",
        )
    kind = _kind(path)
    if kind is not None:
        # /dev/null behind a link would "open" as an empty log that forgets every write.
        raise NotADatabase(
            f"{path} is {kind}{' (through a symbolic link)' if path.is_symlink() else ''}, "
            "not the event log file.",
            hint="Move it aside; 'skillvc init' then creates a fresh event log.",
        )
    if path.exists() and path.stat().st_size > 0:
        try:
            with open(path, "rb") as fh:
                header = fh.read(16)
        except PermissionError:
            raise LogNotWritable(
                f"The event log {path} cannot be read: permission denied."
            ) from None
        if header != b"SQLite format 3\x00":
            raise NotADatabase(f"{path} is not a SQLite database.")
    return EventStore(path)


@contextlib.contextmanager
def writer_lock_at(path: Path, what: str = "train") -> Iterator[None]:
    """Hold the one-writer lock beside the log at ``path``, or raise ``Locked``."""
    lock_path = path.with_name(f"{what}.lock")
    try:
        handle = open(lock_path, "a+")  # noqa: SIM115 - held for the whole block
    except PermissionError:
        raise LogNotWritable(
            f"Cannot create the writer lock {lock_path}: permission denied."
        ) from None
    except IsADirectoryError:
        raise StateConflict(
            f"The writer lock {lock_path} is a directory, not skillvc's lock file.",
            hint="Move it aside (skillvc never makes one), then run the command again.",
        ) from None
    except OSError as exc:
        raise storage_error(exc, lock_path) or StateConflict(
            f"Cannot open the writer lock {lock_path} ({exc.strerror}).",
            hint="Make it a regular file skillvc can write, or move it aside.",
        ) from None
    try:
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise Locked(
                    f"Another skillvc {what} is running in this repository ({holder})."
                ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()
