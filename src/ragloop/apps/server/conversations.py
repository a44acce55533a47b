"""Conversations over HTTP: `GET /conversations` (the newest first) and
`GET /conversations/{id}` (its turns), and how a run request's `conversation_id` is read
("new" starts a conversation; an id must name a stored one: a mistyped id is a 404, not a
silent fresh start that loses the history)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Request

from ragloop.agent.conversations import new_conversation_id
from ragloop.core.errors import NotFoundError
from ragloop.storage.protocols import RunRecord, RunStore

NEW = "new"  # the conversation_id that starts a conversation
# an id as the engine makes them, or a client's own (letters, digits, - and _)
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
TURN_FIELDS = ("run_id", "turn", "question", "standalone", "answer", "status", "citations",
               "created_at")


def resolve_conversation(runs: RunStore, conversation_id: str | None) -> str | None:
    """The conversation a run request continues: None for a question on its own, a new id
    for "new", else the stored conversation's id (NotFoundError when there is none)."""
    if conversation_id is None:
        return None
    if conversation_id == NEW:
        return new_conversation_id()
    if not runs.conversation(conversation_id):
        raise NotFoundError(f"No conversation {conversation_id!r}; GET /conversations lists"
                            f" them, and conversation_id \"{NEW}\" starts one.")
    return conversation_id


def _turn(run: RunRecord) -> dict[str, Any]:
    return {k: run[k] for k in TURN_FIELDS}  # type: ignore[literal-required]


def add_conversation_routes(app: FastAPI) -> None:
    @app.get("/conversations", tags=["conversations"])
    def list_conversations(request: Request,
                           limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
        """Conversations, the most recently continued first: id, first question, turns."""
        return {"conversations": request.app.state.ragloop.runs.conversations(limit)}

    @app.get("/conversations/{conversation_id}", tags=["conversations"])
    def get_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
        """The turns of one conversation, first first: each turn's question as typed, the
        standalone question that was searched, the answer, its run and status."""
        turns = request.app.state.ragloop.runs.conversation(conversation_id)
        if not turns:
            raise NotFoundError(f"No conversation {conversation_id!r}; GET /conversations"
                                " lists them.")
        return {"conversation_id": conversation_id, "turns": [_turn(t) for t in turns]}
