"""Tools and images on the wire: each backend's native tool-calling format, driven through the
real ``openai`` and ``anthropic`` SDKs against the loopback server.

What is checked: the exact request body (tools, assistant tool calls, tool results, image
parts) of Chat Completions (OpenAI and Azure), the Responses API and Anthropic Messages; the
answer's calls in ``meta["tool_calls"]``; and that a request without tools goes out as before.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from loopback import (  # noqa: F401 - the fixture
    Behaviour,
    LoopbackServer,
    chat_messages,
    loopback,
    neutral_messages,
)

from skillvc.core.config import ModelConfig, parse_config, parse_config_dict
from skillvc.core.errors import ConfigError
from skillvc.models.backends.anthropic_backend import AnthropicBackend
from skillvc.models.backends.base import CallRequest
from skillvc.models.backends.openai_backend import OpenAIBackend
from skillvc.models.calls import model_params
from skillvc.models.tools.spec import ToolSpec

KEY = "sk-test-SECRET123"
SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "store": {"type": "string"}},
    "required": ["sku"],
}
STOCK = ToolSpec("stock_level", "Units of a SKU in stock.", SCHEMA).as_dict()
PRICE = ToolSpec("price", "The price of a SKU.").as_dict()
PNG = "iVBORw0KGgoAAAANSUhEUg=="  # base64, as an item's attached image is sent

# A whole tool conversation in the neutral form of skillvc.models.tools.spec: a question with
# an image, a turn with text and two calls, their results (one an error), a turn of one call
# alone and its result.
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Call stock_level before answering."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "How many of the item in the photo are left?"},
            {"type": "image", "media_type": "image/png", "data": PNG},
        ],
    },
    {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "call_1", "name": "stock_level", "arguments": '{"sku": "AB123"}'},
            {"id": "call_2", "name": "price", "arguments": "{}"},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "stock_level", "content": "7"},
    {
        "role": "tool",
        "tool_call_id": "call_2",
        "name": "price",
        "content": "price: unknown tool",
        "is_error": True,
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_3",
                "name": "stock_level",
                "arguments": '{"sku": "AB123", "store": "north"}',
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_3", "name": "stock_level", "content": "2"},
]
CALLS = [
    {"id": "call_9", "name": "stock_level", "arguments": '{"store": "south", "sku": "ZZ9"}'},
    {"id": "call_10", "name": "price", "arguments": "{}"},
]
PLAIN = [
    {"role": "system", "content": "You are the support skill."},
    {"role": "user", "content": "Where is order 42?"},
]


def call(
    config: ModelConfig,
    messages: list[dict[str, Any]],
    tools: tuple[dict[str, Any], ...] = (STOCK, PRICE),
) -> CallRequest:
    return CallRequest(
        role="target",
        model=config.model,
        messages=tuple(messages),
        params=model_params(config),
        tools=tools,
    )


def openai(server: LoopbackServer, mp: pytest.MonkeyPatch, **kw: Any) -> OpenAIBackend:
    mp.setenv("OPENAI_API_KEY", KEY)
    kw.setdefault("model", "openai:gpt-4o-mini")
    return OpenAIBackend.from_config(ModelConfig(base_url=server.url + "/v1", **kw))


def anthropic(server: LoopbackServer, mp: pytest.MonkeyPatch, **kw: Any) -> AnthropicBackend:
    mp.setenv("ANTHROPIC_API_KEY", KEY)
    kw.setdefault("model", "anthropic:claude-test-1")
    return AnthropicBackend.from_config(ModelConfig(base_url=server.url, **kw))


def without_is_error(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as an OpenAI format can carry it: no error flag on tool results."""
    return [m | {"is_error": False} if m["role"] == "tool" else m for m in messages]


def neutral(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with a tool result's optional ``is_error`` spelled out."""
    return [{"is_error": False} | m if m["role"] == "tool" else m for m in messages]


# -- OpenAI Chat Completions ------------------------------------------------------------------


def test_chat_completions_sends_tools_tool_turns_and_image_parts(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch)
    loopback.answer("There are 2 left.")
    result = backend.complete(call(backend.config, CONVERSATION))

    assert result.text == "There are 2 left."
    assert result.meta == {"finish_reason": "stop", "tool_calls": []}
    (sent,) = loopback.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.json["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "stock_level",
                "description": "Units of a SKU in stock.",
                "parameters": SCHEMA,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "price",
                "description": "The price of a SKU.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    assert sent.json["messages"] == [
        {"role": "system", "content": "Call stock_level before answering."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "How many of the item in the photo are left?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "stock_level", "arguments": '{"sku": "AB123"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "price", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "7"},
        {"role": "tool", "tool_call_id": "call_2", "content": "price: unknown tool"},
        {
            "role": "assistant",
            "content": None,  # a turn of calls alone: null, as the API wants
            "tool_calls": [
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {
                        "name": "stock_level",
                        "arguments": '{"sku": "AB123", "store": "north"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "2"},
    ]
    # Nothing lost but the error flag, which the format has no place for.
    assert neutral_messages(sent.json) == without_is_error(neutral(CONVERSATION))


def test_chat_completions_reads_several_tool_calls_of_one_turn(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch)
    loopback.enqueue(Behaviour(tool_calls=CALLS, prompt_tokens=40, completion_tokens=12))
    result = backend.complete(call(backend.config, PLAIN))

    assert result.text == ""
    assert result.meta == {"finish_reason": "tool_calls", "tool_calls": CALLS}
    assert (result.prompt_tokens, result.completion_tokens) == (40, 12)


def test_chat_completions_keeps_text_beside_tool_calls(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch)
    loopback.enqueue(Behaviour(text="Checking stock.", tool_calls=CALLS[:1]))
    result = backend.complete(call(backend.config, PLAIN))
    assert result.text == "Checking stock."
    assert result.meta["tool_calls"] == CALLS[:1]


def test_a_request_without_tools_goes_out_as_before(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch, temperature=0.3, seed=7)
    result = backend.complete(call(backend.config, PLAIN, tools=()))

    assert result.meta == {"finish_reason": "stop"}, "no tool_calls key without tools"
    (sent,) = loopback.requests
    assert (
        sent.body
        == json.dumps(
            {"model": "gpt-4o-mini", "messages": PLAIN, "temperature": 0.3, "seed": 7},
            separators=(",", ":"),
        ).encode()
    )


@pytest.mark.usefixtures("azure_key")
def test_azure_sends_and_reads_tool_calls_on_the_deployment_route(
    loopback: LoopbackServer,
) -> None:
    config = ModelConfig(
        model="openai:gpt-4o",
        azure=True,
        azure_endpoint=loopback.url,
        api_version="2024-10-21",
        deployment="prod-4o",
    )
    loopback.enqueue(Behaviour(tool_calls=CALLS))
    result = OpenAIBackend.from_config(config).complete(call(config, CONVERSATION))

    assert result.meta == {"finish_reason": "tool_calls", "tool_calls": CALLS}
    (sent,) = loopback.requests
    assert sent.path == "/openai/deployments/prod-4o/chat/completions"
    assert sent.json["model"] == "prod-4o"
    assert [t["function"]["name"] for t in sent.json["tools"]] == ["stock_level", "price"]
    assert neutral_messages(sent.json) == without_is_error(neutral(CONVERSATION))


@pytest.fixture
def azure_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)


def test_a_server_without_call_ids_or_with_object_arguments_is_read_leniently(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some OpenAI-compatible servers leave out the id or send the arguments as an object."""
    backend = openai(loopback, monkeypatch)
    loopback.post_routes["/v1/chat/completions"] = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "price", "arguments": {}}},
                        {
                            "id": "",
                            "type": "function",
                            "function": {"name": "stock_level", "arguments": {"sku": "A"}},
                        },
                    ],
                },
            }
        ],
    }
    result = backend.complete(call(backend.config, PLAIN))
    assert result.meta["tool_calls"] == [
        {"id": "call_0", "name": "price", "arguments": "{}"},
        {"id": "call_1", "name": "stock_level", "arguments": '{"sku": "A"}'},
    ]


# -- OpenAI Responses API ---------------------------------------------------------------------


def test_responses_api_sends_input_items_and_function_tools(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(
        loopback, monkeypatch, api="responses", temperature=0.2, max_tokens=300, seed=5
    )
    loopback.answer("There are 2 left.", prompt_tokens=90, completion_tokens=6, cached_tokens=64)
    result = backend.complete(call(backend.config, CONVERSATION))

    assert result.text == "There are 2 left."
    assert result.meta == {"finish_reason": "stop", "tool_calls": []}
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (90, 6, 64)
    (sent,) = loopback.requests
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json == {
        "model": "gpt-4o-mini",
        "input": [
            {"role": "system", "content": "Call stock_level before answering."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "How many of the item in the photo are left?"},
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{PNG}",
                        "detail": "auto",
                    },
                ],
            },
            {"role": "assistant", "content": "Let me look."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "stock_level",
                "arguments": '{"sku": "AB123"}',
            },
            {"type": "function_call", "call_id": "call_2", "name": "price", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "7"},
            {"type": "function_call_output", "call_id": "call_2", "output": "price: unknown tool"},
            {
                "type": "function_call",
                "call_id": "call_3",
                "name": "stock_level",
                "arguments": '{"sku": "AB123", "store": "north"}',
            },
            {"type": "function_call_output", "call_id": "call_3", "output": "2"},
        ],
        "store": False,
        "temperature": 0.2,
        "max_output_tokens": 300,  # and no seed: the Responses API has none
        "tools": [
            {
                "type": "function",
                "name": "stock_level",
                "description": "Units of a SKU in stock.",
                "parameters": SCHEMA,
                "strict": False,
            },
            {
                "type": "function",
                "name": "price",
                "description": "The price of a SKU.",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            },
        ],
    }
    assert neutral_messages(sent.json) == without_is_error(neutral(CONVERSATION))


def test_responses_api_reads_function_calls_and_a_cut_answer(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch, model="openai:o4-mini", api="responses")
    loopback.enqueue(
        Behaviour(text="Checking.", tool_calls=CALLS),
        Behaviour(text="It is", finish_reason="length"),
    )
    request = CallRequest(
        role="target",
        model=backend.model,
        messages=tuple(PLAIN),
        params={"temperature": 0.5, "reasoning_effort": "low"},
        tools=(STOCK,),
    )
    first = backend.complete(request)
    assert first.text == "Checking."
    assert first.meta == {"finish_reason": "tool_calls", "tool_calls": CALLS}
    cut = backend.complete(request)
    assert (cut.text, cut.meta["finish_reason"]) == ("It is", "length")
    sent = loopback.requests[0].json
    assert sent["reasoning"] == {"effort": "low"}
    assert "temperature" not in sent, "reasoning models reject a temperature"


def test_responses_api_without_tools_sends_no_tools_and_reports_none(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch, api="responses")
    result = backend.complete(call(backend.config, PLAIN, tools=()))
    assert result.text == "ok"
    assert result.meta == {"finish_reason": "stop"}
    (sent,) = loopback.requests
    assert sent.json == {"model": "gpt-4o-mini", "input": PLAIN, "store": False, "temperature": 0.0}
    assert chat_messages(sent.json) == PLAIN


def test_responses_api_passes_a_json_schema_as_text_format(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = openai(loopback, monkeypatch, api="responses")
    schema = {"type": "object", "properties": {"edits": {"type": "array"}}}
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": True, "schema": schema},
    }
    request = CallRequest(
        role="optimizer",
        model=backend.model,
        messages=tuple(PLAIN),
        params={"response_format": response_format},
    )
    backend.complete(request)
    assert loopback.requests[0].json["text"] == {
        "format": {"type": "json_schema", "name": "answer", "strict": True, "schema": schema}
    }


def test_a_responder_drives_a_tool_loop_over_the_responses_route(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A responder answers with calls until it sees their results, then with text."""

    def responder(body: dict[str, Any]) -> str | Behaviour:
        results = [m for m in neutral_messages(body) if m["role"] == "tool"]
        if not results:
            return Behaviour(tool_calls=CALLS[:1])
        return f"{len(results)} result(s): {results[0]['content']} ({results[0]['name']})"

    loopback.responder = responder
    backend = openai(loopback, monkeypatch, api="responses")
    messages = list(PLAIN)
    first = backend.complete(call(backend.config, messages))
    (asked,) = first.meta["tool_calls"]
    messages += [
        {"role": "assistant", "content": first.text, "tool_calls": [asked]},
        {"role": "tool", "tool_call_id": asked["id"], "name": asked["name"], "content": "5"},
    ]
    second = backend.complete(call(backend.config, messages))
    assert second.text == "1 result(s): 5 (stock_level)"
    assert chat_messages(loopback.requests[1].json)[-2:] == [
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": "5"},
    ]


# -- Anthropic Messages -----------------------------------------------------------------------


def test_anthropic_sends_tool_use_and_joined_tool_results(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = anthropic(loopback, monkeypatch)
    loopback.answer("There are 2 left.")
    result = backend.complete(call(backend.config, CONVERSATION))

    assert result.text == "There are 2 left."
    assert result.meta == {"finish_reason": "end_turn", "tool_calls": []}
    (sent,) = loopback.requests
    assert sent.path == "/v1/messages"
    assert sent.json["system"] == "Call stock_level before answering."
    assert sent.json["tools"] == [
        {"name": "stock_level", "description": "Units of a SKU in stock.", "input_schema": SCHEMA},
        {
            "name": "price",
            "description": "The price of a SKU.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]
    assert sent.json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "How many of the item in the photo are left?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "stock_level",
                    "input": {"sku": "AB123"},
                },
                {"type": "tool_use", "id": "call_2", "name": "price", "input": {}},
            ],
        },
        {  # the two results of one turn: one user message
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "7", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "price: unknown tool",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [  # no empty text block before a turn of calls alone
                {
                    "type": "tool_use",
                    "id": "call_3",
                    "name": "stock_level",
                    "input": {"sku": "AB123", "store": "north"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_3", "content": "2", "is_error": False}
            ],
        },
    ]
    assert neutral_messages(sent.json) == neutral(CONVERSATION)  # nothing lost


def test_anthropic_reads_several_tool_use_blocks_keeping_their_key_order(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = anthropic(loopback, monkeypatch)
    loopback.enqueue(Behaviour(tool_calls=CALLS, prompt_tokens=50, completion_tokens=9))
    result = backend.complete(call(backend.config, PLAIN))

    assert result.text == ""
    assert result.meta == {"finish_reason": "tool_use", "tool_calls": CALLS}
    # json.dumps of the input as the API gave it: "store" stays before "sku".
    assert result.meta["tool_calls"][0]["arguments"] == '{"store": "south", "sku": "ZZ9"}'
    assert (result.prompt_tokens, result.completion_tokens) == (50, 9)


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]", '"AB123"', ""])
def test_anthropic_sends_arguments_that_are_not_an_object_as_an_empty_input(
    arguments: str, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = anthropic(loopback, monkeypatch)
    messages = [
        *PLAIN,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "stock_level", "arguments": arguments}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "stock_level",
            "content": "arguments are not a JSON object",
            "is_error": True,
        },
    ]
    backend.complete(call(backend.config, messages))
    (use,) = loopback.requests[0].json["messages"][1]["content"]
    assert use == {"type": "tool_use", "id": "c1", "name": "stock_level", "input": {}}


def test_anthropic_without_tools_goes_out_as_before(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = anthropic(loopback, monkeypatch)
    result = backend.complete(call(backend.config, PLAIN, tools=()))
    assert result.meta == {"finish_reason": "end_turn"}
    (sent,) = loopback.requests
    assert "tools" not in sent.json
    assert sent.json["messages"] == [{"role": "user", "content": "Where is order 42?"}]
    assert sent.json["system"] == "You are the support skill."


def test_anthropic_keeps_prompt_caching_with_tools(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long skill is still one cached system block; a last message of tool results or
    image parts has no cache point of its own (it is no optimizer prompt)."""
    backend = anthropic(loopback, monkeypatch)
    skill = "Rule. " * 1000  # past the 1024-token minimum at 4 characters a token
    backend.complete(
        call(backend.config, [{"role": "system", "content": skill}, *CONVERSATION[1:]])
    )
    sent = loopback.requests[0].json
    assert sent["system"] == [
        {"type": "text", "text": skill, "cache_control": {"type": "ephemeral"}}
    ]
    assert all("cache_control" not in b for m in sent["messages"] for b in m["content"])


# -- the api key ------------------------------------------------------------------------------


def test_api_is_in_the_cache_params_and_the_snapshot_only_when_not_chat(tmp_path: Path) -> None:
    chat = parse_config('[target]\nmodel = "openai:gpt-4o"\n', tmp_path)
    responses = parse_config('[target]\nmodel = "openai:gpt-4o"\napi = "responses"\n', tmp_path)
    assert chat.target.api == "chat" and responses.target.api == "responses"
    assert "api" not in model_params(chat.target)
    assert model_params(responses.target) == model_params(chat.target) | {"api": "responses"}
    assert "api" not in chat.to_dict()["target"], "the run ids of chat runs stay as they were"
    assert responses.to_dict()["target"]["api"] == "responses"
    assert parse_config_dict(responses.to_dict(), tmp_path).target.api == "responses"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('model = "openai:gpt-4o"\napi = "rest"', "api 'rest' is not one of chat, responses."),
        ('model = "anthropic:claude-x"\napi = "responses"', "needs an openai: model"),
        (
            'model = "openai:gpt-4o"\napi = "responses"\nazure = true\n'
            'azure_endpoint = "https://x.example"\napi_version = "2025-01-01"',
            "not Azure",
        ),
        ('model = "openai:gpt-4o"\napi = "responses"\nmode = "batch"', 'not mode = "batch"'),
    ],
)
def test_api_is_validated_when_the_config_loads(lines: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(f"[target]\n{lines}\n", tmp_path)
