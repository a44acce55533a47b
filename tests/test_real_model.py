"""The model path against a real model server: llama-cpp-python's OpenAI-compatible server with
a real chat template (ChatML), a real tool-call parser and real grammar-constrained JSON, serving
SmolLM2-135M-Instruct. The tests assert what crosses the wire and how runs end; what a 135M
model says is not the point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from model_server import CALL_TIMEOUT_S, MODEL_ALIAS, WireLog, explained

from ragloop.agent.engine import Engine
from ragloop.agent.jsonparse import parse_json_object, strict_schema
from ragloop.agent.llm_decisions import (
    MAX_GRADED_HITS,
    MAX_SUB_QUESTIONS,
    MISSING_CHARS,
    NEXT_QUERY_CHARS,
    PLAN_REPLY_CHARS,
    REASON_CHARS,
    SUB_QUESTION_CHARS,
    AnswerReply,
    LLMAnswerer,
    LLMGrader,
    LLMPlanner,
    LLMRewriter,
    PlanReply,
    RewriteReply,
    grade_reply_for,
)
from ragloop.core.decisions import Evidence, Grade
from ragloop.core.events import AnswerDeltaEvent
from ragloop.core.types import EventKind, Hit, RunStatus, Usage, usage_summary
from ragloop.language.text import ENGLISH_READING
from ragloop.language.vocabulary import ENGLISH_WORDS as EN
from ragloop.llm.base import Message
from ragloop.llm.openai import OpenAIChat
from ragloop.offline.grader import LocalGrader

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

ENDED = {RunStatus.ANSWERED, RunStatus.TRUNCATED, RunStatus.UNANSWERABLE}
# Small budgets and short results keep a 2-core CPU's prompt processing to seconds a call.
SMALL_RUN = {"loop_max_tokens": 128, "decision_max_tokens": 128, "search_k": 3,
             "tool_result_chars": 1200}


def chat(url: str, wire: WireLog, dialect: str = "compatible") -> OpenAIChat:
    return OpenAIChat(MODEL_ALIAS, base_url=url, timeout=CALL_TIMEOUT_S, max_retries=0,
                      dialect=dialect,
                      http_client=wire.client())


def test_tools_run_starts_from_single_shots_search_and_round_trips_a_real_tool_call(
        llama_server, small_kb):
    wire = WireLog()
    model = chat(llama_server, wire)
    # the offline grader: LLM grading through this server is the next test's subject
    # a reply's budget holds one whole tool call: the search tool's arguments may fill their
    # schema bounds (a 300-character query), which 128 tokens cut mid-string
    run = {**SMALL_RUN, "loop_max_tokens": 256}
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=3, **run), chat=model,
                    grader=LocalGrader(small_kb.embedder, reading=EN_RD))
    events = []
    question = "Is the T9 sensor waterproof?"
    with explained():
        result = engine.ask(question, route="agent", driver="tools", on_event=events.append)
    assert result.status in ENDED, result.answer
    # (a streamed request that this server breaks off, a tool call it cannot stream, is asked
    # again unstreamed: the broken one, which has no finish_reason, is left out)
    loop = [(req, resp) for req, resp in wire.exchanges if "tools" in req
            and resp["status"] == 200 and resp["choices"][0]["finish_reason"]]
    # step 1 is single-shot's search, made by the driver before any model call: the model's
    # first request already holds its results, and no tool is forced on it
    searches = [e for e in events if e.kind == EventKind.TOOL_CALL
                and e.data["tool"] == "search_knowledge_base" and "error" not in e.data]
    assert searches[0].step == 1 and searches[0].data["query"] == question
    first_req, first_resp = loop[0]
    assert first_req["tool_choice"] == "auto"
    assert "<retrieved_data" in first_req["messages"][-1]["content"]
    assert "products/sensor.md" in first_req["messages"][-1]["content"]
    # step 2: the server answers with a parsed tool call, one of the tools offered (which
    # one this 135M model picks moves with the tool list and the server's cache: it searched
    # again before ask_user was offered and before the answer streamed; the streamed attempt
    # this server breaks off leaves its cache otherwise)
    call = first_resp["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] in {t["function"]["name"] for t in first_req["tools"]}
    # (strict=False: the model may end a string with a raw newline; whether it writes valid
    # JSON is not what this test is about, and ragloop sends such arguments back as a tool
    # error)
    assert isinstance(json.loads(call["function"]["arguments"] or "{}", strict=False), dict)
    # the round trip: step 3 sends that call back (content "" beside it, which this server
    # requires) with its tool result, offers no tools, and the server accepts it
    last_req, last_resp = loop[-1]
    assert len(loop) == 2 and last_req["tool_choice"] == "none"
    assistant = next(m for m in last_req["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == call["id"]
    # its result goes back under its id (the search's evidence, or the tool error a query
    # longer than the tool accepts gets)
    assert any(m["role"] == "tool" and m["tool_call_id"] == call["id"] and m["content"]
               for m in last_req["messages"])
    assert last_resp["status"] == 200
    answer = next(e for e in events if e.kind == EventKind.ANSWER)
    assert answer.data["forced"] is (result.status == RunStatus.TRUNCATED)
def test_the_plan_and_grade_replies_are_bounded_in_the_servers_grammar(llama_server):
    """Every string and list of the planner's and the grader's replies carries a bound into
    the server's grammar (a grader id is an enum of the hits shown: this server's grammar
    ignores an integer's maximum), so a small model cannot write one until the budget runs
    out; at the engine's decision budget each decision comes back schema-valid in one call.
    Unbounded, this grader reply ran on in `next_query` past the 300 characters it now
    stops at."""
    wire = WireLog()
    model = chat(llama_server, wire, "llamacpp")
    hits = [Hit(chunk_id=i, doc_id=f"products/{name}.md", section="1", section_title="Ratings",
                text=text) for i, (name, text) in enumerate([
                    ("t9", "The T9 sensor is rated IP67: it survives one metre of water."),
                    ("t7", "The T7 sensor is rated IP54: splashes only.")], start=1)]
    with explained():
        plan = LLMPlanner(model).plan("Is the T9 waterproof, and is the T7?")
        grade = LLMGrader(model).grade("Is the T9 waterproof?", hits)
    assert plan.sub_questions and (grade.kept or grade.discarded)
    sent = {name: req["response_format"]["schema"]["properties"]
            for name, (req, _) in zip(("plan", "grade"), wire.exchanges, strict=False)}
    plan_schema, grade_schema = sent["plan"], sent["grade"]
    assert plan_schema["sub_questions"]["maxItems"] == MAX_SUB_QUESTIONS
    assert plan_schema["sub_questions"]["items"]["maxLength"] == SUB_QUESTION_CHARS
    assert plan_schema["reply"]["anyOf"][0]["maxLength"] == PLAN_REPLY_CHARS
    assert plan_schema["reason"]["anyOf"][0]["maxLength"] == REASON_CHARS
    assert grade_schema["relevant"]["maxItems"] == len(hits)
    assert grade_schema["relevant"]["items"]["enum"] == [1, 2]
    assert grade_schema["missing"]["anyOf"][0]["maxLength"] == MISSING_CHARS
    assert grade_schema["next_query"]["anyOf"][0]["maxLength"] == NEXT_QUERY_CHARS
    # every bound under the repetition cap of llama-server's grammar (2000)
    assert max(SUB_QUESTION_CHARS, PLAN_REPLY_CHARS, MISSING_CHARS, MAX_GRADED_HITS) < 2000
    replies = (PlanReply, grade_reply_for(len(hits)))
    for (_, resp), reply_model in zip(wire.exchanges, replies, strict=True):
        assert resp["status"] == 200
        assert resp["choices"][0]["finish_reason"] == "stop", resp["usage"]
        parse_json_object(resp["choices"][0]["message"]["content"], reply_model)


@pytest.mark.parametrize("dialect", ["llamacpp", "compatible"])
def test_each_json_decision_is_schema_valid_through_constrained_output(llama_server, dialect):
    """llamacpp sends response_format json_object + schema, which this server turns into a
    grammar; the generic form (json_schema) is refused by llama-cpp-python (HTTP 500 from its
    request validation), and the adapter asks again without it."""
    wire = WireLog()
    model = chat(llama_server, wire, dialect)
    hits = [Hit(chunk_id=1, doc_id="products/sensor.md", section="1", section_title="Ratings",
                text="The T9 sensor is rated IP67: it survives one metre of water.")]
    budget = 64  # the grader and rewriter finish well inside it; a 135M model may ramble
    with explained():
        LLMPlanner(model, max_tokens=budget).plan("Is the T9 waterproof?")
    if dialect == "compatible":  # one decision shows the fallback
        assert wire.exchanges[0][1]["status"] == 500  # the server's own request validation
        assert "response_format" not in wire.exchanges[1][0]
        assert wire.exchanges[1][1]["status"] == 200
        return
    with explained():
        grade = LLMGrader(model, max_tokens=budget).grade("Is the T9 waterproof?", hits)
        LLMRewriter(model, max_tokens=budget).rewrite(
            "Is the T9 waterproof?", Grade(kept=[], discarded=hits, enough=False,
                                           missing="the T9's water rating"), [])
        LLMAnswerer(model, words=EN, max_tokens=budget).answer(
            "Is the T9 waterproof?", ["Is the T9 waterproof?"],
            [Evidence(1, "products/sensor.md", "1", "Ratings", hits[0].text, 1)])
    assert grade.kept or grade.discarded
    decisions = [(req, resp) for req, resp in wire.exchanges if resp.get("status") == 200]
    assert len(decisions) >= 4
    schemas = {json.dumps(strict_schema(m), sort_keys=True): m
               for m in (PlanReply, grade_reply_for(len(hits)), RewriteReply, AnswerReply)}
    finished = set()
    for req, resp in decisions:
        fmt = req["response_format"]
        assert fmt["type"] == "json_object"
        reply_model = schemas[json.dumps(fmt["schema"], sort_keys=True)]
        text = resp["choices"][0]["message"]["content"]
        if resp["choices"][0]["finish_reason"] == "stop":  # a grammar-complete reply
            parse_json_object(text, reply_model)  # raises unless schema-valid
            finished.add(reply_model)
    assert {grade_reply_for(len(hits)), RewriteReply} <= finished


def test_ragloop_ask_against_the_server_never_fails(llama_server, small_kb, tmp_path):
    """The acceptance command, as a user runs it."""
    folder = small_kb.store.folder
    small_kb.close()
    with explained():
        proc = subprocess.run(
            [sys.executable, "-m", "ragloop", "ask", "Is the T9 sensor waterproof?",
             "--kb", str(folder), "--route", "agent", "--driver", "tools", "--max-steps", "3",
             "--model", f"openai:{MODEL_ALIAS}", "--base-url", llama_server,
             "--grader-model", "offline"],
            capture_output=True, text=True, timeout=6 * CALL_TIMEOUT_S,
            env={**os.environ, **{f"RAGLOOP_{k.upper()}": str(v) for k, v in SMALL_RUN.items()},
                 "RAGLOOP_REQUEST_TIMEOUT_S": str(CALL_TIMEOUT_S), "RAGLOOP_MAX_RETRIES": "0",
                 "COLUMNS": "60"})
        assert proc.returncode == 0, proc.stderr[-2000:]
    status = re.search(r"status=(\w+)", proc.stdout)
    assert status and status.group(1) in ("answered", "truncated", "unanswerable"), proc.stdout
    # one physical line per tool call, even on a 60-column terminal
    lines = [line for line in proc.stderr.splitlines()
             if line.startswith("step=") and "tool=search_knowledge_base" in line]
    assert lines and " kept=" in lines[0], proc.stderr[-3000:]
    # this server's streamed replies carry no usage: unknown, never 0 tokens / $0
    assert "usage unknown" in proc.stdout and "cost=$0.0000" not in proc.stdout, proc.stdout


def test_a_streamed_reply_without_usage_is_counted_unknown_not_zero(llama_server):
    """llama-cpp-python's server ignores stream_options.include_usage (0.3.36), so a streamed
    reply ends with no usage chunk: the call counts, its usage unknown; a reply that came
    with usage is measured."""
    wire = WireLog()
    model = chat(llama_server, wire, "llamacpp")
    asked = [Message(role="user", content="Say hello.")]
    with explained():
        stream = model.stream(asked, max_tokens=8)
        pieces: list[str] = []
        while True:
            try:
                pieces.append(next(stream))
            except StopIteration as done:
                streamed_reply = done.value
                break
        plain = model.chat(asked, max_tokens=8)
    (req, resp), _ = wire.exchanges
    assert req["stream"] is True and req["stream_options"] == {"include_usage": True}
    assert not any(c.get("usage") for c in resp["chunks"])  # the server sent none
    assert pieces and streamed_reply.usage.calls == 1 and streamed_reply.usage.unmeasured == 1
    assert usage_summary(streamed_reply.usage.to_dict()).startswith("usage unknown")
    assert plain.usage.unmeasured == 0 and plain.usage.output_tokens > 0
    run = Usage()
    run.add(plain.usage)
    run.add(streamed_reply.usage)
    assert usage_summary(run.to_dict()).startswith("usage unknown (1 of 2 model calls")


def test_a_run_through_the_server_streams_its_steps(llama_server, small_kb):
    from test_server import LiveServer, read_sse

    from ragloop.apps.server.app import create_app

    settings = small_kb.settings.with_(model=f"openai:{MODEL_ALIAS}", base_url=llama_server,
                                       max_steps=2, kb=str(small_kb.store.folder),
                                       request_timeout_s=CALL_TIMEOUT_S, max_retries=0,
                                       **SMALL_RUN)
    grader = LocalGrader(small_kb.embedder, reading=EN_RD)
    with LiveServer(create_app(settings, kb=small_kb, grader=grader)) as live, \
            live.client() as client, explained():
        started = client.post("/runs", json={"question": "Is the T9 sensor waterproof?",
                                             "route": "agent", "driver": "tools"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        with client.stream("GET", f"/runs/{run_id}/events") as response:
            events = read_sse(response)
    steps = [d for e, _, d in events if e == "step"]
    kinds = [s["kind"] for s in steps]
    assert kinds[0] == "route" and "tool_call" in kinds and kinds[-1] == "answer"
    assert events[-1][0] == "end" and events[-1][2]["status"] in ("answered", "truncated",
                                                                  "unanswerable")


def test_the_citation_judge_reply_is_schema_valid_through_constrained_output(llama_server):
    """One batched call for every (sentence, passage) pair; the grammar keeps the reply
    schema-valid (whether a 135M model judges well is not the point)."""
    from ragloop.agent.citation_judge import JudgeReply, LLMSupportJudge

    wire = WireLog()
    judge = LLMSupportJudge(chat(llama_server, wire, "llamacpp"), max_tokens=96)
    with explained():
        said = judge.judge([("The T9 is rated IP67.", "The T9 sensor is rated IP67."),
                            ("The T9 runs for 9 years.", "The T9 battery lasts 5 years.")])
    assert len(said) == 2 and all(s in (True, False, None) for s in said)
    # one call for both pairs (asked again only when cut off or unreadable)
    assert wire.exchanges and "id=2" in wire.exchanges[0][0]["messages"][-1]["content"]
    for req, _ in wire.exchanges:
        assert req["response_format"]["schema"] == strict_schema(JudgeReply)
    resp = wire.exchanges[0][1]
    if resp["choices"][0]["finish_reason"] == "stop":
        parse_json_object(resp["choices"][0]["message"]["content"], JudgeReply)


def test_the_answer_streams_from_the_server_before_the_run_ends(llama_server, small_kb):
    """The answerer's reply streamed token by token (stream=True, the answer field read as
    the JSON comes): its first piece arrives while the reply is still being written, and the
    pieces joined are the answer before the citation check."""
    class Recorded(LLMAnswerer):
        def write(self, question, sub_questions, evidence, context=""):
            self.draft = yield from super().write(question, sub_questions, evidence, context)
            return self.draft

    class Recording(Engine):
        def _answerer(self, comps):
            self.answerer = Recorded(comps.chat, words=EN,
                                     max_tokens=self.settings.loop_max_tokens)
            return self.answerer

    wire = WireLog()
    engine = Recording(small_kb, small_kb.settings.with_(**SMALL_RUN, citation_check="off"),
                       chat=chat(llama_server, wire, "llamacpp"),
                       grader=LocalGrader(small_kb.embedder, reading=EN_RD))
    seen: list[tuple[float, object]] = []
    with explained():
        result = engine.ask("Is the T9 sensor waterproof?", route="single",
                            on_event=lambda e: seen.append((time.monotonic(), e)))
    ended = time.monotonic()
    assert result.status in ENDED, result.answer
    pieces = [(t, e) for t, e in seen if isinstance(e, AnswerDeltaEvent)]
    answered_at = next(t for t, e in seen if e.kind == EventKind.ANSWER)
    streamed = [(req, resp) for req, resp in wire.exchanges if req.get("stream")]
    assert streamed and all(req["stream_options"] == {"include_usage": True}
                            for req, _ in streamed)
    # token by token: the server sent the reply in many chunks, and the run got many pieces
    assert len(streamed[-1][1]["chunks"]) > 3
    assert len(pieces) > 1, engine.answerer.draft.text
    # the first piece came while the reply was still being written, well before the end
    assert pieces[0][0] < pieces[-1][0] <= answered_at <= ended
    text = ""
    for _, e in pieces:
        text = e.text if e.reset else text + e.text
    assert text == engine.answerer.draft.text and text.strip()
    # every streamed call counts in the run's usage; its tokens only where the server sends
    # the include_usage chunk (llama-cpp-python 0.3 has no stream_options and sends none;
    # llama.cpp's llama-server and the OpenAI API do: the fake-server tests check those)
    assert result.usage.calls >= 1
    if any(c.get("usage") for _, resp in streamed for c in resp["chunks"]):
        assert result.usage.output_tokens > 0
