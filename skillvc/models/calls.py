"""Model calls through the event log: the cache, the record and the retries.

Invariant: a call with the same (model, parameters, messages, sample index, and a skill package's
installed files: text by content, carried files by hash) is answered from the log, so a resumed
run pays no model call twice and re-evaluating an unchanged skill is free.
Every call that reached a model is a ``model.call`` event (prompt and response stored as blobs,
tokens, latency, cost); a call that failed after its last retry is a ``model.error`` event and
raises ``CallFailed``: it is never turned into an answer or a score.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from skillvc.core.config import ModelConfig
from skillvc.core.errors import AuthenticationFailed, BackendError, redact
from skillvc.core.hashing import canonical_json
from skillvc.core.pricing import BATCH_DISCOUNT, cost_usd
from skillvc.core.store import EventStore
from skillvc.models.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.models.backends.command import env_fingerprint
from skillvc.models.backends.local import ServerInfo
from skillvc.models.backends.retry import RateLimiter, RetryPolicy, call_with_retries
from skillvc.packages.packagefile import PackageFile
from skillvc.secrets import register_names, scrub, scrub_json
from skillvc.secrets import secret_values as known_secret_values


class CallFailed(BackendError):
    """A model call failed after its last retry (recorded as a model.error event)."""


@dataclass(frozen=True)
class Reply:
    text: str
    key: str
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RoleStats:
    """Counts of one role. ``replies``, ``tokens`` and ``cost_usd`` cover every answer used,
    fresh or from the log, so they are the same for a resumed run as for an uninterrupted one;
    ``fresh`` counts the calls that reached a model in this process."""

    replies: int = 0
    fresh: int = 0
    errors: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    # The exact sum behind ``cost_usd``. Replies are added in the order threads finish, and a
    # float sum depends on that order; an exact one does not, so the costs in commit messages,
    # events and budget checks are the same for a resumed run as for an uninterrupted one.
    cost_exact: Fraction = Fraction(0)

    def add(self, reply: Reply) -> None:
        self.replies += 1
        self.fresh += 0 if reply.cached else 1
        self.tokens += reply.prompt_tokens + reply.completion_tokens
        if reply.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_exact += Fraction(reply.cost_usd)
            self.cost_usd = float(self.cost_exact)


def model_params(config: ModelConfig) -> dict[str, Any]:
    """The parameters that change a model's answer (and so belong in the cache key)."""
    params: dict[str, Any] = {"temperature": config.temperature}
    for name in ("max_tokens", "seed", "reasoning_effort"):
        value = getattr(config, name)
        if value is not None:
            params[name] = value
    if config.api != "chat":
        # The Responses API is another route to the model, with other parameters (no seed);
        # "chat" is left out so the keys of calls made before the choice existed still hit.
        params["api"] = config.api
    if config.harness == "command":
        # A different agent command is a different model, whatever the model label says.
        params["harness"] = {
            "command": list(config.command),
            "skill_install_path": config.skill_install_path,
            "input_mode": config.input_mode,
        }
        if config.env:  # names and value hashes only: a changed key misses the cache
            params["harness"]["env"] = env_fingerprint(config)
    elif config.harness in AGENT_HARNESSES:
        # The preset and its extra arguments; the agent backend adds what only it knows (the
        # CLI's version, env and setup-file hashes) through ``cache_params``.
        params["harness"] = {
            "preset": config.harness,
            "args": list(config.args),
            "install": "preset",
        }
    return params


AGENT_HARNESSES = ("claude-code", "codex")


def package_files(files: Sequence[PackageFile]) -> tuple[PackageFile, ...]:
    """A request's files sorted by path (the order the cache key holds them in)."""
    return tuple(sorted(files, key=lambda f: f.path))


_TOOL_KEYS = ("tool_calls", "tool_call_id", "name", "is_error")  # the tool loop's (tools.spec)


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    """A message as the cache key holds it: role and content, and a tool turn's own keys."""
    out = {"role": m["role"], "content": m["content"]}
    out.update({k: m[k] for k in _TOOL_KEYS if k in m})
    return out


def secret_values(config: Any) -> list[str]:
    """The secret values a run may meet, so any message can be scrubbed of them: the key
    variables and those ``api_key_env`` names (``skillvc.secrets`` decides)."""
    register_names(
        getattr(getattr(config, r), "api_key_env", None) for r in ("target", "optimizer")
    )
    return sorted(known_secret_values())


class ModelClient:
    """Calls models for one process: cache lookup, retries, recording, per-role statistics."""

    def __init__(
        self,
        store: EventStore,
        backends: Mapping[str, Backend],
        configs: Mapping[str, ModelConfig],
        *,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        run_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        secrets: Sequence[str] = (),
        replay_failures: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.backends = dict(backends)
        self.configs = dict(configs)
        self.prices = prices or {}
        self.run_id = run_id
        self.sleep = sleep
        self.secrets = tuple(secrets)
        # Cache keys whose recorded failure a resumed run must reproduce (see Trainer).
        self.replay_failures = dict(replay_failures or {})
        # Calls a provider batch failed in this process (see ``prefetch``).
        self.batch_failures: dict[str, CallFailed] = {}
        self.stats: dict[str, RoleStats] = defaultdict(RoleStats)
        self.last_error: str | None = None
        # A role whose key was refused: the error its later calls fail with at once (the
        # backend's message and hint, the same whichever concurrent call met the refusal).
        self.refused: dict[str, AuthenticationFailed] = {}
        # Roles whose refusal the loop's own log holds (a fork's is not logged: see ``admit``).
        self._refusal_logged: set[str] = set()
        # What local servers reported, per role (skillvc.models.backends.local), as the run recorded
        # it: the optimizer's prompts are fitted to it and its answers bounded by it.
        self.servers: dict[str, ServerInfo] = {}
        # Per role, the slots of its local server: fresh calls wait for one here instead of in
        # the server's queue, where their timeouts would run (``use_servers``).
        self._slots: dict[str, threading.Semaphore] = {}
        self.forked = False  # see fork()
        self._lock = threading.Lock()
        self._limiters = {
            role: RateLimiter(c.requests_per_minute, c.tokens_per_minute)
            for role, c in self.configs.items()
        }

    def use_servers(self, servers: Mapping[str, ServerInfo], urls: Mapping[str, str]) -> None:
        """Record what local servers said (per role) and share each server's slots between
        the roles it serves (``urls``: the role's base URL)."""
        self.servers = dict(servers)
        by_url: dict[str, threading.Semaphore] = {}
        for role, info in servers.items():
            if info.slots:
                url = urls.get(role, role)
                self._slots[role] = by_url.setdefault(url, threading.Semaphore(info.slots))
        if "optimizer" in self._slots:
            self._slots["judge"] = self._slots["optimizer"]

    def request(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        sample: int = 0,
        files: Sequence[PackageFile] = (),
        params: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        library: Sequence[PackageFile] = (),
    ) -> CallRequest:
        """The request for one call; ``params`` adds to the role's (a local server's answer
        cap and ``response_format``: they change the answer, so they are in the cache key)."""
        config = self.configs[role]
        params = {**model_params(config), **(params or {})}
        extra = getattr(self.backends.get(role), "cache_params", None)
        if callable(extra):  # an agent harness: what changes its answers besides the argv
            params["agent"] = extra()
        return CallRequest(
            role=role,
            model=config.model,
            messages=tuple(_message(m) for m in messages),
            params=params,
            sample=sample,
            files=package_files(files),
            tools=tuple(tools),
            library=package_files(library),
        )

    def call(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        sample: int = 0,
        step: int | None = None,
        files: Sequence[PackageFile] = (),
        params: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        library: Sequence[PackageFile] = (),
    ) -> Reply:
        req = self.request(
            role, messages, sample=sample, files=files, params=params, tools=tools, library=library
        )
        reply = self.from_log(req)
        if reply is None:
            reply = self._call_backend(req, step)
        with self._lock:
            self.stats[role].add(reply)
        return reply

    def from_log(self, req: CallRequest) -> Reply | None:
        """The recorded answer to ``req`` (None: it needs a model call); raises ``CallFailed``
        for a failure a resumed run must replay. Counts nothing: ``call``/``record`` do."""
        found = self.store.find("model.call", req.key)
        if found is not None:
            p = found.payload
            return Reply(
                text=self.store.get_blob(p["response"]),
                key=req.key,
                cached=True,
                prompt_tokens=p.get("prompt_tokens", 0),
                completion_tokens=p.get("completion_tokens", 0),
                cost_usd=p.get("cost_usd"),
                meta=p.get("meta", {}),
            )
        if req.key in self.replay_failures:
            with self._lock:
                self.stats[req.role].errors += 1
            raise CallFailed(
                f"{req.role} call to {req.model} failed: {self.replay_failures[req.key]} (replayed)"
            )
        if req.key in self.batch_failures:
            with self._lock:
                self.stats[req.role].errors += 1
            raise self.batch_failures[req.key]
        return None

    def prefetch(
        self, role: str, prompts: Sequence[Sequence[Mapping[str, str]]], *, step: int | None = None
    ) -> None:
        """With ``mode = "batch"`` for ``role``: send these calls that the log cannot answer
        as one provider batch and record the answers, so the ``call``s that follow find them in
        the log (and a call the batch failed raises ``CallFailed``). Otherwise nothing."""
        config = self.configs.get(role)
        if config is None or config.mode != "batch":
            return
        from skillvc.models.batch import batch_executor
        from skillvc.models.executors import Call, CallFailure, run_call

        requests = list({r.key: r for r in (self.request(role, m) for m in prompts)}.values())
        fresh = [r for r in requests if not self.store.find("model.call", r.key)]
        fresh = [r for r in fresh if r.key not in self.replay_failures]
        for req in fresh:
            self.admit(req, step=step)
        executor = batch_executor(self.store, config, self.run_id)
        outcomes = executor.map(run_call, [Call(config, r) for r in fresh])
        for req, outcome in zip(fresh, outcomes, strict=True):
            if isinstance(outcome, CallFailure):
                error = self.record_failure(
                    req,
                    outcome.error,
                    kind=outcome.kind,
                    transient=outcome.transient,
                    refused=outcome.refused,
                    step=step,
                )
                if isinstance(error, AuthenticationFailed):
                    raise error
                with self._lock:
                    self.stats[role].errors -= 1  # counted when the call raises it
                self.batch_failures[req.key] = error
            else:
                self.record(req, outcome, step=step)

    def admit(self, req: CallRequest, *, step: int | None = None) -> None:
        """What precedes a fresh call wherever it runs: a refused key fails at once, and the
        rate limits are honoured here, in the one process that sees every call."""
        if req.role in self.refused:
            # The key was refused once: fail at once instead of sending it again. When a call
            # sent ahead of the loop (a fork, which logs no failure) met the refusal first, the
            # loop's first call to meet it logs it, so the run's log says why the run stopped.
            first = self.refused[req.role]
            if not self.forked:
                with self._lock:
                    unlogged = req.role not in self._refusal_logged
                    self._refusal_logged.add(req.role)
                if unlogged:
                    self._log_failure(req, str(first), "AuthenticationFailed", False, step)
            raise AuthenticationFailed(str(first), hint=first.hint)
        config = self.configs[req.role]
        # Token estimate for a tokens-per-minute limit: ~4 characters a token, plus the answer.
        estimate = sum(len(m["content"]) for m in req.messages) // 4 + (config.max_tokens or 0)
        self._limiters[req.role].acquire(estimate)

    def _call_backend(self, req: CallRequest, step: int | None) -> Reply:
        self.admit(req, step=step)
        backend = self.backends[req.role]

        def once() -> CallResult:
            return backend.complete(req)

        policy = RetryPolicy(max_retries=self.configs[req.role].max_retries)
        slot = self._slots.get(req.role)
        try:
            if slot is None:
                result = call_with_retries(once, policy, sleep=self.sleep)
            else:
                with slot:
                    result = call_with_retries(once, policy, sleep=self.sleep)
        except (BackendError, OSError) as exc:
            refused = isinstance(exc, AuthenticationFailed)
            error = self.record_failure(
                req,
                str(exc),
                kind=type(exc).__name__,
                transient=isinstance(exc, TransientError),
                refused=refused,
                step=step,
                hint=exc.hint if isinstance(exc, AuthenticationFailed) else None,
            )
            if refused:
                raise  # the backend's own error and hint
            raise error from None
        # One write for the answer (its blobs and its event): a kill rarely finds an answered
        # call not yet logged, which a resumed run would pay for again.
        with self.store.transaction():
            return self.record(req, result, step=step)

    def record_failure(
        self,
        req: CallRequest,
        error: str,
        *,
        kind: str,
        transient: bool,
        refused: bool,
        step: int | None = None,
        hint: str | None = None,
    ) -> AuthenticationFailed | CallFailed:
        """Log a call that failed after its last retry; return the error to raise:
        ``AuthenticationFailed`` for a refused key (which stops the run), else ``CallFailed``."""
        message = redact(error, self.secrets)
        # A fork's failure is not logged: the loop makes that call itself and records what it
        # meets, and a resumed run must not replay a failure the loop never saw.
        if not self.forked:
            self._log_failure(req, message, kind, transient, step)
        with self._lock:
            self.stats[req.role].errors += 1
            self.last_error = message
            if refused and not self.forked:
                self._refusal_logged.add(req.role)
        if refused:
            failure = AuthenticationFailed(message, hint=hint)
            with self._lock:
                self.refused.setdefault(req.role, failure)
            return failure
        return CallFailed(f"{req.role} call to {req.model} failed: {message}")

    def _log_failure(
        self, req: CallRequest, message: str, kind: str, transient: bool, step: int | None
    ) -> None:
        self.store.append(
            "model.error",
            {
                "role": req.role,
                "model": req.model,
                "cache_key": req.key,
                "error": message,
                "kind": kind,
                "transient": transient,
            },
            run_id=self.run_id,
            step=step,
        )

    def record(self, req: CallRequest, result: CallResult, *, step: int | None = None) -> Reply:
        """Log a fresh answer (a ``model.call`` event) and return it as a reply; the caller
        counts it (``call`` does, ``count`` for replies obtained elsewhere)."""
        cost = result.cost_usd  # an agent's own report wins over the price table
        if cost is None:
            cost = cost_usd(
                req.model,
                result.prompt_tokens,
                result.completion_tokens,
                self.prices,
                cached_tokens=result.cached_tokens,
                cache_write_tokens=result.cache_write_tokens,
            )
        if cost is None and result.meta.get("local"):
            cost = 0.0  # a model on the user's own server: no bill (a [prices] entry wins)
        if cost is not None and result.meta.get("batch"):
            cost *= BATCH_DISCOUNT  # a provider batch costs half the list price
        # Scrubbed before it is stored *and* before it is used: a resumed run reads the stored
        # text back, and must see exactly what the first run saw (and sent on to the optimizer).
        text = scrub(result.text, self.secrets)
        meta = scrub_json(dict(result.meta), self.secrets)
        for big in ("trajectory", "files_out"):  # an agent's steps, files it made: blobs
            if isinstance(meta.get(big), str):
                meta[big] = self.store.put_blob(meta[big])
        self.store.append(
            "model.call",
            {
                "role": req.role,
                "model": req.model,
                "params": dict(req.params),
                "sample": req.sample,
                "prompt": self.store.put_blob(canonical_json(self._stored(req.messages))),
                **(
                    {"tools": self.store.put_blob(canonical_json([dict(t) for t in req.tools]))}
                    if req.tools
                    else {}
                ),
                # A skill package's installed files, only when the call had some: each text file's
                # text, each carried file's hash and size (its bytes stay in the repository).
                **(
                    {
                        "files": self.store.put_blob(
                            canonical_json({f.path: f.record() for f in req.files})
                        )
                    }
                    if req.files
                    else {}
                ),
                # A library an agent routed between (its skills' SKILL.md texts), if there was one.
                **(
                    {
                        "library": self.store.put_blob(
                            canonical_json({f.path: f.record() for f in req.library})
                        )
                    }
                    if req.library
                    else {}
                ),
                "response": self.store.put_blob(text),
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "latency_ms": round(result.latency_ms, 1),
                "cost_usd": cost,
                "meta": meta,
                # Provider prompt caching, only when it happened: events (and the logs of runs
                # before it existed) stay as they were for calls without it.
                **({"cached_tokens": result.cached_tokens} if result.cached_tokens else {}),
                **(
                    {"cache_write_tokens": result.cache_write_tokens}
                    if result.cache_write_tokens
                    else {}
                ),
            },
            run_id=self.run_id,
            step=step,
            key=req.key,
        )
        return Reply(
            text=text,
            key=req.key,
            cached=False,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cost_usd=cost,
            meta=meta,
        )

    def _stored(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Messages as the prompt blob keeps them: an image's data is a blob of its own, named
        by its hash, so a run's thousands of prompts with the same image hold it once."""
        out = []
        for m in messages:
            m = dict(m)
            if isinstance(m.get("content"), list):
                m["content"] = [
                    {k: v for k, v in p.items() if k != "data"}
                    | {"data_blob": self.store.put_blob(p["data"])}
                    if p.get("type") == "image" and isinstance(p.get("data"), str)
                    else dict(p)
                    for p in m["content"]
                ]
            out.append(m)
        return out

    def close(self) -> None:
        """End what the backends started (a tool loop's MCP servers); safe to call twice."""
        for backend in {id(b): b for b in self.backends.values()}.values():
            close = getattr(backend, "close", None)
            if callable(close):
                close()

    def fork(self) -> ModelClient:
        """A client for calls sent ahead of the loop (``training/prefetch.py``): the same
        store, backends, rate limits and refused keys, with statistics of its own."""
        twin = copy.copy(self)
        twin.stats = defaultdict(RoleStats)
        twin.forked = True
        twin.last_error = None
        twin._lock = threading.Lock()
        return twin

    def count(self, role: str, reply: Reply) -> None:
        """Add a reply obtained through ``from_log``/``record`` to its role's statistics."""
        with self._lock:
            self.stats[role].add(reply)

    def warm_up(self, role: str, *, background: bool = False) -> threading.Thread | None:
        """Build ``role``'s backend and SDK client before its first call (``LazyBackend.warm``),
        now or (``background``) on a thread of its own, returned: for a caller about to wait
        on other calls, what the role's first call would spend on it is then spent while the
        machine waits. A failure is left to that first call, which meets it again and reports
        it where it belongs."""
        warm = getattr(self.backends.get(role), "warm", None)
        if warm is None:
            return None

        def quietly() -> None:
            with contextlib.suppress(Exception):
                warm()

        if not background:
            quietly()
            return None
        thread = threading.Thread(target=quietly, name=f"warm-{role}", daemon=True)
        thread.start()
        return thread

    def snapshot(self) -> dict[str, RoleStats]:
        with self._lock:
            return {role: dataclasses.replace(s) for role, s in self.stats.items()}

    def totals(self) -> RoleStats:
        total = RoleStats()
        for s in self.snapshot().values():
            total.replies += s.replies
            total.fresh += s.fresh
            total.errors += s.errors
            total.tokens += s.tokens
            total.cost_exact += s.cost_exact
            total.unpriced += s.unpriced
        total.cost_usd = float(total.cost_exact)
        return total
