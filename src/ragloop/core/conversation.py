"""The nouns of a conversation: its turns, how a turn's question was made standalone before
searching, and a clarifying question a run may end with (issue 30)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class TurnKind(StrEnum):
    STANDALONE = "standalone"  # the question stands on its own (or there is no history)
    FOLLOW_UP = "follow_up"  # it refers back: rewritten with an earlier turn's subject
    NEW_TOPIC = "new_topic"  # it stands on its own and leaves the earlier subject: history dropped


@dataclass(frozen=True)
class Turn:
    """One finished turn, as a later turn reads it: what was typed, what was searched (the
    standalone question), the answer, and the titles of what it cited ("S200 … Datasheet ›
    Battery"): a follow-up's subject is looked for in all of them."""

    question: str
    standalone: str = ""
    answer: str = ""
    cited: tuple[str, ...] = ()
    run_id: str | None = None

    @property
    def searched(self) -> str:
        return self.standalone or self.question

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cited"] = list(self.cited)
        return d


@dataclass(frozen=True)
class Condensed:
    """A question made standalone: what to search, whether it followed up, and why."""

    question: str
    kind: TurnKind
    reason: str
    subject: str = ""  # what was carried over from the history ("" when nothing was)
    refers_to: int | None = None  # index in the history of the turn it refers back to

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


@dataclass
class Conversation:
    """A sequence of turns; each turn is a run of the run store (`Turn.run_id`)."""

    id: str
    kb: str = ""
    title: str = ""
    turns: list[Turn] = field(default_factory=list)

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)
