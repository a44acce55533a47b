"""The nouns of a conversation: its turns, how a turn's question was made standalone before
searching, and a clarifying question a run may end with (issue 30)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ragloop.core import script


class TurnKind(StrEnum):
    STANDALONE = "standalone"  # the question stands on its own (or there is no history)
    FOLLOW_UP = "follow_up"  # it refers back: rewritten with an earlier turn's subject
    NEW_TOPIC = "new_topic"  # it stands on its own and leaves the earlier subject: history dropped


@dataclass(frozen=True)
class Turn:
    """One finished turn, as a later turn reads it: facts, not text to parse again. What was
    typed, what its first search searched (the standalone query), the answer, and the
    documents it cited, in order (the conversation's documents a follow-up is held
    against: offline/follow_up.py)."""

    question: str
    standalone: str = ""
    answer: str = ""
    cited_docs: tuple[str, ...] = ()
    run_id: str | None = None
    # the run's status: "needs_input" when it ended with a clarifying question (`answer`),
    # which the next turn answers with one of its options (`narrowed`)
    status: str = ""
    # the sections it cited, as (doc_id, section), in order, and the evidence numbers its
    # answer cited ([n]): the run's own facts, never re-read from the answer's text
    cited_sections: tuple[tuple[str, str], ...] = ()
    cited_evidence: tuple[int, ...] = ()

    @property
    def searched(self) -> str:
        return self.standalone or self.question

    @property
    def asked_back(self) -> bool:
        return self.status == "needs_input"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cited_docs"] = list(self.cited_docs)
        d["cited_sections"] = [list(x) for x in self.cited_sections]
        d["cited_evidence"] = list(self.cited_evidence)
        return d


@dataclass(frozen=True)
class Condensed:
    """A question made standalone: what to search, whether it followed up, and why."""

    question: str
    kind: TurnKind
    reason: str
    subject: str = ""  # what was carried over from the history ("" when nothing was)
    refers_to: int | None = None  # index in the history of the turn it refers back to
    # a model's decision was unreadable and the offline rule's stands in (the reason says so
    # in words; this is what a benchmark or a check counts)
    fell_back: bool = False
    # several queries searched and fused (offline/follow_up.py), `question` the first shown;
    # () when `question` alone is searched. `prior`: documents whose chunks the fusion
    # ranks as one more list (the previous turn's cited documents, best first)
    queries: tuple[str, ...] = ()
    prior: tuple[str, ...] = ()

    @property
    def searches(self) -> tuple[str, ...]:
        return self.queries or (self.question,)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["queries"], d["prior"] = list(self.queries), list(self.prior)
        return d


@dataclass(frozen=True)
class Clarification:
    """A question back to the user when a question has several readings the knowledge base
    answers differently: 2–5 options, each with the documents that answer that reading."""

    question: str
    options: tuple[str, ...]
    reason: str
    evidence: dict[str, tuple[str, ...]] = field(default_factory=dict)  # option -> doc ids

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "options": list(self.options),
                "reason": self.reason,
                "evidence": {k: list(v) for k, v in self.evidence.items()}}


def numbered(options: Sequence[str]) -> list[str]:
    """A clarification's options as the user reads and answers them: "1. S200", "2. T100"
    (the CLI, the MCP `ask` tool and the OpenAI endpoint show them so)."""
    return [f"{i}. {option}" for i, option in enumerate(options, 1)]


# what ends a question, in the languages the offline rules read (stripped before a choice is added)
_QUESTION_END = script.SENTENCE_ENDS + " "


def narrowed(pending: str, choice: str) -> str:
    """The question a turn that asked back (`pending`) becomes once the user chose a reading:
    the choice added as the question's subject ("What is the battery life (S200)?"). A choice
    the question already holds leaves it as it is. Shared by the offline follow-up and a
    model's condense step, so both search the same narrowed question."""
    choice = " ".join(choice.split()).strip(_QUESTION_END)
    question = " ".join(pending.split())
    if not choice or choice.lower() in question.lower():
        return question
    end = question[-1] if question and question[-1] in "?？" else "?"
    return f"{question.rstrip(_QUESTION_END)} ({choice}){end}"


@dataclass
class Conversation:
    """A sequence of turns; each turn is a run of the run store (`Turn.run_id`)."""

    id: str
    kb: str = ""
    title: str = ""
    turns: list[Turn] = field(default_factory=list)

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)
