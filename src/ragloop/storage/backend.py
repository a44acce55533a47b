"""open_backend(location): the storage of one knowledge base, from its location.

A folder path means SQLite (the default): the record, its indexes and the runs in one folder.
A `postgresql://` (or `postgres://`) URL means Postgres: documents, runs and the shared run
queue in one database. The Postgres modules are imported only when a URL asks for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragloop.core.errors import UserError
from ragloop.core.extras import POSTGRES_MODULES, require_extra
from ragloop.storage.location import is_postgres_url
from ragloop.storage.protocols import Backend, RunQueue, RunStore, Store

if TYPE_CHECKING:
    from ragloop.storage.postgres.runs import PgRunStore
    from ragloop.storage.principals import PrincipalStore


def open_backend(location: str | Path, create: bool = True) -> Backend:
    """The backend at `location`. `create=False` (every command but ingest): a folder that
    or database that holds no knowledge base is a UserError, and nothing is created."""
    if is_postgres_url(location):
        require_extra("postgres", POSTGRES_MODULES, "A postgresql:// knowledge base")
        return PostgresBackend(str(location), create=create)
    return SqliteBackend(Path(location), create=create)


class _Backend:
    """Opens the store and the run store on first use, and closes what it opened."""

    location: str

    def __init__(self) -> None:
        self._store: Store | None = None
        self._runs: RunStore | None = None
        self._principals: PrincipalStore | None = None

    def _open_store(self) -> Store:
        raise NotImplementedError

    def _open_runs(self) -> RunStore:
        raise NotImplementedError

    def _open_principals(self) -> PrincipalStore:
        raise NotImplementedError

    @property
    def principals(self) -> PrincipalStore:
        """The users, groups and API keys kept with this knowledge base (issue 43)."""
        if self._principals is None:
            self._principals = self._open_principals()
        return self._principals

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._open_store()
        return self._store

    @property
    def runs(self) -> RunStore:
        if self._runs is None:
            self._runs = self._open_runs()
        return self._runs

    def close(self) -> None:
        for part in (self._principals, self._runs, self._store):
            if part is not None:
                part.close()
        self._runs = self._store = self._principals = None


class SqliteBackend(_Backend):
    """A folder: ragloop.db (the record and the runs) beside its tantivy and hnswlib indexes.
    Runs execute in the process that asks (no shared queue)."""

    def __init__(self, folder: Path, create: bool = True) -> None:
        from ragloop.storage.sqlite.store import DB_FILE

        super().__init__()
        self.folder = folder
        self.location = str(folder)
        self.db_path = folder / DB_FILE
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder} is a file, not a knowledge-base folder.")
        if not create:
            self._require_db()

    def _require_db(self) -> None:
        if not self.db_path.exists():
            raise UserError(
                f"No knowledge base at {self.folder}; run"
                f" `ragloop ingest PATH --kb {self.folder}` first."
            )

    def _open_store(self) -> Store:
        from ragloop.storage.sqlite.store import SqliteStore

        return SqliteStore(self.folder)

    def _open_runs(self) -> RunStore:
        """The runs in the knowledge base's own file, which must exist (reading runs creates
        nothing)."""
        from ragloop.storage.sqlite.runs import SqliteRunStore

        self._require_db()
        return SqliteRunStore(self.db_path)

    def _open_principals(self) -> PrincipalStore:
        """In the knowledge base's own file, on a connection of their own (closed with it)."""
        import sqlite3
        import threading

        from ragloop.storage.principals import SCHEMA, PrincipalStore, sqlite_connection

        self._require_db()
        db = sqlite3.connect(str(self.db_path), check_same_thread=False, isolation_level=None,
                             timeout=30)
        db.execute("PRAGMA foreign_keys=ON")
        for statement in SCHEMA:
            db.execute(statement.replace("DOUBLE PRECISION", "REAL"))
        store = PrincipalStore(sqlite_connection(db, threading.RLock()))
        store.close = db.close  # type: ignore[method-assign]
        return store

    @property
    def queue(self) -> RunQueue | None:
        return None


class PostgresBackend(_Backend):
    """A database: documents, runs and the run queue (the runs table itself)."""

    def __init__(self, url: str, create: bool = True) -> None:
        super().__init__()
        self.location = url
        self._pg_runs: PgRunStore | None = None
        if not create:
            self._require_schema()

    def _require_schema(self) -> None:
        """A database without ragloop's tables is no knowledge base: opening it must not
        create them (a mistyped database name on a server where the user may create one)."""
        from ragloop.storage.postgres.schema import current_version
        from ragloop.storage.postgres.store import connect, redact

        with connect(self.location) as conn:
            if current_version(conn) == 0:
                raise UserError(f"No knowledge base in {redact(self.location)}; run"
                                f" `ragloop ingest PATH --kb {redact(self.location)}` first.")

    def _open_store(self) -> Store:
        from ragloop.storage.postgres.store import PostgresStore

        return PostgresStore(self.location)

    def _pg(self) -> PgRunStore:
        if self._pg_runs is None:
            from ragloop.storage.postgres.runs import PgRunStore

            self._pg_runs = PgRunStore(self.location)
        return self._pg_runs

    def _open_runs(self) -> RunStore:
        return self._pg()

    def _open_principals(self) -> PrincipalStore:
        """On the run store's pool (autocommit connections); its tables are migration 7."""
        from ragloop.storage.principals import PrincipalStore

        return PrincipalStore(self._pg().pool.connection, mark="%s")

    @property
    def queue(self) -> RunQueue:
        """The same PgRunStore as `runs`: its table is the queue."""
        return self._pg()

    def close(self) -> None:
        self._runs = None  # the same PgRunStore, closed once below
        self._principals = None  # borrows its pool
        super().close()
        if self._pg_runs is not None:
            self._pg_runs.close()
            self._pg_runs = None
