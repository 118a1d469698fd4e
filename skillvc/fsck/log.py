"""``skillvc fsck``: SQLite's full integrity check plus skillvc's own (every payload JSON,
every blob matching its hash), and ``--repair``.

Invariants:
- The check only reads (a read-only connection); it never creates a -shm file's worth of
  change in the log beyond what SQLite's WAL reader needs.
- The repair never changes the damaged log: it copies every event and blob it can still read
  (each under its own id and columns, payload bytes unchanged) into a new file, checks that
  file, then moves the damaged log (with its -wal and -shm) aside as
  ``events.db.damaged-<time>`` and puts the copy in its place. It holds the writer lock, so
  no training run writes meanwhile. An event whose payload is not JSON keeps its place (id,
  run, seq) with ``{"damaged": ..., "stored": <the text>}`` as its payload (a cached model
  call also loses its key, so the call is made again instead of replayed); blobs whose
  content no longer matches their hash and rows on unreadable pages are not copied (they stay
  in the file kept aside).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.errors import LogDamaged, NotADatabase
from skillvc.core.events import DAMAGED
from skillvc.core.hashing import canonical_json, sha256_hex
from skillvc.core.records import fields_of

_CHUNK = 500
_EVENT_COLUMNS = "id, type, payload, run_id, seq, step, epoch, key, created_at, version"


@dataclass
class FsckReport:
    path: str
    sqlite: list[str] = field(default_factory=list)  # integrity_check's findings ([] = ok)
    events: int = 0  # events read
    blobs: int = 0  # blobs read
    bad_payloads: list[int] = field(default_factory=list)  # ids of events not JSON objects
    bad_blobs: list[str] = field(default_factory=list)  # hashes whose content differs
    unreadable: list[str] = field(default_factory=list)  # ranges SQLite could not read

    @property
    def ok(self) -> bool:
        return not (self.sqlite or self.bad_payloads or self.bad_blobs or self.unreadable)

    def to_dict(self) -> dict[str, Any]:
        return fields_of(self, "path ok sqlite events blobs bad_payloads bad_blobs unreadable")


@dataclass
class RepairReport:
    check: FsckReport
    repaired: bool
    kept_aside: str | None = None
    copied_events: int = 0
    copied_blobs: int = 0

    def to_dict(self) -> dict[str, Any]:
        names = "repaired kept_aside copied_events copied_blobs"
        return {**self.check.to_dict(), **fields_of(self, names)}


def _is_object(text: Any) -> bool:
    """Whether a stored payload is a JSON object (one a repair wrapped is: it is not
    damaged any more, only marked)."""
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise NotADatabase(f"{path} is not a file: there is no event log to check.")
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise NotADatabase(
                f"{path} is not a SQLite database: nothing in it can be recovered.",
                hint="Move it aside; 'skillvc init' then creates a fresh event log.",
            )
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.execute("PRAGMA query_only=ON")
    return conn


def _rows(conn: sqlite3.Connection, table: str, columns: str, report: FsckReport) -> Iterator[Any]:
    """Every readable row of ``table`` by rowid, in chunks; a chunk SQLite cannot read is
    retried row by row, and rows that still fail are noted as unreadable."""
    try:
        top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    except sqlite3.DatabaseError as exc:
        report.unreadable.append(f"{table}: {exc}")
        return
    start = 0
    while start < top:
        end = start + _CHUNK
        sql = f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? AND rowid <= ? ORDER BY rowid"
        try:
            rows = conn.execute(sql, (start, end)).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            bad = 0
            for rowid in range(start + 1, end + 1):
                try:
                    rows += conn.execute(sql, (rowid - 1, rowid)).fetchall()
                except sqlite3.DatabaseError:
                    bad += 1
            if bad:
                report.unreadable.append(f"{table} rows {start + 1}-{end}: {bad} unreadable")
        yield from rows
        start = end


def check_log(path: Path, *, copy_to: sqlite3.Connection | None = None) -> FsckReport:
    """The full check of the log at ``path``; with ``copy_to``, every good event and blob is
    inserted there as it is read."""
    conn = _connect(path)
    report = FsckReport(str(path))
    try:
        try:
            found = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(100)").fetchall()]
        except sqlite3.DatabaseError as exc:
            found = [str(exc)]
        report.sqlite = [] if found == ["ok"] else found
        for row in _rows(conn, "events", _EVENT_COLUMNS, report):
            report.events += 1
            values = list(row[1:])
            if not _is_object(row[3]):
                report.bad_payloads.append(int(row[1]))
                # Kept, not dropped: its id, run and seq stay (a resume replays by seq), and
                # readers show it as damaged; the stored text is there for a person to read.
                stored = row[3] if isinstance(row[3], str) else repr(row[3])
                values[2] = canonical_json({DAMAGED: "its payload was not JSON", "stored": stored})
                if values[3] is None:  # a cached model call: free its key, so it is made again
                    values[7] = None
            if copy_to is not None:
                copy_to.execute(
                    f"INSERT OR IGNORE INTO events ({_EVENT_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
        for row in _rows(conn, "blobs", "hash, size, content", report):
            report.blobs += 1
            digest, size, content = row[1], row[2], row[3]
            if not isinstance(content, str) or sha256_hex(content) != digest:
                report.bad_blobs.append(str(digest))
                continue
            if copy_to is not None:
                copy_to.execute(
                    "INSERT OR IGNORE INTO blobs (hash, size, content) VALUES (?, ?, ?)",
                    (digest, size, content),
                )
    finally:
        conn.close()
    return report


def fsck(path: Path) -> FsckReport:
    """Check the log at ``path`` (reads only)."""
    return check_log(path)


def repair(path: Path) -> RepairReport:
    """Copy what can be read of the damaged log at ``path`` into a fresh log that takes its
    place; the damaged one is kept aside. A sound log is left as it is."""
    from skillvc.core.store import open_store, writer_lock_at

    with writer_lock_at(path, "train"):
        report = check_log(path)
        if report.ok:
            return RepairReport(report, repaired=False)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        fresh = path.with_name(f"{path.name}.repair-{stamp}")
        with open_store(fresh):  # the current schema, triggers and views
            pass
        out = sqlite3.connect(fresh, isolation_level=None)
        try:
            out.execute("BEGIN IMMEDIATE")
            report = check_log(path, copy_to=out)
            out.execute("COMMIT")
            copied_events = out.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            copied_blobs = out.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
            if out.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                raise LogDamaged(f"The repaired copy {fresh} failed its own check; nothing moved.")
            out.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            out.close()
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            old = Path(f"{path}{suffix}")
            if old.exists():
                os.replace(old, Path(f"{aside}{suffix}"))
        for suffix in ("-wal", "-shm"):
            Path(f"{fresh}{suffix}").unlink(missing_ok=True)
        os.replace(fresh, path)
        return RepairReport(report, True, str(aside), copied_events, copied_blobs)
