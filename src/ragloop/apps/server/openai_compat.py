"""The OpenAI-compatible chat API: `POST /v1/chat/completions` and `GET /v1/models`, so any
OpenAI client or chat UI (Open WebUI, LibreChat, the `openai` SDK) can talk to ragloop.

The shapes follow OpenAI's API reference (openapi.yaml of github.com/openai/openai-openapi:
CreateChatCompletionRequest/Response, CreateChatCompletionStreamResponse, ListModelsResponse,
Model, ErrorResponse) and the types of openai-python 3.57 (`openai.types.chat.ChatCompletion`,
`ChatCompletionChunk`, `openai.types.Model`), which the tests parse the replies with.

- `messages` become a conversation: the last user message is the question, the user/assistant
  pairs before it the history (`core.conversation.Turn`) the engine makes it standalone with.
  System and developer messages are ignored: a run's instructions are ragloop's own.
- `model` names a knowledge base this server serves, or `ragloop` (the same one).
- The run goes through the engine like any other (recorded with source "api", readable at
  /runs/{id}: the completion's id is `chatcmpl-<run id>`), in the server's worker pool and its
  live list while it runs (jobs.JobRunner.ask: counted as active, followed at
  /runs/{id}/events).
- Streamed: the agent's steps as `reasoning_content` deltas (one line each: what chat UIs show
  as a collapsible "thinking" block), the answer as `content` (its pieces as the engine writes
  them when it streams, else whole), then the sources, then a chunk with `finish_reason`
  "stop" and the structured `citations`, the usage chunk when `stream_options.include_usage`
  asks for it, and `data: [DONE]`. Not streamed: the same text in one `chat.completion`.
- Errors, on these paths only, in OpenAI's shape `{"error": {"message", "type", "param",
  "code"}}` (openapi.yaml, schema `Error`: all four keys required, param and code nullable),
  which the SDK turns into its own exceptions (401 → `AuthenticationError`, 404 →
  `NotFoundError`, an `error` object inside a stream → `APIError`; openai/_client.py
  `_make_status_error`, openai/_streaming.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from ragloop.agent.conversations import turn_of
from ragloop.agent.run import RunResult
from ragloop.apps.server.access_guard import principal_of
from ragloop.apps.server.json_errors import rewrite_errors
from ragloop.core.access import Principal
from ragloop.core.conversation import Turn, TurnKind, numbered
from ragloop.core.errors import NotFoundError, RunFailed, UserError
from ragloop.core.events import (
    AnswerDeltaEvent,
    ClarifyEvent,
    CondenseEvent,
    ErrorEvent,
    Event,
    PlanEvent,
    RewriteEvent,
    RouteEvent,
    ToolCallEvent,
)
from ragloop.core.ids import new_id
from ragloop.core.types import RunStatus
from ragloop.kb.multi import as_knowledge_bases
from ragloop.storage.location import is_postgres_url
from ragloop.storage.owned import runs_for
from ragloop.storage.protocols import RunRecord

if TYPE_CHECKING:
    from ragloop.apps.server.state import ServerState
    from ragloop.core.config import Settings

log = logging.getLogger("ragloop.apps.server")

PREFIX = "/v1/"
DEFAULT_MODEL = "ragloop"
OWNER = "ragloop"
SSE_PING_S = 15
MAX_QUESTION_CHARS = 4000  # as the rest of the API (apps/server/app.py)
SOURCES_HEADING = "Sources:"
# Content already streamed cannot be taken back: when the answer as checked is not what was
# streamed (the check took a citation out, or the model's reply went on to call tools after
# it had begun to write), the checked answer follows what was sent, after this line.
CHECKED_NOTE = "The answer, as checked:"
# The opening of a reasoning block a chat UI may leave in an assistant message it sends back
# as history: `<think>…</think>` or `<details …>…</details>`. Found by literal searches, never
# by a pattern that backtracks: a lazy `<think>.*?</think>` is quadratic on `"<think>" * n`
# (200 KB of it took 68 s, on the event loop; issue 39).
_REASONING_OPEN = re.compile(r"<think>|<details\b", re.IGNORECASE)
_REASONING_CLOSE = {"<think>": re.compile(re.escape("</think>"), re.IGNORECASE),
                    "<details": re.compile(re.escape("</details>"), re.IGNORECASE)}
# the stored run whose answer a history's assistant message is (RunStore.answered)
Answered = Callable[[str], RunRecord | None]

# OpenAI's error `type` by status: its 4xx are `invalid_request_error` (an unknown model, a bad
# or missing key included), its 5xx `server_error`.
_ERROR_CODES = {400: "bad_request", 401: "invalid_api_key", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 413: "request_too_large",
                415: "unsupported_media_type", 500: "server_error"}


def openai_error(status: int, message: str, *, code: str | None = None,
                 param: str | None = None) -> dict[str, Any]:
    """OpenAI's ErrorResponse: `{"error": {"message", "type", "param", "code"}}`."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param,
                      "code": code or _ERROR_CODES.get(status)}}


class OpenAIError(Exception):
    """A request error of these paths, answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, *, code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = openai_error(status, message, code=code, param=param)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=self.status)


# -- the request ----------------------------------------------------------------------------


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self, index: int) -> str:
        """The message's text: the string, or its text parts joined (OpenAI's content parts:
        text, image_url, input_audio, file; an assistant's also refusal)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        texts = []
        for part in self.content:
            if part.type == "text":
                texts.append(part.text or "")
            elif part.type != "refusal":
                raise OpenAIError(400, f"messages[{index}]: only text content is supported,"
                                       f" not {part.type[:40]!r} parts.",
                                  param=f"messages[{index}].content")
        return "\n".join(texts)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The part of CreateChatCompletionRequest ragloop reads. Sampling options (temperature,
    top_p, max_tokens, seed, …) are accepted and ignored: runs are deterministic and the
    answer's length is the engine's."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="`ragloop` or the name of a knowledge base (GET /v1/models).")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, description="Only 1 is supported.")


def conversation(messages: Sequence[ChatMessage],
                 answered: Answered | None = None) -> tuple[str, list[Turn]]:
    """The question (the last message, a user's) and the turns before it: each user message
    with the assistant message(s) that answered it. An answer this API wrote is read as the
    stored run that wrote it (`answered`: what it searched and cited, as facts); any other
    text is plain history (a reasoning block left in it dropped)."""
    last = len(messages) - 1
    if messages[last].role != "user":
        raise OpenAIError(400, "The last message must be the user's question.",
                          param=f"messages[{last}].role")
    question = messages[last].text(last).strip()
    if not question:
        raise OpenAIError(400, "The last user message is empty.", param=f"messages[{last}]")
    if len(question) > MAX_QUESTION_CHARS:
        raise OpenAIError(400, f"The question is longer than {MAX_QUESTION_CHARS} characters.",
                          param=f"messages[{last}].content", code="question_too_long")
    pairs: list[list[str]] = []  # [question, answer]
    for i, m in enumerate(messages[:last]):
        if m.role in ("tool", "function"):
            raise OpenAIError(400, f"messages[{i}]: ragloop calls no client tools; {m.role}"
                                   " messages are not accepted.", param=f"messages[{i}].role")
        if m.role == "user":
            pairs.append([m.text(i).strip(), ""])
        elif m.role == "assistant" and pairs:  # an opening greeting answers nothing
            pairs[-1][1] = "\n".join(x for x in (pairs[-1][1], m.text(i)) if x)
    return question, [_turn(q, a, answered) for q, a in pairs if q]


def strip_reasoning(text: str) -> str:
    """`text` without its reasoning blocks, in time linear in its length: each opening is
    closed by the first closing tag after it (as a lazy match); an opening never closed
    stays as it is. Once a closing tag is missing after some point it is missing after every
    later one, so each kind of tag is searched for at most once past its last match."""
    out: list[str] = []
    pos = keep = 0  # search from `pos`; text[keep:] not yet copied to `out`
    closed = {kind: True for kind in _REASONING_CLOSE}  # False: no closing tag further on
    while (m := _REASONING_OPEN.search(text, pos)) is not None:
        kind = m.group().lower()
        body = m.end()
        if kind == "<details":  # the tag's own attributes run to its `>`
            body = text.find(">", m.end()) + 1
            if body == 0:  # no `>` anywhere further on: no block can open
                break
        close = _REASONING_CLOSE[kind].search(text, body) if closed[kind] else None
        if close is None:
            closed[kind] = False
            if not any(closed.values()):
                break
            pos = m.start() + 1
            continue
        out.append(text[keep:m.start()])
        pos = keep = close.end()
    out.append(text[keep:])
    return "".join(out)


def _turn(question: str, answer: str, answered: Answered | None) -> Turn:
    answer = strip_reasoning(answer).strip()
    # the answer as this API writes it: the run's answer, then its sources (`_sources`)
    body = answer.rpartition(f"\n\n{SOURCES_HEADING}\n")[0] or answer
    body = body.rpartition(f"\n\n{CHECKED_NOTE}\n")[2].strip()  # the checked one, if any
    record = None
    if answered is not None and body:  # a question back: its question, then the options
        record = answered(body) or answered(body.split("\n\n")[0].strip())
    if record is None or record["question"].strip() != question.strip():
        return Turn(question=question, answer=body)
    return turn_of(record)


# -- the models -----------------------------------------------------------------------------


def kb_name(location: str) -> str:
    """A knowledge base's name: its folder's name, or the database of a postgresql:// URL."""
    if is_postgres_url(location):
        return urlsplit(location).path.strip("/") or DEFAULT_MODEL
    return PurePath(location.rstrip("/\\")).name or DEFAULT_MODEL


def served(state: ServerState) -> list[str]:
    """The names of the knowledge bases this server serves: a catalog's names, else the one
    knowledge base's folder or database name."""
    catalog = as_knowledge_bases(state.kb)
    if catalog is not None:
        return catalog.names()
    return [kb_name(str(state.settings.kb))]


def model_ids(state: ServerState) -> list[str]:
    """The model names a client may ask for: `ragloop`, then each knowledge base served."""
    return list(dict.fromkeys([DEFAULT_MODEL, *served(state)]))


# -- the reply ------------------------------------------------------------------------------


def _short(text: object, limit: int = 160) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _tool_line(e: ToolCallEvent) -> str:
    """A tool call's sentence from its shown fields (ToolCallEvent.shown): what it did, any
    extra field after it, then its failure."""
    shown = e.shown()
    said = {f.key: f.value for f in shown if f.role == "said"}
    if "query" in said:
        line = f"Searched \"{_short(said['query'])}\""
        if "chunks" in said:
            line += f": kept {said.get('kept') or 0} of {said['chunks']} passages"
    elif "doc_id" in said:
        line = f"Read {said['doc_id']} §{said.get('section') or ''}"
    elif "documents" in said:
        line = f"Listed the documents ({said['documents']})"
    else:
        line = f"Called {e.tool}"
    extra = [f"{f.key} {_short(f.value)}" for f in shown if f.role == "extra"]
    if extra:
        line += f" ({', '.join(extra)})"
    return f"{line} — failed: {_short(said['error'])}" if said.get("error") else line


def step_line(event: Event) -> str | None:
    """The one line of `reasoning_content` an event gives: a follow-up's standalone search,
    the route, the plan, each search with the passages kept, a rewrite, a question back, an
    error. Grades (their counts are on the search line), placements and the answer give none."""
    match event:
        case CondenseEvent(turn_kind=TurnKind.FOLLOW_UP):
            # the queries themselves, as searched (several: their rankings fused)
            queries = event.queries or [event.standalone]
            return "Follow-up, searched as " + " and ".join(
                f"\"{_short(q)}\"" for q in queries) + (", fused" if len(queries) > 1 else "")
        case CondenseEvent(turn_kind=TurnKind.NEW_TOPIC):
            return "New topic: the earlier turns set aside"
        case RouteEvent():
            return f"Route: {event.route}" + (f" — {_short(event.reason)}" if event.reason
                                               else "")
        case PlanEvent(need_search=False):
            return "Plan: no search needed"
        case PlanEvent() if len(event.sub_questions) > 1:
            return f"Plan: {len(event.sub_questions)} parts — " + "; ".join(
                _short(p, 80) for p in event.sub_questions)
        case PlanEvent():
            return "Plan: one search"
        case ToolCallEvent():
            return _tool_line(event)
        case RewriteEvent():
            return ("Rewrote the search" + (f" as \"{_short(event.query)}\"" if event.query
                                            else "")
                    + (f" (missing: {_short(event.missing)})" if event.missing else ""))
        case ClarifyEvent():
            return f"Several readings: asking \"{_short(event.question)}\""
        case ErrorEvent():
            return f"Error: {_short(event.error)}"
    return None


def answer_body(result: RunResult) -> str:
    """The assistant's words: the checked answer, or the clarifying question and its options
    when the run needs the user's choice (that choice is the next user message)."""
    if result.status == RunStatus.NEEDS_INPUT and result.clarification:
        asked = result.clarification
        return f"{asked['question']}\n\n" + "\n".join(numbered(asked["options"]))
    return result.answer


def full_content(result: RunResult, streamed: str | None, sources: list[dict[str, Any]]) -> str:
    """The assistant message's content, the same streamed or not: what was streamed of the
    answer, every piece (else the answer), the checked answer when it differs, the sources."""
    body = answer_body(result)
    text = body if streamed is None else streamed
    # whitespace alone is no change worth sending the answer twice
    if streamed is not None and "".join(streamed.split()) != "".join(body.split()):
        text += f"\n\n{CHECKED_NOTE}\n\n{body}"
    if sources:
        lines = [f"[{s['n']}] {s['title']} — {s['doc_id']} §{s['section']}" if s["title"]
                 else f"[{s['n']}] {s['doc_id']} §{s['section']}" for s in sources]
        text += f"\n\n{SOURCES_HEADING}\n" + "\n".join(lines)
    return text


def cited_sources(state: ServerState, result: RunResult,
                  principal: Principal | None = None) -> list[dict[str, Any]]:
    """The cited passages, each once by number: n, doc_id, section, its title path ("S200 …
    Datasheet › Power › Battery"), from the knowledge base (blocking: run in a thread)."""
    out: dict[int, dict[str, Any]] = {}
    for c in sorted(result.citations, key=lambda c: c.n):
        if c.n in out:
            continue
        try:
            info = state.kb.for_principal(principal).section(c.doc_id, c.section,
                                                             c.kb or None)
        except NotFoundError:  # removed since the run read it
            title = ""
        else:  # as a stored conversation's turns name what they cited (agent/conversations.py)
            title = " › ".join(dict.fromkeys(t for t in (*info.title_path, info.title) if t))
        out[c.n] = {**c.to_dict(), "title": title}
    return list(out.values())


def usage_of(result: RunResult) -> dict[str, Any]:
    """CompletionUsage from the run's model calls (zeros offline). Its prompt_tokens count
    cached input too; `Usage.input_tokens` counts the uncached only (llm/pricing.py)."""
    u = result.usage
    prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    # the calls whose tokens are unknown (core.types.Usage.unmeasured): the counts are then a
    # lower bound, and an extra field says so rather than let them pass as measured
    unknown = {"unmeasured_calls": u.unmeasured} if u.unmeasured else {}
    return {"prompt_tokens": prompt, "completion_tokens": u.output_tokens,
            "total_tokens": prompt + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens,
                                      "cache_write_tokens": u.cache_write_tokens}, **unknown}


class Completion:
    """One request's run: its id and model, and the pieces both replies are made of."""

    def __init__(self, state: ServerState, body: ChatRequest,
                 principal: Principal | None = None) -> None:
        self.state = state
        self.principal = principal  # who asks: the run reads only what it may
        self.model = body.model
        self.run_id = new_id()
        self.id = f"chatcmpl-{self.run_id}"
        self.created = int(time.time())
        # an answer in the history is read as the run that wrote it only if it is the
        # asker's own (storage/owned.py): another's answer text is plain text
        self.question, self.history = conversation(
            body.messages, runs_for(state.runs, principal).answered)

    def start(self, on_event: Callable[[Event], None],
              cancel: threading.Event | None = None) -> Future[RunResult]:
        options: dict[str, Any] = {"history": self.history} if self.history else {}
        if cancel is not None:
            options["cancel"] = cancel
        if self.model != DEFAULT_MODEL and as_knowledge_bases(self.state.kb) is not None:
            options["knowledge_bases"] = [self.model]  # a model named for one of several KBs
        return self.state.jobs.ask(self.question, on_event=on_event, run_id=self.run_id,
                                   principal=self.principal, **options)

    def chunk(self, delta: dict[str, Any] | None, finish: str | None = None,
              **extra: Any) -> ServerSentEvent:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]
        data = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "choices": choices, **extra}
        return ServerSentEvent(data=json.dumps(data, ensure_ascii=False))

    def completion(self, result: RunResult, reasoning: str, content: str,
                   sources: list[dict[str, Any]]) -> dict[str, Any]:
        message = {"role": "assistant", "content": content, "refusal": None,
                   "annotations": [], "reasoning_content": reasoning, "citations": sources}
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "stop"}],
                "usage": usage_of(result)}


def _failure(exc: BaseException) -> OpenAIError:
    if isinstance(exc, UserError):
        return OpenAIError(400, str(exc))
    if isinstance(exc, RunFailed):  # the provider, after its retries: the message says which
        return OpenAIError(500, str(exc))
    log.error("chat completion failed", exc_info=exc)
    return OpenAIError(500, f"internal error: {type(exc).__name__}")


async def answer(state: ServerState, run: Completion) -> dict[str, Any]:
    """The non-streamed reply: a `chat.completion`."""
    lines: list[str] = []
    deltas: list[str] = []

    def on_event(event: Event) -> None:  # in the worker thread, in order
        if isinstance(event, AnswerDeltaEvent):
            deltas.append(event.text)
        elif (line := step_line(event)) is not None:
            lines.append(line)

    try:
        result = await asyncio.wrap_future(run.start(on_event))
    except Exception as exc:
        raise _failure(exc) from exc
    sources = await asyncio.to_thread(cited_sources, state, result, run.principal)
    streamed = "".join(deltas) if deltas else None
    return run.completion(result, "".join(f"{x}\n" for x in lines),
                          full_content(result, streamed, sources), sources)


def stream(state: ServerState, run: Completion, body: ChatRequest) -> EventSourceResponse:
    """The streamed reply: `chat.completion.chunk` events, then `data: [DONE]`."""
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    async def chunks() -> AsyncIterator[ServerSentEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        def put(item: Event | None) -> None:  # from the worker thread
            with contextlib.suppress(RuntimeError):  # the client left and its loop closed
                loop.call_soon_threadsafe(queue.put_nowait, item)

        cancel = threading.Event() if stop_on_disconnect(state.settings) else None
        future = run.start(put, cancel)
        future.add_done_callback(lambda _f: put(None))
        try:
            async for piece in _pieces(state, run, future, queue, include_usage):
                yield piece
        finally:  # the client left (sse-starlette closes this generator) before the end
            if cancel is not None and not future.done():
                log.info("chat completion %s: the client disconnected; its run stops",
                         run.run_id)
                cancel.set()

    return EventSourceResponse(chunks(), ping=SSE_PING_S,
                               headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def stop_on_disconnect(settings: Settings) -> bool:
    return settings.stop_on_disconnect == "on"  # checked when the settings were made


async def _pieces(state: ServerState, run: Completion, future: Future[RunResult],
                  queue: asyncio.Queue[Event | None], include_usage: bool
                  ) -> AsyncIterator[ServerSentEvent]:
    """The stream's events, from the run's role chunk to `[DONE]`."""
    yield run.chunk({"role": "assistant", "content": ""})
    deltas: list[str] = []
    while (event := await queue.get()) is not None:
        if isinstance(event, AnswerDeltaEvent):
            deltas.append(event.text)
            if event.text:
                yield run.chunk({"content": event.text})
        elif (line := step_line(event)) is not None:
            yield run.chunk({"reasoning_content": f"{line}\n"})
    try:
        result = future.result()
    except Exception as exc:  # an error object inside the stream: the SDK raises APIError
        yield ServerSentEvent(data=json.dumps(_failure(exc).body, ensure_ascii=False))
        yield ServerSentEvent(data="[DONE]")
        return
    sources = await asyncio.to_thread(cited_sources, state, result, run.principal)
    streamed = "".join(deltas) if deltas else None
    rest = full_content(result, streamed, sources)[len(streamed or ""):]
    if rest:
        yield run.chunk({"content": rest})
    yield run.chunk({"citations": sources}, "stop")
    if include_usage:  # after the last choice, with `choices` empty (stream_options)
        yield run.chunk(None, usage=usage_of(result))
    yield ServerSentEvent(data="[DONE]")


# -- errors in OpenAI's shape ---------------------------------------------------------------


class OpenAIErrorShape:
    """The outermost middleware: any error answered under /v1/ by the rest of the app (the
    API-key guard's 401, the loopback guard's 403, the body limiter's 413, a 404 or 405 of
    the router, a schema's 422, made a 400 as OpenAI answers it) is rewritten into OpenAI's
    error shape; replies that are no errors pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        await rewrite_errors(self.app, scope, receive, send, lambda status: status >= 400,
                             _as_openai)


def _as_openai(status: int, raw: bytes) -> tuple[int, bytes]:
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return status, raw  # already OpenAI's
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]  # the rest of the API's {"error": code, "message"}
    else:
        message = raw.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
    # a request that fails the schema is a 422 of FastAPI's: OpenAI answers it 400
    status = 400 if status == 422 else status
    return status, json.dumps(openai_error(status, message)).encode()


# -- the routes -----------------------------------------------------------------------------


def add_openai_api(app: FastAPI) -> None:
    """The /v1 routes (their errors get OpenAI's shape from `OpenAIErrorShape`, which the
    app puts outside everything else: the guards and the body limiter answer first)."""
    created = int(time.time())

    @app.get("/v1/models", tags=["openai"])
    def list_models(request: Request) -> dict[str, Any]:
        """The models to name in a chat completion: `ragloop` and the knowledge base(s)."""
        return {"object": "list",
                "data": [{"id": m, "object": "model", "created": created, "owned_by": OWNER}
                         for m in model_ids(request.app.state.ragloop)]}

    @app.post("/v1/chat/completions", tags=["openai"], response_model=None)
    async def chat_completions(body: ChatRequest, request: Request) -> Any:
        """OpenAI's chat completion over the knowledge base: `messages` (the last one the
        question, the ones before it the conversation), `stream`, `stream_options`."""
        state: ServerState = request.app.state.ragloop
        try:
            if body.n not in (None, 1):
                raise OpenAIError(400, "Only n=1 is supported: a run gives one answer.",
                                  param="n")
            if body.model not in model_ids(state):
                raise OpenAIError(404, f"The model {body.model[:100]!r} does not exist: GET"
                                       f" /v1/models lists {', '.join(model_ids(state))}.",
                                  code="model_not_found", param="model")
            # reading the messages is CPU work on client text: in a worker thread, so one
            # request's parsing never holds up another's (the event loop stays free)
            run = await run_in_threadpool(Completion, state, body, principal_of(request))
            if body.stream:
                return stream(state, run, body)
            return await answer(state, run)
        except OpenAIError as exc:
            return exc.response()
