"""One run's shared state (step counter, events, evidence, usage), the shape of a driver, and
`drain`, the one place a run's events are numbered, kept, logged and handed on.

A run's steps (agent/template.py, and a driver's `gather(ctx)` within them) are a generator:
each Event is yielded as it happens (nested steps with `yield from`) and the result returned.
Nothing in them stores or streams an event itself; the engine drains the generator into the
run store and the listener (SSE, CLI, eval).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragloop.agent.evidence import CheckedAnswer, Ledger
from ragloop.core.decisions import Grade, Plan
from ragloop.core.events import AnswerDeltaEvent, Event, SourceEvent, ToolCallEvent
from ragloop.core.types import Citation, Hit, RunStatus, Usage

log = logging.getLogger("ragloop.agent")

# Characters of a query shown in the one-line log of a tool call.
QUERY_SHOWN = 200
BUDGET_NOTICE = "Step budget is over. Answer now with what you have and say what is missing."


def log_line(event: Event) -> str | None:
    """The one line per tool call: `step=2 tool=search_knowledge_base query="…" chunks=8 kept=3`;
    and one per choice of knowledge base(s) when several are served."""
    if isinstance(event, SourceEvent):
        part = "question" if event.part is None else f"part={event.part}"
        return (f"step={event.step} source {part} knowledge_bases="
                f"{','.join(event.knowledge_bases)} reason=\"{event.reason}\"")
    if not isinstance(event, ToolCallEvent):
        return None
    parts = [f"step={event.step}", f"tool={event.tool}"]
    for f in event.shown():  # every field, details too (ToolCallEvent.shown)
        value = f.value
        if f.key == "query":
            value = str(value).replace('"', "'")
            if len(value) > QUERY_SHOWN:  # a pasted 100 KB question is not echoed back whole
                value = f"{value[:QUERY_SHOWN]}… ({len(value)} characters)"
        parts.append(f'{f.key}="{value}"' if f.quoted else f"{f.key}={value}")
    return " ".join(parts)


@dataclass
class RunResult:
    """What `Engine.ask` returns: the answer, its citations, and how the run went.

    `answer` carries `[n]` markers; each `Citation` in `citations` says which document and
    section `[n]` points to. `status` is one of `RunStatus` (answered, truncated,
    unanswerable, needs_input, refused, failed); `missing` lists the parts the answer says it
    lacks. `usage` counts the model calls (tokens, cost; zeros offline), `evidence`
    every passage the run gathered, numbered as the answer cites them. `to_dict()` is the JSON
    the HTTP API and the run store show."""

    run_id: str
    question: str
    status: RunStatus
    route: str
    route_reason: str
    driver: str
    model: str
    answer: str
    citations: list[Citation]
    invalid_citations: list[int]
    missing: list[str]
    conflicts: list[str]
    steps: int
    max_steps: int
    usage: Usage
    latency_s: float
    evidence: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    closest: list[dict[str, Any]] = field(default_factory=list)  # see DriverOutcome.closest
    unsupported: list[dict[str, Any]] = field(default_factory=list)  # citations taken out
    citations_unchecked: bool = False  # the model's support verdict was unreadable
    citation_support: dict[str, Any] | None = None  # the offline support figures (the eval)
    # the answer declines, in whole or in part (see DriverOutcome.declined): the eval's
    # abstention reads this, so the run and the eval never disagree about an answer
    declined: bool = False
    # a conversation's turn: the question as searched, made standalone from the history
    # (None for a question asked on its own), and the conversation's id
    standalone: str | None = None
    conversation_id: str | None = None
    # status needs_input: the question back and its options (`Clarification.to_dict`)
    clarification: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "question": self.question, "status": str(self.status),
            "route": self.route, "route_reason": self.route_reason, "driver": self.driver,
            "model": self.model, "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "invalid_citations": self.invalid_citations, "missing": self.missing,
            "conflicts": self.conflicts, "steps": self.steps, "max_steps": self.max_steps,
            "usage": self.usage.to_dict(), "latency_s": round(self.latency_s, 3),
            "evidence": self.evidence, "error": self.error, "closest": self.closest,
            "unsupported": self.unsupported, "citations_unchecked": self.citations_unchecked,
            "citation_support": self.citation_support, "declined": self.declined,
            "standalone": self.standalone, "conversation_id": self.conversation_id,
            "clarification": self.clarification,
        }


@dataclass
class FirstSearch:
    """Step 1 of every run (agent/template.py): the question searched at single-shot's depth
    and graded."""

    query: str
    against: str  # what the hits were graded against (the question, or its one part)
    hits: list[Hit]  # the graded hits, in search order
    grade: Grade
    error: str | None = None  # the search failed (no words to search for): nothing found


class RunContext:
    """Counts steps, numbers evidence and keeps the run's events (numbered by `record`), with
    the run's plan and first search for the driver that gathers after them."""

    def __init__(self, question: str, max_steps: int) -> None:
        self.typed = question  # what the user typed, kept whatever a condenser makes of it
        # what is planned, graded and answered: the typed question, or the model condenser's
        # standalone question for a follow-up (agent/engine.py)
        self.question = question
        # what the first search searches: the typed question, or the offline condenser's
        # query for a follow-up (the typed follow-up + the previous turn's query, issue 40)
        self.searched = question
        # a follow-up searched several ways and fused (offline/follow_up.py): the queries, the
        # first of them `searched`, and the documents ranked as a prior; () when one search
        self.also: tuple[str, ...] = ()
        self.prior: tuple[str, ...] = ()
        self.max_steps = max_steps
        self.step = 0
        self.seq = 0
        # a driver may renumber the evidence into a new ledger (the pipeline's final order)
        self.ledger = Ledger()
        self.usage = Usage()
        self.events: list[Event] = []
        self.started = time.perf_counter()
        self.plan: Plan | None = None  # the driver's plan, when it plans
        self.first: FirstSearch | None = None  # step 1, set before the driver gathers
        # the answer's pieces streamed since the last reset, joined (AnswerDeltaEvent)
        self.streamed = ""

    @property
    def context(self) -> str:
        """What was searched, when it is not the question itself ("" when it is)."""
        return self.searched if self.searched != self.question else ""

    def record(self, event: Event) -> Event:
        """Number the event (this step, the next seq), keep it and log its line. An answer's
        piece is not a step: it takes the seq of the step it comes before without using it up
        (the stored steps stay numbered 0, 1, 2, …) and is joined to `streamed`, not kept."""
        event = event.model_copy(update={"step": self.step, "seq": self.seq})
        if isinstance(event, AnswerDeltaEvent):
            self.streamed = event.text if event.reset else self.streamed + event.text
            return event
        self.seq += 1
        self.events.append(event)
        line = log_line(event)
        if line:
            log.info(line)
        return event

    @property
    def tool_steps_left(self) -> int:
        """Steps that may still call a tool: the last step is reserved for the answer."""
        return max(0, self.max_steps - 1 - self.step)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


@dataclass
class DriverOutcome:
    """How a run ended: the checked answer and its status (agent/template.py)."""

    checked: CheckedAnswer
    status: RunStatus
    missing: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    # nearest passages nothing confirmed ({n, doc_id, section, text}): "closest passages
    # (not confirmed)" beside the answer, never in it and never cited
    closest: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # what ended the run early (failures.ENDS)
    # the answer declines in whole or in part: status unanswerable, a part the answerer
    # stated missing, or a free-text answer whose words decline (language/lang `decline`)
    declined: bool = False
    clarification: dict[str, Any] | None = None  # status needs_input: the question back


def closest_passages(draft_closest: list[tuple[int, str]], ledger: Ledger) -> list[dict[str, Any]]:
    """The answerer's closest sentences with the place each comes from."""
    out: list[dict[str, Any]] = []
    for n, text in draft_closest:
        ev = ledger.get(n)
        if ev is not None and not ev.confirmed:
            out.append({"n": n, "doc_id": ev.doc_id, "section": ev.section, "text": text})
    return out


T = TypeVar("T")
# What a driver's run (and each of its nested steps) is: events yielded as they happen, then
# its result returned.
Steps = Generator[Event, None, T]


def drain(steps: Steps[T], ctx: RunContext,
          sink: Callable[[Event], None] | None = None) -> T:
    """Run `steps` to the end: each event is numbered and kept on `ctx`, logged, then handed
    to `sink` (the engine's: the run store, then the listener). Returns the steps' result; an
    exception raised inside them propagates."""
    while True:
        try:
            event = next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        event = ctx.record(event)
        if sink is not None:
            sink(event)
