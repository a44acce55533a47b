"""The HTTP API, the live run page and the dashboard (FastAPI; `ragloop serve`).

Runs started with POST /runs go to a small worker pool and are followed over Server-Sent
Events at GET /runs/{id}/events; every event is read from the run store, so a client that
connects late or reconnects with Last-Event-ID gets exactly the events it missed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import FastAPI, File, Form, Header, Query, Request, UploadFile
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ragloop.agent.conversations import ID_PATTERN as CONVERSATION_ID_PATTERN
from ragloop.agent.engine import Engine
from ragloop.apps.jobs import JobRunner
from ragloop.apps.server.access_guard import (
    API_KEY_COOKIE as API_KEY_COOKIE,  # the page's cookie (tests name it from here)
)
from ragloop.apps.server.access_guard import (
    AccessGuard,
    config_for,
    keys_required,
    principal_of,
)
from ragloop.apps.server.access_routes import add_access_routes
from ragloop.apps.server.api_docs import add_api_docs
from ragloop.apps.server.conversations import add_conversation_routes, resolve_http_conversation
from ragloop.apps.server.folder_sync import FolderSync, sync_targets
from ragloop.apps.server.guard import is_loopback
from ragloop.apps.server.json_errors import rewrite_errors
from ragloop.apps.server.openai_compat import (
    OpenAIErrorShape,
    add_openai_api,
)
from ragloop.apps.server.page_steps import tool_pieces
from ragloop.apps.server.state import ServerState
from ragloop.apps.server.uploads import ingest_uploads
from ragloop.core.config import (
    MAX_STEPS_LIMIT,
    MIN_STEPS,
    DriverChoice,
    RouteChoice,
    Settings,
    env_setting,
)
from ragloop.core.decisions import Grader
from ragloop.core.errors import ConfigError, NotFoundError, UserError
from ragloop.core.events import AnswerDeltaEvent, BaseEvent, Event, ToolCallEvent
from ragloop.core.types import RunStatus
from ragloop.eval.metrics import percentile
from ragloop.kb import KnowledgeBase
from ragloop.kb.catalog import CatalogEntry, check_catalog, open_served
from ragloop.kb.multi import KnowledgeBases, served_catalog, write_target
from ragloop.retrieval.filters import make_filter
from ragloop.storage.backend import open_backend
from ragloop.storage.owned import runs_for
from ragloop.storage.protocols import (
    DASHBOARD_SOURCES,
    TRUNCATED_WARN_PCT,
    RunRecord,
    RunStore,
)

log = logging.getLogger("ragloop.apps.server")

STATIC_DIR = Path(__file__).parent / "static"
API_KEY_ENV = Settings.setting_name("api_key")
# A question is a sentence or a paragraph; a JSON body is never more than this.
MAX_QUESTION_CHARS = 4000
MAX_JSON_BYTES = 1 << 20
MAX_UPLOAD_MB_ENV = Settings.setting_name("max_upload_mb")
MAX_FILENAME_CHARS = 200
SSE_PING_S = 15
# Event seqs are small step counters; anything past a 32-bit integer is not one we sent (and
# would overflow SQLite's and Postgres's integer parameters).
MAX_EVENT_SEQ = 2**31 - 1

# how a request names the knowledge base it writes to, when several are served
NAME_KB = "knowledge_base=NAME, a query parameter or form field"

ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "too_large",
               415: "unsupported_media_type", 422: "invalid_request", 500: "internal_error"}


def check_bind(host: str, api_key: str | None, user_keys: bool = False) -> None:
    """Refuse to serve beyond this machine without an API key (`user_keys`: users' keys are
    stored, `ragloop keys add`)."""
    if not is_loopback(host) and not api_key and not user_keys:
        raise ConfigError(
            f"Refusing to listen on {host} without an API key: anyone who can reach it could"
            f" read the knowledge base and spend model tokens. Set {API_KEY_ENV}=<a long random"
            " string> (clients send `Authorization: Bearer <key>` or `X-API-Key: <key>`), make"
            " user keys (`ragloop users add`, `ragloop keys add`), or bind to 127.0.0.1.")


def _user_keys(location: str) -> bool:
    """Whether users' keys are stored with the knowledge base at `location` (the first one
    served, which holds the runs too); False when there is none there yet."""
    try:
        backend = open_backend(location, create=False)
    except UserError:
        return False
    try:
        return backend.principals.has_keys()
    finally:
        backend.close()


def max_upload_bytes() -> int:
    """RAGLOOP_MAX_UPLOAD_MB in bytes (checked by the settings model, core/config.py)."""
    return int(env_setting("max_upload_mb") * (1 << 20))


def error_body(status: int, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": ERROR_CODES.get(status, "error"), "message": message, **extra}


# -- request models -------------------------------------------------------------------------


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS,
                          description="The question, in plain words.")
    # the choices and the least ceiling are the settings model's (core/config.py)
    route: RouteChoice = Field(
        "auto", description="auto: the router decides; single: one search; agent: the loop.")
    driver: DriverChoice | None = Field(
        None, description="tools (needs a chat model) or pipeline (runs offline).")
    max_steps: int | None = Field(None, ge=MIN_STEPS, le=MAX_STEPS_LIMIT,
                                  description="Step ceiling (default from settings).")
    conversation_id: str | None = Field(
        None, pattern=CONVERSATION_ID_PATTERN,
        description='Continue this conversation (its earlier turns are the history); "new"'
                    " starts one. The response carries the id to continue with.")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the question is empty")
        return value


class TooLargeAsJson:
    """Outermost: FastAPI's body limiter answers 413 in plain text before any handler runs;
    this rewrites such a reply into the same JSON error shape as every other error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await rewrite_errors(self.app, scope, receive, send, lambda status: status == 413,
                             _too_large_as_json)


def _too_large_as_json(status: int, raw: bytes) -> tuple[int, bytes]:
    try:
        already = "error" in json.loads(raw or b"null")
    except (ValueError, TypeError):
        already = False
    return status, raw if already else json.dumps(error_body(
        413, f"The request body is too large. Questions are limited to"
             f" {MAX_QUESTION_CHARS} characters, JSON bodies to"
             f" {MAX_JSON_BYTES // 1024} KB, uploads to the configured size"
             f" (env {MAX_UPLOAD_MB_ENV}).")).encode()


class RagloopAPI(FastAPI):
    def build_middleware_stack(self) -> ASGIApp:
        # outermost: an error under /v1 in OpenAI's shape, the body limiter's 413 included
        return OpenAIErrorShape(TooLargeAsJson(super().build_middleware_stack()))


# -- the app --------------------------------------------------------------------------------


def _suffixes() -> tuple[str, ...]:
    from ragloop.ingest.readers import SUPPORTED_SUFFIXES

    return tuple(sorted(SUPPORTED_SUFFIXES))


def _safe_filename(raw: str | None) -> str:
    """The upload's name as a plain file name; anything that could leave the folder is a 400."""
    if not raw or not raw.strip():
        raise HTTPException(400, "Every uploaded file needs a file name.")
    name = raw.strip()
    if any(c in name for c in ("/", "\\", "\x00", ":")) or name in (".", "..") \
            or name.startswith(".") or ".." in name:
        raise HTTPException(400, f"Rejected file name {raw!r}: it must be a plain file name"
                                 " (no folders, no '..', not hidden).")
    if len(name) > MAX_FILENAME_CHARS:
        raise HTTPException(400, f"File name longer than {MAX_FILENAME_CHARS} characters.")
    return name


def create_app(settings: Settings | None = None, *,
               kb: KnowledgeBase | KnowledgeBases | None = None,
               api_key: str | None = None, workers: int = 2,
               upload_limit: int | None = None, grader: Grader | None = None,
               local_workers: int | None = None, bind_host: str | None = None,
               sync_folders: list[str] | None = None, sync_every: float = 300.0,
               catalog: Sequence[CatalogEntry] | None = None,
               allow_mass_delete: bool = False) -> FastAPI:
    """The app over the knowledge base at `settings.kb` (or an open `kb`, which stays open;
    or the knowledge bases of `catalog`, served as one: kb/multi.py).

    `api_key`: required on every data path when set (pass settings.api_key).
    Without one, LoopbackGuard answers only to loopback Host names (and `bind_host`) and
    refuses cross-origin writes.
    `grader`: overrides the grader the settings name (as Engine's `grader=`).
    `local_workers`: Postgres only: how many queue loops this server runs (default `workers`;
    0 = only enqueue, `ragloop worker` processes run the queue).
    `sync_folders`: synced into the knowledge base at start and every `sync_every` seconds;
    with several served, each is NAME=FOLDER (apps/server/folder_sync.py: a ConfigError here
    when one names no KB served); `allow_mass_delete`: as `ingest --sync --allow-mass-delete`.
    """
    settings = settings or (kb.settings if kb is not None else Settings.from_env())
    limit = upload_limit if upload_limit is not None else max_upload_bytes()
    names = ([e.name for e in catalog] if catalog
             else kb.names() if isinstance(kb, KnowledgeBases) else None)
    targets = sync_targets(sync_folders or [], names)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await anyio.to_thread.run_sync(_open_state, settings, kb, workers, limit,
                                             grader, local_workers, catalog)
        if targets:
            state.sync = FolderSync(state.kb, state.ingest_lock, targets, sync_every,
                                    allow_mass_delete)
            state.sync.start()
        app.state.ragloop = state
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(_close_state, state)

    app = RagloopAPI(
        title="ragloop", version=version("ragloop"),
        description="Agentic RAG over a local knowledge base: runs, live events, documents,"
                    " search and metrics.",
        lifespan=lifespan, max_body_size=MAX_JSON_BYTES, docs_url=None, redoc_url=None)
    # a key where one is required (the admin's, or a user's: apps/server/access_guard.py),
    # else the loopback guard
    app.state.ragloop_access = config_for(api_key, bind_host)
    app.add_middleware(AccessGuard, config=app.state.ragloop_access, bind_host=bind_host)
    _add_error_handlers(app)
    _add_routes(app, limit)
    add_openai_api(app)  # /v1: chat completions and models, OpenAI's error shape
    add_api_docs(app)  # local Swagger UI / ReDoc assets, mounted before /static
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


def _open_state(settings: Settings, kb: KnowledgeBase | KnowledgeBases | None, workers: int,
                limit: int, grader: Grader | None = None, local_workers: int | None = None,
                catalog: Sequence[CatalogEntry] | None = None) -> ServerState:
    owns = kb is None
    if kb is None:
        kb = open_served(catalog, settings)
    runs = kb.backend.runs  # borrowed: the knowledge base's backend closes it
    interrupted = runs.mark_interrupted()
    if interrupted:
        log.warning("marked %d interrupted run(s) failed: %s", len(interrupted),
                    ", ".join(interrupted))
    if kb.store.chunk_count():
        # Load the model and open both indexes once, before two workers race for them.
        kb.search("warm up", k=1)
    engine = Engine(kb, settings, runs, grader=grader)
    queue = kb.backend.queue
    jobs: JobRunner
    if queue is not None:  # Postgres: runs go through the shared queue
        from ragloop.apps.worker import QueueJobRunner

        jobs = QueueJobRunner(engine, runs, queue, workers, local_workers)
    else:
        jobs = JobRunner(engine, runs, workers)
    return ServerState(kb=kb, runs=runs, engine=engine, jobs=jobs, settings=settings,
                       upload_limit=limit, ingest_lock=threading.Lock(), owns_kb=owns)


def _close_state(state: ServerState) -> None:
    if state.sync is not None:
        state.sync.stop()
    state.jobs.shutdown()
    if state.owns_kb:
        state.kb.close()  # and its run store


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 413 and "body" in message.lower():
            message = (f"The request body is too large ({message}). Questions are limited to"
                       f" {MAX_QUESTION_CHARS} characters; uploads to the configured size.")
        return JSONResponse(error_body(exc.status_code, message), status_code=exc.status_code,
                            headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        details = []
        for e in exc.errors():
            e = {k: v for k, v in e.items() if k in ("type", "loc", "msg")}
            details.append(jsonable_encoder(e))
        summary = "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}"
                            for d in details) or "invalid request"
        return JSONResponse(error_body(422, summary, details=details), status_code=422)

    @app.exception_handler(NotFoundError)
    async def not_found(_request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(error_body(404, str(exc)), status_code=404)

    @app.exception_handler(UserError)
    async def user_error(_request: Request, exc: UserError) -> JSONResponse:
        return JSONResponse(error_body(400, str(exc)), status_code=400)

    @app.exception_handler(Exception)
    async def crash(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body(500, f"internal error: {type(exc).__name__}"),
                            status_code=500)


def _state(request: Request) -> ServerState:
    return request.app.state.ragloop


def _kb(request: Request) -> KnowledgeBase | KnowledgeBases:
    """The served knowledge base(s) as the request's principal sees them (kb/access.py)."""
    return _state(request).kb.for_principal(principal_of(request))


def _runs(request: Request) -> RunStore:
    """The runs the request's principal may read (storage/owned.py)."""
    return runs_for(_state(request).runs, principal_of(request))


def _check_components(state: ServerState, body: AskRequest) -> None:
    """Fail in the request (400) for what the engine would refuse in the worker."""
    from ragloop.agent.engine import Components

    Components.from_settings(state.settings, body.driver, state.engine.chat,
                             state.engine.grader_chat)


def _event_seq(raw: str) -> int:
    """A Last-Event-ID as the seq to resume after: an integer from -1 to MAX_EVENT_SEQ."""
    text = raw.strip()
    # int() also takes "1_0", "+1" and non-ASCII digits: a seq we sent is plain digits
    if not re.fullmatch(r"-?[0-9]{1,10}", text) or not -1 <= int(text) <= MAX_EVENT_SEQ:
        raise HTTPException(400, f"Last-Event-ID must be an event seq we sent (an integer"
                                 f" from -1 to {MAX_EVENT_SEQ}), not {raw[:40]!r}")
    return int(text)


def _event_payload(run_id: str, event: Event) -> str:
    """An event as the SSE stream sends it; a tool call also carries its step line for the
    page, made on the server (page_steps.py)."""
    payload = {"run_id": run_id, **event.to_dict()}
    if isinstance(event, ToolCallEvent):
        payload["shown"] = tool_pieces(event)
    return json.dumps(payload, ensure_ascii=False, default=str)


def _add_routes(app: FastAPI, upload_limit: int) -> None:
    """Every route, group by group (registration order kept: a document's section route
    must come before the document route, whose path takes the rest of the URL)."""
    _add_page_routes(app)
    _add_run_routes(app)
    _add_document_routes(app, upload_limit)
    _add_search_route(app)
    _add_metrics_route(app)
    add_conversation_routes(app)
    add_access_routes(app)


def _add_page_routes(app: FastAPI) -> None:
    """The web page, the dashboard and the liveness probe."""
    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    @app.get("/dashboard", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC_DIR / "dashboard.html")

    @app.get("/healthz", tags=["meta"])
    def healthz(request: Request) -> dict[str, Any]:
        """Liveness, plus whether an API key is required (the page asks for it then). Public,
        so it says nothing about the knowledge base (a chunk count would leak hidden ones)."""
        state = _state(request)
        return {"status": "ok", "active_runs": state.jobs.active(),
                "auth_required": keys_required(app.state.ragloop_access, app)}


def _add_run_routes(app: FastAPI) -> None:
    """Starting a run, reading runs and their events, answering synchronously."""
    @app.post("/runs", status_code=202, tags=["runs"])
    def start_run(body: AskRequest, request: Request) -> dict[str, Any]:
        """Start a run in the background; returns its id at once. Follow it at
        /runs/{id}/events (SSE) or poll /runs/{id}."""
        state = _state(request)
        _check_components(state, body)
        conversation_id = resolve_http_conversation(state.jobs, body.conversation_id,
                                                    principal_of(request))
        run_id = state.jobs.submit(body.question, route=body.route, driver=body.driver,
                                   max_steps=body.max_steps, conversation_id=conversation_id,
                                   principal=principal_of(request))
        return {"run_id": run_id, "status": RunStatus.QUEUED, "events": f"/runs/{run_id}/events",
                "run": f"/runs/{run_id}", "conversation_id": conversation_id}

    @app.get("/runs", tags=["runs"])
    def list_runs(request: Request,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                  source: Annotated[str | None, Query(
                      description="cli, api, eval or mcp; default: every run except eval's;"
                                  " all or none: every run")] = None,
                  ) -> dict[str, Any]:
        """Recent runs, newest first; each says who started it (`source`)."""
        return {"runs": _runs(request).list(limit, source)}

    @app.get("/runs/{run_id}", tags=["runs"], response_model=None)
    def get_run(run_id: str, request: Request) -> RunRecord:
        """Status, answer, citations, usage, steps and latency of one run (another user's
        is not found, as an id that does not exist)."""
        run = _state(request).jobs.get(run_id, principal_of(request))
        if run is None:
            raise NotFoundError(f"No run {run_id!r}; GET /runs lists recent runs.")
        return run

    @app.get("/runs/{run_id}/events", tags=["runs"],
             response_class=EventSourceResponse,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "`step` events (id = seq) and, while the answer is"
                                             " written, `answer_delta` pieces; then one `end`."}})
    async def run_events(
            run_id: str, request: Request,
            last_event_id: Annotated[str | None, Header(
                description="The last seq received; the stream resumes after it.")] = None,
            after: Annotated[int | None, Query(
                ge=-1, le=MAX_EVENT_SEQ,
                description="Same as Last-Event-ID, for clients that cannot set it.")]
            = None) -> EventSourceResponse:
        """The run's events as Server-Sent Events: `event: step`, `id: <seq>`, data = the
        event as JSON; missed events are replayed from the store, then the stream follows the
        run and ends with `event: end` carrying the final status. While the answer is written,
        its pieces come as `event: answer_delta` (no id; not stored: a client that comes
        after the answer gets the `answer` step whole)."""
        state = _state(request)
        # another user's run is not found, on every (re)connection
        if await anyio.to_thread.run_sync(state.jobs.get, run_id, principal_of(request)) is None:
            raise NotFoundError(f"No run {run_id!r}; GET /runs lists recent runs.")
        start = -1 if after is None else after
        if last_event_id is not None and last_event_id.strip():
            start = _event_seq(last_event_id)

        async def stream() -> AsyncIterator[ServerSentEvent]:
            async for item in state.jobs.follow(run_id, start):
                if isinstance(item, AnswerDeltaEvent):  # not a step: no id to resume from
                    yield ServerSentEvent(data=_event_payload(run_id, item),
                                          event="answer_delta")
                elif isinstance(item, BaseEvent):
                    yield ServerSentEvent(data=_event_payload(run_id, item), event="step",
                                          id=str(item.seq))
                elif item is None:  # the run is gone
                    end = {"run_id": run_id, "status": "unknown", "error": None, "steps": None,
                           "latency_s": None}
                    yield ServerSentEvent(data=json.dumps(end), event="end")
                else:
                    end = {"run_id": run_id, "status": item["status"], "error": item["error"],
                           "steps": item["steps"], "latency_s": item["latency_s"]}
                    yield ServerSentEvent(data=json.dumps(end), event="end")

        return EventSourceResponse(stream(), ping=SSE_PING_S,
                                   headers={"Cache-Control": "no-store",
                                            "X-Accel-Buffering": "no"})

    @app.post("/ask", tags=["runs"])
    async def ask(body: AskRequest, request: Request) -> dict[str, Any]:
        """Answer synchronously: the full run result (answer, citations, evidence, usage)."""
        state = _state(request)
        _check_components(state, body)
        conversation_id = resolve_http_conversation(state.jobs, body.conversation_id,
                                                    principal_of(request))
        future = state.jobs.ask(body.question, route=body.route, driver=body.driver,
                                max_steps=body.max_steps, conversation_id=conversation_id,
                                principal=principal_of(request))
        result = await asyncio.wrap_future(future)
        return result.to_dict()


def _add_document_routes(app: FastAPI, upload_limit: int) -> None:
    """Listing, reading, deleting and uploading documents."""
    @app.get("/documents", tags=["documents"])
    def list_documents(request: Request) -> dict[str, Any]:
        """Every document: doc_id, title, source, number of sections and chunks."""
        return {"documents": [d.to_dict() for d in _kb(request).documents()]}

    @app.get("/knowledge_bases", tags=["documents"])
    def knowledge_bases(request: Request) -> dict[str, Any]:
        """The knowledge bases served: name, description and document count of each (one,
        unnamed, when a single --kb is served)."""
        return {"knowledge_bases": served_catalog(_kb(request))}

    @app.get("/documents/{doc_id:path}/sections/{section}", tags=["documents"])
    def get_section(doc_id: str, section: str, request: Request,
                    knowledge_base: Annotated[str | None, Query(
                        description="Several knowledge bases served: the one the document"
                                    " is in (needed when the doc id is in several).")] = None,
                    ) -> dict[str, Any]:
        """The full text of one section (doc ids may contain slashes)."""
        return _kb(request).section(doc_id, section, knowledge_base).to_dict()

    @app.get("/documents/{doc_id:path}", tags=["documents"])
    def get_document(doc_id: str, request: Request,
                     knowledge_base: Annotated[str | None, Query(
                         description="Several knowledge bases served: the one the document"
                                     " is in (needed when the doc id is in several).")] = None,
                     ) -> dict[str, Any]:
        """One document and the ids and titles of its sections."""
        served = _kb(request)
        kb: KnowledgeBase | KnowledgeBases = served
        if isinstance(served, KnowledgeBases):  # the one holding it, else a 404 saying so
            knowledge_base = served.holder(doc_id, knowledge_base)
            kb = served.get(knowledge_base)
        # the sections first: a hidden id is looked up as a missing one is (and audited)
        sections = [{"section": s.section, "title": s.title, "title_path": list(s.title_path)}
                    for s in kb.sections(doc_id)]
        found = next((d for d in kb.documents() if d.doc_id == doc_id), None)
        if found is None:
            raise NotFoundError(f"No document {doc_id!r}; GET /documents lists the doc_ids.")
        if isinstance(served, KnowledgeBases):
            found = replace(found, kb=knowledge_base or "")
        return {**found.to_dict(), "section_list": sections}

    @app.delete("/documents/{doc_id:path}", tags=["documents"])
    def delete_document(doc_id: str, request: Request,
                        knowledge_base: Annotated[str | None, Query(
                            description="Several knowledge bases served: the one to delete it"
                                        " from (needed when the doc id is in several).")] = None,
                        ) -> dict[str, Any]:
        """Delete one document: its sections, chunks and index entries."""
        state = _state(request)
        with state.ingest_lock:  # not while an upload writes
            served = _kb(request)  # a document the asker may not read is not there
            if isinstance(served, KnowledgeBases):
                removed = served.remove(doc_id, knowledge_base)
            else:
                removed = write_target(served, knowledge_base, NAME_KB).remove(doc_id)
        if not removed:
            raise NotFoundError(f"No document {doc_id!r}; GET /documents lists the doc_ids.")
        return {"doc_id": doc_id, "deleted": True}

    @app.post("/documents", tags=["documents"], max_body_size=upload_limit)
    async def upload_documents(
            request: Request,
            files: Annotated[list[UploadFile], File(description="Files to ingest.")],
            overwrite: Annotated[bool, Query(
                description="Also replace documents that were not created by an upload"
                            " (e.g. by `ragloop ingest`).")] = False,
            knowledge_base: Annotated[str | None, Query(
                description="Several knowledge bases served: the one the files go to"
                            " (required then; or as a form field).")] = None,
            knowledge_base_field: Annotated[str | None, Form(
                alias="knowledge_base",
                description="The same as the query parameter, as a form field.")] = None,
    ) -> JSONResponse:
        """Upload files and ingest them (doc_id = the file name, or each line's `_id` in a
        BEIR .jsonl). An upload adds documents and updates documents that uploads created; an
        existing document from anywhere else is left unchanged and listed in `conflicts`
        unless `overwrite=true` (409 when nothing else was ingested). Rejected as a whole,
        with nothing written, when any file has a bad name (400), an unsupported suffix (415)
        or the upload is over the size limit (413). With several knowledge bases served, the
        files go to the one `knowledge_base` names (400 listing the names when none or an
        unknown one is named); into `<that kb>/uploads/` as with one."""
        state = _state(request)
        if knowledge_base and knowledge_base_field and knowledge_base != knowledge_base_field:
            raise HTTPException(400, f"knowledge_base is {knowledge_base!r} in the query and"
                                     f" {knowledge_base_field!r} in the form: give one.")
        named = knowledge_base or knowledge_base_field or None
        target = write_target(state.kb, named, NAME_KB)
        suffixes = _suffixes()
        accepted: list[tuple[str, bytes]] = []
        total = 0
        for upload in files:
            name = _safe_filename(upload.filename)
            if Path(name).suffix.lower() not in suffixes:
                raise HTTPException(415, f"{name}: unsupported file type; supported:"
                                         f" {', '.join(suffixes)}")
            data = await upload.read(state.upload_limit + 1)
            total += len(data)
            if total > state.upload_limit:
                raise HTTPException(413, f"Upload over the limit of"
                                         f" {state.upload_limit // (1 << 20)} MB.")
            accepted.append((name, data))
        if len({n for n, _ in accepted}) != len(accepted):
            raise HTTPException(400, "The same file name was uploaded twice.")
        result = await anyio.to_thread.run_sync(ingest_uploads, target, state.ingest_lock,
                                                accepted, overwrite, principal_of(request))
        body: dict[str, Any] = {"documents": [n for n, _ in accepted]}
        if isinstance(state.kb, KnowledgeBases):  # which one they went to
            body["kb"] = named or state.kb.names()[0]  # none named: the only one
        body.update(result.report.to_dict())
        if result.message:
            body = {**error_body(result.status, result.message), **body}
        return JSONResponse(body, status_code=result.status)


def _add_search_route(app: FastAPI) -> None:
    @app.get("/search", tags=["documents"])
    def search(request: Request,
               q: Annotated[str, Query(max_length=MAX_QUESTION_CHARS,
                                       description="Search words.")],
               k: Annotated[int, Query(ge=1, le=100)] = 8,
               mode: Annotated[Literal["hybrid", "bm25", "vector"], Query()] = "hybrid",
               source: Annotated[list[str] | None, Query(
                   description="Only documents whose source path or URL matches this glob or"
                               " lies under it (repeatable: any).")] = None,
               doc_id_prefix: Annotated[list[str] | None, Query(
                   description="Only documents whose doc_id starts with this.")] = None,
               metadata: Annotated[list[str] | None, Query(
                   description="KEY=VALUE metadata every document must have (repeatable).")
               ] = None,
               tag: Annotated[list[str] | None, Query(
                   description="A tag given at ingest (repeatable: all).")] = None,
               date_from: Annotated[str | None, Query(
                   description="Documents dated on or after: YYYY[-MM[-DD]].")] = None,
               date_to: Annotated[str | None, Query(
                   description="Documents dated on or before: YYYY[-MM[-DD]].")] = None,
               knowledge_base: Annotated[list[str] | None, Query(
                   description="Several knowledge bases served: search these (repeatable;"
                               " default: the ones chosen for the query).")] = None,
               ) -> dict[str, Any]:
        """Hybrid (BM25 + vectors, fused by RRF), bm25 or vector search; no grading. The
        filters apply inside both indexes: k hits come back whenever k chunks match."""
        if not q.strip():
            raise HTTPException(400, "The query `q` is empty.")
        flt = make_filter(source=source or [], doc_id_prefix=doc_id_prefix or [],
                          metadata=metadata or [], tag=tag or [], date_from=date_from,
                          date_to=date_to, knowledge_base=knowledge_base or [])
        hits = _kb(request).search(q, k, mode, filter=flt)
        return {"query": q, "mode": mode, "k": k, "filter": flt.to_dict() if flt else None,
                "hits": [h.to_dict() for h in hits]}


def _add_metrics_route(app: FastAPI) -> None:
    @app.get("/metrics", tags=["meta"])
    def metrics(request: Request,
                recent: Annotated[int, Query(ge=1, le=5000)] = 200,
                source: Annotated[str, Query(
                    description="cli, api, eval or mcp; default: every run except eval's;"
                                " all: every run")] = DASHBOARD_SOURCES) -> dict[str, Any]:
        """Mean steps per question, % of runs that used every step, % forced to answer (status
        truncated), % of chunks the grader discarded, latency and cost; p50/p95 latency over
        the `recent` runs. Eval runs are left out unless `source` asks for them."""
        state = _state(request)
        runs = _runs(request)  # a user's figures are of its own runs
        m = runs.metrics(source)
        latencies = [r["latency_s"] for r in runs.list(recent, source)
                     if r["latency_s"] is not None]
        return {**m.to_dict(), "warn_truncated": m.warn_truncated,
                "warn_used_all_steps": m.warn_used_all_steps,
                "truncated_warn_pct": TRUNCATED_WARN_PCT,
                "p50_latency_s": percentile(latencies, 50) or 0.0,
                "p95_latency_s": percentile(latencies, 95) or 0.0,
                "active_runs": state.jobs.active()}


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000,
          api_key: str | None = None, workers: int = 2,
          local_workers: int | None = None, sync_folders: list[str] | None = None,
          sync_every: float = 300.0, catalog: Sequence[CatalogEntry] | None = None,
          allow_mass_delete: bool = False) -> None:
    import uvicorn

    check_bind(host, api_key, _user_keys(catalog[0].location if catalog else settings.kb))
    # a mistyped --kb is an error here, before uvicorn starts (only `ingest` creates one)
    if not catalog:
        open_backend(settings.kb, create=False).close()
    check_catalog(catalog or ())
    app = create_app(settings, api_key=api_key, workers=workers, local_workers=local_workers,
                     bind_host=host, sync_folders=sync_folders, sync_every=sync_every,
                     catalog=catalog, allow_mass_delete=allow_mass_delete)
    uvicorn.run(app, host=host, port=port, log_level="info")
