"""The runs half of `ragloop migrate`: runs and their events, read from SRC a page at a time
(run_pages), to be written into DST's RunStore (`import_runs`) with their run_id and event seq.

A run still `queued` or `running` in SRC belongs to SRC's workers: DST gets it as recorded but
`failed`, with an "interrupted" error (what mark_interrupted does to a run whose process died),
so DST's queue never runs it and no DST run waits forever for a worker that is elsewhere.
Only the columns both backends' run tables have (RunRecord's) are copied: Postgres's queue
bookkeeping (options, attempts, worker, lease) stays behind, as no copy is ever queued.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ragloop.core.types import RunStatus
from ragloop.storage.protocols import (
    RUN_JSON_COLUMNS,
    RunCopy,
    RunRecord,
    StoredEvent,
    run_record,
)

BATCH_RUNS = 500  # runs per page: their events come with them, so memory stays bounded
IN_FLIGHT = (RunStatus.QUEUED, RunStatus.RUNNING)

# The JSON columns as text on both backends (Postgres would decode json into Python values).
_SELECT_RUNS = ", ".join(
    f"CAST({c} AS TEXT)" if c in RUN_JSON_COLUMNS else c for c in RunRecord.__annotations__
)


# what a column a SQLite file's runs table predates reads as
_LATER_COLUMNS = {"source": "''", "conversation_id": "NULL", "turn": "NULL",
                  "standalone": "NULL", "owner": "NULL"}


def select_runs(conn: Any) -> str:
    """The runs SELECT list for a SQLite file, whose runs table may predate `source` or the
    conversation columns."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    return ", ".join(
        f"CAST({c} AS TEXT)" if c in RUN_JSON_COLUMNS
        else c if c in columns or c not in _LATER_COLUMNS else f"{_LATER_COLUMNS[c]} AS {c}"
        for c in RunRecord.__annotations__)


def run_pages(conn: Any, mark: str, size: int | None = None,
              select: str = _SELECT_RUNS) -> Iterator[list[RunCopy]]:
    """The runs of a sqlite3 (mark "?") or psycopg (mark "%s") connection with their events,
    `size` (BATCH_RUNS) runs at a time, oldest first (keyset paging on created_at, run_id)."""
    size = size or BATCH_RUNS
    after: tuple[float, str] | None = None
    while True:
        where = "" if after is None else f"WHERE (created_at, run_id) > ({mark}, {mark})"
        rows = conn.execute(
            f"SELECT {select} FROM runs {where}"
            f" ORDER BY created_at, run_id LIMIT {int(size)}",
            after or (),
        ).fetchall()
        if not rows:
            return
        runs = [run_record(r) for r in rows]
        events: dict[str, list[StoredEvent]] = {r["run_id"]: [] for r in runs}
        for run_id, *event in conn.execute(
            "SELECT run_id, seq, kind, step, CAST(data AS TEXT), ts FROM events"
            f" WHERE run_id IN ({', '.join([mark] * len(runs))}) ORDER BY run_id, seq",
            list(events),
        ).fetchall():
            events[run_id].append(StoredEvent(*event))
        yield [RunCopy(r, events[r["run_id"]]) for r in runs]
        last = runs[-1]
        after = (last["created_at"], last["run_id"])


def settled(run: RunRecord) -> RunRecord:
    """`run` as DST records it: a run still in flight in SRC is failed (interrupted)."""
    if run["status"] not in IN_FLIGHT:
        return run
    return RunRecord(
        **{
            **run,
            "status": str(RunStatus.FAILED),
            "error": f"interrupted: it was {run['status']} in the source knowledge base when"
            " `ragloop migrate` copied it here (it runs, if at all, there)",
            "finished_at": run["finished_at"] or time.time(),
        }
    )


def has_runs_table(conn: Any) -> bool:
    """A SQLite knowledge base gets its runs table with its first run."""
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'").fetchone()
        is not None
    )
