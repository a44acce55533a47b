"""The ask_user tool against the real model server of the tests (llama-cpp-python serving
SmolLM2-135M-Instruct): the tool goes out with its schema, the server builds a grammar from it
when the call is forced, and what comes back parses as a clarification. What a 135M model asks
is not the point; bounded calls (128 tokens) keep each to seconds."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator
from model_server import CALL_TIMEOUT_S, MODEL_ALIAS, WireLog, explained

from ragloop.agent.ask_user import ASK_USER, ASK_USER_SPEC, parse_ask_user
from ragloop.agent.engine import Engine
from ragloop.core.types import RunStatus
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import ForceTool, Message
from ragloop.llm.openai import OpenAIChat
from ragloop.offline.grader import LocalGrader

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

ENDED = {RunStatus.ANSWERED, RunStatus.TRUNCATED, RunStatus.UNANSWERABLE,
         RunStatus.NEEDS_INPUT}


def _chat(url: str, wire: WireLog) -> OpenAIChat:
    return OpenAIChat(MODEL_ALIAS, base_url=url, timeout=CALL_TIMEOUT_S, max_retries=0,
                      http_client=wire.client())


def test_a_forced_ask_user_call_comes_back_schema_valid(llama_server):
    Draft202012Validator.check_schema(ASK_USER_SPEC.parameters)
    wire = WireLog()
    with explained():
        reply = _chat(llama_server, wire).chat(
            [Message(role="user", content="The knowledge base has datasheets of the T100, T200"
                                          " and T300 sensors. Question: how long does the"
                                          " sensor's battery last?")],
            tools=[ASK_USER_SPEC], tool_choice=ForceTool(ASK_USER), max_tokens=128,
            temperature=0.0, purpose="loop")
    request, response = wire.exchanges[-1]
    assert response["status"] == 200
    sent = request["tools"][0]["function"]
    assert sent["name"] == ASK_USER and sent["parameters"] == ASK_USER_SPEC.parameters
    assert [c.name for c in reply.tool_calls] == [ASK_USER]
    arguments = reply.tool_calls[0].arguments
    Draft202012Validator(ASK_USER_SPEC.parameters).validate(arguments)
    asked = parse_ask_user(arguments)
    assert 2 <= len(asked.options) <= 5 and asked.question


def test_a_tools_run_offers_ask_user_to_the_real_server(llama_server, small_kb):
    wire = WireLog()
    settings = small_kb.settings.with_(max_steps=3, loop_max_tokens=256, search_k=3,
                                       tool_result_chars=1200, citation_check="offline")
    engine = Engine(small_kb, settings, chat=_chat(llama_server, wire),
                    grader=LocalGrader(small_kb.embedder, reading=EN_RD))
    with explained():
        result = engine.ask("Is the T9 sensor waterproof?", route="agent", driver="tools")
    assert result.status in ENDED, result.answer
    first_request, first_response = next((q, r) for q, r in wire.exchanges if "tools" in q)
    offered = {t["function"]["name"]: t["function"] for t in first_request["tools"]}
    assert offered[ASK_USER]["parameters"] == ASK_USER_SPEC.parameters
    assert first_response["status"] == 200
    # whatever the model called, an ask_user call ended the run needs_input or went back as
    # a tool error it could fix
    for _, response in wire.exchanges:
        for call in (response.get("choices") or [{}])[0].get("message", {}).get(
                "tool_calls") or []:
            if call["function"]["name"] == ASK_USER:
                json.loads(call["function"]["arguments"])
