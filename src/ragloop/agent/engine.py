"""ask(): route a question, run a driver, check citations, store the run.

The engine is where a run's events go: it drains the chosen driver's generator (run.py `drain`)
into the run store and the listener (SSE, CLI, eval), and ends the run on an error that
failures.py says ends it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ragloop.agent.citation_judge import LLMSupportJudge
from ragloop.agent.citations import CitationCheck
from ragloop.agent.evidence import check_citations
from ragloop.agent.failures import ENDS, ended_answer, ended_status
from ragloop.agent.llm_decisions import LLMAnswerer, LLMGrader, LLMPlanner, LLMRewriter
from ragloop.agent.run import Driver, DriverOutcome, RunContext, RunResult, Steps, drain
from ragloop.agent.single_shot import SINGLE_DEPTH_PER_DOC, OutOfScope, SingleShotDriver
from ragloop.agent.tools import Toolbox
from ragloop.agent.tracing import observed, traced_runs
from ragloop.core.config import Settings
from ragloop.core.decisions import Answerer, Grader, Planner, Rewriter, Route
from ragloop.core.errors import ConfigError
from ragloop.core.events import ErrorEvent, Event, PlanEvent, RouteEvent
from ragloop.core.types import Citation, RunStatus
from ragloop.core.unicode import clean_text
from ragloop.kb import KnowledgeBase
from ragloop.llm.base import ChatModel
from ragloop.offline.text import reading_language
from ragloop.offline.vocabulary import Vocabulary, vocabulary
from ragloop.storage.protocols import RunStore

ROUTES = ("auto", "single", "agent")
DRIVERS = ("tools", "pipeline")
CITATION_CHECKS = ("auto", "offline", "off")

# A decision component whose model calls (usage) count toward the run.
Decision = Planner | Grader | Rewriter | Answerer


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

        chat = observed(chat or make_chat_model(settings.model, settings))
        grader_chat = observed(grader_chat or (make_chat_model(settings.grader_model, settings)
                                               if settings.grader_model else chat))
        driver = driver or ("tools" if chat is not None else "pipeline")
        if driver not in DRIVERS:
            raise ConfigError(f"--driver must be one of {', '.join(DRIVERS)}, not {driver!r}")
        if driver == "tools" and chat is None:
            raise ConfigError("The tools driver needs a chat model: pass --model"
                              " anthropic:<model> / openai:<model> (or set RAGLOOP_MODEL),"
                              " or use --driver pipeline, which runs offline.")
        return cls(chat=chat, grader_chat=grader_chat, driver=driver)


def reading(kb: KnowledgeBase) -> str | None:
    """The language the offline rules read for `kb`: its own. The one place that decides it:
    the planner and router take its words (`kb_words`), and `Engine.ask` sets it for the text
    helpers the grader, rewriter, answerer and citation checker use (`reading_language`)."""
    return kb.language


def kb_words(kb: KnowledgeBase) -> Vocabulary:
    """The offline rules' words for `kb` (English's for a language with no file)."""
    return vocabulary(reading(kb))


def _route(question: str, kb: KnowledgeBase, route: str) -> Route:
    if route == "agent":
        return Route("agent", "forced by --route agent")
    from ragloop.agent.local import RuleRouter

    router = RuleRouter(kb, words=kb_words(kb))
    if route == "single":
        # single-shot declines what the knowledge base plainly does not cover, as routing does
        why = router.out_of_scope(question)
        return Route("out_of_scope", why) if why else Route("single", "forced by --route single")
    return router.route(question)


class Engine:
    """Answers questions against one knowledge base and records every run.

    `Engine(kb).ask(question)` runs offline with the settings' defaults; pass `settings`
    (`Settings(model="anthropic:…")`, or RAGLOOP_MODEL in the environment) for a model."""

    def __init__(self, kb: KnowledgeBase, settings: Settings | None = None,
                 runs: RunStore | None = None, *, chat: ChatModel | None = None,
                 grader_chat: ChatModel | None = None, grader: Grader | None = None) -> None:
        """`chat`, `grader_chat` and `grader` override what the settings name (tests, embedding)."""
        self.kb = kb
        self.chat = chat
        self.grader_chat = grader_chat
        self.grader = grader
        self.settings = settings or kb.settings
        # the knowledge base's own run store (closed with it) unless one is given; each run
        # also sent as a trace when OTEL_EXPORTER_OTLP_ENDPOINT is set (agent/tracing.py)
        self.runs: RunStore = traced_runs(runs if runs is not None else kb.backend.runs)

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

    def _single_toolbox(self, settings: Settings) -> Toolbox:
        """Single-shot's search: deep enough for its single_k documents. The first step of
        both loop drivers (pipeline and tools) is this same search."""
        return Toolbox(self.kb, settings.single_k * SINGLE_DEPTH_PER_DOC,
                       settings.tool_result_chars)

    def _driver(self, comps: Components, toolbox: Toolbox,
                settings: Settings) -> tuple[Driver, list[Decision]]:
        grader = self._grader(comps)
        if comps.driver == "tools":
            from ragloop.agent.tools_driver import ToolsDriver

            assert comps.chat is not None
            return ToolsDriver(comps.chat, toolbox, grader,
                               max_tokens=self.settings.loop_max_tokens,
                               baseline=self._single_toolbox(settings),
                               baseline_docs=settings.single_k), [grader]
        from ragloop.agent.pipeline_driver import PipelineDriver

        if comps.chat is not None:
            budget = self.settings.decision_max_tokens
            planner = LLMPlanner(comps.chat, max_tokens=budget)
            rewriter = LLMRewriter(comps.chat, max_tokens=budget)
        else:
            from ragloop.agent.local import LocalPlanner, LocalRewriter

            planner, rewriter = LocalPlanner(words=kb_words(self.kb)), LocalRewriter()
        from ragloop.agent.local import follow_ups_for

        answerer = self._answerer(comps.chat)
        driver = PipelineDriver(toolbox, planner, grader, rewriter, answerer,
                                follow_ups_for(self.kb), baseline=self._single_toolbox(settings),
                                baseline_docs=settings.single_k)
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

    def _chosen(self, route: Route, comps: Components,
                settings: Settings) -> tuple[Driver, list[Decision]]:
        """The driver for the route, and the decisions whose model calls it makes."""
        if route.route == "out_of_scope":
            from ragloop.agent.local import describe_scope

            return OutOfScope(route.reason, describe_scope(self.kb)), []
        if route.route == "single":
            answerer = self._answerer(comps.chat)
            grader = self._grader(comps)
            return SingleShotDriver(self._single_toolbox(settings), answerer, grader,
                                    settings.single_k), [answerer, grader]
        toolbox = Toolbox(self.kb, settings.search_k, settings.tool_result_chars)
        return self._driver(comps, toolbox, settings)

    def _steps(self, ctx: RunContext, route: str, comps: Components, settings: Settings,
               run: _Run) -> Steps[DriverOutcome]:
        """Route, then run the chosen driver; an error that ends the run (failures.py) ends it
        here with an `error` event and what was gathered."""
        try:
            run.route = _route(ctx.question, self.kb, route)
            yield RouteEvent(route=run.route.route, reason=run.route.reason)
            driver, run.decisions = self._chosen(run.route, comps, settings)
            run.driver = driver.name
            return (yield from driver.run(ctx))
        except ENDS as exc:
            run.error = str(exc)
            yield ErrorEvent(error=run.error)
            gathered = "; ".join(f"[{e.n}] {e.doc_id} §{e.section}" for e in ctx.ledger.items)
            outcome = DriverOutcome(checked=check_citations("", ctx.ledger),
                                    status=ended_status(exc))
            outcome.checked.text = ended_answer(exc, gathered)
            return outcome

    def ask(self, question: str, *, route: str = "auto", driver: str | None = None,
            max_steps: int | None = None, on_event: Callable[[Event], None] | None = None,
            run_id: str | None = None) -> RunResult:
        """Answer `question` from the knowledge base, citing a document and section for each
        claim, and record the run in the run store.

        `route`: "auto" (the router decides), "single" (one search, one answer) or "agent"
        (the loop). `driver`: "tools" (the model calls the tools) or "pipeline" (plan, search,
        grade, rewrite; the offline default). `max_steps`: the ceiling (settings' default).
        `on_event`: called with each typed event (`ragloop.core.events`) as it happens.
        Returns a `RunResult`; raises `UserError` subclasses for bad arguments and
        `RunFailed` only where the run could not end with an answer."""
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

        def record(event: Event) -> None:  # every event: stored, then streamed
            self.runs.add_event(run_id, event)
            if on_event is not None:
                on_event(event)

        ctx = RunContext(question, settings.max_steps)
        run = _Run(driver=comps.driver)
        citation_check = self._citation_check(comps, ctx)
        ctx.ledger.support_check = citation_check
        # the offline rules read the question with the KB language's words and stop words
        with reading_language(reading(self.kb)):
            try:
                outcome = drain(self._steps(ctx, route, comps, settings, run), ctx, record)
            except BaseException as exc:
                self.runs.finish(run_id, {"status": RunStatus.FAILED, "error": repr(exc),
                                          "steps": ctx.step, "latency_s": ctx.elapsed()})
                raise
        for decision in run.decisions:  # their model calls (the tools loop adds its own)
            ctx.usage.add(decision.usage)
        if citation_check is not None:
            ctx.usage.add(citation_check.usage)
        result = RunResult(
            run_id=run_id, question=question, status=outcome.status, route=run.route.route,
            route_reason=run.route.reason, driver=run.driver, model=model_name,
            answer=outcome.checked.text,
            citations=[Citation.from_dict(c) for c in outcome.checked.citations],
            invalid_citations=outcome.checked.invalid, missing=outcome.missing,
            conflicts=outcome.conflicts, steps=ctx.step, max_steps=settings.max_steps,
            usage=ctx.usage, latency_s=ctx.elapsed(),
            closest=outcome.closest,
            evidence=[{"n": e.n, "doc_id": e.doc_id, "section": e.section,
                       "section_title": e.section_title, "step": e.step,
                       "confirmed": e.confirmed}
                      for e in ctx.ledger.items],
            error=run.error, unsupported=outcome.checked.unsupported,
            citations_unchecked=outcome.checked.unchecked,
            citation_support=outcome.checked.support)
        self.runs.finish(run_id, result.to_dict())
        return result

    async def aask(self, question: str, *, route: str = "auto", driver: str | None = None,
                   max_steps: int | None = None,
                   on_event: Callable[[Event], None] | None = None,
                   run_id: str | None = None) -> RunResult:
        """`ask` for async code (a web app's handler): the same run, in a worker thread.

        A thread, not a native coroutine: a run is CPU work (embedding, the offline grader)
        between blocking calls (SQLite, the model SDKs' sync clients), so a native version
        would need async twins of every store and provider and would still block the loop
        on the CPU work. The stores lock their connections, so runs may go in parallel (the
        server runs them the same way). `on_event` is called from that thread."""
        return await asyncio.to_thread(self.ask, question, route=route, driver=driver,
                                       max_steps=max_steps, on_event=on_event, run_id=run_id)


@dataclass
class _Run:
    """What the engine learns while a run's steps go: the route, the driver, its decisions."""

    driver: str
    route: Route = field(default_factory=lambda: Route("agent", ""))
    decisions: list[Decision] = field(default_factory=list)
    error: str | None = None
