"""`skillvc show` renders the log as text: calls with their messages, rollouts with their
task, answer, score and reason; blob hashes, call keys and their unique prefixes resolve."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from skillvc.cli import cli
from skillvc.core.hashing import sha256_hex
from skillvc.core.store import open_store


@pytest.fixture(scope="module")
def trained(
    demo_trained_one_epoch: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    dest = tmp_path_factory.mktemp("show") / "demo"
    return Path(shutil.copytree(demo_trained_one_epoch[0], dest))


def show(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(repo)
    return CliRunner().invoke(cli, ["show", *args])


def first(repo: Path, sql: str) -> dict:
    with open_store(repo / ".skillvc/events.db") as store:
        event = store.get(store.query(sql)[0]["id"])
        data = event.to_dict()
        for name in ("output", "prompt", "response"):
            digest = event.payload.get(name)
            if digest:
                data[name] = store.get_blob(digest)
        return data


def test_a_rollout_shows_its_task_answer_score_and_reason(
    trained: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rollout = first(
        trained,
        "SELECT id FROM events WHERE type = 'rollout' AND json_extract(payload, '$.hard') = 1 "
        "ORDER BY id LIMIT 1",
    )
    p = rollout["payload"]
    task = next(
        json.loads(line)
        for line in (trained / "evals/val.jsonl").read_text().splitlines()
        if json.loads(line)["id"] == p["item"]
    )
    result = show(trained, monkeypatch, str(rollout["id"]))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"# rollout {rollout['id']}  val item {p['item']}  {rollout['created_at']}"
    assert lines[2] == f"score hard 1.000  soft 1.000  ({p['reason']})"
    assert p["reason"].startswith("matched ")
    body = result.stdout.split("\n## Task\n\n", 1)[1]
    assert body == f"{task['input'].rstrip()}\n\n## Answer\n\n{rollout['output'].rstrip()}\n"
    assert p["output"] not in result.stdout  # the text, not its hash

    data = json.loads(show(trained, monkeypatch, str(rollout["id"]), "--json").stdout)
    assert data["rollout"]["answer"] == rollout["output"]
    assert data["rollout"]["input"] == task["input"]


def test_a_model_call_shows_its_messages_response_and_tokens(
    trained: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = first(trained, "SELECT id FROM events WHERE type = 'model.call' ORDER BY id LIMIT 1")
    p = call["payload"]
    messages = json.loads(call["prompt"])
    result = show(trained, monkeypatch, str(call["id"]))
    assert result.exit_code == 0, result.output
    tokens = p["prompt_tokens"] + p["completion_tokens"]
    assert result.stdout.splitlines()[:3] == [
        f"# model call {call['id']}  target  sim:support  {call['created_at']}",
        f"run {call['run_id']}  step -  sample 0  temperature 0.0",
        f"tokens {tokens:,} ({p['prompt_tokens']:,} prompt + {p['completion_tokens']:,} "
        f"completion)  cost $0.000000  latency {p['latency_ms']} ms  key {call['key']}",
    ]
    assert result.stdout.endswith(
        f"## System\n\n{messages[0]['content'].rstrip()}\n\n"
        f"## User\n\n{messages[1]['content'].rstrip()}\n\n"
        f"## Response\n\n{call['response'].rstrip()}\n"
    )
    by_key = show(trained, monkeypatch, call["key"][:8])
    assert by_key.exit_code == 0 and by_key.stdout == result.stdout


def test_blobs_show_by_hash_and_unique_prefix(
    trained: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = first(trained, "SELECT id FROM events WHERE type = 'model.call' ORDER BY id LIMIT 1")
    skill = json.loads(call["prompt"])[0]["content"]
    digest = sha256_hex(skill)
    for ident in (digest, digest[:6].upper()):
        result = show(trained, monkeypatch, ident)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"# blob {digest}  {len(skill):,} characters\n\n{skill.rstrip()}\n"
    prompt = show(trained, monkeypatch, call["payload"]["prompt"][:10])
    assert prompt.stdout.splitlines()[2:4] == ["## System", ""]  # a prompt shows as messages
    data = json.loads(show(trained, monkeypatch, digest[:12], "--json").stdout)
    assert data["blob"] == {"hash": digest, "size": len(skill), "content": skill}


def test_an_ambiguous_prefix_lists_the_candidates(
    trained: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo = Path(shutil.copytree(trained, tmp_path / "copy"))
    seen: dict[str, str] = {}
    for n in itertools.count():  # two texts whose hashes share 6 hex characters (~4,000 tries)
        text = f"note {n}"
        prefix = sha256_hex(text)[:6]
        if prefix in seen:
            break
        seen[prefix] = text
    with open_store(repo / ".skillvc/events.db") as store:
        a, b = sorted([store.put_blob(seen[prefix]), store.put_blob(text)])
    result = show(repo, monkeypatch, prefix)
    assert result.exit_code == 3
    assert result.stderr == (
        f"Error: '{prefix}' is ambiguous: it is the prefix of blob {a[:16]}, blob {b[:16]}.\n"
        "Hint: Give more characters.\n"
    )
    assert show(repo, monkeypatch, a[:7] if a[6] != b[6] else a).exit_code == 0
    missing = show(repo, monkeypatch, "abcdef0123")
    assert missing.exit_code == 3 and missing.stderr == (
        "Error: No event, edit, commit, run, model call or blob matches 'abcdef0123'.\n"
        "Hint: List ids with 'skillvc log' or 'skillvc runs'.\n"
    )
