"""Background runs shared by many processes through Postgres: `ragloop worker --kb postgresql://…`.

A worker loops: re-queue runs whose lease ran out, claim the oldest queued run
(`FOR UPDATE SKIP LOCKED`: exactly one worker gets it), run it with a heartbeat thread that
keeps the lease alive, write its events as they happen; when the queue is empty it sleeps until
a NOTIFY on `ragloop_queue` (or `poll_s`, whichever comes first). A worker killed mid-run
stops heart-beating; once its lease expires any other worker (or API server) re-queues the
run, up to `max_attempts` (then it is marked failed).

`QueueJobRunner` is the API server's side: with a Postgres knowledge base `ragloop serve`
enqueues runs in the database (so any worker, on any machine, can take them), runs
`local_workers` of these loops in threads (0 with --no-local-workers), and wakes its SSE
followers on NOTIFY `ragloop_events`, so a server streams runs that other processes execute.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from ragloop.agent.engine import Engine
from ragloop.apps.jobs import JobRunner
from ragloop.core.access import Principal, principal_from_dict, principal_to_dict
from ragloop.core.config import Settings
from ragloop.core.errors import UserError
from ragloop.core.events import Event
from ragloop.core.types import RunStatus
from ragloop.storage.backend import open_backend
from ragloop.storage.location import is_postgres_url
from ragloop.storage.owned import owner_of, runs_for
from ragloop.storage.postgres.runs import worker_name
from ragloop.storage.protocols import QueuedRun, QueueListener, RunQueue, RunRecord, RunStore

log = logging.getLogger("ragloop.apps.worker")

DEFAULT_LEASE_S = 30.0
DEFAULT_POLL_S = 2.0


class Worker:
    """Takes runs from `queue` and answers them with `engine` (recording them in `runs`), one
    at a time."""

    def __init__(self, engine: Engine, runs: RunStore, queue: RunQueue, *,
                 lease_s: float = DEFAULT_LEASE_S, poll_s: float = DEFAULT_POLL_S,
                 event_delay_s: float = 0.0,
                 listener: Callable[[str, Event | None], None] | None = None) -> None:
        """`listener(run_id, event)` hears each event of a run this worker executes (the
        answer's pieces too, which are not stored), then `(run_id, None)` once it ended."""
        self.engine = engine
        self.listener = listener
        self.runs = runs
        self.queue = queue
        self.lease_s = float(lease_s)
        self.poll_s = float(poll_s)
        self.event_delay_s = float(event_delay_s)
        self.done = 0
        self.busy = False

    def run_once(self) -> bool:
        """Re-queue expired runs, then claim and execute one run; False if none was queued."""
        for run_id, status, attempts in self.queue.requeue_expired():
            log.warning("run %s lost its worker (attempt %d): %s", run_id, attempts, status)
        job = self.queue.claim(self.lease_s)
        if job is None:
            return False
        self.busy = True
        try:
            self._execute(job)
        finally:
            self.busy = False
            self.done += 1
        return True

    def _execute(self, job: QueuedRun) -> None:
        run_id = job["run_id"]
        opts = job["options"]
        log.info("run %s: attempt %d/%d", run_id, job["attempts"], job["max_attempts"])
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_s / 3):
                try:
                    if not self.queue.heartbeat(run_id, self.lease_s):
                        log.warning("run %s: lease lost", run_id)
                        return
                except Exception:  # a blip: the next beat (or the lease) decides
                    log.exception("run %s: heartbeat failed", run_id)

        def on_event(event: Event) -> None:
            if self.listener is not None:
                self.listener(run_id, event)
            if self.event_delay_s:
                time.sleep(self.event_delay_s)

        beater = threading.Thread(target=beat, name=f"ragloop-lease-{run_id}", daemon=True)
        beater.start()
        try:
            engine = self.engine.for_principal(principal_from_dict(opts.get("principal")))
            engine.ask(job["question"], route=opts.get("route") or "auto",
                       driver=opts.get("driver"), max_steps=opts.get("max_steps"),
                       on_event=on_event, run_id=run_id,
                       conversation_id=opts.get("conversation_id"))
        except Exception as exc:  # the engine marked the run failed if it had started it
            log.exception("run %s failed", run_id)
            run = self.runs.get(run_id)
            if run is not None and run["status"] in (RunStatus.RUNNING, RunStatus.QUEUED):
                self.runs.finish(run_id, {"status": RunStatus.FAILED, "error": repr(exc)})
        finally:
            if self.listener is not None:
                self.listener(run_id, None)
            stop.set()
            beater.join(timeout=5)
            self.queue.release(run_id)

    def serve(self, stop: threading.Event, max_runs: int | None = None) -> int:
        """Loop until `stop` is set (or `max_runs` runs were done); returns runs done."""
        listener: QueueListener | None = None
        try:
            listener = self.queue.listen(("ragloop_queue",))
        except Exception:
            log.warning("LISTEN unavailable; polling every %.1f s", self.poll_s)
        try:
            while not stop.is_set():
                if max_runs is not None and self.done >= max_runs:
                    break
                try:
                    if self.run_once():
                        continue
                except Exception:
                    log.exception("worker loop error; retrying in %.1f s", self.poll_s)
                    if stop.wait(self.poll_s):
                        break
                    continue
                self._wait(listener, stop)
        finally:
            if listener is not None:
                with contextlib.suppress(Exception):
                    listener.close()
        return self.done

    def _wait(self, listener: QueueListener | None, stop: threading.Event) -> None:
        if listener is None:
            stop.wait(self.poll_s)
            return
        # short slices so a stop request is honoured quickly
        deadline = time.monotonic() + self.poll_s
        while not stop.is_set() and time.monotonic() < deadline:
            if any(True for _ in listener.payloads(min(0.5, self.poll_s), stop_after=1)):
                return


class QueueJobRunner(JobRunner):
    """JobRunner over the Postgres queue: submit() enqueues, `local_workers` threads consume."""

    def __init__(self, engine: Engine, runs: RunStore, queue: RunQueue, workers: int = 2,
                 local_workers: int | None = None, *, lease_s: float = DEFAULT_LEASE_S,
                 poll_s: float = DEFAULT_POLL_S) -> None:
        super().__init__(engine, runs, max(1, workers))  # the pool serves synchronous /ask
        self.queue = queue
        self.stop = threading.Event()
        count = workers if local_workers is None else local_workers
        self.workers = [Worker(engine, runs, queue, lease_s=lease_s, poll_s=poll_s,
                               listener=self.heard)
                        for _ in range(max(0, count))]
        self.threads = [threading.Thread(target=w.serve, args=(self.stop,), daemon=True,
                                         name=f"ragloop-queue-{i}")
                        for i, w in enumerate(self.workers)]
        self._listener_thread = threading.Thread(target=self._listen, daemon=True,
                                                 name="ragloop-events")
        for t in self.threads:
            t.start()
        self._listener_thread.start()

    def submit(self, question: str, *, route: str = "auto", driver: str | None = None,
               max_steps: int | None = None, conversation_id: str | None = None,
               principal: Principal | None = None) -> str:
        # the asker goes with the run: the worker that claims it reads only what it may
        # and owns it from the queue on (storage/owned.py)
        return self.queue.enqueue(question, {"route": route, "driver": driver,
                                             "max_steps": max_steps,
                                             "conversation_id": conversation_id,
                                             "principal": principal_to_dict(principal)},
                                  owner=owner_of(principal))

    def get(self, run_id: str, principal: Principal | None = None) -> RunRecord | None:
        return runs_for(self.runs, principal).get(run_id)

    def active(self) -> int:
        """Runs this server's own queue threads are executing."""
        return sum(1 for w in self.workers if w.busy)

    def _listen(self) -> None:
        """Wake the followers of a run when any process writes one of its events."""
        while not self.stop.is_set():
            try:
                listener = self.queue.listen(("ragloop_events",))
            except Exception:
                if self.stop.wait(2.0):
                    return
                continue
            try:
                while not self.stop.is_set():
                    for run_id in listener.payloads(0.5):
                        self.notify(run_id)
            except Exception:
                log.warning("event listener lost its connection; reconnecting")
            finally:
                with contextlib.suppress(Exception):
                    listener.close()

    def shutdown(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        self._listener_thread.join(timeout=5)
        super().shutdown()


def run_worker(settings: Settings, *, lease_s: float = DEFAULT_LEASE_S,
               poll_s: float = DEFAULT_POLL_S, max_runs: int | None = None,
               event_delay_s: float = 0.0,
               stop: threading.Event | None = None) -> int:
    """`ragloop worker`: open the knowledge base and serve its queue until stopped."""
    from ragloop.kb import KnowledgeBase

    stop = stop or threading.Event()
    # a folder is refused below (nothing is opened yet); a database must hold a knowledge base
    backend = open_backend(settings.kb, create=not is_postgres_url(settings.kb))
    queue = backend.queue
    if queue is None:
        backend.close()
        raise UserError("`ragloop worker` needs a Postgres knowledge base: --kb"
                        " postgresql://user@host/db (a SQLite folder is served by"
                        " `ragloop serve` alone).")
    try:
        kb = KnowledgeBase(backend, settings)
    except Exception:
        backend.close()
        raise
    with kb:
        if kb.store.chunk_count():
            kb.search("warm up", k=1)  # load the embedder before the first claim
        engine = Engine(kb, settings, backend.runs)
        worker = Worker(engine, backend.runs, queue, lease_s=lease_s, poll_s=poll_s,
                        event_delay_s=event_delay_s)
        log.info("worker %s ready", worker_name())
        return worker.serve(stop, max_runs)
