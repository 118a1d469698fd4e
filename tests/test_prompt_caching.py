"""Provider prompt caching: the skill marked cacheable for Anthropic, cached input tokens read
from both providers' usage, priced at the cached rate and reported as a hit ratio per run.

The real anthropic and openai SDKs talk to the loopback server, which records each request body
and answers with the usage fields in each provider's documented shape.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import loopback as lb
import pytest
from click.testing import CliRunner
from test_train_real_backends import KEY, SETUPS, Setup, make_repo

from skillvc.cli import cli
from skillvc.cli.runlines import summary_lines as _summary_lines
from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.core.pricing import cache_prices_for
from skillvc.core.store import EventStore, open_store
from skillvc.models.backends.anthropic_backend import AnthropicBackend
from skillvc.models.backends.base import Backend
from skillvc.models.backends.openai_backend import OpenAIBackend
from skillvc.models.calls import ModelClient
from skillvc.training.loop import RunSummary

CACHED = {"type": "text", "cache_control": {"type": "ephemeral"}}
# Round prices, so the expected costs below are exact by hand.
PRICES = {
    "anthropic:claude-test-1": {
        "input": 1.0,
        "output": 2.0,
        "cached_input": 0.1,
        "cache_write": 1.25,
    }
}


def client(
    tmp_path: Path,
    server: lb.LoopbackServer,
    mp: pytest.MonkeyPatch,
    model: str,
    prices: dict[str, dict[str, float]] | None = None,
) -> tuple[ModelClient, EventStore]:
    config: ModelConfig
    backend: Backend
    if model.startswith("anthropic:"):
        mp.setenv("ANTHROPIC_API_KEY", KEY)
        config = ModelConfig(model=model, base_url=server.url)
        backend = AnthropicBackend.from_config(config)
    else:
        mp.setenv("OPENAI_API_KEY", KEY)
        config = ModelConfig(model=model, base_url=server.url + "/v1")
        backend = OpenAIBackend.from_config(config)
    store = open_store(tmp_path / "events.db")
    return ModelClient(store, {"target": backend}, {"target": config}, prices=prices), store


def ask(c: ModelClient, skill: str, question: str = "Where is order 42?") -> Any:
    return c.call(
        "target", [{"role": "system", "content": skill}, {"role": "user", "content": question}]
    )


# The SDK warns about retired model names; these tests only need their families' minimums.
@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("model", "chars", "marked"),
    [
        ("anthropic:claude-sonnet-4-5", 4 * 1024, True),  # 1024 tokens: the minimum
        ("anthropic:claude-sonnet-4-5", 4 * 1024 - 1, False),
        ("anthropic:claude-sonnet-4-5-20250929", 4 * 1024, True),
        ("anthropic:claude-haiku-4-5", 4 * 4096, True),  # Haiku 4.5 needs 4096 tokens
        ("anthropic:claude-haiku-4-5", 4 * 2048, False),
        ("anthropic:claude-3-5-haiku-latest", 4 * 2048, True),
        ("anthropic:claude-3-5-haiku-latest", 4 * 1024, False),
    ],
)
def test_a_skill_long_enough_is_sent_as_a_cacheable_system_block(
    model: str,
    chars: int,
    marked: bool,
    loopback: lb.LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    skill = ("Refund within 30 days. " * 1000)[:chars]
    c, store = client(tmp_path, loopback, monkeypatch, model)
    first = ask(c, skill)
    again = ask(c, skill)  # the same call: answered from the log, whatever the body was

    (sent,) = loopback.requests
    expected: Any = [{**CACHED, "text": skill}] if marked else skill
    assert sent.json["system"] == expected
    assert sent.json["messages"] == [{"role": "user", "content": "Where is order 42?"}]
    assert again.cached and again.key == first.key
    store.close()


def test_anthropic_cache_reads_and_writes_are_recorded_and_priced_at_their_rates(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c, store = client(tmp_path, loopback, monkeypatch, "anthropic:claude-test-1", PRICES)
    # Anthropic's input_tokens count only the uncached input: 100 here, plus 1000 read/written.
    loopback.enqueue(
        lb.Behaviour(text="a", prompt_tokens=100, completion_tokens=7, cache_write_tokens=1000),
        lb.Behaviour(text="b", prompt_tokens=100, completion_tokens=7, cached_tokens=1000),
    )
    ask(c, "skill", "first")
    ask(c, "skill", "second")

    write, read = (e.payload for e in store.events(types=["model.call"]))
    assert (write["prompt_tokens"], write["cache_write_tokens"]) == (1100, 1000)
    assert "cached_tokens" not in write
    assert (read["prompt_tokens"], read["cached_tokens"]) == (1100, 1000)
    assert "cache_write_tokens" not in read
    # 100 uncached at $1 + 1000 written at $1.25 + 7 out at $2; then 1000 read at $0.10.
    assert write["cost_usd"] == pytest.approx((100 + 1250 + 14) / 1e6, rel=1e-12)
    assert read["cost_usd"] == pytest.approx((100 + 100 + 14) / 1e6, rel=1e-12)
    store.close()


def test_openai_cached_tokens_are_read_and_priced_at_the_built_in_cached_rate(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    c, store = client(tmp_path, loopback, monkeypatch, "openai:gpt-4o-mini")
    # OpenAI's prompt_tokens include the cached ones.
    loopback.enqueue(
        lb.Behaviour(text="a", prompt_tokens=2000, completion_tokens=10, cached_tokens=1024),
        lb.Behaviour(text="b", prompt_tokens=2000, completion_tokens=10),
    )
    ask(c, "skill", "first")
    ask(c, "skill", "second")

    hit, miss = (e.payload for e in store.events(types=["model.call"]))
    assert (hit["prompt_tokens"], hit["cached_tokens"]) == (2000, 1024)
    assert "cached_tokens" not in miss  # an event without caching looks as it always did
    # gpt-4o-mini: $0.15 input, $0.075 cached input, $0.60 output per 1M tokens.
    assert hit["cost_usd"] == pytest.approx((976 * 0.15 + 1024 * 0.075 + 10 * 0.6) / 1e6)
    assert miss["cost_usd"] == pytest.approx((2000 * 0.15 + 10 * 0.6) / 1e6)
    store.close()


def test_a_price_without_a_cached_rate_prices_cached_tokens_as_input(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prices = {"openai:corp": {"input": 1.0, "output": 2.0}}
    c, store = client(tmp_path, loopback, monkeypatch, "openai:corp", prices)
    loopback.enqueue(
        lb.Behaviour(text="a", prompt_tokens=2000, completion_tokens=10, cached_tokens=1500)
    )
    ask(c, "skill")
    (call,) = (e.payload for e in store.events(types=["model.call"]))
    assert call["cached_tokens"] == 1500
    assert call["cost_usd"] == pytest.approx((2000 + 20) / 1e6, rel=1e-12)
    store.close()


def test_runs_report_and_the_train_summary_give_the_cache_hit_ratio_of_the_log(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    simulate = lb.simulator_responder()

    def respond(body: dict[str, Any]) -> str | lb.Behaviour:
        text = simulate(body)
        if lb.is_optimizer_prompt(lb.chat_messages(body)):
            return lb.Behaviour(text=text, prompt_tokens=300)  # its prompt changes every step
        return lb.Behaviour(text=text, prompt_tokens=40, cached_tokens=120)  # the skill, cached

    loopback.responder = respond
    prices_toml = (
        '[prices."anthropic:claude-test-1"]\n'
        "input = 1.0\noutput = 2.0\ncached_input = 0.1\ncache_write = 1.25\n"
    )
    setup = Setup(**{**SETUPS["anthropic"].__dict__, "prices_toml": prices_toml})
    repo = make_repo(tmp_path, loopback, monkeypatch, setup)

    trained = CliRunner().invoke(cli, ["train", "--json"])
    assert trained.exit_code == 0, trained.output
    summary = json.loads(trained.stdout)

    with open_store(repo / ".skillvc/events.db") as store:
        calls = [e.payload for e in store.events(types=["model.call"])]
    targets = [c for c in calls if c["role"] == "target"]
    assert targets and all((c["prompt_tokens"], c["cached_tokens"]) == (160, 120) for c in targets)
    cached = sum(c.get("cached_tokens", 0) for c in calls)
    ratio = cached / sum(c["prompt_tokens"] for c in calls)
    assert 0 < ratio < 120 / 160
    # Target calls: 40 uncached at $1, 120 cached at $0.10, 7 out at $2 (= $0.000066 each).
    assert [c["cost_usd"] for c in targets] == [pytest.approx(66e-6, rel=1e-12)] * len(targets)

    (row,) = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    assert (row["cached_tokens"], row["cache_hit_ratio"]) == (cached, ratio)
    assert (summary["cached_tokens"], summary["cache_hit_ratio"]) == (cached, ratio)
    report = json.loads(CliRunner().invoke(cli, ["report", "--json"]).stdout)
    assert (report["usage"]["cached_tokens"], report["usage"]["cache_hit_ratio"]) == (cached, ratio)
    line = f"input tokens read from the providers' cache (cache hit ratio {ratio:.1%})"
    markdown = CliRunner().invoke(cli, ["report"]).stdout
    assert f"\nPrompt cache: {cached:,} {line}.\n" in markdown
    # The text summary `train` prints, from the same summary.
    assert f"prompt cache: {cached:,} {line}" in _summary_lines(
        RunSummary(**{("run_id" if k == "run" else k): v for k, v in summary.items()})
    )


def test_a_bad_cached_rate_in_prices_fails_with_a_sentence() -> None:
    with pytest.raises(ConfigError) as caught:
        cache_prices_for(
            "openai:corp", {"openai:corp": {"input": 1, "output": 2, "cached_input": -1}}
        )
    assert str(caught.value) == (
        '[prices."openai:corp"] needs input and output (and cached_input, cache_write if given) '
        "as non-negative numbers (USD per 1M tokens)."
    )
    # Built in: Anthropic reads at 0.1x and writes at 1.25x input, dated snapshots included.
    assert cache_prices_for("anthropic:claude-sonnet-4-5-20250929") == (0.30, 3.75)
    assert cache_prices_for("openai:gpt-4.1-mini") == (0.10, 0.40)
    assert cache_prices_for("openai:unknown-model") is None


def test_a_reflection_prompts_shared_part_is_a_cache_point_of_its_own(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from skillvc.models import prompts

    def reflection(skill: str, case: str) -> list[dict[str, str]]:
        return prompts.render(
            "reflect", n_cases="1", kind="failures", kind_note="n", budget="2", skill=skill,
            cases=[{"id": case, "input": "q", "output": "a", "expected": "x", "score": 0.0}],
            rejected=[], meta="(none yet)",
        )  # fmt: skip

    c, store = client(tmp_path, loopback, monkeypatch, "anthropic:claude-opus-4-1")
    long_skill = "Refund within 30 days. " * 300  # over 1,024 tokens before the cases
    for case in ("t1", "t2"):
        c.call("target", reflection(long_skill, case))
    c.call("target", reflection("Be brief.", "t3"))

    first, second, short = (r.json["messages"] for r in loopback.requests)
    user = reflection(long_skill, "t1")[1]["content"]
    (message,) = first
    head, tail = message["content"]
    assert head == {**CACHED, "text": user[: user.index("<cases>")]}
    assert tail == {"type": "text", "text": user[user.index("<cases>") :]}
    assert second[0]["content"][0] == head  # the step's next minibatch: the same cached prefix
    assert isinstance(short[0]["content"], str)  # too short to cache: sent as before
    store.close()
