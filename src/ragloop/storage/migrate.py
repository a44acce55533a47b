"""`ragloop migrate SRC DST`: copy a knowledge base between SQLite folders and Postgres URLs.

Copies documents, sections, chunks with their vectors (no re-embedding), the embedding cache,
the meta (embedder name, dim), and the runs with their events (storage.migrate_runs). Either
side may be SQLite or Postgres. Documents already in DST with the same doc_id are replaced;
others are kept. Runs keep their run_id: one already in DST is left alone, so migrating twice
copies no run twice. A run still queued or running in SRC is copied as failed (interrupted):
DST's workers never run it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragloop.core.errors import EmbedderMismatchError, UserError
from ragloop.core.types import Chunk, ParsedDocument, SectionText
from ragloop.storage.backend import SqliteBackend, open_backend
from ragloop.storage.location import is_postgres_url
from ragloop.storage.migrate_runs import (
    IN_FLIGHT,
    has_runs_table,
    run_pages,
    select_runs,
    settled,
)
from ragloop.storage.protocols import DocumentWrite, RunCopy, RunStore

if TYPE_CHECKING:
    from pgvector import Vector

BATCH_CHUNKS = 2000
# Meta keys that belong to one backend's internals, never copied.
INTERNAL_META = {"generation", "ts_config", "pg_vector_dim"}


@dataclass
class MigrateReport:
    documents: int = 0
    chunks: int = 0
    embeddings: int = 0
    runs: int = 0
    events: int = 0
    runs_interrupted: int = 0  # copied as failed: still queued or running in SRC
    runs_present: int = 0  # already in DST (same run_id), left alone
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        text = (
            f"copied {self.documents} documents, {self.chunks} chunks,"
            f" {self.embeddings} cached embeddings, {self.runs} runs and {self.events}"
            f" run events in {self.seconds:.1f} s"
        )
        if self.runs_interrupted:
            text += (
                f"; {self.runs_interrupted} run(s) still queued or running in the source"
                " were copied as failed (interrupted)"
            )
        if self.runs_present:
            text += f"; {self.runs_present} run(s) already there were left alone"
        return text


class _Source:
    """Read side: meta, whole documents with their chunk vectors, the embedding cache."""

    def meta(self) -> dict[str, str]: ...
    def documents(self, model: str) -> Iterator[DocumentWrite]: ...
    def embeddings(self) -> Iterator[tuple[str, str, np.ndarray]]: ...
    def runs(self) -> Iterator[list[RunCopy]]: ...
    def close(self) -> None: ...


def _array(value: Vector | np.ndarray | list[float]) -> np.ndarray:
    """A vector as float32 numpy (pgvector's Vector, a numpy array or a list)."""
    if not isinstance(value, np.ndarray | list):
        # only a Postgres source gives a Vector; pgvector is the optional extra `postgres`
        from pgvector import Vector

        if isinstance(value, Vector):
            value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def _write(doc_row: tuple, sections: list[tuple], chunks: list[tuple]) -> DocumentWrite:
    """doc_row (doc_id, title, source, mime, hash, metadata as JSON text or decoded);
    sections (section, title_path, text); chunks (section, section_title, ord, text,
    embed_hash, vector)."""
    doc_id, title, source, mime, content_hash, metadata = doc_row
    doc = ParsedDocument(
        doc_id=doc_id,
        title=title,
        source=source,
        mime=mime,
        sections=[SectionText(s, tuple(p), t) for s, p, t in sections],
        metadata=json.loads(metadata) if isinstance(metadata, str) else (metadata or {}),
    )
    missing = [c for c in chunks if c[5] is None]
    if missing:
        raise UserError(
            f"{doc_id}: {len(missing)} chunk(s) have no stored vector in the"
            " source; re-ingest it there first (`ragloop ingest`)."
        )
    vectors = (
        np.vstack([_array(c[5]) for c in chunks]) if chunks else np.zeros((0, 0), dtype=np.float32)
    )
    return DocumentWrite(
        doc=doc,
        content_hash=content_hash,
        chunks=[
            Chunk(doc_id=doc_id, section=c[0], section_title=c[1], ord=c[2], text=c[3])
            for c in chunks
        ],
        vectors=vectors,
        embed_hashes=[c[4] for c in chunks],
    )


class _SqliteSource(_Source):
    def __init__(self, folder: Path) -> None:
        db = SqliteBackend(folder, create=False).db_path  # "No knowledge base at …" if none
        self.db = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta"))

    def documents(self, model: str) -> Iterator[DocumentWrite]:
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(documents)")}
        # a knowledge base from before document metadata (opened read-only: not altered)
        metadata = "metadata" if "metadata" in columns else "'{}'"
        for row in self.db.execute(
            f"SELECT doc_id, title, source, mime, content_hash, {metadata} FROM documents"
            " ORDER BY doc_id"
        ).fetchall():
            sections = [
                (s, json.loads(p), t)
                for s, p, t in self.db.execute(
                    "SELECT section, title_path, text FROM sections WHERE doc_id=? ORDER BY ord",
                    (row[0],),
                )
            ]
            chunks = [
                (
                    sec,
                    st,
                    o,
                    text,
                    h,
                    None if blob is None else np.frombuffer(blob, dtype=np.float32),
                )
                for sec, st, o, text, h, blob in self.db.execute(
                    "SELECT c.section, coalesce(s.title, ''), c.ord, c.text, c.embed_hash, e.vector"
                    " FROM chunks c LEFT JOIN sections s ON s.doc_id = c.doc_id"
                    " AND s.section = c.section"
                    " LEFT JOIN embeddings e ON e.model = ? AND e.hash = c.embed_hash"
                    " WHERE c.doc_id = ? ORDER BY c.id",
                    (model, row[0]),
                )
            ]
            yield _write(row, sections, chunks)

    def embeddings(self) -> Iterator[tuple[str, str, np.ndarray]]:
        for model, h, blob in self.db.execute("SELECT model, hash, vector FROM embeddings"):
            yield model, h, np.frombuffer(blob, dtype=np.float32)

    def runs(self) -> Iterator[list[RunCopy]]:
        if has_runs_table(self.db):
            yield from run_pages(self.db, "?", select=select_runs(self.db))

    def close(self) -> None:
        self.db.close()


class _PostgresSource(_Source):
    def __init__(self, url: str) -> None:
        from pgvector.psycopg import register_vector

        from ragloop.storage.postgres.store import PostgresStore, connect

        PostgresStore(url).close()  # applies migrations, checks the schema
        self.conn = connect(url, autocommit=True)
        register_vector(self.conn)

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def documents(self, model: str) -> Iterator[DocumentWrite]:
        del model  # the vectors are on the chunks
        docs = self.conn.execute(
            "SELECT doc_id, title, source, mime, content_hash, metadata"
            ' FROM documents ORDER BY doc_id COLLATE "C"'
        ).fetchall()
        for row in docs:
            sections = [
                (s, p if isinstance(p, list) else json.loads(p), t)
                for s, p, t in self.conn.execute(
                    "SELECT section, title_path, text FROM sections WHERE doc_id=%s ORDER BY ord",
                    (row[0],),
                ).fetchall()
            ]
            chunks = self.conn.execute(
                "SELECT c.section, coalesce(s.title, ''), c.ord, c.text, c.embed_hash,"
                " c.embedding FROM chunks c LEFT JOIN sections s ON s.doc_id = c.doc_id"
                " AND s.section = c.section WHERE c.doc_id = %s ORDER BY c.id",
                (row[0],),
            ).fetchall()
            yield _write(row, sections, [tuple(c) for c in chunks])

    def embeddings(self) -> Iterator[tuple[str, str, np.ndarray]]:
        with self.conn.transaction(), self.conn.cursor(name="ragloop_migrate_cache") as cur:
            cur.execute("SELECT model, hash, vector FROM embeddings")
            for model, h, blob in cur:
                yield model, h, np.frombuffer(bytes(blob), dtype=np.float32)

    def runs(self) -> Iterator[list[RunCopy]]:
        yield from run_pages(self.conn, "%s")

    def close(self) -> None:
        self.conn.close()


def _open_source(location: str) -> _Source:
    if is_postgres_url(location):
        return _PostgresSource(location)
    return _SqliteSource(Path(location))


def _batches(docs: Iterator[DocumentWrite], report: MigrateReport) -> Iterator[list[DocumentWrite]]:
    batch: list[DocumentWrite] = []
    size = 0
    for w in docs:
        batch.append(w)
        size += len(w.chunks)
        report.documents += 1
        report.chunks += len(w.chunks)
        if size >= BATCH_CHUNKS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _copy_runs(source: _Source, runs: RunStore, report: MigrateReport) -> None:
    """The runs and their events, a page at a time, each page in one DST transaction."""
    for page in source.runs():
        in_flight = {r.record["run_id"] for r in page if r.record["status"] in IN_FLIGHT}
        inserted, events = runs.import_runs([RunCopy(settled(r.record), r.events) for r in page])
        report.runs += len(inserted)
        report.events += events
        report.runs_present += len(page) - len(inserted)
        report.runs_interrupted += len(in_flight.intersection(inserted))


def migrate(src: str, dst: str) -> MigrateReport:
    """Copy the knowledge base at `src` into `dst` (folders or postgresql:// URLs)."""
    if str(src) == str(dst):
        raise UserError("SRC and DST are the same knowledge base.")
    started = time.perf_counter()
    report = MigrateReport()
    source = _open_source(str(src))
    try:
        meta = source.meta()
        model = meta.get("embedder")
        if not model:
            raise UserError(f"{src} has no embedder recorded: it is empty (nothing to copy).")
        backend = open_backend(str(dst))
        try:
            store = backend.store
            recorded = store.get_meta("embedder")
            if recorded and recorded != model:
                raise EmbedderMismatchError(
                    f"{dst} was built with the embedder {recorded!r}, {src} with {model!r}:"
                    " their vectors cannot live together; migrate into an empty knowledge base."
                )
            for key, value in meta.items():
                if key not in INTERNAL_META:
                    store.set_meta(key, value)
            pending: dict[str, dict[str, np.ndarray]] = {}
            count = 0
            for m, h, v in source.embeddings():
                pending.setdefault(m, {})[h] = v
                count += 1
                if count % 2000 == 0:
                    for mm, items in pending.items():
                        store.put_embeddings(mm, items)
                    pending = {}
            for mm, items in pending.items():
                store.put_embeddings(mm, items)
            report.embeddings = count
            docs = source.documents(model)
            store.bulk_load(_batches(docs, report))
            store.flush()
            _copy_runs(source, backend.runs, report)
        finally:
            backend.close()
    finally:
        source.close()
    report.seconds = time.perf_counter() - started
    return report
