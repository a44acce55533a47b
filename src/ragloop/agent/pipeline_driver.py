"""The `pipeline` driver: plan → retrieve → grade → rewrite-from-the-gap → answer.

Each decision is a separate component (LLM JSON calls or local rules); with the local ones the
whole run needs no generative model. Steps count tool calls; the last step is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragloop.agent.base import Answerer, Draft, Grade, Grader, Planner, Rewriter
from ragloop.agent.evidence import check_citations
from ragloop.agent.run import DriverOutcome, RunContext
from ragloop.errors import ToolError
from ragloop.tools import FETCH, SEARCH, Toolbox
from ragloop.types import EventKind, Hit, RunStatus

# Follow-up reads per sub-question (fetching referenced or cut-off sections).
MAX_FETCHES_PER_PART = 2


@dataclass
class Part:
    """One sub-question and what the run knows about it."""

    index: int
    question: str
    tried: list[str] = field(default_factory=list)
    kept: list[Hit] = field(default_factory=list)
    last_grade: Grade | None = None
    fetches: int = 0
    exhausted: bool = False
    unreadable: set[tuple[str, str]] = field(default_factory=set)  # pointers that led nowhere

    @property
    def enough(self) -> bool:
        return self.last_grade is not None and self.last_grade.enough


class FollowUps:
    """Which sections a kept chunk points to: referenced ones ("see section 4.2") or its own
    section when the chunk is cut off. Supplied by the local decision module."""

    def __call__(self, hit: Hit) -> list[tuple[str, str]]:  # (doc_id, section)
        return []


class PipelineDriver:
    name = "pipeline"

    def __init__(self, toolbox: Toolbox, planner: Planner, grader: Grader, rewriter: Rewriter,
                 answerer: Answerer, follow_ups: FollowUps | None = None) -> None:
        self.toolbox = toolbox
        self.planner = planner
        self.grader = grader
        self.rewriter = rewriter
        self.answerer = answerer
        self.follow_ups = follow_ups or FollowUps()

    def _search(self, ctx: RunContext, part: Part, query: str) -> None:
        ctx.step += 1
        part.tried.append(query)
        try:
            hits = self.toolbox.search(query)
        except ToolError as exc:
            ctx.emit(EventKind.TOOL_CALL, tool=SEARCH, query=query, error=str(exc))
            part.exhausted = True
            return
        grade = self.grader.grade(part.question, hits)
        part.last_grade = grade
        known = {h.chunk_id for h in part.kept}
        for h in grade.kept:
            ctx.ledger.add_hit(h, ctx.step, part.index)
            if h.chunk_id not in known:
                part.kept.append(h)
        ctx.emit(EventKind.TOOL_CALL, tool=SEARCH, query=query, chunks=len(hits),
                 kept=len(grade.kept), sub_question=part.index)
        ctx.emit(EventKind.GRADE, query=query, sub_question=part.index, chunks=len(hits),
                 kept=len(grade.kept), enough=grade.enough, missing=grade.missing,
                 next_query=grade.next_query,
                 verdicts=[{"chunk_id": h.chunk_id, "doc_id": h.doc_id, "section": h.section,
                            "verdict": h.verdict, "score": h.grade_score}
                           for h in [*grade.kept, *grade.discarded]])

    def _fetch_one(self, ctx: RunContext, part: Part) -> bool:
        """Read one section a kept chunk points to; False when there is none left to read."""
        if part.fetches >= MAX_FETCHES_PER_PART:
            return False
        for hit in part.kept:
            for doc_id, section in self.follow_ups(hit):
                if ctx.ledger.has_section(doc_id, section) or (doc_id, section) in part.unreadable:
                    continue
                ctx.step += 1
                part.fetches += 1
                try:
                    found = self.toolbox.fetch(doc_id, section)
                except ToolError as exc:
                    ctx.emit(EventKind.TOOL_CALL, tool=FETCH, doc_id=doc_id, section=section,
                             error=str(exc))
                    part.unreadable.add((doc_id, section))
                    return True
                ctx.ledger.add_section(found, ctx.step, part.index)
                ctx.emit(EventKind.TOOL_CALL, tool=FETCH, doc_id=doc_id, section=section,
                         chars=len(found.text), sub_question=part.index)
                return True
        return False

    def _follow_up(self, ctx: RunContext, part: Part) -> bool:
        """One more step for a part that is not answered yet: fetch a pointer, else re-query."""
        if self._fetch_one(ctx, part):
            return True
        grade = part.last_grade
        if grade is None:
            return False
        query = self.rewriter.rewrite(part.question, grade, part.tried)
        ctx.emit(EventKind.REWRITE, sub_question=part.index, missing=grade.missing,
                 query=query)
        if not query or query.lower() in (t.lower() for t in part.tried):
            part.exhausted = True
            return False
        self._search(ctx, part, query)
        return True

    def run(self, ctx: RunContext) -> DriverOutcome:
        plan = self.planner.plan(ctx.question)
        ctx.emit(EventKind.PLAN, need_search=plan.need_search, sub_questions=plan.sub_questions,
                 reason=plan.reason)
        if not plan.need_search:
            ctx.step += 1
            text = plan.reply or "Hello! Ask me something about the documents."
            ctx.emit(EventKind.ANSWER, text=text, citations=[], invalid_citations=[])
            return DriverOutcome(checked=check_citations(text, ctx.ledger),
                                 status=RunStatus.ANSWERED)
        parts = [Part(i, q) for i, q in enumerate(plan.sub_questions or [ctx.question])]
        # every part gets its first search before any part gets a second
        for part in parts:
            if ctx.tool_steps_left:
                self._search(ctx, part, part.question)
        # then follow-ups round-robin while steps remain
        progressed = True
        while ctx.tool_steps_left and progressed:
            progressed = False
            for part in parts:
                if ctx.tool_steps_left and not part.enough and not part.exhausted:
                    progressed = self._follow_up(ctx, part) or progressed
        # kept chunks that look cut off / refer elsewhere, for parts that are answered
        for part in parts:
            while ctx.tool_steps_left and part.enough and self._fetch_one(ctx, part):
                pass
        ctx.step += 1  # the answer step
        draft: Draft = self.answerer.answer(ctx.question, [p.question for p in parts],
                                            ctx.ledger.items)
        checked = check_citations(draft.text, ctx.ledger)
        ctx.emit(EventKind.ANSWER, text=checked.text, citations=checked.citations,
                 invalid_citations=checked.invalid, missing=draft.missing,
                 conflicts=draft.conflicts)
        unanswered = [p for p in parts if not p.enough]
        if draft.unanswerable or not checked.citations:
            status = RunStatus.UNANSWERABLE
        elif unanswered and not any(p.exhausted for p in unanswered):
            status = RunStatus.TRUNCATED  # the ceiling stopped work that could have gone on
        else:
            status = RunStatus.ANSWERED
        return DriverOutcome(checked=checked, status=status, missing=draft.missing,
                             conflicts=draft.conflicts)
