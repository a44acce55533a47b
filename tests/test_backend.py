"""open_backend(location): one call gives a knowledge base's Store, RunStore and RunQueue, for a
folder (SQLite) and a postgresql:// URL alike; a mistyped or damaged folder is a clear error and
nothing is created. Both run stores (and a run still waiting in the server) give one RunRecord
shape."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from ragloop.apps.jobs import Pending
from ragloop.apps.worker import run_worker
from ragloop.core.config import Settings
from ragloop.core.errors import UserError
from ragloop.core.types import RunStatus
from ragloop.storage.backend import open_backend
from ragloop.storage.migrate import migrate
from ragloop.storage.protocols import RUN_COLUMNS, RunRecord

FIELDS = list(RunRecord.__annotations__)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragloop", *args], capture_output=True, text=True, timeout=120
    )


def test_a_missing_folder_is_an_error_and_nothing_is_created(tmp_path) -> None:
    typo = tmp_path / "kbb"
    with pytest.raises(UserError, match="No knowledge base at"):
        open_backend(typo, create=False)
    backend = open_backend(typo)  # for ingest: opens nothing until the store is used
    with pytest.raises(UserError, match="No knowledge base at"):
        backend.runs  # noqa: B018  (reading runs never creates a knowledge base)
    assert backend.queue is None
    backend.close()
    assert not typo.exists()
    with pytest.raises(UserError, match="No knowledge base at"):
        migrate(str(typo), str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()
    for command in ("runs", "stats"):
        res = _cli(command, "--kb", str(typo))
        assert res.returncode == 2 and "No knowledge base at" in res.stderr, res.stderr
    assert not typo.exists()


# every command but ingest, with the arguments it needs besides --kb
READERS = [("search", "x"), ("docs",), ("section", "a.md", "1"), ("ask", "q"), ("runs",),
           ("stats",), ("mcp",), ("serve", "--port", "0")]


def _refused(location: str, commands: list[tuple[str, ...]], message: str) -> None:
    for command in commands:
        res = subprocess.run([sys.executable, "-m", "ragloop", *command, "--kb", location],
                             capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 2 and message in res.stderr, (command, res.stderr)
        assert "Traceback" not in res.stderr, (command, res.stderr)


def test_no_command_but_ingest_creates_a_knowledge_base_in_a_folder(tmp_path) -> None:
    typo = tmp_path / "kbb"
    _refused(str(typo), READERS, "No knowledge base at")
    assert not typo.exists()


def test_no_command_but_ingest_creates_a_knowledge_base_in_a_database(pg_url) -> None:
    from ragloop.storage.postgres.schema import current_version
    from ragloop.storage.postgres.store import connect

    with pytest.raises(UserError, match="No knowledge base in"):
        open_backend(pg_url, create=False)
    _refused(pg_url, [*READERS, ("worker",)], "No knowledge base in")
    with connect(pg_url) as conn:
        assert current_version(conn) == 0  # not a table created
    # a mistyped database name: a clear error too, exit 2
    _refused(pg_url.rsplit("/", 1)[0] + "/no_such_db", [("search", "x"), ("mcp",)],
             "Cannot connect")


def test_a_file_is_not_a_folder(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match="is a file, not a knowledge-base folder"):
        open_backend(tmp_path / "notes.txt")


def test_a_damaged_database_is_a_clear_error_for_the_runs_too(tmp_path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "ragloop.db").write_bytes(os.urandom(8192))
    backend = open_backend(folder, create=False)
    with pytest.raises(UserError, match="not a ragloop knowledge base"):
        backend.runs  # noqa: B018
    backend.close()
    res = _cli("runs", "--kb", str(folder))
    assert res.returncode == 2 and "not a ragloop knowledge base" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_worker_on_a_folder_is_refused_and_creates_nothing(tmp_path) -> None:
    folder = tmp_path / "kb"
    with pytest.raises(UserError, match="needs a Postgres knowledge base"):
        run_worker(Settings(kb=str(folder)), stop=threading.Event())
    assert not folder.exists()


def _record_run(backend) -> RunRecord:
    runs = backend.runs
    run_id = runs.start("how waterproof?", driver="pipeline", model="offline", max_steps=4)
    runs.finish(
        run_id,
        {
            "status": RunStatus.ANSWERED,
            "answer": "IP67 [1]",
            "steps": 2,
            "citations": [{"n": 1, "doc_id": "a.md", "section": "1"}],
            "usage": {"cost_usd": 0.0},
            "latency_s": 0.5,
        },
    )
    run = runs.get(run_id)
    assert run is not None and runs.list(1) == [run]
    return run


def test_sqlite_backend_parts_and_the_run_record(tmp_path) -> None:
    backend = open_backend(tmp_path / "kb")
    assert backend.location == str(tmp_path / "kb") and backend.queue is None
    assert backend.store.chunk_count() == 0  # creates the knowledge base
    run = _record_run(backend)
    backend.close()
    assert list(run) == FIELDS == [c.strip() for c in RUN_COLUMNS.split(",")]
    assert run["citations"][0]["doc_id"] == "a.md" and run["usage"] == {"cost_usd": 0.0}
    assert run["status"] == "answered" and run["max_steps"] == 4
    assert list(Pending("r1", "q").record()) == FIELDS


def test_postgres_backend_parts_and_the_run_record(pg_url) -> None:
    backend = open_backend(pg_url)  # as ingest: creates the knowledge base
    try:
        assert backend.queue is backend.runs  # the runs table is the shared queue
        assert backend.store.chunk_count() == 0
        run = _record_run(backend)
        assert list(run) == FIELDS
        assert run["citations"][0]["doc_id"] == "a.md" and run["usage"] == {"cost_usd": 0.0}
        queued = backend.queue.enqueue("later?", {"route": "single"})
        claimed = backend.queue.claim(30)
        assert claimed is not None and claimed["run_id"] == queued
        assert claimed["options"] == {"route": "single"} and claimed["attempts"] == 1
    finally:
        backend.close()
