"""ask(): route a question, build the run's components, run the template, store the run.

The engine chooses the components (models, decisions, driver) once, in one place, and is where
a run's events go: it drains the run template's generator (agent/template.py: first search,
the driver's gathering, answer, citations, support, status; run.py `drain`) into the run store
and the listener (SSE, CLI, eval)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragloop.agent import decisions
from ragloop.agent.citations import CitationCheck
from ragloop.agent.conversations import EngineConversation, new_conversation_id, turns_of
from ragloop.agent.pipeline_driver import PipelineDriver
from ragloop.agent.run import DriverOutcome, RunContext, RunResult, Steps, drain
from ragloop.agent.search_grade import GradedSearch, search_and_grade
from ragloop.agent.template import SINGLE_DEPTH_PER_DOC, Driver, RunTemplate, SingleShot
from ragloop.agent.tools import Toolbox
from ragloop.agent.tools_driver import ToolsDriver
from ragloop.agent.tracing import observed, traced_runs
from ragloop.core.access import ADMIN, Principal
from ragloop.core.config import RunOptions, Settings
from ragloop.core.conversation import Condensed, Turn
from ragloop.core.decisions import Answerer, Condenser, Grader, Planner, Rewriter, Route
from ragloop.core.errors import ConfigError, NotFoundError
from ragloop.core.events import AnswerDeltaEvent, CondenseEvent, Event, RouteEvent
from ragloop.core.types import Citation, RunStatus
from ragloop.core.unicode import clean_text
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases, RunSources, as_knowledge_bases
from ragloop.language.vocabulary import Vocabulary, vocabulary
from ragloop.llm import make_chat_model
from ragloop.llm.base import ChatModel
from ragloop.offline import factory as offline
from ragloop.retrieval.filters import Filter
from ragloop.storage.owned import runs_for
from ragloop.storage.protocols import RunStore

# A decision component whose model calls (usage) count toward the run.
Decision = Planner | Grader | Rewriter | Answerer | Condenser


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
        chat = observed(chat or make_chat_model(settings.model, settings))
        grader_chat = observed(grader_chat or (make_chat_model(settings.grader_model, settings)
                                               if settings.grader_model else chat))
        # the choice itself is checked by the model (core/config.py RunOptions)
        driver = RunOptions(driver=driver).driver or ("tools" if chat is not None else "pipeline")
        if driver == "tools" and chat is None:
            raise ConfigError("The tools driver needs a chat model: pass --model"
                              " anthropic:<model> / openai:<model> (or set RAGLOOP_MODEL),"
                              " or use --driver pipeline, which runs offline.")
        return cls(chat=chat, grader_chat=grader_chat, driver=driver)


def kb_words(kb: KnowledgeBase) -> Vocabulary:
    """The offline rules' words for `kb`: its own language's (English's for a language with
    no file). With `offline.reading(kb)` (its stop words, the text helpers' patterns), what
    every offline component is built with: the language is passed in, never ambient."""
    return vocabulary(kb.language)


def _route(question: str, kb: KnowledgeBase, route: str) -> Route:
    if route == "agent":
        return Route("agent", "forced by --route agent")
    # the router reads what this run searches (several KBs: the run's view of them)
    router = decisions.make("router", decisions.Build(kb, kb.settings))
    if route == "single":
        # single-shot declines what is plainly outside the knowledge base, as routing does
        why = router.out_of_scope(question)
        return Route("out_of_scope", why) if why else Route("single", "forced by --route single")
    return router.route(question)


def _with_chooser(kb: KnowledgeBase | KnowledgeBases) -> None:
    """Several KBs: a chooser of which to search per part, over what `kb` holds."""
    catalog = as_knowledge_bases(kb)
    if catalog is not None and catalog.chooser is None:
        catalog.chooser = offline.source_chooser(catalog)


class Engine:
    """Answers questions against one knowledge base and records every run.

    `Engine(kb).ask(question)` runs offline with the settings' defaults; pass `settings`
    (`Settings(model="anthropic:…")`, or RAGLOOP_MODEL in the environment) for a model."""

    def __init__(self, kb: KnowledgeBase | KnowledgeBases, settings: Settings | None = None,
                 runs: RunStore | None = None, *, chat: ChatModel | None = None,
                 grader_chat: ChatModel | None = None, grader: Grader | None = None,
                 source: str = "api", principal: Principal | None = None) -> None:
        """`chat`, `grader_chat` and `grader` override what the settings name (tests, embedding).
        `source` is recorded on every run (cli, api, eval, mcp): the dashboard leaves eval's
        runs out. `principal`: who asks; every run searches, lists and fetches only the
        documents it may read (kb/access.py; None: everything, as an admin)."""
        self.principal = principal
        self.kb = kb.for_principal(principal)
        self._views: dict[Principal, Engine] = {}
        self.chat = chat
        self.grader_chat = grader_chat
        self.grader = grader
        self.settings = settings or kb.settings
        # the knowledge base's own run store (closed with it) unless one is given; each run
        # also sent as a trace when OTEL_EXPORTER_OTLP_ENDPOINT is set (agent/tracing.py);
        # read as the principal's (its runs and conversations only: storage/owned.py)
        self._all_runs: RunStore = traced_runs(runs if runs is not None else kb.backend.runs)
        self.runs: RunStore = runs_for(self._all_runs, principal)
        self.source = source
        self._search_grader: Grader | None = None
        _with_chooser(self.kb)

    def for_principal(self, principal: Principal | None) -> Engine:
        """This engine for `principal`'s questions (the server's: each request's key), sharing
        its models and run store; kept per principal."""
        # an admin user reads what the engine reads, but its runs are its own (owner)
        if principal is None or principal == self.principal or (
                principal == ADMIN and self.principal is None):
            return self
        view = self._views.get(principal)
        if view is None:
            view = copy.copy(self)
            view.principal = principal
            view.kb = self.kb.for_principal(principal)
            view.runs = runs_for(self._all_runs, principal)
            _with_chooser(view.kb)
            view._views = {}
            self._views[principal] = view
        return view

    # -- components ---------------------------------------------------------------------

    def _build(self, comps: Components) -> decisions.Build:
        """What the registry (agent/decisions.py) builds this run's decisions from."""
        return decisions.Build(self.kb, self.settings, comps.chat, comps.grader_chat)

    def _answerer(self, comps: Components) -> Answerer:
        answerer: Answerer = decisions.make("answerer", self._build(comps))
        return answerer

    def make_condenser(self, comps: Components) -> Condenser:
        """The model's JSON decision when there is a model (the offline one its fallback),
        else the offline one (`offline/follow_up.py`), through the registry.
        benchmarks/conversations.py measures the one a run uses."""
        condenser: Condenser = decisions.make("condenser", self._build(comps))
        return condenser

    def make_grader(self, comps: Components) -> Grader:
        """The run's grader: the one given, else the grader model's, else the offline one.
        The MCP server's graded search takes its grader from here too."""
        if self.grader is not None:
            return self.grader
        grader: Grader = decisions.make("grader", self._build(comps))
        return grader

    def _run_kb(self, sources: RunSources) -> KnowledgeBase | KnowledgeBases:
        """What one run searches: several KBs, a view that makes each query's choice of KB
        once in the run (`KnowledgeBases.for_run`); one, the KB."""
        catalog = as_knowledge_bases(self.kb)
        return catalog.for_run(sources) if catalog is not None else self.kb

    def _single_toolbox(self, kb: KnowledgeBase | KnowledgeBases, settings: Settings,
                        sources: RunSources) -> Toolbox:
        """Single-shot's search: deep enough for its single_k documents. Step 1 of every
        path is this same search (agent/template.py)."""
        return Toolbox(kb, settings.single_k * SINGLE_DEPTH_PER_DOC,
                       settings.tool_result_chars, run=sources)

    def _loop_driver(self, kb: KnowledgeBase | KnowledgeBases, comps: Components,
                     grader: Grader, settings: Settings,
                     sources: RunSources) -> tuple[Driver, list[Decision]]:
        toolbox = Toolbox(kb, settings.search_k, settings.tool_result_chars, run=sources)
        reading = offline.reading(self.kb)
        if comps.driver == "tools":
            assert comps.chat is not None
            return ToolsDriver(comps.chat, toolbox, grader,
                               max_tokens=self.settings.loop_max_tokens,
                               ask_user=settings.clarify != "off"), []
        build = self._build(comps)
        planner: Planner = decisions.make("planner", build)
        rewriter: Rewriter = decisions.make("rewriter", build)
        driver = PipelineDriver(toolbox, planner, grader, rewriter, offline.follow_ups(kb),
                                baseline_docs=settings.single_k,
                                reading=reading)
        return driver, [planner, rewriter]

    def _citation_check(self, comps: Components) -> CitationCheck | None:
        """Checks every citation of the answer against its passage (agent/citations.py)."""
        check: CitationCheck | None = decisions.make("citation_check", self._build(comps))
        return check

    def graded_search(self, toolbox: Toolbox, query: str, page: int = 1,
                      search_filter: Filter | None = None) -> GradedSearch:
        """A search graded against the query itself by the grader a run would use, reading
        the knowledge base's language as a run does (the MCP server's search tool), within
        `search_filter`."""
        if self._search_grader is None:  # made once (a model client per search would not do)
            self._search_grader = self.make_grader(Components.from_settings(
                self.settings, None, self.chat, self.grader_chat))
        return search_and_grade(toolbox, self._search_grader, query, query, page,
                                search_filter)

    # -- running ------------------------------------------------------------------------

    def _steps(self, ctx: RunContext, route: str, comps: Components, settings: Settings,
               run: _Run) -> Steps[DriverOutcome]:
        """Condense a conversation's turn, route, then run the template with the route's
        driver."""
        if run.history:
            condenser = self.make_condenser(comps)
            run.decisions.append(condenser)
            run.condensed = condenser.condense(run.history, ctx.typed)
            yield CondenseEvent(typed=ctx.typed, standalone=run.condensed.question,
                                turn_kind=str(run.condensed.kind), reason=run.condensed.reason,
                                queries=list(run.condensed.queries))
            ctx.searched, *also = run.condensed.searches
            ctx.also, ctx.prior = tuple(also), run.condensed.prior
            if comps.chat is not None and not run.condensed.fell_back:
                # the model's condenser wrote a standalone question: it is also what is answered
                ctx.question = run.condensed.question
            # offline the condensed text is a search query, not a question: the typed
            # follow-up stays what is planned and answered (a joined query re-answered the
            # previous question)
        kb = self._run_kb(run.sources)
        run.route = _route(ctx.question, kb, route)
        yield RouteEvent(route=run.route.route, reason=run.route.reason)
        grader = self.make_grader(comps)
        answerer = self._answerer(comps)
        # the offline rule asks back after step 1, except where the model may (ask_user)
        model_asks = comps.driver == "tools" and run.route.route == "agent"
        clarifier = None if model_asks else decisions.make("clarifier", self._build(comps))
        template = RunTemplate(self._single_toolbox(kb, settings, run.sources), grader, answerer,
                               settings.single_k, citation_check=run.citation_check,
                               declined_phrases=kb_words(self.kb).declined,
                               clarifier=clarifier, reading=offline.reading(self.kb))
        if run.route.route == "out_of_scope":
            run.driver = "none"
            return (yield from template.out_of_scope(ctx, run.route.reason,
                                                     offline.scope(self.kb)))
        driver: Driver = SingleShot()
        extra: list[Decision] = []
        if run.route.route != "single":
            driver, extra = self._loop_driver(kb, comps, grader, settings, run.sources)
        # their model calls (the tools loop adds its own; the answerer's, when it answered)
        run.decisions += [grader, *extra]
        run.driver = driver.name
        outcome = yield from template.run(ctx, driver)
        if template.answerer_used:
            run.decisions.append(answerer)
        return outcome

    def conversation(self, conversation_id: str | None = None) -> EngineConversation:
        """A new conversation, or the stored one `conversation_id` names (NotFoundError when
        there is none); its `.ask(q)` asks the next turn with the turns before as history."""
        if conversation_id is None:
            conversation_id = new_conversation_id()
        elif not self.runs.conversation(conversation_id):
            raise NotFoundError(f"No conversation {conversation_id!r} in this knowledge base.")
        return EngineConversation(conversation_id, self.ask, self.runs)

    def ask(self, question: str, *, history: Sequence[Turn] = (),
            conversation_id: str | None = None, route: str = "auto",
            driver: str | None = None, max_steps: int | None = None,
            on_event: Callable[[Event], None] | None = None,
            run_id: str | None = None,
            knowledge_bases: Sequence[str] | None = None) -> RunResult:
        """Answer `question` from the knowledge base, citing a document and section for each
        claim, and record the run in the run store.

        `history`: the conversation's earlier turns, oldest first (a stateless client's,
        such as the OpenAI-compatible endpoint's). `conversation_id`: record the run as that
        conversation's next turn, with its stored turns as the history when `history` is
        empty (a new id starts a conversation). With a history, the question is first made
        standalone (a `CondenseEvent`; `RunResult.standalone`) and that is what is searched.

        `route`: "auto" (the router decides), "single" (one search, one answer) or "agent"
        (the loop). `driver`: "tools" (the model calls the tools) or "pipeline" (plan, search,
        grade, rewrite; the offline default). `max_steps`: the ceiling (settings' default).
        `on_event`: called with each typed event (`ragloop.core.events`) as it happens, the
        answer's pieces (AnswerDeltaEvent) included; those are not stored.
        `knowledge_bases`: several served, the ones this run searches (none: it chooses).
        Returns a `RunResult`; raises `UserError` subclasses for bad arguments and
        `RunFailed` only where the run could not end with an answer."""
        # every value was checked when the settings were made; the per-call ones by the same
        # models (core/config.py): a bad one is a ConfigError naming it
        route = RunOptions(route=route).route
        settings = self.settings.with_(max_steps=max_steps)
        question = clean_text(question)  # undecodable bytes of a command-line argument
        comps = Components.from_settings(settings, driver, self.chat, self.grader_chat)
        model_name = comps.chat.name if comps.chat is not None else "offline"
        if conversation_id is not None and not history:
            history = turns_of(self.runs.conversation(conversation_id))
        run_id = self.runs.start(question, driver=comps.driver, model=model_name,
                                 max_steps=settings.max_steps, run_id=run_id,
                                 source=self.source, conversation_id=conversation_id)

        def record(event: Event) -> None:  # every event: stored, then streamed
            if not isinstance(event, AnswerDeltaEvent):  # the AnswerEvent is stored whole
                self.runs.add_event(run_id, event)
            if on_event is not None:
                on_event(event)

        ctx = RunContext(question, settings.max_steps)
        run = _Run(driver=comps.driver, citation_check=self._citation_check(comps),
                   history=list(history), sources=self._pinned(knowledge_bases))
        try:
            outcome = drain(self._steps(ctx, route, comps, settings, run), ctx, record)
        except BaseException as exc:
            self.runs.finish(run_id, {"status": RunStatus.FAILED, "error": repr(exc),
                                      "steps": ctx.step, "latency_s": ctx.elapsed()})
            raise
        for decision in run.decisions:  # their model calls (the tools loop adds its own)
            ctx.usage.add(decision.usage)
        if run.citation_check is not None:
            ctx.usage.add(run.citation_check.usage)
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
                       "confirmed": e.confirmed, **({"kb": e.kb} if e.kb else {})}
                      for e in ctx.ledger.items],
            error=outcome.error, unsupported=outcome.checked.unsupported,
            citations_unchecked=outcome.checked.unchecked,
            citation_support=outcome.checked.support, declined=outcome.declined,
            standalone=run.condensed.question if run.condensed else None,
            conversation_id=conversation_id, clarification=outcome.clarification)
        self.runs.finish(run_id, result.to_dict())
        return result

    def _pinned(self, names: Sequence[str] | None) -> RunSources:
        """The run's sources, set when the caller named the knowledge bases to search."""
        if not names:
            return RunSources()
        catalog = as_knowledge_bases(self.kb)
        if catalog is None:
            raise ConfigError("knowledge_bases names the KBs to search where several are"
                              " served; this engine serves one")
        return RunSources(tuple(catalog.names_of(names)), pinned=True)

    async def aask(self, question: str, *, history: Sequence[Turn] = (),
                   conversation_id: str | None = None, route: str = "auto",
                   driver: str | None = None, max_steps: int | None = None,
                   on_event: Callable[[Event], None] | None = None,
                   run_id: str | None = None) -> RunResult:
        """`ask` for async code (a web app's handler): the same run, in a worker thread.

        A thread, not a native coroutine: a run is CPU work (embedding, the offline grader)
        between blocking calls (SQLite, the model SDKs' sync clients), so a native version
        would need async twins of every store and provider and would still block the loop
        on the CPU work. The stores lock their connections, so runs may go in parallel (the
        server runs them the same way). `on_event` is called from that thread."""
        return await asyncio.to_thread(self.ask, question, history=history,
                                       conversation_id=conversation_id, route=route,
                                       driver=driver, max_steps=max_steps, on_event=on_event,
                                       run_id=run_id)


@dataclass
class _Run:
    """What the engine learns while a run's steps go: the route, the driver, its decisions."""

    driver: str
    citation_check: CitationCheck | None = None
    route: Route = field(default_factory=lambda: Route("agent", ""))
    decisions: list[Decision] = field(default_factory=list)
    history: list[Turn] = field(default_factory=list)  # a conversation's earlier turns
    condensed: Condensed | None = None  # the turn made standalone (with a history only)
    # several KBs: where searches that name none go, once the whole question chose one
    sources: RunSources = field(default_factory=RunSources)
