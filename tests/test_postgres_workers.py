"""Several processes, one Postgres: real `ragloop worker` subprocesses take queued runs exactly
once; a worker killed with SIGKILL mid-run has its run retried (or failed after its last
attempt), never lost or stuck; two API servers share one queue and one event log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from ragloop.core.types import EventKind, RunStatus
from ragloop.storage.postgres.runs import PgRunStore

FINAL = {RunStatus.ANSWERED, RunStatus.UNANSWERABLE, RunStatus.TRUNCATED, RunStatus.FAILED}
QUESTIONS = [
    "Who approves travel expenses above £2,500?",
    "What battery does the T9 sensor use?",
    "Who is the Chief Financial Officer of Northwind Labs?",
    "Is the T9 sensor waterproof?",
    "How far ahead must flights be booked?",
    "Who approves expenses up to £2,500?",
]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") and not k.startswith("RAGLOOP_")}
    env["RAGLOOP_MODEL"] = "offline"
    return env


class Workers:
    """`ragloop worker` subprocesses, each logging to its own file."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = folder
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *extra: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragloop", "worker", "--kb", self.url, "--lease", "2",
             "--poll", "0.5", *extra], stdout=log, stderr=subprocess.STDOUT, env=_env())
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def wait_ready(self, *names: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        for name in names:
            while "ready" not in self.log(name):
                assert self.procs[name].poll() is None, self.log(name)
                assert time.monotonic() < deadline, f"{name} never got ready:\n{self.log(name)}"
                time.sleep(0.1)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def workers(pg_small_url, tmp_path):
    w = Workers(pg_small_url, tmp_path)
    yield w
    w.stop_all()


def _rows(url: str) -> dict[str, tuple]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT run_id, status, attempts, worker FROM runs").fetchall()
    return {r[0]: r[1:] for r in rows}


def _wait_final(runs: PgRunStore, ids: list[str], timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = {i: runs.get(i) for i in ids}
        if all(r["status"] in FINAL for r in got.values()):
            return got
        assert time.monotonic() < deadline, {i: r["status"] for i, r in got.items()}
        time.sleep(0.2)


def _answers(runs: PgRunStore, run_id: str) -> int:
    return sum(e.kind == EventKind.ANSWER for e in runs.events(run_id))


def test_two_workers_run_every_queued_run_exactly_once(pg_small_url, workers) -> None:
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready("w1", "w2")
    runs = PgRunStore(pg_small_url)
    try:
        ids = [runs.enqueue(q, {"route": "single" if i % 2 else "agent"})
               for i, q in enumerate(QUESTIONS * 2)]
        done = _wait_final(runs, ids, timeout=300)
        assert {r["status"] for r in done.values()} <= {RunStatus.ANSWERED,
                                                        RunStatus.UNANSWERABLE}
        rows = _rows(pg_small_url)
        assert all(rows[i][1] == 1 for i in ids), rows  # one attempt each: nothing ran twice
        assert all(_answers(runs, i) == 1 for i in ids)
        by_worker = {rows[i][2] for i in ids}
        assert len(by_worker) == 2, by_worker  # both processes took runs
        assert runs.queue_depth() == 0
    finally:
        runs.close()
    workers.stop_all()
    for name in ("w1", "w2"):
        assert workers.procs[name].returncode == 0, workers.log(name)
        assert "worker stopped after" in workers.log(name)


def _wait_running_with_events(runs: PgRunStore, run_id: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not (runs.get(run_id)["status"] == RunStatus.RUNNING and runs.events(run_id)):
        assert time.monotonic() < deadline, runs.get(run_id)
        time.sleep(0.05)


def test_a_worker_killed_mid_run_has_its_run_retried_or_failed(pg_small_url, workers) -> None:
    """Two victims (slowed by 1 s per event) each die mid-run by SIGKILL: the run with
    attempts left is finished by a survivor; the one on its last attempt is marked failed."""
    runs = PgRunStore(pg_small_url)
    try:
        retried = runs.enqueue(QUESTIONS[0], {"route": "agent"})
        last = runs.enqueue(QUESTIONS[1], {"route": "agent"}, max_attempts=1)
        victims = [workers.start(f"victim{i}", "--event-delay", "1.0") for i in (1, 2)]
        for run_id in (retried, last):
            _wait_running_with_events(runs, run_id)
        for victim in victims:
            victim.send_signal(signal.SIGKILL)
        for victim in victims:
            victim.wait(10)
        rows = _rows(pg_small_url)
        assert rows[retried][0] == rows[last][0] == RunStatus.RUNNING  # they died mid-run
        assert rows[retried][2] != rows[last][2]  # one run per victim
        workers.start("survivor")
        done = _wait_final(runs, [retried, last], timeout=240)
        assert done[retried]["status"] in (RunStatus.ANSWERED, RunStatus.UNANSWERABLE)
        assert _rows(pg_small_url)[retried][1] == 2  # the second attempt finished it
        events = runs.events(retried)
        assert [e.seq for e in events] == list(range(len(events)))
        notes = [e.data["error"] for e in events if e.kind == EventKind.ERROR]
        assert len(notes) == 1 and "queued again" in notes[0]
        assert _answers(runs, retried) == 1
        assert done[last]["status"] == RunStatus.FAILED
        assert "lease expired" in done[last]["error"]
        assert _answers(runs, last) == 0
        assert runs.claim() is None and runs.queue_depth() == 0
    finally:
        runs.close()


def test_two_api_servers_share_the_queue_and_the_event_log(pg_small_url, workers) -> None:
    """Server A only enqueues (--no-local-workers); a `ragloop worker` runs the run; server B
    streams its events over SSE from the database and lists it."""
    from test_server import LiveServer, read_sse

    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings

    settings = Settings().with_(kb=pg_small_url, model="offline")
    workers.start("w1")
    workers.wait_ready("w1")
    a = create_app(settings, local_workers=0)
    b = create_app(settings, local_workers=0)
    with LiveServer(a) as live_a, LiveServer(b) as live_b, live_a.client() as ca, \
            live_b.client() as cb:
        started = ca.post("/runs", json={"question": QUESTIONS[0], "route": "agent"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        assert cb.get(f"/runs/{run_id}").json()["status"] in ("queued", "running",
                                                             "answered", "unanswerable")
        with cb.stream("GET", f"/runs/{run_id}/events") as response:
            assert response.status_code == 200
            events = read_sse(response)
        steps = [d for e, _, d in events if e == "step"]
        assert events[-1][0] == "end" and events[-1][2]["status"] in ("answered",
                                                                      "unanswerable")
        assert [s["seq"] for s in steps] == list(range(len(steps)))
        assert steps[0]["kind"] == "route" and steps[-1]["kind"] == "answer"
        assert run_id in {r["run_id"] for r in cb.get("/runs").json()["runs"]}
        assert ca.get("/metrics").json()["runs"] >= 1
        hits = cb.get("/search", params={"q": "CR123A battery", "k": 2}).json()["hits"]
        assert hits[0]["doc_id"] == "products/sensor.md"
        docs = ca.get("/documents").json()["documents"]
        assert len(docs) == 3
