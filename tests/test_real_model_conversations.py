"""Conversations against the real llama.cpp server of the tests (SmolLM2-135M through
llama-cpp-python's OpenAI-compatible server, bounded calls): the condense decision goes out
with its JSON schema as a grammar and comes back schema-valid, and a two-turn conversation
completes with the follow-up condensed by the model. What a 135M model rewrites is not the
point; what crosses the wire and how the turns end is."""

from __future__ import annotations

import json

import pytest
from model_server import CALL_TIMEOUT_S, MODEL_ALIAS, WireLog, explained

from ragloop.agent.engine import Engine
from ragloop.agent.jsonparse import parse_json_object, strict_schema
from ragloop.agent.llm_condense import (
    REASON_CHARS,
    STANDALONE_CHARS,
    CondenseReply,
    LLMCondenser,
)
from ragloop.core.conversation import Turn, TurnKind
from ragloop.core.errors import ProviderError
from ragloop.core.events import CondenseEvent
from ragloop.core.types import RunStatus
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import Message
from ragloop.llm.openai import OpenAIChat
from ragloop.offline.follow_up import RetrievalCondenser
from ragloop.offline.grader import LocalGrader

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

ENDED = {RunStatus.ANSWERED, RunStatus.TRUNCATED, RunStatus.UNANSWERABLE}
SMALL_RUN = {"loop_max_tokens": 128, "decision_max_tokens": 128, "search_k": 3,
             "tool_result_chars": 1200, "citation_check": "offline"}
SCHEMA = json.dumps(strict_schema(CondenseReply), sort_keys=True)


def _chat(url: str, wire: WireLog) -> OpenAIChat:
    return OpenAIChat(MODEL_ALIAS, base_url=url, timeout=CALL_TIMEOUT_S, max_retries=0,
                      dialect="llamacpp", http_client=wire.client())


def _condense_calls(wire: WireLog) -> list[tuple[dict, dict]]:
    return [(req, resp) for req, resp in wire.exchanges
            if json.dumps((req.get("response_format") or {}).get("schema"),
                          sort_keys=True) == SCHEMA]


def test_the_condense_decision_is_schema_valid(llama_server, small_kb) -> None:
    wire = WireLog()
    condenser = LLMCondenser(_chat(llama_server, wire),
                             RetrievalCondenser(small_kb, ENGLISH_READING),
                             max_tokens=96)
    history = [Turn("Is the T9 sensor waterproof?",
                    answer="Yes: the T9 is rated IP67. [1]")]
    with explained():
        c = condenser.condense(history, "How long does its battery last?")
    assert c.question and c.kind in tuple(TurnKind)
    calls = _condense_calls(wire)
    assert calls and calls[0][0]["response_format"]["type"] == "json_object"
    assert calls[0][1]["status"] == 200
    finished = [resp for _, resp in calls if resp["choices"][0]["finish_reason"] == "stop"]
    assert finished, "no reply finished inside the budget"
    for resp in finished:  # a grammar-complete reply parses as the schema
        parse_json_object(resp["choices"][0]["message"]["content"], CondenseReply)
    assert condenser.usage.calls == len(calls)


def test_a_two_turn_conversation_completes(llama_server, small_kb) -> None:
    wire = WireLog()
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=2, **SMALL_RUN),
                    chat=_chat(llama_server, wire),
                    grader=LocalGrader(small_kb.embedder, reading=EN_RD))
    chat = engine.conversation()
    events: list = []
    with explained():
        first = chat.ask("Is the T9 sensor waterproof?", route="single")
        second = chat.ask("How long does its battery last?", route="single",
                          on_event=events.append)
    assert first.status in ENDED and second.status in ENDED, second.answer
    assert isinstance(events[0], CondenseEvent) and events[0].standalone == second.standalone
    assert second.standalone and second.usage.calls >= 1
    assert len(_condense_calls(wire)) >= 1  # the model made it standalone, not the rule
    turns = engine.runs.conversation(chat.id)
    assert [(t["turn"], t["status"]) for t in turns] == [(0, str(first.status)),
                                                          (1, str(second.status))]
    assert turns[1]["standalone"] == second.standalone


def test_the_condense_reply_is_bounded_at_the_engines_budget(llama_server, small_kb) -> None:
    """With the engine's default budget (decision_max_tokens 2048) and a history of several
    turns, the reply's strings carry maxLength into the server's grammar, so the model cannot
    write one string until the budget runs out: the decision is one call that stops inside
    its bounds. Without the bounds this conversation's third turn ran to 2047 tokens, was
    asked again with 4096 and failed on the server's 4096-token context."""
    wire = WireLog()
    condenser = LLMCondenser(_chat(llama_server, wire),
                             RetrievalCondenser(small_kb, ENGLISH_READING),
                             max_tokens=2048)
    history = [Turn("What is the IP rating of the T9 sensor?",
                    answer="IP67: dust-tight and protected against immersion to 1 m. [1]"),
               Turn("How long does its battery last?", "How long does the T9 battery last?",
                    answer="About 5 years at the default reporting interval. [1]")]
    with explained():
        c = condenser.condense(history, "What about the T7?")
    calls = _condense_calls(wire)
    schema = calls[0][0]["response_format"]["schema"]["properties"]
    assert list(schema) == ["kind", "standalone", "reason"]  # the grammar's order: kind first
    assert schema["standalone"]["maxLength"] == STANDALONE_CHARS
    assert schema["standalone"]["minLength"] == 1  # validated so: never written empty
    assert schema["reason"]["anyOf"][0]["maxLength"] == REASON_CHARS
    assert len(calls) == 1, [resp["choices"][0]["finish_reason"] for _, resp in calls]
    resp = calls[0][1]
    assert resp["choices"][0]["finish_reason"] == "stop", resp["usage"]
    reply = parse_json_object(resp["choices"][0]["message"]["content"], CondenseReply)
    assert len(reply.standalone) <= STANDALONE_CHARS
    assert len(reply.reason or "") <= REASON_CHARS
    assert c.question


def test_a_request_over_the_context_keeps_constrained_output(llama_server) -> None:
    """llama-cpp-python answers messages longer than its n_ctx (4096 here) with HTTP 400
    whatever the response_format (a longer max_tokens it cuts to fit). That is the context's
    error, said once: not a rejection of response_format, so the client neither asks again
    without it nor drops it for its later decisions."""
    wire = WireLog()
    model = _chat(llama_server, wire)
    ask = [Message(role="user", content="Is the T9 sensor waterproof?")]
    schema = strict_schema(CondenseReply)
    too_long = [Message(role="user", content="Is the T9 sensor waterproof? " * 800)]
    with pytest.raises(ProviderError, match="context"):
        model.chat(too_long, max_tokens=32, json_schema=schema)
    assert len(wire.exchanges) == 1 and wire.exchanges[0][1]["status"] == 400
    with explained():
        model.chat(ask, max_tokens=32, json_schema=schema)
    request, response = wire.exchanges[-1]
    assert response["status"] == 200
    assert request["response_format"] == {"type": "json_object", "schema": schema}
