"""Chat targets that act (issue 39): the tool loop end to end, offline and over the real SDKs.

The simulator's ``sim:inventory`` world runs through the real loop and the demo's real Python
tool; the loopback server speaks each provider's tool-calling wire format to the real SDKs.
"""

# ruff: noqa: F811

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git, seed_env
from helpers import event_count, start_train, train_env, train_to_the_end
from loopback import Behaviour, LoopbackServer, loopback, neutral_messages  # noqa: F401

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.models.tools.loop import text_calls
from skillvc.training.demo import create_demo_repo
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/stock-check/SKILL.md"


@pytest.fixture(scope="module")
def tools_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tools-demo") / "seed"
    with seed_env(root):
        create_demo_repo(root, tools=True)
    return root


def test_calls_written_as_text_are_read_and_prose_is_not() -> None:
    names = {"stock_level", "warehouses"}
    # What Qwen2.5-Coder-1.5B answered with tools at temperature 0: the call as content.
    (call,) = text_calls('{"name": "stock_level", "arguments": {"sku": "AB123"}}', names)
    assert (call.name, json.loads(call.arguments)) == ("stock_level", {"sku": "AB123"})
    # ... and with the doubled braces of its chat template, as it answered on llama.cpp:
    doubled = '{{"name": "stock_level", "arguments": {"sku": "AB123", "warehouse": "Leeds"}}}'
    assert [json.loads(c.arguments)["warehouse"] for c in text_calls(doubled, names)] == ["Leeds"]
    fenced = (
        '```json\n[{"name": "warehouses", "parameters": {}}, {"name": "stock_level", '
        '"arguments": "{\\"sku\\": \\"X\\"}"}]\n```'
    )
    assert [c.name for c in text_calls(fenced, names)] == ["warehouses", "stock_level"]
    tagged = '<tool_call>\n{"name": "warehouses", "arguments": {}}\n</tool_call>'
    assert [c.name for c in text_calls(tagged, names)] == ["warehouses"]
    assert text_calls('I would call {"name": "stock_level"} here.', names) == []
    assert text_calls('{"name": "delete_all", "arguments": {}}', names) == []  # not offered
    assert text_calls('{"answer": 12}', names) == []
    assert text_calls("12 units", names) == []


def test_the_tools_demo_trains_the_tool_use_rule_through_the_real_loop(
    tools_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(tools_seed, tmp_path / "repo")
    monkeypatch.chdir(repo)
    summary = train(open_workspace(repo))
    skill = (repo / SKILL).read_text().lower()
    assert "call the stock_level tool" in skill  # the tool-use rule was found and kept
    assert "estimate stock from the sku" not in skill  # the harmful one was not
    assert summary.accepted >= 2
    assert summary.best_val is not None and summary.baseline_val is not None
    assert summary.best_val > summary.baseline_val
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query(
            "SELECT id, payload FROM events WHERE type = 'rollout' ORDER BY id DESC LIMIT 200"
        )
    acted = [r for r in rows if json.loads(r["payload"]).get("hard") == 1.0]
    assert acted, "no rollout succeeded"
    shown = CliRunner().invoke(cli, ["show", str(acted[0]["id"])])
    assert shown.exit_code == 0, shown.output
    assert "## Trajectory (2 turns, 1 tool calls)" in shown.output
    assert "-> stock_level: {" in shown.output
    assert "<- stock_level: " in shown.output
    calls = CliRunner().invoke(cli, ["calls", "-n", "1", "--role", "target"])
    assert "tools stock_level, warehouses  max_turns 4" in calls.output  # not the whole dict
    assert "## Trajectory (" in calls.output
    as_json = json.loads(CliRunner().invoke(cli, ["show", str(acted[0]["id"]), "--json"]).output)
    steps = as_json["rollout"]["trajectory"]["steps"]
    assert [s["kind"] for s in steps] == ["tool_call", "tool_result", "message"]


def test_demo_tools_prints_the_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--tools", "-q", "--dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "This demo trains a tool-using skill" in result.output
    assert "sim:inventory" in result.output


# -- over the real SDKs: the loopback server speaks each provider's tool calls -----------------

TOOLS_MODULE = '''\
"""Tools of the test repository, one per way a tool can misbehave."""

import time


def stock_level(sku: str, warehouse: str = "leeds") -> int:
    """Units of a SKU on hand at a warehouse."""
    return {"AB123": 12, "ZZ000": 0}.get(sku.upper(), 3)


def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


def sleepy(seconds: float) -> str:
    """Sleeps, then says so."""
    time.sleep(seconds)
    return "woke"


def huge() -> str:
    """Fifty megabytes of text."""
    return "x" * 50_000_000


def odd() -> object:
    """A value JSON cannot hold."""
    return {1, 2}
'''

WORLD = '''\
"""A number-guessing environment: reset(item) -> str, step(action) -> (obs, reward, done)."""


class Guess:
    def reset(self, item):
        self.secret = int(item["metadata"]["secret"])
        self.tries = 0
        return "Guess my number from 1 to 9. Answer with the number only."

    def step(self, action):
        self.tries += 1
        digits = [c for c in action if c.isdigit()]
        if not digits:
            return "Answer with a number.", 0.0, self.tries >= 4
        guess = int(digits[0])
        if guess == self.secret:
            return "Correct!", 1.0, True
        hint = "higher" if guess < self.secret else "lower"
        return f"No, {hint}.", 0.0, self.tries >= 4
'''

# Each item's first word tells the scripted model what to do (see ``scripted``).
KINDS = {
    "happy": "12 units",
    "unknown": "x",
    "badjson": "x",
    "schema": "x",
    "raises": "x",
    "hangs": "x",
    "huge": "x",
    "odd": "x",
    "loop": "x",
    "turns": "x",
}


def tool_repo(root: Path, server_url: str, *, model: str, extra: str = "") -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "skills/stock").mkdir(parents=True)
    (root / "skills/stock/SKILL.md").write_text(
        "---\nname: stock\ndescription: Stock questions.\n---\n# Stock\n\nUse the tools.\n"
    )
    (root / "tools").mkdir()
    (root / "tools/inventory.py").write_text(TOOLS_MODULE)
    (root / "envs").mkdir()
    (root / "envs/world.py").write_text(WORLD)
    (root / "evals").mkdir()
    rows = [{"id": k, "input": f"{k} AB123", "target": t} for k, t in KINDS.items()]
    (root / "evals/val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for split in ("train", "test"):
        row = {"id": f"{split}-1", "input": f"happy {split}", "target": "3 units"}
        (root / f"evals/{split}.jsonl").write_text(json.dumps(row) + "\n")
    provider = model.split(":", 1)[0]
    key = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    (root / "skillvc.toml").write_text(
        f"""
[skill]
path = "skills/stock/SKILL.md"

[tasks]
train = "evals/train.jsonl"
val = "evals/val.jsonl"
test = "evals/test.jsonl"

[tools]
python = ["tools/inventory.py"]
max_turns = 4
timeout_s = 0.5
max_result_chars = 2000

[target]
model = "{model}"
base_url = "{server_url}{"/v1" if provider == "openai" else ""}"
api_key_env = "{key}"
max_retries = 0
{extra}

[optimizer]
model = "sim:support"
"""
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "seed")
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    return root


def scripted(body: dict) -> Behaviour | str:
    """A model that acts as each item's first word asks (the neutral conversation)."""
    messages = neutral_messages(body)
    user = next(m for m in messages if m["role"] == "user")["content"]
    user = user if isinstance(user, str) else user[0]["text"]
    kind = user.split()[0]
    results = [m for m in messages if m["role"] == "tool"]

    def call(name: str, arguments: str) -> Behaviour:
        return Behaviour(
            tool_calls=[{"id": f"c{len(results)}", "name": name, "arguments": arguments}]
        )

    if kind == "loop" or (kind == "turns" and len(results) < 10):
        sku = "AB123" if kind == "loop" else f"S{len(results)}"
        return call("stock_level", json.dumps({"sku": sku}))
    if results:
        return (
            f"done: {results[-1]['content'][:60]}"
            if kind != "happy"
            else (f"{results[-1]['content']} units")
        )
    first = {
        "happy": ("stock_level", '{"sku": "AB123"}'),
        "unknown": ("no_such_tool", "{}"),
        # Anthropic's tool_use input is an object on the wire: a list is its worst.
        "badjson": ("stock_level", "[1, 2]" if "max_tokens" in body else "{sku: AB"),
        "schema": ("stock_level", '{"quantity": 3}'),
        "raises": ("explode", '{"reason": "bad day"}'),
        "hangs": ("sleepy", '{"seconds": 5}'),
        "huge": ("huge", "{}"),
        "odd": ("odd", "{}"),
    }[kind]
    return call(*first)


def trajectories(repo: Path) -> dict[str, dict]:
    """Each item's trajectory, by the item's first word (the last recorded call of each)."""
    out = {}
    with open_store(repo / ".skillvc/events.db") as store:
        for row in store.query("SELECT payload FROM events WHERE type = 'model.call'"):
            p = json.loads(row["payload"])
            prompt = json.loads(store.get_blob(p["prompt"]))
            user = next(m for m in prompt if m["role"] == "user")["content"]
            out[user.split()[0]] = json.loads(store.get_blob(p["meta"]["trajectory"]))
    return out


@pytest.mark.parametrize("model", ["openai:local-model", "anthropic:claude-x"])
def test_tools_and_bad_tools_over_the_real_sdks(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    loopback.responder = scripted
    repo = tool_repo(tmp_path / "repo", loopback.url, model=model)
    monkeypatch.chdir(repo)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["eval", "--split", "val", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    scores = {i["id"]: i["hard"] for i in data["items"]}
    assert [i for i in data["items"] if i["error"]] == []
    assert scores == {k: (1.0 if k == "happy" else 0.0) for k in KINDS}
    assert time.monotonic() - started < 30  # the hanging tool was cut at its timeout

    # The tools went out in the provider's native format, with the tool results after them.
    first = next(r.json for r in loopback.requests if "happy" in json.dumps(r.json))
    offered = first["tools"]
    names = sorted(t["function"]["name"] if "function" in t else t["name"] for t in offered)
    assert names == ["explode", "huge", "odd", "sleepy", "stock_level"]
    if model.startswith("anthropic"):
        assert offered[0]["input_schema"]["type"] == "object"
    else:
        assert offered[0]["type"] == "function"

    traj = trajectories(repo)
    kinds = {k: [s["kind"] for s in t["steps"]] for k, t in traj.items()}
    assert kinds["happy"] == ["tool_call", "tool_result", "message"]
    errors = {
        k: next(s for s in t["steps"] if s["kind"] == "tool_result")
        for k, t in traj.items()
        if k not in ("happy", "loop", "turns")
    }
    for kind, step in errors.items():  # each misbehaviour: a result the model saw, one line
        assert step["is_error"] or kind == "huge", (kind, step)
        assert "\n" not in step["text"] or kind == "huge", (kind, step)
    huge = errors["huge"]["text"]
    assert len(huge) <= 2100 and "cut" in huge  # 50 MB cut to max_result_chars, said so
    assert "ValueError: boom: bad day" in errors["raises"]["text"]
    assert "same arguments 3 times" in traj["loop"]["error"]
    assert "max_turns (4)" in traj["turns"]["error"]
    assert traj["turns"]["info"]["turns"] == 4


def test_an_environment_is_played_and_scored_by_its_reward(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")

    def player(body: dict) -> str:  # guesses upwards from 1, as the hints say
        messages = neutral_messages(body)
        return str(sum(1 for m in messages if m["role"] == "assistant") + 1)

    loopback.responder = player
    repo = tool_repo(tmp_path / "repo", loopback.url, model="openai:local-model")
    config = (repo / "skillvc.toml").read_text()
    config = config.replace(
        'test = "evals/test.jsonl"\n',
        'test = "evals/test.jsonl"\nenvironment = "envs/world.py:Guess"\n',
    )
    config = config.replace('python = ["tools/inventory.py"]\n', "")
    (repo / "skillvc.toml").write_text(config.replace("[tools]\n", "[tools]\n"))
    rows = [{"id": f"g{s}", "input": "play", "metadata": {"secret": s}} for s in (2, 3, 7)]
    (repo / "evals/val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    git(repo, "commit", "-qam", "an environment")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["eval", "--split", "val", "--json"])
    assert result.exit_code == 0, result.output
    scores = {i["id"]: i["hard"] for i in json.loads(result.stdout)["items"]}
    assert scores == {"g2": 1.0, "g3": 1.0, "g7": 0.0}  # 7 needs more than max_turns 4 guesses
    first_turn = loopback.requests[0].json["messages"]
    assert first_turn[-1]["content"].startswith("Guess my number")  # reset's observation


def test_a_tool_source_that_cannot_start_fails_before_any_model_call(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    repo = tool_repo(tmp_path / "repo", loopback.url, model="openai:local-model")
    (repo / "tools/inventory.py").write_text("def broken(:\n")
    git(repo, "commit", "-qam", "broken tools")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["eval", "--split", "val"])
    assert result.exit_code == 5, result.output
    assert "tools/inventory.py" in result.output
    assert loopback.requests == []


def test_images_go_out_as_each_providers_image_parts(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    loopback.responder = lambda body: "12 units"
    repo = tool_repo(tmp_path / "repo", loopback.url, model="openai:local-model")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    (repo / "evals/page.png").write_bytes(png)
    row = {"id": "img", "input": "happy AB123", "target": "12 units", "images": ["evals/page.png"]}
    (repo / "evals/val.jsonl").write_text(json.dumps(row) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "an image")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["eval", "--split", "val", "--json"])
    assert result.exit_code == 0, result.output
    user = loopback.requests[0].json["messages"][1]["content"]
    assert user[0] == {"type": "text", "text": "happy AB123"}
    assert user[1]["type"] == "image_url"
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_killed_tool_run_resumes_exactly(tools_seed: Path, tmp_path: Path) -> None:
    """Killed at fractions of its events, a tool-using run ends as an uninterrupted one, and a
    resumed run runs again only the rollouts that were in flight at a kill (their model turns
    and tool calls), never a recorded one."""
    seed = copy_repo(tools_seed, tmp_path / "seed")
    tools = seed / "tools/inventory.py"
    tools.write_text(
        tools.read_text().replace(
            "    key = (sku.strip().upper(), warehouse.strip().lower())\n",
            "    key = (sku.strip().upper(), warehouse.strip().lower())\n"
            "    import os\n"
            '    with open(os.environ["TOOL_JOURNAL"], "a") as fh:\n'
            '        fh.write(f"{key}\\n")\n',
        )
    )
    git(seed, "commit", "-qam", "journal each tool call")
    reference = copy_repo(seed, tmp_path / "reference")
    env = train_env(SKILLVC_SIM_LATENCY_MS="10", TOOL_JOURNAL=str(tmp_path / "ref-tools.txt"))
    train_to_the_end(reference, env)
    total = event_count(reference / ".skillvc/events.db")

    repo = copy_repo(seed, tmp_path / "killed")
    tool_journal = tmp_path / "tools.txt"
    env |= {"TOOL_JOURNAL": str(tool_journal), "SKILLVC_SIM_JOURNAL": str(tmp_path / "sim.txt")}
    db = repo / ".skillvc/events.db"
    kills = 0
    for fraction in (0.3, 0.7):
        proc = start_train(repo, env)
        deadline = time.monotonic() + 120
        while event_count(db) < fraction * total and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.communicate()
    assert kills == 2
    train_to_the_end(repo, env)

    assert (repo / SKILL).read_bytes() == (reference / SKILL).read_bytes()
    fmt = "--format=%T%x00%B"
    assert git(repo, "log", fmt, "main") == git(reference, "log", fmt, "main")
    query = "SELECT step, kind, decision, val_before, val_after FROM gates ORDER BY event_id"
    with open_store(db) as got, open_store(reference / ".skillvc/events.db") as want:
        assert got.query(query) == want.query(query)
        calls = (
            "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS k FROM events WHERE type = 'model.call'"
        )
        assert got.query(calls) == want.query(calls)
        assert got.query(calls)[0]["n"] == got.query(calls)[0]["k"]  # each rollout once
    made = (tmp_path / "ref-tools.txt").read_text().splitlines()
    again = tool_journal.read_text().splitlines()
    # Only rollouts in flight at a kill (8 workers, plus 8 sent ahead) call their tool again.
    assert len(made) <= len(again) <= len(made) + kills * 16


def test_an_mcp_server_and_the_code_tool_through_the_loop(
    loopback: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real stdio MCP server (the official SDK) and the code tool, called by the model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")

    def model(body: dict) -> Behaviour | str:
        messages = neutral_messages(body)
        user = next(m for m in messages if m["role"] == "user")["content"]
        results = [m for m in messages if m["role"] == "tool"]
        if results:  # the code tool says "exit code: 0\nstdout:\n42": the last line
            return f"{results[-1]['content'].strip().splitlines()[-1]} units"
        if user.startswith("mcp"):
            call = {"id": "c1", "name": "stock_level", "arguments": '{"sku": "AB123"}'}
        else:
            code = json.dumps({"code": "print(6 * 7)"})
            call = {"id": "c1", "name": "python", "arguments": code}
        return Behaviour(tool_calls=[call])

    loopback.responder = model
    repo = tool_repo(tmp_path / "repo", loopback.url, model="openai:local-model")
    server = Path(__file__).parent / "fixtures" / "mcp_server.py"
    (repo / "tools/mcp_server.py").write_text(server.read_text())
    config = (
        (repo / "skillvc.toml")
        .read_text()
        .replace(
            'python = ["tools/inventory.py"]',
            f'mcp = [[{json.dumps(sys.executable)}, "tools/mcp_server.py"]]\ncode = true',
        )
    )
    (repo / "skillvc.toml").write_text(config.replace("timeout_s = 0.5", "timeout_s = 20"))
    rows = [
        {"id": "m", "input": "mcp AB123", "target": "7 units"},
        {"id": "c", "input": "code", "target": "42 units"},
    ]
    (repo / "evals/val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "an MCP server and the code tool")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["eval", "--split", "val", "--json"])
    assert result.exit_code == 0, result.output
    items = {i["id"]: (i["hard"], i["output"]) for i in json.loads(result.stdout)["items"]}
    assert items == {"m": (1.0, "7 units"), "c": (1.0, "42 units")}
    offered = {t["function"]["name"] for t in loopback.requests[0].json["tools"]}
    assert {"stock_level", "python"} <= offered


def test_a_reference_reaches_the_optimizer_only(
    tools_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(tools_seed, tmp_path / "repo")
    train_file = repo / "evals/train.jsonl"
    rows = [json.loads(line) for line in train_file.read_text().splitlines()]
    for row in rows:
        row["reference"] = f"Worked: stock_level({row['id']}) gives the count."
    train_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    git(repo, "commit", "-qam", "references")
    monkeypatch.chdir(repo)
    train(open_workspace(repo))
    seen = {"target": 0, "optimizer": 0}
    with open_store(repo / ".skillvc/events.db") as store:
        for row in store.query("SELECT payload FROM events WHERE type = 'model.call'"):
            p = json.loads(row["payload"])
            if "Worked: stock_level(" in store.get_blob(p["prompt"]):
                seen[p["role"]] += 1
    assert seen["target"] == 0
    assert seen["optimizer"] > 0
