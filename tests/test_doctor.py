"""`skillvc doctor`: one line per check, exact fixes, exit 6 on failure, one live call per role.

Real SDKs against the loopback server; real repos from ``create_demo_repo``; the CLI in process.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from loopback import Behaviour, LoopbackServer, loopback  # noqa: F401 - the fixture

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.review.doctor import PROBE_MAX_TOKENS
from skillvc.training.demo import create_demo_repo

KEY = "sk-test-doctor-7d1e5a"
SIM = 'model = "sim:support"'
AGENTS = Path(__file__).parent / "fixtures" / "agents"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    create_demo_repo(root)
    monkeypatch.chdir(root)
    return root


def configure(repo: Path, target: str, optimizer: str = SIM) -> None:
    """Replace skillvc.toml's model sections (doctor reads the working file; no commit needed)."""
    (repo / "skillvc.toml").write_text(
        '[skill]\npath = "skills/acme-returns/SKILL.md"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n\n'
        f"[target]\n{target}\n\n[optimizer]\n{optimizer}\n",
        encoding="utf-8",
    )


def doctor(*args: str) -> Result:
    return CliRunner().invoke(cli, ["doctor", *args])


def lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


def line(result: Result, name: str) -> str:
    (found,) = [ln for ln in lines(result) if ln.split(" ", 1)[-1].lstrip().startswith(name + ":")]
    return found


@pytest.fixture
def openai_env(loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAI's key and the loopback server as its base URL."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")


def event_count(repo: Path) -> int:
    with open_store(repo / ".skillvc/events.db") as store:
        return store.count()


# -- everything fine --------------------------------------------------------------------------


def test_simulator_needs_nothing(repo: Path) -> None:
    result = doctor()
    assert result.exit_code == 0, result.output
    assert line(result, "config").startswith("ok    config: ")
    assert line(result, "target backend") == (
        "ok    target backend: sim:support (offline simulator, always reachable)."
    )
    assert "offline simulator, always reachable" in line(result, "optimizer backend")
    assert line(result, "skill").startswith("ok    skill: skills/acme-returns/SKILL.md passes")
    assert line(result, "tasks") == "ok    tasks: the task set loads (60 train, 30 val, 30 test)."
    assert lines(result)[-1] == "All 5 checks passed."


def test_a_zero_gate_confidence_with_attribution_is_noted(repo: Path) -> None:
    """What `skillvc init` wrote before attribution existed: every attribution test passes."""
    config = repo / "skillvc.toml"
    text = config.read_text(encoding="utf-8")
    assert "Note:" not in line(doctor(), "config")
    config.write_text(text.replace("[train]\n", "[train]\ngate_confidence = 0.0\n"), "utf-8")
    result = doctor()
    assert result.exit_code == 0, result.output
    assert "Note: [train] gate_confidence = 0 with attribution on keeps every edit" in line(
        result, "config"
    )
    config.write_text(
        text.replace("[train]\n", "[train]\ngate_confidence = 0.0\nattribution = false\n"), "utf-8"
    )
    assert "Note:" not in line(doctor(), "config")  # the paper's gate, as asked


@pytest.mark.usefixtures("openai_env")
def test_openai_is_reached_with_one_tiny_unrecorded_call(
    repo: Path, loopback: LoopbackServer
) -> None:
    configure(repo, 'model = "openai:gpt-4o-mini"\ntemperature = 0.3\nmax_tokens = 2000')
    before = event_count(repo)

    result = doctor()

    assert result.exit_code == 0, result.output
    assert line(result, "target backend") == (
        f"ok    target backend: openai:gpt-4o-mini via {loopback.url}/v1 (from OPENAI_BASE_URL)."
    )
    assert (
        line(result, "target key") == "ok    target key: OPENAI_API_KEY is set (value not shown)."
    )
    assert line(result, "target reachable").startswith("ok    target reachable: answered")
    (request,) = loopback.requests
    assert request.path == "/v1/chat/completions"
    assert request.json["model"] == "gpt-4o-mini"
    assert request.json["max_tokens"] == PROBE_MAX_TOKENS  # not the run's 2000
    assert "temperature" not in request.json
    assert KEY not in result.output

    assert doctor().exit_code == 0
    assert len(loopback.requests) == 2, "never answered from a cache"
    assert event_count(repo) == before, "nothing recorded in the event log"


def test_anthropic_and_azure_are_reached_on_their_routes(
    repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", loopback.url)
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2024-10-21")
    configure(
        repo,
        'model = "openai:gpt-4o"\nazure = true\ndeployment = "prod-4o"',
        'model = "anthropic:claude-test-1"',
    )

    result = doctor()

    assert result.exit_code == 0, result.output
    assert "Azure OpenAI deployment 'prod-4o'" in line(result, "target backend")
    assert line(result, "target azure endpoint") == f"ok    target azure endpoint: {loopback.url}."
    assert line(result, "target azure api version").endswith("2024-10-21.")
    assert line(result, "optimizer reachable").startswith("ok ")
    azure, anthropic = sorted(loopback.requests, key=lambda r: r.path)
    assert azure.path == "/openai/deployments/prod-4o/chat/completions"
    assert azure.query == {"api-version": "2024-10-21"}
    assert anthropic.path == "/v1/messages"
    assert anthropic.json["max_tokens"] == PROBE_MAX_TOKENS


def test_json_report(repo: Path) -> None:
    result = doctor("--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert [c["name"] for c in report["checks"]] == [
        "config",
        "skill",
        "tasks",
        "target backend",
        "optimizer backend",
    ]
    assert {c["status"] for c in report["checks"]} == {"ok"}


# -- what exactly to fix ----------------------------------------------------------------------


def test_missing_keys_are_named_and_nothing_is_sent(
    repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not on this machine: a loopback server would get a placeholder key (test_first_hour).
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box.invalid:8000/v1")
    configure(
        repo,
        'model = "openai:gpt-4o-mini"',
        'model = "anthropic:claude-test-1"\napi_key_env = "TEAM_CLAUDE_KEY"',
    )

    result = doctor()

    assert result.exit_code == 6
    target_key = line(result, "target key")
    assert target_key.startswith("FAIL  target key: OPENAI_API_KEY is not set. Fix: Export it")
    assert "placeholder" in target_key  # local OpenAI-compatible servers need no real key
    assert line(result, "optimizer key").startswith(
        "FAIL  optimizer key: TEAM_CLAUDE_KEY is not set. Fix:"
    )
    assert line(result, "target reachable").startswith("skip  target reachable: not tried")
    assert loopback.requests == []
    assert "Error: 2 of 9 checks failed (target key, optimizer key)." in result.stderr
    assert "Hint: Fix the lines marked FAIL above" in result.stderr
    assert json.loads(doctor("--json").stdout)["ok"] is False


def test_azure_settings_are_named(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # not the Azure variable
    configure(repo, 'model = "openai:gpt-4o"\nazure = true')

    result = doctor()

    assert result.exit_code == 6
    assert "AZURE_OPENAI_API_KEY is not set." in line(result, "target key")
    assert "AZURE_OPENAI_ENDPOINT" in line(result, "target azure endpoint")
    assert "api_version" in line(result, "target azure api version")
    assert "3 of 9 checks failed" in result.stderr


def test_refused_key_is_reported_without_the_key(
    repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    configure(repo, f'model = "openai:gpt-4o-mini"\nbase_url = "{loopback.url}/v1"')
    loopback.unauthorized()  # the body echoes the key

    result = doctor()

    assert result.exit_code == 6
    assert line(result, "target backend").endswith("(from base_url).")
    assert line(result, "target reachable") == (
        "FAIL  target reachable: openai:gpt-4o-mini refused the key in OPENAI_API_KEY "
        "(HTTP 401 Unauthorized: Incorrect API key: [redacted]). Fix: Export a valid key in "
        "OPENAI_API_KEY (or name another variable with api_key_env in skillvc.toml), then run "
        "'skillvc doctor' to test it."
    )
    assert KEY not in result.output and KEY not in doctor("--json").output


@pytest.mark.usefixtures("openai_env")
def test_server_error_is_reported_after_one_call_without_retries(
    repo: Path, loopback: LoopbackServer
) -> None:
    configure(repo, 'model = "openai:gpt-4o-mini"\nmax_retries = 5')
    loopback.enqueue(Behaviour(kind="status", status=503, headers={"Retry-After": "0"}))

    result = doctor()

    assert result.exit_code == 6
    assert "HTTP 503 Service Unavailable" in line(result, "target reachable")
    assert "Fix: Check that the server is running" in line(result, "target reachable")
    assert len(loopback.requests) == 1


@pytest.mark.usefixtures("openai_env")
def test_wrong_model_name_says_to_check_it(repo: Path, loopback: LoopbackServer) -> None:
    configure(repo, 'model = "openai:gpt-nope"')
    loopback.error(404, "The model `gpt-nope` does not exist")

    check = line(doctor(), "target reachable")
    assert "HTTP 404 Not Found: The model `gpt-nope` does not exist." in check
    assert "Fix: Check the model name in [target] of skillvc.toml" in check


def test_unreachable_and_slow_servers(
    repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    configure(
        repo,
        f'model = "openai:gpt-4o-mini"\nbase_url = "http://127.0.0.1:{closed}/v1"',
        f'model = "openai:gpt-4o-mini"\nbase_url = "{loopback.url}/v1"\ntimeout_s = 0.3',
    )
    loopback.slow(3)

    result = doctor()

    assert result.exit_code == 6
    assert "could not be reached (connection error)" in line(result, "target reachable")
    assert "did not answer within 0.3 s" in line(result, "optimizer reachable")


def test_base_url_without_scheme(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    configure(repo, 'model = "openai:llama3"\nbase_url = "localhost:11434/v1"')
    result = doctor()
    assert result.exit_code == 6
    assert line(result, "target backend") == (
        "FAIL  target backend: base_url 'localhost:11434/v1' does not start with http:// or "
        "https://. Fix: Write the full URL, e.g. http://localhost:8000/v1 for a local server."
    )


def test_key_with_a_trailing_newline(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY + "\n")
    configure(repo, SIM, 'model = "anthropic:claude-test-1"')
    result = doctor()
    assert result.exit_code == 6
    assert "ANTHROPIC_API_KEY has leading or trailing whitespace." in line(result, "optimizer key")
    assert KEY not in result.output


# -- the command harness ----------------------------------------------------------------------


def test_command_harness_checks_the_executable_without_running_it(
    repo: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    agent = f'import pathlib; pathlib.Path(r"{ran}").touch()'
    configure(
        repo,
        'model = "command:agent"\nharness = "command"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(agent)}]',
    )
    result = doctor()
    assert result.exit_code == 0, result.output
    assert line(result, "target executable") == (
        f"ok    target executable: {sys.executable} found (not started; the first task runs it)."
    )
    assert not ran.exists()


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("no-such-agent-3f1c", "FAIL  target executable: 'no-such-agent-3f1c' is not on PATH."),
        ("/nonexistent/agent", "FAIL  target executable: '/nonexistent/agent' does not exist"),
        ("./agent.sh", "FAIL  target executable: command[0] './agent.sh' is a relative path"),
    ],
)
def test_command_harness_missing_executable(repo: Path, program: str, expected: str) -> None:
    configure(repo, f'model = "command:agent"\nharness = "command"\ncommand = ["{program}"]')
    result = doctor()
    assert result.exit_code == 6
    assert line(result, "target executable").startswith(expected)


def test_command_harness_without_command(repo: Path) -> None:
    configure(repo, 'model = "command:agent"\nharness = "command"')
    result = doctor()
    assert result.exit_code == 6
    assert 'FAIL  target backend: harness = "command" for command:agent needs command' in (
        line(result, "target backend")
    )


# -- configuration ----------------------------------------------------------------------------


def test_broken_config_is_the_one_failure(repo: Path) -> None:
    configure(repo, 'model = "openai:gpt-4o-mini"\nlearning_rte = 3')
    result = doctor()
    assert result.exit_code == 6
    assert lines(result) == [line(result, "config")]
    assert line(result, "config").startswith(
        "FAIL  config: Unknown key 'learning_rte' in [target] of skillvc.toml"
    )


def test_unknown_backend(repo: Path) -> None:
    configure(repo, 'model = "mistral:large"')
    result = doctor()
    assert result.exit_code == 6
    assert line(result, "target backend").startswith(
        "FAIL  target backend: Unknown model backend 'mistral' in 'mistral:large' "
        "([target] model on line 9 of skillvc.toml). Fix: Use one of: anthropic, openai, sim."
    )


def test_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctor()
    assert result.exit_code == 6
    assert line(result, "config") == (
        f"FAIL  config: No skillvc.toml in {tmp_path.resolve()}. "
        "Fix: Run 'skillvc init' in the repository first."
    )


# -- review regressions -------------------------------------------------------------------------


def test_password_in_a_gateway_url_is_not_printed(
    repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway URL with credentials is a secret no key variable holds, so redact() misses it."""
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    host = loopback.url.split("://", 1)[1]
    secret = "gateway-PASSWORD-9f3a"
    configure(repo, f'model = "openai:llama3"\nbase_url = "http://me:{secret}@{host}/v1"')
    result = doctor("--json")
    assert secret not in result.output
    (backend,) = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "target backend"]
    assert backend["detail"] == f"openai:llama3 via http://me:[redacted]@{host}/v1 (from base_url)."
    monkeypatch.setenv("OPENAI_BASE_URL", f"gw.example:{secret}@x/v1")
    configure(repo, 'model = "openai:llama3"')
    result = doctor()
    assert secret not in result.output and result.exit_code == 6


def test_missing_tasks_and_a_broken_skill_fail_before_training(repo: Path) -> None:
    config = repo / "skillvc.toml"
    config.write_text(
        config.read_text().replace('val = "evals/val.jsonl"', 'val = "evals/vall.jsonl"')
    )
    skill = repo / "skills/acme-returns/SKILL.md"
    skill.write_text(skill.read_text().replace("name: acme-returns", "name: Acme Returns"))
    result = doctor()
    assert result.exit_code == 6
    assert line(result, "tasks").startswith("FAIL  tasks: ")
    assert "vall.jsonl" in line(result, "tasks")
    assert line(result, "skill").startswith(
        "FAIL  skill: skills/acme-returns/SKILL.md: frontmatter name"
    )


def test_a_skill_package_is_checked_file_by_file(repo: Path) -> None:
    folder = repo / "skills" / "acme-returns"
    (folder / "references").mkdir()
    (folder / "references" / "forms.md").write_text("# Forms\n", encoding="utf-8")
    with (folder / "SKILL.md").open("a", encoding="utf-8") as fh:
        fh.write("\nSee [the forms](references/forms.md) and [rates](references/rates.md).\n")
    configure(repo, SIM)
    text = (
        (repo / "skillvc.toml")
        .read_text()
        .replace('path = "skills/acme-returns/SKILL.md"', 'path = "skills/acme-returns"')
    )
    (repo / "skillvc.toml").write_text(text, encoding="utf-8")
    result = doctor()
    assert result.exit_code == 6, result.output
    assert line(result, "skill") == (
        "FAIL  skill: skills/acme-returns/SKILL.md: the link to 'references/rates.md' names no "
        "file of the package in the working tree. Fix: Fix the link or add the file it names, "
        "then run skillvc validate."
    )
    (folder / "references" / "rates.md").write_text("# Rates\n", encoding="utf-8")
    result = doctor()
    assert result.exit_code == 0, result.output
    assert line(result, "skill") == (
        "ok    skill: skills/acme-returns is a skill package of 3 files that passes its format "
        "rules and whose links resolve."
    )
