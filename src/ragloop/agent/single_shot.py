"""The single-shot driver (one search, answered from its top k documents) and the answer for a
question the knowledge base does not cover: both yield their events like the loop drivers."""

from __future__ import annotations

from ragloop.agent.evidence import check_citations
from ragloop.agent.failures import CONTINUES
from ragloop.agent.run import DriverOutcome, RunContext, Steps, closest_passages
from ragloop.agent.search_grade import grade_event
from ragloop.agent.tools import SEARCH, Toolbox
from ragloop.core.decisions import Answerer, Grader
from ragloop.core.events import AnswerEvent, ToolCallEvent
from ragloop.core.types import Hit, RunStatus

# Single-shot searches this many chunks per document it may read (documents span chunks).
SINGLE_DEPTH_PER_DOC = 3


def top_documents(hits: list[Hit], k: int) -> list[Hit]:
    """The hits, in rank order, of the first k distinct documents they come from."""
    docs: set[str] = set()
    out: list[Hit] = []
    for h in hits:
        if h.doc_id not in docs:
            if len(docs) >= k:
                continue
            docs.add(h.doc_id)
        out.append(h)
    return out


class SingleShotDriver:
    """One search, graded, answered from what the grader kept of its top k documents (the rest
    stay in the evidence, unconfirmed, in search order)."""

    name = "single"

    def __init__(self, toolbox: Toolbox, answerer: Answerer, grader: Grader, k: int) -> None:
        self.toolbox = toolbox
        self.answerer = answerer
        self.grader = grader
        self.k = k

    def run(self, ctx: RunContext) -> Steps[DriverOutcome]:
        ctx.step += 1
        try:
            hits = top_documents(self.toolbox.search(ctx.question), self.k)
        except CONTINUES as exc:  # no words to search for ("?!", an emoji): nothing found
            yield ToolCallEvent(tool=SEARCH, query=ctx.question, error=str(exc))
            hits = []
        if hits:
            grade = self.grader.grade(ctx.question, hits)
            kept = {h.chunk_id for h in grade.kept}
            for h in hits:
                ctx.ledger.add_hit(h, ctx.step, confirmed=grade.ungraded or h.chunk_id in kept)
            yield ToolCallEvent(tool=SEARCH, query=ctx.question, chunks=len(hits),
                                kept=len(grade.kept))
            yield grade_event(ctx.question, 0, hits, grade)
        ctx.step += 1
        draft = self.answerer.answer(ctx.question, [ctx.question], ctx.ledger.items)
        checked = check_citations(draft.text, ctx.ledger)
        closest = closest_passages(draft.closest, ctx.ledger)
        yield AnswerEvent(text=checked.text, citations=checked.citations,
                          invalid_citations=checked.invalid, missing=draft.missing,
                          conflicts=draft.conflicts, closest=closest or None)
        status = RunStatus.UNANSWERABLE if draft.unanswerable or not checked.citations \
            else RunStatus.ANSWERED
        return DriverOutcome(checked=checked, status=status, missing=draft.missing,
                             conflicts=draft.conflicts, closest=closest)


class OutOfScope:
    """The router found the question outside the knowledge base: say so and what it covers."""

    name = "none"

    def __init__(self, reason: str, scope: str) -> None:
        self.reason = reason
        self.scope = scope

    def run(self, ctx: RunContext) -> Steps[DriverOutcome]:
        text = (f"The knowledge base does not cover this question ({self.reason}). "
                f"It covers: {self.scope}")
        yield AnswerEvent(text=text, citations=[], invalid_citations=[])
        return DriverOutcome(checked=check_citations(text, ctx.ledger),
                             status=RunStatus.UNANSWERABLE, missing=[ctx.question])
