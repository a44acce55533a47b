"""The OpenAI-compatible endpoint with the official `openai` SDK as the client, against the real
server (uvicorn on loopback, a real knowledge base, offline runs): what the SDK receives must
parse as its own types (ChatCompletion, ChatCompletionChunk, Model), with the key and without."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from test_clarify_runs import AMBIGUOUS, SENSORS
from test_server import LiveServer, copy_kb, read_sse, serving

from ragloop.agent.run import RunResult
from ragloop.apps.server.openai_compat import (
    CHECKED_NOTE,
    SOURCES_HEADING,
    conversation,
    full_content,
    strip_reasoning,
)
from ragloop.apps.server.openai_compat import ChatMessage as Msg
from ragloop.core.conversation import Turn
from ragloop.core.types import RunStatus, Usage
from ragloop.language.text import ENGLISH_READING
from ragloop.offline.grader import LocalGrader

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

KEY = "test-key-9f1c2"
FIRST = "Who must approve travel expenses above £2,500?"
SENSOR = "What battery does the T9 sensor use?"
FOLLOW_UP = "Is it waterproof?"


@pytest.fixture(scope="module")
def openai_kb(small_kb_template, tmp_path_factory):
    kb = copy_kb(small_kb_template, tmp_path_factory.mktemp("openai") / "kb")
    yield kb
    kb.close()


@pytest.fixture(scope="module", params=["keyless", "key"])
def live(request, openai_kb):
    """The server on loopback without a key (the loopback rules), then with RAGLOOP_API_KEY."""
    key = KEY if request.param == "key" else None
    with serving(openai_kb, api_key=key) as server:
        server.key = key
        yield server


@pytest.fixture
def sdk(live) -> openai.OpenAI:
    # without a key the SDK still needs one to send: the keyless server ignores it
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=live.key or "unused",
                         max_retries=0, timeout=120)


def _ask(messages: list[dict]) -> list[dict]:
    return [{"role": "system", "content": "You are a helpful assistant."}, *messages]


def _stream(sdk: openai.OpenAI, messages: list[dict]) -> list[ChatCompletionChunk]:
    chunks = list(sdk.chat.completions.create(
        model="ragloop", messages=messages, stream=True,
        stream_options={"include_usage": True}))
    assert chunks and all(isinstance(c, ChatCompletionChunk) for c in chunks)
    return chunks


def _joined(chunks: list[ChatCompletionChunk], field: str) -> str:
    out = []
    for c in chunks:
        for choice in c.choices:
            delta = choice.delta
            value = delta.content if field == "content" else (delta.model_extra or {}).get(field)
            out.append(value or "")
    return "".join(out)


def test_models_list_the_engine_and_the_knowledge_base(sdk) -> None:
    models = list(sdk.models.list())
    assert models and all(isinstance(m, Model) for m in models)
    ids = [m.id for m in models]
    assert ids[0] == "ragloop" and "kb" in ids  # the knowledge base's folder name
    assert {m.object for m in models} == {"model"} and {m.owned_by for m in models} == {"ragloop"}


def test_a_question_not_streamed_is_a_chat_completion_with_steps_and_citations(sdk, live):
    reply = sdk.chat.completions.create(model="ragloop",
                                        messages=_ask([{"role": "user", "content": FIRST}]))
    assert isinstance(reply, ChatCompletion) and reply.object == "chat.completion"
    assert reply.id.startswith("chatcmpl-") and reply.model == "ragloop"
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    content = choice.message.content or ""
    assert "Chief Financial Officer" in content
    assert f"\n\n{SOURCES_HEADING}\n" in content
    assert "policies/travel.md §4.2" in content.split(SOURCES_HEADING)[1]
    extra = choice.message.model_extra or {}
    assert "Searched" in extra["reasoning_content"] and "Route:" in extra["reasoning_content"]
    cited = {(c["doc_id"], c["section"]) for c in extra["citations"]}
    assert ("policies/travel.md", "4.2") in cited
    assert all(c["title"] for c in extra["citations"])
    assert reply.usage is not None and reply.usage.total_tokens == 0  # offline: no model calls

    # the run went through the engine like any other, recorded as the API's
    run_id = reply.id.removeprefix("chatcmpl-")
    headers = {"Authorization": f"Bearer {live.key}"} if live.key else {}
    with live.client(headers=headers) as client:
        run = client.get(f"/runs/{run_id}").json()
    assert run["source"] == "api" and run["question"] == FIRST and run["status"] == "answered"


def test_streamed_chunks_carry_the_steps_then_the_same_answer(sdk) -> None:
    messages = _ask([{"role": "user", "content": FIRST}])
    whole = sdk.chat.completions.create(model="ragloop", messages=messages)
    chunks = _stream(sdk, messages)

    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    reasoning = _joined(chunks, "reasoning_content")
    assert reasoning.startswith("Route:") and "Searched" in reasoning
    assert reasoning == whole.choices[0].message.model_extra["reasoning_content"]
    # the steps come before the answer: reasoning chunks first, then content
    with_choice = [c.choices[0].delta for c in chunks if c.choices]
    thinking = [i for i, d in enumerate(with_choice)
                if (d.model_extra or {}).get("reasoning_content")]
    writing = [i for i, d in enumerate(with_choice) if d.content]
    assert thinking and writing and max(thinking) < min(writing)
    assert _joined(chunks, "content") == whole.choices[0].message.content

    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    citations = (finals[0].choices[0].delta.model_extra or {})["citations"]
    assert citations == whole.choices[0].message.model_extra["citations"]
    # stream_options.include_usage: one more chunk, with no choices, carries the usage
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])


def test_a_two_turn_conversation_streamed_and_not(sdk) -> None:
    first = sdk.chat.completions.create(model="kb",
                                        messages=_ask([{"role": "user", "content": SENSOR}]))
    assert "CR123A" in (first.choices[0].message.content or "")
    history = [{"role": "user", "content": SENSOR},
               {"role": "assistant", "content": first.choices[0].message.content},
               {"role": "user", "content": FOLLOW_UP}]
    second = sdk.chat.completions.create(model="kb", messages=_ask(history))
    # the follow-up was made standalone from the history before searching, and the steps
    # say what was searched
    reasoning = second.choices[0].message.model_extra["reasoning_content"]
    searched = reasoning.splitlines()[0]
    assert searched.startswith("Follow-up, searched as") and "T9" in searched, reasoning
    # the queries themselves: the follow-up with the previous one, and as typed, fused
    assert searched.endswith(f'"{FOLLOW_UP}", fused'), searched
    content = second.choices[0].message.content or ""
    assert "IP67" in content, content
    cited = {(c["doc_id"], c["section"])
             for c in second.choices[0].message.model_extra["citations"]}
    assert ("products/sensor.md", "1") in cited

    chunks = _stream(sdk, _ask(history))
    assert _joined(chunks, "content") == content
    assert _joined(chunks, "reasoning_content") == reasoning


# -- the key and the errors -----------------------------------------------------------------


def test_a_wrong_or_missing_key_is_a_401_in_openai_shape(live) -> None:
    if live.key is None:
        pytest.skip("the keyless server asks for no key")
    wrong = openai.OpenAI(base_url=f"{live.url}/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.chat.completions.create(model="ragloop",
                                      messages=[{"role": "user", "content": FIRST}])
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    assert caught.value.type == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        list(wrong.models.list())
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="ragloop", stream=True,
                                      messages=[{"role": "user", "content": FIRST}])
    # no key at all (the SDK always sends one): the same error shape
    missing = httpx.post(f"{live.url}/v1/chat/completions", timeout=30,
                         json={"model": "ragloop", "messages": [{"role": "user",
                                                                 "content": FIRST}]})
    assert missing.status_code == 401
    error = missing.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "API key" in error["message"]


def test_bad_requests_get_openai_errors(sdk, live) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_found" and "ragloop" in caught.value.message
    bad = [
        ([{"role": "assistant", "content": "hello"}], "last message"),
        ([{"role": "user", "content": "   "}], "empty"),
        ([{"role": "user", "content": [{"type": "image_url",
                                        "image_url": {"url": "http://x/y.png"}}]}],
         "only text"),
        ([{"role": "user", "content": "q"}, {"role": "tool", "content": "r",
                                             "tool_call_id": "1"},
          {"role": "user", "content": "q2"}], "tool"),
        ([{"role": "user", "content": "x" * 4001}], "longer than"),
    ]
    for messages, said in bad:
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.chat.completions.create(model="ragloop", messages=messages)
        assert said in caught.value.message, (messages, caught.value.message)
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model="ragloop", n=2,
                                    messages=[{"role": "user", "content": FIRST}])
    # a body that is not the schema: 400 (not 422), OpenAI's shape
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="ragloop", messages=[{"role": "wizard",
                                                                "content": "x"}])
    assert caught.value.type == "invalid_request_error"
    headers = {"Authorization": f"Bearer {live.key}"} if live.key else {}
    with live.client(headers=headers) as client:
        wrong_method = client.get("/v1/chat/completions")
        too_large = client.post("/v1/chat/completions", content=b"{" + b" " * (2 << 20) + b"}",
                                headers={"Content-Type": "application/json"})
        # without a key, another web page cannot post here (the loopback rules, unchanged)
        cross = client.post("/v1/chat/completions", headers={"Origin": "http://evil.test"},
                            json={"model": "ragloop", "messages": [{"role": "user",
                                                                    "content": FIRST}]})
    if live.key is None:
        assert cross.status_code == 403 and "Cross-origin" in cross.json()["error"]["message"]
    for reply in (wrong_method, too_large):
        assert reply.status_code in (405, 413)
        assert set(reply.json()["error"]) == {"message", "type", "param", "code"}


def test_a_run_that_fails_is_an_openai_error_streamed_and_not(openai_kb) -> None:
    class BrokenGrader:
        def grade(self, question, hits):
            raise RuntimeError("grader down")

    with serving(openai_kb, grader=BrokenGrader()) as live:
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": FIRST}]
        with pytest.raises(openai.InternalServerError) as caught:
            sdk.chat.completions.create(model="ragloop", messages=messages)
        assert caught.value.type == "server_error"
        with pytest.raises(openai.APIError, match="internal error"):
            list(sdk.chat.completions.create(model="ragloop", messages=messages, stream=True))


def _held_grader(kb) -> tuple[object, threading.Event, threading.Event]:
    """A grader that holds its run until `release` is set (`graded`: the run reached it),
    so a test can look at a run while it goes."""
    graded, release = threading.Event(), threading.Event()
    inner = LocalGrader(kb.embedder, reading=EN_RD)

    class HeldGrader:
        usage = Usage()

        def grade(self, question, hits):
            graded.set()
            release.wait(60)
            return inner.grade(question, hits)

    return HeldGrader(), graded, release


def test_a_chat_completion_is_a_live_run_of_the_server_while_it_runs(openai_kb) -> None:
    """A completion's run is in the server's live list like a run started at POST /runs:
    counted in /healthz's active_runs, and followed at /runs/{id}/events with the answer's
    pieces (those are never stored: only the live list has them); it leaves the list when
    it ends. The grader is held mid-run so the test looks while the run goes."""
    grader, graded, release = _held_grader(openai_kb)
    with serving(openai_kb, grader=grader) as live, live.client() as http:
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0,
                            timeout=120)
        chunks: list[ChatCompletionChunk] = []
        messages = [{"role": "user", "content": FIRST}]
        client = threading.Thread(target=lambda: chunks.extend(_stream(sdk, messages)))
        client.start()
        try:
            assert graded.wait(20), "the run never reached its grader"
            assert http.get("/healthz").json()["active_runs"] == 1
            running = [r for r in http.get("/runs").json()["runs"] if r["status"] == "running"]
            assert [r["source"] for r in running] == ["api"]
            run_id = running[0]["run_id"]
            with http.stream("GET", f"/runs/{run_id}/events", timeout=30) as response:
                release.set()
                events = read_sse(response)
        finally:
            release.set()
            client.join(120)
        assert chunks and chunks[0].id == f"chatcmpl-{run_id}"
        pieces = "".join(d["data"]["text"] for e, _, d in events if e == "answer_delta")
        assert pieces and pieces.strip() in _joined(chunks, "content")
        assert events[-1][0] == "end" and events[-1][2]["status"] == "answered"
        assert http.get("/healthz").json()["active_runs"] == 0
        # POST /ask's run is one too, and leaves the list as it ends
        assert http.post("/ask", json={"question": FIRST}).status_code == 200
        assert http.get("/healthz").json()["active_runs"] == 0


@pytest.mark.parametrize("setting", ["on", "off"])
def test_a_streamed_run_stops_when_its_client_disconnects(openai_kb, setting) -> None:
    """A streamed completion's client leaves mid-run (the grader holds the run meanwhile):
    with RAGLOOP_STOP_ON_DISCONNECT on (the default) the run stops at its next event, ending
    `failed` with the reason; off, it runs to its answer."""
    import json
    import time

    from test_server import offline_settings

    from ragloop.apps.server.app import create_app

    grader, graded, release = _held_grader(openai_kb)
    settings = offline_settings(openai_kb).with_(stop_on_disconnect=setting)
    app = create_app(settings, kb=openai_kb, grader=grader)
    with LiveServer(app) as live, live.client() as http:
        body = {"model": "ragloop", "stream": True,
                "messages": [{"role": "user", "content": FIRST}]}
        try:
            with http.stream("POST", "/v1/chat/completions", json=body) as response:
                # the lines iterator is kept: a closed one would close the connection (httpcore)
                lines = response.iter_lines()
                first = next(line for line in lines if line.startswith("data:"))
                run_id = json.loads(first.removeprefix("data:"))["id"].removeprefix("chatcmpl-")
                assert graded.wait(60), "the run never reached its grader"
                assert http.get(f"/runs/{run_id}").json()["status"] == "running"
            # the connection is closed here, the run still held in its grader
            time.sleep(1.0)
        finally:
            release.set()
        deadline = time.monotonic() + 60
        while (run := http.get(f"/runs/{run_id}").json())["status"] == "running":
            assert time.monotonic() < deadline, "the run never ended"
            time.sleep(0.1)
        if setting == "on":
            assert run["status"] == "failed", run
            assert "client of the streamed reply disconnected" in run["error"]
        else:
            assert run["status"] == "answered" and run["answer"]
        assert http.get("/healthz").json()["active_runs"] == 0


# -- messages as a conversation -------------------------------------------------------------


def test_messages_become_the_question_and_the_turns_before_it() -> None:
    answer = (f"<think>Route: single</think>The CFO approves. [1]\n\n{SOURCES_HEADING}\n"
              "[1] Travel and Expense Policy › 4.2 Approval thresholds — policies/travel.md §4.2")
    messages = [Msg(role="system", content="be brief"),
                Msg(role="assistant", content="Hello! Ask me anything."),
                Msg(role="user", content=[{"type": "text", "text": FIRST}]),
                Msg(role="assistant", content=answer),
                Msg(role="user", content="unanswered"),
                Msg(role="user", content=FOLLOW_UP)]
    question, turns = conversation(messages)
    assert question == FOLLOW_UP
    # no run of this server wrote that answer: plain history, its text without the sources
    assert turns == [Turn(question=FIRST, answer="The CFO approves. [1]"),
                     Turn(question="unanswered")]
    assert CHECKED_NOTE not in answer


def test_reasoning_blocks_are_cut_in_linear_time() -> None:
    """A lazy `<think>.*?</think>` took 68 s on `"<think>" * 28500` (issue 39): the parse is
    linear, and cuts the same blocks the pattern did."""
    import time

    for hostile in ("<think>" * 28500, "<details" * 25000, "<details>" * 22000,
                    "[1] a" + " " * 990 + "b\n" * 1, f"x\n\n{SOURCES_HEADING}\n"
                    + ("[1] a" + " " * 900 + "b\n") * 200):
        started = time.perf_counter()
        _, turns = conversation([Msg(role="user", content=FIRST),
                                 Msg(role="assistant", content=hostile),
                                 Msg(role="user", content=FOLLOW_UP)])
        assert time.perf_counter() - started < 0.5, hostile[:20]
        assert len(turns) == 1
    assert strip_reasoning("a<THINK>x</think>b<think>y") == "ab<think>y"
    assert strip_reasoning("<details open>s</details>c<details>d") == "c<details>d"
    assert strip_reasoning("<think><details>x</think>y</details>z") == "y</details>z"


def test_reading_the_messages_never_holds_up_other_requests(openai_kb, monkeypatch) -> None:
    """The messages are read off the event loop: while one request's parsing is slow,
    /healthz answers at once; the 200 KB `<think>` history is read in well under a second."""
    import time

    from ragloop.apps.server import openai_compat

    real = openai_compat.conversation
    parsing = threading.Event()

    def slow(messages, *answered):
        if any("slow-parse" in (m.content or "") for m in messages
               if isinstance(m.content, str)):
            parsing.set()
            time.sleep(3)  # CPU-bound work, as a blocking call: it must not stall the loop
        return real(messages, *answered)

    monkeypatch.setattr(openai_compat, "conversation", slow)
    with serving(openai_kb) as live, live.client() as http:
        slow_body = {"model": "ragloop", "messages": [
            {"role": "user", "content": "slow-parse"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": FIRST}]}
        replies: list[httpx.Response] = []
        sender = threading.Thread(target=lambda: replies.append(
            http.post("/v1/chat/completions", json=slow_body)))
        sender.start()
        try:
            assert parsing.wait(30)
            with live.client() as other:
                started = time.perf_counter()
                assert other.get("/healthz").status_code == 200
                assert time.perf_counter() - started < 1.5
        finally:
            sender.join(120)
        assert replies and replies[0].status_code == 200
        hostile = {"model": "ragloop", "messages": [
            {"role": "user", "content": FIRST}, {"role": "assistant", "content": "<think>" * 28500},
            {"role": "user", "content": FOLLOW_UP}]}
        started = time.perf_counter()
        parsed = real([Msg(**m) for m in hostile["messages"]])
        assert time.perf_counter() - started < 0.5 and parsed[0] == FOLLOW_UP
        reply = http.post("/v1/chat/completions", json=hostile, timeout=60)
        assert reply.status_code == 200, reply.text


def test_on_postgres_the_model_is_the_database_and_runs_land_in_its_run_store(pg_small_url):
    """A Postgres knowledge base, the server running no queue workers of its own: a chat
    completion still runs (the server's pool, as POST /ask) and is stored in Postgres."""
    from urllib.parse import urlsplit

    from test_server import LiveServer

    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings

    database = urlsplit(pg_small_url).path.strip("/")
    app = create_app(Settings().with_(kb=pg_small_url, model="offline"), local_workers=0)
    with LiveServer(app) as live, live.client() as client:
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in sdk.models.list()] == ["ragloop", database]
        messages = [{"role": "user", "content": FIRST}]
        whole = sdk.chat.completions.create(model=database, messages=messages)
        assert "Chief Financial Officer" in (whole.choices[0].message.content or "")
        assert _joined(_stream(sdk, messages), "content") == whole.choices[0].message.content
        run = client.get(f"/runs/{whole.id.removeprefix('chatcmpl-')}").json()
        assert run["source"] == "api" and run["status"] == "answered"


def _result(answer: str, **fields) -> RunResult:
    return RunResult(run_id="r1", question=FIRST, status=RunStatus.ANSWERED, route="single",
                     route_reason="", driver="pipeline", model="offline", answer=answer,
                     citations=[], invalid_citations=[], missing=[], conflicts=[], steps=2,
                     max_steps=6, usage=Usage(), latency_s=0.1, **fields)


def test_the_content_is_what_was_streamed_then_the_checked_text_if_it_changed() -> None:
    sources = [{"n": 1, "doc_id": "policies/travel.md", "section": "4.2",
                "title": "Travel and Expense Policy › 4.2 Approval thresholds"}]
    checked = _result("The CFO approves. [1]")
    listed = (f"\n\n{SOURCES_HEADING}\n[1] Travel and Expense Policy › 4.2 Approval thresholds"
              " — policies/travel.md §4.2")
    # nothing streamed (the offline answer, whole), or streamed as checked: the answer once
    assert full_content(checked, None, sources) == "The CFO approves. [1]" + listed
    assert full_content(checked, "The CFO approves. [1]", sources) == \
        "The CFO approves. [1]" + listed
    # the check took a citation out of what was already streamed: the checked text follows
    changed = full_content(checked, "The CFO approves. [1] It is Tom Becker. [2]", sources)
    assert changed.startswith("The CFO approves. [1] It is Tom Becker. [2]")
    assert f"{CHECKED_NOTE}\n\nThe CFO approves. [1]{listed}" in changed
    assert full_content(checked, None, []) == "The CFO approves. [1]"
    # a check that changed only whitespace: the answer once, as streamed
    assert full_content(checked, "The CFO  approves.\n[1] ", []) == "The CFO  approves.\n[1] "


def test_an_answer_quoting_inline_code_is_sent_once_with_its_spaces(tmp_path) -> None:
    """Markdown inline code whose backticks the reader drops ("the .invoke() method"): the
    citation check kept " ." as the text's own, so the answer is not changed by the check
    and `/v1` sends it once (issue 41.5)."""
    from conftest import write_docs

    from ragloop.kb import KnowledgeBase

    docs = write_docs(tmp_path / "docs", {"graphs.md": (
        "# Running graphs\n\n## Invoke\n\nCall the `.invoke()` method on a compiled graph to"
        " run it once. The `.stream()` method yields each step as it happens.\n")})
    kb = KnowledgeBase.open(tmp_path / "kb")
    try:
        kb.ingest([docs])
        with serving(kb) as live:
            sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
            asked = [{"role": "user", "content": "Which method runs a compiled graph once?"}]
            content = sdk.chat.completions.create(
                model="ragloop", messages=asked).choices[0].message.content or ""
            assert "Call the .invoke() method" in content, content
            assert CHECKED_NOTE not in content and content.count(".invoke()") == 1
            assert _joined(_stream(sdk, asked), "content") == content
    finally:
        kb.close()


@pytest.fixture(scope="module")
def sensors(tmp_path_factory):
    from conftest import write_docs

    from ragloop.kb import KnowledgeBase

    root = tmp_path_factory.mktemp("sensors")
    kb = KnowledgeBase.open(root / "kb")
    kb.ingest([write_docs(root / "docs", SENSORS)])
    yield kb
    kb.close()


def test_a_question_with_several_readings_is_answered_with_the_question_back(sensors):
    """A run that ends needs_input: the assistant message is the clarifying question and its
    numbered options; the user's choice, sent as the next message, is answered."""
    with serving(sensors) as live:
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
        asked = [{"role": "user", "content": AMBIGUOUS}]
        reply = sdk.chat.completions.create(model="ragloop", messages=asked)
        content = reply.choices[0].message.content or ""
        assert reply.choices[0].finish_reason == "stop"
        question, _, options = content.partition("\n\n")
        assert question.endswith("?") and SOURCES_HEADING not in content
        numbered = [line.split(". ", 1) for line in options.splitlines()]
        assert [n for n, _ in numbered] == ["1", "2", "3"]
        assert sorted(o for _, o in numbered) == ["T100", "T200", "T300"]
        assert "Several readings" in reply.choices[0].message.model_extra["reasoning_content"]
        assert _joined(_stream(sdk, asked), "content") == content

        chosen = [*asked, {"role": "assistant", "content": content},
                  {"role": "user", "content": "T200"}]
        answer = sdk.chat.completions.create(model="ragloop", messages=chosen)
        assert "5 years" in (answer.choices[0].message.content or "")


def test_with_a_real_model_the_answer_streams_in_pieces_and_usage_counts_its_calls(
        llama_server, small_kb):
    """The model path (llama.cpp's server, SmolLM2-135M): the run's model calls are the
    completion's usage, and the model's answer reaches the client piece by piece as the
    model writes it. What a 135M model says is not the point. (This server ignores
    `stream_options.include_usage`, so the streamed answer's own tokens are unknown: the
    counts seen are the grader's, whose JSON decisions are not streamed, and
    `unmeasured_calls` says how many calls they leave out.)"""
    from model_server import CALL_TIMEOUT_S, MODEL_ALIAS, explained

    from ragloop.apps.server.app import create_app

    settings = small_kb.settings.with_(
        kb=str(small_kb.store.folder), model=f"llamacpp:{MODEL_ALIAS}", base_url=llama_server,
        max_steps=2, loop_max_tokens=128, decision_max_tokens=128, search_k=3,
        tool_result_chars=1200)
    app = create_app(settings, kb=small_kb)
    with LiveServer(app) as live, explained():
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0,
                            timeout=CALL_TIMEOUT_S * 6)
        messages = [{"role": "user", "content": "Is the T9 sensor waterproof?"}]
        whole = sdk.chat.completions.create(model="ragloop", messages=messages)
        assert whole.usage is not None and whole.usage.completion_tokens > 0
        assert (whole.usage.model_extra or {}).get("unmeasured_calls", 0) >= 1
        assert whole.usage.total_tokens == (whole.usage.prompt_tokens
                                            + whole.usage.completion_tokens)
        chunks = _stream(sdk, messages)
        pieces = [c.choices[0].delta.content for c in chunks
                  if c.choices and c.choices[0].delta.content]
        assert len(pieces) >= 3, pieces  # the answer's tokens, then the sources
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
