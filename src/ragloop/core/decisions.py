"""The decision protocols of the agent: condense, plan, grade, rewrite, answer, route, follow up.

Condense, plan, grade, rewrite and answer each have an LLM implementation
(agent/llm_decisions.py and agent/llm_condense.py, JSON calls) and an offline one that needs no
generative model (offline/, built through offline/factory.py); routing and following up are
offline rules only.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ragloop.core.conversation import Clarification, Condensed, Turn
from ragloop.core.events import AnswerDeltaEvent
from ragloop.core.types import Hit, Usage


@dataclass
class Plan:
    need_search: bool
    sub_questions: list[str]  # 1..3; the question itself when it has one part
    reply: str | None = None  # the natural reply when no search is needed (greeting, small talk)
    reason: str = ""


@dataclass
class Grade:
    """The grader's verdict on one search result for one (sub-)question."""

    kept: list[Hit]  # relevant hits, best first, each with verdict="relevant" and grade_score
    discarded: list[Hit]  # the others, verdict="irrelevant"
    enough: bool  # the kept hits answer the question
    missing: str = ""  # what is still unsupported, in words (the gap)
    next_query: str | None = None  # a search built from the gap, when not enough
    # the grader could not judge (a model reply that stayed unreadable): every hit is kept and
    # there is no gap to search for
    ungraded: bool = False


@dataclass
class Evidence:
    """One numbered piece of evidence the answer may cite as [n]."""

    n: int
    doc_id: str
    section: str
    section_title: str
    text: str
    step: int
    sub_question: int = 0  # index into Plan.sub_questions
    # False for a nearest passage the grader did not judge relevant (see the pipeline
    # driver's `_add_nearest`): shown as the closest the knowledge base has, never as support
    confirmed: bool = True
    kb: str = ""  # the knowledge base it came from when several are served


@dataclass
class Draft:
    """An answer as written by an answerer, before citations are checked."""

    text: str  # cites evidence as [n]
    missing: list[str] = field(default_factory=list)  # parts the knowledge base lacks
    unanswerable: bool = False  # nothing in the evidence answers the question
    conflicts: list[str] = field(default_factory=list)  # disagreements between sources, in words
    # (evidence number, sentence) of the nearest passages nothing confirmed: listed beside the
    # answer as "closest passages (not confirmed)", never cited
    closest: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Route:
    route: Literal["single", "agent", "out_of_scope"]
    reason: str


class Condenser(Protocol):
    usage: Usage  # what its model calls cost so far (always zero offline)

    def condense(self, history: Sequence[Turn], question: str) -> Condensed:
        """`question` made standalone from `history` (oldest turn first): what to search,
        whether it follows up or starts a new topic (the history is then dropped), and why.
        Called only with a history: a first question is searched as typed."""
        ...


class Planner(Protocol):
    usage: Usage  # what its model calls cost so far (always zero offline)

    def plan(self, question: str) -> Plan: ...


class Grader(Protocol):
    usage: Usage  # what its model calls cost so far (always zero offline)

    def grade(self, question: str, hits: list[Hit]) -> Grade: ...


class Rewriter(Protocol):
    usage: Usage  # what its model calls cost so far (always zero offline)

    def rewrite(self, question: str, grade: Grade, tried: list[str]) -> str | None:
        """The next query for `question`, built from `grade.missing` and `grade.kept` only
        (never the whole history: rewrites drift otherwise); None when nothing new to try.
        `tried` lists queries already run, so a rewrite never repeats one."""
        ...


class Answerer(Protocol):
    """Writes the answer to `question` (what the user typed) from the evidence. `context`: a
    follow-up's search query when it is not the question itself (the typed follow-up with
    what the previous turn searched: offline/follow_up.py): it says which evidence is about
    the conversation's subject, while the question's own words say what is asked."""

    usage: Usage  # what its model calls cost so far (always zero offline)

    def answer(self, question: str, sub_questions: list[str], evidence: list[Evidence],
               context: str = "") -> Draft:
        ...

    def write(self, question: str, sub_questions: list[str], evidence: list[Evidence],
              context: str = "") -> Generator[AnswerDeltaEvent, None, Draft]:
        """`answer`, streamed (core/answer_stream.py `Writing`): the answer's pieces as they
        are written, then the Draft."""
        ...


class Router(Protocol):
    def route(self, question: str) -> Route: ...

    def out_of_scope(self, question: str) -> str | None:
        """Why the question is plainly outside the knowledge base, or None."""
        ...


@dataclass(frozen=True)
class SourceChoice:
    """Which knowledge base(s) a part of a question is searched in, and why."""

    knowledge_bases: tuple[str, ...]
    reason: str


class SourceChooser(Protocol):
    """Picks the knowledge base(s) to search for a query when several are served."""

    def choose(self, query: str) -> SourceChoice: ...


class FollowUps(Protocol):
    """Which sections a kept chunk points to (its own section when the chunk is cut off, a
    one-passage document it names), for the pipeline driver to read next."""

    def __call__(self, hit: Hit, question: str | None = None) -> list[tuple[str, str]]:
        """(doc_id, section) pairs; `question` may order them by what it asks."""
        ...

    def named(self, text: str) -> list[tuple[str, str]]:
        """The passage of each one-passage document a question names by title."""
        ...


class Clarifier(Protocol):
    """Whether a question's graded evidence answers several readings the question does not
    choose between (several products, quarters, releases, and the question names none): the
    run then ends with status needs_input and a question back instead of guessing (issue 30).
    Offline: a rule over the kept passages' documents (offline/clarify.py); with a model the
    tools driver offers the model an `ask_user` tool instead."""

    def clarify(self, question: str, kept: list[Hit]) -> Clarification | None:
        """A clarifying question with 2–5 options, or None when the question has one reading
        here."""
        ...
