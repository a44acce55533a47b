"""The runs as one principal sees them (issue 43.4): a run and a conversation belong to their
asker, and another user's read as missing, never as "forbidden".

A principal's view records its user as the owner of every run it starts, and reads with that
owner, so a list, a run, its events, a conversation's turns, the run an answer came from
(/v1's history) and the metrics hold only the asker's runs. An admin principal (the single
`RAGLOOP_API_KEY`, the keyless loopback server, a user made with `--admin`) reads every run,
as before owners; so does no principal at all (the CLI and Python without `--as`). A run with
no owner (asked with no principal or as the built-in admin, or recorded before owners
existed) is therefore an admin's alone.
"""

from __future__ import annotations

from typing import Any

from ragloop.core.access import ADMIN, Principal
from ragloop.core.events import Event
from ragloop.storage.protocols import (
    DASHBOARD_SOURCES,
    ConversationSummary,
    Metrics,
    RunRecord,
    RunStore,
)


def owner_of(principal: Principal | None) -> str | None:
    """The owner recorded on a run `principal` asks: its user (None for none, or the
    built-in admin, whose runs every admin reads anyway)."""
    return None if principal is None or principal == ADMIN else principal.user


def reads_as(principal: Principal | None) -> str | None:
    """The owner filter of `principal`'s reads: None (every run) for an admin or nobody."""
    return None if principal is None or principal.admin else principal.user


def may_see(principal: Principal | None, owner: str | None) -> bool:
    """Whether `principal` reads a run owned by `owner` (the rule of `reads_as`, in Python:
    for the runs a server holds before they are stored)."""
    mine = reads_as(principal)
    return mine is None or mine == owner


def runs_for(runs: RunStore, principal: Principal | None) -> RunStore:
    """`runs` as `principal` sees them (itself when there is no principal)."""
    return runs if principal is None or principal == ADMIN else OwnedRuns(runs, principal)


class OwnedRuns(RunStore):
    """`runs`, written as `principal`'s and read as `principal` may (the module docstring)."""

    def __init__(self, runs: RunStore, principal: Principal) -> None:
        self.inner = runs
        self.principal = principal
        self.owner = owner_of(principal)
        self.reads = reads_as(principal)

    def start(self, question: str, *, driver: str = "", model: str = "", max_steps: int = 0,
              run_id: str | None = None, source: str = "api",
              conversation_id: str | None = None, owner: str | None = None) -> str:
        return self.inner.start(question, driver=driver, model=model, max_steps=max_steps,
                                run_id=run_id, source=source, conversation_id=conversation_id,
                                owner=self.owner)

    def add_event(self, run_id: str, event: Event) -> None:
        self.inner.add_event(run_id, event)

    def finish(self, run_id: str, result: dict[str, Any]) -> None:
        self.inner.finish(run_id, result)

    # the reads take the view's owner, whatever the caller passes: a view never widens
    def get(self, run_id: str, owner: str | None = None) -> RunRecord | None:
        return self.inner.get(run_id, self.reads)

    def events(self, run_id: str, after_seq: int = -1) -> list[Event]:
        if self.reads is not None and self.inner.get(run_id, self.reads) is None:
            return []
        return self.inner.events(run_id, after_seq)

    def list(self, limit: int = 20, source: str | None = None,
             owner: str | None = None) -> list[RunRecord]:
        return self.inner.list(limit, source, self.reads)

    def metrics(self, source: str | None = DASHBOARD_SOURCES,
                owner: str | None = None) -> Metrics:
        return self.inner.metrics(source, self.reads)

    def conversation(self, conversation_id: str, owner: str | None = None) -> list[RunRecord]:
        return self.inner.conversation(conversation_id, self.reads)

    def answered(self, answer: str, owner: str | None = None) -> RunRecord | None:
        return self.inner.answered(answer, self.reads)

    def conversations(self, limit: int = 20,
                      owner: str | None = None) -> list[ConversationSummary]:
        return self.inner.conversations(limit, self.reads)

    def mark_interrupted(self) -> list[str]:
        return self.inner.mark_interrupted()

    def import_runs(self, runs: Any) -> tuple[list[str], int]:
        return self.inner.import_runs(runs)

    def close(self) -> None:
        """The store is its knowledge base's: a view closes nothing."""
