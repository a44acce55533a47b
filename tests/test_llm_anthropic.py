"""AnthropicChat through the real `anthropic` SDK against a local fake Messages API server."""

from __future__ import annotations

import time

import pytest
from fakes.anthropic_server import Delay, FakeAnthropicServer, message, tool_use

from ragloop.config import Settings
from ragloop.errors import ConfigError, ProviderError
from ragloop.llm import make_chat_model
from ragloop.llm.anthropic import AnthropicChat
from ragloop.llm.base import Message, ToolCall, ToolSpec

TOOLS = [
    ToolSpec(
        "search",
        "Search the knowledge base.",
        {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    ToolSpec(
        "fetch_section",
        "Fetch one section.",
        {"type": "object", "properties": {"doc_id": {"type": "string"}}},
    ),
]
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def server():
    with FakeAnthropicServer() as s:
        yield s


def chat_for(server, **kw) -> AnthropicChat:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 2)
    return AnthropicChat("claude-sonnet-4-5", api_key="sk-test", base_url=server.url, **kw)


def test_request_has_cache_control_on_system_and_last_tool(server):
    resp = chat_for(server).chat([Message("user", "hi")], system="You are terse.", tools=TOOLS)
    assert resp.text == "ok"
    (req,) = server.requests
    assert req.path == "/v1/messages"
    assert req.headers["authorization"] == "Bearer sk-test"  # SDK 2.x sends the key as Bearer
    body = req.body
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    assert [t["name"] for t in body["tools"]] == ["search", "fetch_section"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert body["tools"][0]["input_schema"]["required"] == ["query"]
    assert body["tool_choice"] == {"type": "auto"}
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 1024
    assert "temperature" not in body  # API 2026-10-21 has no sampling parameters


def test_no_system_no_tools_sends_neither(server):
    chat_for(server).chat([Message("user", "hi")])
    body = server.last
    assert "system" not in body and "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "wire"), [("auto", "auto"), ("none", "none"), ("required", "any")]
)
def test_tool_choice_mapping(server, choice, wire):
    chat_for(server).chat([Message("user", "hi")], tools=TOOLS, tool_choice=choice)
    assert server.last["tool_choice"] == {"type": wire}
    assert len(server.last["tools"]) == 2  # "none" keeps the tools: same cache prefix


def test_tool_choice_none_drops_tool_calls_even_if_returned(server):
    server.enqueue(message("final", tool_uses=[tool_use("search", {"query": "x"})]))
    resp = chat_for(server).chat([Message("user", "hi")], tools=TOOLS, tool_choice="none")
    assert resp.text == "final" and resp.tool_calls == []


def test_tool_use_and_tool_result_mapping(server):
    server.enqueue(
        message(
            "Let me look.",
            tool_uses=[
                tool_use("search", {"query": "pgvector"}, id="toolu_a"),
                tool_use("fetch_section", {"doc_id": "d1"}, id="toolu_b"),
            ],
        )
    )
    chat = chat_for(server)
    first = chat.chat([Message("user", "What is pgvector?")], tools=TOOLS)
    assert first.stop_reason == "tool_use"
    assert first.text == "Let me look."
    assert first.tool_calls == [
        ToolCall("toolu_a", "search", {"query": "pgvector"}),
        ToolCall("toolu_b", "fetch_section", {"doc_id": "d1"}),
    ]
    history = [
        Message("user", "What is pgvector?"),
        Message("assistant", first.text, tool_calls=first.tool_calls),
        Message("tool", "[1] pgvector is ...", tool_call_id="toolu_a", name="search"),
        Message("tool", "§2 text", tool_call_id="toolu_b", name="fetch_section"),
        Message("user", "Budget is over: answer now."),
    ]
    chat.chat(history, tools=TOOLS)
    msgs = server.last["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"query": "pgvector"}},
        {"type": "tool_use", "id": "toolu_b", "name": "fetch_section", "input": {"doc_id": "d1"}},
    ]
    assert msgs[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "[1] pgvector is ..."},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "§2 text"},
        {"type": "text", "text": "Budget is over: answer now."},
    ]


def test_assistant_with_only_tool_calls_has_no_empty_text_block(server):
    history = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=[ToolCall("t1", "search", {"query": "q"})]),
        Message("tool", "", tool_call_id="t1"),
    ]
    chat_for(server).chat(history, tools=TOOLS)
    msgs = server.last["messages"]
    assert msgs[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "search", "input": {"query": "q"}}
    ]
    assert msgs[2]["content"][0]["content"]  # never an empty tool_result


def test_non_object_tool_input_is_kept_raw(server):
    server.enqueue(message(None, tool_uses=[tool_use("search", "not an object")]))
    resp = chat_for(server).chat([Message("user", "q")], tools=TOOLS)
    (call,) = resp.tool_calls
    assert call.arguments == {} and call.raw_arguments == "not an object"


def test_usage_and_cost(server):
    server.enqueue(
        message("ok", input_tokens=1000, output_tokens=500, cache_read=2000, cache_write=100)
    )
    resp = chat_for(server).chat([Message("user", "hi")], system="s", tools=TOOLS)
    u = resp.usage
    assert (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.calls,
    ) == (1000, 500, 2000, 100, 1)
    # sonnet 4: $3 in, $15 out, $0.30 cache read, $3.75 cache write per 1M tokens
    assert u.cost_usd == pytest.approx((1000 * 3 + 500 * 15 + 2000 * 0.3 + 100 * 3.75) / 1e6)
    assert resp.model == "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize("status", [429, 500, 529])
def test_retry_after_transient_errors_succeeds(server, status):
    server.fail(status, times=2)
    resp = chat_for(server, max_retries=2).chat([Message("user", "hi")])
    assert resp.text == "ok"
    assert len(server.requests) == 3


def test_persistent_500_raises_provider_error(server):
    server.fail(500, times=10)
    with pytest.raises(ProviderError, match=r"anthropic: HTTP 500"):
        chat_for(server, max_retries=1).chat([Message("user", "hi")])
    assert len(server.requests) == 2  # first try + 1 retry


def test_400_is_not_retried(server):
    server.fail(400)
    with pytest.raises(ProviderError, match="HTTP 400: fake 400"):
        chat_for(server).chat([Message("user", "hi")])
    assert len(server.requests) == 1


def test_401_is_config_error_naming_the_env_var(server):
    server.fail(401)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        chat_for(server).chat([Message("user", "hi")])


def test_timeout_raises_provider_error_quickly(server):
    server.enqueue(Delay(3), Delay(3))
    start = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        chat_for(server, timeout=0.3, max_retries=1).chat([Message("user", "hi")])
    assert time.monotonic() - start < 2.5
    assert len(server.requests) == 2


def test_connection_refused_is_provider_error():
    with FakeAnthropicServer() as s:
        url = s.url
    chat = AnthropicChat("claude-sonnet-4-5", api_key="k", base_url=url, timeout=1, max_retries=0)
    with pytest.raises(ProviderError, match="cannot connect"):
        chat.chat([Message("user", "hi")])


def test_missing_key_is_config_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_chat_model("anthropic:claude-sonnet-4-5", Settings())


def test_make_chat_model_anthropic_uses_settings(monkeypatch, server):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    model = make_chat_model(
        "anthropic:claude-haiku-4-5", Settings(request_timeout_s=7, max_retries=1)
    )
    assert isinstance(model, AnthropicChat)
    assert model.name == "anthropic:claude-haiku-4-5"
    assert (model.timeout, model.max_retries) == (7, 1)
    model.chat([Message("user", "hi")])
    assert server.last["model"] == "claude-haiku-4-5"
    assert server.requests[-1].headers["authorization"] == "Bearer sk-env"
