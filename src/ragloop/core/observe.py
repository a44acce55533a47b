"""What a run's observer hears besides the event stream: each model call and each search with
its hits, as they happen (the traces, agent/tracing.py, turn them into spans).

The events say what a step decided; they do not carry the retrieved passages or a model
call's prompt, tokens and finish reason, and they are made after the work is done. The model
wrapper (llm/observed.py) and the toolbox's search tell the observer of the run they run in,
found through a context variable the traced run store sets for the length of a run. With
tracing off, nothing sets it and nothing is recorded.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from ragloop.core.types import Hit, Usage


@dataclass(frozen=True)
class ModelCall:
    """One chat-model call: when, what was asked and what came back."""

    model: str  # "provider:model"
    purpose: str  # loop / decision / answer
    started_ns: int
    ended_ns: int
    system: str = ""
    messages: tuple[tuple[str, str], ...] = ()  # (role, text) of the messages sent
    max_tokens: int = 0
    temperature: float = 0.0
    usage: Usage = field(default_factory=Usage)
    output: str = ""
    tool_calls: tuple[str, ...] = ()  # names of the tools the reply called
    finish: str = ""  # done / truncated / refused
    stop_reason: str = ""  # the provider's own word
    response_model: str = ""
    error: str | None = None  # the call raised this


@dataclass(frozen=True)
class SearchCall:
    """One search of the knowledge base and the hits it returned, best first."""

    query: str
    page: int
    started_ns: int
    ended_ns: int
    hits: tuple[Hit, ...]


class RunObserver(Protocol):
    def model_call(self, call: ModelCall) -> None: ...

    def search(self, call: SearchCall) -> None: ...


#: the observer of the run the current code runs in (None: not traced)
OBSERVER: ContextVar[RunObserver | None] = ContextVar("ragloop_run_observer", default=None)
