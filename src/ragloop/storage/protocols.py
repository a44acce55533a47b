"""The storage protocols: Store (the record of documents, sections and chunks, with BM25 and
vector search), RunStore (runs and their events, beside the store) and RunQueue (a run queue
shared by workers, which only a database backend has). Each backend declares what it is; nothing
is probed with hasattr."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragloop.core.events import Event
from ragloop.core.types import Chunk, DocumentInfo, Hit, ParsedDocument, SectionInfo


@dataclass
class DocumentWrite:
    """One document to (re)place: parse, content hash, chunks, their vectors (row i = chunk i)."""

    doc: ParsedDocument
    content_hash: str
    chunks: list[Chunk]
    vectors: np.ndarray
    embed_hashes: list[str]


class Store(Protocol):
    #: where it lives: a folder path or a postgresql:// URL (its RunStore lives there too)
    location: str
    #: the knowledge base's folder (uploads are kept there); None for a database
    folder: Path | None

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
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
    def search_bm25(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        """(chunk_id, score) best first; terms are already plain words (OR query)."""
        ...
    def search_vector(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk_id, cosine similarity) best first."""
        ...
    def search_hybrid(self, terms: list[str], vector: np.ndarray, k: int,
                      depth: int) -> list[Hit]:
        """Both sides to `depth`, fused by RRF (retrieval.fusion), the top `k` as Hits."""
        ...
    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]: ...
    def section(self, doc_id: str, section: str) -> SectionInfo | None: ...
    def sections(self, doc_id: str) -> list[SectionInfo]: ...
    def documents(self) -> list[DocumentInfo]: ...
    def chunk_count(self) -> int: ...
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


class RunQueue(Protocol):
    """Runs waiting for a worker, in the shared database: claimed by exactly one worker under a
    lease that a heartbeat extends; an expired lease puts the run back."""

    def enqueue(self, question: str, options: dict[str, Any] | None = None, *,
                run_id: str | None = None, max_attempts: int = 3) -> str: ...
    def claim(self, lease_s: float | None = None) -> dict[str, Any] | None: ...
    def heartbeat(self, run_id: str, lease_s: float | None = None) -> bool: ...
    def release(self, run_id: str) -> None: ...
    def requeue_expired(self) -> list[tuple[str, str, int]]: ...
    def queue_depth(self) -> int: ...


class RunStore(Protocol):
    """Runs, their events and the dashboard's metrics, in the knowledge base's own storage."""

    def start(self, question: str, *, driver: str = "", model: str = "", max_steps: int = 0,
              run_id: str | None = None) -> str: ...
    def add_event(self, run_id: str, event: Event) -> None: ...
    def finish(self, run_id: str, result: dict[str, Any]) -> None: ...
    def get(self, run_id: str) -> dict[str, Any] | None: ...
    def events(self, run_id: str, after_seq: int = -1) -> list[Event]: ...
    def list(self, limit: int = 20) -> list[dict[str, Any]]: ...
    def metrics(self) -> Metrics: ...
    def mark_interrupted(self) -> list[str]: ...
    def close(self) -> None: ...

    @property
    def queue(self) -> RunQueue | None:
        """The shared run queue of a database backend; None where runs execute in-process."""
        ...
