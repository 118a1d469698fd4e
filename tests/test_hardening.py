"""Issue 23 (first half): odd input files, a damaged log, misleading messages, git states.

Each class is tested through its one mechanism (the input reader, the log's checks, the error
line, the commit path), with real files, pipes, SQLite logs and git repositories.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import _printable, cli
from skillvc.core.config import load_config
from skillvc.core.errors import (
    ConfigError,
    Lines,
    LogDamaged,
    NotADatabase,
    NotASkillvcLog,
    StateConflict,
    TaskSetError,
    one_line,
)
from skillvc.core.events import DAMAGED
from skillvc.core.store import open_store
from skillvc.fsck.log import fsck, repair
from skillvc.inputs import reader
from skillvc.repo.skillrepo import KEEP_PREFIX, SkillRepo, ensure_ready_to_train
from skillvc.tasks.taskset import read_items

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = Path(shutil.copytree(demo_seed, tmp_path / "demo", symlinks=True))
    monkeypatch.chdir(root)
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


# -- 1. one reader for every input file ------------------------------------------------------


def test_reader_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.jsonl")  # nobody writes: a plain open() would block forever
    (tmp_path / "null.jsonl").symlink_to("/dev/null")
    with socket.socket(socket.AF_UNIX) as sock:
        os.chdir(tmp_path)
        sock.bind("sock.jsonl")
    (tmp_path / "dir.jsonl").mkdir()
    for name, kind in (
        ("pipe.jsonl", "a named pipe (FIFO)"),
        ("null.jsonl", "a character device"),
        ("sock.jsonl", "a socket"),
        ("dir.jsonl", "a directory"),
    ):
        with pytest.raises(TaskSetError) as err:
            read_items(tmp_path / name)
        assert str(err.value) == f"Task file {tmp_path / name} is {kind}, not a regular file."


def test_reader_caps_size_and_decodes_strictly(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(ConfigError, match=r"^f is 2\.0 KiB, over the 1\.0 KiB limit\.$"):
        reader.read_bytes(path, "f", max_bytes=1024, error=ConfigError)
    assert reader.decode_text(b"\xef\xbb\xbfa = 1", "f") == "a = 1"  # a UTF-8 BOM is dropped
    with pytest.raises(ConfigError, match="is UTF-16 text"):
        reader.decode_text("a = 1".encode("utf-16"), "f", ConfigError)
    with pytest.raises(ConfigError, match=r"bad byte 0xe9 at offset 3\)"):
        reader.decode_text(b"caf\xe9", "f", ConfigError)


def test_json_constants_and_lone_surrogates_are_refused(tmp_path: Path) -> None:
    assert reader.loads('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}  # a pair is fine
    rows = {
        '{"input": "q", "target": NaN}': "NaN is not a JSON value",
        '{"id": Infinity, "input": "q", "target": "x"}': "Infinity is not a JSON value",
        '{"input": "q \\ud800", "target": "x"}': "the escape \\ud800, a lone surrogate",
        '{"input": "q", "target": "x", "metadata": {"\\udfff": 1}}': "the escape \\udfff",
    }
    for row, reason in rows.items():
        path = tmp_path / "val.jsonl"
        path.write_text('{"input": "fine", "target": "x"}\n' + row + "\n")
        with pytest.raises(TaskSetError) as err:
            read_items(path)
        assert str(err.value).startswith(f"{path} line 2 cannot be used: ")
        assert reason in str(err.value)


def test_config_with_a_bom_loads_and_a_pipe_is_named(demo: Path) -> None:
    config = demo / "skillvc.toml"
    config.write_bytes(b"\xef\xbb\xbf" + config.read_bytes())
    assert load_config(demo).skill.path == SKILL
    config.unlink()
    os.mkfifo(config)
    result = run("log")
    assert result.exit_code == 5
    assert result.stderr.startswith(
        "Error: skillvc.toml is a named pipe (FIFO), not a regular file.\n"
    )


def test_a_skill_that_is_a_pipe_is_named_not_missing(demo: Path) -> None:
    (demo / SKILL).unlink()
    os.mkfifo(demo / SKILL)
    for args in (["eval", "--split", "val"], ["validate"]):
        result = run(*args)
        assert result.exit_code == 5, args
        assert result.stderr.startswith(
            f"Error: The skill file {SKILL} is a named pipe (FIFO), not a regular file.\n"
        )


# -- 3. error lines ----------------------------------------------------------------------------


def test_error_lines_escape_control_characters_and_cap_length() -> None:
    assert one_line("a\nError: fake\r\x1b[31m") == "a\\nError: fake\\r\\x1b[31m"
    long = one_line("x" * 5_000_000)
    assert len(long) < 1100 and "characters left out" in long


def test_only_deliberate_line_breaks_survive_in_a_printed_error() -> None:
    """A snippet skillvc quotes on purpose (``Lines``) keeps its lines; a value interpolated
    into one of them, or into a plain message, still cannot start a line of its own."""
    name = "evil\nError: fake"
    assert _printable(f"The file {name} is bad.") == "The file evil\\nError: fake is bad."
    hint = Lines(f"Add this to {name}:", "  run: skillvc validate\x1b[2J")
    assert _printable(hint).splitlines() == [
        "Add this to evil\\nError: fake:",
        "  run: skillvc validate\\x1b[2J",
    ]


def test_a_newline_in_a_path_is_refused_up_front(demo: Path) -> None:
    config = demo / "skillvc.toml"
    config.write_text(config.read_text().replace(SKILL, "skills/acme-returns/SKILL\\n.md"))
    git(demo, "commit", "-qam", "a newline in the skill path")
    for args in (["train"], ["check", "--base", "HEAD"]):  # check reads it at BASE, via git
        result = run(*args)
        assert result.exit_code == 5, args
        lines = result.stderr.splitlines()
        assert lines[0].startswith("Error: [skill] path in skillvc.toml names ") and len(lines) == 2
        assert "holds a control character" in lines[0]


# -- 2. the event log defends itself ---------------------------------------------------------


def _damage_a_page(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    middle = len(data) // 4096 // 2
    data[middle * 4096 : (middle + 1) * 4096] = os.urandom(4096)
    db.write_bytes(bytes(data))


def test_log_states_that_are_not_a_skillvc_log(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).executescript("CREATE TABLE events (x); CREATE TABLE blobs (y);")
    with pytest.raises(NotASkillvcLog, match="not a skillvc event log .*the tables blobs, events"):
        open_store(foreign)
    link = tmp_path / "null.db"
    link.symlink_to("/dev/null")
    with pytest.raises(NotADatabase, match="is a character device .through a symbolic link."):
        open_store(link)
    (tmp_path / "train.lock").mkdir()
    store = open_store(tmp_path / "events.db")
    with pytest.raises(StateConflict) as err, store.writer_lock():
        pass
    store.close()
    assert "is a directory, not skillvc's lock file" in str(err.value)


def test_nothing_is_appended_to_a_damaged_log(demo: Path) -> None:
    db = demo / ".skillvc" / "events.db"
    assert run("eval", "--split", "val").exit_code == 0
    _damage_a_page(db)
    before = db.read_bytes()
    result = run("eval", "--split", "val")
    assert result.exit_code == 5
    error = next(line for line in result.stderr.splitlines() if line.startswith("Error: "))
    assert error.startswith("Error: The event log ") and "damaged" in error
    assert "fsck --repair" in result.stderr
    assert db.read_bytes() == before  # not one page written
    assert run("fsck").exit_code == 5
    fixed = run("fsck", "--repair")
    assert fixed.exit_code == 0 and "repaired: copied" in fixed.stdout
    assert fsck(db).ok
    assert [p.name for p in db.parent.glob("events.db.damaged-*")] != []


def test_a_non_json_payload_is_damaged_never_a_crash(demo: Path) -> None:
    db = demo / ".skillvc" / "events.db"
    assert run("eval", "--split", "val").exit_code == 0  # event 1 is a cached model call
    with open_store(db) as store:
        count = store.count()
        blob = store.put_blob("some text")
    conn = sqlite3.connect(db)
    conn.executescript(
        "DROP TRIGGER events_no_update; DROP TRIGGER blobs_no_update;"
        "UPDATE events SET payload = '{not json' WHERE id = 1;"
        f"UPDATE blobs SET content = 'changed' WHERE hash = '{blob}';"
    )
    conn.close()
    with open_store(db) as store:
        event = store.get(1)
        assert DAMAGED in event.payload
        with pytest.raises(LogDamaged, match="Event 1 .* is damaged"):  # never replayed
            store.find(event.type, str(event.key))
    shown = run("show", "1")
    assert shown.exit_code == 5 and shown.stderr.startswith("Error: Event 1 (model.call) is dam")
    report = fsck(db)
    assert report.bad_payloads == [1] and report.bad_blobs == [blob]
    done = repair(db)
    assert done.repaired and done.copied_events == count  # kept, marked damaged
    assert fsck(db).ok
    with open_store(db) as store:
        assert store.get(1).payload[DAMAGED] == "its payload was not JSON"
        assert store.get(1).payload["stored"] == "{not json"
    again = run("eval", "--split", "val")  # the damaged cached call is simply made again
    assert again.exit_code == 0, again.output


# -- 4. git states -----------------------------------------------------------------------------


@pytest.mark.parametrize("lock", ["refs/heads/main.lock", "HEAD.lock", "packed-refs.lock"])
def test_held_git_locks_are_reported_before_training(skill_repo: Path, lock: str) -> None:
    (skill_repo / ".git" / lock).write_bytes(b"")
    with SkillRepo(skill_repo) as repo, pytest.raises(StateConflict) as err:
        ensure_ready_to_train(repo)
    assert str(err.value).startswith(f"{skill_repo / '.git' / lock} exists: another git process")


def test_commit_gpgsign_is_honoured_or_refused(skill_repo: Path, tmp_path: Path) -> None:
    git(skill_repo, "config", "commit.gpgsign", "true")
    git(skill_repo, "config", "gpg.program", "false")
    with SkillRepo(skill_repo) as repo, pytest.raises(Exception) as err:
        repo.ensure_can_sign()
    assert "commit.gpgsign is set, but git cannot sign a commit" in str(err.value)
    key = tmp_path / "key"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {key}")
    git(skill_repo, "config", "gpg.format", "ssh")
    git(skill_repo, "config", "user.signingkey", f"{key}.pub")
    with SkillRepo(skill_repo) as repo:
        repo.ensure_can_sign()
        sha = repo.commit_file("skills/support/SKILL.md", b"# Signed\n", "signed edit")
    assert "gpgsig -----BEGIN SSH SIGNATURE-----" in git(skill_repo, "cat-file", "commit", sha)


def test_concurrent_gc_loses_no_object(skill_repo: Path) -> None:
    stop = threading.Event()

    def gc_loop() -> None:
        while not stop.wait(0.05):  # back to back, as a cron or an IDE's git runs it
            # Not checked: a gc fails while a pin names a commit that an earlier gc's prune
            # deleted (until the commit is rebuilt), and the next one runs all the same.
            subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=skill_repo, capture_output=True)

    thread = threading.Thread(target=gc_loop)
    thread.start()
    try:
        with SkillRepo(skill_repo) as repo:
            for i in range(12):
                repo.commit_file(
                    "skills/support/SKILL.md", f"# Version {i}\n".encode(), f"edit {i}"
                )
                repo.store_candidate_files(
                    f"refs/skillvc/rejected/r/{i}",
                    {"skills/support/SKILL.md": b"# no\n"},
                    "no",
                    "HEAD",
                )
    finally:
        stop.set()
        thread.join()
    git(skill_repo, "fsck", "--strict", "--no-dangling")  # raises on a missing object
    assert git(skill_repo, "show", "HEAD:skills/support/SKILL.md") == "# Version 11"
    assert git(skill_repo, "for-each-ref", KEEP_PREFIX) == ""  # every pin released


def test_a_commit_pruned_after_its_pin_is_built_again(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 'git prune' that read the refs before the pin existed deletes the new commit after
    the pin's own check: the ref move finds it gone, and the commit is built again."""
    pruned: list[str] = []
    with SkillRepo(skill_repo) as repo:
        build = repo._build_pinned

        def build_then_prune(*args: object) -> str:
            sha = build(*args)  # type: ignore[arg-type]
            if not pruned:  # the first commit loses its object, as to that prune
                (skill_repo / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
                pruned.append(sha)
            return sha

        monkeypatch.setattr(repo, "_build_pinned", build_then_prune)
        sha = repo.store_candidate_files(
            "refs/skillvc/rejected/r/1", {"skills/support/SKILL.md": b"# no\n"}, "no", "HEAD"
        )
        head = repo.commit_file("skills/support/SKILL.md", b"# Version 1\n", "edit 1")
    assert pruned
    assert git(skill_repo, "rev-parse", "refs/skillvc/rejected/r/1") == sha
    assert git(skill_repo, "rev-parse", "HEAD") == head
    git(skill_repo, "fsck", "--strict", "--no-dangling")
    assert git(skill_repo, "for-each-ref", KEEP_PREFIX) == ""


def test_objects_a_running_gc_prunes_after_the_move_are_written_back(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gc that began before the pin may prune the new commit's objects even after the branch
    moved onto it: the commit waits for that gc to end, then writes back what it deleted."""
    gc_pid = skill_repo / ".git" / "gc.pid"
    # A gc as git runs one: it names itself in gc.pid and removes the file when it ends.
    gc = subprocess.Popen(["sh", "-c", f"sleep 0.5; rm -f '{gc_pid}'"])
    gc_pid.write_text(f"{gc.pid} {socket.gethostname()}")
    pruned: list[str] = []
    with SkillRepo(skill_repo) as repo:
        move = repo._move_ref

        def move_then_prune(ref: str, new: str, old: str | None, *rest: object) -> None:
            move(ref, new, old, *rest)  # type: ignore[arg-type]
            fresh = git(skill_repo, "rev-list", "--objects", new, "--not", old or "HEAD~")
            for oid in (line.split()[0] for line in fresh.splitlines()):
                (skill_repo / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
                pruned.append(oid)

        monkeypatch.setattr(repo, "_move_ref", move_then_prune)
        head = repo.commit_file("skills/support/SKILL.md", b"# Version 1\n", "edit 1")
        assert not gc_pid.exists()  # it waited for the gc to end
    gc.wait()
    assert len(pruned) == 5  # the commit, the root tree, skills/, skills/support/ and the blob
    assert git(skill_repo, "rev-parse", "HEAD") == head
    git(skill_repo, "fsck", "--strict", "--no-dangling")
    assert git(skill_repo, "show", "HEAD:skills/support/SKILL.md") == "# Version 1"
    # A gc.pid left by a gc that died on this host is no gc: nothing waits for it; nor is one
    # older than 12 hours (git's own rule), whatever process has its pid now.
    gc_pid.write_text(f"{gc.pid} {socket.gethostname()}")
    with SkillRepo(skill_repo) as repo:
        assert repo._gc_owner() is None
        gc_pid.write_text(f"{os.getpid()} {socket.gethostname()}")
        assert repo._gc_owner() == f"{os.getpid()} {socket.gethostname()}"
        old = time.time() - 13 * 3600
        os.utime(gc_pid, (old, old))
        assert repo._gc_owner() is None


def test_check_refuses_an_unrelated_base_and_reads_blobs(demo: Path) -> None:
    git(demo, "checkout", "-q", "--orphan", "other")
    git(demo, "commit", "-q", "-m", "unrelated")
    git(demo, "checkout", "-q", "-f", "main")
    result = run("check", "--base", "other")
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: BASE other shares no history with HEAD")
    # A BASE that moved on since the change branched is compared as it is now, with a warning.
    git(demo, "checkout", "-q", "-b", "moved")
    git(demo, "commit", "-q", "--allow-empty", "-m", "the target branch moves on")
    git(demo, "checkout", "-q", "main")
    result = run("check", "--base", "moved", "-q")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: BASE moved is not an ancestor of HEAD (it moved on")
    # A PR's .gitattributes re-encodes the skill on checkout: check reads what git stores.
    (demo / ".gitattributes").write_text(f"{SKILL} working-tree-encoding=UTF-16LE\n")
    git(demo, "add", ".gitattributes")
    git(demo, "commit", "-q", "-m", "attributes")
    (demo / SKILL).unlink()
    git(demo, "checkout", "--", SKILL)
    assert (demo / SKILL).read_bytes()[:2] == b"-\x00"  # "---" in UTF-16LE on disk
    result = run("check", "--base", "HEAD~1")
    assert result.exit_code == 0, result.output
    assert "OK" in result.stdout
