"""Runs and their events, stored in the knowledge base's own SQLite file, and the metrics."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ragloop.core.events import Event, event_from
from ragloop.core.ids import new_id
from ragloop.core.types import EventKind, RunStatus
from ragloop.storage.protocols import (
    CONVERSATIONS_SQL,
    DASHBOARD_SOURCES,
    RUN_COLUMNS,
    ConversationSummary,
    Metrics,
    RunCopy,
    RunRecord,
    conversation_summary,
    owner_filter,
    run_record,
    run_row,
    source_filter,
    used_all_steps,
)
from ragloop.storage.sqlite.store import not_a_knowledge_base

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, question TEXT NOT NULL, status TEXT NOT NULL,
  route TEXT, route_reason TEXT, driver TEXT, model TEXT, answer TEXT,
  citations TEXT NOT NULL DEFAULT '[]', usage TEXT NOT NULL DEFAULT '{}',
  steps INTEGER NOT NULL DEFAULT 0, max_steps INTEGER NOT NULL DEFAULT 0,
  latency_s REAL, error TEXT, created_at REAL NOT NULL, finished_at REAL,
  source TEXT NOT NULL DEFAULT '', conversation_id TEXT, turn INTEGER, standalone TEXT,
  owner TEXT);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TABLE IF NOT EXISTS events (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, seq INTEGER NOT NULL,
  kind TEXT NOT NULL, step INTEGER NOT NULL, data TEXT NOT NULL, ts REAL NOT NULL,
  PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
"""
# an index made after the columns: a file from before conversations gets them first
CONVERSATION_INDEX = ("CREATE INDEX IF NOT EXISTS runs_conversation"
                      " ON runs(conversation_id, turn) WHERE conversation_id IS NOT NULL")
# columns added since the first runs table, for knowledge bases made before them
ADDED_COLUMNS = {"source": "TEXT NOT NULL DEFAULT ''", "conversation_id": "TEXT",
                 "turn": "INTEGER", "standalone": "TEXT", "owner": "TEXT"}


class SqliteRunStore:
    def __init__(self, db_path: str | Path) -> None:
        self.lock = threading.RLock()
        self.db = sqlite3.connect(str(db_path), check_same_thread=False, isolation_level=None,
                                  timeout=30)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(SCHEMA)
            columns = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
            for name, decl in ADDED_COLUMNS.items():  # a knowledge base from before them
                if name not in columns:
                    self.db.execute(f"ALTER TABLE runs ADD COLUMN {name} {decl}")
            self.db.execute(CONVERSATION_INDEX)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise not_a_knowledge_base(Path(db_path), exc) from None

    def start(self, question: str, *, driver: str = "", model: str = "",
              max_steps: int = 0, run_id: str | None = None, source: str = "api",
              conversation_id: str | None = None, owner: str | None = None) -> str:
        run_id = run_id or new_id()
        with self.lock:  # the turn's index read and written under the one lock
            self.db.execute(
                "INSERT INTO runs(run_id, question, status, driver, model, max_steps, created_at,"
                " source, conversation_id, owner, turn) SELECT ?,?,?,?,?,?,?,?,?,?,"
                " CASE WHEN ? IS NULL THEN NULL ELSE (SELECT coalesce(max(turn) + 1, 0)"
                " FROM runs WHERE conversation_id = ?) END",
                (run_id, question, RunStatus.RUNNING, driver, model, max_steps, time.time(),
                 source, conversation_id, owner, conversation_id, conversation_id))
        return run_id

    def add_event(self, run_id: str, event: Event) -> None:
        with self.lock:
            self.db.execute(
                "INSERT OR REPLACE INTO events(run_id, seq, kind, step, data, ts)"
                " VALUES (?,?,?,?,?,?)",
                (run_id, event.seq, str(event.kind), event.step,
                 json.dumps(event.data, ensure_ascii=False, default=str), event.ts))

    def finish(self, run_id: str, result: dict[str, Any]) -> None:
        with self.lock:
            self.db.execute(
                "UPDATE runs SET status=?, route=?, route_reason=?, driver=?, model=?, answer=?,"
                " citations=?, usage=?, steps=?, latency_s=?, error=?, finished_at=?,"
                " standalone=coalesce(?, standalone) WHERE run_id=?",
                (result["status"], result.get("route"), result.get("route_reason"),
                 result.get("driver"), result.get("model"), result.get("answer"),
                 json.dumps(result.get("citations", [])), json.dumps(result.get("usage", {})),
                 result.get("steps", 0), result.get("latency_s"), result.get("error"),
                 time.time(), result.get("standalone"), run_id))

    def get(self, run_id: str, owner: str | None = None) -> RunRecord | None:
        mine, values = owner_filter(owner)
        with self.lock:
            row = self.db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id=?"
                                  f" AND {mine.format('?')}", (run_id, *values)).fetchone()
        return run_record(row) if row else None

    def events(self, run_id: str, after_seq: int = -1) -> list[Event]:
        with self.lock:
            rows = self.db.execute(
                "SELECT kind, step, data, ts, seq FROM events WHERE run_id=? AND seq>?"
                " ORDER BY seq", (run_id, after_seq)).fetchall()
        return [event_from(k, s, json.loads(d), ts=t, seq=q) for k, s, d, t, q in rows]

    def list(self, limit: int = 20, source: str | None = None,
             owner: str | None = None) -> list[RunRecord]:
        where, values = source_filter(source)
        mine, theirs = owner_filter(owner)
        with self.lock:
            rows = self.db.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE {where.format('?')}"
                f" AND {mine.format('?')} ORDER BY created_at DESC LIMIT ?",
                (*values, *theirs, limit)).fetchall()
        return [run_record(r) for r in rows]

    def conversation(self, conversation_id: str, owner: str | None = None) -> list[RunRecord]:
        mine, values = owner_filter(owner)
        with self.lock:
            rows = self.db.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id=?"
                f" AND {mine.format('?')} ORDER BY turn", (conversation_id, *values)).fetchall()
        return [run_record(r) for r in rows]

    def answered(self, answer: str, owner: str | None = None) -> RunRecord | None:
        mine, values = owner_filter(owner)
        with self.lock:
            row = self.db.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE answer=? AND finished_at IS NOT NULL"
                f" AND {mine.format('?')} ORDER BY created_at DESC LIMIT 1",
                (answer, *values)).fetchone()
        return run_record(row) if row else None

    def conversations(self, limit: int = 20,
                      owner: str | None = None) -> list[ConversationSummary]:
        mine, values = owner_filter(owner)
        sql = CONVERSATIONS_SQL.format(where=mine.format("?"), limit="?")
        with self.lock:
            rows = self.db.execute(sql, (*values, limit)).fetchall()
        return [conversation_summary(r) for r in rows]

    def metrics(self, source: str | None = DASHBOARD_SOURCES,
                owner: str | None = None) -> Metrics:
        """The dashboard figures over finished runs (by default not eval's)."""
        where, values = source_filter(source)
        mine, theirs = owner_filter(owner)
        where = f"{where.format('?')} AND {mine.format('?')}"
        values = [*values, *theirs]
        with self.lock:
            rows = self.db.execute(
                "SELECT status, steps, latency_s, usage, max_steps FROM runs WHERE status != ?"
                f" AND {where}", (RunStatus.RUNNING, *values)).fetchall()
            grades = self.db.execute(
                "SELECT e.data FROM events e JOIN runs r ON r.run_id = e.run_id"
                f" WHERE e.kind=? AND {where.replace('source', 'r.source')}",
                (EventKind.GRADE, *values)).fetchall()
        n = len(rows)
        by_status: dict[str, int] = {}
        for status, *_ in rows:
            by_status[status] = by_status.get(status, 0) + 1
        seen = discarded = 0
        for (data,) in grades:
            d = json.loads(data)
            seen += int(d.get("chunks", 0))
            discarded += int(d.get("chunks", 0)) - int(d.get("kept", 0))
        return Metrics(
            runs=n,
            mean_steps=sum(r[1] for r in rows) / n if n else 0.0,
            truncated_pct=100.0 * by_status.get(RunStatus.TRUNCATED, 0) / n if n else 0.0,
            discarded_pct=100.0 * discarded / seen if seen else 0.0,
            mean_latency_s=sum(r[2] or 0.0 for r in rows) / n if n else 0.0,
            mean_cost_usd=sum(json.loads(r[3]).get("cost_usd", 0.0) for r in rows) / n if n
            else 0.0,
            by_status=by_status,
            used_all_steps_pct=100.0 * sum(used_all_steps(r[1], r[4]) for r in rows) / n if n
            else 0.0,
        )

    def mark_interrupted(self) -> list[str]:
        """Mark runs still 'running' (their process died) failed; returns their ids."""
        with self.lock:
            ids = [r for (r,) in self.db.execute(
                "SELECT run_id FROM runs WHERE status=?", (RunStatus.RUNNING,)).fetchall()]
            self.db.execute(
                "UPDATE runs SET status=?, error=?, finished_at=? WHERE status=?",
                (RunStatus.FAILED, "interrupted by server restart", time.time(),
                 RunStatus.RUNNING))
        return ids

    def import_runs(self, runs: list[RunCopy]) -> tuple[list[str], int]:
        """Insert copied runs as recorded (RunStore.import_runs); an existing run_id is left
        alone."""
        marks = ", ".join("?" for _ in RunRecord.__annotations__)
        inserted: list[str] = []
        events = 0
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for run in runs:
                    cur = self.db.execute(
                        f"INSERT OR IGNORE INTO runs({RUN_COLUMNS}) VALUES ({marks})",
                        run_row(run.record))
                    if cur.rowcount != 1:
                        continue
                    run_id = run.record["run_id"]
                    inserted.append(run_id)
                    self.db.executemany(
                        "INSERT INTO events(run_id, seq, kind, step, data, ts)"
                        " VALUES (?,?,?,?,?,?)", [(run_id, *e) for e in run.events])
                    events += len(run.events)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return inserted, events

    def close(self) -> None:
        with self.lock:
            self.db.close()
