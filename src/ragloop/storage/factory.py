"""Pick the Store (and the RunStore beside it) from a knowledge-base location.

A folder path means SQLite (the default); a `postgresql://` (or `postgres://`) URL means
Postgres. The Postgres modules are imported only when a URL asks for them.
"""

from __future__ import annotations

from pathlib import Path

from ragloop.storage.location import is_postgres_url
from ragloop.storage.protocols import RunStore, Store


def open_store(location: str | Path, create: bool = True) -> Store:
    """`create=False` (search, ask, docs): a folder that holds no knowledge base is an error."""
    if is_postgres_url(location):
        from ragloop.storage.postgres.store import PostgresStore

        return PostgresStore(str(location))
    from ragloop.storage.sqlite.store import SqliteStore

    return SqliteStore(Path(location), create=create)


def open_run_store(store: Store) -> RunStore:
    """The run store that lives beside `store`: the same SQLite file, or the same database."""
    return open_run_store_at(store.location)


def open_run_store_at(location: str | Path) -> RunStore:
    """The run store of the knowledge base at `location` (without opening the store)."""
    if is_postgres_url(location):
        from ragloop.storage.postgres.runs import PgRunStore

        return PgRunStore(str(location))
    from ragloop.core.errors import UserError
    from ragloop.storage.sqlite.runs import SqliteRunStore
    from ragloop.storage.sqlite.store import DB_FILE

    folder = Path(location)
    if not (folder / DB_FILE).exists():
        raise UserError(f"No knowledge base at {folder}; run `ragloop ingest PATH --kb {folder}`.")
    return SqliteRunStore(folder / DB_FILE)
