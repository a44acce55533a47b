"""Background runs: a small thread pool, and a way for SSE streams to follow a run.

A run id is made in the request and returned at once; the run itself goes to a worker thread.
Until its worker starts, the run exists only here ("queued"); from then on the RunStore has it,
with every event written as it happens. Followers read the store (the one truth, which also
covers runs written by another process) and are woken early when a run in this process emits.

The answer's pieces (AnswerDeltaEvent) are streamed, never stored (a row per token; the final
AnswerEvent holds the answer). So while a run of this process goes, its followers read every
event it emitted, pieces included, from `live` (kept here until the run ends); once it ended,
or for a run of another process, they read the store: a follower that comes late or resumes
after the answer gets the stored events and the whole answer, never half a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import anyio

from ragloop.agent.engine import Engine
from ragloop.agent.run import RunResult
from ragloop.core.access import Principal
from ragloop.core.errors import RunCancelled
from ragloop.core.events import AnswerDeltaEvent, Event
from ragloop.core.ids import new_id
from ragloop.core.types import RunStatus
from ragloop.storage.owned import may_see, owner_of, runs_for
from ragloop.storage.protocols import RunRecord, RunStore

log = logging.getLogger("ragloop.apps.server")

# A follower re-reads the store at least this often even when nothing woke it (a run written by
# another process, a lost wake-up).
POLL_S = 0.5
KEPT_ENDED = 64  # ended runs whose in-process event lists stay readable (`ended`)
CANCELLED = ("cancelled: the client of the streamed reply disconnected"
             " (RAGLOOP_STOP_ON_DISCONNECT=off lets such runs finish)")


@dataclass
class Pending:
    run_id: str
    question: str
    conversation_id: str | None = None
    owner: str | None = None  # who asked (storage/owned.py)
    created_at: float = field(default_factory=time.time)

    def record(self) -> RunRecord:
        return RunRecord(run_id=self.run_id, question=self.question, status=RunStatus.QUEUED,
                         route=None, route_reason=None, driver=None, model=None, answer=None,
                         citations=[], usage={}, steps=0, max_steps=0, latency_s=None,
                         error=None, created_at=self.created_at, finished_at=None,
                         source="api", conversation_id=self.conversation_id, turn=None,
                         standalone=None, owner=self.owner)


class JobRunner:
    """Runs questions on `engine` in `workers` threads and wakes the streams that follow them."""

    def __init__(self, engine: Engine, runs: RunStore, workers: int = 2) -> None:
        self.engine = engine
        self.runs = runs
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ragloop-run")
        self.lock = threading.Lock()
        self.pending: dict[str, Pending] = {}
        self.futures: dict[str, Future[Any]] = {}
        # every event of each run going in this process, in order (see the module docstring)
        self.live: dict[str, list[Event]] = {}
        # the last runs' lists once ended: a follower that was reading one when its run ended
        # reads its rest (answer pieces are not stored, so the store cannot give them)
        self.ended: OrderedDict[str, list[Event]] = OrderedDict()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    # -- running ------------------------------------------------------------------------

    def submit(self, question: str, *, route: str = "auto", driver: str | None = None,
               max_steps: int | None = None, conversation_id: str | None = None,
               principal: Principal | None = None) -> str:
        """`principal`: who asks; the run reads only what it may (None: everything)."""
        run_id = new_id()
        with self.lock:
            self.pending[run_id] = Pending(run_id, question, conversation_id, owner_of(principal))
            self.futures[run_id] = self.executor.submit(
                self._run, run_id, question, route, driver, max_steps, conversation_id,
                principal)
        return run_id

    def ask(self, question: str, *, run_id: str | None = None,
            on_event: Callable[[Event], None] | None = None,
            conversation_id: str | None = None, cancel: threading.Event | None = None,
            principal: Principal | None = None, **options: Any) -> Future[RunResult]:
        """A run whose caller waits for its result (POST /ask, the OpenAI endpoint), in the
        same pool and the same lists as a background run: queued, then live (its events to
        the followers of /runs/{id}/events, counted in `active`) until it ends. `on_event`
        hears each event after the followers' list has it; `options`: any other keyword of
        `Engine.ask` (route, driver, step ceiling, the history, knowledge bases). `cancel`:
        once set, the run stops at its next event (RunCancelled: it ends `failed`), before
        any further step or model call; an answer being streamed stops at its next piece."""
        run_id = run_id or new_id()

        def heard(event: Event) -> None:
            self._pop_pending(run_id)
            self.heard(run_id, event)
            if cancel is not None and cancel.is_set():
                raise RunCancelled(CANCELLED)
            if on_event is not None:
                on_event(event)

        def run() -> RunResult:
            try:
                return self.engine.for_principal(principal).ask(
                    question, on_event=heard, run_id=run_id, conversation_id=conversation_id,
                    **options)
            finally:
                self._ended(run_id)

        with self.lock:  # registered before its worker can end it (`_ended` takes the lock)
            self.pending[run_id] = Pending(run_id, question, conversation_id, owner_of(principal))
            future = self.futures[run_id] = self.executor.submit(run)
        return future

    def _run(self, run_id: str, question: str, route: str, driver: str | None,
             max_steps: int | None, conversation_id: str | None = None,
             principal: Principal | None = None) -> None:
        def on_event(event: Event) -> None:
            self._pop_pending(run_id)
            self.heard(run_id, event)

        try:
            self.engine.for_principal(principal).ask(
                question, route=route, driver=driver, max_steps=max_steps, on_event=on_event,
                run_id=run_id, conversation_id=conversation_id)
        except Exception as exc:  # the engine has marked the run failed if it had started it
            log.exception("run %s failed", run_id)
            if self.runs.get(run_id) is None:
                runs_for(self.runs, principal).start(question, run_id=run_id,
                                                     conversation_id=conversation_id)
                self.runs.finish(run_id, {"status": RunStatus.FAILED, "error": repr(exc)})
        finally:
            self._ended(run_id)

    def _ended(self, run_id: str) -> None:
        self._pop_pending(run_id)
        with self.lock:
            self.futures.pop(run_id, None)
        self.heard(run_id, None)

    def heard(self, run_id: str, event: Event | None) -> None:
        """An event of a run going in this process (kept in `live`), or None once the run has
        ended (its store row is final: `live` is dropped); its followers are woken."""
        with self.lock:
            if event is None:
                done = self.live.pop(run_id, None)
                if done is not None:
                    self.ended[run_id] = done
                    while len(self.ended) > KEPT_ENDED:
                        self.ended.popitem(last=False)
            else:
                self.live.setdefault(run_id, []).append(event)
        self.notify(run_id)

    def _pop_pending(self, run_id: str) -> None:
        if run_id in self.pending:
            with self.lock:
                self.pending.pop(run_id, None)

    def shutdown(self) -> None:
        """Drop queued runs (they were never written), let running ones finish."""
        self.executor.shutdown(wait=True, cancel_futures=True)

    # -- reading ------------------------------------------------------------------------

    def get(self, run_id: str, principal: Principal | None = None) -> RunRecord | None:
        """The run, queued or stored; None when there is none or `principal` may not read
        it (another user's: storage/owned.py), the two alike."""
        # Pending first: a run leaves `pending` only after its row exists, so this order never
        # misses a run that moves from one to the other between the two reads.
        with self.lock:
            queued = self.pending.get(run_id)
        run = runs_for(self.runs, principal).get(run_id)
        if run is not None:
            return run
        return queued.record() if queued and may_see(principal, queued.owner) else None

    def has_conversation(self, conversation_id: str,
                         principal: Principal | None = None) -> bool:
        """Whether a run request may continue `conversation_id`: stored turns, or a turn
        still queued here (a run is written when its worker starts it, so a follow-up sent
        before then would miss the first turn; Postgres's queue row holds the id from
        enqueue). Pending first, as in `get`: a run leaves it only once its row exists."""
        with self.lock:
            if any(p.conversation_id == conversation_id and may_see(principal, p.owner)
                   for p in self.pending.values()):
                return True
        return bool(runs_for(self.runs, principal).conversation(conversation_id))

    def events_after(self, run_id: str, after_seq: int,
                     read: tuple[int, int] | None = None
                     ) -> tuple[list[Event], tuple[int, int] | None]:
        """The run's events after step `after_seq`, and where this read ended. While the run
        goes in this process they come from `live` (the answer's pieces too, which share the
        seq of the step they come before, so a follower goes on from where its last read
        ended: `read`, the list's identity and length then); else from the store (None)."""
        with self.lock:
            live = self.live.get(run_id)
            if live is None and read is not None:
                done = self.ended.get(run_id)
                if done is not None and read[0] == id(done):
                    return done[read[1]:], None  # the rest of the list it was reading
            if live is not None:
                if read is not None and read[0] == id(live):
                    start = read[1]
                else:
                    start = next((i for i, e in enumerate(live) if e.seq > after_seq),
                                 len(live))
                return live[start:], (id(live), len(live))
        return self.runs.events(run_id, after_seq), None

    def _going(self, run_id: str) -> bool:
        """The run is going in this process (its events are in `live`)."""
        with self.lock:
            return run_id in self.live

    def active(self) -> int:
        with self.lock:
            return len(self.futures)

    # -- following ----------------------------------------------------------------------

    def notify(self, run_id: str) -> None:
        with self.lock:
            waiters = list(self._waiters.get(run_id, ()))
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: its stream is gone
                loop.call_soon_threadsafe(event.set)

    async def follow(self, run_id: str, after_seq: int = -1
                     ) -> AsyncIterator[Event | RunRecord | None]:
        """Every event of `run_id` after step `after_seq`, in order (the answer's pieces too
        while the run goes in this process), then the final run row (None if the run is
        unknown).

        Reads the status before the events: the engine writes every event before it marks
        the run finished, so once a finished status was seen, the events read next are all
        (from `live` while the runner still holds them, else from the store). While the run
        goes in this process (it is in `live`) the row is not read at all: it cannot have
        ended before `heard(run_id, None)`, which wakes this follower once more; so a wake-up
        per answer piece costs no read of the store.
        """
        wake = asyncio.Event()
        token = (asyncio.get_running_loop(), wake)
        with self.lock:
            self._waiters.setdefault(run_id, set()).add(token)
        # a follower resuming in the middle of an answer gets its pieces again from the
        # start: a reset first says to drop the ones it had
        resumed = after_seq >= 0
        read: tuple[int, int] | None = None
        try:
            while True:
                wake.clear()
                going = self._going(run_id)
                run = None if going else await anyio.to_thread.run_sync(self.get, run_id)
                events, read = await anyio.to_thread.run_sync(self.events_after, run_id,
                                                              after_seq, read)
                for event in events:
                    if not isinstance(event, AnswerDeltaEvent):
                        after_seq = event.seq
                    elif resumed:
                        yield AnswerDeltaEvent(reset=True, step=event.step, seq=event.seq)
                    resumed = False
                    yield event
                if not going and (run is None
                                  or run["status"] not in (RunStatus.RUNNING, RunStatus.QUEUED)):
                    yield run
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), POLL_S)
        finally:
            with self.lock:
                waiters = self._waiters.get(run_id)
                if waiters is not None:
                    waiters.discard(token)
                    if not waiters:
                        del self._waiters[run_id]
