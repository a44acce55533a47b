"""The tools driver with a scripted chat model over a real knowledge base."""

from __future__ import annotations

import inspect
from dataclasses import replace

from ragloop.agent.engine import Engine
from ragloop.agent.failures import ended_status
from ragloop.agent.run import BUDGET_NOTICE, RunContext, drain, log_line
from ragloop.agent.template import RunTemplate
from ragloop.agent.tools import Toolbox
from ragloop.agent.tools_driver import ToolsDriver
from ragloop.core.decisions import Grade
from ragloop.core.errors import ModelRefused, ProviderError, ToolError
from ragloop.core.types import Citation, EventKind, Hit, RunStatus, Usage
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import ChatResponse, Finish, ModelTraits, ToolCall
from ragloop.llm.scripted import ScriptedChat
from ragloop.offline.answerer import ExtractiveAnswerer

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING


class KeepDocs:
    """A grader for loop tests: keeps hits of the named documents."""
    usage = Usage()  # no model calls

    def __init__(self, *doc_ids: str) -> None:
        self.doc_ids = doc_ids
        self.questions: list[str] = []

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        self.questions.append(question)
        kept = [h for h in hits if h.doc_id in self.doc_ids]
        for h in hits:
            h.verdict = "relevant" if h in kept else "irrelevant"
        return Grade(kept=kept, discarded=[h for h in hits if h not in kept], enough=bool(kept),
                     missing="" if kept else "everything", next_query=None if kept else "cfo")


def search_call(query: str, n: int = 0) -> ChatResponse:
    return ChatResponse(text="", tool_calls=[ToolCall(id=f"c{n}", name="search_knowledge_base",
                                                      arguments={"query": query})],
                        usage=Usage(input_tokens=100, output_tokens=10, calls=1))


def engine_for(kb, chat, grader=None) -> Engine:
    # the support check offline: these scripts do not answer a citation judge's call
    return Engine(kb, kb.settings.with_(max_steps=4, citation_check="offline"), chat=chat,
                  grader=grader or KeepDocs("policies/travel.md"))


def test_a_model_that_never_stops_hits_the_ceiling_and_still_answers(small_kb) -> None:
    def always_search(messages, tools, tool_choice):
        if tool_choice == "none":
            return ChatResponse(text="Approvals above £2,500 go to the CFO [1]. The rest is"
                                     " missing.")
        return search_call("approval threshold", len(messages))

    chat = ScriptedChat([always_search], repeat_last=True)
    events = []
    result = engine_for(small_kb, chat).ask("Who approves big travel expenses?", route="agent",
                                            driver="tools", on_event=events.append)
    assert result.status == RunStatus.TRUNCATED
    assert result.steps == 4
    # step 1 is the driver's own search (no model call), the last step offers no tools
    assert [c.tool_choice for c in chat.calls] == ["auto", "auto", "none"]
    # the tool results of step 3 (MAX_STEPS-1) carry the budget notice, earlier ones do not
    step3_tool_msgs = [m for m in chat.calls[2].messages if m.role == "tool"]
    assert BUDGET_NOTICE in step3_tool_msgs[-1].content
    assert all(BUDGET_NOTICE not in m.content for m in step3_tool_msgs[:-1])
    assert result.answer.startswith("Approvals above £2,500")
    assert result.citations[0].doc_id == "policies/travel.md"
    lines = [log_line(e) for e in events if e.kind == EventKind.TOOL_CALL]
    assert lines[0].startswith('step=1 tool=search_knowledge_base'
                               ' query="Who approves big travel expenses?" chunks=')
    assert lines[1].startswith('step=2 tool=search_knowledge_base query="approval threshold"'
                               ' chunks=')
    model_search = [e for e in events if e.kind == EventKind.TOOL_CALL][1]
    assert lines[1].endswith(" kept=" + str(model_search.data["kept"]))
    assert result.usage.input_tokens == 200


def test_only_graded_chunks_reach_the_model(small_kb) -> None:
    chat = ScriptedChat([search_call("T9 battery and approvals"),
                         ChatResponse(text="The CFO approves spending above £2,500 [1].")])
    grader = KeepDocs("policies/travel.md")
    result = engine_for(small_kb, chat, grader).ask("approval?", route="agent", driver="tools")
    tool_msg = next(m for m in chat.calls[1].messages if m.role == "tool")
    assert "<retrieved_data" in tool_msg.content
    assert "policies/travel.md" in tool_msg.content
    assert "products/sensor.md" not in tool_msg.content  # discarded by the grader
    assert result.status == RunStatus.ANSWERED
    assert grader.questions[0] == "approval?"  # step 1: single-shot's search
    assert "T9 battery and approvals" in grader.questions[1]


def test_unknown_tool_and_bad_arguments_go_back_to_the_model(small_kb) -> None:
    chat = ScriptedChat([
        ChatResponse(text="", tool_calls=[ToolCall("a", "delete_everything", {}),
                                          ToolCall("b", "fetch_document_section", {"doc_id": "x"}),
                                          ToolCall("c", "search_knowledge_base", {},
                                                   raw_arguments="{query: oops")]),
        ChatResponse(text="The knowledge base does not say."),
    ])
    result = engine_for(small_kb, chat).ask("anything?", route="agent", driver="tools")
    tool_msgs = [m.content for m in chat.calls[1].messages if m.role == "tool"]
    assert "unknown tool 'delete_everything'" in tool_msgs[0]
    assert "missing or empty argument 'section'" in tool_msgs[1]
    assert "not valid JSON" in tool_msgs[2]
    assert result.status == RunStatus.UNANSWERABLE


def test_fetch_section_and_invalid_citations_are_removed(small_kb) -> None:
    chat = ScriptedChat([
        ChatResponse(text="", tool_calls=[ToolCall("a", "fetch_document_section",
                                                   {"doc_id": "policies/travel.md",
                                                    "section": "4.2"})]),
        ChatResponse(text="Above £2,500 the CFO approves [1][7]."),
    ])
    result = engine_for(small_kb, chat).ask("threshold?", route="agent", driver="tools")
    assert result.answer == "Above £2,500 the CFO approves [1]."
    assert result.invalid_citations == [7]
    assert result.citations == [Citation(n=1, doc_id="policies/travel.md", section="4.2")]


def test_provider_failure_ends_the_run_cleanly_with_what_was_gathered(small_kb) -> None:
    def fail(messages, tools, tool_choice):
        raise ProviderError("anthropic: HTTP 529: overloaded")

    chat = ScriptedChat([search_call("approval threshold"), fail])
    engine = engine_for(small_kb, chat)
    result = engine.ask("Who approves?", route="agent", driver="tools")
    assert result.status == RunStatus.FAILED
    assert "overloaded" in result.answer and "policies/travel.md" in result.answer
    stored = engine.runs.get(result.run_id)
    assert stored["status"] == "failed"
    kinds = [e.kind for e in engine.runs.events(result.run_id)]
    assert EventKind.TOOL_CALL in kinds
    # one error event, recorded where the run ends (the model call used to add a second)
    assert kinds.count(EventKind.ERROR) == 1 and kinds[-1] == EventKind.ERROR


def test_one_rule_says_which_errors_end_a_run() -> None:
    assert ended_status(ModelRefused("filtered")) == RunStatus.REFUSED
    assert ended_status(ProviderError("down")) == RunStatus.FAILED
    from ragloop.agent.failures import CONTINUES, ENDS

    assert issubclass(ToolError, CONTINUES) and not issubclass(ToolError, ENDS)
    assert issubclass(ModelRefused, ENDS) and issubclass(ProviderError, ENDS)


def test_a_driver_yields_its_events_and_the_engine_stores_and_streams_them(small_kb) -> None:
    chat = ScriptedChat([search_call("approval threshold"), ChatResponse(text="CFO [1].")])
    ctx = RunContext("Who approves?", 4)
    grader = KeepDocs("policies/travel.md")
    template = RunTemplate(Toolbox(small_kb), grader, ExtractiveAnswerer(reading=ENGLISH_READING),
                           5, reading=EN_RD)
    steps = template.run(ctx, ToolsDriver(chat, Toolbox(small_kb), grader))
    # the run stores and streams nothing itself: its events come out as it goes
    assert inspect.isgenerator(steps) and not ctx.events and not chat.calls
    outcome = drain(steps, ctx)
    assert outcome.status == RunStatus.ANSWERED
    assert [e.kind for e in ctx.events] == [EventKind.TOOL_CALL, EventKind.GRADE] * 2 + [
        EventKind.ANSWER]
    # the answer's two pieces ("CFO ", "[1].") are not kept, nor do they use up a seq
    assert [e.seq for e in ctx.events] == [0, 1, 2, 3, 4] and ctx.events[0].step == 1
    assert ctx.streamed == "CFO [1]."
    # through the engine: what is stored is what was streamed, numbered once, but the
    # answer's pieces (streamed only: the AnswerEvent holds the answer)
    engine = engine_for(small_kb, ScriptedChat([search_call("approval threshold"),
                                                ChatResponse(text="CFO [1].")]))
    streamed = []
    result = engine.ask("Who approves?", route="agent", driver="tools",
                        on_event=streamed.append)
    stored = engine.runs.events(result.run_id)
    assert [(e.kind, e.step, e.seq, e.data) for e in stored] == \
        [(e.kind, e.step, e.seq, e.data) for e in streamed if e.kind != EventKind.ANSWER_DELTA]
    assert [e.kind for e in streamed] == [EventKind.ROUTE, *[EventKind.TOOL_CALL,
                                                             EventKind.GRADE] * 2,
                                          EventKind.ANSWER_DELTA, EventKind.ANSWER_DELTA,
                                          EventKind.ANSWER]


def test_a_null_query_is_a_tool_error_not_a_search_for_none(small_kb) -> None:
    chat = ScriptedChat([
        ChatResponse(text="", tool_calls=[ToolCall("a", "search_knowledge_base",
                                                   {"query": None})]),
        ChatResponse(text="The knowledge base does not say."),
    ])
    events = []
    engine_for(small_kb, chat).ask("anything?", route="agent", driver="tools",
                                   on_event=events.append)
    tool_msg = next(m for m in chat.calls[1].messages if m.role == "tool")
    assert tool_msg.is_error and "missing or empty argument 'query'" in tool_msg.content
    searched = [e.data for e in events if e.kind == EventKind.TOOL_CALL][1:]
    assert searched == [{"tool": "search_knowledge_base", "query": "",
                         "error": "missing or empty argument 'query'"}]


def test_runs_are_stored_and_metrics_count_them(small_kb) -> None:
    engine = engine_for(small_kb, ScriptedChat([search_call("approval threshold"),
                                                ChatResponse(text="CFO [1].")]))
    first = engine.ask("Who approves?", route="agent", driver="tools")
    engine.chat = ScriptedChat([lambda m, t, c: search_call("x") if c != "none"
                                else ChatResponse(text="partial [1]")], repeat_last=True)
    second = engine.ask("Who approves again?", route="agent", driver="tools")
    assert (first.status, second.status) == (RunStatus.ANSWERED, RunStatus.TRUNCATED)
    m = engine.runs.metrics()
    assert m.runs == 2
    assert m.mean_steps == (first.steps + second.steps) / 2
    assert m.truncated_pct == 50.0
    assert m.warn_truncated
    assert 0.0 < m.discarded_pct < 100.0
    listed = engine.runs.list()
    assert [r["run_id"] for r in listed] == [second.run_id, first.run_id]


def test_the_model_can_ask_for_the_next_page(small_kb) -> None:
    """page 2 holds the hits that follow page 1 of the same query; a bad page goes back to
    the model as a tool error."""
    query = "approval booking battery leadership"
    chat = ScriptedChat([
        ChatResponse(text="", tool_calls=[
            ToolCall("a", "search_knowledge_base", {"query": query}),
            ToolCall("b", "search_knowledge_base", {"query": query, "page": 2}),
            ToolCall("c", "search_knowledge_base", {"query": query, "page": "zero"}),
            ToolCall("d", "search_knowledge_base", {"query": query, "page": 99})]),
        ChatResponse(text="The knowledge base does not say."),
    ])
    every = KeepDocs(*{h.doc_id for h in small_kb.search(query, 20)})
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=4, search_k=2), chat=chat,
                    grader=every)
    events = []
    engine.ask("anything?", route="agent", driver="tools", on_event=events.append)
    calls = [e.data for e in events if e.kind == EventKind.TOOL_CALL]
    ranked = [h.chunk_id for h in small_kb.search(query, 4)]
    grades = [e.data for e in events if e.kind == EventKind.GRADE][1:]  # after single-shot's
    calls = calls[1:]
    # the same GradeEvent builder as the first search's: every hit's verdict, kept ones first
    kept = [[v["chunk_id"] for v in g["verdicts"][:g["kept"]]] for g in grades]
    assert kept[0] == ranked[:2] and kept[1] == ranked[2:4]
    assert all(g.get("sub_question") is None and "kept_ids" not in g for g in grades)
    assert "page" not in calls[0] and calls[1]["page"] == 2
    paged = [e for e in events if e.kind == EventKind.TOOL_CALL][2]
    assert log_line(paged).startswith(
        f'step=2 tool=search_knowledge_base query="{query}" page=2 chunks=2')
    tool_msgs = [m.content for m in chat.calls[1].messages if m.role == "tool"]
    assert "page must be an integer from 1 to 5" in tool_msgs[2]
    assert "page must be an integer from 1 to 5" in tool_msgs[3]


# -- how replies end: truncation, refusal, empty answers, a model that will not search ---------

def test_a_cut_off_tool_call_is_never_run_and_asked_again_with_twice_the_budget(small_kb) -> None:
    cut = ChatResponse(text="", tool_calls=[ToolCall("x", "search_knowledge_base",
                                                     {"query": "approval thresh"})],
                       finish=Finish.TRUNCATED, stop_reason="max_tokens")
    chat = ScriptedChat([cut, cut, ChatResponse(text="The knowledge base does not say.")])
    events = []
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=3, loop_max_tokens=100),
                    chat=chat, grader=KeepDocs("policies/travel.md"))
    engine.ask("Who approves travel?", route="agent", driver="tools", on_event=events.append)
    assert [c.max_tokens for c in chat.calls[:2]] == [100, 200]
    searches = [e.data for e in events if e.kind == EventKind.TOOL_CALL]
    # the cut-off call did not run: the only search is the one the driver makes itself
    assert [s["query"] for s in searches] == ["Who approves travel?"]


def test_a_refusal_ends_the_run_refused_with_the_reason(small_kb) -> None:
    chat = ScriptedChat([search_call("approval threshold"),
                         ChatResponse(text="", finish=Finish.REFUSED, stop_reason="refusal",
                                      refusal="category cyber")])
    engine = engine_for(small_kb, chat)
    result = engine.ask("Who approves?", route="agent", driver="tools")
    assert result.status == RunStatus.REFUSED
    assert "declined" in result.answer and "category cyber" in result.answer
    assert engine.runs.get(result.run_id)["status"] == "refused"


def test_an_empty_answer_gets_one_answer_now(small_kb) -> None:
    chat = ScriptedChat([search_call("approval threshold"), ChatResponse(text=""),
                         ChatResponse(text="The CFO approves [1].")])
    result = engine_for(small_kb, chat).ask("Who approves?", route="agent", driver="tools")
    assert result.status == RunStatus.ANSWERED and result.answer == "The CFO approves [1]."
    assert chat.calls[2].tool_choice == "none"
    assert "Answer the question now" in chat.calls[2].messages[-1].content


def test_a_model_that_cannot_be_forced_still_sees_the_search_first(small_kb) -> None:
    """Ollama ignores tool_choice: nothing is forced. Step 1 is the driver's own search of the
    question, so the model's first call already holds its results; the last step sends no
    tools at all."""
    ollama = ModelTraits(forced_tool_choice=False, honours_tool_choice=False)

    def reply(messages, tools, tool_choice):
        if tools is None:
            return ChatResponse(text="Above £2,500 the CFO approves [1].")
        return search_call("approval", len(messages))

    chat = ScriptedChat([reply], repeat_last=True, traits=ollama)
    events = []
    result = engine_for(small_kb, chat).ask("Who approves travel expenses above £2,500?",
                                            route="agent", driver="tools",
                                            on_event=events.append)
    assert all(c.tool_choice == "auto" for c in chat.calls[:-1])
    first = next(e for e in events if e.kind == EventKind.TOOL_CALL)
    assert first.step == 1 and first.data["query"] == "Who approves travel expenses above £2,500?"
    assert "policies/travel.md" in chat.calls[0].messages[0].content
    assert chat.calls[-1].tools is None  # the forced answer offers no tools
    assert result.status == RunStatus.TRUNCATED and result.citations


class ScoredDocs:
    """A grader with a score per document: keeps those at 0.5 or more."""
    usage = Usage()  # no model calls

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        scored = [replace(h, grade_score=self.scores.get(h.doc_id, 0.0)) for h in hits]
        kept = [replace(h, verdict="relevant") for h in scored if h.grade_score >= 0.5]
        rest = [replace(h, verdict="irrelevant") for h in scored if h.grade_score < 0.5]
        return Grade(kept=kept, discarded=rest, enough=bool(kept), missing="")


def test_the_tools_run_starts_from_single_shots_search_and_keeps_its_documents(small_kb) -> None:
    """Step 1 is single-shot's search of the whole question at single-shot's depth, made by
    the driver; its documents stay in the evidence in single-shot's order, the ones the grader
    did not keep unconfirmed, except the one the grader is sure is irrelevant (< 0.3)."""
    question = "Who approves travel expenses and what is the T9 sensor battery life?"
    settings = small_kb.settings.with_(max_steps=3, citation_check="offline", search_k=1)
    single = Engine(small_kb, settings).ask(question, route="single")
    single_docs = list(dict.fromkeys(e["doc_id"] for e in single.evidence))
    assert len(single_docs) == 3
    sure, unsure, kept = single_docs[2], single_docs[1], single_docs[0]
    grader = ScoredDocs({kept: 0.9, unsure: 0.4, sure: 0.1})
    chat = ScriptedChat([ChatResponse(text="The CFO approves [1].")])
    events = []
    result = Engine(small_kb, settings, chat=chat, grader=grader).ask(
        question, route="agent", driver="tools", on_event=events.append)
    first = next(e for e in events if e.kind == EventKind.TOOL_CALL)
    # the driver's search, not the model's, at single-shot's depth (search_k=1 is the model's)
    assert first.step == 1 and first.data["query"] == question and first.data["chunks"] > 1
    assert len(chat.calls) == 1 and "[1]" in chat.calls[0].messages[0].content
    docs = list(dict.fromkeys(e["doc_id"] for e in result.evidence))
    assert docs == [kept, unsure]  # single-shot's order; the sure-irrelevant one is gone
    confirmed = {e["doc_id"]: e["confirmed"] for e in result.evidence}
    assert confirmed == {kept: True, unsure: False}
    assert "not confirmed relevant" in chat.calls[0].messages[0].content


def test_a_passage_the_grader_did_not_keep_is_never_cited(small_kb) -> None:
    """Single-shot's passages the grader did not keep reach the model marked unconfirmed;
    a citation of one is taken out and reported, as a citation of nothing is (the support
    check is off: this is about which passages may be cited at all)."""
    question = "Who approves travel expenses and what is the T9 sensor battery life?"
    settings = small_kb.settings.with_(max_steps=3, citation_check="off", search_k=1)
    single = Engine(small_kb, settings).ask(question, route="single")
    single_docs = list(dict.fromkeys(e["doc_id"] for e in single.evidence))
    kept, unsure = single_docs[0], single_docs[1]
    grader = ScoredDocs({kept: 0.9, unsure: 0.4})
    probe = Engine(small_kb, settings, chat=ScriptedChat([ChatResponse(text="No.")]),
                   grader=grader).ask(question, route="agent", driver="tools")
    n_unsure = next(e["n"] for e in probe.evidence if e["doc_id"] == unsure)
    chat = ScriptedChat([ChatResponse(text=f"The CFO approves them [1]. See also [{n_unsure}].")])
    result = Engine(small_kb, settings, chat=chat, grader=grader).ask(
        question, route="agent", driver="tools")
    assert f"[{n_unsure}]" in chat.calls[0].messages[0].content  # shown to the model
    assert "cannot be cited" in chat.calls[0].messages[0].content
    assert result.invalid_citations == [n_unsure]
    assert f"[{n_unsure}]" not in result.answer and "[1]" in result.answer
    assert [c.doc_id for c in result.citations] == [kept]


def test_only_the_run_template_writes_the_answer_and_the_first_search() -> None:
    """One beginning and one end for every run (agent/template.py): no driver builds an
    AnswerEvent or searches the question itself for step 1."""
    from pathlib import Path

    import ragloop.agent

    folder = Path(ragloop.agent.__file__).parent
    answering = {p.name for p in folder.glob("*.py") if "AnswerEvent(" in p.read_text()}
    assert answering == {"template.py"}
    first = {p.name for p in folder.glob("*.py") if ".search(ctx.searched" in p.read_text()
             or ".search(ctx.question" in p.read_text()}
    assert first == {"template.py"}
