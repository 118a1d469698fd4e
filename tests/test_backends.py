"""The OpenAI and Anthropic backends, driving the real SDKs over HTTP against a loopback server."""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture

from skillvc.core.config import ModelConfig
from skillvc.core.errors import AuthenticationFailed, BackendError, ConfigError
from skillvc.core.store import open_store
from skillvc.models.backends.anthropic_backend import AnthropicBackend
from skillvc.models.backends.base import Backend, CallRequest, TransientError
from skillvc.models.backends.openai_backend import OpenAIBackend
from skillvc.models.backends.retry import parse_retry_after
from skillvc.models.calls import CallFailed, ModelClient, model_params
from skillvc.models.harness import LazyBackend

KEY = "sk-test-SECRET123"
SYSTEM = "You are the support skill."
MESSAGES = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Where is order 42?"},
]


def request(config: ModelConfig, messages: list[dict[str, str]] = MESSAGES) -> CallRequest:
    return CallRequest(
        role="target",
        model=config.model,
        messages=tuple(messages),
        params=model_params(config),
    )


def openai_backend(
    server: LoopbackServer, mp: pytest.MonkeyPatch, **kw: Any
) -> tuple[OpenAIBackend, ModelConfig]:
    mp.setenv("OPENAI_API_KEY", KEY)
    kw.setdefault("model", "openai:gpt-4o-mini")
    config = ModelConfig(base_url=server.url + "/v1", **kw)
    return OpenAIBackend.from_config(config), config


def anthropic_backend(
    server: LoopbackServer, mp: pytest.MonkeyPatch, **kw: Any
) -> tuple[AnthropicBackend, ModelConfig]:
    mp.setenv("ANTHROPIC_API_KEY", KEY)
    kw.setdefault("model", "anthropic:claude-test-1")
    config = ModelConfig(base_url=server.url, **kw)
    return AnthropicBackend.from_config(config), config


MakeBackend = Callable[..., tuple[Any, ModelConfig]]
BOTH = pytest.mark.parametrize(
    "make", [openai_backend, anthropic_backend], ids=["openai", "anthropic"]
)


def test_registry_builds_these_backends() -> None:
    from skillvc.models.backends.command import CommandBackend
    from skillvc.models.harness import get_backend

    assert isinstance(get_backend(ModelConfig(model="openai:gpt-4o")), OpenAIBackend)
    assert isinstance(get_backend(ModelConfig(model="anthropic:claude-x")), AnthropicBackend)
    command = ModelConfig(model="anthropic:claude-x", harness="command", command=["agent"])
    assert isinstance(get_backend(command), CommandBackend)


# -- normal calls -----------------------------------------------------------------------------


def test_openai_call_sends_parameters_and_reads_usage(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, config = openai_backend(
        loopback, monkeypatch, temperature=0.3, max_tokens=50, seed=7, reasoning_effort="low"
    )
    loopback.answer("Order 42 shipped.", prompt_tokens=21, completion_tokens=5)
    result = backend.complete(request(config))

    assert result.text == "Order 42 shipped."
    assert (result.prompt_tokens, result.completion_tokens) == (21, 5)
    assert result.meta == {"finish_reason": "stop"}
    assert result.latency_ms > 0
    (sent,) = loopback.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json["model"] == "gpt-4o-mini"
    assert sent.json["messages"] == MESSAGES
    assert sent.json["temperature"] == 0.3
    assert sent.json["max_tokens"] == 50
    assert "max_completion_tokens" not in sent.json
    assert sent.json["seed"] == 7
    assert sent.json["reasoning_effort"] == "low"


def test_openai_reasoning_model_gets_max_completion_tokens(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, config = openai_backend(
        loopback, monkeypatch, model="openai:gpt-5-mini", max_tokens=99
    )
    backend.complete(request(config))
    (sent,) = loopback.requests
    assert sent.json["max_completion_tokens"] == 99
    assert "max_tokens" not in sent.json
    assert "temperature" not in sent.json, "reasoning models reject a non-default temperature"


def test_openai_base_url_and_key_from_environment(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    monkeypatch.setenv("MY_LLM_KEY", "sk-other-KEY456")
    config = ModelConfig(model="openai:llama3", api_key_env="MY_LLM_KEY")
    result = OpenAIBackend.from_config(config).complete(request(config))
    assert result.text == "ok"
    (sent,) = loopback.requests
    assert sent.headers["authorization"] == "Bearer sk-other-KEY456"
    assert "seed" not in sent.json and "max_tokens" not in sent.json


@pytest.fixture
def azure_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)


@pytest.mark.usefixtures("azure_key")
def test_azure_uses_deployment_path_api_version_and_api_key_header(
    loopback: LoopbackServer,
) -> None:
    config = ModelConfig(
        model="openai:gpt-4o",
        azure=True,
        azure_endpoint=loopback.url,
        api_version="2024-10-21",
        deployment="prod-4o",
    )
    result = OpenAIBackend.from_config(config).complete(request(config))
    assert result.text == "ok"
    (sent,) = loopback.requests
    assert sent.path == "/openai/deployments/prod-4o/chat/completions"
    assert sent.query == {"api-version": "2024-10-21"}
    assert sent.headers["api-key"] == KEY
    assert "authorization" not in sent.headers


@pytest.mark.usefixtures("azure_key")
def test_azure_from_environment_deployment_defaults_to_model(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", loopback.url)
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2025-01-01-preview")
    config = ModelConfig(model="openai:gpt-4o-mini", azure=True)
    OpenAIBackend.from_config(config).complete(request(config))
    (sent,) = loopback.requests
    assert sent.path == "/openai/deployments/gpt-4o-mini/chat/completions"
    assert sent.query == {"api-version": "2025-01-01-preview"}


def test_azure_endpoint_in_environment_alone_does_not_switch_to_azure(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "http://127.0.0.1:9")  # would fail if used
    backend, config = openai_backend(loopback, monkeypatch)
    backend.complete(request(config))
    assert loopback.requests[0].path == "/v1/chat/completions"


@pytest.mark.usefixtures("azure_key")
def test_azure_without_api_version_is_a_config_error() -> None:
    config = ModelConfig(model="openai:gpt-4o", azure=True, azure_endpoint="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="api_version"):
        OpenAIBackend.from_config(config).complete(request(config))


def test_anthropic_call_places_system_prompt_and_joins_text_blocks(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, config = anthropic_backend(
        loopback, monkeypatch, temperature=0.2, reasoning_effort="high"
    )
    loopback.answer("Order 42 shipped.", prompt_tokens=30, completion_tokens=4)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "Where is order 42?"},
        {"role": "assistant", "content": "Which store?"},
        {"role": "user", "content": "Acme."},
    ]
    result = backend.complete(request(config, messages))

    assert result.text == "Order 42 shipped."  # the loopback splits it over two text blocks
    assert (result.prompt_tokens, result.completion_tokens) == (30, 4)
    assert result.meta == {"finish_reason": "end_turn"}
    (sent,) = loopback.requests
    assert sent.path == "/v1/messages"
    # This SDK generation sends the key as a bearer token; older ones used x-api-key.
    assert KEY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    assert sent.json["model"] == "claude-test-1"
    assert sent.json["system"] == SYSTEM + "\n\nAnswer in English."
    assert [m["role"] for m in sent.json["messages"]] == ["user", "assistant", "user"]
    assert sent.json["max_tokens"] == 4096
    assert sent.json["temperature"] == 0.2
    assert sent.json["output_config"] == {"effort": "high"}


def test_anthropic_base_url_from_environment_and_max_tokens(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url)
    config = ModelConfig(model="anthropic:claude-test-2", max_tokens=300, seed=3)
    messages = [{"role": "user", "content": "hi"}]
    AnthropicBackend.from_config(config).complete(request(config, messages))
    (sent,) = loopback.requests
    assert sent.json["max_tokens"] == 300
    assert "system" not in sent.json and "seed" not in sent.json


@pytest.mark.parametrize(
    ("cls", "var", "model"),
    [
        (OpenAIBackend, "OPENAI_API_KEY", "openai:gpt-4o-mini"),
        (AnthropicBackend, "ANTHROPIC_API_KEY", "anthropic:claude-test-1"),
    ],
)
def test_missing_key_fails_at_first_call_not_construction(
    cls: Any, var: str, model: str, loopback: LoopbackServer
) -> None:
    # Not on this machine: a loopback OpenAI-compatible server gets a placeholder key instead.
    url = loopback.url if cls is AnthropicBackend else "http://gpu-box.invalid/v1"
    config = ModelConfig(model=model, base_url=url)
    backend = cls.from_config(config)  # constructing works: doctor can still report
    with pytest.raises(AuthenticationFailed) as info:
        backend.complete(request(config))
    assert info.value.message == f"{var} is not set."
    assert var in info.value.hint
    assert loopback.requests == []


@BOTH
def test_a_warm_up_builds_the_sdk_client_before_the_first_call_and_calls_no_model(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, config = make(loopback, monkeypatch)
    lazy = LazyBackend(config)
    with open_store(tmp_path / "events.db") as store:
        client = ModelClient(store, {"optimizer": lazy}, {"optimizer": config})
        thread = client.warm_up("optimizer", background=True)
        assert thread is not None
        thread.join(timeout=60)
        assert getattr(lazy.backend, "_client", None) is not None
        assert [r.path for r in loopback.requests if r.method == "POST"] == []
        loopback.answer("Order 42 ships today.")
        assert lazy.complete(request(config)).text == "Order 42 ships today."
        assert client.warm_up("judge") is None  # a role without a backend has nothing to warm


def test_a_warm_up_that_fails_leaves_the_error_to_the_first_call(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # Not on this machine (a loopback server would get a placeholder key and no error).
    config = ModelConfig(model="openai:gpt-4o-mini", base_url="http://gpu-box.invalid/v1")
    lazy = LazyBackend(config)
    with open_store(tmp_path / "events.db") as store:
        client = ModelClient(store, {"target": lazy}, {"target": config})
        assert client.warm_up("target") is None  # done, here: quietly
        assert lazy._backend is not None  # built; only its client failed
    with pytest.raises(AuthenticationFailed, match="OPENAI_API_KEY is not set"):
        lazy.complete(request(config))


def test_missing_custom_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # not the one configured
    config = ModelConfig(model="openai:gpt-4o", api_key_env="TEAM_OPENAI_KEY")
    with pytest.raises(AuthenticationFailed, match="TEAM_OPENAI_KEY is not set"):
        OpenAIBackend.from_config(config).complete(request(config))


# -- error mapping ----------------------------------------------------------------------------


def failure(
    make: MakeBackend, server: LoopbackServer, mp: pytest.MonkeyPatch, **kw: Any
) -> Exception:
    backend, config = make(server, mp, **kw)
    with pytest.raises(BackendError) as info:
        backend.complete(request(config))
    assert KEY not in str(info.value)
    assert config.model in str(info.value)
    return info.value


@BOTH
def test_429_is_transient_with_retry_after_seconds(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.rate_limit("7")
    err = failure(make, loopback, monkeypatch)
    assert isinstance(err, TransientError)
    assert err.retry_after == 7.0
    assert "429" in str(err)


@BOTH
def test_429_retry_after_http_date(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.rate_limit(email.utils.formatdate(time.time() + 30, usegmt=True))
    err = failure(make, loopback, monkeypatch)
    assert isinstance(err, TransientError)
    assert err.retry_after is not None and 25 <= err.retry_after <= 31


@BOTH
@pytest.mark.parametrize("status", [500, 502, 503, 529, 408, 409])
def test_server_errors_are_transient(
    make: MakeBackend, status: int, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.error(status, "upstream exploded")
    err = failure(make, loopback, monkeypatch)
    assert isinstance(err, TransientError)
    assert err.retry_after is None
    assert f"HTTP {status}" in str(err) and "upstream exploded" in str(err)


@BOTH
@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_are_not_retried(
    make: MakeBackend, status: int, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.error(status, f"bad request, key was {KEY}")
    err = failure(make, loopback, monkeypatch)
    assert not isinstance(err, (TransientError, AuthenticationFailed))
    assert f"HTTP {status}" in str(err)


@BOTH
def test_401_is_authentication_failed_and_redacted(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.unauthorized()  # its body echoes the key back
    err = failure(make, loopback, monkeypatch)
    assert isinstance(err, AuthenticationFailed)
    assert "401" in str(err) and "[redacted]" in str(err)


@BOTH
def test_403_is_authentication_failed(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.error(403, "forbidden")
    assert isinstance(failure(make, loopback, monkeypatch), AuthenticationFailed)


@BOTH
def test_slow_answer_times_out_as_transient(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loopback.slow(2.0)
    start = time.monotonic()
    err = failure(make, loopback, monkeypatch, timeout_s=0.3)
    assert time.monotonic() - start < 1.5
    assert isinstance(err, TransientError)
    assert "0.3 s" in str(err)


@BOTH
@pytest.mark.parametrize(
    ("fault", "said"),
    [("drop", "could not be reached"), ("malformed", "not valid JSON")],
    ids=["dropped-connection", "malformed-json"],
)
def test_a_dropped_connection_or_malformed_json_is_transient(
    make: MakeBackend,
    loopback: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    said: str,
) -> None:
    getattr(loopback, fault)()  # the server drops the connection, or answers broken JSON
    err = failure(make, loopback, monkeypatch)
    assert isinstance(err, TransientError)
    assert said in str(err)


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after": date}, now=lambda: now) == 12.0
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 1970 00:00:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    for bad in ("soon", "-4", "nan", "inf", ""):
        assert parse_retry_after({"retry-after": bad}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None


# -- end to end through ModelClient -----------------------------------------------------------


def client_for(made: tuple[Backend, ModelConfig], db: Path) -> tuple[ModelClient, Any, list[float]]:
    """A logged client of the backend ``make`` made, with its log at ``db``, and the waits
    between retries it would have slept (it does not sleep)."""
    backend, config = made
    waits: list[float] = []
    store = open_store(db)
    client = ModelClient(store, {"target": backend}, {"target": config}, sleep=waits.append)
    return client, store, waits


@BOTH
def test_retry_after_is_honoured_end_to_end(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client, store, waits = client_for(make(loopback, monkeypatch), tmp_path / "events.db")
    loopback.rate_limit("3")
    loopback.answer("after the wait", prompt_tokens=9, completion_tokens=3)
    with store:
        reply = client.call("target", MESSAGES)
        assert reply.text == "after the wait" and not reply.cached
        assert waits == [3.0]
        assert len(loopback.requests) == 2
        (event,) = store.events(types=["model.call"])
        assert event.payload["prompt_tokens"] == 9
        assert store.events(types=["model.error"]) == []
        again = client.call("target", MESSAGES)  # answered from the log, no HTTP request
        assert again.cached and again.text == "after the wait"
        assert len(loopback.requests) == 2


@BOTH
def test_persistent_500_fails_the_call_and_records_an_error(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client, store, waits = client_for(
        make(loopback, monkeypatch, max_retries=2), tmp_path / "events.db"
    )
    for _ in range(3):
        loopback.error(500)
    with store:
        with pytest.raises(CallFailed, match="HTTP 500"):
            client.call("target", MESSAGES)
        assert len(waits) == 2 and len(loopback.requests) == 3
        (event,) = store.events(types=["model.error"])
        assert event.payload["transient"] is True
        assert event.payload["kind"] == "TransientError"
        assert store.events(types=["model.call"]) == []


@BOTH
def test_authentication_failure_stops_without_retry(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client, store, waits = client_for(make(loopback, monkeypatch), tmp_path / "events.db")
    loopback.unauthorized()
    with store:
        with pytest.raises(AuthenticationFailed):
            client.call("target", MESSAGES)
        assert waits == [] and len(loopback.requests) == 1
        (event,) = store.events(types=["model.error"])
        assert event.payload["kind"] == "AuthenticationFailed"


@BOTH
def test_key_never_reaches_the_event_log(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "events.db"
    client, store, _ = client_for(make(loopback, monkeypatch, max_retries=1), db)
    with store:
        client.call("target", MESSAGES)
        for status in (400, 404):
            loopback.error(status, f"echo {KEY} and Bearer {KEY}")
            with pytest.raises(CallFailed):
                client.call("target", [{"role": "user", "content": f"status {status}"}])
        loopback.error(500, f"echo {KEY}")
        loopback.error(500, f"echo {KEY}")
        with pytest.raises(CallFailed):
            client.call("target", [{"role": "user", "content": "transient"}])
        loopback.unauthorized()
        with pytest.raises(AuthenticationFailed):
            client.call("target", [{"role": "user", "content": "auth"}])
        assert len(store.events(types=["model.error"])) == 4
        recorded = store.query("SELECT payload FROM events") + store.query(
            "SELECT content FROM blobs"
        )
        assert KEY not in repr(recorded)
        wal = db.with_name("events.db-wal")
        assert wal.exists(), "read the write-ahead log too, while the store is open"
        assert KEY.encode() not in db.read_bytes() + wal.read_bytes()
    assert KEY.encode() not in db.read_bytes()  # after the checkpoint on close


@BOTH
def test_many_threads_share_one_backend(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def responder(body: dict[str, Any]) -> str:
        user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        return user.upper()

    loopback.responder = responder
    client, store, _ = client_for(make(loopback, monkeypatch), tmp_path / "events.db")
    questions = [f"question {i}" for i in range(24)]
    with store, ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(
            pool.map(lambda q: client.call("target", [{"role": "user", "content": q}]), questions)
        )
        assert [r.text for r in replies] == [q.upper() for q in questions]
        assert len(loopback.requests) == 24
        assert len(store.events(types=["model.call"])) == 24


# -- review regressions -------------------------------------------------------------------------


@BOTH
def test_key_with_a_pasted_newline_is_refused_naming_the_variable(
    make: MakeBackend, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx rejects such a header and the SDK calls it a "connection error", which was retried
    as an outage and never named the variable to fix."""
    backend, config = make(loopback, monkeypatch)
    monkeypatch.setenv(backend.key_env, KEY + "\n")
    with pytest.raises(AuthenticationFailed, match=f"{backend.key_env} has leading or trailing"):
        backend.complete(request(config))
    assert loopback.requests == []


def test_backoff_for_a_huge_attempt_number_does_not_overflow() -> None:
    import random

    from skillvc.models.backends.retry import RetryPolicy

    policy = RetryPolicy(max_retries=5000, base_delay_s=1.0, max_delay_s=60.0)
    assert 0.0 <= policy.delay(2000, None, random.Random(0)) <= 60.0


def test_only_dated_snapshots_borrow_their_base_models_price() -> None:
    """ "o3-pro" costs ten times "o3": pricing it as "o3" would let a budget overrun silently."""
    from skillvc.core.pricing import DEFAULT_PRICES, price_for

    assert price_for("openai:gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["openai:gpt-4o-mini"]
    assert price_for("anthropic:claude-sonnet-4-5-20250929") == (3.00, 15.00)
    assert price_for("anthropic:claude-3-5-haiku-20241022") == (0.80, 4.00)
    for unknown in ("openai:o3-pro", "openai:gpt-5-pro", "openai:gpt-4o-audio-preview"):
        assert price_for(unknown) is None, unknown


@pytest.mark.parametrize(
    "entry", [0.5, {"input": "cheap", "output": 1}, {"input": -1, "output": 1}, {"input": True}]
)
def test_a_malformed_price_override_is_a_config_error(entry: object) -> None:
    from skillvc.core.pricing import cost_usd

    with pytest.raises(ConfigError, match=r'\[prices\."openai:x"\] needs input and output'):
        cost_usd("openai:x", 10, 10, {"openai:x": entry})  # type: ignore[dict-item]
    assert cost_usd("openai:x", 10**6, 10**6, {"openai:x": {"input": 1, "output": 2}}) == 3.0
