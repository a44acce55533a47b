"""The Postgres RunStore (same interface as runs.store.RunStore) and its queue: claims are
exclusive, leases expire into retries, a retry's events continue the seq numbers, a late
writer from an expired attempt is ignored, the last attempt ends failed."""

from __future__ import annotations

import threading
import time

import pytest

from ragloop.core.events import Event, event_from
from ragloop.core.types import EventKind, RunStatus
from ragloop.storage.postgres.runs import PgRunStore


@pytest.fixture
def runs(pg_url):
    store = PgRunStore(pg_url)
    yield store
    store.close()


def _event(kind: EventKind, seq: int, **data) -> Event:
    return event_from(kind, seq, data, seq=seq)


def test_the_run_store_interface(runs: PgRunStore) -> None:
    run_id = runs.start("what is the T9 rated?", driver="pipeline", model="offline",
                        max_steps=6)
    assert runs.get(run_id)["status"] == RunStatus.RUNNING
    runs.add_event(run_id, _event(EventKind.ROUTE, 0, route="agent", reason="long"))
    runs.add_event(run_id, _event(EventKind.GRADE, 1, query="q", chunks=8, kept=2, enough=True,
                                  missing="ünïcode ✓ \\ ' \""))
    runs.add_event(run_id, _event(EventKind.GRADE, 2, query="q", chunks=2, kept=2, enough=True))
    events = runs.events(run_id)
    assert [(e.kind, e.seq) for e in events] == [(EventKind.ROUTE, 0), (EventKind.GRADE, 1),
                                                 (EventKind.GRADE, 2)]
    assert events[1].missing == "ünïcode ✓ \\ ' \""
    assert [e.seq for e in runs.events(run_id, after_seq=0)] == [1, 2]
    runs.finish(run_id, {"status": RunStatus.ANSWERED, "route": "agent", "answer": "IP67 [1]",
                         "citations": [{"n": 1, "doc_id": "products/sensor.md"}],
                         "usage": {"cost_usd": 0.5, "input_tokens": 3}, "steps": 3,
                         "latency_s": 2.0})
    run = runs.get(run_id)
    assert run["status"] == RunStatus.ANSWERED and run["answer"] == "IP67 [1]"
    assert run["citations"] == [{"n": 1, "doc_id": "products/sensor.md"}]
    assert run["usage"]["cost_usd"] == 0.5 and run["finished_at"] >= run["created_at"]
    other = runs.start("second", run_id="fixed-id")
    runs.finish(other, {"status": RunStatus.TRUNCATED, "steps": 6, "latency_s": 4.0,
                        "usage": {"cost_usd": 0.0}})
    assert [r["run_id"] for r in runs.list(10)] == ["fixed-id", run_id]
    assert runs.get("nope") is None
    m = runs.metrics()
    assert (m.runs, m.mean_steps, m.truncated_pct) == (2, 4.5, 50.0)
    assert m.discarded_pct == pytest.approx(100 * 6 / 10)
    assert m.mean_latency_s == 3.0 and m.mean_cost_usd == 0.25
    assert m.by_status == {"answered": 1, "truncated": 1}
    assert m.used_all_steps_pct == 0.0  # 3 of 6 steps; the other run has no ceiling recorded
    full = runs.start("third", max_steps=4)
    runs.finish(full, {"status": RunStatus.ANSWERED, "steps": 4, "latency_s": 1.0,
                       "usage": {"cost_usd": 0.0}})
    m = runs.metrics()
    assert (m.used_all_steps_pct, m.truncated_pct) == (100.0 / 3, 100.0 / 3)


def test_queue_claims_are_exclusive(runs: PgRunStore, pg_url) -> None:
    ids = [runs.enqueue(f"question {i}", {"route": "single"}) for i in range(30)]
    assert runs.get(ids[0])["status"] == "queued" and runs.queue_depth() == 30
    claimed: dict[str, list[str]] = {"a": [], "b": [], "c": []}
    stores = {name: PgRunStore(pg_url, worker=name) for name in claimed}
    start = threading.Barrier(len(stores))

    def take(name: str) -> None:
        start.wait()
        while (job := stores[name].claim(60)) is not None:
            claimed[name].append(job["run_id"])
            assert job["options"] == {"route": "single"} and job["attempts"] == 1

    threads = [threading.Thread(target=take, args=(n,)) for n in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores.values():
        s.close()
    got = [r for taken in claimed.values() for r in taken]
    assert sorted(got) == sorted(ids)  # each run exactly once
    assert runs.queue_depth() == 0
    assert claimed["a"] and claimed["b"]  # they really did share the queue


def test_an_expired_lease_is_retried_then_failed(runs: PgRunStore, pg_url) -> None:
    run_id = runs.enqueue("slow question", max_attempts=2)
    dead = PgRunStore(pg_url, worker="dead-worker")
    job = dead.claim(lease_s=0.2)
    assert job["attempts"] == 1
    dead.start("slow question", run_id=run_id)
    dead.add_event(run_id, _event(EventKind.ROUTE, 0, route="agent"))
    dead.add_event(run_id, _event(EventKind.TOOL_CALL, 1, tool="search"))
    assert runs.requeue_expired() == []  # still held
    time.sleep(0.3)
    assert runs.mark_interrupted() == [run_id]
    assert runs.get(run_id)["status"] == "queued"
    live = PgRunStore(pg_url, worker="live-worker")
    job = live.claim(lease_s=60)
    assert job["run_id"] == run_id and job["attempts"] == 2
    live.start("slow question", run_id=run_id)
    # the first worker comes back from the dead: its writes are fenced off
    dead.add_event(run_id, _event(EventKind.ANSWER, 2, text="stale"))
    dead.finish(run_id, {"status": RunStatus.ANSWERED, "answer": "stale"})
    assert runs.get(run_id)["status"] == RunStatus.RUNNING
    live.add_event(run_id, _event(EventKind.ROUTE, 0, route="single"))
    assert live.heartbeat(run_id, 0.2)
    time.sleep(0.3)
    # the second (last) attempt dies too: failed, with a reason, never stuck
    assert runs.requeue_expired() == [(run_id, "failed", 2)]
    assert not live.heartbeat(run_id)
    run = runs.get(run_id)
    assert run["status"] == RunStatus.FAILED and "lease expired" in run["error"]
    assert runs.claim() is None
    events = runs.events(run_id)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) == list(range(len(seqs)))  # one increasing sequence
    kinds = [e.kind for e in events]
    assert kinds == [EventKind.ROUTE, EventKind.TOOL_CALL, EventKind.ERROR, EventKind.ROUTE,
                     EventKind.ERROR]
    assert "queued again" in events[2].data["error"] and "giving up" in events[4].data["error"]
    dead.close()
    live.close()


def test_a_claimed_run_finishes_once(runs: PgRunStore, pg_url) -> None:
    run_id = runs.enqueue("q")
    worker = PgRunStore(pg_url, worker="w1")
    job = worker.claim()
    worker.start(job["question"], run_id=run_id, driver="pipeline", max_steps=4)
    worker.add_event(run_id, _event(EventKind.ANSWER, 0, text="done"))
    worker.finish(run_id, {"status": RunStatus.ANSWERED, "answer": "done", "steps": 1})
    run = runs.get(run_id)
    assert run["status"] == RunStatus.ANSWERED and run["max_steps"] == 4
    assert runs.requeue_expired() == [] and runs.claim() is None
    worker.close()


def test_engine_records_its_runs_in_postgres(pg_small_url) -> None:
    from ragloop.agent.engine import Engine
    from ragloop.kb import KnowledgeBase

    with KnowledgeBase.open(pg_small_url) as kb:
        engine = Engine(kb)
        assert isinstance(engine.runs, PgRunStore)
        result = engine.ask("Who approves expenses above £2,500?", route="single")
        assert result.status == RunStatus.ANSWERED
        assert any(c.doc_id == "policies/travel.md" for c in result.citations)
        run = engine.runs.get(result.run_id)
        assert run["status"] == RunStatus.ANSWERED
        kinds = [e.kind for e in engine.runs.events(result.run_id)]
        assert kinds[0] == EventKind.ROUTE and kinds[-1] == EventKind.ANSWER
        engine.runs.close()
