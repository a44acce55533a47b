"""Typed step events: one frozen class per kind of thing that happens in a run, a union
discriminated on `kind`, and one place (`event_from`, `Event.to_dict`) that turns them into
JSON and back for the run stores (SQLite and Postgres), SSE, the eval and the CLI.

A field renamed in a driver is now an error where the event is made, not a key that silently
vanishes from the eval. The stored and streamed shape stays `{"kind", "step", "seq", "ts",
"data": {fields}}`, so runs stored before this module still load: fields they lack take their
defaults, fields no longer known are ignored.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

_HEADER = {"kind", "step", "seq", "ts"}


class BaseEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    step: int = 0
    seq: int = 0
    ts: float = Field(default_factory=time.time)

    @property
    def data(self) -> dict[str, Any]:
        """The event's own fields, as stored and streamed; fields left unset are left out."""
        return self.model_dump(exclude=_HEADER, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "data": self.data,  # type: ignore[attr-defined]
                "ts": self.ts, "seq": self.seq}


class Shown(NamedTuple):
    """One field of a tool call as its readers show it (`ToolCallEvent.shown`). `role`:
    "said" (in the sentence a person reads), "extra" (after that sentence), "detail" (the
    log line's alone); `quoted`: free text, quoted in the log line."""

    key: str
    value: Any
    role: Literal["said", "extra", "detail"]
    quoted: bool


class RouteEvent(BaseEvent):
    kind: Literal["route"] = "route"
    route: str
    reason: str = ""


class PlanEvent(BaseEvent):
    kind: Literal["plan"] = "plan"
    need_search: bool
    sub_questions: list[str] = Field(default_factory=list)
    reason: str | None = None


class ToolCallEvent(BaseEvent):
    """One tool call: a search (query, page, chunks, kept), a section fetch (doc_id, section,
    chars) or a document list (documents); `error` when it failed."""

    kind: Literal["tool_call"] = "tool_call"
    tool: str
    query: str | None = None
    page: int | None = None
    doc_id: str | None = None
    section: str | None = None
    chunks: int | None = None
    kept: int | None = None
    chars: int | None = None
    documents: int | None = None
    sub_question: int | None = None
    error: str | None = None
    # why a step beyond a part's first search was spent (the pointer or bridge it follows)
    reason: str | None = None

    # How each field is shown (`shown`). A field added above is shown everywhere (the log
    # line, the CLI, /v1 reasoning, the page) as `key=value` / "key value" with nothing
    # else to change; list it here only to show it differently.
    FREE_TEXT: ClassVar[frozenset[str]] = frozenset({"query", "error", "reason"})
    SAID: ClassVar[frozenset[str]] = frozenset(
        {"query", "chunks", "kept", "doc_id", "section", "chars", "documents", "error"})
    DETAILS: ClassVar[frozenset[str]] = frozenset({"page", "reason"})
    UNSHOWN: ClassVar[frozenset[str]] = frozenset({"tool", "sub_question"})

    def shown(self) -> list[Shown]:
        """The fields every reader of this call shows, in declaration order, each with how:
        the log line (and the CLI, which prints it) shows them all; the sentence a person
        reads (/v1 reasoning, the page) is made of the `said` ones and lists the `extra`
        ones after it; a `detail` is the log line's alone. `tool` heads every rendering and
        `sub_question` is the eval's, so neither is listed; unset fields are left out."""
        out: list[Shown] = []
        for key in type(self).model_fields:
            value = getattr(self, key)
            if key in _HEADER or key == "kind" or key in self.UNSHOWN or value is None:
                continue
            role = ("detail" if key in self.DETAILS else "said" if key in self.SAID
                    else "extra")
            out.append(Shown(key, value, role, key in self.FREE_TEXT))
        return out


class GradeEvent(BaseEvent):
    kind: Literal["grade"] = "grade"
    query: str
    chunks: int
    kept: int
    enough: bool
    missing: str | None = None
    next_query: str | None = None
    sub_question: int | None = None
    kept_ids: list[int] | None = None  # the tools driver: which chunks were kept
    verdicts: list[dict[str, Any]] | None = None  # the pipeline: every hit's verdict
    ungraded: bool | None = None  # the grader could not judge: every hit kept


class RewriteEvent(BaseEvent):
    kind: Literal["rewrite"] = "rewrite"
    query: str | None = None
    missing: str | None = None
    sub_question: int | None = None


class PlacementEvent(BaseEvent):
    """Why each document of the final evidence holds its place (agent/placement.py): its
    hops ("pointer", "second_hop", …) or "single" for single-shot's rank, the single-shot
    document whose place it took, and the single-shot documents that gave theirs."""

    kind: Literal["placement"] = "placement"
    places: list[dict[str, Any]] = Field(default_factory=list)  # {doc_id, place, why, ...}
    given_up: list[str] = Field(default_factory=list)


class AnswerEvent(BaseEvent):
    kind: Literal["answer"] = "answer"
    text: str
    citations: list[dict[str, Any]] = Field(default_factory=list)
    invalid_citations: list[int] = Field(default_factory=list)
    missing: list[str] | None = None
    conflicts: list[str] | None = None
    unconfirmed: list[int] | None = None  # evidence numbers shown as closest, not confirmed
    # the nearest passages of parts nothing confirmed answers, listed beside the answer
    # ({n, doc_id, section, text}); never citations
    closest: list[dict[str, Any]] | None = None
    forced: bool | None = None  # the tools driver's last step: no tools were offered
    cut_off: bool | None = None  # the answer came from a reply cut off at its budget
    uncited: bool | None = None  # evidence was at hand but the answer cites none
    # citations taken out because their passage does not support the sentence: {n, sentence}
    unsupported: list[dict[str, Any]] | None = None
    citations_unchecked: bool | None = None  # the model's support verdict was unreadable
    # the checks changed the text the answer's pieces (AnswerDeltaEvent) streamed: a citation
    # taken out; `text` is what a reader shows in place of the streamed one
    changed_by_check: bool | None = None


class AnswerDeltaEvent(BaseEvent):
    """One piece of the answer as it is written (a model's tokens, offline a sentence). The
    pieces joined are the answer before its citations are checked; the final AnswerEvent
    carries the checked text. Not stored (a row per token): a late reader gets the
    AnswerEvent. `reset`: what was streamed since the last reset is not the answer (the
    reply went on to call tools, or was asked again); a reader drops it."""

    kind: Literal["answer_delta"] = "answer_delta"
    text: str = ""
    reset: bool | None = None


class ErrorEvent(BaseEvent):
    kind: Literal["error"] = "error"
    error: str


class CondenseEvent(BaseEvent):
    """A conversation's turn made standalone before routing: what was typed, what is
    searched, whether it followed up or started a new topic (core/conversation.TurnKind)."""

    kind: Literal["condense"] = "condense"
    typed: str
    standalone: str
    turn_kind: str
    reason: str = ""
    # every query the first search ran, fused (the offline follow-up: `standalone` and the
    # follow-up as typed); empty when `standalone` alone was searched
    queries: list[str] = Field(default_factory=list)


class ClarifyEvent(BaseEvent):
    """The run ends with a question back to the user (status needs_input): the question has
    several readings the knowledge base answers differently and names none of them."""

    kind: Literal["clarify"] = "clarify"
    question: str
    options: list[str] = Field(default_factory=list)  # 2–5 readings, taken from the evidence
    reason: str = ""


class SourceEvent(BaseEvent):
    """Which knowledge base(s) a part of the question is searched in, and why (several KBs
    served: offline/source_choice.py). `part`: the index of the plan's part, None for the
    whole question."""

    kind: Literal["source"] = "source"
    part: int | None = None
    query: str = ""
    knowledge_bases: list[str] = Field(default_factory=list)
    reason: str = ""


Event = Annotated[RouteEvent | PlanEvent | ToolCallEvent | GradeEvent | RewriteEvent
                  | PlacementEvent | AnswerEvent | ErrorEvent
                  | CondenseEvent
                  | AnswerDeltaEvent
                  | ClarifyEvent
                  | SourceEvent
                  , Field(discriminator="kind")]
_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from(kind: str, step: int, data: dict[str, Any], *, seq: int = 0,
               ts: float | None = None) -> Event:
    """An event from its stored or streamed parts (the inverse of `to_dict`)."""
    fields = {k: v for k, v in data.items() if k not in _HEADER}
    header: dict[str, Any] = {"kind": kind, "step": step, "seq": seq}
    if ts is not None:
        header["ts"] = ts
    return _ADAPTER.validate_python({**fields, **header})
