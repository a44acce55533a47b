"""Pick the Store (and the RunStore beside it) from a knowledge-base location.

A folder path means SQLite (the default); a `postgresql://` (or `postgres://`) URL means
Postgres. The Postgres modules are imported only when a URL asks for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragloop.store.base import Store


def is_postgres_url(location: object) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def open_store(location: str | Path, create: bool = True) -> Store:
    """`create=False` (search, ask, docs): a folder that holds no knowledge base is an error."""
    if is_postgres_url(location):
        from ragloop.store.postgres import PostgresStore

        return PostgresStore(str(location))
    from ragloop.store.sqlite import SqliteStore

    return SqliteStore(Path(location), create=create)


def open_run_store(store: Any) -> Any:
    """The run store that lives beside `store`: the same SQLite file, or the same database."""
    url = getattr(store, "url", None)
    if url is not None and is_postgres_url(url):
        from ragloop.runs.postgres import PgRunStore

        return PgRunStore(url)
    from ragloop.runs.store import RunStore

    return RunStore(store.db_path)


def open_run_store_at(location: str | Path) -> Any:
    """The run store of the knowledge base at `location` (without opening the store)."""
    if is_postgres_url(location):
        from ragloop.runs.postgres import PgRunStore

        return PgRunStore(str(location))
    from ragloop.errors import UserError
    from ragloop.runs.store import RunStore
    from ragloop.store.sqlite import DB_FILE

    folder = Path(location)
    if not (folder / DB_FILE).exists():
        raise UserError(f"No knowledge base at {folder}; run `ragloop ingest PATH --kb {folder}`.")
    return RunStore(folder / DB_FILE)
