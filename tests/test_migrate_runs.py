"""`ragloop migrate` copies the runs and their events, both ways (SQLite <-> Postgres, and each
to itself), keeping run_id and seq; a second migrate copies no run twice; a run still queued or
running in the source arrives failed (interrupted), and DST's queue never runs it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ragloop.agent.engine import Engine
from ragloop.apps.cli import app
from ragloop.core.events import event_from
from ragloop.core.types import EventKind, RunStatus
from ragloop.kb import KnowledgeBase
from ragloop.storage.backend import open_backend
from ragloop.storage.migrate import migrate
from ragloop.storage.postgres.runs import PgRunStore


def _runs(location: str) -> dict[str, tuple[dict, list[dict]]]:
    """run_id -> (record, events as dicts), read through the RunStore API."""
    backend = open_backend(location, create=False)
    try:
        store = backend.runs
        return {
            r["run_id"]: (dict(r), [e.to_dict() for e in store.events(r["run_id"])])
            for r in store.list(1000)
        }
    finally:
        backend.close()


def _metrics(location: str) -> dict:
    backend = open_backend(location, create=False)
    try:
        return backend.runs.metrics().to_dict()
    finally:
        backend.close()


def _interrupted(run: dict, status: str) -> bool:
    return (
        run["status"] == RunStatus.FAILED
        and run["finished_at"] is not None
        and run["error"].startswith(f"interrupted: it was {status} in the source")
    )


def test_sqlite_runs_reach_postgres_and_come_back(small_kb, pg_url, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("ragloop.storage.migrate_runs.BATCH_RUNS", 2)  # 3 runs: 2 pages
    engine = Engine(small_kb)
    asked = [
        engine.ask("Who approves expenses above £2,500?", route="single"),
        engine.ask("Is the T9 sensor waterproof?", route="agent", max_steps=3),
    ]
    crashed = small_kb.backend.runs.start("left running", max_steps=4)  # its process died
    small_kb.backend.runs.add_event(
        crashed, event_from(EventKind.ROUTE, 0, {"route": "single"}, seq=0)
    )
    folder = small_kb.store.location
    src = _runs(folder)
    assert len(src) == 3 and all(len(events) >= 1 for _, events in src.values())

    report = migrate(folder, pg_url)
    assert (report.runs, report.runs_interrupted, report.runs_present) == (3, 1, 0)
    assert report.events == sum(len(events) for _, events in src.values())
    dst = _runs(pg_url)
    assert dst.keys() == src.keys()
    for r in asked:  # the same record and the same events, seq included
        assert dst[r.run_id] == src[r.run_id]
    record, events = dst[crashed]
    assert _interrupted(record, "running") and events == src[crashed][1]
    assert {k: v for k, v in record.items() if k not in ("status", "error", "finished_at")} == {
        k: v for k, v in src[crashed][0].items() if k not in ("status", "error", "finished_at")
    }
    # the dashboard's figures on DST count the copies (the crashed run as failed, as
    # mark_interrupted makes it in the source)
    small_kb.backend.runs.mark_interrupted()
    want, got = _metrics(folder), _metrics(pg_url)
    assert got["runs"] == 3 and got.pop("by_status") == want.pop("by_status")
    assert got == pytest.approx(want)
    assert got["discarded_pct"] > 0  # the agent run's grade events were copied

    again = migrate(folder, pg_url)  # nothing twice, and the first copies are left alone
    assert (again.runs, again.events, again.runs_present) == (0, 0, 3)
    assert _runs(pg_url) == dst

    back = tmp_path / "back"  # Postgres -> SQLite through the CLI, which says what it copied
    res = CliRunner().invoke(app, ["migrate", pg_url, str(back)])
    assert res.exit_code == 0, res.output
    assert f"3 runs and {report.events} run events" in res.output
    assert "interrupted" not in res.output  # a failed run is no longer in flight
    assert _runs(str(back)) == dst
    shown = CliRunner().invoke(app, ["runs", asked[1].run_id, "--kb", str(back), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == {
        **src[asked[1].run_id][0],
        "events": src[asked[1].run_id][1],
    }

    twice = tmp_path / "twice"  # SQLite -> SQLite
    assert migrate(str(back), str(twice)).runs == 3
    assert _runs(str(twice)) == dst


def test_postgres_runs_in_flight_are_not_run_again(pg_small_url, pg_url) -> None:
    with KnowledgeBase.open(pg_small_url) as kb:
        done = Engine(kb).ask("Who is the Chief Financial Officer?", route="single").run_id
    src = PgRunStore(pg_small_url)
    try:
        running = src.enqueue("claimed by a worker", {"route": "single"})
        assert src.claim()["run_id"] == running
        src.add_event(running, event_from(EventKind.ROUTE, 0, {"route": "single"}, seq=0))
        queued = src.enqueue("still waiting", {"route": "single"})
        assert src.queue_depth() == 1
    finally:
        src.close()
    before = _runs(pg_small_url)

    report = migrate(pg_small_url, pg_url)  # Postgres -> Postgres
    assert (report.runs, report.runs_interrupted) == (3, 2)
    dst = PgRunStore(pg_url)
    try:
        assert dst.claim() is None and dst.queue_depth() == 0  # no worker of DST runs them
        assert dst.requeue_expired() == []  # and none waits for a lease to run out
        assert dst.get(done) == before[done][0]
        assert _interrupted(dst.get(running), "running")
        assert _interrupted(dst.get(queued), "queued")
        for run_id in (done, running, queued):
            assert [e.to_dict() for e in dst.events(run_id)] == before[run_id][1]
        assert dst.metrics().by_status == {"answered": 1, "failed": 2}
    finally:
        dst.close()
