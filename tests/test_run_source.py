"""Each run records who started it (cli, api, eval, mcp) in both run stores; the dashboard's
figures leave eval runs out unless asked, and listings filter by source."""

from __future__ import annotations

import sqlite3

import pytest

from ragloop.core.errors import UserError
from ragloop.core.types import RunStatus


@pytest.fixture(params=["sqlite", "postgres"])
def runs(request, tmp_path):
    if request.param == "sqlite":
        from ragloop.storage.sqlite.runs import SqliteRunStore

        store = SqliteRunStore(tmp_path / "ragloop.db")
    else:
        from ragloop.storage.postgres.runs import PgRunStore

        store = PgRunStore(request.getfixturevalue("pg_url"))
    yield store
    store.close()


def finish(runs, source: str, latency: float, steps: int = 2) -> str:
    run_id = runs.start(f"a question from {source}", max_steps=6, source=source)
    runs.finish(run_id, {"status": RunStatus.ANSWERED, "steps": steps, "latency_s": latency,
                         "usage": {"cost_usd": 0.0}})
    return run_id


def test_eval_runs_stay_out_of_the_dashboard(runs) -> None:
    finish(runs, "cli", 1.0)
    finish(runs, "api", 3.0)
    for _ in range(5):
        finish(runs, "eval", 100.0, steps=6)
    m = runs.metrics()
    assert m.runs == 2 and m.mean_latency_s == pytest.approx(2.0)
    assert m.used_all_steps_pct == 0.0
    assert runs.metrics("all").runs == 7
    assert runs.metrics("eval").runs == 5
    assert [r["source"] for r in runs.list(10, "cli")] == ["cli"]
    assert len(runs.list(10)) == 7
    assert {r["source"] for r in runs.list(10, "default")} == {"cli", "api"}
    with pytest.raises(UserError, match="source must be one of"):
        runs.metrics("nightly")


def test_an_old_sqlite_runs_table_gets_the_column(tmp_path) -> None:
    from ragloop.storage.sqlite.runs import SqliteRunStore

    db = tmp_path / "ragloop.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, question TEXT NOT NULL, status TEXT NOT NULL,
          route TEXT, route_reason TEXT, driver TEXT, model TEXT, answer TEXT,
          citations TEXT NOT NULL DEFAULT '[]', usage TEXT NOT NULL DEFAULT '{}',
          steps INTEGER NOT NULL DEFAULT 0, max_steps INTEGER NOT NULL DEFAULT 0,
          latency_s REAL, error TEXT, created_at REAL NOT NULL, finished_at REAL);
        INSERT INTO runs(run_id, question, status, created_at) VALUES ('old', 'q', 'answered', 1);
    """)
    conn.close()
    store = SqliteRunStore(db)
    try:
        assert store.get("old")["source"] == ""
        assert store.metrics().runs == 1  # a run of unknown source counts on the dashboard
    finally:
        store.close()


def test_cli_ask_and_eval_record_their_source(small_kb_template, tmp_path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    env["RAGLOOP_MODEL"] = "offline"
    data = tmp_path / "q.jsonl"
    data.write_text('{"q": "Who approves travel expenses?", "gold_doc": "policies/travel.md"}\n')
    for args in (["ask", "Who approves travel expenses?"],
                 ["eval", str(data), "--paths", "single", "--out", str(tmp_path / "out")]):
        done = subprocess.run([sys.executable, "-m", "ragloop", *args, "--kb", str(folder)],
                              capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr
    from ragloop.storage.sqlite.runs import SqliteRunStore

    store = SqliteRunStore(folder / "ragloop.db")
    try:
        assert sorted(r["source"] for r in store.list(10)) == ["cli", "eval"]
        assert store.metrics().runs == 1
    finally:
        store.close()
