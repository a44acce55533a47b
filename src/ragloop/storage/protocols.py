"""The storage protocols: Store (the record of documents, sections and chunks, with BM25 and
vector search), RunStore (runs and their events, beside the store), RunQueue (a run queue
shared by workers, which only a database backend has) and Backend (the three of one knowledge
base, from `storage.backend.open_backend(location)`). Each backend declares what it is; nothing
is probed with hasattr."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypedDict

import numpy as np

from ragloop.core.errors import UserError
from ragloop.core.events import Event
from ragloop.core.types import Chunk, DocumentInfo, Hit, ParsedDocument, SectionInfo

if TYPE_CHECKING:
    from ragloop.storage.principals import PrincipalStore


@dataclass
class DocumentWrite:
    """One document to (re)place: parse, content hash, chunks, their vectors (row i = chunk i)."""

    doc: ParsedDocument
    content_hash: str
    chunks: list[Chunk]
    vectors: np.ndarray
    embed_hashes: list[str]

    def document_row(self) -> tuple[str, str, str, str, str, float, str]:
        """(doc_id, title, source, mime, content_hash, ingested_at, metadata JSON) of the
        documents table."""
        d = self.doc
        return (d.doc_id, d.title, d.source, d.mime, self.content_hash, time.time(),
                json.dumps(d.metadata, ensure_ascii=False, sort_keys=True))

    def section_rows(self) -> list[tuple[str, str, int, str, str, str]]:
        """(doc_id, section, ord, title, title_path JSON, text) of the sections table."""
        d = self.doc
        return [(d.doc_id, s.section, i, s.title, json.dumps(list(s.title_path)), s.text)
                for i, s in enumerate(d.sections)]


class Store(Protocol):
    #: where it lives: a folder path or a postgresql:// URL (its RunStore lives there too)
    location: str
    #: the knowledge base's folder (uploads are kept there); None for a database
    folder: Path | None

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def claim_meta(self, key: str, value: str) -> str:
        """The value stored under `key`, `value` stored first when there is none; of two
        writers claiming at once, both get the one stored first."""
        ...
    def language(self) -> str:
        """The knowledge base's language code (retrieval/languages.py); English when none is
        recorded."""
        ...
    def set_language(self, code: str) -> None:
        """Record the language before the first write (Postgres also picks its text search
        configuration)."""
        ...
    def content_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of every stored document."""
        ...
    def write_documents(self, writes: list[DocumentWrite]) -> None:
        """Replace each document (and its chunks) atomically; indexes follow."""
        ...
    def bulk_load(self, batches: Iterable[list[DocumentWrite]]) -> int:
        """Write many documents into an empty store, as fast as the backend can (Postgres:
        COPY, then the indexes); the number of documents written."""
        ...
    def remove_document(self, doc_id: str) -> bool: ...
    def document_fields(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(doc_id, source, metadata) of every document: what a search filter selects by."""
        ...
    # `within`: the doc ids hits may come from (a search filter; None: all). Each index
    # applies it while it searches, so the top k are the top k of those documents.
    def search_bm25(self, terms: list[str], k: int, within: list[str] | None = None,
                    counted: list[str] | None = None) -> list[tuple[int, float]]:
        """(chunk_id, score) best first; terms are already plain words (OR query).
        `counted`: the doc ids whose chunks BM25's statistics count (N, df, avgdl), and the
        only ones hits come from (a principal's readable documents, kb/access.py: a score
        is then what a KB holding only them would give); None: the whole KB's statistics,
        unchanged by `within`."""
        ...
    def search_vector(self, vector: np.ndarray, k: int,
                      within: list[str] | None = None) -> list[tuple[int, float]]:
        """(chunk_id, cosine similarity) best first."""
        ...
    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]: ...
    def chunk_docs(self, ids: Iterable[int]) -> dict[int, str]:
        """{chunk_id: doc_id} of the chunks the record holds (no text read)."""
        ...
    def section(self, doc_id: str, section: str) -> SectionInfo | None: ...
    def sections(self, doc_id: str) -> list[SectionInfo]: ...
    def documents(self) -> list[DocumentInfo]: ...
    def chunk_count(self) -> int: ...
    def generation(self) -> int:
        """A number that changes with every committed write of documents (an add, a replace,
        a removal), seen by any process as soon as the write commits: what caches of a KB's
        content are keyed by (a document replaced by one of as many chunks changes it too)."""
        ...
    def get_embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]: ...
    def put_embeddings(self, model: str, items: dict[str, np.ndarray]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


# Above this share of runs forced to answer at MAX_STEPS, or of runs that used every step,
# the ceiling is too low, retrieval is failing or the loop spends steps it does not need.
TRUNCATED_WARN_PCT = 10.0


@dataclass
class Metrics:
    runs: int
    mean_steps: float
    truncated_pct: float
    discarded_pct: float
    mean_latency_s: float
    mean_cost_usd: float
    by_status: dict[str, int]
    # runs whose steps reached their ceiling, however they ended: a run can spend every step
    # and still end `answered` (it is then not in truncated_pct, which counts the runs forced
    # to answer: status truncated)
    used_all_steps_pct: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def warn_truncated(self) -> bool:
        return self.truncated_pct > TRUNCATED_WARN_PCT

    @property
    def warn_used_all_steps(self) -> bool:
        return self.used_all_steps_pct > TRUNCATED_WARN_PCT


def used_all_steps(steps: int | None, max_steps: int | None) -> bool:
    """A run that reached its step ceiling (runs recorded without a ceiling never do)."""
    return bool(max_steps) and (steps or 0) >= (max_steps or 0)


class RunRecord(TypedDict):
    """A stored run, as both run stores return it and the API and CLI send it (JSON as is)."""

    run_id: str
    question: str
    status: str
    route: str | None
    route_reason: str | None
    driver: str | None
    model: str | None
    answer: str | None
    citations: list[dict[str, Any]]
    usage: dict[str, Any]
    steps: int
    max_steps: int
    latency_s: float | None
    error: str | None
    created_at: float
    finished_at: float | None
    # who started it: cli | api | eval | mcp ("" for runs recorded before sources were)
    source: str
    # a turn of a conversation (issue 30): its id, the turn's index (0 first) and the
    # standalone question that was searched; None for a single question
    conversation_id: str | None
    turn: int | None
    standalone: str | None
    # who asked (issue 43.4): the principal's user name; None for a run asked with no
    # principal or as the built-in admin (the single key, the keyless server, the CLI
    # without --as) and for runs recorded before owners: those are read by admins only
    owner: str | None


#: who starts runs; the dashboard's figures leave eval runs out unless asked for them
RUN_SOURCES = ("cli", "api", "eval", "mcp")
#: metrics(source=...): every run but eval's (the default), every run, or one source
DASHBOARD_SOURCES = "default"
ALL_SOURCES = "all"


def owner_filter(owner: str | None) -> tuple[str, list[str]]:
    """(SQL condition on runs.owner as in source_filter, its values): None reads every
    run (an admin), a name only that user's runs."""
    return ("TRUE", []) if owner is None else ("owner = {}", [owner])


def source_filter(source: str | None) -> tuple[str, list[str]]:
    """(SQL condition on runs.source with %s/? placeholders as "{}", its values) for a list
    or metrics filter: None lists every run, "default" every run but eval's, "all" every run,
    else that one source (a UserError for a name that is not a source)."""
    if source is None or source == ALL_SOURCES:
        return "TRUE", []
    if source == DASHBOARD_SOURCES:
        return "source <> {}", ["eval"]
    if source not in RUN_SOURCES:
        raise UserError(f"source must be one of {', '.join(RUN_SOURCES)}, all or default,"
                        f" not {source!r}")
    return "source = {}", [source]


#: the runs table's columns in RunRecord order (both stores' SELECT lists)
RUN_COLUMNS = ", ".join(RunRecord.__annotations__)


def run_record(row: Sequence[object]) -> RunRecord:
    """A RunRecord from a row of RUN_COLUMNS; the JSON columns come as text (SQLite) or
    already decoded (Postgres json)."""
    values = dict(zip(RunRecord.__annotations__, row, strict=True))
    for key, empty in (("citations", []), ("usage", {})):
        value = values[key]
        values[key] = json.loads(value) if isinstance(value, str) else (value or empty)
    return RunRecord(**values)  # type: ignore[typeddict-item]


#: the runs columns that hold JSON (text in SQLite, json in Postgres)
RUN_JSON_COLUMNS = ("citations", "usage")


def run_row(run: RunRecord) -> tuple[object, ...]:
    """The values of RUN_COLUMNS for `run` (the inverse of run_record), JSON columns as text."""
    values: dict[str, Any] = dict(run)
    return tuple(json.dumps(values[k]) if k in RUN_JSON_COLUMNS else values[k]
                 for k in RunRecord.__annotations__)


class ConversationSummary(TypedDict):
    """One conversation as listed: its id, its first question, how many turns, when."""

    conversation_id: str
    title: str
    turns: int
    created_at: float
    updated_at: float


#: the conversations, most recently continued first (both stores; "{}" is the limit's mark)
#: the owner condition ("{where}", from owner_filter) is applied to the turns counted; a
#: conversation is its asker's alone (another user's "new" never continues it), so the first
#: turn's question is the owner's too
CONVERSATIONS_SQL = (
    "SELECT conversation_id,"
    " (SELECT question FROM runs f WHERE f.conversation_id = r.conversation_id"
    "  ORDER BY turn LIMIT 1), count(*), min(created_at), max(created_at)"
    " FROM runs r WHERE conversation_id IS NOT NULL AND {where} GROUP BY conversation_id"
    " ORDER BY max(created_at) DESC LIMIT {limit}")


def conversation_summary(row: Sequence[object]) -> ConversationSummary:
    cid, title, turns, created, updated = row
    return ConversationSummary(conversation_id=str(cid), title=str(title or ""),
                               turns=int(turns), created_at=float(created),  # type: ignore[arg-type]
                               updated_at=float(updated))  # type: ignore[arg-type]


class StoredEvent(NamedTuple):
    """One row of a run's events as stored: `data` is its JSON text."""

    seq: int
    kind: str
    step: int
    data: str
    ts: float


@dataclass
class RunCopy:
    """A run and its events, read from one knowledge base to be written into another."""

    record: RunRecord
    events: list[StoredEvent]


class QueuedRun(TypedDict):
    """A run a worker claimed from the queue."""

    run_id: str
    question: str
    options: dict[str, Any]  # the ask() options it was queued with (route, driver, max_steps)
    attempts: int
    max_attempts: int


class QueueListener(Protocol):
    """Wake-ups from the shared database (Postgres LISTEN/NOTIFY); the caller closes it."""

    def payloads(self, timeout: float, stop_after: int | None = None) -> Iterator[str]:
        """The payloads of the notifications that arrive within `timeout` seconds, as they
        come (at most `stop_after`)."""
        ...
    def close(self) -> None: ...


class RunQueue(Protocol):
    """Runs waiting for a worker, in the shared database: claimed by exactly one worker under a
    lease that a heartbeat extends; an expired lease puts the run back."""

    def enqueue(self, question: str, options: dict[str, Any] | None = None, *,
                run_id: str | None = None, max_attempts: int = 3,
                owner: str | None = None) -> str: ...
    def claim(self, lease_s: float | None = None) -> QueuedRun | None: ...
    def heartbeat(self, run_id: str, lease_s: float | None = None) -> bool: ...
    def release(self, run_id: str) -> None: ...
    def requeue_expired(self) -> list[tuple[str, str, int]]: ...
    def queue_depth(self) -> int: ...
    def listen(self, channels: tuple[str, ...]) -> QueueListener:
        """Wake-ups on `channels`: "ragloop_queue" (a run was queued), "ragloop_events"
        (a run wrote an event; the payload is its run_id)."""
        ...


class RunStore(Protocol):
    """Runs, their events and the dashboard's metrics, in the knowledge base's own storage.

    Every read takes `owner` (issue 43.4): None reads every run (an admin's view), a user's
    name only the runs that user asked (RunRecord.owner): another's read as missing. The one
    place that chooses it for a principal is `storage.owned.runs_for`."""

    def start(self, question: str, *, driver: str = "", model: str = "", max_steps: int = 0,
              run_id: str | None = None, source: str = "api",
              conversation_id: str | None = None, owner: str | None = None) -> str:
        """Record a run as running; with `conversation_id` it is that conversation's next
        turn (its index: one more than the conversation's last). `owner`: who asked."""
        ...
    def add_event(self, run_id: str, event: Event) -> None: ...
    def finish(self, run_id: str, result: dict[str, Any]) -> None: ...
    def get(self, run_id: str, owner: str | None = None) -> RunRecord | None: ...
    def events(self, run_id: str, after_seq: int = -1) -> list[Event]: ...
    def list(self, limit: int = 20, source: str | None = None,
             owner: str | None = None) -> list[RunRecord]:
        """The newest runs (source: see source_filter)."""
        ...
    def metrics(self, source: str | None = DASHBOARD_SOURCES,
                owner: str | None = None) -> Metrics:
        """The dashboard figures over finished runs; by default eval runs are left out."""
        ...
    def conversation(self, conversation_id: str, owner: str | None = None) -> list[RunRecord]:
        """The turns of a conversation, first first ([] for an unknown id)."""
        ...

    def answered(self, answer: str, owner: str | None = None) -> RunRecord | None:
        """The latest finished run whose answer is `answer` exactly (a chat client's history
        sends back the answers it was given: each is read as the run that wrote it)."""
        ...

    def conversations(self, limit: int = 20,
                      owner: str | None = None) -> list[ConversationSummary]:
        """The conversations most recently continued first."""
        ...
    def mark_interrupted(self) -> list[str]: ...
    def import_runs(self, runs: list[RunCopy]) -> tuple[list[str], int]:
        """Insert runs copied from another knowledge base (`ragloop migrate`) as recorded,
        run_id and event seq kept, in one transaction; a run_id already here is left alone
        (its events too). Returns the run_ids inserted and the number of events."""
        ...
    def close(self) -> None: ...


class Backend(Protocol):
    """One knowledge base's storage: its Store, its RunStore and its RunQueue (None where runs
    execute in-process). Each is opened on first use and closed by close(): the one who opened
    the backend closes it, everyone else borrows."""

    #: a folder path or a postgresql:// URL
    location: str

    @property
    def store(self) -> Store: ...
    @property
    def runs(self) -> RunStore: ...
    @property
    def queue(self) -> RunQueue | None: ...
    @property
    def principals(self) -> PrincipalStore:
        """Users, groups and API keys (storage/principals.py), beside the runs."""
        ...
    def close(self) -> None: ...
