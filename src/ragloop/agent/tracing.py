"""OpenTelemetry traces of every run, sent over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.

One trace per run: the run (CHAIN) → each step (CHAIN) → its searches (RETRIEVER, with the
query and the hits as documents), section fetches and document lists (TOOL), grades, plans,
rewrites and the answer (CHAIN), and each model call (LLM, with model, tokens, cost and finish
reason). With the variable unset nothing here is imported past this module, no provider or
exporter is built and the engine's run store and chat models are the plain ones.

Attributes follow OpenInference (`openinference.span.kind`, `input.value`,
`retrieval.documents.N.document.*`, `llm.token_count.*`, `llm.cost.total`) because that is
what Arize Phoenix renders (a span without a kind is "unknown", a retriever's documents are
shown only from those keys); model-call spans also carry the OTel GenAI keys
(`gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.response.finish_reasons`, …),
which is what Langfuse's OTLP endpoint reads to make a span a generation with tokens and cost
(it takes `input.value` / `output.value` for every span's input and output). The GenAI
conventions alone have no retriever documents or chain steps Phoenix shows, hence both.
Conventions: github.com/Arize-ai/openinference spec/semantic_conventions.md; OTel
semantic-conventions docs/gen-ai/gen-ai-spans.md; langfuse.com/docs/opentelemetry
("property mapping").

How spans are made: the engine's events come after the work they describe, and the model
calls and searches of a step come before its events. So the traced run store (below) keeps a
step's model calls and searches (reported through core/observe.py) until that step's next
event, then writes them, the event's own span and the step around them with their real start
and end times. The run's span is a child of whatever span is current when the run starts (a
web app's request span), so a trace of the app contains its runs.
"""

from __future__ import annotations

import json
import os
import threading
from contextvars import Token
from typing import TYPE_CHECKING, Any

from ragloop.core.errors import ConfigError
from ragloop.core.events import (
    AnswerEvent,
    ErrorEvent,
    Event,
    GradeEvent,
    PlanEvent,
    RewriteEvent,
    RouteEvent,
    ToolCallEvent,
)
from ragloop.core.observe import OBSERVER, ModelCall, RunObserver, SearchCall
from ragloop.llm.base import ChatModel
from ragloop.storage.protocols import (
    DASHBOARD_SOURCES,
    ConversationSummary,
    Metrics,
    RunCopy,
    RunRecord,
    RunStore,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

#: the standard OTLP variables (the traces-only one wins, as the exporter reads them)
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# Characters of a retrieved passage or an answer put on a span.
TEXT_CHARS = 4000

_lock = threading.Lock()
_tracer: Tracer | None = None
_provider: Any = None


def tracing_enabled() -> bool:
    """An OTLP endpoint is set (and the SDK is not switched off by OTEL_SDK_DISABLED)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(v, "").strip() for v in ENDPOINT_VARIABLES)


def _get_tracer() -> Tracer:
    """The process's one tracer, built on first use: an SDK provider whose batch processor
    sends to the OTLP/HTTP exporter, which reads the endpoint, headers and timeout from the
    standard OTEL_EXPORTER_OTLP_* variables itself."""
    global _tracer, _provider
    with _lock:
        if _tracer is not None:
            return _tracer
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK is not"
                " installed: pip install 'ragloop[otel]', or unset the variable.") from exc
        # Resource.create adds OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (Phoenix reads
        # its project from openinference.project.name there); "ragloop" unless they say
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "ragloop"}
        provider = TracerProvider(resource=Resource.create(attributes))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        _provider = provider
        _tracer = provider.get_tracer("ragloop")
        return _tracer


def flush_traces(timeout_ms: int = 10_000) -> bool:
    """Send the spans still queued now (the provider also does at interpreter exit)."""
    return bool(_provider.force_flush(timeout_ms)) if _provider is not None else True


def traced_runs(runs: RunStore) -> RunStore:
    """`runs`, tracing each run when an endpoint is set; else `runs` itself."""
    return TracedRunStore(runs, _get_tracer()) if tracing_enabled() else runs


def observed(chat: ChatModel | None) -> ChatModel | None:
    """`chat`, reporting its calls to the traced run, when an endpoint is set."""
    if chat is None or not tracing_enabled():
        return chat
    from ragloop.llm.observed import ObservedChat

    return chat if isinstance(chat, ObservedChat) else ObservedChat(chat)


# -- spans ----------------------------------------------------------------------------------

def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """OTel attributes take no None; lists must be of one primitive type."""
    return {k: v for k, v in attributes.items() if v is not None}


class RunTrace(RunObserver):
    """The spans of one run, written as its events arrive (see the module docstring)."""

    def __init__(self, tracer: Tracer, run_id: str, question: str, driver: str, model: str,
                 max_steps: int) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer
        self.root = tracer.start_span("ragloop.run", attributes=_clean({
            "openinference.span.kind": "CHAIN", "input.value": question,
            "ragloop.run_id": run_id, "ragloop.driver": driver, "ragloop.model": model,
            "ragloop.max_steps": max_steps,
            "metadata": _json({"run_id": run_id, "driver": driver, "model": model}),
        }))
        self.root_context = trace.set_span_in_context(self.root)
        self.step: int = 0
        self.step_span: Span | None = None
        self.step_end = 0
        self.last_ns = self.root.start_time or 0  # type: ignore[attr-defined]
        self.calls: list[ModelCall] = []
        self.searches: list[SearchCall] = []
        self.token: Token[RunObserver | None] | None = None

    # what the model wrapper and the toolbox report (core/observe.py)
    def model_call(self, call: ModelCall) -> None:
        self.calls.append(call)

    def search(self, call: SearchCall) -> None:
        self.searches.append(call)

    # what the engine's run store hears
    def event(self, event: Event) -> None:
        ts = max(_ns(event.ts), self.last_ns)
        parent = self._step_context(event.step, ts)
        self._flush_calls(parent)
        start, end, attributes, name, error = self._event_span(event, ts)
        span = self.tracer.start_span(name, context=parent, start_time=start,
                                      attributes=_clean(attributes))
        if error:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        span.end(end_time=max(end, start))
        self._ended(max(end, start))

    def finish(self, result: dict[str, Any]) -> None:
        self._flush_calls(self._current_context())
        self._end_step()
        usage = result.get("usage") or {}
        status = str(result.get("status", ""))
        self.root.set_attributes(_clean({
            "output.value": result.get("answer") or "", "ragloop.status": status,
            "ragloop.route": result.get("route"), "ragloop.steps": result.get("steps"),
            "ragloop.citations": _json(result.get("citations") or []),
            "llm.token_count.prompt": usage.get("input_tokens"),
            "llm.token_count.completion": usage.get("output_tokens"),
            "llm.cost.total": usage.get("cost_usd"),
        }))
        if status == "failed":
            self.root.set_status(self._trace.Status(self._trace.StatusCode.ERROR,
                                                    str(result.get("error") or "failed")))
        self.root.end()

    # -- steps and the spans under them

    def _current_context(self) -> Any:
        if self.step_span is None:
            return self.root_context
        return self._trace.set_span_in_context(self.step_span)

    def _step_context(self, step: int, ts: int) -> Any:
        """The context of `step`'s span, opened when the step's first report or event comes
        (starting at its first model call or search); step 0 (the route) is the run's."""
        if step == self.step or step < 1:
            return self._current_context() if step >= 1 else self.root_context
        self._end_step()
        first = [c.started_ns for c in self.calls] + [s.started_ns for s in self.searches]
        start = min([*first, ts])
        self.step, self.step_end = step, start
        self.step_span = self.tracer.start_span(
            f"step {step}", context=self.root_context, start_time=start,
            attributes={"openinference.span.kind": "CHAIN", "ragloop.step": step})
        return self._trace.set_span_in_context(self.step_span)

    def _end_step(self) -> None:
        if self.step_span is not None:
            self.step_span.end(end_time=self.step_end)
            self.step_span = None

    def _ended(self, end: int) -> None:
        self.last_ns = max(self.last_ns, end)
        self.step_end = max(self.step_end, end)

    def _flush_calls(self, parent: Any) -> None:
        """The model calls reported since the last event, as LLM spans under `parent`."""
        for call in self.calls:
            span = self.tracer.start_span(f"chat {call.model}", context=parent,
                                          start_time=call.started_ns,
                                          attributes=_clean(_llm_attributes(call)))
            if call.error:
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, call.error))
            span.end(end_time=call.ended_ns)
            self._ended(call.ended_ns)
        self.calls.clear()

    def _search_of(self, query: str | None, page: int | None) -> SearchCall | None:
        for i, found in enumerate(self.searches):
            if found.query == query and found.page == (page or 1):
                return self.searches.pop(i)
        return None

    def _event_span(self, event: Event,
                    ts: int) -> tuple[int, int, dict[str, Any], str, str | None]:
        """(start, end, attributes, name, error) of one event's span."""
        start, kind = self.last_ns, "CHAIN"
        attributes: dict[str, Any] = {"ragloop.step": event.step, "ragloop.kind": event.kind}
        if isinstance(event, ToolCallEvent):
            found = self._search_of(event.query, event.page) if event.query else None
            if event.tool == "search_knowledge_base":
                kind = "RETRIEVER"
                attributes["input.value"] = event.query
                if found is not None:
                    start, ts = found.started_ns, max(found.ended_ns, found.started_ns)
                    attributes.update(_documents(found))
            else:
                kind = "TOOL"
                args = {k: v for k, v in {"doc_id": event.doc_id, "section": event.section,
                                          "query": event.query}.items() if v is not None}
                attributes.update({"tool.name": event.tool, "input.value": _json(args),
                                   "input.mime_type": "application/json"})
            attributes["output.value"] = _json(event.data)
            attributes["output.mime_type"] = "application/json"
            attributes["openinference.span.kind"] = kind
            return start, ts, attributes, event.tool, event.error
        attributes["openinference.span.kind"] = kind
        attributes["output.value"] = _json(event.data)
        attributes["output.mime_type"] = "application/json"
        if isinstance(event, GradeEvent | RewriteEvent):
            attributes["input.value"] = event.query
        elif isinstance(event, AnswerEvent):
            attributes["output.value"] = event.text[:TEXT_CHARS]
            attributes["output.mime_type"] = "text/plain"
            attributes["ragloop.citations"] = _json(event.citations)
        elif isinstance(event, RouteEvent | PlanEvent):
            pass
        error = event.error if isinstance(event, ErrorEvent) else None
        return start, ts, attributes, str(event.kind), error


def _documents(found: SearchCall) -> dict[str, Any]:
    """A search's hits as OpenInference retrieval documents (id, content, score, metadata)."""
    out: dict[str, Any] = {}
    for i, h in enumerate(found.hits):
        key = f"retrieval.documents.{i}.document"
        out[f"{key}.id"] = f"{h.doc_id}#{h.chunk_id}"
        out[f"{key}.content"] = h.text[:TEXT_CHARS]
        out[f"{key}.score"] = float(h.score)
        out[f"{key}.metadata"] = _json({
            "doc_id": h.doc_id, "section": h.section, "section_title": h.section_title,
            "bm25_rank": h.bm25_rank, "vector_rank": h.vector_rank})
    return out


def _llm_attributes(call: ModelCall) -> dict[str, Any]:
    """OpenInference LLM keys, and the OTel GenAI keys beside them."""
    provider, _, model = call.model.partition(":")
    usage = call.usage
    attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": call.response_model or model, "llm.provider": provider,
        "llm.invocation_parameters": _json({"max_tokens": call.max_tokens,
                                            "temperature": call.temperature,
                                            "purpose": call.purpose}),
        "llm.token_count.prompt": usage.input_tokens,
        "llm.token_count.completion": usage.output_tokens,
        "llm.token_count.total": usage.input_tokens + usage.output_tokens,
        "llm.token_count.prompt_details.cache_read": usage.cache_read_tokens,
        "llm.token_count.prompt_details.cache_write": usage.cache_write_tokens,
        "llm.cost.total": usage.cost_usd,
        "output.value": call.output[:TEXT_CHARS],
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
        "gen_ai.request.model": model, "gen_ai.response.model": call.response_model or None,
        "gen_ai.request.max_tokens": call.max_tokens,
        "gen_ai.request.temperature": call.temperature,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.response.finish_reasons": [call.stop_reason or call.finish or "error"],
        "ragloop.purpose": call.purpose, "ragloop.finish": call.finish or None,
        "ragloop.cost_usd": usage.cost_usd,
    }
    messages = ([("system", call.system)] if call.system else []) + list(call.messages)
    for i, (role, text) in enumerate(messages):
        attributes[f"llm.input_messages.{i}.message.role"] = role
        attributes[f"llm.input_messages.{i}.message.content"] = text
    attributes["input.value"] = messages[-1][1] if messages else ""
    if call.output or call.tool_calls:
        attributes["llm.output_messages.0.message.role"] = "assistant"
        attributes["llm.output_messages.0.message.content"] = call.output[:TEXT_CHARS]
    for i, name in enumerate(call.tool_calls):
        attributes[f"llm.output_messages.0.message.tool_calls.{i}.tool_call.function.name"] = name
    return attributes


# -- the run store that traces ---------------------------------------------------------------

class TracedRunStore(RunStore):
    """A run store that also sends each run it records as a trace: `start` opens the run's
    span and makes it the observer of the code that runs next in this context (the engine's
    run), `add_event` writes the spans of each event, `finish` ends the trace. Everything is
    stored by the wrapped store first, unchanged."""

    def __init__(self, inner: RunStore, tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer
        self._runs: dict[str, RunTrace] = {}
        self._lock = threading.Lock()

    def start(self, question: str, *, driver: str = "", model: str = "", max_steps: int = 0,
              run_id: str | None = None, source: str = "api",
              conversation_id: str | None = None, owner: str | None = None) -> str:
        run_id = self.inner.start(question, driver=driver, model=model, max_steps=max_steps,
                                  run_id=run_id, source=source,
                                  conversation_id=conversation_id, owner=owner)
        run = RunTrace(self.tracer, run_id, question, driver, model, max_steps)
        run.token = OBSERVER.set(run)
        with self._lock:
            self._runs[run_id] = run
        return run_id

    def add_event(self, run_id: str, event: Event) -> None:
        self.inner.add_event(run_id, event)
        run = self._runs.get(run_id)
        if run is not None:
            run.event(event)

    def finish(self, run_id: str, result: dict[str, Any]) -> None:
        self.inner.finish(run_id, result)
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is not None:
            if run.token is not None and OBSERVER.get() is run:
                OBSERVER.reset(run.token)
            run.finish(result)

    # reads, and the rest, go to the wrapped store
    def get(self, run_id: str, owner: str | None = None) -> RunRecord | None:
        return self.inner.get(run_id, owner)

    def events(self, run_id: str, after_seq: int = -1) -> list[Event]:
        return self.inner.events(run_id, after_seq)

    def list(self, limit: int = 20, source: str | None = None,
             owner: str | None = None) -> list[RunRecord]:
        return self.inner.list(limit, source, owner)

    def metrics(self, source: str | None = DASHBOARD_SOURCES,
                owner: str | None = None) -> Metrics:
        return self.inner.metrics(source, owner)

    def conversation(self, conversation_id: str, owner: str | None = None) -> list[RunRecord]:
        return self.inner.conversation(conversation_id, owner)

    def answered(self, answer: str, owner: str | None = None) -> RunRecord | None:
        return self.inner.answered(answer, owner)

    def conversations(self, limit: int = 20,
                      owner: str | None = None) -> list[ConversationSummary]:
        return self.inner.conversations(limit, owner)

    def mark_interrupted(self) -> list[str]:
        return self.inner.mark_interrupted()

    def import_runs(self, runs: list[RunCopy]) -> tuple[list[str], int]:
        return self.inner.import_runs(runs)

    def close(self) -> None:
        self.inner.close()
