"""The nouns shared by every layer: documents, sections, chunks, hits, usage, step events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class SectionText:
    """One section of a parsed document: stable id ("2.3", "p4", "0"), title path, text."""

    section: str
    title_path: tuple[str, ...]
    text: str

    @property
    def title(self) -> str:
        return self.title_path[-1] if self.title_path else ""


@dataclass(frozen=True)
class ParsedDocument:
    doc_id: str
    title: str
    source: str
    sections: list[SectionText]
    mime: str = "text/plain"
    #: what the reader found about the document (front matter; PDF / Office properties:
    #: title, author, date) and the tags given at ingest (`tags`: a list); filters read it
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    section: str
    section_title: str
    ord: int
    text: str


@dataclass
class Hit:
    """A chunk with its scores: each component's rank/score, the fused score, a grader verdict."""

    chunk_id: int
    doc_id: str
    section: str
    section_title: str
    text: str
    score: float = 0.0
    doc_title: str = ""
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    verdict: str | None = None
    grade_score: float | None = None
    #: the knowledge base it came from, when several are served (kb/multi.py); "" for one
    kb: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _without_empty_kb(asdict(self))


@dataclass(frozen=True)
class Citation:
    """One citation an answer makes: the `[n]` written in the answer text and the document
    and section that evidence number points to. Its JSON form (`to_dict`) is what the HTTP
    API, the run store and the eval have always shown: `{"n", "doc_id", "section"}`."""

    n: int
    doc_id: str
    section: str
    kb: str = ""  # the knowledge base it came from when several are served ("": one)

    def __repr__(self) -> str:  # as it always read for one knowledge base
        where = f", kb={self.kb!r}" if self.kb else ""
        return f"Citation(n={self.n}, doc_id={self.doc_id!r}, section={self.section!r}{where})"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Citation:
        return cls(n=int(d["n"]), doc_id=str(d["doc_id"]), section=str(d["section"]),
                   kb=str(d.get("kb") or ""))

    def to_dict(self) -> dict[str, Any]:
        return _without_empty_kb({"n": self.n, "doc_id": self.doc_id, "section": self.section,
                                  "kb": self.kb})


@dataclass(frozen=True)
class DocumentInfo:
    doc_id: str
    title: str
    source: str
    sections: int
    chunks: int
    content_hash: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    kb: str = ""  # the knowledge base it is in, when several are served

    def to_dict(self) -> dict[str, Any]:
        return _without_empty_kb(asdict(self))


@dataclass(frozen=True)
class SectionInfo:
    doc_id: str
    section: str
    title: str
    title_path: tuple[str, ...]
    text: str
    ord: int = 0
    kb: str = ""  # the knowledge base it is in, when several are served

    def to_dict(self) -> dict[str, Any]:
        d = _without_empty_kb(asdict(self))
        d["title_path"] = list(self.title_path)
        return d


def _without_empty_kb(d: dict[str, Any]) -> dict[str, Any]:
    """The JSON shape of one knowledge base's nouns stays what it was: `kb` only when set."""
    if not d.get("kb"):
        d.pop("kb", None)
    return d


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    # calls whose reply reported no usage (a streamed reply of llama-cpp-python's server, which
    # ignores stream_options.include_usage): their tokens and cost are unknown, not zero, so
    # the figures above are then a lower bound (`usage_summary` says so)
    unmeasured: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls
        self.unmeasured += other.unmeasured

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def usage_summary(usage: Mapping[str, Any]) -> str:
    """A run's usage (`Usage.to_dict()`, as stored) in one line: its tokens and cost, or
    "usage unknown" when a model call reported none (never 0 tokens / $0 as if measured);
    when only some did, what the others reported, as a lower bound."""
    unmeasured = int(usage.get("unmeasured") or 0)
    calls = int(usage.get("calls") or 0)
    measured = (f"in={usage.get('input_tokens', 0)} out={usage.get('output_tokens', 0)}"
                f" cached={usage.get('cache_read_tokens', 0)}")
    if not unmeasured:
        return f"tokens {measured} cost=${float(usage.get('cost_usd') or 0):.4f}"
    if unmeasured >= calls:
        return f"usage unknown ({unmeasured} model call(s) reported none)"
    return (f"usage unknown ({unmeasured} of {calls} model calls reported none; the others:"
            f" {measured} cost≥${float(usage.get('cost_usd') or 0):.4f})")


class EventKind(StrEnum):
    ROUTE = "route"
    PLAN = "plan"
    TOOL_CALL = "tool_call"
    GRADE = "grade"
    REWRITE = "rewrite"
    PLACEMENT = "placement"
    ANSWER = "answer"
    ERROR = "error"
    CONDENSE = "condense"
    ANSWER_DELTA = "answer_delta"  # streamed, never stored (core/events.py AnswerDeltaEvent)
    CLARIFY = "clarify"  # the run asks the user back (status needs_input)
    SOURCE = "source"


class RunStatus(StrEnum):
    QUEUED = "queued"  # waiting for a worker (the server's pool, or the Postgres queue)
    RUNNING = "running"
    ANSWERED = "answered"
    TRUNCATED = "truncated"
    UNANSWERABLE = "unanswerable"
    REFUSED = "refused"  # the model declined (a provider refusal or content filter)
    FAILED = "failed"
    NEEDS_INPUT = "needs_input"  # ended with a clarifying question: several readings (issue 30)
