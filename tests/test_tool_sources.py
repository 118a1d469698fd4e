"""Tool sources and the toolbox (skillvc.models.tools): Python modules, the code tool and a
real MCP server over stdio, each bad tool and bad call met with a one-line error outcome."""

from __future__ import annotations

import json
import os
import shutil
import signal
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillvc.core.config import ToolsConfig
from skillvc.core.errors import PathOutsideRepo, ToolsError
from skillvc.models.tools.spec import ToolCall, ToolOutcome
from skillvc.models.tools.toolbox import Toolbox

FIXTURE_SERVER = Path(__file__).parent / "fixtures" / "mcp_server.py"
SECRET = "sk-live-4f8a9c2e7b1d6f3a0e5c9b8d7a6f5e4d"

TOOLS = '''
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from os.path import join  # imported: not a tool


def stock_level(sku: str, warehouse: Literal["north", "south"] = "north") -> int:
    """How many units of a SKU are in stock."""
    return {"AB123": 7}.get(sku, 0)


def search(
    query: Annotated[str, "words to look for"],
    tags: list[str],
    limit: int | None = None,
    scores: dict[str, float] | None = None,
    exact: bool = False,
    extra: Any = None,
) -> list[dict]:
    """Search the catalogue.

    Returns matching items."""
    return [{"query": query, "tags": tags, "limit": limit, "exact": exact}]


def save(name: str, text: str, workdir: Path) -> str:
    """Write a file into the working directory."""
    (workdir / name).write_text(text)
    return sorted(p.name for p in workdir.iterdir())


def where(workdir: str) -> str:
    """The working directory, as text."""
    return workdir


def explode(message: str) -> str:
    """Raises."""
    raise ValueError(message)


def leave() -> str:
    """Exits."""
    raise SystemExit(2)


def hang(seconds: float) -> str:
    """Sleeps."""
    time.sleep(seconds)
    return "woke"


def weird() -> object:
    """Returns what JSON cannot hold."""
    return {"when": {1, 2}}


def huge(chars: int) -> str:
    """A long text."""
    return "x" * chars


def many(n: int) -> list[int]:
    """A long list."""
    return list(range(n))


def nothing() -> None:
    """Returns None."""


async def later(x: int) -> int:
    """An async tool."""
    return x + 1


def undocumented(x: int) -> int:
    return x


def _private(x: int) -> int:
    """Not a tool: private."""
    return x
'''


def write(root: Path, rel: str, text: str) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return rel


def call(
    box: Toolbox, name: str, arguments: object = None, workdir: Path | None = None
) -> ToolOutcome:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    outcome = box.call(ToolCall("c1", name, text), workdir or Path.cwd())
    if outcome.is_error:
        assert "\n" not in outcome.content, outcome.content  # a reason is one line
    return outcome


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    return repo


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return scratch


@pytest.fixture
def box(root: Path) -> Iterator[Toolbox]:
    write(root, "tools/inventory.py", TOOLS)
    config = ToolsConfig(python=["tools/inventory.py"], timeout_s=1.0, max_result_chars=200)
    with Toolbox.open(config, root) as toolbox:
        yield toolbox


# -- Python modules -------------------------------------------------------------------------


def test_python_tools_take_name_description_and_schema_from_the_function(box: Toolbox) -> None:
    specs = {s.name: s for s in box.specs}
    assert "undocumented" not in specs and "_private" not in specs and "join" not in specs
    assert specs["stock_level"].description == "How many units of a SKU are in stock."
    assert specs["stock_level"].parameters == {
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "warehouse": {"type": "string", "enum": ["north", "south"], "default": "north"},
        },
        "required": ["sku"],
        "additionalProperties": False,
    }
    search = specs["search"]
    assert search.description == "Search the catalogue.\n\nReturns matching items."
    assert search.parameters["required"] == ["query", "tags"]
    assert search.parameters["properties"] == {
        "query": {"type": "string", "description": "words to look for"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "scores": {
            "anyOf": [
                {"type": "object", "additionalProperties": {"type": "number"}},
                {"type": "null"},
            ],
            "default": None,
        },
        "exact": {"type": "boolean", "default": False},
        "extra": {"default": None},
    }
    # workdir is the toolbox's to fill, never the model's
    assert specs["save"].parameters["properties"].keys() == {"name", "text"}
    assert specs["where"].parameters["properties"] == {}


def test_python_tools_run_with_the_rollouts_scratch_directory(box: Toolbox, workdir: Path) -> None:
    assert call(box, "stock_level", {"sku": "AB123"}) == ToolOutcome("7")
    saved = call(box, "save", {"name": "a.txt", "text": "hi"}, workdir)
    assert saved == ToolOutcome('["a.txt"]')  # a list comes back as canonical JSON
    assert (workdir / "a.txt").read_text() == "hi"
    assert call(box, "where", {}, workdir).content == str(workdir)
    assert call(box, "nothing").content == "null"
    assert call(box, "later", {"x": 1}).content == "2"
    assert call(box, "stock_level", '{"sku": "AB123", "warehouse": "south"}').content == "7"
    assert call(box, "search", {"query": "q", "tags": [], "limit": 3.0}).content == (
        '[{"exact":false,"limit":3.0,"query":"q","tags":[]}]'
    )


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("restock", {}, "there is no tool named 'restock'; the tools are: explode, hang, huge,"),
        ("stock_level", "{sku: AB123}", "the arguments are not JSON: JSONDecodeError: Expecting"),
        ("stock_level", "[1, 2]", "the arguments must be a JSON object, not an array"),
        ("stock_level", {}, "the arguments do not fit stock_level's schema: sku is missing"),
        ("stock_level", {"sku": 5}, "sku must be a string, not integer 5"),
        ("stock_level", {"sku": "A", "warehouse": "east"}, 'warehouse must be one of "north"'),
        ("stock_level", {"sku": "A", "color": "red"}, "color is not an argument of this tool"),
        ("search", {"query": "q", "tags": ["a", 1]}, "tags[1] must be a string, not integer 1"),
        ("search", {"query": "q", "tags": [], "limit": "3"}, "limit fits none of its types"),
        ("search", {"query": "q", "tags": [], "exact": 1}, "exact must be a boolean, not integer"),
        ("many", {"n": True}, "n must be an integer, not boolean true"),
        ("explode", {"message": "bad sku\n  (line two)"}, "ValueError: bad sku (line two)"),
        ("leave", {}, "RuntimeError: the tool raised SystemExit(2)"),
        ("weird", {}, "the tool returned a set, which is not JSON; a tool returns str, int,"),
    ],
)
def test_a_bad_call_or_a_bad_tool_is_a_one_line_error_outcome(
    box: Toolbox, name: str, arguments: object, reason: str
) -> None:
    outcome = call(box, name, arguments)
    assert outcome.is_error
    assert reason in outcome.content


def test_a_hanging_python_tool_is_abandoned_at_the_timeout(box: Toolbox) -> None:
    start = time.monotonic()
    outcome = call(box, "hang", {"seconds": 30})
    assert time.monotonic() - start < 5
    assert outcome == ToolOutcome(
        "hang timed out: no answer within 1 s (the call was abandoned)", is_error=True
    )
    assert call(box, "hang", {"seconds": 0}) == ToolOutcome("woke")  # the toolbox goes on


def test_a_huge_result_is_cut_with_a_marker(box: Toolbox) -> None:
    text = call(box, "huge", {"chars": 50_000_000}).content
    assert text == "x" * 200 + "\n[49999800 more characters cut]"
    listed = call(box, "many", {"n": 100_000}).content
    assert listed.startswith("[0,1,2,3,") and len(listed) < 300
    full = len(json.dumps(list(range(100_000)), separators=(",", ":")))
    assert listed.endswith(f"\n[{full - 200} more characters cut]")


def test_no_secret_reaches_an_outcome(
    root: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_API_KEY", SECRET)
    write(
        root,
        "tools/leaky.py",
        """
        import os

        def leak() -> str:
            '''Returns a credential.'''
            return "key: " + os.environ["ACME_API_KEY"]

        def fail() -> str:
            '''Raises with a credential.'''
            raise PermissionError("rejected " + os.environ["ACME_API_KEY"])
        """,
    )
    with Toolbox.open(ToolsConfig(python=["tools/leaky.py"]), root) as box:
        for name in ("leak", "fail"):
            outcome = call(box, name, {}, workdir)
            assert SECRET not in outcome.content
            assert "[redacted]" in outcome.content


def test_sixteen_rollouts_call_at_once(box: Toolbox, tmp_path: Path) -> None:
    outcomes: dict[int, ToolOutcome] = {}

    def rollout(i: int) -> None:
        scratch = tmp_path / f"r{i}"
        scratch.mkdir()
        outcomes[i] = call(box, "save", {"name": f"{i}.txt", "text": str(i)}, scratch)

    threads = [threading.Thread(target=rollout, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == {i: ToolOutcome(json.dumps([f"{i}.txt"])) for i in range(16)}


def test_identity_holds_the_specs_fingerprints_and_limits(root: Path) -> None:
    write(root, "tools/inventory.py", TOOLS)
    config = ToolsConfig(python=["tools/inventory.py"], code=True, timeout_s=5)
    with Toolbox.open(config, root) as box:
        first = box.identity()
    assert first["timeout_s"] == 5 and first["max_result_chars"] == 8000
    assert [t["name"] for t in first["tools"]][-1] == "python"
    assert first["sources"][0]["path"] == "tools/inventory.py"
    write(root, "tools/inventory.py", TOOLS + "\n# a comment changes the file's hash\n")
    with Toolbox.open(config, root) as box:
        second = box.identity()
    assert second["tools"] == first["tools"] and second["sources"] != first["sources"]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "[tools] python names tools/t.py, which does not exist."),
        ({"tools/t.py": "def f(:\n"}, "tools/t.py cannot be imported: SyntaxError: "),
        (
            {"tools/t.py": "import no_such_module_here\n"},
            "tools/t.py cannot be imported: ModuleNotFoundError: No module named "
            "'no_such_module_here'.",
        ),
        ({"tools/t.py": "def _f() -> int:\n    '''x'''\n"}, "tools/t.py defines no tools."),
        (
            {"tools/t.py": "def f(x):\n    '''Doc.'''\n"},
            "tools/t.py: f's parameter x has no type hint.",
        ),
        (
            {"tools/t.py": "def f(*xs: int) -> int:\n    '''Doc.'''\n"},
            "tools/t.py: f's parameter xs is variadic positional; a tool takes named arguments",
        ),
        (
            {"tools/t.py": "import re\ndef f(p: re.Pattern) -> int:\n    '''Doc.'''\n"},
            "tools/t.py: f's parameter p is annotated Pattern, which has no JSON Schema",
        ),
        (
            {"tools/t.py": "def python(code: str) -> str:\n    '''Doc.'''\n"},
            "The tool name 'python' is offered twice: by tools/t.py and by the code tool",
        ),
        (
            {
                "tools/t.py": "def f(x: int) -> int:\n    '''Doc.'''\n",
                "tools/u.py": "def f(y: str) -> str:\n    '''Doc.'''\n",
            },
            "The tool name 'f' is offered twice: by tools/t.py and by tools/u.py.",
        ),
    ],
)
def test_startup_problems_are_one_clear_error(
    root: Path, files: dict[str, str], message: str
) -> None:
    for rel, text in files.items():
        write(root, rel, text)
    modules = sorted(files) or ["tools/t.py"]
    with pytest.raises(ToolsError) as info:
        Toolbox.open(ToolsConfig(python=modules, code=True), root)
    assert message in info.value.message
    assert "\n" not in info.value.message


def test_a_module_outside_the_repository_is_refused(root: Path) -> None:
    write(root.parent, "elsewhere.py", "def f(x: int) -> int:\n    '''Doc.'''\n")
    with pytest.raises(PathOutsideRepo, match="leads out of the repository"):
        Toolbox.open(ToolsConfig(python=["../elsewhere.py"]), root)


# -- the code tool --------------------------------------------------------------------------


@pytest.fixture
def code_box(root: Path) -> Iterator[Toolbox]:
    with Toolbox.open(ToolsConfig(code=True, timeout_s=2.0, max_result_chars=1000), root) as box:
        yield box


def test_the_code_tool_runs_in_the_scratch_directory(code_box: Toolbox, workdir: Path) -> None:
    program = "open('out.txt', 'w').write('made'); import os; print(os.getcwd())"
    assert call(code_box, "python", {"code": program}, workdir) == ToolOutcome(
        f"exit code: 0\nstdout:\n{workdir}\n"
    )
    assert (workdir / "out.txt").read_text() == "made"
    failed = call(code_box, "python", {"code": "print(open('out.txt').read()); 1/0"}, workdir)
    assert not failed.is_error  # a failing program is a result the model reads
    assert failed.content.startswith("exit code: 1\nstdout:\nmade\n\nstderr:\nTraceback")
    assert "ZeroDivisionError: division by zero" in failed.content


def test_the_code_tool_has_no_credentials(
    code_box: Toolbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    program = "import os; print(sorted(os.environ)); print(os.environ['HOME'])"
    outcome = call(code_box, "python", {"code": program}, workdir)
    assert "OPENAI_API_KEY" not in outcome.content and "GITHUB_TOKEN" not in outcome.content
    assert "'PATH'" in outcome.content and outcome.content.endswith(f"{workdir}\n")


def test_the_code_tool_stops_at_its_time_limit(code_box: Toolbox, workdir: Path) -> None:
    program = "import subprocess, sys, time\nprint('started')\ntime.sleep(60)"
    start = time.monotonic()
    outcome = call(code_box, "python", {"code": program}, workdir)
    assert time.monotonic() - start < 10
    assert outcome == ToolOutcome(
        "python timed out: the code ran past the 2 s limit and was stopped", is_error=True
    )


def test_the_code_tool_caps_its_output(code_box: Toolbox, workdir: Path) -> None:
    outcome = call(code_box, "python", {"code": "print('y' * 5_000_000)"}, workdir)
    assert outcome.content == "exit code: 0\nstdout:\n" + "y" * 440 + (
        "\n[4999561 more bytes of stdout cut]"  # 5,000,001 with the newline, less 440 kept
    )


# -- MCP servers over stdio (the official SDK, a real server process) -----------------------


@pytest.fixture(scope="module")
def mcp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mcp")
    repo = tmp_path_factory.mktemp("mcp_repo")
    (repo / "tools").mkdir()
    shutil.copy(FIXTURE_SERVER, repo / "tools" / "server.py")
    return repo


@pytest.fixture(scope="module")
def server(mcp_root: Path) -> Iterator[Toolbox]:
    """One server for the module's read-only tests (starting one costs a second or two)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACME_API_KEY", SECRET)
        box = Toolbox.open(ToolsConfig(mcp=[["python", "tools/server.py"]]), mcp_root)
    with box:
        yield box


def test_mcp_tools_are_listed_and_called(server: Toolbox, workdir: Path) -> None:
    specs = {s.name: s for s in server.specs}
    assert {"stock_level", "fail", "die", "pid", "slow", "env"} <= specs.keys()
    assert specs["stock_level"].description == "How many units of a SKU are in stock."
    assert specs["stock_level"].parameters["required"] == ["sku"]
    assert call(server, "stock_level", {"sku": "AB123"}, workdir) == ToolOutcome("7")
    failed = call(server, "stock_level", {"sku": "QQ1"}, workdir)
    assert failed.is_error and "unknown sku 'QQ1'" in failed.content
    assert call(server, "fail", {"reason": "out of paper"}, workdir).content.endswith(
        "out of paper"
    )
    assert "sku is missing" in call(server, "stock_level", {}, workdir).content
    # started without the user's credentials (it was set when the server started)
    assert call(server, "env", {"name": "ACME_API_KEY"}, workdir) == ToolOutcome("unset")
    fingerprint = server.identity()["sources"][0]
    assert fingerprint["argv"] == ["python", "tools/server.py"]
    assert fingerprint["server"]["name"] == "fixture"
    assert len(fingerprint["files"]["tools/server.py"]) == 64


def test_a_name_offered_by_a_server_and_a_module_is_refused(
    server: Toolbox, mcp_root: Path
) -> None:
    write(mcp_root, "tools/inv.py", "def stock_level(sku: str) -> int:\n    '''Doc.'''\n")
    from skillvc.models.tools.python_tools import PythonModuleSource

    module = PythonModuleSource("tools/inv.py", mcp_root)
    mcp_source = server._sources[0]
    with pytest.raises(ToolsError) as info:
        Toolbox([mcp_source, ("tools/inv.py", module)])
    assert info.value.message == (
        "The tool name 'stock_level' is offered twice: by the MCP server ['python', "
        "'tools/server.py'] and by tools/inv.py."
    )


@pytest.mark.parametrize(
    ("mode", "message", "stderr"),
    [
        ("exit", "did not start: Connection closed.", "refusing to start (mode=exit)"),
        ("mute", "did not finish starting within 1.5 s.", "listening to nobody"),
    ],
)
def test_a_server_that_will_not_start_is_an_error_before_any_call(
    mcp_root: Path, mode: str, message: str, stderr: str
) -> None:
    start = time.monotonic()
    config = ToolsConfig(mcp=[["python", "tools/server.py", mode]], python=[])
    with pytest.raises(ToolsError) as info:
        Toolbox.open(config, mcp_root, startup_timeout_s=1.5)
    assert time.monotonic() - start < 15
    assert info.value.message.startswith(
        "The MCP server ['python', 'tools/server.py', '" + mode + "'] "
    )
    assert message in info.value.message
    assert f"Its stderr ends: fixture server: {stderr}" in info.value.message


def test_a_server_that_dies_fails_the_call_is_restarted_once_and_never_hangs(
    mcp_root: Path, workdir: Path
) -> None:
    config = ToolsConfig(mcp=[["python", "tools/server.py"]], timeout_s=0.5)
    start = time.monotonic()
    with Toolbox.open(config, mcp_root) as box:
        slow = call(box, "slow", {"seconds": 1.0}, workdir)
        assert slow == ToolOutcome(
            "slow timed out: the MCP server gave no answer within 0.5 s", is_error=True
        )
        box.timeout_s = 5
        died = call(box, "die", {}, workdir)  # the process exits in the middle of the call
        assert died.is_error and died.content.startswith(
            "ConnectionError: the MCP server exited during the call"
        )
        pid = int(call(box, "pid", {}, workdir).content)  # a new process answers
        os.kill(pid, signal.SIGKILL)  # killed from outside, between calls
        killed = call(box, "stock_level", {"sku": "AB123"}, workdir)
        assert killed.is_error and "exited during the call" in killed.content
        after = call(box, "stock_level", {"sku": "AB123"}, workdir)
        assert after.is_error and after.content.startswith(
            "ConnectionError: the MCP server ['python', 'tools/server.py'] exited again after "
            "its one restart."
        )
    assert time.monotonic() - start < 30


def test_mcp_without_the_package_is_an_error_naming_the_extra(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "mcp", None)  # import mcp -> ImportError
    with pytest.raises(ToolsError) as info:
        Toolbox.open(ToolsConfig(mcp=[["python", "server.py"]]), root)
    assert "the mcp package is not installed" in info.value.message
    assert info.value.hint == "pip install 'skillvc[mcp]'"
