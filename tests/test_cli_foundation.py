"""`skillvc init`, `log` and `show` on real repos, and the error family at the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git
from helpers import edit_dict, gate_payload, record_gate

from skillvc.cli import cli
from skillvc.core.store import open_store


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch):
    def invoke(cwd: Path, *args: str):
        monkeypatch.chdir(cwd)
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return invoke


def test_init_finds_the_one_skill_and_is_safe_to_rerun(skill_repo: Path, run) -> None:
    result = run(skill_repo, "init")
    assert result.exit_code == 0, result.output
    assert "Wrote skillvc.toml (training skills/support/SKILL.md)" in result.output
    assert "Added /.skillvc/ to .gitignore." in result.output
    config = (skill_repo / "skillvc.toml").read_text()
    assert 'path = "skills/support/SKILL.md"' in config
    assert (skill_repo / ".skillvc" / "events.db").exists()
    assert "/.skillvc/" in (skill_repo / ".gitignore").read_text().splitlines()

    before = config
    again = run(skill_repo, "init")
    assert again.exit_code == 0
    assert "skillvc.toml already exists; left as it is." in again.output
    assert "Already initialised; nothing changed." in again.output
    assert (skill_repo / "skillvc.toml").read_text() == before


def test_init_creates_git_repo_when_needed(tmp_path: Path, run) -> None:
    (tmp_path / "SKILL.md").write_text("# My skill\n")
    result = run(tmp_path, "init", "--target", "sim:support", "--optimizer", "sim:support")
    assert result.exit_code == 0, result.output
    assert "Initialised a git repository" in result.output
    assert (tmp_path / ".git").is_dir()
    assert 'model = "sim:support"' in (tmp_path / "skillvc.toml").read_text()


def test_init_with_several_skills_lists_them_or_trains_the_one_named(
    git_repo: Path, tmp_path: Path, run
) -> None:
    for name in ("a", "b"):
        (git_repo / name).mkdir()
        (git_repo / name / "SKILL.md").write_text("# x\n")
    shutil.copytree(git_repo, tmp_path / "other")
    result = run(git_repo, "init")
    assert result.exit_code == 0
    text = (git_repo / "skillvc.toml").read_text()
    assert (
        '[skills.a]\npath = "a/SKILL.md"\n' in text and '[skills.b]\npath = "b/SKILL.md"\n' in text
    )
    git_repo = tmp_path / "other"  # --skill in a fresh repository: today's single-skill file
    ok = run(git_repo, "init", "--skill", "b/SKILL.md")
    assert ok.exit_code == 0 and 'path = "b/SKILL.md"' in (git_repo / "skillvc.toml").read_text()


def test_init_without_a_skill(git_repo: Path, run) -> None:
    result = run(git_repo, "init")
    assert result.exit_code == 3
    assert "Error: No SKILL.md found in" in result.output
    assert "Hint: Name the skill file with --skill PATH." in result.output
    missing = run(git_repo, "init", "--skill", "nope.md")
    assert missing.exit_code == 3 and "The skill file nope.md does not exist." in missing.output
    assert not (git_repo / "skillvc.toml").exists()


def log_refused(run, repo: Path, code: int, *says: str) -> str:
    """``skillvc log`` in ``repo`` exits ``code`` saying each of ``says``; what it printed."""
    result = run(repo, "log")
    assert result.exit_code == code
    for text in says:
        assert text in result.output
    return result.output


def test_not_a_git_repo(tmp_path: Path, run) -> None:
    output = log_refused(run, tmp_path, 3, "Hint: Run it inside a skills repository")
    assert output.startswith("Error: ")
    assert "not" in output.lower() and "git" in output.lower()


def test_not_initialised(skill_repo: Path, run) -> None:
    hint = "Hint: Run 'skillvc init' in the repository first."
    log_refused(run, skill_repo, 3, "Error: No skillvc.toml in", hint)


def test_event_log_that_is_not_sqlite(skill_repo: Path, run) -> None:
    run(skill_repo, "init")
    (skill_repo / ".skillvc" / "events.db").write_text("garbage " * 100)
    log_refused(run, skill_repo, 5, "is not a SQLite database.", "Hint: Move the file aside")


def test_event_log_from_a_newer_schema(skill_repo: Path, run) -> None:
    import sqlite3

    run(skill_repo, "init")
    raw = sqlite3.connect(skill_repo / ".skillvc" / "events.db")
    raw.execute("PRAGMA user_version=999")
    raw.commit()
    raw.close()
    newer = "has schema version 999, newer than this skillvc understands"
    log_refused(run, skill_repo, 5, newer, "Hint: Upgrade skillvc")


def _seed_log(repo: Path) -> dict[str, int]:
    """Gate events as the training loop writes them (payload schema of events.py)."""
    skill = (repo / "skills/support/SKILL.md").read_text()
    candidate = skill.replace("- Be polite.\n", "- Be polite.\n- Offer a replacement first.\n")
    with open_store(repo / ".skillvc/events.db") as store:
        cur, cand = store.put_blob(skill), store.put_blob(candidate)
        store.append(
            "run.started",
            {"models": {"target": "sim:s", "optimizer": "sim:s"}},
            run_id="run-a",
            seq=1,
        )
        edit = edit_dict(
            "5e1f00aa11",
            "add",
            "- Offer a replacement first.",
            "damaged-item cases failed",
            anchor="- Be polite.",
        )
        bad = edit_dict(
            "badd00bb22", "replace", "- Be curt.", "answers were long", target="- Be polite."
        )
        store.append("edit.proposed", {"edit": edit, "source": "optimizer"}, run_id="run-a", seq=2)
        flips = {"gained": ["v1", "v2"], "lost": []}
        accepted = gate_payload(
            "accepted", 0.5, 0.6, 20, [edit], current=cur, candidate=cand, lr=4, flipped=flips
        )
        main = ("c0ffee1234abcd", "refs/heads/main")
        g1 = record_gate(store, accepted, run_id="run-a", seq=3, step=1, commit=main)
        flips = {"gained": [], "lost": []}
        rejected = gate_payload(
            "rejected", 0.6, 0.6, 20, [bad], current=cand, candidate=cand, lr=3, flipped=flips
        )
        ref = ("dead00beef99", "refs/skillvc/rejected/run-a/2")
        g2 = record_gate(store, rejected, run_id="run-a", seq=5, step=2, commit=ref)
    return {"accepted": g1.id, "rejected": g2.id}


# The keys of one entry of 'skillvc log --json' (the public schema; compare review/history.py).
LOG_JSON_KEYS = """id run step epoch kind decision metric val_before val_after val_after_bound n
n_evaluated early_stopped lr commit ref created_at edits unmatched flipped p_value test alpha
verdict dropped"""


def test_log_filters_and_json_keys(skill_repo: Path, run) -> None:
    run(skill_repo, "init")
    ids = _seed_log(skill_repo)

    everything = json.loads(run(skill_repo, "log", "--json").output)
    assert [e["id"] for e in everything] == [ids["rejected"], ids["accepted"]]
    assert set(everything[0]) == set(LOG_JSON_KEYS.split())

    rejected = json.loads(run(skill_repo, "log", "--rejected", "--json").output)
    assert [e["decision"] for e in rejected] == ["rejected"]
    assert rejected[0]["ref"] == "refs/skillvc/rejected/run-a/2"
    assert rejected[0]["edits"][0]["content"] == "- Be curt."

    accepted = json.loads(run(skill_repo, "log", "--accepted", "--json").output)
    assert [(e["decision"], e["commit"], e["val_after"]) for e in accepted] == [
        ("accepted", "c0ffee1234abcd", 0.6)
    ]
    assert (
        json.loads(run(skill_repo, "log", "-n", "1", "--json").output)[0]["decision"] == "rejected"
    )
    of_run = json.loads(run(skill_repo, "log", "--run", "run-a", "--json").output)
    assert {e["run"] for e in of_run} == {"run-a"}
    unknown = CliRunner().invoke(cli, ["log", "--run", "other"])
    assert unknown.exit_code == 3 and "No run other in the event log." in unknown.output

    text = run(skill_repo, "log", "--accepted", "-p").output
    assert "step 1 (epoch 1)" in text and "val 0.500 -> 0.600 (hard, n=20)" in text
    assert "why: damaged-item cases failed" in text
    assert "+- Offer a replacement first." in text
    assert "--- a/skills/support/SKILL.md" in text


def test_show_by_event_edit_and_commit(skill_repo: Path, run) -> None:
    run(skill_repo, "init")
    ids = _seed_log(skill_repo)
    by_id = json.loads(run(skill_repo, "show", str(ids["accepted"]), "--json").output)
    assert by_id["entry"]["decision"] == "accepted"
    assert "+- Offer a replacement first." in by_id["entry"]["patch"]

    by_commit = json.loads(run(skill_repo, "show", "c0ffee12", "--json").output)
    assert by_commit["entry"]["id"] == ids["accepted"]

    by_edit = json.loads(run(skill_repo, "show", "5e1f00", "--json").output)
    assert by_edit["event"]["type"] == "edit.proposed"
    assert by_edit["gates"] == [ids["accepted"]]

    shown = run(skill_repo, "show", "run-a").output
    assert "run-a  unfinished" in shown and 'replace "- Be polite." -> "- Be curt."' in shown


def test_show_unknown_id(skill_repo: Path, run) -> None:
    run(skill_repo, "init")
    result = run(skill_repo, "show", "12345")
    assert result.exit_code == 3
    assert "Error: No event with id 12345 in" in result.output
    assert "Hint: List ids with 'skillvc log' or 'skillvc runs'." in result.output
    assert run(skill_repo, "show", "zzzzzz").output.startswith(
        "Error: No event, edit, commit or run matches 'zzzzzz'."
    )


def test_unexpected_errors_get_exit_70(skill_repo: Path, run, monkeypatch) -> None:
    run(skill_repo, "init")
    import skillvc.review.history

    def boom(*a, **k):
        raise RuntimeError("kaput sk-abcdefghijklmnop")

    monkeypatch.setattr(skillvc.review.history, "log_entries", boom)
    result = run(skill_repo, "log")
    assert result.exit_code == 70
    assert "skillvc crashed: RuntimeError: kaput [redacted]" in result.output
    assert "sk-abcdefghijklmnop" not in result.output
    monkeypatch.setenv("SKILLVC_RAISE_ERRORS", "1")
    with pytest.raises(RuntimeError):
        run(skill_repo, "log")


def test_dirty_skill_file_error_text(skill_repo: Path) -> None:
    from skillvc.core.errors import DirtySkillFile
    from skillvc.repo.skillrepo import SkillRepo

    (skill_repo / "skills/support/SKILL.md").write_text("changed\n")
    with pytest.raises(DirtySkillFile) as info:
        SkillRepo(skill_repo).ensure_clean("skills/support/SKILL.md")
    assert str(info.value) == "skills/support/SKILL.md has uncommitted changes."
    assert git(skill_repo, "status", "--porcelain") == "M skills/support/SKILL.md"


def test_init_can_install_the_pre_commit_hook(skill_repo: Path, run) -> None:
    result = run(skill_repo, "init", "--hooks")
    assert result.exit_code == 0, result.output
    hook = skill_repo / ".git" / "hooks" / "pre-commit"
    assert hook.exists() and "skillvc-hook: pre-commit" in hook.read_text()


# -- review fixes -----------------------------------------------------------------------------


def test_show_treats_like_wildcards_literally(skill_repo: Path, run) -> None:
    run(skill_repo, "init")
    _seed_log(skill_repo)
    # "%%%%" used to be a LIKE pattern matching every edit id; "²" crashed int().
    for ident in ("%%%%", "____", "²"):
        result = run(skill_repo, "show", ident)
        assert result.exit_code == 3, (ident, result.output)
        assert f"No event, edit, commit or run matches '{ident}'." in result.output


def test_init_with_a_quote_in_the_skill_path_writes_valid_toml(git_repo: Path, run) -> None:
    skill_dir = git_repo / 'odd "name" \\ dir'
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text("# x\n")
    result = run(git_repo, "init", "--target", "sim:support", "--optimizer", "sim:support")
    assert result.exit_code == 0, result.output
    from skillvc.core.config import load_config

    assert load_config(git_repo).skill.path == 'odd "name" \\ dir/SKILL.md'


def test_init_accepts_the_skill_directory_and_a_path_from_a_subdirectory(
    git_repo: Path, run
) -> None:
    (git_repo / "skills" / "a").mkdir(parents=True)
    (git_repo / "skills" / "a" / "SKILL.md").write_text("# a\n")
    (git_repo / "skills" / "b").mkdir(parents=True)
    (git_repo / "skills" / "b" / "SKILL.md").write_text("# b\n")
    result = run(git_repo, "init", "--skill", "skills/a")
    assert result.exit_code == 0, result.output
    assert 'path = "skills/a/SKILL.md"' in (git_repo / "skillvc.toml").read_text()
    # Re-running from inside the skill's directory names the same file another way.
    again = run(git_repo / "skills" / "a", "init", "--skill", "SKILL.md")
    assert again.exit_code == 0, again.output
    assert "already exists; left as it is." in again.output


def test_init_removes_a_config_that_does_not_load(
    skill_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillvc.core.errors import ConfigError
    from skillvc.workspace import workspace

    def broken(root: Path) -> None:
        raise ConfigError("bad config")

    monkeypatch.setattr(workspace, "load_config", broken)
    with pytest.raises(ConfigError):
        workspace.init_workspace(skill_repo)
    # Otherwise the next `skillvc init` would keep the broken file "as it is".
    assert not (skill_repo / "skillvc.toml").exists()


def test_init_finds_conventional_task_files(skill_repo: Path, run) -> None:
    evals = skill_repo / "evals"
    evals.mkdir()
    for name in ("train.jsonl", "validation.csv", "test.jsonl"):
        (evals / name).write_text("")
    result = run(skill_repo, "init")
    assert "Task files: evals/train.jsonl, evals/validation.csv, evals/test.jsonl" in result.output
    config = (skill_repo / "skillvc.toml").read_text()
    assert 'train = "evals/train.jsonl"' in config and 'val = "evals/validation.csv"' in config


def test_init_says_when_no_task_files_are_found(skill_repo: Path, run) -> None:
    result = run(skill_repo, "init")
    assert "No task files found: set [tasks] train and val in skillvc.toml" in result.output


def test_init_in_a_directory_without_a_skill_leaves_no_git_repo(tmp_path: Path, run) -> None:
    result = run(tmp_path, "init")
    assert result.exit_code == 3 and "No SKILL.md found" in result.output
    assert not (tmp_path / ".git").exists()
