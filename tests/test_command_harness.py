"""The command harness, driven with small Python scripts standing in for agent CLIs."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.core.store import open_store
from skillvc.models.backends.base import CallRequest, TransientError
from skillvc.models.backends.command import AgentFailed, CommandBackend, skill_name
from skillvc.models.calls import CallFailed, ModelClient

AGENTS = Path(__file__).parent / "fixtures" / "agents"
SKILL = "---\nname: support\ndescription: Help.\n---\n# Support\n\nBe polite.\n"


def agent(script: str, *args: str, **kw: Any) -> CommandBackend:
    argv = [sys.executable, str(AGENTS / script), *args]
    return CommandBackend.from_config(
        ModelConfig(model="command:agent", harness="command", command=argv, **kw)
    )


def request(user: str, skill: str = SKILL) -> CallRequest:
    messages = ({"role": "system", "content": skill}, {"role": "user", "content": user})
    return CallRequest(role="target", model="command:agent", messages=messages)


def test_stdin_mode_installs_skill_and_passes_task(tmp_path: Path) -> None:
    backend = agent("echo_agent.py", "{skill_path}", "{skill_dir}", "{workdir}")
    result = backend.complete(request("Where is order 42?"))
    report = json.loads(result.text)

    skill_path, skill_dir, workdir = report["argv"]
    assert report["stdin"] == "Where is order 42?"
    assert report["files"] == {".claude/skills/support/SKILL.md": SKILL}
    assert os.path.realpath(report["cwd"]) == os.path.realpath(workdir)
    assert skill_path == os.path.join(workdir, ".claude", "skills", "support", "SKILL.md")
    assert skill_dir == os.path.dirname(skill_path)
    assert not Path(workdir).exists(), "the scratch directory is removed afterwards"
    assert result.prompt_tokens == result.completion_tokens == 0
    assert result.meta["exit_code"] == 0
    assert "echo agent done" in result.meta["stderr_tail"]
    assert result.meta["duration_s"] > 0


def test_arg_mode_and_no_shell_interpolation(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    task = f"a; rm -rf {tmp_path} && echo $(touch {marker}) `touch {marker}` $HOME {{workdir}} 'q\""
    backend = agent("echo_agent.py", "--task={input}", input_mode="arg")
    report = json.loads(backend.complete(request(task)).text)

    assert report["argv"] == [f"--task={task}"], "text arrives literally, placeholders once"
    assert report["stdin"] == ""
    assert not marker.exists()
    assert tmp_path.exists()


def test_shell_metacharacters_on_stdin_arrive_literally(tmp_path: Path) -> None:
    task = "x; rm -rf / $(whoami) `id` | cat > /tmp/nope\nline two ünïcode"
    report = json.loads(agent("echo_agent.py").complete(request(task)).text)
    assert report["stdin"] == task


def test_custom_install_path_and_fallback_name() -> None:
    backend = agent("echo_agent.py", skill_install_path="skills/{name}.md")
    report = json.loads(backend.complete(request("hi", skill="# No frontmatter\n")).text)
    assert report["files"] == {"skills/skill.md": "# No frontmatter\n"}


def test_empty_skill_installs_nothing() -> None:
    report = json.loads(agent("echo_agent.py").complete(request("hi", skill="")).text)
    assert report["files"] == {}


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (SKILL, "support"),
        ("---\nname: ../../evil\n---\nx", "skill"),
        ("---\nname: [1, 2]\n---\nx", "skill"),
        ("---\nname: : broken yaml\n---\n", "skill"),
        ("no frontmatter", "skill"),
    ],
)
def test_skill_name(text: str, name: str) -> None:
    assert skill_name(text) == name


def test_crash_is_a_backend_error_with_exit_code() -> None:
    with pytest.raises(AgentFailed) as info:
        agent("crash_agent.py").complete(request("hi"))
    err = info.value
    assert not isinstance(err, TransientError)
    assert err.returncode == 3
    assert "exited with code 3" in err.message
    assert "tool 'search' is missing" in err.message
    assert "loading tools" in err.stderr_tail


def test_hang_times_out_quickly_and_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    backend = agent("hang_agent.py", str(pid_file), task_timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(AgentFailed) as info:
        backend.complete(request("hi"))
    assert time.monotonic() - start < 10
    assert info.value.timed_out and not isinstance(info.value, TransientError)
    assert "timed out after 1 s" in info.value.message
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the agent's child process was killed too"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a dead parent may linger as a zombie until init reaps it.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_missing_program_is_a_backend_error(tmp_path: Path) -> None:
    backend = CommandBackend.from_config(
        ModelConfig(model="command:x", harness="command", command=[str(tmp_path / "nope")])
    )
    with pytest.raises(AgentFailed, match="could not be started"):
        backend.complete(request("hi"))


@pytest.mark.parametrize(
    "kw",
    [
        {"command": []},
        {"command": ["agent", "{input}"]},  # stdin mode must not also pass {input}
        {"command": ["agent"], "input_mode": "arg"},  # arg mode needs {input}
        {"command": ["agent"], "input_mode": "file"},
        {"command": ["agent"], "skill_install_path": "/etc/skills/{name}.md"},
        {"command": ["agent"], "skill_install_path": "../{name}/SKILL.md"},
    ],
)
def test_bad_config_is_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        CommandBackend.from_config(ModelConfig(model="command:x", harness="command", **kw))


def test_crash_through_model_client_is_recorded(tmp_path: Path) -> None:
    config = ModelConfig(
        model="command:agent",
        harness="command",
        command=[sys.executable, str(AGENTS / "crash_agent.py")],
    )
    waits: list[float] = []
    with open_store(tmp_path / "events.db") as store:
        client = ModelClient(
            store,
            {"target": CommandBackend.from_config(config)},
            {"target": config},
            sleep=waits.append,
        )
        with pytest.raises(CallFailed, match="exited with code 3"):
            client.call("target", [{"role": "user", "content": "hi"}])
        (event,) = store.events(types=["model.error"])
        assert event.payload["kind"] == "AgentFailed"
        assert event.payload["transient"] is False
        assert waits == [], "a crashed agent is not retried"
        assert store.events(types=["model.call"]) == []


# -- review regressions -------------------------------------------------------------------------


def test_task_text_with_a_nul_byte_in_arg_mode_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """Popen refuses an argument holding NUL with ValueError; that item cannot run, which must
    be an error event for that item, not an exception that ends the whole run."""
    config = ModelConfig(
        model="command:agent",
        harness="command",
        command=[sys.executable, str(AGENTS / "echo_agent.py"), "{input}"],
        input_mode="arg",
    )
    backend = CommandBackend.from_config(config)
    with pytest.raises(AgentFailed, match="could not be started"):
        backend.complete(request("a\x00b"))
    with open_store(tmp_path / "events.db") as store:
        client = ModelClient(store, {"target": backend}, {"target": config}, sleep=lambda s: None)
        with pytest.raises(CallFailed):
            client.call("target", [{"role": "user", "content": "a\x00b"}])
        assert [e.payload["kind"] for e in store.events(types=["model.error"])] == ["AgentFailed"]


def test_children_left_running_after_a_normal_exit_are_killed(tmp_path: Path) -> None:
    """An agent that starts a background helper (a daemon, a language server) and exits 0 must
    not leave it running after the task and its scratch directory are gone."""
    pid_file = tmp_path / "daemon.pid"
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('done')\n"
    )
    backend = CommandBackend.from_config(
        ModelConfig(model="command:agent", harness="command", command=[sys.executable, "-c", code])
    )
    assert backend.complete(request("hi")).text == "done"
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(daemon):
        os.kill(daemon, 9)
        pytest.fail("the agent's background child outlived the task")
