"""Traces: a run sent over OTLP to a real Arize Phoenix started on loopback, read back through
Phoenix's own client; with no endpoint set, nothing of OpenTelemetry is built.

Phoenix lives in its own venv (.venv-phoenix, pinned by requirements-phoenix.lock; see the
Makefile): the server runs from it, and so does the client that reads the spans back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from graders import KeepsAll
from model_server import free_port, serve

from ragloop.agent.engine import Engine
from ragloop.agent.tracing import ENDPOINT_VARIABLES, TracedRunStore, flush_traces
from ragloop.core.types import RunStatus, Usage
from ragloop.llm.base import ChatResponse, ToolCall
from ragloop.llm.scripted import ScriptedChat

ROOT = Path(__file__).resolve().parent.parent
PHOENIX_PYTHON = ROOT / ".venv-phoenix" / "bin" / "python"
PROJECT = "ragloop-test"
QUESTION = "Who approves travel expenses above £2,500?"

# Phoenix's client (arize-phoenix-client) lists a project's spans over its REST API.
# Attributes are flattened to the dotted keys they were sent with, whether Phoenix hands them
# back flat or nested ({"retrieval": {"documents": [...]}}).
READ_SPANS = """
import json, sys
from phoenix.client import Client

def flat(value, prefix=""):
    if isinstance(value, dict):
        return {k: v for key, sub in value.items()
                for k, v in flat(sub, prefix + key + ".").items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return {k: v for i, sub in enumerate(value)
                for k, v in flat(sub, f"{prefix}{i}.").items()}
    return {prefix[:-1]: value}

spans = Client(base_url=sys.argv[1]).spans.get_spans(project_identifier=sys.argv[2], limit=1000)
for span in spans:
    span["attributes"] = flat(span.get("attributes") or {})
print(json.dumps(spans, default=str))
"""


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """The base URL of a Phoenix server of its own: a fresh working dir (its SQLite database),
    free HTTP and gRPC ports on loopback."""
    if not PHOENIX_PYTHON.exists():
        pytest.fail("Phoenix is not installed: run `make .venv-phoenix/.installed`")
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port())}
    url = f"http://127.0.0.1:{port}"
    # the first start creates and migrates its database: slow on 2 busy cores
    with serve([str(PHOENIX_PYTHON), "-m", "phoenix.server.main", "serve"],
               work / "server.log", f"{url}/healthz", 300, env=env, cwd=work):
        yield url


def phoenix_spans(url: str, run_id: str, expect: int) -> list[dict]:
    """The spans of the run's trace, read through Phoenix's client once `expect` are in."""
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run([str(PHOENIX_PYTHON), "-c", READ_SPANS, url, PROJECT],
                             capture_output=True, text=True, timeout=120)
        spans = json.loads(out.stdout) if out.returncode == 0 else []
        roots = [s for s in spans if s["attributes"].get("ragloop.run_id") == run_id]
        trace = [s for s in spans if roots
                 and s["context"]["trace_id"] == roots[0]["context"]["trace_id"]]
        if len(trace) >= expect or time.monotonic() > deadline:
            assert out.returncode == 0, out.stderr
            return trace
        time.sleep(1)


def search_call(query: str) -> ChatResponse:
    return ChatResponse(text="", tool_calls=[ToolCall(id="c1", name="search_knowledge_base",
                                                      arguments={"query": query})],
                        usage=Usage(input_tokens=300, output_tokens=12, cost_usd=0.0004,
                                    calls=1), stop_reason="tool_use", model="scripted-1")


def test_a_run_is_one_trace_in_phoenix(phoenix, small_kb, monkeypatch) -> None:
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")
    chat = ScriptedChat([
        search_call("approval threshold"),
        ChatResponse(text="Expenses above £2,500 per trip are approved by the CFO [1].",
                     usage=Usage(input_tokens=500, output_tokens=20, cost_usd=0.0009, calls=1),
                     stop_reason="end_turn", model="scripted-1"),
    ])
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=4, citation_check="offline"),
                    chat=chat, grader=KeepsAll())
    assert isinstance(engine.runs, TracedRunStore)
    result = engine.ask(QUESTION, route="agent", driver="tools")
    assert result.status == RunStatus.ANSWERED and result.citations
    assert flush_traces()

    spans = phoenix_spans(phoenix, result.run_id, expect=8)
    by_kind: dict[str, list[dict]] = {}
    for s in spans:
        # Phoenix files `openinference.span.kind` as the span's own `span_kind`
        by_kind.setdefault(s["span_kind"], []).append(s)
    ids = {s["context"]["span_id"]: s for s in spans}

    # the run: the root of its trace, with the question in and the answer out
    (run,) = [s for s in spans if s["name"] == "ragloop.run"]
    assert run["parent_id"] is None
    assert run["attributes"]["input.value"] == QUESTION
    assert run["attributes"]["output.value"] == result.answer
    assert run["attributes"]["ragloop.status"] == "answered"

    # each step under the run, each search under a step with its query and its hits
    steps = [s for s in spans if s["name"].startswith("step ")]
    assert {s["parent_id"] for s in steps} == {run["context"]["span_id"]}
    def t(span: dict, key: str = "start_time") -> datetime:
        return datetime.fromisoformat(span[key])

    searches = sorted(by_kind["RETRIEVER"], key=t)  # Phoenix lists the newest first
    assert [s["attributes"]["input.value"] for s in searches] == [QUESTION,
                                                                  "approval threshold"]
    for s in searches:
        assert ids[s["parent_id"]]["name"].startswith("step ")
        docs = [k for k in s["attributes"] if k.startswith("retrieval.documents.")]
        assert any(k.endswith(".document.id") for k in docs)
    first = searches[0]["attributes"]
    assert any("policies/travel.md" in str(v) for k, v in first.items()
               if k.endswith(".document.id"))
    assert any("CFO" in str(v) or "Chief Financial Officer" in str(v)
               for k, v in first.items() if k.endswith(".document.content"))

    # the grades, and the answer
    names = [s["name"] for s in spans]
    assert "grade" in names and "answer" in names

    # each model call: an LLM span with the model, tokens, cost and finish reason
    llm = sorted(by_kind["LLM"], key=t)
    assert len(llm) == 2
    first_call = llm[0]["attributes"]
    assert first_call["llm.token_count.prompt"] == 300
    assert first_call["llm.token_count.completion"] == 12
    assert first_call["gen_ai.usage.input_tokens"] == 300
    assert abs(first_call["llm.cost.total"] - 0.0004) < 1e-9
    assert first_call["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first_call["llm.model_name"] == "scripted-1"
    assert llm[1]["attributes"]["output.value"] == chat.calls[1].response.text
    for s in llm:
        assert ids[s["parent_id"]]["name"].startswith("step ")
    # the trace's spans nest in time: each child within its parent
    for s in spans:
        if s["parent_id"] in ids:
            parent = ids[s["parent_id"]]
            assert t(parent, "start_time") <= t(s, "start_time") <= t(s, "end_time") \
                <= t(parent, "end_time"), (s["name"], parent["name"])


NO_ENDPOINT = """
import sys
from ragloop.agent import tracing
from ragloop.agent.engine import Components, Engine
from ragloop.core.observe import OBSERVER
from ragloop.kb import KnowledgeBase
from ragloop.llm.scripted import ScriptedChat

kb = KnowledgeBase.open(sys.argv[1])
chat = ScriptedChat(["unused"])
engine = Engine(kb, chat=chat)
assert engine.runs is kb.backend.runs, engine.runs
assert Components.from_settings(kb.settings, chat=chat).chat is chat
result = engine.ask("Anything about anything?")
assert OBSERVER.get() is None
assert tracing._provider is None and tracing._tracer is None
loaded = [m for m in sys.modules if m.startswith("opentelemetry.sdk")
          or m.startswith("opentelemetry.exporter")]
assert not loaded, loaded
print(result.status)
"""


def test_with_no_endpoint_no_exporter_is_built(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", NO_ENDPOINT, str(tmp_path / "kb")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip()  # the run ended with a status
