"""AnthropicChat through the real `anthropic` SDK against a local fake Messages API server."""

from __future__ import annotations

import time

import pytest
from fakes.anthropic_server import (
    Delay,
    FakeAnthropicServer,
    message,
    redacted_thinking,
    thinking,
    tool_use,
)

from ragloop.core.config import Settings
from ragloop.core.errors import ConfigError, ProviderError
from ragloop.core.types import Usage
from ragloop.llm import make_chat_model
from ragloop.llm.anthropic import AnthropicChat
from ragloop.llm.base import Finish, ForceTool, Message, ToolCall, ToolSpec

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
    model = kw.pop("model", "claude-sonnet-5-5")
    return AnthropicChat(model, api_key="sk-test", base_url=server.url, **kw)


def test_request_caches_system_and_history_and_sends_effort(server):
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
    # automatic caching moves a breakpoint forward as the history grows; no tool breakpoint
    assert body["cache_control"] == EPHEMERAL
    assert all("cache_control" not in t for t in body["tools"])
    assert body["output_config"] == {"effort": "medium"}
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
    resp = chat_for(server, model="claude-sonnet-4-5").chat([Message("user", "hi")], system="s",
                                                          tools=TOOLS)
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
    chat = AnthropicChat("claude-sonnet-5-5", api_key="k", base_url=url, timeout=1, max_retries=0)
    with pytest.raises(ProviderError, match="cannot connect"):
        chat.chat([Message("user", "hi")])


def test_missing_key_is_config_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_chat_model("anthropic:claude-sonnet-5-5", Settings())


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


# -- what current models send (thinking, refusals, truncation) ----------------------------------

SIGNATURE = "EqQBCkgIARABGAIiQL4X9q0Qp2nJ1o3Zb3pW6nVbC4VwT4k1x7xP2mR0yQ=="


def test_thinking_blocks_go_back_first_and_byte_for_byte(server, small_kb):
    """A recorded exchange in the documented wire format: step 1 returns a thinking block with
    a signature, a redacted one and a tool_use; step 2's assistant turn must carry them first,
    unchanged, or the API rejects the request (thinking-tool-workflows page)."""
    from ragloop.agent.engine import Engine

    think = thinking("The user asks about approvals; search the policy.", SIGNATURE)
    redacted = redacted_thinking("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3")
    step1 = message(None, tool_uses=[tool_use("search_knowledge_base",
                                               {"query": "travel approval threshold"},
                                               id="toolu_1")],
                    blocks_before=[think, redacted], model="claude-sonnet-5-5")
    server.enqueue(step1, message("The CFO approves expenses above £2,500 [1].",
                                  model="claude-sonnet-5-5"))
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=4), chat=chat_for(server),
                    grader=_keep_all())
    result = engine.ask("Who approves travel expenses above £2,500?", route="agent",
                        driver="tools")
    assert result.status == "answered"
    step2 = server.requests[1].body
    assistant = step2["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == step1["content"]  # thinking, redacted, tool_use: verbatim
    assert assistant["content"][0] == think
    # a thinking model rejects forced tool use: step 1 offered the tools on "auto"
    assert server.requests[0].body["tool_choice"] == {"type": "auto"}


def _keep_all():
    from ragloop.core.decisions import Grade

    class KeepAll:
        usage = Usage()  # no model calls
        def grade(self, question, hits):
            return Grade(kept=list(hits), discarded=[], enough=True)

    return KeepAll()


def test_refusal_maps_to_refused_with_the_category(server):
    server.enqueue(message(None, stop_reason="refusal",
                           stop_details={"type": "refusal", "category": "cyber",
                                         "explanation": "exploit development"}))
    resp = chat_for(server).chat([Message("user", "hi")])
    assert resp.finish is Finish.REFUSED
    assert "cyber" in resp.refusal and "exploit development" in resp.refusal


@pytest.mark.parametrize("stop", ["max_tokens", "model_context_window_exceeded"])
def test_cut_off_replies_are_truncated(server, stop):
    server.enqueue(message(None, stop_reason=stop,
                           tool_uses=[tool_use("search", {"query": "half"})]))
    resp = chat_for(server).chat([Message("user", "hi")], tools=TOOLS)
    assert resp.finish is Finish.TRUNCATED


def test_the_json_schema_goes_without_string_length_bounds(server):
    """Structured outputs refuse minLength / maxLength / maxItems; the reply is validated
    after."""
    bounded = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1,
                                                      "maxLength": 50},
                                                "ids": {"type": "array", "maxItems": 3,
                                                        "items": {"type": "integer"}}},
               "required": ["q", "ids"], "additionalProperties": False}
    chat_for(server).chat([Message("user", "hi")], purpose="decision", json_schema=bounded)
    assert server.last["output_config"]["format"]["schema"]["properties"] == {
        "q": {"type": "string"}, "ids": {"type": "array", "items": {"type": "integer"}}}


def test_decision_call_asks_low_effort_and_the_json_schema(server):
    schema = {"type": "object", "properties": {"query": {"type": ["string", "null"]}},
              "required": ["query"], "additionalProperties": False}
    chat_for(server).chat([Message("user", "hi")], purpose="decision", json_schema=schema)
    assert server.last["output_config"] == {
        "effort": "low", "format": {"type": "json_schema", "schema": schema}}


def test_older_models_get_no_output_config(server):
    chat_for(server, model="claude-haiku-4-5").chat([Message("user", "hi")], purpose="decision")
    assert "output_config" not in server.last


def test_forced_tool_and_is_error(server):
    history = [Message("user", "q"),
               Message("assistant", "", tool_calls=[ToolCall("t1", "search", {"query": "q"})]),
               Message("tool", "Tool error: page must be 1-5", tool_call_id="t1",
                       is_error=True)]
    chat_for(server, model="claude-sonnet-4-6").chat(history, tools=TOOLS,
                                                     tool_choice=ForceTool("search"))
    body = server.last
    assert body["tool_choice"] == {"type": "tool", "name": "search"}
    assert body["messages"][2]["content"][0]["is_error"] is True
