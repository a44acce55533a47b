"""The run store beside an open Store, for agent/engine.py until it borrows `kb.backend.runs`
(issue 17's agent half); everything else opens storage with storage.backend.open_backend."""

from __future__ import annotations

from ragloop.storage.backend import open_backend
from ragloop.storage.protocols import RunStore, Store


def open_run_store(store: Store) -> RunStore:
    """A new run store at `store`'s location; the caller closes it."""
    return open_backend(store.location).runs
