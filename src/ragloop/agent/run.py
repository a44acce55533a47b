"""One run's shared state: step counter, events, evidence, usage, and its result."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragloop.agent.evidence import CheckedAnswer, Ledger
from ragloop.core.events import AnswerEvent, Event, ToolCallEvent
from ragloop.core.types import RunStatus, Usage

log = logging.getLogger("ragloop.agent")

# Characters of a query shown in the one-line log of a tool call.
QUERY_SHOWN = 200
BUDGET_NOTICE = "Step budget is over. Answer now with what you have and say what is missing."


def log_line(event: Event) -> str | None:
    """The one line per tool call: `step=2 tool=search_knowledge_base query="…" chunks=8 kept=3`."""
    if not isinstance(event, ToolCallEvent):
        return None
    d = event.data
    parts = [f"step={event.step}", f"tool={event.tool}"]
    if "query" in d:
        query = str(d["query"]).replace('"', "'")
        if len(query) > QUERY_SHOWN:  # a pasted 100 KB question is not echoed back whole
            query = f"{query[:QUERY_SHOWN]}… ({len(query)} characters)"
        parts.append(f'query="{query}"')
    for key in ("page", "doc_id", "section", "chunks", "kept", "chars", "documents", "error"):
        if key in d:
            value = d[key]
            parts.append(f'{key}="{value}"' if key == "error" else f"{key}={value}")
    return " ".join(parts)


@dataclass
class RunResult:
    run_id: str
    question: str
    status: RunStatus
    route: str
    route_reason: str
    driver: str
    model: str
    answer: str
    citations: list[dict[str, Any]]
    invalid_citations: list[int]
    missing: list[str]
    conflicts: list[str]
    steps: int
    max_steps: int
    usage: Usage
    latency_s: float
    evidence: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    unsupported: list[dict[str, Any]] = field(default_factory=list)  # citations taken out
    citations_unchecked: bool = False  # the model's support verdict was unreadable
    citation_support: dict[str, Any] | None = None  # the offline support figures (the eval)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "question": self.question, "status": str(self.status),
            "route": self.route, "route_reason": self.route_reason, "driver": self.driver,
            "model": self.model, "answer": self.answer, "citations": self.citations,
            "invalid_citations": self.invalid_citations, "missing": self.missing,
            "conflicts": self.conflicts, "steps": self.steps, "max_steps": self.max_steps,
            "usage": self.usage.to_dict(), "latency_s": round(self.latency_s, 3),
            "evidence": self.evidence, "error": self.error,
            "unsupported": self.unsupported, "citations_unchecked": self.citations_unchecked,
            "citation_support": self.citation_support,
        }


class RunContext:
    """Counts steps, numbers evidence and emits one Event per thing that happened."""

    def __init__(self, question: str, max_steps: int,
                 on_event: Callable[[Event], None] | None = None) -> None:
        self.question = question
        self.max_steps = max_steps
        self.on_event = on_event
        self.step = 0
        self.seq = 0
        self.ledger = Ledger()
        self.usage = Usage()
        self.events: list[Event] = []
        self.started = time.perf_counter()

    def emit(self, event: Event) -> Event:
        """Number the event (this step, the next seq), keep it, log it, hand it on."""
        update: dict[str, Any] = {"step": self.step, "seq": self.seq}
        support = self.ledger.last_support
        if isinstance(event, AnswerEvent) and support is not None and support.text == event.text:
            # what the support check took out of this answer (check_citations ran it)
            if support.unsupported:
                update["unsupported"] = support.unsupported
            if support.unchecked:
                update["citations_unchecked"] = True
        event = event.model_copy(update=update)
        self.seq += 1
        self.events.append(event)
        line = log_line(event)
        if line:
            log.info(line)
        if self.on_event is not None:
            self.on_event(event)
        return event

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @ledger.setter
    def ledger(self, ledger: Ledger) -> None:
        """A driver may renumber the evidence into a new ledger (the pipeline's final order):
        the support check set on the first goes with it."""
        old = getattr(self, "_ledger", None)
        if old is not None and ledger.support_check is None:
            ledger.support_check = old.support_check
        self._ledger = ledger

    @property
    def tool_steps_left(self) -> int:
        """Steps that may still call a tool: the last step is reserved for the answer."""
        return max(0, self.max_steps - 1 - self.step)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


@dataclass
class DriverOutcome:
    """What a driver hands back: the checked answer and how the run ended."""

    checked: CheckedAnswer
    status: RunStatus
    missing: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
