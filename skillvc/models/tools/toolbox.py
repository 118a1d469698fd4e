"""The toolbox: every tool of a run's ``[tools]`` sources, called safely.

``Toolbox.open`` starts each source (Python modules, MCP servers, the code tool) once and lists
their tools; startup problems (a missing or broken module, a module with no tools, a server
that will not start, one name offered twice, a name providers refuse) are one ``ToolsError``
before any model call, and the servers already started are stopped again.

Invariants of ``call``, which up to ``[train] workers`` rollout threads run at once:

- it never raises for a tool's or a model's misbehaviour: an unknown tool, arguments that are
  not a JSON object or do not fit the tool's schema (required keys, JSON types, enums, nested
  arrays and objects: checked here, without the ``jsonschema`` package), a tool that raises
  (``"ValueError: <message>"``), overstays ``timeout_s`` (each source enforces it: a Python
  tool's thread is abandoned, the code tool's process group is killed, an MCP request is
  cancelled) or returns what is not JSON all come back as a ``ToolOutcome`` with ``is_error``
  and a one-line reason;
- a result is text: a ``str`` as it is, any other JSON value as canonical JSON (sorted keys);
  a value JSON cannot hold (a set, a datetime, an object) is an error outcome naming its type,
  not a ``repr``, whose memory addresses would change the next model call's cache key;
- a result longer than ``max_result_chars`` is cut there, with a marker saying how much was
  cut; JSON values are encoded piece by piece and stop being kept at the limit;
- no outcome carries a secret: error texts go through ``skillvc.secrets.scrub`` and results
  through ``scrub_values`` (the values of credentials in the environment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from skillvc.core.config import ToolsConfig
from skillvc.core.errors import ToolsError
from skillvc.models.tools.code_tool import CodeSource
from skillvc.models.tools.mcp_tools import STARTUP_TIMEOUT_S, McpServerSource, McpToolError
from skillvc.models.tools.python_tools import PythonModuleSource
from skillvc.models.tools.spec import ToolCall, ToolOutcome, ToolSource, ToolSpec
from skillvc.secrets import scrub, scrub_values

# What OpenAI and Anthropic both accept as a tool name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_REASON_CHARS = 1000  # an error's one line is cut here (before max_result_chars)
_JSON_KINDS = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def _kind(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "null", "array", "object"):
        if _is(value, name):
            return name
    return type(value).__name__


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False  # JSON's true is not a number, though Python's True is an int
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_KINDS.get(kind, object))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def check_arguments(schema: Mapping[str, Any], value: Any, where: str = "") -> str | None:
    """The first way ``value`` does not fit ``schema`` (a JSON Schema), or None when it fits.

    Checks ``type``, ``enum``/``const``, ``anyOf``/``oneOf``, and for objects ``required``,
    ``properties`` and ``additionalProperties: false`` (or a schema), for arrays ``items``;
    other keywords (``minimum``, ``pattern``, ``format``...) are left to the tool.
    """
    label = where or "the arguments"
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        problems = [check_arguments(o, value, where) for o in options if isinstance(o, Mapping)]
        if problems and all(problems):
            return problems[0] if len(problems) == 1 else f"{label} fits none of its types"
    kinds = schema.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if isinstance(kinds, list) and kinds and not any(_is(value, k) for k in kinds):
        wanted = " or ".join(str(k) for k in kinds)
        return f"{label} must be {_article(wanted)}, not {_kind(value)} {_short(value)}"
    if "const" in schema and value != schema["const"]:
        return f"{label} must be {_short(schema['const'])}"
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return f"{label} must be one of {', '.join(_short(e) for e in enum)}"
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                return f"{where + '.' if where else ''}{key} is missing"
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            inner = f"{where}.{key}" if where else str(key)
            if key in properties and isinstance(properties[key], Mapping):
                problem = check_arguments(properties[key], item, inner)
            elif extra is False:
                known = ", ".join(properties) or "none"
                problem = f"{inner} is not an argument of this tool (it takes: {known})"
            elif isinstance(extra, Mapping):
                problem = check_arguments(extra, item, inner)
            else:
                problem = None
            if problem:
                return problem
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problem = check_arguments(schema["items"], item, f"{where or 'the list'}[{i}]")
            if problem:
                return problem
    return None


def _article(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def one_line(exc: BaseException) -> str:
    """``"ValueError: <message>"`` on one line, cut to a readable length."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[{len(text) - limit} more characters cut]"


def render(value: Any, limit: int) -> str:
    """A tool's result as the text the model reads, at most ``limit`` characters plus the
    cut marker; TypeError/ValueError when it is not JSON. A big value is encoded piece by
    piece and only its first ``limit`` characters are kept."""
    if isinstance(value, str):
        return cut(value, limit)
    encoder = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    kept: list[str] = []
    size = dropped = 0
    for chunk in encoder.iterencode(value):
        if size < limit:
            room = limit - size
            kept.append(chunk[:room])
            dropped += max(0, len(chunk) - room)
        else:
            dropped += len(chunk)
        size += len(chunk)
    text = "".join(kept)
    return f"{text}\n[{dropped} more characters cut]" if dropped else text


def _not_json(exc: Exception) -> str:
    # json's message names the type: "Object of type set is not JSON serializable"
    match = re.search(r"Object of type (\w+)", str(exc))
    what = f"a {match.group(1)}" if match else "a value"
    if "Out of range float" in str(exc):
        what = "NaN or infinity"
    return (
        f"the tool returned {what}, which is not JSON; a tool returns str, int, float, bool, "
        "None, or lists and dicts of them"
    )


class Toolbox:
    """The tools of one run, from its ``[tools]`` sources (see the module docstring)."""

    def __init__(
        self,
        sources: Sequence[tuple[str, ToolSource]],
        *,
        timeout_s: float = 30.0,
        max_result_chars: int = 8000,
    ) -> None:
        """``sources``: (a label for messages, a started source) pairs, in order."""
        self.timeout_s = timeout_s
        self.max_result_chars = max_result_chars
        self._sources = list(sources)
        self._by_name: dict[str, tuple[ToolSpec, ToolSource]] = {}
        where: dict[str, str] = {}
        for label, source in self._sources:
            for spec in source.specs():
                if spec.name in where:
                    raise ToolsError(
                        f"The tool name {spec.name!r} is offered twice: by {where[spec.name]} "
                        f"and by {label}.",
                        hint="Rename one of them (a Python tool's name is its function's name).",
                    )
                if not _NAME.match(spec.name):
                    raise ToolsError(
                        f"{label} offers a tool named {spec.name!r}; providers accept only "
                        "letters, digits, _ and -, at most 64 of them."
                    )
                where[spec.name] = label
                self._by_name[spec.name] = (spec, source)
        self.specs: tuple[ToolSpec, ...] = tuple(spec for spec, _ in self._by_name.values())

    @classmethod
    def open(
        cls,
        config: ToolsConfig,
        root: Path,
        *,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> Toolbox:
        """Start every source of ``config`` (paths relative to the repository ``root``)."""
        sources: list[tuple[str, ToolSource]] = []
        try:
            for path in config.python:
                sources.append((path, PythonModuleSource(path, root)))
            for argv in config.mcp:
                kwargs = (
                    {} if startup_timeout_s is None else {"startup_timeout_s": startup_timeout_s}
                )
                sources.append(
                    (f"the MCP server {list(argv)!r}", McpServerSource(argv, root, **kwargs))
                )
            if config.code:
                sources.append(
                    ("the code tool ([tools] code)", CodeSource(config.max_result_chars))
                )
            return cls(
                sources, timeout_s=config.timeout_s, max_result_chars=config.max_result_chars
            )
        except BaseException:
            for _, source in sources:
                source.close()
            raise

    def identity(self) -> dict[str, Any]:
        """What, besides the conversation, decides the tools' answers: the cache key's part."""
        return {
            "tools": [spec.as_dict() for spec in self.specs],
            "sources": [dict(source.fingerprint()) for _, source in self._sources],
            "timeout_s": self.timeout_s,
            "max_result_chars": self.max_result_chars,
        }

    def call(self, call: ToolCall, workdir: Path) -> ToolOutcome:
        """Run one call in ``workdir``; every failure is an error outcome, never a raise."""
        try:
            return self._call(call, workdir)
        except Exception as exc:  # a bug of the toolbox itself still fails only this call
            return self._error(f"the toolbox failed: {one_line(exc)}")

    def _error(self, reason: str) -> ToolOutcome:
        return ToolOutcome(cut(scrub(reason), self.max_result_chars), is_error=True)

    def _call(self, call: ToolCall, workdir: Path) -> ToolOutcome:
        found = self._by_name.get(call.name)
        if found is None:
            names = ", ".join(sorted(self._by_name)) or "none"
            return self._error(f"there is no tool named {call.name!r}; the tools are: {names}")
        spec, source = found
        text = call.arguments if isinstance(call.arguments, str) else ""
        try:
            arguments = json.loads(text) if text.strip() else {}  # "" for no arguments
        except ValueError as exc:
            return self._error(f"the arguments are not JSON: {one_line(exc)}")
        if not isinstance(arguments, dict):
            return self._error(
                f"the arguments must be a JSON object, not {_article(_kind(arguments))}"
            )
        problem = check_arguments(spec.parameters, arguments)
        if problem:
            return self._error(f"the arguments do not fit {call.name}'s schema: {problem}")
        try:
            result = source.call(call.name, arguments, workdir=workdir, timeout_s=self.timeout_s)
        except TimeoutError as exc:
            return self._error(f"{call.name} timed out: {exc}")
        except McpToolError as exc:
            return self._error(" ".join(str(exc).split()))
        except Exception as exc:
            return self._error(one_line(exc))
        try:
            content = render(result, self.max_result_chars)
        except (TypeError, ValueError) as exc:
            return self._error(_not_json(exc))
        finally:
            del result  # a 50 MB result is not kept past its cut
        return ToolOutcome(scrub_values(content))

    def close(self) -> None:
        """Stop what the sources started (MCP servers); safe to call twice."""
        sources, self._sources = self._sources, []
        for _, source in sources:
            source.close()

    def __enter__(self) -> Toolbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
