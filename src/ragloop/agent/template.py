"""The run template: one beginning and one end for every run, whatever gathers in between.

    route ─► plan (a driver that plans) ─► step 1: single-shot's search + grade
          ─► driver.gather(ctx) ─► answer ─► citations checked ─► support checked
          ─► the one AnswerEvent ─► status (one rule, `run_status`)

A question with several readings the first search's evidence answers differently ends after
step 1 (the clarifier), or when the tools driver's model calls `ask_user`, with a ClarifyEvent
and status needs_input instead of an answer (`_ask_back`).

A driver only places and gathers: it puts the first search's hits (`ctx.first`) into the
evidence as it keeps them (`place_first`), then yields the events of what it does next,
returning `Gathered` (the parts the answer covers; the answer itself only
when gathering wrote it, as the tools driver's model does). It never writes the first search's
events, the answer event or the status. Errors that end a run (failures.py) end it here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragloop.agent.citations import CitationCheck
from ragloop.agent.evidence import CheckedAnswer, check_citations
from ragloop.agent.failures import CONTINUES, ENDS, ended_answer, ended_status
from ragloop.agent.quotes import with_quotes
from ragloop.agent.run import DriverOutcome, FirstSearch, RunContext, Steps, closest_passages
from ragloop.agent.search_grade import grade_event
from ragloop.agent.tools import Toolbox, search_event
from ragloop.core.answer_stream import sentence_pieces
from ragloop.core.conversation import Clarification
from ragloop.core.decisions import Answerer, Clarifier, Draft, Grade, Grader, Plan
from ragloop.core.events import (
    AnswerDeltaEvent,
    AnswerEvent,
    ClarifyEvent,
    ErrorEvent,
    PlanEvent,
)
from ragloop.core.types import Hit, RunStatus
from ragloop.language.text import Reading
from ragloop.language.vocabulary import vocabulary
from ragloop.retrieval.fusion import fused_pages

# Single-shot searches this many chunks per document it may read (documents span chunks).
SINGLE_DEPTH_PER_DOC = 3
# What a plan that needs no search answers when it brings no reply of its own.
NO_SEARCH_REPLY = "Hello! Ask me something about the documents."


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


@dataclass
class Gathered:
    """What a driver hands back after gathering."""

    sub_questions: list[str]  # the parts the answer covers (the question itself when one)
    # the answer, when gathering wrote it (the tools driver's model); else the answerer writes
    draft: Draft | None = None
    forced: bool = False  # the answer was written at the ceiling with no tools offered
    cut_off: bool = False  # the answer came from a reply cut off at its token budget
    work_left: bool = False  # the ceiling stopped work that could have gone on
    # the model asked the user back (its `ask_user` tool) instead of answering
    clarification: Clarification | None = None


class Driver(Protocol):
    name: str
    # step 1 grades the whole page of the first search (the pipeline's pointers and nearest
    # passages come from beyond single-shot's documents) rather than single-shot's documents
    grades_whole_page: bool

    def plan(self, question: str) -> Plan | None:
        """The driver's plan of the question, or None for a driver that does not plan."""
        ...

    def place_first(self, ctx: RunContext) -> Grade:
        """Put step 1's hits (`ctx.first`) into the evidence as this driver keeps them; the
        grade as kept (what step 1's grade event reports)."""
        ...

    def gather(self, ctx: RunContext) -> Steps[Gathered]: ...


def declines(text: str, phrases: Sequence[str]) -> bool:
    """The text says the knowledge base lacks something (one of the language's phrases)."""
    lowered = text.lower()
    return any(p in lowered for p in phrases)


def run_status(draft: Draft, checked: CheckedAnswer, gathered: Gathered, held_evidence: bool,
               declined_phrases: Sequence[str]) -> RunStatus:
    """The one rule. An answer forced at the ceiling or cut off is `truncated`; one that
    declines (the answerer said so, or nothing is cited and either the answerer wrote it, the
    run holds no evidence, or its words decline) is `unanswerable`; an answer the ceiling
    stopped short of finishing is `truncated`; else `answered`."""
    if gathered.forced or gathered.cut_off:
        return RunStatus.TRUNCATED
    free_text = gathered.draft is not None
    if draft.unanswerable or (not checked.citations and (
            not free_text or not held_evidence or declines(checked.text, declined_phrases))):
        return RunStatus.UNANSWERABLE
    if gathered.work_left:
        return RunStatus.TRUNCATED
    return RunStatus.ANSWERED


class RunTemplate:
    """Runs one question through a driver: the first search, the gathering, the answer and
    its checks. Built by the engine for each run with the run's components."""

    def __init__(self, first_search: Toolbox, grader: Grader, answerer: Answerer, k: int, *,
                 citation_check: CitationCheck | None = None,
                 declined_phrases: Sequence[str] = (),
                 clarifier: Clarifier | None = None,
                 reading: Reading) -> None:
        """`first_search` searches at single-shot's depth; the first `k` documents of its
        result are single-shot's evidence. `declined_phrases` are the KB language's words for
        what the knowledge base lacks (language/lang/*.json, `decline`); `reading` is the KB
        language's (the citations' quotes are cut at its sentence ends)."""
        self.first_search = first_search
        self.grader = grader
        self.answerer = answerer
        self.k = k
        self.citation_check = citation_check
        self.declined_phrases = tuple(declined_phrases)
        self.clarifier = clarifier  # None: never ask back after step 1
        self.reading = reading
        self.answerer_used = False  # the answerer wrote this run's answer (its usage counts)

    # -- the beginning ----------------------------------------------------------------------

    def _first(self, ctx: RunContext, driver: Driver, against: str) -> Steps[None]:
        """Step 1: single-shot's search of the whole question, graded against `against`, its
        hits placed in the evidence by the driver."""
        ctx.step += 1
        try:
            page = self.first_search.search(ctx.searched)
            if ctx.also or ctx.prior:  # a follow-up's searches, fused (offline/follow_up.py)
                page = fused_pages([page, *(self.first_search.search(q) for q in ctx.also)],
                             ctx.prior)
        except CONTINUES as exc:  # no words to search for ("?!", an emoji): nothing found
            yield search_event(ctx.searched, error=str(exc))
            ctx.first = FirstSearch(ctx.searched, against, [], Grade([], [], False), str(exc))
            driver.place_first(ctx)
            return
        hits = page if driver.grades_whole_page else top_documents(page, self.k)
        ctx.first = FirstSearch(ctx.searched, against, hits, self.grader.grade(against, hits))
        kept = driver.place_first(ctx)
        yield search_event(ctx.searched, hits, kept=kept.kept, reason="single-shot's search")
        yield grade_event(ctx.searched, 0, hits, kept)

    # -- the end ----------------------------------------------------------------------------

    def _checked(self, text: str, ctx: RunContext, labels: Sequence[str]) -> CheckedAnswer:
        """The citations checked against the evidence, then against their passages."""
        checked = check_citations(text, ctx.ledger)
        if self.citation_check is None or not checked.citations:
            return checked
        support = self.citation_check(checked.text, ctx.ledger.get, labels)
        kept = [c for c in checked.citations if f"[{c['n']}]" in support.text]
        return CheckedAnswer(text=support.text, citations=kept, invalid=checked.invalid,
                             unsupported=support.unsupported, unchecked=support.unchecked,
                             support=support.summary)

    @staticmethod
    def _streamed(ctx: RunContext, text: str) -> Steps[None]:
        """Make the answer's streamed pieces join to `text` (the answer before its checks):
        the rest of it when what streamed is its beginning, else a reset and the text a
        sentence at a time (an answer written whole, a reply salvaged from broken JSON)."""
        if ctx.streamed == text:
            return
        rest = text[len(ctx.streamed):]
        if not text.startswith(ctx.streamed):
            yield AnswerDeltaEvent(reset=True)
            rest = text
        for piece in sentence_pieces(rest):
            yield AnswerDeltaEvent(text=piece)

    def _answer(self, ctx: RunContext, draft: Draft, gathered: Gathered,
                labels: Sequence[str]) -> Steps[DriverOutcome]:
        """The answer's checks, the one AnswerEvent and the status."""
        yield from self._streamed(ctx, draft.text)
        checked = self._checked(draft.text, ctx, labels)
        closest = closest_passages(draft.closest, ctx.ledger)
        free_text = gathered.draft is not None
        said_missing = declines(checked.text, self.declined_phrases)
        # claims with evidence at hand but no citation: flagged on the run, not hidden
        uncited = free_text and bool(ctx.ledger.items and checked.text.strip()
                                     and not checked.citations and not said_missing)
        yield AnswerEvent(text=checked.text,
                          citations=with_quotes(checked.text, checked.citations, ctx.ledger.get,
                                                self.reading, labels),
                          invalid_citations=checked.invalid,
                          missing=None if free_text else draft.missing,
                          conflicts=None if free_text else draft.conflicts,
                          closest=closest or None,
                          unconfirmed=[e.n for e in ctx.ledger.items if not e.confirmed] or None,
                          forced=gathered.forced if free_text else None,
                          cut_off=gathered.cut_off or None, uncited=uncited or None,
                          unsupported=checked.unsupported or None,
                          citations_unchecked=checked.unchecked or None,
                          changed_by_check=checked.text != draft.text or None)
        status = run_status(draft, checked, gathered, bool(ctx.ledger.items),
                            self.declined_phrases)
        declined = status is RunStatus.UNANSWERABLE or (
            said_missing if free_text else bool(draft.missing))
        return DriverOutcome(checked=checked, status=status, missing=draft.missing,
                             conflicts=draft.conflicts, closest=closest, declined=declined)

    def _fixed(self, ctx: RunContext, draft: Draft, status: RunStatus) -> Steps[DriverOutcome]:
        """An answer no search stands behind (out of scope, a reply with no search)."""
        yield from self._streamed(ctx, draft.text)
        yield AnswerEvent(text=draft.text, citations=[], invalid_citations=[])
        return DriverOutcome(checked=check_citations(draft.text, ctx.ledger), status=status,
                             missing=draft.missing,
                             declined=status is RunStatus.UNANSWERABLE or bool(draft.missing))

    def _ask_back(self, ctx: RunContext, asked: Clarification) -> Steps[DriverOutcome]:
        """End the run with a question back to the user: the ClarifyEvent, then the question
        as the run's answer (what a client that knows only answers shows), status
        needs_input. Counted as declined: no answer was given."""
        ctx.step += 1
        yield ClarifyEvent(question=asked.question, options=list(asked.options),
                           reason=asked.reason)
        yield AnswerEvent(text=asked.question)
        return DriverOutcome(checked=CheckedAnswer(text=asked.question),
                             status=RunStatus.NEEDS_INPUT, declined=True,
                             clarification=asked.to_dict())

    def out_of_scope(self, ctx: RunContext, reason: str, scope: str) -> Steps[DriverOutcome]:
        """The router found the question outside the knowledge base: say so and what it
        covers."""
        words = vocabulary(self.reading.code)  # the knowledge base's language
        text = words.text("decline.out_of_scope").format(reason=reason, scope=scope)
        return (yield from self._fixed(ctx, Draft(text, missing=[ctx.question],
                                                  unanswerable=True),
                                       RunStatus.UNANSWERABLE))

    # -- the run ----------------------------------------------------------------------------

    def run(self, ctx: RunContext, driver: Driver) -> Steps[DriverOutcome]:
        """Plan, search, gather, answer; an error that ends the run (failures.py) ends it
        here with an `error` event and what was gathered."""
        try:
            return (yield from self._run(ctx, driver))
        except ENDS as exc:
            if ctx.streamed:  # what streamed is no answer now
                yield AnswerDeltaEvent(reset=True)
            yield ErrorEvent(error=str(exc))
            gathered = "; ".join(f"[{e.n}] {e.doc_id} §{e.section}" for e in ctx.ledger.items)
            return DriverOutcome(checked=CheckedAnswer(text=ended_answer(exc, gathered)),
                                 status=ended_status(exc), error=str(exc))

    def _run(self, ctx: RunContext, driver: Driver) -> Steps[DriverOutcome]:
        plan = driver.plan(ctx.question)
        labels: list[str] = []
        if plan is not None:
            yield PlanEvent(need_search=plan.need_search, sub_questions=plan.sub_questions,
                            reason=plan.reason)
            labels = plan.sub_questions
            if not plan.need_search:
                ctx.step += 1
                return (yield from self._fixed(ctx, Draft(plan.reply or NO_SEARCH_REPLY),
                                               RunStatus.ANSWERED))
        ctx.plan = plan
        parts = (plan.sub_questions if plan is not None else []) or [ctx.question]
        against = parts[0] if len(parts) == 1 else ctx.question
        if against == ctx.question:  # graded against what was searched (a follow-up's query)
            against = ctx.searched
        # several knowledge bases: which each part is searched in, and why (none: one KB)
        yield from self.first_search.source_events(ctx.question, parts)
        yield from self._first(ctx, driver, against)
        if self.clarifier is not None and ctx.first is not None and ctx.first.error is None:
            asked = self.clarifier.clarify(ctx.question, ctx.first.grade.kept)
            if asked is not None:
                return (yield from self._ask_back(ctx, asked))
        gathered = yield from driver.gather(ctx)
        if gathered.clarification is not None:
            return (yield from self._ask_back(ctx, gathered.clarification))
        draft = gathered.draft
        if draft is None:
            ctx.step += 1  # the answer step
            self.answerer_used = True
            draft = yield from self.answerer.write(ctx.question, gathered.sub_questions,
                                                   ctx.ledger.items, context=ctx.context)
        return (yield from self._answer(ctx, draft, gathered, labels))


class SingleShot:
    """Gathers nothing: answers from what the grader kept of the first search's top k
    documents (the rest stay in the evidence, unconfirmed, in search order)."""

    name = "single"
    grades_whole_page = False

    def plan(self, question: str) -> Plan | None:
        return None

    def place_first(self, ctx: RunContext) -> Grade:
        first = ctx.first
        assert first is not None
        kept = {h.chunk_id for h in first.grade.kept}
        for h in first.hits:
            ctx.ledger.add_hit(h, ctx.step, confirmed=first.grade.ungraded or h.chunk_id in kept)
        return first.grade

    def gather(self, ctx: RunContext) -> Steps[Gathered]:
        yield from ()
        return Gathered([ctx.question])
