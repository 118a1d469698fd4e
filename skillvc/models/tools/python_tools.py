"""Tools from a Python module in the repository: each public, typed, documented function.

``[tools] python = ["tools/inventory.py"]`` imports the file (a path inside the work tree,
refused outside it; or an installed module's dotted name, such as the tool modules skillvc
ships in ``skillvc.tasks.skillopt.tools``) under a module name of its own, so two files both
called ``tools.py`` do not replace each other in ``sys.modules``. A function is a tool when it
is defined in that module, its name has no leading underscore and it has a docstring: its
name is the tool's name, its docstring the description, and the JSON Schema of its arguments
comes from its signature (``str``, ``int``, ``float``, ``bool``, ``list[...]``, ``dict[str, ...]``,
``X | None``, ``Literal[...]``, ``Any``, ``Annotated[X, "what it means"]``; a parameter with
a default is optional). Functions without a docstring are helpers, not tools.

A parameter named ``workdir`` (annotated ``Path`` or ``str``) is not offered to the model:
the toolbox passes the rollout's scratch directory there. Rollouts run in threads, so a tool
must never rely on the process's working directory, and its module is called by up to
``[train] workers`` rollouts at once (keep module-level state read-only or lock it).

Invariant: ``call`` returns within ``timeout_s`` plus scheduling noise. A Python function
cannot be killed from outside, so each call runs in a daemon thread that is abandoned when
it overstays (it keeps running until it returns or the process ends); after
``MAX_ABANDONED`` calls of one module still hang, its tools refuse new calls instead of
piling up threads. The fingerprint is the file's SHA-256 (the modules it imports are not
hashed: change the file, or a tool's description, to make the log's cache miss).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillvc.core.errors import ToolsError
from skillvc.core.hashing import sha256_hex
from skillvc.core.paths import inside_repo
from skillvc.models.tools.spec import ToolSpec

WORKDIR = "workdir"  # the parameter the toolbox fills with the rollout's scratch directory
MAX_ABANDONED = 32  # hung calls of one module tolerated before its tools refuse new calls

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def module_file(name: str) -> Path | None:
    """The source file of an installed module named ``name`` (dotted, e.g. the tools skillvc
    ships: ``skillvc.tasks.skillopt.tools.officeqa``); None when ``name`` is no such module
    name, and so a path in the repository ("tools.py" is a path)."""
    if not _MODULE_NAME.match(name) or name.endswith(".py"):
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


class _Unsupported(Exception):
    """An annotation with no JSON Schema counterpart."""


def schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of a parameter annotation; ``_Unsupported`` for any other type."""
    if annotation is Any:
        return {}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if annotation is type(None):
        return {"type": "null"}
    if annotation in (list, tuple, typing.List, typing.Tuple):  # noqa: UP006 (bare forms)
        return {"type": "array"}
    if annotation in (dict, typing.Dict):  # noqa: UP006
        return {"type": "object"}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        schema = schema_of(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": " ".join(notes)} if notes else schema
    if origin is typing.Literal:
        kinds = {_JSON_TYPES.get(type(a)) for a in args}
        if None in kinds:
            raise _Unsupported(f"Literal{list(args)!r}")
        schema = {"enum": list(args)}
        return {"type": kinds.pop(), **schema} if len(kinds) == 1 else schema
    if origin in (typing.Union, types.UnionType):
        options = [schema_of(a) for a in args if a is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return {"anyOf": options}
    if origin in (list, Sequence):
        return {"type": "array", "items": schema_of(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0])}
        return {"type": "array"}
    if origin in (dict, Mapping):
        if args and args[0] is not str:
            raise _Unsupported(f"dict keyed by {getattr(args[0], '__name__', args[0])}")
        return (
            {"type": "object", "additionalProperties": schema_of(args[1])}
            if args
            else {"type": "object"}
        )
    raise _Unsupported(getattr(annotation, "__name__", None) or repr(annotation))


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def function_spec(fn: Callable[..., Any], where: str) -> tuple[ToolSpec, str | None]:
    """The tool a documented function makes, and how it takes ``workdir`` (``"path"``,
    ``"str"`` or None); ToolsError naming the function when its signature has no schema."""
    name = fn.__name__
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a name in an annotation that does not resolve
        raise ToolsError(
            f"{where}: the type hints of {name} cannot be read ({type(exc).__name__}: {exc})."
        ) from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    workdir: str | None = None
    for param in inspect.signature(fn).parameters.values():
        label = f"{where}: {name}'s parameter {param.name}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolsError(
                f"{label} is {param.kind.description}; a tool takes named arguments only."
            )
        if param.name not in hints:
            raise ToolsError(
                f"{label} has no type hint.",
                hint="Annotate every parameter of a tool, or name the function with a leading "
                "underscore to keep it out of the tools.",
            )
        annotation = hints[param.name]
        if param.name == WORKDIR:
            if annotation not in (Path, str):
                raise ToolsError(f"{label} must be annotated Path or str (the scratch directory).")
            workdir = "path" if annotation is Path else "str"
            continue
        try:
            schema = schema_of(annotation)
        except _Unsupported as exc:
            raise ToolsError(
                f"{label} is annotated {exc}, which has no JSON Schema; use str, int, float, "
                "bool, list, dict, Literal or an Optional of them."
            ) from None
        if param.default is param.empty:
            required.append(param.name)
        elif _jsonable(param.default):
            schema = {**schema, "default": param.default}
        properties[param.name] = schema
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        parameters["required"] = required
    return ToolSpec(name, inspect.getdoc(fn) or "", parameters), workdir


def _module_name(path: str, digest: str) -> str:
    stem = re.sub(r"\W", "_", Path(path).stem) or "tools"
    return f"_skillvc_tools_{stem}_{digest[:12]}"


class PythonModuleSource:
    """The tools of one Python file in the repository (see the module docstring)."""

    def __init__(self, path: str, root: Path) -> None:
        self.path = path
        file = module_file(path) or inside_repo(root, path, "[tools] python in skillvc.toml")
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            raise ToolsError(f"[tools] python names {path}, which does not exist.") from None
        except OSError as exc:
            raise ToolsError(f"[tools] python names {path}, which cannot be read: {exc}.") from None
        self._sha256 = sha256_hex(data)
        self._module = self._load(file, data)
        self._functions: dict[str, Callable[..., Any]] = {}
        self._workdir: dict[str, str | None] = {}
        specs = []
        for name, fn in vars(self._module).items():
            if (
                name.startswith("_")
                or not inspect.isfunction(fn)
                or fn.__module__ != self._module.__name__
                or not inspect.getdoc(fn)
            ):
                continue
            spec, workdir = function_spec(fn, path)
            specs.append(spec)
            self._functions[name] = fn
            self._workdir[name] = workdir
        if not specs:
            raise ToolsError(
                f"{path} defines no tools.",
                hint="A tool is a public function with type hints and a docstring, defined in "
                "the file itself.",
            )
        self._specs = tuple(specs)
        self._lock = threading.Lock()
        self._hanging: list[threading.Thread] = []

    def _load(self, file: Path, data: bytes) -> types.ModuleType:
        name = _module_name(self.path, self._sha256)
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise ToolsError(f"{self.path} cannot be imported as a Python module.")
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs: dataclasses and pickling look their module up by name.
        sys.modules[name] = module
        try:
            code = compile(data, str(file), "exec")
            exec(code, module.__dict__)
        except SyntaxError as exc:
            sys.modules.pop(name, None)
            raise ToolsError(
                f"{self.path} cannot be imported: SyntaxError: {exc.msg} (line {exc.lineno})."
            ) from None
        except (Exception, SystemExit) as exc:
            sys.modules.pop(name, None)
            message = " ".join(str(exc).split())
            raise ToolsError(
                f"{self.path} cannot be imported: {type(exc).__name__}: {message}."
            ) from None
        return module

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def fingerprint(self) -> Mapping[str, Any]:
        return {"source": "python", "path": self.path, "sha256": self._sha256}

    def call(
        self, name: str, arguments: Mapping[str, Any], *, workdir: Path, timeout_s: float
    ) -> Any:
        fn = self._functions[name]
        kwargs = dict(arguments)
        if self._workdir[name] == "path":
            kwargs[WORKDIR] = workdir
        elif self._workdir[name] == "str":
            kwargs[WORKDIR] = str(workdir)
        with self._lock:
            self._hanging = [t for t in self._hanging if t.is_alive()]
            if len(self._hanging) >= MAX_ABANDONED:
                raise RuntimeError(
                    f"{len(self._hanging)} earlier calls of {self.path}'s tools still run past "
                    "their time limit; no new call is started"
                )
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                result = fn(**kwargs)
                if inspect.iscoroutine(result):
                    result = asyncio.run(result)
                box["result"] = result
            except BaseException as exc:  # SystemExit too: it would end this thread silently
                box["error"] = exc

        thread = threading.Thread(target=run, name=f"skillvc-tool-{name}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        if thread.is_alive():
            with self._lock:
                self._hanging.append(thread)
            raise TimeoutError(f"no answer within {timeout_s:g} s (the call was abandoned)")
        error = box.get("error")
        if error is None:
            return box["result"]
        if isinstance(error, Exception):
            raise error
        # SystemExit or KeyboardInterrupt from inside the tool must not end the caller's thread.
        raise RuntimeError(f"the tool raised {type(error).__name__}({error})")

    def close(self) -> None:
        sys.modules.pop(self._module.__name__, None)
