"""Runs, their events and the run queue in Postgres (the RunStore and the RunQueue).

The queue is the runs table itself: a queued run is a row with status `queued` and its
options; a worker claims the oldest one with `SELECT … FOR UPDATE SKIP LOCKED` (two workers
never get the same row, no extra server needed) and holds a lease (`lease_until`, on the
database clock) that its heartbeat extends. A run whose lease ran out (its worker was killed)
goes back to the queue, with `attempts` counting the tries, until `max_attempts`, then it is
marked failed: never lost, never stuck. A worker only writes events and the final result for
the attempt it claimed, so a late writer from an expired lease cannot overwrite a retry.

Event seq numbers stay increasing across attempts (`seq_base`), so an SSE follower that
reconnects with Last-Event-ID never misses the events of a retry.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ragloop.core.errors import ConfigError
from ragloop.core.events import Event, event_from
from ragloop.core.ids import new_id
from ragloop.core.types import EventKind, RunStatus
from ragloop.storage.postgres import schema as pg_schema
from ragloop.storage.postgres.store import connect, redact, split_url
from ragloop.storage.protocols import (
    CONVERSATIONS_SQL,
    DASHBOARD_SOURCES,
    RUN_COLUMNS,
    RUN_JSON_COLUMNS,
    ConversationSummary,
    Metrics,
    QueuedRun,
    RunCopy,
    RunRecord,
    conversation_summary,
    owner_filter,
    run_record,
    run_row,
    source_filter,
    used_all_steps,
)

# A run started directly (`ragloop ask`, the server's synchronous /ask) holds this lease,
# extended by each event; if its process dies the run is marked failed when it runs out.
DIRECT_LEASE_S = 600.0
DEFAULT_MAX_ATTEMPTS = 3
NOW = "extract(epoch FROM clock_timestamp())"
# the next turn's index of conversation %(cid)s (NULL for a run outside a conversation)
NEXT_TURN = ("CASE WHEN %(cid)s::text IS NULL THEN NULL ELSE (SELECT coalesce(max(turn) + 1, 0)"
             " FROM runs WHERE conversation_id = %(cid)s::text) END")



def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class PgRunStore:
    """Runs + events + queue. `lease_s`: how long a claim or an event keeps a run alive."""

    def __init__(self, url: str, *, lease_s: float = DIRECT_LEASE_S,
                 worker: str | None = None, pool_size: int = 4) -> None:
        self.url = url
        self.lease_s = float(lease_s)
        self.worker = worker or worker_name()
        conninfo, _ = split_url(url)
        with connect(url, autocommit=True) as conn:
            pg_schema.apply_migrations(conn)
        self.pool = ConnectionPool(conninfo, min_size=1, max_size=pool_size,
                                   kwargs={"autocommit": True, "connect_timeout": 10},
                                   open=False, name="ragloop-runs")
        try:
            self.pool.open(wait=True, timeout=15)
        except PoolTimeout:
            raise ConfigError(f"Cannot connect to {redact(url)}: is the server running?") from None
        self._attempts: dict[str, int] = {}  # run_id -> the attempt this process holds
        self._leases: dict[str, float] = {}  # run_id -> the lease it was claimed with
        self._lock = threading.Lock()

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as conn:
            yield conn

    def _attempt(self, run_id: str) -> int | None:
        with self._lock:
            return self._attempts.get(run_id)

    def _lease(self, run_id: str) -> float:
        with self._lock:
            return self._leases.get(run_id, self.lease_s)

    # -- the RunStore interface -----------------------------------------------------------

    def start(self, question: str, *, driver: str = "", model: str = "",
              max_steps: int = 0, run_id: str | None = None, source: str = "api",
              conversation_id: str | None = None, owner: str | None = None) -> str:
        """Record a run as running; a run claimed from the queue keeps its queue fields (its
        owner, set when it was queued, too). A turn is numbered here, when it starts (a queued
        turn when a worker claims it)."""
        run_id = run_id or new_id()
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO runs(run_id, question, status, driver, model, max_steps, created_at,"
                " attempts, max_attempts, worker, lease_until, source, conversation_id, owner,"
                " turn) SELECT %(id)s, %(q)s, 'running', %(driver)s, %(model)s, %(steps)s,"
                f" %(now)s, 1, 1, %(worker)s, {NOW} + %(lease)s, %(source)s, %(cid)s::text,"
                f" %(owner)s, {NEXT_TURN}"
                " ON CONFLICT (run_id) DO UPDATE SET status = 'running',"
                " driver = excluded.driver, model = excluded.model,"
                " max_steps = excluded.max_steps,"
                " conversation_id = coalesce(runs.conversation_id, excluded.conversation_id),"
                " turn = coalesce(runs.turn, excluded.turn)",
                {"id": run_id, "q": question, "driver": driver, "model": model,
                 "steps": max_steps, "now": time.time(), "worker": self.worker,
                 "lease": self.lease_s, "source": source, "cid": conversation_id,
                 "owner": owner})
        return run_id

    def add_event(self, run_id: str, event: Event) -> None:
        """Write the event (and extend the lease) if this process still holds the run."""
        with self._conn() as conn:
            conn.execute(
                "WITH r AS (UPDATE runs SET lease_until ="
                f"   greatest(coalesce(lease_until, 0), {NOW} + %(lease)s)"
                " WHERE run_id = %(id)s AND status = 'running'"
                "   AND (%(att)s::int IS NULL OR attempts = %(att)s) RETURNING seq_base)"
                " INSERT INTO events(run_id, seq, kind, step, data, ts)"
                " SELECT %(id)s, r.seq_base + %(seq)s, %(kind)s, %(step)s, %(data)s::json, %(ts)s"
                " FROM r ON CONFLICT (run_id, seq) DO UPDATE SET kind = excluded.kind,"
                " step = excluded.step, data = excluded.data, ts = excluded.ts",
                {"lease": self._lease(run_id), "id": run_id, "att": self._attempt(run_id),
                 "seq": event.seq, "kind": str(event.kind), "step": event.step,
                 "data": json.dumps(event.data, ensure_ascii=False, default=str),
                 "ts": event.ts})

    def finish(self, run_id: str, result: dict[str, Any]) -> None:
        with self._conn() as conn:
            conn.execute(
                "UPDATE runs SET status=%(status)s, route=%(route)s, route_reason=%(rr)s,"
                " driver=coalesce(%(driver)s, driver), model=coalesce(%(model)s, model),"
                " answer=%(answer)s, citations=%(cit)s::json, usage=%(usage)s::json,"
                " steps=%(steps)s, latency_s=%(lat)s, error=%(error)s, finished_at=%(now)s,"
                " standalone=coalesce(%(standalone)s, standalone), lease_until = NULL"
                " WHERE run_id=%(id)s AND (%(att)s::int IS NULL OR attempts = %(att)s)",
                {"status": str(result["status"]), "route": result.get("route"),
                 "rr": result.get("route_reason"), "driver": result.get("driver"),
                 "model": result.get("model"), "answer": result.get("answer"),
                 "cit": json.dumps(result.get("citations", []), default=str),
                 "usage": json.dumps(result.get("usage", {}), default=str),
                 "steps": result.get("steps", 0), "lat": result.get("latency_s"),
                 "error": result.get("error"), "now": time.time(), "id": run_id,
                 "standalone": result.get("standalone"),
                 "att": self._attempt(run_id)})
        with self._lock:
            self._attempts.pop(run_id, None)
            self._leases.pop(run_id, None)

    def get(self, run_id: str, owner: str | None = None) -> RunRecord | None:
        mine, values = owner_filter(owner)
        with self._conn() as conn:
            row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id=%s"
                               f" AND {mine.format('%s')}", (run_id, *values)).fetchone()
        return run_record(row) if row else None

    def events(self, run_id: str, after_seq: int = -1) -> list[Event]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT kind, step, data, ts, seq FROM events WHERE run_id=%s AND seq>%s"
                " ORDER BY seq", (run_id, after_seq)).fetchall()
        return [event_from(k, s, json.loads(d) if isinstance(d, str) else d, ts=t, seq=q)
                for k, s, d, t, q in rows]

    def list(self, limit: int = 20, source: str | None = None,
             owner: str | None = None) -> list[RunRecord]:
        where, values = source_filter(source)
        mine, theirs = owner_filter(owner)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE {where.format('%s')}"
                f" AND {mine.format('%s')} ORDER BY created_at DESC LIMIT %s",
                (*values, *theirs, limit)).fetchall()
        return [run_record(r) for r in rows]

    def conversation(self, conversation_id: str, owner: str | None = None) -> list[RunRecord]:
        mine, values = owner_filter(owner)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id=%s"
                f" AND {mine.format('%s')} ORDER BY turn",
                (conversation_id, *values)).fetchall()
        return [run_record(r) for r in rows]

    def answered(self, answer: str, owner: str | None = None) -> RunRecord | None:
        mine, values = owner_filter(owner)
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE answer=%s AND finished_at IS NOT NULL"
                f" AND {mine.format('%s')} ORDER BY created_at DESC LIMIT 1",
                (answer, *values)).fetchone()
        return run_record(row) if row else None

    def conversations(self, limit: int = 20,
                      owner: str | None = None) -> list[ConversationSummary]:
        mine, values = owner_filter(owner)
        sql = CONVERSATIONS_SQL.format(where=mine.format("%s"), limit="%s")
        with self._conn() as conn:
            rows = conn.execute(sql, (*values, limit)).fetchall()
        return [conversation_summary(r) for r in rows]

    def metrics(self, source: str | None = DASHBOARD_SOURCES,
                owner: str | None = None) -> Metrics:
        """The dashboard figures over finished runs (as RunStore.metrics)."""
        where, values = source_filter(source)
        mine, theirs = owner_filter(owner)
        where = f"{where.format('%s')} AND {mine.format('%s')}"
        values = [*values, *theirs]
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT status, steps, coalesce(latency_s, 0),"
                " coalesce((usage->>'cost_usd')::float8, 0), max_steps FROM runs"
                f" WHERE status NOT IN ('running', 'queued') AND {where}", values).fetchall()
            seen, kept = conn.execute(
                "SELECT coalesce(sum((e.data->>'chunks')::int), 0),"
                " coalesce(sum((e.data->>'kept')::int), 0) FROM events e"
                " JOIN runs r ON r.run_id = e.run_id"
                f" WHERE e.kind = %s AND {where.replace('source', 'r.source')}",
                (str(EventKind.GRADE), *values)).fetchone()
        n = len(rows)
        by_status: dict[str, int] = {}
        for status, *_ in rows:
            by_status[status] = by_status.get(status, 0) + 1
        discarded = int(seen) - int(kept)
        return Metrics(
            runs=n,
            mean_steps=sum(r[1] for r in rows) / n if n else 0.0,
            truncated_pct=100.0 * by_status.get(RunStatus.TRUNCATED, 0) / n if n else 0.0,
            discarded_pct=100.0 * discarded / int(seen) if seen else 0.0,
            mean_latency_s=sum(r[2] for r in rows) / n if n else 0.0,
            mean_cost_usd=sum(r[3] for r in rows) / n if n else 0.0,
            by_status=by_status,
            used_all_steps_pct=100.0 * sum(used_all_steps(r[1], r[4]) for r in rows) / n if n
            else 0.0,
        )

    def mark_interrupted(self) -> list[str]:
        """Runs whose lease ran out (their process died): back to the queue, or failed after
        their last attempt. Runs other processes still hold are left alone."""
        return [run_id for run_id, _, _ in self.requeue_expired()]

    def import_runs(self, runs: list[RunCopy]) -> tuple[list[str], int]:
        """Insert copied runs as recorded (RunStore.import_runs); an existing run_id is left
        alone. A copy holds no lease and no queue options: give it a final status, or a
        `running` copy would never expire and a `queued` one would be run here."""
        marks = ", ".join("%s::json" if c in RUN_JSON_COLUMNS else "%s"
                          for c in RunRecord.__annotations__)
        inserted: list[str] = []
        if not runs:
            return inserted, 0
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(f"INSERT INTO runs({RUN_COLUMNS}) VALUES ({marks})"
                            " ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
                            [run_row(r.record) for r in runs], returning=True)
            while True:  # one result per row: its run_id if inserted, nothing if present
                inserted.extend(row[0] for row in cur.fetchall())
                if not cur.nextset():
                    break
            new = set(inserted)
            rows = [(r.record["run_id"], *e) for r in runs if r.record["run_id"] in new
                    for e in r.events]
            cur.executemany("INSERT INTO events(run_id, seq, kind, step, data, ts)"
                            " VALUES (%s, %s, %s, %s, %s::json, %s)", rows)
        return inserted, len(rows)

    def close(self) -> None:
        self.pool.close()

    # -- the queue --------------------------------------------------------------------------

    def enqueue(self, question: str, options: dict[str, Any] | None = None, *,
                run_id: str | None = None, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                owner: str | None = None) -> str:
        """`owner`: who asked; the queued row is theirs from the start (RunRecord.owner)."""
        run_id = run_id or new_id()
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO runs(run_id, question, status, options, max_attempts, created_at,"
                " conversation_id, owner) VALUES (%s, %s, 'queued', %s::json, %s, %s, %s, %s)",
                (run_id, question, json.dumps(options or {}), max(1, max_attempts),
                 time.time(), (options or {}).get("conversation_id"), owner))
        return run_id

    def claim(self, lease_s: float | None = None) -> QueuedRun | None:
        """Take the oldest queued run (exactly one worker gets it); None when the queue is
        empty. The run is `running`, held by this worker for `lease_s`."""
        lease = self.lease_s if lease_s is None else float(lease_s)
        with self._conn() as conn:
            row = conn.execute(
                "UPDATE runs SET status = 'running', attempts = attempts + 1, worker = %s,"
                f" lease_until = {NOW} + %s"
                " WHERE run_id = (SELECT run_id FROM runs WHERE status = 'queued'"
                "   ORDER BY created_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING run_id, question, options, attempts, max_attempts",
                (self.worker, lease)).fetchone()
        if row is None:
            return None
        run_id, question, options, attempts, max_attempts = row
        with self._lock:
            self._attempts[run_id] = attempts
            self._leases[run_id] = lease
        opts = json.loads(options) if isinstance(options, str) else (options or {})
        return QueuedRun(run_id=run_id, question=question, options=opts, attempts=attempts,
                         max_attempts=max_attempts)

    def heartbeat(self, run_id: str, lease_s: float | None = None) -> bool:
        """Extend this worker's lease on `run_id`; False if it was lost (expired, re-queued)."""
        lease = self.lease_s if lease_s is None else float(lease_s)
        with self._conn() as conn:
            cur = conn.execute(
                f"UPDATE runs SET lease_until = {NOW} + %s WHERE run_id = %s"
                " AND status = 'running' AND attempts = %s AND worker = %s",
                (lease, run_id, self._attempt(run_id) or -1, self.worker))
            return cur.rowcount == 1

    def release(self, run_id: str) -> None:
        """Forget the claim (after the run finished or failed in this process)."""
        with self._lock:
            self._attempts.pop(run_id, None)
            self._leases.pop(run_id, None)

    def requeue_expired(self) -> list[tuple[str, str, int]]:
        """(run_id, new status, attempts) for every running run whose lease ran out."""
        with self._conn() as conn, conn.transaction():
            rows = conn.execute(
                "WITH x AS (SELECT run_id FROM runs WHERE status = 'running'"
                f"   AND lease_until < {NOW} FOR UPDATE SKIP LOCKED)"
                " UPDATE runs r SET"
                "  status = CASE WHEN r.attempts < r.max_attempts THEN 'queued' ELSE 'failed' END,"
                "  error = CASE WHEN r.attempts < r.max_attempts THEN NULL ELSE"
                "    'interrupted: its worker stopped (lease expired) after '"
                "    || r.attempts || ' attempt(s)' END,"
                "  finished_at = CASE WHEN r.attempts < r.max_attempts THEN NULL"
                f"    ELSE {NOW} END,"
                "  worker = NULL, lease_until = NULL,"
                "  seq_base = coalesce((SELECT max(e.seq) + 1 FROM events e"
                "    WHERE e.run_id = r.run_id), r.seq_base)"
                " FROM x WHERE r.run_id = x.run_id"
                " RETURNING r.run_id, r.status, r.attempts, r.max_attempts, r.seq_base"
            ).fetchall()
            for run_id, status, attempts, max_attempts, base in rows:
                note = (f"worker lost (lease expired) during attempt {attempts}/{max_attempts};"
                        + (" queued again" if status == RunStatus.QUEUED else " giving up"))
                conn.execute(
                    "INSERT INTO events(run_id, seq, kind, step, data, ts)"
                    " VALUES (%s, %s, %s, 0, %s::json, %s) ON CONFLICT DO NOTHING",
                    (run_id, base, str(EventKind.ERROR),
                     json.dumps({"error": note, "attempt": attempts}), time.time()))
                conn.execute("UPDATE runs SET seq_base = seq_base + 1 WHERE run_id = %s",
                             (run_id,))
        return [(r[0], r[1], r[2]) for r in rows]

    def queue_depth(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM runs WHERE status = 'queued'")
                       .fetchone()[0])

    def listen(self, channels: tuple[str, ...] = ("ragloop_queue",)) -> PgListener:
        """A dedicated autocommit connection LISTENing on `channels` (caller closes it)."""
        conn = connect(self.url, autocommit=True)
        for ch in channels:
            conn.execute(f"LISTEN {ch}")
        return PgListener(conn)


class PgListener:
    """NOTIFY payloads from a LISTENing connection (the QueueListener of Postgres)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def payloads(self, timeout: float, stop_after: int | None = None) -> Iterator[str]:
        for note in self.conn.notifies(timeout=timeout, stop_after=stop_after):
            yield note.payload

    def close(self) -> None:
        self.conn.close()
