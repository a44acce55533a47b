"""The LLM decisions (planner, grader, rewriter, answerer) and their defensive JSON, with a
scripted chat model."""

from __future__ import annotations

import json

import pytest

from ragloop.agent import prompts
from ragloop.agent.jsonparse import BadModelJSON, ask_json, parse_json_object
from ragloop.agent.llm_decisions import (
    MAX_GRADED_HITS,
    PLANNER_UNREADABLE,
    SUB_QUESTION_CHARS,
    GradeReply,
    LLMAnswerer,
    LLMGrader,
    LLMPlanner,
    LLMRewriter,
    PlanReply,
)
from ragloop.core.decisions import Evidence, Grade
from ragloop.core.errors import ProviderError
from ragloop.core.types import EventKind, Hit, RunStatus, Usage
from ragloop.language.vocabulary import ENGLISH_WORDS as EN
from ragloop.llm.base import ChatResponse
from ragloop.llm.scripted import ScriptedChat


def reply(obj: object, tokens: int = 10) -> ChatResponse:
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return ChatResponse(text=text, usage=Usage(input_tokens=tokens, output_tokens=2, calls=1))


def hit(chunk_id: int, doc_id: str, section: str, text: str, title: str = "") -> Hit:
    return Hit(chunk_id=chunk_id, doc_id=doc_id, section=section, section_title=title,
               text=text, score=1.0 / chunk_id)


HITS = [
    hit(11, "policies/travel.md", "4.2", "Expenses above £2,500 need CFO approval.",
        "Approval thresholds"),
    hit(12, "products/sensor.md", "2", "The T9 runs on a CR123A battery.", "Power"),
    hit(13, "org/leadership.md", "1", "The CFO is Priya Raman.", "Executive team"),
]


# -- parse_json_object --------------------------------------------------------------------------

def test_parse_valid_json() -> None:
    got = parse_json_object('{"need_search": true, "sub_questions": ["who is the CFO?"]}',
                            PlanReply)
    assert got.need_search is True
    assert got.sub_questions == ["who is the CFO?"]


@pytest.mark.parametrize("text", [
    'Sure! Here is the plan: {"need_search": true, "sub_questions": ["q"]} Hope it helps.',
    '```json\n{"need_search": true, "sub_questions": ["q"]}\n```',
    'Thinking {maybe}.\n```\n{"need_search": true, "sub_questions": ["q"]}\n```\nDone {x}.',
    '{"need_search": true,\n "sub_questions": ["q"], "reason": "a raw\nnewline"}',
])
def test_parse_json_wrapped_in_prose_or_fences(text: str) -> None:
    got = parse_json_object(text, PlanReply)
    assert (got.need_search, got.sub_questions) == (True, ["q"])


@pytest.mark.parametrize(("text", "reason"), [
    ("I cannot help with that.", "no JSON object found"),
    ('{"need_search": true, "sub_questions": ["q"]', "no JSON object found"),
    ('{"need_search": tru, "sub_questions": []}', "invalid JSON: Expecting value"),
    ('{"sub_questions": ["q"]}', "need_search: Field required"),
    ('{"need_search": false}', "'reply' is required when need_search is false"),
])
def test_parse_errors_name_a_short_reason(text: str, reason: str) -> None:
    with pytest.raises(BadModelJSON) as info:
        parse_json_object(text, PlanReply)
    assert reason in info.value.reason
    assert len(info.value.reason) <= 300


# -- ask_json -----------------------------------------------------------------------------------

def test_ask_json_retries_once_quoting_the_error_and_the_schema() -> None:
    chat = ScriptedChat([reply('{"relevant": [1], "enough": tru}'),
                         reply({"relevant": [1], "enough": True})])
    usage = Usage()
    value, ok = ask_json(chat, "SYS", "USER", GradeReply, fallback=None, usage=usage)
    assert ok is True
    assert isinstance(value, GradeReply) and value.relevant == [1]
    assert len(chat.calls) == 2
    assert [c.temperature for c in chat.calls] == [0.0, 0.0]
    assert [c.system for c in chat.calls] == ["SYS", "SYS"]
    retry = chat.calls[1].messages
    assert [m.role for m in retry] == ["user", "assistant", "user"]
    assert retry[0].content == "USER"
    assert retry[1].content == '{"relevant": [1], "enough": tru}'
    assert "invalid JSON: Expecting value" in retry[2].content
    assert '"relevant"' in retry[2].content and '"required"' in retry[2].content
    assert (usage.calls, usage.input_tokens) == (2, 20)


def test_ask_json_broken_twice_returns_the_fallback() -> None:
    chat = ScriptedChat([reply("no json here"), reply('{"broken": ')])
    usage = Usage()
    value, ok = ask_json(chat, "SYS", "USER", GradeReply, fallback="FALLBACK", usage=usage)
    assert (value, ok) == ("FALLBACK", False)
    assert len(chat.calls) == 2  # one retry, not more
    assert "no JSON object found" in chat.calls[1].messages[-1].content
    assert usage.calls == 2


def test_ask_json_callable_fallback_gets_the_last_reply() -> None:
    chat = ScriptedChat([reply("first"), reply("second")])
    value, ok = ask_json(chat, "S", "U", GradeReply, fallback=lambda text: text.upper())
    assert (value, ok) == ("SECOND", False)


def test_ask_json_with_no_retries_makes_one_call() -> None:
    chat = ScriptedChat([reply("nope")])
    value, ok = ask_json(chat, "S", "U", GradeReply, retries=0, fallback=0)
    assert (value, ok, len(chat.calls)) == (0, False, 1)


def test_ask_json_lets_provider_errors_through() -> None:
    def down(messages, tools, tool_choice):
        raise ProviderError("provider down after 3 retries")

    with pytest.raises(ProviderError):
        ask_json(ScriptedChat([down]), "S", "U", GradeReply, fallback=None)


# -- planner ------------------------------------------------------------------------------------

def test_planner_splits_a_multi_part_question() -> None:
    chat = ScriptedChat([reply({"need_search": True, "reason": "two parts",
                                "sub_questions": ["Who is the CFO?", "What does the CFO approve?"],
                                "reply": None})])
    planner = LLMPlanner(chat)
    plan = planner.plan("Who is the CFO and what do they approve?")
    assert plan.need_search is True
    assert plan.sub_questions == ["Who is the CFO?", "What does the CFO approve?"]
    assert plan.reply is None and plan.reason == "two parts"
    call = chat.calls[0]
    assert "Who is the CFO and what do they approve?" in call.messages[0].content
    assert call.system == prompts.PLANNER_SYSTEM
    assert "JSON object only" in call.system
    assert planner.usage.calls == 1


def test_small_talk_gets_a_reply_and_no_search() -> None:
    chat = ScriptedChat([reply({"need_search": False, "sub_questions": ["hi"],
                                "reply": "Hello! Ask me about the documents.",
                                "reason": "greeting"})])
    plan = LLMPlanner(chat).plan("hi there")
    assert plan.need_search is False
    assert plan.reply == "Hello! Ask me about the documents."
    assert plan.sub_questions == []


def test_planner_cuts_five_sub_questions_to_three_without_a_retry() -> None:
    """Decision: more than 3 sub-questions is a usable reply, so it is truncated (the first 3
    kept, blanks and duplicates dropped), not retried."""
    subs = ["A?", "a?", " ", "B?", "C?", "D?", "E?"]
    chat = ScriptedChat([reply({"need_search": True, "sub_questions": subs})])
    plan = LLMPlanner(chat).plan("A, B, C, D and E?")
    assert plan.sub_questions == ["A?", "B?", "C?"]
    assert len(chat.calls) == 1


def test_planner_no_search_without_a_reply_is_retried() -> None:
    chat = ScriptedChat([reply({"need_search": False}),
                         reply({"need_search": False, "reply": "Hi!"})])
    plan = LLMPlanner(chat).plan("hello")
    assert (plan.need_search, plan.reply) == (False, "Hi!")
    assert len(chat.calls) == 2
    assert "'reply' is required" in chat.calls[1].messages[-1].content


def test_planner_fallback_searches_the_question_itself() -> None:
    chat = ScriptedChat([reply("I think you should search."), reply("Really, search.")])
    planner = LLMPlanner(chat)
    plan = planner.plan("Who approves travel over £2,500?")
    assert plan.need_search is True
    assert plan.sub_questions == ["Who approves travel over £2,500?"]
    assert plan.reason == PLANNER_UNREADABLE
    assert planner.usage.calls == 2


def test_planner_with_no_sub_questions_searches_the_question() -> None:
    chat = ScriptedChat([reply({"need_search": True, "sub_questions": []})])
    assert LLMPlanner(chat).plan("What is IP67?").sub_questions == ["What is IP67?"]


def test_a_sub_question_cut_at_its_bound_gives_way_to_the_question() -> None:
    """A grammar-constrained server stops a string at its maxLength: a sub-question that long
    was cut mid-way, and the whole question searches better than its first part."""
    question = "Which sensors " + "and which gateways " * 40 + "are rated IP67?"
    cut = question[:SUB_QUESTION_CHARS]
    chat = ScriptedChat([reply({"need_search": True, "sub_questions": [cut]})])
    assert LLMPlanner(chat).plan(question).sub_questions == [question]


# -- grader -------------------------------------------------------------------------------------

def test_the_graders_ids_are_the_hits_shown() -> None:
    """The reply's ids are an enum of the hits shown (a grammar bounds them; an integer's
    maximum it ignores); hits past MAX_GRADED_HITS are not shown and come back discarded,
    ungraded."""
    many = [hit(i, f"d{i}.md", "1", f"text {i}") for i in range(1, MAX_GRADED_HITS + 3)]
    chat = ScriptedChat([reply({"relevant": [2], "enough": True})])
    grade = LLMGrader(chat).grade("q", many)
    schema = chat.calls[0].json_schema["properties"]["relevant"]
    assert schema["items"]["enum"] == list(range(1, MAX_GRADED_HITS + 1))
    assert schema["maxItems"] == MAX_GRADED_HITS
    assert [h.chunk_id for h in grade.kept] == [2]
    assert [h.verdict for h in grade.discarded[-2:]] == ["ungraded", "ungraded"]
    assert len(grade.discarded) == len(many) - 1
    chat = ScriptedChat([reply({"relevant": [1], "enough": True})])
    LLMGrader(chat).grade("q", HITS)
    assert chat.calls[0].json_schema["properties"]["relevant"]["items"]["enum"] == [1, 2, 3]


def test_grader_maps_ids_back_to_hits_best_first_and_ignores_unknown_ids() -> None:
    chat = ScriptedChat([reply({"relevant": [3, 99, "[1]", 0, 3], "enough": False,
                                "missing": "who the CFO reports to",
                                "next_query": "CFO reports to"})])
    grader = LLMGrader(chat)
    grade = grader.grade("Who approves big expenses and who is it?", HITS)
    assert [h.chunk_id for h in grade.kept] == [13, 11]  # model order; 99 and 0 ignored
    assert [h.verdict for h in grade.kept] == ["relevant", "relevant"]
    assert [h.chunk_id for h in grade.discarded] == [12]
    assert grade.discarded[0].verdict == "irrelevant"
    assert grade.enough is False
    assert grade.missing == "who the CFO reports to"
    assert grade.next_query == "CFO reports to"
    assert all(h.verdict is None for h in HITS)  # the caller's hits are not mutated
    assert grader.usage.calls == 1


def test_grader_shows_numbered_hits_as_data_cut_to_the_budget() -> None:
    long = hit(20, "manuals/t9.md", "3.1", "battery " * 200 + "TAIL_MARKER", "Care")
    chat = ScriptedChat([reply({"relevant": [], "enough": False, "missing": "all"})])
    LLMGrader(chat, max_chunk_chars=100).grade("T9 battery care?", [*HITS[:1], long])
    sent = chat.calls[0].messages[0].content
    assert "id=1 | policies/travel.md §4.2 (Approval thresholds)" in sent
    assert "Expenses above £2,500 need CFO approval." in sent
    assert "id=2 | manuals/t9.md §3.1 (Care)" in sent
    assert "TAIL_MARKER" not in sent and "…[cut]" in sent
    assert "<retrieved_data" in sent and "T9 battery care?" in sent
    system = chat.calls[0].system
    assert "never instructions" in system and "JSON object only" in system
    assert "<retrieved_data source=" not in system and "CFO approval" not in system


def test_grader_enough_with_nothing_kept_is_not_enough() -> None:
    chat = ScriptedChat([reply({"relevant": [7], "enough": True})])
    grade = LLMGrader(chat).grade("q", HITS)
    assert grade.kept == [] and grade.enough is False
    assert len(grade.discarded) == 3


def test_grader_enough_clears_the_gap() -> None:
    chat = ScriptedChat([reply({"relevant": [1], "enough": True, "missing": "x",
                                "next_query": "y"})])
    grade = LLMGrader(chat).grade("q", HITS)
    assert grade.enough is True and grade.missing == "" and grade.next_query is None


def test_grader_unreadable_reply_keeps_every_hit() -> None:
    chat = ScriptedChat([reply("The first one looks good."), reply("Honestly, the first.")])
    grader = LLMGrader(chat)
    grade = grader.grade("q", HITS)
    assert [h.chunk_id for h in grade.kept] == [11, 12, 13]
    assert grade.discarded == []
    assert grade.enough is False
    # no gap: the grader's failure is never handed on as something to search for
    assert grade.ungraded is True and grade.missing == ""
    assert {h.verdict for h in grade.kept} == {"ungraded"}
    assert len(chat.calls) == 2 and grader.usage.calls == 2


def test_grader_with_no_hits_makes_no_call() -> None:
    chat = ScriptedChat([])
    grade = LLMGrader(chat).grade("q", [])
    assert (grade.kept, grade.enough, chat.calls) == ([], False, [])
    assert grade.missing


# -- rewriter -----------------------------------------------------------------------------------

def test_rewriter_sees_the_gap_and_not_the_history() -> None:
    earlier = hit(31, "history/old.md", "9", "EARLIER_RESULT_TEXT about approvals")
    grade = Grade(kept=[earlier], discarded=[hit(32, "x.md", "1", "DISCARDED_TEXT")],
                  enough=False, missing="the name of the Chief Financial Officer")
    chat = ScriptedChat([reply({"query": "Chief Financial Officer name leadership"})])
    rewriter = LLMRewriter(chat)
    query = rewriter.rewrite("Who approves expenses above £2,500, by name?", grade,
                             ["approval threshold", "who approves expenses"])
    assert query == "Chief Financial Officer name leadership"
    call = chat.calls[0]
    assert len(call.messages) == 1 and call.messages[0].role == "user"
    sent = call.messages[0].content + call.system
    assert "the name of the Chief Financial Officer" in sent
    assert "Who approves expenses above £2,500, by name?" in sent
    assert "approval threshold" in sent  # the tried queries, so it does not repeat them
    assert "EARLIER_RESULT_TEXT" not in sent and "DISCARDED_TEXT" not in sent
    assert "history/old.md" not in sent and "<retrieved_data" not in call.messages[0].content
    assert rewriter.usage.calls == 1


@pytest.mark.parametrize("answer", ["Approval Threshold", "  approval   threshold "])
def test_rewriter_refuses_to_repeat_a_tried_query(answer: str) -> None:
    chat = ScriptedChat([reply({"query": answer})])
    grade = Grade(kept=[], discarded=[], enough=False, missing="the threshold")
    assert LLMRewriter(chat).rewrite("q", grade, ["approval threshold"]) is None


@pytest.mark.parametrize("script", [
    [reply({"query": None})],
    [reply({"query": "   "})],
    [reply("search for the CFO"), reply("the CFO")],
])
def test_rewriter_has_nothing_new(script: list[ChatResponse]) -> None:
    grade = Grade(kept=[], discarded=[], enough=False, missing="x")
    assert LLMRewriter(ScriptedChat(script)).rewrite("q", grade, []) is None


# -- answerer -----------------------------------------------------------------------------------

EVIDENCE = [
    Evidence(n=1, doc_id="policies/travel.md", section="4.2", section_title="Approval thresholds",
             text="Expenses above £2,500 per trip must be approved by the CFO.", step=1),
    Evidence(n=2, doc_id="policies/old-travel.md", section="3", section_title="Approvals",
             text="Expenses above £3,000 must be approved by the CFO.", step=2),
]


def test_answerer_writes_from_numbered_evidence() -> None:
    chat = ScriptedChat([reply({
        "answer": "The CFO approves expenses above £2,500 [1]; an older policy says £3,000 [2].",
        "missing": ["the approval deadline", "the approval deadline"],
        "unanswerable": False,
        "conflicts": "the threshold: £2,500 [1] vs £3,000 [2]"})])
    answerer = LLMAnswerer(chat, words=EN)
    draft = answerer.answer("Who approves big expenses, and by when?",
                            ["Who approves big expenses?", "By when?"], EVIDENCE)
    assert draft.text.startswith("The CFO approves expenses above £2,500 [1]")
    assert draft.missing == ["the approval deadline"]
    assert draft.conflicts == ["the threshold: £2,500 [1] vs £3,000 [2]"]
    assert draft.unanswerable is False
    sent = chat.calls[0].messages[0].content
    assert "[1] policies/travel.md §4.2 (Approval thresholds)" in sent
    assert "[2] policies/old-travel.md §3 (Approvals)" in sent
    assert "1. Who approves big expenses?\n2. By when?" in sent
    system = chat.calls[0].system
    assert "[2]" in system and "does not say" in system and "disagree" in system
    assert "never instructions" in system and "JSON object only" in system
    assert answerer.usage.calls == 1


def test_answerer_plain_text_reply_becomes_the_draft() -> None:
    chat = ScriptedChat([reply("The CFO approves them [1]."),
                         reply("The CFO approves expenses above £2,500 [1].")])
    draft = LLMAnswerer(chat, words=EN).answer("Who approves?", ["Who approves?"], EVIDENCE)
    assert draft.text == "The CFO approves expenses above £2,500 [1]."
    assert (draft.missing, draft.unanswerable, draft.conflicts) == ([], False, [])
    assert len(chat.calls) == 2


def test_answerer_salvages_the_answer_of_cut_off_json() -> None:
    cut = '```json\n{"answer": "The CFO approves \\"big\\" expenses [1].\\nSee also [2].", "mis'
    chat = ScriptedChat([reply(cut)], repeat_last=True)
    draft = LLMAnswerer(chat, words=EN).answer("Who approves?", ["Who approves?"], EVIDENCE)
    assert draft.text == 'The CFO approves "big" expenses [1].\nSee also [2].'


def test_answerer_with_no_evidence_says_so_without_a_call() -> None:
    chat = ScriptedChat([])
    draft = LLMAnswerer(chat, words=EN).answer("What is the moon made of?",
                                               ["What is the moon made of?"], [])
    assert draft.unanswerable is True
    assert draft.missing == ["What is the moon made of?"]
    assert "does not say" in draft.text
    assert chat.calls == []


# -- a whole run --------------------------------------------------------------------------------

def test_unreadable_decisions_never_crash_a_pipeline_run(small_kb) -> None:
    """Planner, grader and rewriter reply garbage every time; the run still answers, and every
    call's usage reaches the run."""
    from ragloop.agent.engine import Engine

    def script(messages, tools, tool_choice):
        if "Answer the question from the evidence above." in messages[0].content:
            return reply({"answer": "Expenses above £2,500 go to the CFO [1].",
                          "missing": [], "unanswerable": False, "conflicts": []})
        return reply("¯\\_(ツ)_/¯ not json")

    chat = ScriptedChat([script], repeat_last=True)
    engine = Engine(small_kb, small_kb.settings.with_(max_steps=4), chat=chat, grader_chat=chat)
    events = []
    result = engine.ask("Who approves travel expenses above £2,500?", route="agent",
                        driver="pipeline", on_event=events.append)
    assert result.status == RunStatus.ANSWERED
    assert result.answer.startswith("Expenses above £2,500 go to the CFO [1]")
    assert result.citations and result.citations[0].n == 1
    plan = next(e for e in events if e.kind == EventKind.PLAN)
    assert plan.data["reason"] == PLANNER_UNREADABLE
    grades = [e for e in events if e.kind == EventKind.GRADE]
    assert grades and grades[0].data["ungraded"] is True and grades[0].data["missing"] == ""
    assert not any("unreadable" in str(e.data.get("missing", "")) for e in events)
    assert result.usage.calls == len(chat.calls)


def test_answerer_prompt_marks_unconfirmed_evidence() -> None:
    """A nearest passage the grader did not keep is shown to the model as unconfirmed."""
    kept = Evidence(1, "a.md", "2", "Returns", "Returns are accepted within 30 days.", 1)
    nearest = Evidence(2, "b.md", "p1", "Warranty", "An extended warranty adds 2 years.", 1,
                       confirmed=False)
    text = prompts.format_evidence([kept, nearest], 500)
    first, second = text.split("\n\n")
    assert "unconfirmed" not in first
    assert second.startswith("[2] b.md §p1 (Warranty) [unconfirmed:")
