"""The leak matrix: every secret form of ``secret_matrix`` x every surface skillvc writes.

One training run carries all forms at once (lean: one fixture, then every surface is scanned):
the target's answers end with all of them, the first target call fails with an error body
holding them all, and the optimizer proposes an edit whose content and rationale hold keys.
Then the log (rows and blobs), git objects of every ref, each report format, each ``--json``
and all stdout/stderr are searched for each secret in clear, base64 (every alignment, also as
``user:SECRET``), URL-encoded and hex. The pipeline's unit properties (no false positives on
ids and prose, idempotence, harvest) are checked on the same forms.
"""

# The imported ``loopback`` fixture is named by a test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import loopback as lb
import pytest
import secret_matrix as M
from click.testing import CliRunner
from conftest import copy_repo, git
from helpers import skillvc_process
from secret_clean import CLEAN
from secret_forms import assert_nowhere

from skillvc.cli import cli as skillvc_cli
from skillvc.secrets import REDACTED, findings, scrub
from skillvc.sleep.redact import Redactor
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
ROOT = Path(__file__).resolve().parent.parent


def leaks(text: str) -> list[str]:
    """The forms whose secret is in ``text``, whole or as the tail a partial redaction leaves
    (its last 12 characters, for secrets of 24 or more)."""
    return [
        name
        for name, _, secret in M.FORMS
        if M.found_in(text, secret) or (len(secret) >= 24 and M.found_in(text, secret[-12:]))
    ]


def test_every_form_is_removed_alone_and_all_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in M.ENV.items():
        monkeypatch.setenv(name, value)
    assert len(M.FORMS) >= 60
    for name, text, secret in M.FORMS:
        assert M.found_in(text, secret), name
        out = scrub(text)
        assert leaks(out) == [], (name, out)
        assert scrub(out) == out, name  # scrub(scrub(x)) == scrub(x)
    both = scrub(M.ALL_TEXT)
    assert leaks(both) == [] and scrub(both) == both


def test_harvest_removes_every_form_and_counts_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in M.ENV.items():
        monkeypatch.setenv(name, value)
    out, counts = Redactor(home="/nonexistent-home").redact(M.ALL_TEXT)
    assert leaks(out) == []
    assert counts["aws_secret_key"] >= 1 and counts["env_value"] >= 1, counts
    assert all(REDACTED not in k for k in counts), "counts name kinds, never values"
    basic = f"Authorization: Basic {M.b64('alice:' + M.basic_pass)}"
    cleaned, _ = Redactor(env_values=[], home="/x").redact(basic)
    assert cleaned.startswith("Authorization: Basic [REDACTED:"), cleaned  # order bug fixed


def test_ordinary_text_and_ids_are_left_alone() -> None:
    sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    sha1 = "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
    text = (
        f"content {sha256} commit {sha1} short {sha1[:10]} run {uuid.UUID(int=7)}\n"
        "The author: JohnSmith set max_tokens: 4096 and tokens: 1,234; the password is "
        "required and the key is to be polite. Basic understanding of task-skill docs.\n"
        'model = "claude-3-5-sonnet-20241022", "gpt-4o-mini", see https://example.com/a/b\n'
    )
    assert scrub(text) == text
    assert findings(text) == []
    demo = (ROOT / "skillvc" / "training" / "demo.py").read_text(encoding="utf-8")
    assert findings(demo) == [], "the demo's text is no credential"


def test_the_false_positive_corpus_stays_as_it_is() -> None:
    """Shas, sums, UUIDs, unsigned URLs, base64 images, wrapped prose and code, ``host:port``
    lines and invisible characters in prose: none is a credential (``secret_clean``)."""
    assert len(CLEAN) >= 20
    for name, text in CLEAN:
        assert findings(text) == [], name
        assert scrub(text) == text, name
        assert Redactor(env_values=[], home="/nonexistent-home").redact(text)[0] == text, name
    assert scrub("\n\n".join(text for _, text in CLEAN)) == "\n\n".join(t for _, t in CLEAN)


def test_a_split_key_goes_whole_and_its_surroundings_stay() -> None:
    """A key split by a line break or an invisible character is removed from its first
    character to its last, and the words around it are kept."""
    key = M.inv_gh
    for text in (
        f"push with {key[:14]}\n{key[14:]} later",
        f"push with {key[:14]}\\n{key[14:]} later",  # inside a JSON string
        f"push with {key[:14]}\r\n   {key[14:]} later",
        f"push with {key[:6]}\u200b{key[6:]} later",
    ):
        assert scrub(text) == f"push with {REDACTED} later", text


def test_a_skill_its_code_and_our_log_lines_are_left_alone() -> None:
    """Prose that names key prefixes, code, URLs with a user, ids, hashes and skillvc's own log
    lines: nothing here is a credential, so nothing is redacted."""
    sha256 = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    sha1 = "11f6ad8ec52a2984abaafd7c3b516503785c2072"
    text = (
        "# Refunds skill\nWhen the customer asks for a refund, check the order id and the "
        "policy.\nThe path /home/u/src/app/main.py:42 and https://docs.example.com/api/v1/keys/ "
        "describe key rotation.\nUse `git@github.com:org/repo.git` or ssh://git@host/repo; "
        "https://user@example.com/x is a login page.\n"
        "```python\ndef api_key_name(cache_key: str) -> str:\n"
        '    return cache_key.replace("-", "_")  # see key-value stores\n```\n'
        f"run {uuid.UUID(int=12345)} commit {sha1} blob {sha256} short {sha1[:7]}\n"
        f"request_id=req_0123456789abcdef01234567 cache_key={sha256} event_token_count=512\n"
        "The signature (sig=) field is optional; tokens look like hvs. or sk- or EAA or AIza, "
        "ATATT, NRAK- and PMAK-; secret_key_base is a Rails setting.\n"
        "Sentry: https://o4504.ingest.sentry.io/45. max_tokens: 4096, model: "
        "claude-3-5-sonnet-20241022.\n"
        f"2026-11-25T20:00:00Z edit.applied run=run-20261125-200000 skill=acme@{sha1[:12]}\n"
    )
    assert findings(text) == []
    assert scrub(text) == text


def test_a_key_pasted_into_api_key_env_is_named_never_echoed(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    create_demo_repo(root)
    original = (root / "skillvc.toml").read_text(encoding="utf-8")
    printed = ""
    for setting in (f'api_key_env = "{M.openai_key}"', f'temperature = "{M.openai_key}"'):
        # (the demo sets a temperature already: that line goes)
        toml = re.sub(r"(?m)^temperature = 0\.0\n", "", original, count=1)
        toml = toml.replace("[target]\n", f"[target]\n{setting}\n", 1)
        (root / "skillvc.toml").write_text(toml, encoding="utf-8")
        outputs = [cli(root, "validate"), cli(root, "doctor")]
        text = "".join(o.stdout + o.stderr for o in outputs)
        assert setting.split(" =")[0] in text and "looks like a credential" in text, text
        printed += text
    assert leaks(printed) == []


def test_a_task_file_holding_a_key_warns_with_file_line_and_kind(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    create_demo_repo(root)
    train = root / "evals" / "train.jsonl"
    rows = train.read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].replace('"input": "', f'"input": "my key is {M.aws_id} ', 1)
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    done = cli(root, "validate")
    assert "evals/train.jsonl:3 holds what looks like a credential (aws_access_key)" in (
        done.stderr
    ), done.stdout + done.stderr
    assert M.aws_id not in done.stdout + done.stderr
    assert train.read_text(encoding="utf-8").count(M.aws_id) == 1, "the user's file is kept"
    git(root, "commit", "-qam", "a key in a task")
    # train scans the task files while its first calls are out; the warning is said once.
    trained = cli(root, "train", "-q", "--epochs", "1")
    assert trained.returncode == 0, trained.stderr
    warning = "evals/train.jsonl:3 holds what looks like a credential (aws_access_key)"
    assert trained.stderr.count(warning) == 1, trained.stderr
    assert M.aws_id not in trained.stdout + trained.stderr


cli = skillvc_process  # a skillvc command as its own process


class Carrier:
    """The loopback server's script: the simulator, with every form on every answer."""

    def __init__(self) -> None:
        self.simulate = lb.simulator_responder()
        self.optimizer_calls = 0

    def __call__(self, body: dict[str, Any]) -> str:
        answer = self.simulate(body)
        if not lb.is_optimizer_prompt(lb.chat_messages(body)):
            return f"{answer}\n\nNotes from the shell:\n{M.ALL_TEXT}"
        self.optimizer_calls += 1
        try:
            data = json.loads(answer)
        except ValueError:
            return answer
        if isinstance(data, dict) and isinstance(data.get("edits"), list):
            data["edits"].insert(
                0,
                {
                    "op": "add",
                    "content": f"- Authenticate with {M.openai_key} and {M.ENV['GH_PAT']}.",
                    "rationale": f"It used the AWS secret {M.aws_secret} ({M.slack_hook}).",
                },
            )
            for edit in data["edits"][1:]:
                edit["rationale"] = f"{edit.get('rationale', '')} (key {M.stripe_live})"
        return json.dumps(data)


def test_one_run_carrying_every_form_leaks_on_no_surface(
    tmp_path: Path, loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    create_demo_repo(root)
    (root / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\n\n'
        '[target]\nmodel = "openai:gpt-4o-mini"\n\n'
        '[optimizer]\nmodel = "openai:gpt-4o"\n\n'
        "[train]\nepochs = 1\nbatch_size = 8\nminibatch_size = 4\nworkers = 4\nseed = 7\n",
        encoding="utf-8",
    )
    for split, keep in (("train", 8), ("val", 4), ("test", 2)):
        path = root / "evals" / f"{split}.jsonl"
        path.write_text(
            "\n".join(path.read_text(encoding="utf-8").splitlines()[:keep]) + "\n",
            encoding="utf-8",
        )
    git(root, "commit", "-qam", "Train against the loopback server")
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "k" * 20)
    for name, value in M.ENV.items():
        monkeypatch.setenv(name, value)
    carrier = Carrier()
    loopback.responder = carrier
    loopback.enqueue(lb.Behaviour(kind="status", status=400, message="bad request: " + M.ALL_TEXT))
    outputs: dict[str, str] = {}

    def run(*args: str, codes: tuple[int, ...] = (0,)) -> str:
        """Training as its own process; the read commands in this one (the same output)."""
        if args[0] == "train":
            done = cli(root, *args)
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        else:
            result = CliRunner().invoke(skillvc_cli, list(args))
            code, stdout, stderr = result.exit_code, result.stdout, result.stderr
        outputs[f"skillvc {' '.join(args)} #{len(outputs)}"] = stdout + "\n" + stderr
        assert code in codes, stdout + stderr
        return stdout

    monkeypatch.chdir(root)
    base = git(root, "rev-parse", "HEAD").strip()
    run("train")
    # An API error body holding every form, as ``eval`` and ``eval --json`` report it.
    for args in (("eval",), ("eval", "--json")):
        loopback.enqueue(
            lb.Behaviour(kind="status", status=400, message="bad request: " + M.ALL_TEXT)
        )
        run(*args, codes=(0, 1, 2, 3, 4, 5))
    # The gate on the trained skill against its base: model answers in ``check --json``.
    run("check", "--base", base, "--json", codes=(0, 1))
    shown = {k.split(" #")[0]: v for k, v in outputs.items()}
    assert "bad request" in shown["skillvc eval"] and REDACTED in shown["skillvc eval"]
    assert "bad request" in shown["skillvc eval --json"]
    assert REDACTED in shown[f"skillvc check --base {base} --json"]
    assert carrier.optimizer_calls >= 1, "the optimizer saw (scrubbed) answers"
    for args in (
        ("report",),
        ("report", "--html", "-"),
        ("report", "--json"),
        ("runs", "--json"),
        ("log", "--json"),
        ("log", "-p"),
        ("log", "--rejected", "-p"),
        ("eval", "--json"),
        ("calls", "-n", "0"),
        ("calls", "-n", "0", "--json"),
    ):
        run(*args)
    db = root / ".skillvc" / "events.db"
    with sqlite3.connect(db) as conn:
        ids = [str(r[0]) for r in conn.execute("SELECT id FROM events ORDER BY id LIMIT 40")]
        refused = [
            json.loads(p)
            for (p,) in conn.execute(
                "SELECT payload FROM events WHERE type = 'edit.unmatched' "
                "AND json_extract(payload, '$.reason') = 'secret'"
            )
        ]
        stored = "\n".join(
            str(v)
            for table in ("events", "blobs")
            for row in conn.execute(f"SELECT * FROM {table}")  # noqa: S608 - fixed names
            for v in row
        )
    for ident in ids[::8]:
        run("show", "--json", ident)
    assert refused, "the optimizer's edit holding keys was refused for that reason"
    assert "credential" in refused[0]["detail"]
    assert (
        json.loads(
            next(v for k, v in outputs.items() if k.startswith("skillvc report --json")).split(
                "\n\n"
            )[0]
            or "{}"
        ).get("withheld", 0)
        >= 0
    )
    # The forms did pass through: the stored answers hold the placeholder where they were.
    assert stored.count(REDACTED) >= len(M.FORMS)
    raw = b"".join(p.read_bytes() for p in sorted(db.parent.iterdir()) if p.is_file())
    history = git(root, "log", "-p", "--all", "--format=fuller%n%B") + git(
        root, "for-each-ref", "--format=%(refname) %(contents)"
    )
    places: dict[str, str | bytes] = {
        ".skillvc/ (raw)": raw,
        "log rows and blobs": stored,
        "git, every ref": history,
        **outputs,
    }
    assert_nowhere(M.SECRETS, places)
    assert M.openai_key not in (root / SKILL).read_text(encoding="utf-8")


def test_harvest_and_the_sleep_branch_carry_no_form(
    demo_seed: Path, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agent sessions whose prompts, answers and tool output hold every form: the harvest's
    log, its review listing and stdout, the reviewed task file on the sleep branch and that
    branch's commits (pushed by design) hold none of them."""
    from test_sleep import claude_lines, jsonl, ticket_items

    for name, value in M.ENV.items():
        monkeypatch.setenv(name, value)
    root = copy_repo(demo_seed, tmp_path / "acme")
    monkeypatch.chdir(root)
    toml = root / "skillvc.toml"
    toml.write_text(toml.read_text().replace("[train]\n", "[train]\nattribution = false\n", 1))
    git(root, "commit", "-qam", "attribution off")
    project = isolated_env / ".claude" / "projects" / "-home-alice-skills"
    project.mkdir(parents=True)
    items = ticket_items(8, seed=43)
    for s in range(4):
        exchanges = [
            {
                "prompt": f"{item['input']}\n{M.ALL_TEXT}",
                "answer": f"Per the policy.\n{M.ALL_TEXT}\n<answer>{item['target']}</answer>",
                "tool_output": M.ALL_TEXT,
                "tool_error": False,
            }
            for item in items[2 * s : 2 * s + 2]
        ]
        sid = str(uuid.UUID(int=4300 + s))
        start = f"2026-01-01T0{s}:00:00.000Z"
        jsonl(project / f"{sid}.jsonl", claude_lines(sid, start, "/home/alice/skills", exchanges))
    outputs: dict[str, str] = {}
    for args in (
        ("sleep", "--yes", "--date", "2026-01-01", "-q", str(project)),
        ("harvest", "--review"),
        ("log", "--json"),
    ):
        result = CliRunner().invoke(skillvc_cli, list(args))
        assert result.exit_code == 0, result.output
        outputs["skillvc " + " ".join(args)] = result.output
    branch = "skillvc/sleep/2026-01-01"
    tasks = git(root, "show", f"{branch}:evals/harvested.jsonl")
    assert len(tasks.splitlines()) == 8 and "[REDACTED:" in tasks, tasks[:300]
    db = root / ".skillvc" / "events.db"
    places: dict[str, str | bytes] = {
        ".skillvc/ (raw)": b"".join(p.read_bytes() for p in db.parent.glob("events.db*")),
        "the sleep branch": git(root, "log", "-p", "--format=fuller%n%B", branch),
        "the harvested task file": tasks,
        **outputs,
    }
    assert_nowhere(M.SECRETS, places)
    assert [name for name, text in places.items() if leaks(str(text))] == []
