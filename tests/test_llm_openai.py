"""OpenAIChat through the real `openai` SDK against a local fake chat.completions server."""

from __future__ import annotations

import json
import time

import pytest
from fakes.openai_server import Delay, FakeOpenAIServer, completion, tool_call

from ragloop.config import Settings
from ragloop.errors import ConfigError, ProviderError
from ragloop.llm import OLLAMA_BASE_URL, make_chat_model
from ragloop.llm.base import Message, ToolCall, ToolSpec
from ragloop.llm.openai import OpenAIChat, build_request, parse_arguments

TOOLS = [
    ToolSpec(
        "search",
        "Search the knowledge base.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec("list_documents", "List documents.", {"type": "object", "properties": {}}),
]


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def chat_for(server, model="gpt-4o-mini", **kw) -> OpenAIChat:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 2)
    return OpenAIChat(model, api_key="sk-test", base_url=server.url + "/v1", **kw)


def test_request_shape(server):
    resp = chat_for(server).chat(
        [Message("user", "hi")], system="Be terse.", tools=TOOLS, max_tokens=300
    )
    assert resp.text == "ok" and resp.stop_reason == "stop"
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the knowledge base.",
            "parameters": TOOLS[0].parameters,
        },
    }
    assert body["tool_choice"] == "auto"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 300  # custom base_url: the widely supported field


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_mapping(server, choice):
    chat_for(server).chat([Message("user", "hi")], tools=TOOLS, tool_choice=choice)
    assert server.last["tool_choice"] == choice


def test_no_tools_sends_no_tool_choice(server):
    chat_for(server).chat([Message("user", "hi")], tool_choice="none")
    assert "tools" not in server.last and "tool_choice" not in server.last


def test_tool_calls_parsed_and_round_tripped(server):
    server.enqueue(
        completion(
            None,
            tool_calls=[
                tool_call("search", '{"query": "pgvector hnsw"}', id="call_a"),
                tool_call("list_documents", "", id="call_b"),
            ],
        )
    )
    chat = chat_for(server)
    first = chat.chat([Message("user", "q")], tools=TOOLS)
    assert first.stop_reason == "tool_calls" and first.text == ""
    assert first.tool_calls == [
        ToolCall("call_a", "search", {"query": "pgvector hnsw"}),
        ToolCall("call_b", "list_documents", {}),
    ]
    chat.chat(
        [
            Message("user", "q"),
            Message("assistant", "", tool_calls=first.tool_calls),
            Message("tool", "[1] result", tool_call_id="call_a", name="search"),
            Message("tool", "doc list", tool_call_id="call_b", name="list_documents"),
        ],
        tools=TOOLS,
    )
    msgs = server.last["messages"]
    assert msgs[1]["role"] == "assistant" and msgs[1]["content"] is None
    assert [tc["id"] for tc in msgs[1]["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {
        "query": "pgvector hnsw"
    }
    assert msgs[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "[1] result"},
        {"role": "tool", "tool_call_id": "call_b", "content": "doc list"},
    ]


@pytest.mark.parametrize("raw", ['{"query": "unterminated', "[1, 2]", "not json", '"str"'])
def test_broken_tool_call_json_never_raises(server, raw):
    server.enqueue(completion(None, tool_calls=[tool_call("search", raw)]))
    chat = chat_for(server)
    resp = chat.chat([Message("user", "q")], tools=TOOLS)
    (call,) = resp.tool_calls
    assert call.name == "search" and call.arguments == {} and call.raw_arguments == raw
    # sent back as the model sent it
    chat.chat(
        [
            Message("user", "q"),
            Message("assistant", "", tool_calls=[call]),
            Message("tool", "error: bad arguments", tool_call_id=call.id),
        ],
        tools=TOOLS,
    )
    assert server.last["messages"][1]["tool_calls"][0]["function"]["arguments"] == raw


def test_parse_arguments_edge_cases():
    assert parse_arguments(None) == ({}, None)
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("{oops") == ({}, "{oops")


def test_tool_choice_none_drops_tool_calls_even_if_returned(server):
    server.enqueue(completion("final", tool_calls=[tool_call("search", '{"query": "x"}')]))
    resp = chat_for(server).chat([Message("user", "q")], tools=TOOLS, tool_choice="none")
    assert resp.text == "final" and resp.tool_calls == []


def test_usage_with_cached_tokens_and_cost(server):
    server.enqueue(completion("ok", prompt_tokens=3000, completion_tokens=200, cached_tokens=1000))
    # base_url pointing at api.openai.com counts as official → priced; route it to the fake
    chat = chat_for(server)
    chat.official = True
    resp = chat.chat([Message("user", "hi")])
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.calls) == (2000, 200, 1000, 1)
    # gpt-4o-mini: $0.15 in, $0.60 out, $0.075 cached per 1M tokens
    assert u.cost_usd == pytest.approx((2000 * 0.15 + 200 * 0.60 + 1000 * 0.075) / 1e6)
    assert server.last["max_completion_tokens"] == 1024 and "max_tokens" not in server.last


def test_local_server_costs_nothing_and_usage_may_be_missing(server):
    body = completion("ok")
    del body["usage"]
    server.enqueue(body, completion("ok", prompt_tokens=50, cached_tokens=None))
    chat = chat_for(server)
    assert chat.chat([Message("user", "hi")]).usage.input_tokens == 0
    u = chat.chat([Message("user", "hi")]).usage
    assert u.input_tokens == 50 and u.cost_usd == 0.0


def test_reasoning_models_on_openai_get_no_temperature():
    kw = build_request("gpt-5-mini", [Message("user", "q")], official=True)
    assert "temperature" not in kw and kw["max_completion_tokens"] == 1024
    assert build_request("gpt-4o", [Message("user", "q")], official=True)["temperature"] == 0.0


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retry_after_transient_errors_succeeds(server, status):
    server.fail(status, times=2)
    assert chat_for(server, max_retries=2).chat([Message("user", "hi")]).text == "ok"
    assert len(server.requests) == 3


def test_persistent_500_raises_provider_error(server):
    server.fail(500, times=10)
    with pytest.raises(ProviderError, match=r"openai: HTTP 500: fake 500"):
        chat_for(server, max_retries=1).chat([Message("user", "hi")])
    assert len(server.requests) == 2


def test_404_on_local_server_hints_at_the_model(server):
    server.fail(404)
    with pytest.raises(ProviderError, match="is model 'llama3' available"):
        chat_for(server, model="llama3").chat([Message("user", "hi")])


def test_401_is_config_error_naming_the_env_var(server):
    server.fail(401)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        chat_for(server).chat([Message("user", "hi")])


def test_timeout_raises_provider_error_quickly(server):
    server.enqueue(Delay(3), Delay(3))
    start = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        chat_for(server, timeout=0.3, max_retries=1).chat([Message("user", "hi")])
    assert time.monotonic() - start < 2.5
    assert len(server.requests) == 2


def test_api_key_defaults(monkeypatch, server):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-4o-mini")
    local = OpenAIChat("qwen", base_url=server.url + "/v1", timeout=5, max_retries=0)
    local.chat([Message("user", "hi")])
    assert server.requests[-1].headers["authorization"] == "Bearer not-needed"


def test_make_chat_model_openai_base_url_from_settings_and_env(monkeypatch, server):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    m = make_chat_model("openai:qwen2.5", Settings(base_url=server.url + "/v1"))
    assert isinstance(m, OpenAIChat) and m.name == "openai:qwen2.5"
    m.chat([Message("user", "hi")])
    assert server.last["model"] == "qwen2.5"
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    m2 = make_chat_model("openai:qwen2.5", Settings(max_retries=0, request_timeout_s=3))
    assert (m2.timeout, m2.max_retries) == (3, 0)
    m2.chat([Message("user", "hi")])
    assert len(server.requests) == 2


def test_make_chat_model_ollama_and_offline_and_bad_specs():
    m = make_chat_model("ollama:qwen2.5:7b", Settings())
    assert isinstance(m, OpenAIChat)
    assert m.name == "ollama:qwen2.5:7b" and m.model == "qwen2.5:7b"
    assert m.base_url == OLLAMA_BASE_URL and not m.official
    assert make_chat_model("offline", Settings()) is None
    for bad in ("gpt-4o", "anthropic:", "mistral:large", ":x"):
        with pytest.raises(ConfigError, match="offline"):
            make_chat_model(bad, Settings())
