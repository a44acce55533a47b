"""The answer streamed as it is written: the providers' own streams assembled (tool calls by
index, tool input from input_json_delta, usage from the last chunk / message_delta), the
answer's pieces through the run, the run store, SSE over real HTTP and the CLI on a terminal."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import random
import subprocess
import sys
import time

import pytest
from fakes.anthropic_server import FakeAnthropicServer, message, thinking, tool_use
from fakes.openai_server import Fail, FakeOpenAIServer, completion, tool_call
from graders import KeepsAll
from test_server import SlowGrader, read_sse, serving

from ragloop.agent.engine import Engine
from ragloop.agent.json_stream import FieldStream
from ragloop.agent.llm_decisions import LLMAnswerer
from ragloop.agent.run import RunContext, drain
from ragloop.core.answer_stream import sentence_pieces, written
from ragloop.core.decisions import Evidence
from ragloop.core.errors import ProviderError
from ragloop.core.events import AnswerDeltaEvent
from ragloop.core.types import EventKind, Usage
from ragloop.language.vocabulary import ENGLISH_WORDS as EN
from ragloop.llm.anthropic import AnthropicChat, assemble_events
from ragloop.llm.base import ChatResponse, Finish, Message, ToolCall, ToolSpec
from ragloop.llm.openai import OpenAIChat, assemble_chunks
from ragloop.llm.scripted import ScriptedChat, anthropic_events, openai_chunks

TWO_CALLS = [ToolCall("call_a", "search_knowledge_base",
                      {"query": "T9 sensor waterproof rating", "page": 1}),
             ToolCall("call_b", "fetch_section", {"doc_id": "products/sensor.md",
                                                   "section": "2"})]
TOOLS = [ToolSpec("search_knowledge_base", "Search.", {"type": "object", "properties": {}})]
QUESTION = "Who approves travel expenses above £2,500?"


def drained(stream):
    """(the pieces a stream yielded, what it returned)."""
    pieces = []
    while True:
        try:
            pieces.append(next(stream))
        except StopIteration as done:
            return pieces, done.value


def deltas(events):
    return [e for e in events if isinstance(e, AnswerDeltaEvent)]


def joined(events) -> str:
    """The answer's pieces since the last reset, joined (what a reader shows)."""
    text = ""
    for e in deltas(events):
        text = e.text if e.reset else text + e.text
    return text


# -- the providers' streams -------------------------------------------------------------------

def test_openai_chunks_assemble_two_parallel_tool_calls_split_across_chunks():
    reply = ChatResponse(text="", tool_calls=TWO_CALLS, model="gpt-x",
                         usage=Usage(input_tokens=12, output_tokens=30))
    chunks = openai_chunks(reply)
    # the arguments come in pieces: a call's first delta has its id and name, the rest not
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls
              and c.choices[0].delta.tool_calls[0].id is None]
    assert len(pieces) >= 8 and chunks[-1].choices == [] and chunks[-1].usage is not None
    text, out = drained(assemble_chunks(chunks, "gpt-x", priced=False))
    assert text == [] and out.tool_calls == TWO_CALLS and out.stop_reason == "tool_calls"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (12, 30)
    # a server that interleaves the two calls' pieces: still assembled by index
    first, body, last = chunks[:1], chunks[1:-2], chunks[-2:]
    by_call = {i: [c for c in body if c.choices[0].delta.tool_calls[0].index == i]
               for i in (0, 1)}
    mixed = [c for pair in zip(by_call[0], by_call[1], strict=False) for c in pair]
    mixed += by_call[0][len(by_call[1]):] + by_call[1][len(by_call[0]):]
    _, again = drained(assemble_chunks(first + mixed + last, "gpt-x", priced=False))
    assert again.tool_calls == TWO_CALLS


def test_openai_chunks_stream_the_text_and_keep_a_cut_off_reply_truncated():
    reply = ChatResponse(text="The CFO approves them [1].", finish=Finish.TRUNCATED,
                         model="gpt-x")
    text, out = drained(assemble_chunks(openai_chunks(reply), "gpt-x", priced=False))
    assert len(text) == 5 and "".join(text) == reply.text == out.text
    assert out.finish is Finish.TRUNCATED and out.stop_reason == "length"


def test_anthropic_events_assemble_text_and_two_tool_inputs_from_input_json_delta():
    reply = ChatResponse(text="Let me look.", tool_calls=TWO_CALLS, model="claude-x",
                         usage=Usage(input_tokens=40, output_tokens=22))
    events = anthropic_events(reply)
    partial = [e for e in events if e.type == "content_block_delta"
               and e.delta.type == "input_json_delta"]
    assert len(partial) >= 8
    text, out = drained(assemble_events(events, "claude-x"))
    assert "".join(text) == "Let me look." == out.text
    assert out.tool_calls == TWO_CALLS and out.stop_reason == "tool_use"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (40, 22)
    assert [b["type"] for b in out.raw_blocks] == ["text", "tool_use", "tool_use"]


def test_openai_sdk_streams_from_a_real_http_server_and_counts_usage():
    with FakeOpenAIServer() as server:
        server.enqueue(completion(None, tool_calls=[
            tool_call("search_knowledge_base", json.dumps(TWO_CALLS[0].arguments), "call_a"),
            tool_call("fetch_section", json.dumps(TWO_CALLS[1].arguments), "call_b")],
            prompt_tokens=50, completion_tokens=20),
            completion("Flights need 14 days' notice [1].", prompt_tokens=80,
                       completion_tokens=9))
        chat = OpenAIChat("gpt-4o-mini", api_key="sk-test", base_url=f"{server.url}/v1",
                          max_retries=0, timeout=5)
        text, calls = drained(chat.stream([Message("user", "hi")], tools=TOOLS))
        assert text == [] and calls.tool_calls == TWO_CALLS
        body = server.requests[0].body
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        text, answer = drained(chat.stream([Message("user", "hi")]))
        assert len(text) > 3 and "".join(text) == answer.text
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (80, 9)


def test_a_server_that_cannot_stream_tool_calls_is_asked_again_without_streaming():
    refusal = {"error": {"message": "Automatic streaming tool choice is not supported",
                         "type": "internal_server_error"}}
    with FakeOpenAIServer() as server:
        server.enqueue(Fail(500, refusal), completion(None, tool_calls=[
            tool_call("search_knowledge_base", '{"query": "T9"}')]), completion("IP67 [1]."))
        chat = OpenAIChat("m", base_url=f"{server.url}/v1", max_retries=0, timeout=5,
                          provider="llamacpp", dialect="llamacpp")
        _, reply = drained(chat.stream([Message("user", "hi")], tools=TOOLS))
        assert reply.tool_calls[0].arguments == {"query": "T9"}
        text, again = drained(chat.stream([Message("user", "hi")], tools=TOOLS))
        assert text == ["IP67 [1]."] == [again.text]
        assert [r.body.get("stream") for r in server.requests] == [True, None, None]


def test_a_stream_broken_off_before_its_first_chunk_is_asked_again_without_streaming():
    with FakeOpenAIServer() as server:
        server.enqueue({"id": "x", "choices": []},  # an empty stream, no finish_reason
                       completion(None, tool_calls=[tool_call("search_knowledge_base",
                                                              '{"query": "T9"}')]))
        chat = OpenAIChat("m", base_url=f"{server.url}/v1", max_retries=0, timeout=5,
                          provider="llamacpp", dialect="llamacpp")
        _, reply = drained(chat.stream([Message("user", "hi")], tools=TOOLS))
        assert reply.tool_calls[0].arguments == {"query": "T9"}
        # without tools offered, a broken stream is the server's error, not a fallback
        server.enqueue({"id": "x", "choices": []})
        with pytest.raises(ProviderError, match="ended before its reply"):
            drained(chat.stream([Message("user", "hi")]))


def test_anthropic_sdk_streams_thinking_text_and_tool_use_from_a_real_http_server():
    think = thinking("", "sig-" + "x" * 40)
    with FakeAnthropicServer() as server:
        server.enqueue(message("Searching.", tool_uses=[
            tool_use("search_knowledge_base", TWO_CALLS[0].arguments, "call_a"),
            tool_use("fetch_section", TWO_CALLS[1].arguments, "call_b")],
            blocks_before=[think], input_tokens=70, output_tokens=33, cache_read=5))
        chat = AnthropicChat("claude-sonnet-5-5", api_key="sk-test", base_url=server.url,
                             max_retries=0, timeout=5)
        text, out = drained(chat.stream([Message("user", "hi")], tools=TOOLS))
    assert "".join(text) == "Searching." == out.text and len(text) == 1
    assert out.tool_calls == TWO_CALLS
    assert server.requests[0].body["stream"] is True
    # the thinking block and its signature, whole, to go back verbatim
    assert out.raw_blocks[0] == {"type": "thinking", "thinking": "",
                                 "signature": think["signature"]}
    assert (out.usage.input_tokens, out.usage.output_tokens, out.usage.cache_read_tokens) == \
        (70, 33, 5)


# -- the answer's pieces ---------------------------------------------------------------------

def test_the_answer_field_streams_as_the_json_is_written_whatever_the_cuts():
    rng = random.Random(0)
    for value in ["  The S400 lasts 9 h [1].\nSee \"the manual\" \\ é 😀.  ", "x", ""]:
        for ascii_only in (True, False):
            raw = "<think>…</think>" + json.dumps({"answer": value, "missing": ['"answer"']},
                                                  ensure_ascii=ascii_only)
            for _ in range(100):
                cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(0, 20)))
                parts = [raw[i:j] for i, j in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
                reading = FieldStream("answer")
                assert "".join(reading.feed(p) for p in parts) == value.strip()


def test_sentence_pieces_join_back_to_the_text():
    text = "The CFO approves [1]. Flights: 14 days [2][3]!\nWhy? Policy.  "
    assert sentence_pieces(text) == ["The CFO approves [1]. ", "Flights: 14 days [2][3]!\n",
                                     "Why? ", "Policy.  "]
    assert "".join(sentence_pieces(text)) == text and sentence_pieces("") == []


def evidence() -> list[Evidence]:
    return [Evidence(1, "policies/travel.md", "1", "Approvals",
                     "Expenses above £2,500 need the CFO's approval.", 1)]


def test_the_llm_answerer_streams_its_answer_field_and_resets_when_asked_again():
    answer = {"answer": "The CFO approves expenses above £2,500 [1].", "missing": []}
    chat = ScriptedChat([ChatResponse(text=json.dumps(answer)[:40], finish=Finish.TRUNCATED),
                         json.dumps(answer)], wire="openai")
    events, draft = drained(LLMAnswerer(chat, words=EN).write(QUESTION, [], evidence()))
    assert draft.text == answer["answer"]
    resets = [i for i, e in enumerate(events) if e.reset]
    # the cut-off reply streamed the start of its answer, then the reply asked again did
    assert len(resets) == 1 and 0 < resets[0] < len(events) - 3
    assert joined(events) == draft.text
    assert LLMAnswerer(ScriptedChat([json.dumps(answer)]), words=EN).answer(
        QUESTION, [], evidence()).text == draft.text  # `answer` is the same writing, drained
    assert written(LLMAnswerer(ScriptedChat([json.dumps(answer)]), words=EN).write(
        QUESTION, [], evidence())) == draft


def test_offline_the_answer_streams_a_sentence_at_a_time_and_is_not_stored(small_kb):
    events = []
    result = Engine(small_kb).ask(QUESTION, route="agent", on_event=events.append)
    pieces = deltas(events)
    answer = next(e for e in events if e.kind == EventKind.ANSWER)
    assert pieces and not any(p.reset for p in pieces)
    assert len(pieces) == len(sentence_pieces(result.answer)) > 1
    if not answer.changed_by_check:
        assert joined(events) == answer.text == result.answer
    # the pieces come after the last search and before the answer event, in seq order
    kinds = [e.kind for e in events]
    assert kinds.index(EventKind.ANSWER_DELTA) > max(
        i for i, k in enumerate(kinds) if k == EventKind.TOOL_CALL)
    assert kinds[-1] == EventKind.ANSWER and [e.seq for e in events] == sorted(
        e.seq for e in events)
    stored = small_kb.backend.runs.events(result.run_id)
    assert [e.seq for e in stored] == [e.seq for e in events if e.kind != "answer_delta"]


def test_a_tools_reply_that_goes_on_to_search_is_reset_and_the_checks_say_what_changed(
        small_kb):
    chat = ScriptedChat([
        ChatResponse(text="Let me search.", tool_calls=[
            ToolCall("c1", "search_knowledge_base", {"query": "travel approval threshold"})]),
        ChatResponse(text="The CFO approves them [1]. Also see [9]."),
    ], wire="anthropic")
    events = []
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=4, citation_check="offline"),
                    chat=chat, grader=KeepsAll())
    result = engine.ask(QUESTION, route="agent", driver="tools", on_event=events.append)
    pieces = deltas(events)
    assert "".join(p.text for p in pieces[:3]) == "Let me search." and pieces[3].reset
    assert joined(events) == "The CFO approves them [1]. Also see [9]."
    answer = next(e for e in events if e.kind == EventKind.ANSWER)
    # [9] names no evidence: the check takes it out, and the answer event says so
    assert answer.invalid_citations == [9] and answer.changed_by_check is True
    assert "[9]" not in result.answer == answer.text


def test_an_answer_written_whole_still_streams_before_the_answer_event(small_kb):
    """A reply salvaged from broken JSON (no `answer` field to stream) comes as pieces
    before the AnswerEvent: the pieces always join to the answer before its checks."""
    chat = ScriptedChat(["The CFO approves them [1].", "The CFO approves them [1]."],
                        repeat_last=True)
    ctx = RunContext(QUESTION, 4)
    events = []
    draft = drain(LLMAnswerer(chat, words=EN).write(QUESTION, [], evidence()), ctx, events.append)
    assert events == [] and draft.text == "The CFO approves them [1]."
    result_events = []
    engine = Engine(small_kb, small_kb.settings.with_(citation_check="offline"), chat=chat,
                    grader=KeepsAll())
    engine.ask(QUESTION, route="single", on_event=result_events.append)
    answer = next(e for e in result_events if e.kind == EventKind.ANSWER)
    assert deltas(result_events) and joined(result_events) == "The CFO approves them [1]."
    # before the answer event, sharing its seq (the step they come before)
    assert result_events.index(answer) > result_events.index(deltas(result_events)[-1])
    assert {e.seq for e in deltas(result_events)} == {answer.seq}


# -- SSE and the CLI -------------------------------------------------------------------------

def test_sse_carries_the_answer_pieces_in_order_and_a_late_reader_gets_the_answer(small_kb):
    with serving(small_kb, grader=SlowGrader(small_kb, 0.3)) as live, live.client() as client:
        run_id = client.post("/runs", json={"question": QUESTION, "route": "agent"}).json()[
            "run_id"]
        with client.stream("GET", f"/runs/{run_id}/events") as response:
            events = read_sse(response)
        with client.stream("GET", f"/runs/{run_id}/events") as response:
            late = read_sse(response)
    steps = [d for e, _, d in events if e == "step"]
    ids = [int(i) for e, i, _ in events if e == "step"]
    assert ids == [s["seq"] for s in steps] == list(range(len(steps)))
    pieces = [(i, d) for i, (e, _, d) in enumerate(events) if e == "answer_delta"]
    answer_at = next(i for i, (e, _, d) in enumerate(events)
                     if e == "step" and d["kind"] == "answer")
    answer = events[answer_at][2]
    # the pieces: no id (not a step to resume from), before the answer, after every search
    assert pieces and all(events[i][1] is None for i, _ in pieces)
    assert all(i < answer_at for i, _ in pieces)
    assert all(d["kind"] == "answer_delta" and d["seq"] == answer["seq"] for _, d in pieces)
    if not answer["data"].get("changed_by_check"):
        assert "".join(d["data"]["text"] for _, d in pieces) == answer["data"]["text"]
    # after the run: the stored steps, the answer whole, no half stream
    assert [e for e, _, _ in late if e == "answer_delta"] == []
    assert [d for e, _, d in late if e == "step"] == steps
    assert late[-1][0] == "end" and late[-1][2]["status"] == events[-1][2]["status"]


def test_a_follower_resuming_mid_answer_is_told_to_drop_the_pieces_it_had(small_kb):
    """Reconnecting with the last step's id while the answer is written replays its pieces
    from the start, after a reset."""
    from ragloop.apps.jobs import JobRunner

    engine = Engine(small_kb)
    runner = JobRunner(engine, small_kb.backend.runs)
    run_id = "resume1"
    steps = engine.runs.events(engine.ask(QUESTION, route="agent").run_id)
    pieces = [AnswerDeltaEvent(text=t, seq=steps[-1].seq, step=steps[-1].step)
              for t in ("The CFO ", "approves [1].")]
    runner.live[run_id] = [*steps[:-1], *pieces]

    async def follow(after: int) -> list:
        out = []
        async for item in runner.follow(run_id, after):
            out.append(item)
            if len(out) == 3 or item is None:
                break
        return out

    resumed = asyncio.run(follow(steps[-2].seq))
    assert [e.reset for e in resumed] == [True, None, None]
    assert [e.text for e in resumed[1:]] == ["The CFO ", "approves [1]."]
    fresh = asyncio.run(follow(steps[-3].seq))
    assert fresh[0] == steps[-2] and fresh[1] == pieces[0]  # a step first: nothing to drop
    runner.shutdown()


def test_a_follower_mid_answer_when_the_run_ends_still_gets_every_piece(small_kb):
    """The run ends (its in-process list dropped) between two reads of a follower that was
    in the middle of the answer: the second read still gives the pieces written since, which
    the store never holds."""
    from ragloop.apps.jobs import JobRunner

    engine = Engine(small_kb)
    runner = JobRunner(engine, small_kb.backend.runs)
    run_id = engine.ask(QUESTION, route="agent").run_id
    steps = engine.runs.events(run_id)
    first, second = (AnswerDeltaEvent(text=t, seq=steps[-1].seq, step=steps[-1].step)
                     for t in ("The CFO ", "approves [1]."))
    for event in [*steps[:-1], first]:
        runner.heard(run_id, event)
    seen, read = runner.events_after(run_id, -1)
    assert seen[-1] == first and read is not None
    runner.heard(run_id, second)
    runner.heard(run_id, steps[-1])
    runner.heard(run_id, None)  # the run ended: its list leaves `live`
    rest, _ = runner.events_after(run_id, steps[-2].seq, read)
    assert rest == [second, steps[-1]]
    # a reader that comes after the end gets the stored steps: no half stream
    late, _ = runner.events_after(run_id, -1)
    assert late == steps and not any(isinstance(e, AnswerDeltaEvent) for e in late)
    runner.shutdown()


def test_a_follower_reads_no_run_row_per_answer_piece(small_kb):
    """While a run goes in this process its follower is woken per answer piece; it reads the
    run's row only once the run is no longer going here (its end), not on every wake-up."""
    from ragloop.apps.jobs import JobRunner
    from ragloop.core.types import RunStatus

    store = small_kb.backend.runs

    class CountingRuns:
        def __init__(self) -> None:
            self.gets = 0

        def get(self, run_id):
            self.gets += 1
            return store.get(run_id)

        def __getattr__(self, name):
            return getattr(store, name)

    runs = CountingRuns()
    runner = JobRunner(Engine(small_kb), runs)
    run_id = store.start(QUESTION, run_id="pieces1")
    pieces = [AnswerDeltaEvent(text=f"{i} ", seq=0, step=1) for i in range(20)]

    async def follow() -> list:
        out = []
        stream = runner.follow(run_id)
        runner.heard(run_id, pieces[0])
        for piece in pieces[1:]:  # one piece per wake-up
            out.append(await anext(stream))
            runner.heard(run_id, piece)
        out.append(await anext(stream))
        store.finish(run_id, {"status": RunStatus.ANSWERED, "answer": "done"})
        runner.heard(run_id, None)
        async for item in stream:
            out.append(item)
        return out

    got = asyncio.run(asyncio.wait_for(follow(), 30))
    assert got[:-1] == pieces and got[-1]["status"] == RunStatus.ANSWERED
    assert runs.gets == 1, runs.gets
    runner.shutdown()


def run_on_a_terminal(args: list[str], typed: str = "") -> str:
    """`ragloop …` with stdout on a pseudo-terminal (stderr apart, `typed` as its input):
    what it printed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "ragloop", *args], stdout=follower,
                            stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    assert proc.stdin is not None
    proc.stdin.write(typed.encode())
    proc.stdin.close()
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0, out
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_ragloop_ask_prints_the_answer_once_as_it_comes_then_its_sources(small_kb):
    folder = str(small_kb.store.folder)
    small_kb.close()
    shown = run_on_a_terminal(["ask", QUESTION, "--kb", folder, "--route", "agent"])
    as_json = subprocess.run([sys.executable, "-m", "ragloop", "ask", QUESTION, "--kb", folder,
                              "--route", "agent", "--json"], capture_output=True, text=True,
                             check=True)
    data = json.loads(as_json.stdout)
    assert "answer_delta" not in as_json.stdout and data["citations"]
    first = data["answer"].split(". ")[0]
    # streamed once (not again after the run, unless the checks changed it), then sources
    assert shown.count(first) == 1, shown
    assert shown.index(first) < shown.index(f"[{data['citations'][0]['n']}] → ")
    assert "status=" in shown


def test_ragloop_chat_prints_each_answer_once_as_it_comes(small_kb):
    folder = str(small_kb.store.folder)
    small_kb.close()
    shown = run_on_a_terminal(["chat", "--kb", folder],
                              typed=f"{QUESTION}\nHow far ahead must flights be booked?\n")
    engine_answers = [json.loads(subprocess.run(
        [sys.executable, "-m", "ragloop", "ask", q, "--kb", folder, "--json"],
        capture_output=True, text=True, check=True).stdout)["answer"]
        for q in (QUESTION, "How far ahead must flights be booked?")]
    for answer in engine_answers:
        assert shown.count(answer.split(". ")[0]) == 1, shown
    assert shown.count("status=") == 2
