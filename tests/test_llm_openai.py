"""OpenAIChat through the real `openai` SDK against a local fake chat.completions server."""

from __future__ import annotations

import json
import time

import pytest
from fakes.openai_server import Delay, FakeOpenAIServer, completion, tool_call

from ragloop.core.config import Settings
from ragloop.core.errors import ConfigError, ProviderError
from ragloop.llm import OLLAMA_BASE_URL, make_chat_model
from ragloop.llm.base import Finish, ForceTool, Message, ToolCall, ToolSpec
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
    chat = chat_for(server, dialect="openai")
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
    chat = chat_for(server, dialect="openai")
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
    kw = build_request("gpt-5-mini", [Message("user", "q")], dialect="openai")
    assert "temperature" not in kw and kw["max_completion_tokens"] == 1024
    assert build_request("gpt-4o", [Message("user", "q")], dialect="openai")["temperature"] == 0.0


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
    with pytest.raises(ProviderError, match="model 'llama3' not found: retired, or not pulled"):
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
    assert m.base_url == OLLAMA_BASE_URL and m.dialect == "ollama"
    assert not m.traits.honours_tool_choice
    assert make_chat_model("offline", Settings()) is None
    for bad in ("gpt-4o", "anthropic:", "mistral:large", ":x"):
        with pytest.raises(ConfigError, match="offline"):
            make_chat_model(bad, Settings())


# -- what current servers send, and what they need ----------------------------------------------

def test_length_with_reasoning_and_no_content_is_truncated(server):
    """A reasoning model that spent max_completion_tokens thinking: finish_reason "length",
    content null (completions.py: max_completion_tokens includes reasoning tokens)."""
    server.enqueue(completion(None, finish_reason="length", completion_tokens=2048,
                              reasoning_tokens=2048))
    resp = chat_for(server, model="gpt-5.4-mini", dialect="openai").chat([Message("user", "q")])
    assert resp.finish is Finish.TRUNCATED and resp.text == ""


def test_refusal_and_content_filter_are_refused(server):
    server.enqueue(completion(None, refusal="I can't help with that."),
                   completion("partial", finish_reason="content_filter"))
    chat = chat_for(server)
    first = chat.chat([Message("user", "q")])
    assert first.finish is Finish.REFUSED and first.refusal == "I can't help with that."
    assert chat.chat([Message("user", "q")]).finish is Finish.REFUSED


def test_tool_arguments_sent_as_an_object_do_not_crash(server):
    server.enqueue(completion(None, tool_calls=[tool_call("search", {"query": "as object"})]))
    (call,) = chat_for(server).chat([Message("user", "q")], tools=TOOLS).tool_calls
    assert call.arguments == {"query": "as object"} and call.raw_arguments is None
    assert parse_arguments(["not", "an object"]) == ({}, '["not", "an object"]')


@pytest.mark.parametrize(("model", "tools", "purpose", "effort"), [
    ("gpt-5.4-mini", True, "loop", "none"),  # function tools need "none" on gpt-5.1+
    ("gpt-6-sol", True, "loop", "none"),
    ("gpt-5.4-mini", False, "decision", "none"),
    ("gpt-5.4-mini", False, "answer", "low"),
    ("gpt-5-mini", False, "decision", "minimal"),  # gpt-5 goes no lower than minimal
    ("o4-mini", True, "loop", "low"),
    ("gpt-4o-mini", True, "loop", None),
])
def test_reasoning_effort_and_temperature_by_family(model, tools, purpose, effort):
    kw = build_request(model, [Message("user", "q")], tools=TOOLS if tools else None,
                       purpose=purpose, dialect="openai")
    assert kw.get("reasoning_effort") == effort
    assert ("temperature" in kw) == (effort is None)


def test_responses_only_models_are_refused_for_tools_with_a_fix(server):
    chat = chat_for(server, model="gpt-6-astra", dialect="openai")
    with pytest.raises(ConfigError, match="Responses API"):
        chat.chat([Message("user", "q")], tools=TOOLS)
    assert server.requests == []


def test_compatible_server_gets_string_content_parallel_calls_and_json_schema(server):
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
              "additionalProperties": False}
    chat = chat_for(server, model="qwen")
    chat.chat([Message("user", "q"),
               Message("assistant", "", tool_calls=[ToolCall("c1", "search", {"query": "x"})]),
               Message("tool", "r", tool_call_id="c1")], tools=TOOLS,
              tool_choice=ForceTool("search"))
    body = server.last
    assert body["messages"][1]["content"] == ""  # llama-cpp-python rejects null here
    assert body["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert body["parallel_tool_calls"] is True and body["max_tokens"] == 1024
    chat.chat([Message("user", "q")], purpose="decision", json_schema=schema)
    assert server.last["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "decision", "schema": schema,
                                               "strict": True}}


def test_a_server_that_rejects_json_schema_is_asked_again_without_it(server):
    server.fail(422)
    chat = chat_for(server, model="smollm2")
    chat.chat([Message("user", "q")], purpose="decision", json_schema={"type": "object"})
    assert "response_format" in server.requests[0].body
    assert "response_format" not in server.requests[1].body
    chat.chat([Message("user", "q")], purpose="decision", json_schema={"type": "object"})
    assert "response_format" not in server.last and len(server.requests) == 3


BOUNDED = {"type": "object", "properties": {
    "q": {"type": "string", "minLength": 1, "maxLength": 50},
    "why": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]},
    "ids": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}, "maxItems": 2}},
    "required": ["q", "why", "ids"], "additionalProperties": False}
UNBOUNDED = {"type": "object", "properties": {
    "q": {"type": "string"}, "why": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "ids": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}}},
    "required": ["q", "why", "ids"], "additionalProperties": False}


@pytest.mark.parametrize(("dialect", "sent"), [("openai", UNBOUNDED), ("compatible", UNBOUNDED),
                                               ("ollama", BOUNDED), ("llamacpp", BOUNDED)])
def test_string_length_bounds_go_only_to_llama_cpp_grammars(server, dialect, sent):
    """Strict structured outputs do not take minLength / maxLength / maxItems (Anthropic's
    refuses them); llama.cpp's grammar (llama-server, llama-cpp-python, Ollama) bounds a
    string and a list with them. An enum stays for all."""
    chat = OpenAIChat("m", api_key="k", base_url=server.url + "/v1", dialect=dialect, timeout=5)
    chat.chat([Message("user", "q")], purpose="decision", json_schema=BOUNDED)
    fmt = server.last["response_format"]
    assert (fmt.get("schema") or fmt["json_schema"]["schema"]) == sent


def test_llamacpp_dialect(server):
    chat = OpenAIChat("smollm2", base_url=server.url + "/v1", dialect="llamacpp", timeout=5)
    chat.chat([Message("user", "q")], purpose="decision", json_schema={"type": "object"})
    assert server.last["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    chat.chat([Message("user", "q"),
               Message("assistant", "", tool_calls=[ToolCall("c1", "search", {},
                                                             raw_arguments="{broken")]),
               Message("tool", "Tool error", tool_call_id="c1")], tools=TOOLS)
    body = server.last
    assert body["parallel_tool_calls"] is True  # llama-server defaults it to false
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_ollama_gets_no_effort_in_the_loop_and_none_for_decisions(server):
    chat = OpenAIChat("qwen3", base_url=server.url + "/v1", dialect="ollama", timeout=5)
    chat.chat([Message("user", "q")], tools=TOOLS)
    assert "reasoning_effort" not in server.last
    chat.chat([Message("user", "q")], purpose="decision")
    assert server.last["reasoning_effort"] == "none"


def test_a_fix_is_named_for_server_errors_a_retry_cannot_fix(server):
    server.fail(400, body={"error": {"message": '"auto" tool choice requires'
                                                " --enable-auto-tool-choice and"
                                                " --tool-call-parser to be set"}})
    with pytest.raises(ProviderError, match="start vLLM with --enable-auto-tool-choice"):
        chat_for(server).chat([Message("user", "q")], tools=TOOLS)
