"""The LLM implementations of the decisions: one JSON call each (see jsonparse.ask_json).

- LLMPlanner  `{need_search, sub_questions ≤ 3, reply, reason}`; small talk gets a reply and no
  search. More than 3 sub-questions are cut to the first 3 (not a retry: the reply is usable);
  a sub-question written to its schema bound (cut) gives way to the question itself.
- LLMGrader   `{relevant: [ids], enough, missing, next_query}` over the hits shown as
  `id=1..n` (their position, not chunk_id: short ids are copied reliably by cheap models).
  Unknown ids are ignored; hits past the 100th are not shown (discarded as "ungraded"). An
  unreadable reply keeps every hit (verdict "ungraded", `Grade.ungraded`), enough=False and
  no gap: a bad grader never loses evidence, and its failure is never handed to the agent or
  the rewriter as something to search for.
- LLMRewriter `{query}` from the question, the grader's gap (`grade.missing`, and its
  `next_query` as a hint) and the queries already run; never the history or the retrieved text
  (rewrites drift otherwise). A query equal to a tried one (case/space-insensitive) → None.
- LLMAnswerer `{answer, missing, unanswerable, conflicts}` from numbered evidence, citing [n];
  an unreadable reply becomes a Draft of its raw text (the `answer` string salvaged when the
  reply was broken JSON). With no evidence at all it answers without a call.

Each keeps the cumulative usage of its calls in `.usage`. Calls ask for their reply's JSON schema
(constrained output where the provider has it) at temperature 0 where the model takes one;
decisions run at low reasoning effort with `decision_max_tokens`, the answerer with
`loop_max_tokens` (thinking tokens count against both).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from ragloop.agent import prompts
from ragloop.agent.jsonparse import ask_json, stream_json
from ragloop.core.answer_stream import Writing, written
from ragloop.core.decisions import Draft, Evidence, Grade, Plan
from ragloop.core.types import Hit, Usage
from ragloop.language.vocabulary import Vocabulary
from ragloop.llm.base import ChatModel

MAX_SUB_QUESTIONS = 3
PLANNER_UNREADABLE = "planner reply unreadable"


def _str_list(value: Any) -> Any:
    """A lone string is a one-item list; null is an empty list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


def _clean(items: list[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        text = " ".join(item.split())
        if text and text.casefold() not in (o.casefold() for o in out):
            out.append(text)
    return out


# -- the schemas of the replies -----------------------------------------------------------------

# The bounds below are schema bounds, not checks (as llm_condense's and agent/tools.py's):
# llama.cpp turns maxLength into `char{0,n}` and maxItems into a bounded repetition in the
# reply's grammar (grammars/README.md, "JSON Schemas → GBNF"), so a grammar-constrained small
# model cannot write one string or list until max_tokens. Each is well above what its prompt
# asks for and under the repetition cap newer llama-server builds put on a grammar (a
# maxLength near 2000 is refused). Providers whose strict mode refuses them get the schema
# without them (llm/base.LENGTH_BOUNDS).
SUB_QUESTION_CHARS = 500  # "the message itself, unchanged": the eval sets' longest is 249
PLAN_REPLY_CHARS = 400  # "one or two sentences"
REASON_CHARS = 200  # "a few words"
MISSING_CHARS = 300  # "a few concrete words"
NEXT_QUERY_CHARS = 300  # "a short search query"; the search tool's own bound (tools.py)
# The grader's ids are an enum of the hits shown (`grade_reply_for`), not an integer with a
# maximum: llama-cpp-python's grammar ignores minimum/maximum (llama_grammar.py, 0.3.36), so
# an integer's digits were unbounded. Hits past MAX_GRADED_HITS are not shown to the model
# (grade() discards them as ungraded): a list bound stays under the grammar's repetition cap.
MAX_GRADED_HITS = 100


def _bounded(chars: int) -> Any:
    return Field(json_schema_extra={"maxLength": chars})


class PlanReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    need_search: bool
    sub_questions: list[Annotated[str, _bounded(SUB_QUESTION_CHARS)]] = Field(
        default_factory=list, json_schema_extra={"maxItems": MAX_SUB_QUESTIONS})
    reply: Annotated[str, _bounded(PLAN_REPLY_CHARS)] | None = None
    reason: Annotated[str, _bounded(REASON_CHARS)] | None = ""

    @field_validator("sub_questions", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _str_list(value)

    @field_validator("sub_questions")
    @classmethod
    def _at_most_three(cls, value: list[str]) -> list[str]:
        return _clean(value)[:MAX_SUB_QUESTIONS]

    @model_validator(mode="after")
    def _reply_when_no_search(self) -> PlanReply:
        if not self.need_search and not (self.reply or "").strip():
            raise ValueError("'reply' is required when need_search is false")
        return self


class GradeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    relevant: list[Annotated[int, Field(json_schema_extra={
        "enum": list(range(1, MAX_GRADED_HITS + 1))})]] = Field(
        json_schema_extra={"maxItems": MAX_GRADED_HITS})  # grade_reply_for narrows it
    enough: bool
    missing: Annotated[str, _bounded(MISSING_CHARS)] | None = ""
    next_query: Annotated[str, _bounded(NEXT_QUERY_CHARS)] | None = None

    @field_validator("relevant", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> list[int]:
        """Ids as ints, whatever the model wrote: 3, "3", "[3]", "id=3"; others dropped."""
        if value is None:
            return []
        if not isinstance(value, list):
            value = [value]
        ids: list[int] = []
        for item in value:
            if isinstance(item, bool):
                continue
            if isinstance(item, int):
                ids.append(item)
            elif isinstance(item, float) and item.is_integer():
                ids.append(int(item))
            elif isinstance(item, str) and (m := re.search(r"\d+", item)):
                ids.append(int(m.group()))
        return ids


def _ids_field(hits: int) -> Any:
    ids = Annotated[int, Field(json_schema_extra={"enum": list(range(1, hits + 1))})]
    return (list[ids], Field(json_schema_extra={"maxItems": hits}))  # type: ignore[valid-type]


@functools.cache
def grade_reply_for(hits: int) -> type[GradeReply]:
    """GradeReply whose `relevant` ids are 1..hits, at most `hits` of them: the reply to a
    grading of `hits` hits (1 ≤ hits ≤ MAX_GRADED_HITS)."""
    return create_model("GradeReply", __base__=GradeReply, relevant=_ids_field(hits))


class RewriteReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str | None


class AnswerReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answer: str = Field(min_length=1)
    missing: list[str] = Field(default_factory=list)
    unanswerable: bool = False
    conflicts: list[str] = Field(default_factory=list)

    @field_validator("missing", "conflicts", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _str_list(value)


# -- the decisions ------------------------------------------------------------------------------

DECISION_TOKENS = 2048
ANSWER_TOKENS = 8192


class LLMPlanner:
    def __init__(self, chat: ChatModel, *, max_tokens: int = DECISION_TOKENS) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.usage = Usage()

    def plan(self, question: str) -> Plan:
        fallback = Plan(need_search=True, sub_questions=[question], reason=PLANNER_UNREADABLE)
        reply, ok = ask_json(self.chat, prompts.PLANNER_SYSTEM, prompts.planner_user(question),
                             PlanReply, fallback=fallback, usage=self.usage,
                             max_tokens=self.max_tokens)
        if not ok or not isinstance(reply, PlanReply):
            return fallback
        reason = (reply.reason or "").strip()
        if not reply.need_search:
            return Plan(need_search=False, sub_questions=[], reply=(reply.reply or "").strip(),
                        reason=reason)
        subs = reply.sub_questions
        if any(len(s) >= SUB_QUESTION_CHARS for s in subs):
            subs = []  # one was cut at its bound: the whole question searches better
        return Plan(need_search=True, sub_questions=subs or [question], reason=reason)


class LLMGrader:
    def __init__(self, chat: ChatModel, max_chunk_chars: int = 800, *,
                 max_tokens: int = DECISION_TOKENS) -> None:
        self.chat = chat
        self.max_chunk_chars = max_chunk_chars
        self.max_tokens = max_tokens
        self.usage = Usage()

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        if not hits:
            return Grade(kept=[], discarded=[], enough=False,
                         missing="everything: the search returned nothing")
        hits, unshown = hits[:MAX_GRADED_HITS], hits[MAX_GRADED_HITS:]
        unshown = [replace(h, verdict="ungraded", grade_score=None) for h in unshown]
        user = prompts.grader_user(question, hits, self.max_chunk_chars)
        reply, ok = ask_json(self.chat, prompts.GRADER_SYSTEM, user, grade_reply_for(len(hits)),
                             fallback=None, usage=self.usage, max_tokens=self.max_tokens)
        if not ok or not isinstance(reply, GradeReply):
            return Grade(kept=[replace(h, verdict="ungraded", grade_score=None) for h in hits]
                         + unshown, discarded=[], enough=False, ungraded=True)
        order = [i for i in dict.fromkeys(reply.relevant) if 1 <= i <= len(hits)]
        chosen = set(order)
        kept = [replace(hits[i - 1], verdict="relevant", grade_score=1.0) for i in order]
        discarded = [replace(h, verdict="irrelevant", grade_score=0.0)
                     for i, h in enumerate(hits, start=1) if i not in chosen] + unshown
        enough = reply.enough and bool(kept)
        if enough:
            return Grade(kept=kept, discarded=discarded, enough=True)
        next_query = " ".join((reply.next_query or "").split()) or None
        return Grade(kept=kept, discarded=discarded, enough=False,
                     missing=(reply.missing or "").strip(), next_query=next_query)


def _norm(query: str) -> str:
    return " ".join(query.split()).casefold()


class LLMRewriter:
    def __init__(self, chat: ChatModel, *, max_tokens: int = DECISION_TOKENS) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.usage = Usage()

    def rewrite(self, question: str, grade: Grade, tried: list[str]) -> str | None:
        """Only the question, the gap and the tried queries reach the model: no history, no
        retrieved text. None when the model has nothing new (null, empty, or a tried query),
        and without a call when the grader could not judge (there is no gap to search for)."""
        if grade.ungraded:
            return None
        user = prompts.rewriter_user(question, grade.missing, tried, grade.next_query)
        reply, ok = ask_json(self.chat, prompts.REWRITER_SYSTEM, user, RewriteReply,
                             fallback=None, usage=self.usage, max_tokens=self.max_tokens)
        if not ok or not isinstance(reply, RewriteReply) or reply.query is None:
            return None
        query = " ".join(reply.query.split())
        if not query or _norm(query) in {_norm(t) for t in tried}:
            return None
        return query


_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


def salvage_answer(text: str) -> str:
    """The answer in an unreadable reply: the `"answer"` string of broken JSON (e.g. cut off at
    max_tokens) when there is one, else the reply itself without code fences."""
    match = _ANSWER_FIELD.search(text or "")
    if match:
        try:
            return str(json.loads(f'"{match.group(1)}"', strict=False)).strip()
        except json.JSONDecodeError:
            return match.group(1).replace('\\"', '"').replace("\\n", "\n").strip()
    return re.sub(r"```[a-zA-Z0-9_-]*", "", text or "").strip()


class LLMAnswerer:
    def __init__(self, chat: ChatModel, *, words: Vocabulary, max_evidence_chars: int = 2000,
                 max_tokens: int = ANSWER_TOKENS) -> None:
        """`words`: the knowledge base's language, whose `decline.no_evidence` is the answer
        when nothing was confirmed (no model call)."""
        self.chat = chat
        self.no_evidence = words.text("decline.no_evidence")
        self.max_evidence_chars = max_evidence_chars
        self.max_tokens = max_tokens
        self.usage = Usage()

    def answer(self, question: str, sub_questions: list[str], evidence: list[Evidence],
               context: str = "") -> Draft:
        return written(self.write(question, sub_questions, evidence, context))

    def write(self, question: str, sub_questions: list[str], evidence: list[Evidence],
              context: str = "") -> Writing:
        """The answer streamed as the model writes its `answer` field (jsonparse.stream_json)."""
        # only what the grader kept may support an answer; unconfirmed nearest passages are
        # listed beside it by the engine, not handed to the model as sources
        evidence = [e for e in evidence if e.confirmed]
        if not evidence:
            return Draft(text=self.no_evidence, missing=list(sub_questions) or [question],
                         unanswerable=True)
        user = prompts.answerer_user(question, sub_questions, evidence, self.max_evidence_chars,
                                     context)

        def from_raw(text: str) -> Draft:
            return Draft(text=salvage_answer(text))

        reply, ok = yield from stream_json(
            self.chat, prompts.ANSWERER_SYSTEM, user, AnswerReply, field="answer",
            fallback=from_raw, usage=self.usage, max_tokens=self.max_tokens, purpose="answer")
        if not ok or not isinstance(reply, AnswerReply):
            return reply if isinstance(reply, Draft) else Draft(text="")
        return Draft(text=reply.answer.strip(), missing=_clean(reply.missing),
                     unanswerable=reply.unanswerable, conflicts=_clean(reply.conflicts))
