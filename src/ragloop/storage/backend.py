"""open_backend(location): the storage of one knowledge base, from its location.

A folder path means SQLite (the default): the record, its indexes and the runs in one folder.
A `postgresql://` (or `postgres://`) URL means Postgres: documents, runs and the shared run
queue in one database. The Postgres modules are imported only when a URL asks for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragloop.core.errors import UserError
from ragloop.storage.location import is_postgres_url
from ragloop.storage.protocols import Backend, RunQueue, RunStore, Store

if TYPE_CHECKING:
    from ragloop.storage.postgres.runs import PgRunStore


def open_backend(location: str | Path, create: bool = True) -> Backend:
    """The backend at `location`. `create=False` (every command but ingest): a folder that
    holds no knowledge base is a UserError, and nothing is created."""
    if is_postgres_url(location):
        return PostgresBackend(str(location))
    return SqliteBackend(Path(location), create=create)


class SqliteBackend:
    """A folder: ragloop.db (the record and the runs) beside its tantivy and hnswlib indexes.
    Runs execute in the process that asks (no shared queue)."""

    def __init__(self, folder: Path, create: bool = True) -> None:
        from ragloop.storage.sqlite.store import DB_FILE

        self.folder = folder
        self.location = str(folder)
        self.db_path = folder / DB_FILE
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder} is a file, not a knowledge-base folder.")
        if not create:
            self._require_db()
        self._store: Store | None = None
        self._runs: RunStore | None = None

    def _require_db(self) -> None:
        if not self.db_path.exists():
            raise UserError(f"No knowledge base at {self.folder}; run"
                            f" `ragloop ingest PATH --kb {self.folder}` first.")

    @property
    def store(self) -> Store:
        if self._store is None:
            from ragloop.storage.sqlite.store import SqliteStore

            self._store = SqliteStore(self.folder)
        return self._store

    @property
    def runs(self) -> RunStore:
        """The runs in the knowledge base's own file; it must exist (reading runs creates
        nothing)."""
        if self._runs is None:
            from ragloop.storage.sqlite.runs import SqliteRunStore

            self._require_db()
            self._runs = SqliteRunStore(self.db_path)
        return self._runs

    @property
    def queue(self) -> RunQueue | None:
        return None

    def close(self) -> None:
        for part in (self._runs, self._store):
            if part is not None:
                part.close()
        self._runs = self._store = None


class PostgresBackend:
    """A database: documents, runs and the run queue (the runs table itself)."""

    def __init__(self, url: str) -> None:
        self.location = url
        self._store: Store | None = None
        self._runs: PgRunStore | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from ragloop.storage.postgres.store import PostgresStore

            self._store = PostgresStore(self.location)
        return self._store

    @property
    def runs(self) -> PgRunStore:
        if self._runs is None:
            from ragloop.storage.postgres.runs import PgRunStore

            self._runs = PgRunStore(self.location)
        return self._runs

    @property
    def queue(self) -> RunQueue:
        return self.runs

    def close(self) -> None:
        if self._runs is not None:
            self._runs.close()
        if self._store is not None:
            self._store.close()
        self._runs = self._store = None
