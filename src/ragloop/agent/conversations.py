"""Conversations over the engine: a conversation's stored turns read back as the history of
its next turn, and the handle `Engine.conversation()` returns.

A turn's history holds what each earlier turn searched (its standalone question), its answer
and the titles of the sections it cited (a follow-up's subject is looked for in all three), and
its status (a turn that ended needs_input asked back: the next turn may be the user's choice).
Never its evidence: a later turn searches and grades again, so nothing an earlier turn found
is cited unless this turn's grader kept it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ragloop.agent.run import RunResult
from ragloop.core.conversation import Turn
from ragloop.core.errors import NotFoundError
from ragloop.core.types import RunStatus
from ragloop.storage.protocols import RunRecord, RunStore, Store

CITED_TITLES = 2  # the sections of a turn a later turn reads as its subject
# a stored turn that did not end (still running, or failed) gives a later turn nothing to read
UNFINISHED = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.FAILED)


NEW = "new"  # the conversation_id that starts a conversation (HTTP, MCP, the CLI)
# an id as the engine makes them, or a client's own (letters, digits, - and _)
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


def new_conversation_id() -> str:
    return uuid.uuid4().hex[:12]


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


def _titles(citations: Sequence[dict[str, Any]], store: Store | None) -> tuple[str, ...]:
    out: list[str] = []
    for c in citations:
        if len(out) >= CITED_TITLES:
            break
        info = store.section(c["doc_id"], c.get("section", "")) if store is not None else None
        title = " › ".join(dict.fromkeys((*info.title_path, info.title))) if info else c["doc_id"]
        if title and title not in out:
            out.append(title)
    return tuple(out)


def turns_of(records: Sequence[RunRecord], store: Store | None = None) -> list[Turn]:
    """The finished turns of a stored conversation as history, oldest first; `store` gives
    the cited sections' titles (their doc ids without it)."""
    return [Turn(question=r["question"], standalone=r["standalone"] or "",
                 answer=r["answer"] or "", cited=_titles(r["citations"], store),
                 run_id=r["run_id"], status=str(r["status"]))
            for r in records if r["status"] not in UNFINISHED]


class EngineConversation:
    """One conversation of an engine: `.ask(q)` asks its next turn (keyword arguments as
    `Engine.ask`), `.turns` are its turns so far (each a stored run)."""

    def __init__(self, conversation_id: str, ask: Callable[..., RunResult], runs: RunStore,
                 store: Store | None = None) -> None:
        self.id = conversation_id
        self._ask = ask
        self._runs = runs
        self._store = store

    @property
    def turns(self) -> list[Turn]:
        return turns_of(self._runs.conversation(self.id), self._store)

    def ask(self, question: str, **options: Any) -> RunResult:
        return self._ask(question, conversation_id=self.id, **options)

    def __repr__(self) -> str:
        return f"EngineConversation(id={self.id!r})"
