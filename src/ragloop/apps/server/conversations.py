"""Conversations over HTTP: `GET /conversations` (the newest first) and
`GET /conversations/{id}` (its turns), and how a run request's `conversation_id` is read
("new" starts a conversation; an id must name a stored one: a mistyped id is a 404, not a
silent fresh start that loses the history)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Request

from ragloop.agent.conversations import resolve_conversation
from ragloop.apps.jobs import JobRunner
from ragloop.apps.server.access_guard import principal_of
from ragloop.core.access import Principal
from ragloop.core.errors import NotFoundError
from ragloop.storage.owned import runs_for
from ragloop.storage.protocols import RunRecord, RunStore

TURN_FIELDS = ("run_id", "turn", "question", "standalone", "answer", "status", "citations",
               "created_at")


def resolve_http_conversation(jobs: JobRunner, conversation_id: str | None,
                              principal: Principal | None = None) -> str | None:
    """A run request's `conversation_id` (agent/conversations.py's resolve_conversation):
    known when stored or when its first turn is still queued (`JobRunner.has_conversation`),
    and `principal`'s (another user's conversation is "not found", as a mistyped id), the
    error naming the route that lists the conversations."""
    return resolve_conversation(conversation_id,
                                lambda cid: jobs.has_conversation(cid, principal),
                                "GET /conversations")


def _runs(request: Request) -> RunStore:
    """The runs the request's principal may read (its own; an admin's: all)."""
    return runs_for(request.app.state.ragloop.runs, principal_of(request))


def _turn(run: RunRecord) -> dict[str, Any]:
    return {k: run[k] for k in TURN_FIELDS}  # type: ignore[literal-required]


def add_conversation_routes(app: FastAPI) -> None:
    @app.get("/conversations", tags=["conversations"])
    def list_conversations(request: Request,
                           limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
        """Conversations, the most recently continued first: id, first question, turns."""
        return {"conversations": _runs(request).conversations(limit)}

    @app.get("/conversations/{conversation_id}", tags=["conversations"])
    def get_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
        """The turns of one conversation, first first: each turn's question as typed, the
        standalone question that was searched, the answer, its run and status."""
        turns = _runs(request).conversation(conversation_id)
        if not turns:
            raise NotFoundError(f"No conversation {conversation_id!r}; GET /conversations"
                                " lists them.")
        return {"conversation_id": conversation_id, "turns": [_turn(t) for t in turns]}
