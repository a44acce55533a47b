"""Conversations over the engine: a conversation's stored turns read back as the history of
its next turn, and the handle `Engine.conversation()` returns.

A turn's history holds facts of each earlier turn, read from its stored run: what it searched
(its standalone query), its answer, the documents and sections it cited and the evidence
numbers its answer cited, and its status (a turn that ended
needs_input asked back: the next turn may be the user's choice). Never its evidence as
evidence: a later turn searches and grades again, so nothing an earlier turn found is cited
unless this turn's grader kept it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ragloop.agent.run import RunResult
from ragloop.core.conversation import Turn
from ragloop.core.errors import NotFoundError
from ragloop.core.ids import new_id
from ragloop.core.types import RunStatus
from ragloop.storage.protocols import RunRecord, RunStore

# a stored turn that did not end (still running, or failed) gives a later turn nothing to read
UNFINISHED = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.FAILED)


NEW = "new"  # the conversation_id that starts a conversation (HTTP, MCP, the CLI)
# an id as the engine makes them, or a client's own (letters, digits, - and _)
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


def new_conversation_id() -> str:
    return new_id()


def resolve_conversation(conversation_id: str | None, known: Callable[[str], bool],
                         listed_by: str = "") -> str | None:
    """The conversation a run request (HTTP's, MCP's `ask`) continues: None for a question
    on its own, a new id for "new", else the id when `known` (NotFoundError when not: a
    mistyped id is not a silent fresh start that loses the history). `listed_by`: what
    lists the conversations there are, for the error."""
    if conversation_id is None:
        return None
    if conversation_id == NEW:
        return new_conversation_id()
    if not known(conversation_id):
        listing = f"; {listed_by} lists them, and" if listed_by else ";"
        raise NotFoundError(f"No conversation {conversation_id!r}{listing} conversation_id"
                            f" \"{NEW}\" starts one.")
    return conversation_id


def cited_documents(citations: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The documents a run cited, in the order it first cited them."""
    return tuple(dict.fromkeys(str(c["doc_id"]) for c in citations if c.get("doc_id")))


def turn_of(r: RunRecord) -> Turn:
    """A stored run as a turn of history."""
    cites = [c for c in r["citations"] if c.get("doc_id")]
    return Turn(question=r["question"], standalone=r["standalone"] or "",
                answer=r["answer"] or "", cited_docs=cited_documents(cites),
                run_id=r["run_id"], status=str(r["status"]),
                cited_sections=tuple(dict.fromkeys((str(c["doc_id"]), str(c.get("section", "")))
                                                   for c in cites)),
                cited_evidence=tuple(dict.fromkeys(int(c["n"]) for c in cites if "n" in c)))


def turns_of(records: Sequence[RunRecord]) -> list[Turn]:
    """The finished turns of a stored conversation as history, oldest first (the turns'
    facts are all in the records)."""
    return [turn_of(r) for r in records if r["status"] not in UNFINISHED]


class EngineConversation:
    """One conversation of an engine: `.ask(q)` asks its next turn (keyword arguments as
    `Engine.ask`), `.turns` are its turns so far (each a stored run)."""

    def __init__(self, conversation_id: str, ask: Callable[..., RunResult],
                 runs: RunStore) -> None:
        self.id = conversation_id
        self._ask = ask
        self._runs = runs

    @property
    def turns(self) -> list[Turn]:
        return turns_of(self._runs.conversation(self.id))

    def ask(self, question: str, **options: Any) -> RunResult:
        return self._ask(question, conversation_id=self.id, **options)

    def __repr__(self) -> str:
        return f"EngineConversation(id={self.id!r})"
