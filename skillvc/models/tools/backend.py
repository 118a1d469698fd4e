"""The chat target that acts: a provider's backend run through the tool loop.

``ToolLoopBackend`` wraps the role's own backend (OpenAI, Anthropic, a local server, the
simulator). For each rollout it makes a scratch directory, copies the item's ``files`` into it,
runs ``skillvc.models.tools.loop.run_loop`` with the ``[tools]`` toolbox (and the ``[tasks]
environment``, if any), and answers with the final reply, the summed usage and the trajectory.

Invariants:
- the toolbox and the environment class are opened when the backend is built, before any model
  call, so a tool source that cannot start is one clear ``ToolsError`` and no run is made;
- a rollout is one logged call: its cache key holds the request, the toolbox's identity (tool
  specs and source fingerprints), ``max_turns``, the environment's file hash and the item's
  files' hashes, so a resumed run replays a recorded rollout from the log whole and never runs
  its model turns or its tools again (one that was in flight at a kill runs again from its
  first turn: nothing of it was recorded);
- one turn's transient failure is retried here (the turns before it are not redone); a failure
  after the last retry fails the rollout as an error, never as a score;
- the scratch directory is removed when the rollout ends; files the rollout created or changed
  there come back in ``meta["files_out"]`` (capped) for scorers that check them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillvc.core.config import ModelConfig, ToolsConfig
from skillvc.core.errors import BackendError, ToolsError
from skillvc.core.hashing import canonical_json
from skillvc.core.paths import inside_repo
from skillvc.models.agents.trajectory import Step, Trajectory
from skillvc.models.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.models.backends.retry import RetryPolicy, call_with_retries
from skillvc.models.tools.environment import Environment, EnvironmentFailed
from skillvc.models.tools.loop import run_loop
from skillvc.models.tools.spec import ToolSpec

ITEM = "item"  # request.params key: the task item an environment is reset with
ITEM_FILES = "item_files"  # request.params key: [{"path", "sha256"}] to copy into the scratch dir
FILES_OUT_BYTES = 1_000_000  # per file that comes back to the scorer
FILES_OUT_TOTAL = 4_000_000  # all of a rollout's


class ToolLoopBackend:
    """``[target]`` with ``[tools]`` or ``[tasks] environment``: the loop over ``inner``."""

    def __init__(self, inner: Backend, config: ModelConfig, root: Path | None = None) -> None:
        self.inner = inner
        self.config = config
        self.model = config.model
        self.root = root if root is not None else Path.cwd()
        self.settings: ToolsConfig = config.tools or ToolsConfig()
        self.toolbox: Any = None
        if config.tools is not None and config.tools.enabled:
            from skillvc.models.tools.toolbox import Toolbox

            self.toolbox = Toolbox.open(config.tools, self.root)
        self.environment = (
            Environment(config.environment, self.root) if config.environment else None
        )
        self.retry = RetryPolicy(max_retries=config.max_retries)

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return tuple(self.toolbox.specs) if self.toolbox is not None else ()

    def cache_params(self) -> dict[str, Any]:
        """What changes a rollout's answer besides the request (``ModelClient.request``)."""
        params: dict[str, Any] = {"max_turns": self.settings.max_turns}
        if self.toolbox is not None:
            params["tools"] = self.toolbox.identity()
        if self.environment is not None:
            params["environment"] = self.environment.fingerprint()
        return params

    def warm(self) -> None:
        warm = getattr(self.inner, "warm", None)
        if warm is not None:
            warm()

    def close(self) -> None:
        if self.toolbox is not None:
            self.toolbox.close()

    def complete(self, request: CallRequest) -> CallResult:
        started = time.perf_counter()
        params = dict(request.params)
        item = params.pop(ITEM, None)
        files = params.pop(ITEM_FILES, None) or []
        params.pop("agent", None)  # ours (cache_params): not a model parameter
        inner_request = dataclasses.replace(request, params=params)
        with tempfile.TemporaryDirectory(prefix="skillvc-rollout-") as tmp:
            workdir = Path(tmp)
            copied = self._copy_in(files, workdir)
            episode = None
            if self.environment is not None:
                try:
                    episode, first = self.environment.start(item or {})
                except EnvironmentFailed as exc:
                    return self._failed(f"the environment failed: {exc}", started)
                messages = [m for m in inner_request.messages if m["role"] == "system"]
                inner_request = dataclasses.replace(
                    inner_request, messages=(*messages, {"role": "user", "content": first})
                )
            result = run_loop(
                self._turn,
                inner_request,
                tools=self.specs,
                caller=self.toolbox,
                workdir=workdir,
                max_turns=self.settings.max_turns,
                episode=episode,
            )
            files_out = _files_out(workdir, copied)
        last = result.results[-1].meta if result.results else {}
        meta: dict[str, Any] = {
            "trajectory": result.trajectory.to_json(),
            "turns": result.turns,
            "tool_calls": result.tool_calls,
            "finish_reason": last.get("finish_reason"),
        }
        for key in ("local", "server", "simulated"):
            if key in last:
                meta[key] = last[key]
        if result.failure:
            meta["failure"] = result.failure
        if episode is not None:
            meta["reward"] = result.reward
            meta["done"] = result.done
        if files_out:
            meta["files_out"] = canonical_json(files_out)
        costs = [r.cost_usd for r in result.results]
        return CallResult(
            text=result.answer,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            meta=meta,
            cost_usd=None if None in costs or not costs else sum(c or 0.0 for c in costs),
            cached_tokens=sum(r.cached_tokens for r in result.results),
            cache_write_tokens=sum(r.cache_write_tokens for r in result.results),
        )

    def _turn(self, request: CallRequest) -> CallResult:
        """One model turn, retried on its own: a retry never redoes the turns before it."""
        try:
            return call_with_retries(lambda: self.inner.complete(request), self.retry)
        except TransientError as exc:  # the last retry: the outer client must not retry all
            raise BackendError(f"{exc.message} (a turn of a tool-using rollout)") from None

    def _copy_in(self, files: Sequence[Mapping[str, Any]], workdir: Path) -> dict[str, str]:
        copied: dict[str, str] = {}
        for entry in files:
            rel = str(entry.get("path", ""))
            source = inside_repo(self.root, rel, "an item's files")
            if not source.is_file():
                raise ToolsError(f"An item names the file {rel}, which does not exist.")
            dest = workdir / source.name
            shutil.copyfile(source, dest)
            copied[source.name] = _digest(dest)
        return copied

    def _failed(self, reason: str, started: float) -> CallResult:
        trajectory = Trajectory("tools", steps=(Step("error", reason),), error=reason)
        return CallResult(
            text="",
            latency_ms=(time.perf_counter() - started) * 1000,
            meta={
                "trajectory": trajectory.to_json(),
                "turns": 0,
                "tool_calls": 0,
                "failure": reason,
                "reward": None,
                "done": False,
            },
        )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files_out(workdir: Path, copied: Mapping[str, str]) -> dict[str, Any]:
    """Files the rollout created or changed in its scratch directory, for the scorer: each
    as text when it is UTF-8, else base64; past the caps, only its size and hash."""
    out: dict[str, Any] = {}
    total = 0
    for path in sorted(p for p in workdir.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(workdir).as_posix()
        if "__pycache__" in rel.split("/"):  # bytecode of the code the rollout ran
            continue
        size = path.stat().st_size
        data = path.read_bytes() if size <= FILES_OUT_BYTES else b""
        digest = hashlib.sha256(data).hexdigest() if data else _digest(path)
        if copied.get(rel) == digest:
            continue  # an input left as it was
        entry: dict[str, Any] = {"size": size, "sha256": digest}
        if data and total + size <= FILES_OUT_TOTAL:
            total += size
            try:
                entry["text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                entry["base64"] = base64.b64encode(data).decode("ascii")
        out[rel] = entry
    return out
