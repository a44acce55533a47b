"""ask(): route a question, run a driver, check citations, store the run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragloop.agent.citation_judge import LLMSupportJudge
from ragloop.agent.citations import CitationCheck
from ragloop.agent.evidence import check_citations
from ragloop.agent.llm_decisions import LLMAnswerer, LLMGrader, LLMPlanner, LLMRewriter
from ragloop.agent.run import DriverOutcome, RunContext, RunResult
from ragloop.agent.tools import SEARCH, Toolbox
from ragloop.core.config import Settings
from ragloop.core.decisions import Answerer, Grader, Planner, Rewriter, Route
from ragloop.core.errors import ConfigError, ModelRefused, RunFailed, ToolError
from ragloop.core.events import (
    AnswerEvent,
    ErrorEvent,
    Event,
    PlanEvent,
    RouteEvent,
    ToolCallEvent,
)
from ragloop.core.types import Hit, RunStatus
from ragloop.core.unicode import clean_text
from ragloop.kb import KnowledgeBase
from ragloop.llm.base import ChatModel
from ragloop.offline.text import reading_language
from ragloop.storage.protocols import RunStore

ROUTES = ("auto", "single", "agent")
DRIVERS = ("tools", "pipeline")
CITATION_CHECKS = ("auto", "offline", "off")
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


@dataclass
class Components:
    """Everything a run needs, chosen once from the settings."""

    chat: ChatModel | None
    grader_chat: ChatModel | None
    driver: str

    @classmethod
    def from_settings(cls, settings: Settings, driver: str | None = None,
                      chat: ChatModel | None = None,
                      grader_chat: ChatModel | None = None) -> Components:
        from ragloop.llm import make_chat_model

        chat = chat or make_chat_model(settings.model, settings)
        grader_chat = grader_chat or (make_chat_model(settings.grader_model, settings)
                                      if settings.grader_model else chat)
        driver = driver or ("tools" if chat is not None else "pipeline")
        if driver not in DRIVERS:
            raise ConfigError(f"--driver must be one of {', '.join(DRIVERS)}, not {driver!r}")
        if driver == "tools" and chat is None:
            raise ConfigError("The tools driver needs a chat model: pass --model"
                              " anthropic:<model> / openai:<model> (or set RAGLOOP_MODEL),"
                              " or use --driver pipeline, which runs offline.")
        return cls(chat=chat, grader_chat=grader_chat, driver=driver)


def _route(question: str, kb: KnowledgeBase, route: str) -> Route:
    if route == "single":
        return Route("single", "forced by --route single")
    if route == "agent":
        return Route("agent", "forced by --route agent")
    from ragloop.agent.local import RuleRouter

    return RuleRouter(kb).route(question)


class Engine:
    """Answers questions against one knowledge base and records every run."""

    def __init__(self, kb: KnowledgeBase, settings: Settings | None = None,
                 runs: RunStore | None = None, *, chat: ChatModel | None = None,
                 grader_chat: ChatModel | None = None, grader: Grader | None = None) -> None:
        """`chat`, `grader_chat` and `grader` override what the settings name (tests, embedding)."""
        self.kb = kb
        self.chat = chat
        self.grader_chat = grader_chat
        self.grader = grader
        self.settings = settings or kb.settings
        if runs is None:
            from ragloop.storage.factory import open_run_store

            runs = open_run_store(kb.store)
        self.runs: RunStore = runs

    # -- components ---------------------------------------------------------------------

    def _answerer(self, chat: ChatModel | None) -> Answerer:
        if chat is not None:
            return LLMAnswerer(chat, max_tokens=self.settings.loop_max_tokens)
        from ragloop.agent.local import ExtractiveAnswerer

        return ExtractiveAnswerer(self.kb.embedder)

    def _grader(self, comps: Components) -> Grader:
        if self.grader is not None:
            return self.grader
        if comps.grader_chat is not None:
            return LLMGrader(comps.grader_chat, max_tokens=self.settings.decision_max_tokens)
        from ragloop.agent.local import LocalGrader

        return LocalGrader(self.kb.embedder)

    def _driver(self, comps: Components, toolbox: Toolbox):
        grader = self._grader(comps)
        if comps.driver == "tools":
            from ragloop.agent.tools_driver import ToolsDriver

            assert comps.chat is not None
            return ToolsDriver(comps.chat, toolbox, grader,
                               max_tokens=self.settings.loop_max_tokens), [grader]
        from ragloop.agent.pipeline_driver import PipelineDriver

        if comps.chat is not None:
            budget = self.settings.decision_max_tokens
            planner = LLMPlanner(comps.chat, max_tokens=budget)
            rewriter = LLMRewriter(comps.chat, max_tokens=budget)
        else:
            from ragloop.agent.local import LocalPlanner, LocalRewriter

            planner, rewriter = LocalPlanner(), LocalRewriter()
        from ragloop.agent.local import follow_ups_for

        answerer = self._answerer(comps.chat)
        driver = PipelineDriver(toolbox, planner, grader, rewriter, answerer,
                                follow_ups_for(self.kb))
        return driver, [planner, grader, rewriter, answerer]

    def _citation_check(self, comps: Components, ctx: RunContext) -> CitationCheck | None:
        """Checks every citation of the answer against its passage (agent/citations.py)."""
        mode = self.settings.citation_check
        if mode == "off":
            return None
        from ragloop.offline.support import SupportChecker

        judge_chat = comps.grader_chat if mode == "auto" else None
        judge = LLMSupportJudge(judge_chat, max_tokens=self.settings.decision_max_tokens) \
            if judge_chat is not None else None
        return CitationCheck(SupportChecker(self.kb.embedder), judge, labels=lambda: [
            q for e in ctx.events if isinstance(e, PlanEvent) for q in e.sub_questions])

    # -- running ------------------------------------------------------------------------

    def _single_shot(self, ctx: RunContext, toolbox: Toolbox, answerer: Answerer,
                     k: int) -> DriverOutcome:
        """One search, answered from its top k documents."""
        ctx.step += 1
        try:
            hits = top_documents(toolbox.search(ctx.question), k)
        except ToolError as exc:  # no words to search for ("?!", an emoji): nothing found
            ctx.emit(ToolCallEvent(tool=SEARCH, query=ctx.question, error=str(exc)))
            hits = []
        for h in hits:
            ctx.ledger.add_hit(h, ctx.step)
        if hits:
            ctx.emit(ToolCallEvent(tool=SEARCH, query=ctx.question, chunks=len(hits),
                                   kept=len(hits)))
        ctx.step += 1
        draft = answerer.answer(ctx.question, [ctx.question], ctx.ledger.items)
        checked = check_citations(draft.text, ctx.ledger)
        ctx.emit(AnswerEvent(text=checked.text, citations=checked.citations,
                             invalid_citations=checked.invalid, missing=draft.missing,
                             conflicts=draft.conflicts))
        status = RunStatus.UNANSWERABLE if draft.unanswerable or not checked.citations \
            else RunStatus.ANSWERED
        return DriverOutcome(checked=checked, status=status, missing=draft.missing,
                             conflicts=draft.conflicts)

    def _out_of_scope(self, ctx: RunContext, route: Route) -> DriverOutcome:
        from ragloop.agent.local import describe_scope

        text = (f"The knowledge base does not cover this question ({route.reason}). "
                f"It covers: {describe_scope(self.kb)}")
        ctx.emit(AnswerEvent(text=text, citations=[], invalid_citations=[]))
        return DriverOutcome(checked=check_citations(text, ctx.ledger),
                             status=RunStatus.UNANSWERABLE, missing=[ctx.question])

    def ask(self, question: str, *, route: str = "auto", driver: str | None = None,
            max_steps: int | None = None, on_event: Callable[[Event], None] | None = None,
            run_id: str | None = None) -> RunResult:
        if route not in ROUTES:
            raise ConfigError(f"--route must be one of {', '.join(ROUTES)}, not {route!r}")
        settings = self.settings.with_(max_steps=max_steps)
        if settings.citation_check not in CITATION_CHECKS:
            raise ConfigError(f"RAGLOOP_CITATION_CHECK must be one of"
                              f" {', '.join(CITATION_CHECKS)}, not {settings.citation_check!r}")
        if settings.max_steps < 2:
            raise ConfigError("--max-steps must be at least 2 (one search and the answer)")
        question = clean_text(question)  # undecodable bytes of a command-line argument
        comps = Components.from_settings(settings, driver, self.chat, self.grader_chat)
        model_name = comps.chat.name if comps.chat is not None else "offline"
        run_id = self.runs.start(question, driver=comps.driver, model=model_name,
                                 max_steps=settings.max_steps, run_id=run_id)

        def record(event: Event) -> None:
            self.runs.add_event(run_id, event)
            if on_event is not None:
                on_event(event)

        ctx = RunContext(question, settings.max_steps, record)
        citation_check = self._citation_check(comps, ctx)
        ctx.ledger.support_check = citation_check
        toolbox = Toolbox(self.kb, settings.search_k, settings.tool_result_chars)
        decided = Route("agent", "")
        used_driver = comps.driver
        parts: list[Planner | Grader | Rewriter | Answerer] = []
        error: str | None = None
        # the offline rules read the question with the KB language's stop words
        with reading_language(self.kb.language):
            try:
                decided = _route(question, self.kb, route)
                ctx.emit(RouteEvent(route=decided.route, reason=decided.reason))
                if decided.route == "out_of_scope":
                    used_driver = "none"
                    outcome = self._out_of_scope(ctx, decided)
                elif decided.route == "single":
                    used_driver = "single"
                    answerer = self._answerer(comps.chat)
                    parts = [answerer]
                    single = Toolbox(self.kb, settings.single_k * SINGLE_DEPTH_PER_DOC,
                                     settings.tool_result_chars)
                    outcome = self._single_shot(ctx, single, answerer, settings.single_k)
                else:
                    run_driver, parts = self._driver(comps, toolbox)
                    outcome = run_driver.run(ctx)
            except RunFailed as exc:
                error = str(exc)
                ctx.emit(ErrorEvent(error=error))
                gathered = "; ".join(f"[{e.n}] {e.doc_id} §{e.section}" for e in ctx.ledger.items)
                refused = isinstance(exc, ModelRefused)
                text = (f"The model declined to answer: {error}." if refused
                        else f"The run failed: {error}.")
                text += f" Evidence gathered so far: {gathered}." if gathered else ""
                outcome = DriverOutcome(checked=check_citations("", ctx.ledger),
                                        status=RunStatus.REFUSED if refused else RunStatus.FAILED)
                outcome.checked.text = text
            except BaseException as exc:
                self.runs.finish(run_id, {"status": RunStatus.FAILED, "error": repr(exc),
                                          "steps": ctx.step, "latency_s": ctx.elapsed()})
                raise
        for part in parts:  # the decisions' model calls (the tools loop adds its own)
            ctx.usage.add(part.usage)
        if citation_check is not None:
            ctx.usage.add(citation_check.usage)
        result = RunResult(
            run_id=run_id, question=question, status=outcome.status, route=decided.route,
            route_reason=decided.reason, driver=used_driver, model=model_name,
            answer=outcome.checked.text, citations=outcome.checked.citations,
            invalid_citations=outcome.checked.invalid, missing=outcome.missing,
            conflicts=outcome.conflicts, steps=ctx.step, max_steps=settings.max_steps,
            usage=ctx.usage, latency_s=ctx.elapsed(),
            evidence=[{"n": e.n, "doc_id": e.doc_id, "section": e.section,
                       "section_title": e.section_title, "step": e.step,
                       "confirmed": e.confirmed}
                      for e in ctx.ledger.items],
            error=error, unsupported=outcome.checked.unsupported,
            citations_unchecked=outcome.checked.unchecked,
            citation_support=outcome.checked.support)
        self.runs.finish(run_id, result.to_dict())
        return result
