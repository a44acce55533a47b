"""The default Store: one folder holding a SQLite record plus derived tantivy/hnswlib indexes.

SQLite is the source of truth (documents, sections, chunks, embeddings, runs). The indexes
are rebuilt from it whenever their saved generation differs from the record's, so a copied,
interrupted or half-written folder heals itself on the next open.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ragloop.store.base import DocumentWrite
from ragloop.store.indexes import FullTextIndex, VectorIndex
from ragloop.store.languages import ENGLISH, get_language
from ragloop.types import DocumentInfo, Hit, SectionInfo

DB_FILE = "ragloop.db"
VECTOR_FILE = "vectors.hnsw"
# Bumped when the index files change shape (engine, schema): older folders rebuild on open.
INDEX_FORMAT = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, source TEXT NOT NULL, mime TEXT NOT NULL,
  content_hash TEXT NOT NULL, ingested_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sections (
  doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
  section TEXT NOT NULL, ord INTEGER NOT NULL, title TEXT NOT NULL, title_path TEXT NOT NULL,
  text TEXT NOT NULL, PRIMARY KEY (doc_id, section));
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
  section TEXT NOT NULL, ord INTEGER NOT NULL, text TEXT NOT NULL, embed_hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE TABLE IF NOT EXISTS embeddings (
  model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,
  PRIMARY KEY (model, hash)) WITHOUT ROWID;
"""


def index_text(doc_title: str, title_path: Iterable[str], text: str) -> str:
    """What BM25 sees for a chunk: its document and section titles, then its text."""
    heads = [doc_title, *title_path]
    return " \n".join([*dict.fromkeys(h for h in heads if h), text])


class SqliteStore:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.db_path = self.folder / DB_FILE
        self.lock = threading.RLock()
        self.db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None,
                                  timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.executescript(SCHEMA)
        self._fulltext: FullTextIndex | None = None
        self._vectors: VectorIndex | None = None
        self._loaded_generation: int | None = None

    # -- record -----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    def content_hashes(self) -> dict[str, str]:
        with self.lock:
            return dict(self.db.execute("SELECT doc_id, content_hash FROM documents"))

    def _bump(self, db: sqlite3.Connection) -> int:
        gen = int((db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
                   or ["0"])[0]) + 1
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('generation', ?)", (str(gen),))
        return gen

    def write_documents(self, writes: list[DocumentWrite]) -> None:
        """Replace each document with its new sections and chunks, in one transaction."""
        if not writes:
            return
        fulltext, vectors = self._indexes()
        self._mark_indexes_dirty()
        ids: list[int] = []
        batch: list[np.ndarray] = []
        with self.transaction() as db:
            for w in writes:
                self._delete_doc(db, w.doc.doc_id, fulltext, vectors)
                d = w.doc
                db.execute(
                    "INSERT INTO documents(doc_id, title, source, mime, content_hash, ingested_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (d.doc_id, d.title, d.source, d.mime, w.content_hash, time.time()))
                db.executemany(
                    "INSERT INTO sections(doc_id, section, ord, title, title_path, text)"
                    " VALUES (?,?,?,?,?,?)",
                    [(d.doc_id, s.section, i, s.title, json.dumps(list(s.title_path)), s.text)
                     for i, s in enumerate(d.sections)])
                paths = {s.section: s.title_path for s in d.sections}
                for c, h in zip(w.chunks, w.embed_hashes, strict=True):
                    cur = db.execute(
                        "INSERT INTO chunks(doc_id, section, ord, text, embed_hash)"
                        " VALUES (?,?,?,?,?)", (c.doc_id, c.section, c.ord, c.text, h))
                    ids.append(cur.lastrowid)
                    fulltext.add(cur.lastrowid, c.doc_id,
                                 index_text(d.title, paths.get(c.section, ()), c.text))
                batch.append(w.vectors)
            # one add for the whole batch: hnswlib inserts in parallel only within one call
            if ids:
                vectors.add(np.asarray(ids, dtype=np.uint64), np.vstack(batch))
            self._loaded_generation = self._bump(db)

    def _delete_doc(self, db: sqlite3.Connection, doc_id: str, fulltext: FullTextIndex,
                    vectors: VectorIndex) -> bool:
        ids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE doc_id=?", (doc_id,))]
        existed = db.execute("DELETE FROM documents WHERE doc_id=?", (doc_id,)).rowcount > 0
        if ids:
            vectors.remove(ids)
            fulltext.delete_doc(doc_id)
        return existed

    def remove_document(self, doc_id: str) -> bool:
        fulltext, vectors = self._indexes()
        self._mark_indexes_dirty()
        with self.transaction() as db:
            existed = self._delete_doc(db, doc_id, fulltext, vectors)
            self._loaded_generation = self._bump(db)
        self.flush()
        return existed

    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]:
        ids = list(ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self.lock:
            rows = self.db.execute(
                "SELECT c.id, c.doc_id, c.section, s.title, c.text, d.title FROM chunks c"
                " JOIN sections s ON s.doc_id = c.doc_id AND s.section = c.section"
                f" JOIN documents d ON d.doc_id = c.doc_id WHERE c.id IN ({marks})", ids)
            return {r[0]: Hit(chunk_id=r[0], doc_id=r[1], section=r[2], section_title=r[3],
                              text=r[4], doc_title=r[5]) for r in rows}

    def _section(self, row: tuple) -> SectionInfo:
        return SectionInfo(doc_id=row[0], section=row[1], title=row[2],
                           title_path=tuple(json.loads(row[3])), text=row[4], ord=row[5])

    def section(self, doc_id: str, section: str) -> SectionInfo | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc_id, section, title, title_path, text, ord FROM sections"
                " WHERE doc_id=? AND section=?", (doc_id, section)).fetchone()
        return self._section(row) if row else None

    def sections(self, doc_id: str) -> list[SectionInfo]:
        with self.lock:
            rows = self.db.execute(
                "SELECT doc_id, section, title, title_path, text, ord FROM sections"
                " WHERE doc_id=? ORDER BY ord", (doc_id,)).fetchall()
        return [self._section(r) for r in rows]

    def documents(self) -> list[DocumentInfo]:
        with self.lock:
            rows = self.db.execute(
                "SELECT d.doc_id, d.title, d.source, d.content_hash,"
                " (SELECT count(*) FROM sections s WHERE s.doc_id = d.doc_id),"
                " (SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id)"
                " FROM documents d ORDER BY d.doc_id").fetchall()
        return [DocumentInfo(doc_id=r[0], title=r[1], source=r[2], content_hash=r[3],
                             sections=r[4], chunks=r[5]) for r in rows]

    def chunk_count(self) -> int:
        with self.lock:
            return self.db.execute("SELECT count(*) FROM chunks").fetchone()[0]

    # -- embedding cache ------------------------------------------------------------------

    def get_embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self.lock:
            for start in range(0, len(hashes), 500):
                part = hashes[start:start + 500]
                marks = ",".join("?" * len(part))
                for h, blob in self.db.execute(
                        f"SELECT hash, vector FROM embeddings WHERE model=? AND hash IN ({marks})",
                        [model, *part]):
                    out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_embeddings(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self.lock:
            self.db.executemany(
                "INSERT OR IGNORE INTO embeddings(model, hash, vector) VALUES (?,?,?)",
                [(model, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()])

    # -- derived indexes -------------------------------------------------------------------

    @property
    def _state_path(self) -> Path:
        return self.folder / "index" / "state.json"

    def _state_generation(self) -> int | None:
        """The generation state.json claims for the saved indexes (None: none, or unreadable)."""
        try:
            state = json.loads(self._state_path.read_text())
            if state.get("format") != INDEX_FORMAT:
                return None
            # built with another analyzer (the KB's language was set after it was made)
            if state.get("language", ENGLISH) != self.language():
                return None
            return int(state["generation"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _saved_generation(self) -> int | None:
        """The generation the saved indexes match, or None when they can't be trusted."""
        generation = self._state_generation()
        if generation is not None and not (self.folder / "index" / VECTOR_FILE).exists() \
                and self.chunk_count():
            return None
        return generation

    def _write_state(self, generation: int | None) -> None:
        self._state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"generation": generation, "format": INDEX_FORMAT,
                                   "language": self.language()}))
        tmp.replace(self._state_path)

    def _mark_indexes_dirty(self) -> None:
        # only what the file claims: a full check would count the chunks on every write batch
        if self._state_generation() is not None:
            self._write_state(None)

    def language(self) -> str:
        """The KB's language code (store/languages.py); a KB from before languages: English."""
        return get_language(self.get_meta("language")).code

    def _dim(self) -> int:
        return int(self.get_meta("dim") or 0)

    def _indexes(self) -> tuple[FullTextIndex, VectorIndex]:
        """The loaded indexes, (re)loaded or rebuilt when another writer moved the record on."""
        with self.lock:
            current = self.generation()
            fresh = (self._fulltext is not None and self._vectors is not None
                     and self._loaded_generation == current
                     and self._vectors.dim == (self._dim() or 1)
                     and self._fulltext.language == self.language())
            if fresh:
                return self._fulltext, self._vectors  # type: ignore[return-value]
            folder = self.folder / "index"
            if self._fulltext is not None and self._fulltext.pending:
                self._fulltext.commit()
            stale = self._saved_generation() != current
            if stale and self._fulltext is not None:
                self._fulltext.destroy()
            if stale and self._fulltext_language(folder) != self.language():
                shutil.rmtree(folder / "fulltext", ignore_errors=True)  # another analyzer
            if stale:
                for name in (VECTOR_FILE, VECTOR_FILE + ".json", "vectors.usearch"):
                    (folder / name).unlink(missing_ok=True)
            self._fulltext = FullTextIndex(folder / "fulltext", self.language())
            self._vectors = VectorIndex(folder / VECTOR_FILE, self._dim() or 1)
            if stale:
                self._rebuild(self._fulltext, self._vectors)
            self._loaded_generation = current
            return self._fulltext, self._vectors

    def _fulltext_language(self, folder: Path) -> str | None:
        """The language the fulltext files on disk were built with (None: unknown)."""
        try:
            return json.loads((folder / "state.json").read_text()).get("language", ENGLISH)
        except (OSError, ValueError, AttributeError):
            return None

    def _rebuild(self, fulltext: FullTextIndex, vectors: VectorIndex) -> None:
        fulltext.clear()
        vectors.clear()
        model = self.get_meta("embedder") or ""
        rows = self.db.execute(
            "SELECT c.id, c.doc_id, c.text, d.title, s.title_path, e.vector FROM chunks c"
            " JOIN documents d ON d.doc_id = c.doc_id"
            " JOIN sections s ON s.doc_id = c.doc_id AND s.section = c.section"
            " LEFT JOIN embeddings e ON e.model = ? AND e.hash = c.embed_hash", (model,))
        while batch := rows.fetchmany(10_000):
            keys, vecs = [], []
            for cid, doc_id, text, title, path, blob in batch:
                fulltext.add(cid, doc_id, index_text(title, json.loads(path), text))
                if blob is not None:
                    keys.append(cid)
                    vecs.append(np.frombuffer(blob, dtype=np.float32))
            if keys:
                vectors.add(np.asarray(keys, dtype=np.uint64), np.vstack(vecs))
        fulltext.commit()
        vectors.save()
        self._write_state(self.generation())

    def search_bm25(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        fulltext, _ = self._indexes()
        if fulltext.pending:
            fulltext.commit()
        return fulltext.search(terms, k)

    def search_vector(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        _, vectors = self._indexes()
        return vectors.search(vector, k)

    def index_sizes(self) -> tuple[int, int]:
        fulltext, vectors = self._indexes()
        if fulltext.pending:
            fulltext.commit()
        return fulltext.size(), vectors.size()

    def flush(self) -> None:
        """Persist the indexes and record that they match the current generation."""
        with self.lock:
            if self._fulltext is None:
                return
            self._fulltext.commit()
            assert self._vectors is not None
            self._vectors.save()
            self._write_state(self._loaded_generation)

    def close(self) -> None:
        with self.lock:
            self.flush()
            self.db.close()
