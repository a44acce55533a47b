"""The default Store: one folder holding a SQLite record plus derived tantivy/hnswlib indexes.

SQLite is the source of truth (documents, sections, chunks, embeddings, runs). The indexes
are rebuilt from it whenever their saved generation differs from the record's, so a copied,
interrupted or half-written folder heals itself on the next open.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from urllib.parse import quote

import numpy as np

from ragloop.core.errors import UserError
from ragloop.core.types import DocumentInfo, Hit, SectionInfo
from ragloop.retrieval.bm25 import Postings, Vocabulary, query_weights, terms_of
from ragloop.retrieval.index_text import index_text
from ragloop.retrieval.languages import ENGLISH, get_language
from ragloop.storage.protocols import DocumentWrite
from ragloop.storage.sqlite.disk import disk_full_as_user_error, disk_full_error, is_disk_full
from ragloop.storage.sqlite.indexes import FullTextIndex, VectorIndex
from ragloop.storage.sqlite.lock import WriteLock

log = logging.getLogger(__name__)

DB_FILE = "ragloop.db"
# how many filters' chunk ids are kept (a few principals searching at once)
ALLOWED_KEPT = 8
# how many filters' BM25 postings (larger: a few principals at once)
POSTINGS_KEPT = 4
# how many chunks' analysed tokens are kept across writes (~0.45 KB each at 80 tokens):
# past that they are analysed again from the record
ANALYSED_KEPT = 100_000
VECTOR_FILE = "vectors.hnsw"
# Bumped when the index files change shape (engine, schema): older folders rebuild on open.
INDEX_FORMAT = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
  doc_id TEXT PRIMARY KEY, title TEXT NOT NULL, source TEXT NOT NULL, mime TEXT NOT NULL,
  content_hash TEXT NOT NULL, ingested_at REAL NOT NULL, metadata TEXT NOT NULL DEFAULT '{}');
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


# The columns ragloop reads: a database lacking them is not a knowledge base.
PROBES = {"documents": "doc_id, title, source, mime, content_hash, ingested_at",
          "sections": "doc_id, section, ord, title, title_path, text",
          "chunks": "id, doc_id, section, ord, text, embed_hash",
          "embeddings": "model, hash, vector", "meta": "key, value"}


def not_a_knowledge_base(db_path: Path, exc: sqlite3.DatabaseError) -> UserError:
    """A ragloop.db that SQLite cannot read as ours (garbage, truncated, another program's)."""
    return UserError(f"{db_path} is not a ragloop knowledge base ({exc}). Restore it from a"
                     " backup, or ingest into a new --kb folder.")


class SqliteStore:
    def __init__(self, folder: str | Path) -> None:
        """Opens (or creates) the knowledge base in `folder`; storage.backend checks first
        that a read-only command names an existing one."""
        self.folder = Path(folder)
        self.location = str(folder)
        self.db_path = self.folder / DB_FILE
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.write_lock = WriteLock(self.folder)
        #: why the record is open read-only (None: it is writable)
        self.read_only: str | None = None
        self.db = self._connect()
        self._fulltext: FullTextIndex | None = None
        self._vectors: VectorIndex | None = None
        self._loaded_generation: int | None = None
        # the last filters' chunk ids (_allowed), by (generation, doc ids)
        self._allowed_kept: dict[tuple[int, tuple[str, ...]], frozenset[int]] = {}
        # the last filters' BM25 postings (_postings), by (generation, language, doc ids)
        self._postings_kept: dict[tuple[int, str, tuple[str, ...]], Postings] = {}
        # each chunk's BM25 tokens once analysed (_build_postings), in one language
        self._analysis_lock = threading.Lock()
        self._analysed: dict[int, np.ndarray] = {}
        self._vocabulary = Vocabulary()
        self._analysed_language: str | None = None
        # the loaded indexes live in memory only (built by a read that could not write them)
        self._in_memory = False
        #: why searches answer from indexes that are not the saved, current ones (None: they are)
        self.degraded: str | None = None

    def _connect(self) -> sqlite3.Connection:
        try:
            return self._open(str(self.db_path), immutable=False)
        except sqlite3.DatabaseError as exc:
            if not (self.db_path.is_file() and is_disk_full(exc, self.folder)):
                raise not_a_knowledge_base(self.db_path, exc) from None
        # No room for SQLite's shared-memory file, which WAL mode needs even to read: read the
        # database file as it is (immutable: no locks, no -shm; a cleanly closed KB has its
        # whole record there). Writes then fail with the full-disk message.
        try:
            db = self._open(f"file:{quote(str(self.db_path.resolve()))}?immutable=1",
                            immutable=True)
        except sqlite3.DatabaseError as exc:
            raise not_a_knowledge_base(self.db_path, exc) from None
        self.read_only = f"no space left on the disk of {self.folder}"
        return db

    def _open(self, target: str, immutable: bool) -> sqlite3.Connection:
        db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=30,
                             uri=immutable)
        try:
            if not immutable:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            if not immutable:
                db.executescript(SCHEMA)
                columns = {r[1] for r in db.execute("PRAGMA table_info(documents)")}
                if "metadata" not in columns:  # a knowledge base from before metadata
                    db.execute("ALTER TABLE documents ADD COLUMN metadata TEXT NOT NULL"
                               " DEFAULT '{}'")
            for table, columns in PROBES.items():  # another program's tables of the same name
                db.execute(f"SELECT {columns} FROM {table} LIMIT 0")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _no_space_is_a_user_error(self) -> AbstractContextManager[None]:
        return disk_full_as_user_error(self.folder, self._index_folder)

    def _writable(self) -> None:
        if self.read_only is not None:
            raise disk_full_error(self.folder)

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
        self._writable()
        with self.lock, self._no_space_is_a_user_error():
            self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def claim_meta(self, key: str, value: str) -> str:
        self._writable()
        with self.lock, self._no_space_is_a_user_error():
            self.db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
            return self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0]

    def generation(self) -> int:
        # bumped in the transaction of every write (`_bump`); read in autocommit mode, each
        # read sees the last commit of any process (PRAGMA data_version would say only
        # whether another connection wrote, and per connection)
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
        self._writable()
        with self._no_space_is_a_user_error(), self._index_write():
            self._write(writes)

    def _write(self, writes: list[DocumentWrite]) -> None:
        fulltext, vectors = self._indexes()
        self._mark_indexes_dirty()
        ids: list[int] = []
        batch: list[np.ndarray] = []
        with self.transaction() as db:
            for w in writes:
                self._delete_doc(db, w.doc.doc_id, fulltext, vectors)
                d = w.doc
                db.execute(
                    "INSERT INTO documents(doc_id, title, source, mime, content_hash, ingested_at,"
                    " metadata) VALUES (?,?,?,?,?,?,?)", w.document_row())
                db.executemany(
                    "INSERT INTO sections(doc_id, section, ord, title, title_path, text)"
                    " VALUES (?,?,?,?,?,?)", w.section_rows())
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
        self._writable()
        with self._no_space_is_a_user_error(), self._index_write():
            fulltext, vectors = self._indexes()
            self._mark_indexes_dirty()
            with self.transaction() as db:
                existed = self._delete_doc(db, doc_id, fulltext, vectors)
                self._loaded_generation = self._bump(db)
        self.flush()
        return existed

    def bulk_load(self, batches: Iterable[list[DocumentWrite]]) -> int:
        """Batch by batch through write_documents (each batch is one transaction)."""
        written = 0
        for batch in batches:
            self.write_documents(batch)
            written += len(batch)
        return written

    @contextmanager
    def _index_write(self) -> Iterator[None]:
        """Index changes under the folder's write lock (held until flush); if anything fails,
        the record rolls back and the in-memory indexes, which may hold part of the batch,
        are dropped and marked stale, to be rebuilt from the record."""
        with self.lock:
            self.write_lock.acquire()
            try:
                yield
            except BaseException:
                self._discard_indexes()
                raise

    def _discard_indexes(self) -> None:
        with self.lock:
            if self._fulltext is not None:
                # the folder is rebuilt from the record anyway
                with suppress(Exception):
                    self._fulltext.rollback()
            self._fulltext = self._vectors = None
            self._loaded_generation = None
            self._in_memory = False
            with suppress(OSError):  # `index` unwritable: then no state claims anything
                self._write_state(None)
            self.write_lock.release()

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

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, str]:
        ids = list(ids)
        if not ids:
            return {}
        with self.lock:
            return dict(self.db.execute("SELECT id, doc_id FROM chunks WHERE id IN"
                                        f" ({','.join('?' * len(ids))})", ids))

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
                " (SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id), d.metadata"
                " FROM documents d ORDER BY d.doc_id").fetchall()
        return [DocumentInfo(doc_id=r[0], title=r[1], source=r[2], content_hash=r[3],
                             sections=r[4], chunks=r[5], metadata=json.loads(r[6]))
                for r in rows]

    def document_fields(self) -> list[tuple[str, str, dict]]:
        with self.lock:
            rows = self.db.execute("SELECT doc_id, source, metadata FROM documents").fetchall()
        return [(d, src, json.loads(meta)) for d, src, meta in rows]

    def _chunk_ids(self, doc_ids: list[str]) -> set[int]:
        with self.lock:
            return {r[0] for r in self.db.execute(
                "SELECT id FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?))",
                (json.dumps(doc_ids),))}

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
        """Remember vectors; on a full disk they are not remembered (a search still answers,
        and an ingest meets the full disk at its write, which says so)."""
        if self.read_only is not None:
            return
        with self.lock:
            try:
                self.db.executemany(
                    "INSERT OR IGNORE INTO embeddings(model, hash, vector) VALUES (?,?,?)",
                    [(model, h, np.asarray(v, dtype=np.float32).tobytes())
                     for h, v in items.items()])
            except sqlite3.Error as exc:
                if not is_disk_full(exc, self.folder):
                    raise

    # -- derived indexes -------------------------------------------------------------------

    @property
    def _index_folder(self) -> Path:
        return self.folder / "index"

    @property
    def _state_path(self) -> Path:
        return self._index_folder / "state.json"

    def _state(self) -> dict | None:
        """What state.json claims for the saved indexes (None: nothing, or unreadable)."""
        try:
            state = json.loads(self._state_path.read_text())
            if not isinstance(state, dict) or state.get("format") != INDEX_FORMAT:
                return None
            int(state["generation"])
            # built with another analyzer (the KB's language was set after it was made)
            if state.get("language", ENGLISH) != self.language():
                return None
            return state
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _state_generation(self) -> int | None:
        state = self._state()
        return None if state is None else int(state["generation"])

    def _saved_generation(self) -> int | None:
        """The generation the saved indexes match, or None when they can't be trusted."""
        state = self._state()
        if state is None:
            return None
        if state.get("dim", self._dim() or 1) != (self._dim() or 1):
            return None
        files = state.get("files")
        if isinstance(files, dict):  # the HNSW files as saved (hnswlib trusts what it loads)
            if any(_fingerprint(self._index_folder / name) != list(fp)
                   for name, fp in files.items()):
                return None
        elif not (self._index_folder / VECTOR_FILE).exists() and self.chunk_count():
            return None
        return int(state["generation"])

    def _write_state(self, generation: int | None) -> None:
        state: dict[str, object] = {"generation": generation, "format": INDEX_FORMAT}
        if generation is not None and self._fulltext is not None and self._vectors is not None:
            names = (VECTOR_FILE, VECTOR_FILE + ".json")
            state.update(dim=self._vectors.dim, fulltext=self._fulltext.size(),
                         vectors=len(self._vectors),
                         files={n: _fingerprint(self._index_folder / n) for n in names})
        self._state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path.with_suffix(".tmp")
        state["language"] = self.language()
        tmp.write_text(json.dumps(state))
        tmp.replace(self._state_path)

    def _mark_indexes_dirty(self) -> None:
        # only what the file claims: a full check would count the chunks on every write batch
        if self._state_generation() is not None:
            self._write_state(None)

    def language(self) -> str:
        """The KB's language code (retrieval/languages.py); a KB from before languages:
        English."""
        return get_language(self.get_meta("language")).code

    def set_language(self, code: str) -> None:
        """Record the KB's language (its analyzer follows at the next index load)."""
        self.set_meta("language", code)

    def _dim(self) -> int:
        return int(self.get_meta("dim") or 0)

    def _indexes(self) -> tuple[FullTextIndex, VectorIndex]:
        """The loaded indexes, (re)loaded or rebuilt when another writer moved the record on."""
        with self.lock:
            current = self.generation()
            fresh = (self._fulltext is not None and self._vectors is not None
                     and self._loaded_generation == current
                     and self._vectors.dim == (self._dim() or 1)
                     and self._fulltext.language == self.language()
                     and not (self._in_memory and self.write_lock.held))
            if fresh:
                return self._fulltext, self._vectors  # type: ignore[return-value]
            if self._fulltext is not None and self._fulltext.pending:
                self._fulltext.commit()
            loaded = self._load() if self._saved_generation() == current else None
            if loaded is not None:
                self._set_loaded(loaded, current, None)
                return loaded
            if self.write_lock.held:  # the writer itself: rebuild and save, or fail
                loaded = self._rebuild_locked(waited=False)
                self._set_loaded(loaded, self.generation(), None)
                return loaded
            if not self.write_lock.try_acquire():
                # Readers never wait for a writer (another process's ingest may take hours):
                # keep what we hold, else the indexes as last saved, else the record indexed
                # in memory; either may miss what the running ingest is writing.
                if self._fulltext is not None and self._vectors is not None:
                    return self._fulltext, self._vectors
                why = f"another ingest into {self.folder} is running"
                saved = (self._index_folder / "fulltext" / "meta.json",
                         self._index_folder / VECTOR_FILE)
                # opening a missing tantivy folder would create one under the writer's feet
                stale = self._load() if all(p.is_file() for p in saved) else None
                if stale is not None:
                    self._set_loaded(stale, None, f"{why}: searching the indexes as last saved")
                    return stale
                return self._memory_indexes(why)
            try:
                loaded = self._rebuild_locked(waited=True)
            except Exception as exc:
                if not is_disk_full(exc, self.folder, self._index_folder):
                    raise
                # a read must not need to write: answer from the record, indexed in memory
                return self._memory_indexes(f"{self._index_folder} cannot be written (disk"
                                            " full)")
            finally:
                self.write_lock.release()
            self._set_loaded(loaded, self.generation(), None)
            return loaded

    def _set_loaded(self, loaded: tuple[FullTextIndex, VectorIndex], generation: int | None,
                    degraded: str | None, in_memory: bool = False) -> None:
        self._fulltext, self._vectors = loaded
        self._loaded_generation = generation
        self._in_memory = in_memory
        if degraded is not None and degraded != self.degraded:
            log.warning("note: %s; results may miss recent changes", degraded)
        self.degraded = degraded

    def _memory_indexes(self, why: str) -> tuple[FullTextIndex, VectorIndex]:
        """The record as it is now, indexed in memory only (nothing is written)."""
        current = self.generation()
        loaded = (FullTextIndex(None, self.language()), VectorIndex(None, self._dim() or 1))
        self._rebuild(*loaded, save=False)
        self._set_loaded(loaded, current, f"{why}: searching the record indexed in memory",
                         in_memory=True)
        return loaded

    def _load(self) -> tuple[FullTextIndex, VectorIndex] | None:
        """The saved indexes, or None when a file is damaged (they are rebuilt then)."""
        state = self._state() or {}
        try:
            fulltext = FullTextIndex(self._index_folder / "fulltext", self.language())
            vectors = VectorIndex(self._index_folder / VECTOR_FILE, self._dim() or 1)
            if state.get("fulltext", fulltext.size()) != fulltext.size() \
                    or state.get("vectors", len(vectors)) != len(vectors):
                return None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # tantivy panics are BaseException; any damage means rebuild
            return None
        return fulltext, vectors

    def _rebuild_locked(self, waited: bool) -> tuple[FullTextIndex, VectorIndex]:
        """Rebuild the index folder from the record; the caller holds the write lock."""
        try:
            if waited and self._saved_generation() == self.generation():
                loaded = self._load()  # another writer saved fresh ones while we waited
                if loaded is not None:
                    return loaded
            if self._fulltext is not None:
                self._fulltext.rollback()
            self._fulltext = self._vectors = None
            folder = self._index_folder
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()
            shutil.rmtree(folder / "fulltext", ignore_errors=True)
            for name in (VECTOR_FILE, VECTOR_FILE + ".json", "vectors.usearch"):
                (folder / name).unlink(missing_ok=True)
            self._fulltext = FullTextIndex(folder / "fulltext", self.language())
            self._vectors = VectorIndex(folder / VECTOR_FILE, self._dim() or 1)
            self._rebuild(self._fulltext, self._vectors)
            return self._fulltext, self._vectors
        except BaseException:
            self._discard_indexes()
            raise

    def _rebuild(self, fulltext: FullTextIndex, vectors: VectorIndex, save: bool = True) -> None:
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
        if save:
            vectors.save()
            self._write_state(self.generation())

    def _search(self, run: Callable[[FullTextIndex, VectorIndex], list[tuple[int, float]]]
                ) -> list[tuple[int, float]]:
        """Run a search; an index file damaged in a way loading did not catch (a garbled
        tantivy segment) is rebuilt from the record once, unless this store is mid-write."""
        try:
            return run(*self._indexes())
        except (KeyboardInterrupt, SystemExit, UserError):
            raise
        except BaseException:
            with self.lock:
                if self.write_lock.held:
                    raise
                self._fulltext = self._vectors = None
                self._loaded_generation = None
                with suppress(OSError):  # a full disk: the rebuild then goes to memory
                    self._write_state(None)
            return run(*self._indexes())

    def search_bm25(self, terms: list[str], k: int, within: list[str] | None = None,
                    counted: list[str] | None = None) -> list[tuple[int, float]]:
        """tantivy's ranking, over `within`'s documents when given (a search filter: the
        statistics stay the whole index's). `counted` (a principal's readable documents,
        kb/access.py): BM25 over those documents' chunks (and `within`'s among them) with
        the statistics of those chunks alone (retrieval/bm25.py), so that a score tells
        nothing of the other documents."""
        if counted is not None:
            weights = query_weights(self.language(), terms)
            if not weights:
                return []
            postings = self._postings(counted)
            keep = None
            if within is not None and within is not counted and within != counted:
                allowed = self._allowed(within)
                keep = np.isin(postings.ids, np.fromiter(allowed, np.int64, len(allowed)))
            return postings.search(weights, k, keep)
        allowed = None if within is None else self._allowed(within)

        def run(fulltext: FullTextIndex, _: VectorIndex) -> list[tuple[int, float]]:
            if fulltext.pending:
                fulltext.commit()
            return fulltext.search(terms, k, within, allowed)

        return self._search(run)

    def _postings(self, docs: list[str]) -> Postings:
        """The chunks of `docs` as an inverted index in memory, kept for the last few sets
        and version of the content (as `_allowed`): a principal's readable documents are
        the same set for every search until a write. Built from the record with the
        index's analyzer, so it holds the tokens tantivy holds; each chunk is analysed once
        (its id is never reused and its text never changes), so after a write only the
        new chunks are (benchmarks/filtered.py prints what a first build costs)."""
        language = self.language()
        key = (self.generation(), language, tuple(docs))
        with self.lock:
            found = self._postings_kept.pop(key, None)
        if found is None:
            found = self._build_postings(docs, language)
        with self.lock:
            self._postings_kept[key] = found  # the newest last; the oldest goes
            while len(self._postings_kept) > POSTINGS_KEPT:
                self._postings_kept.pop(next(iter(self._postings_kept)))
        return found

    def _build_postings(self, docs: list[str], language: str) -> Postings:
        with self._analysis_lock:
            if self._analysed_language != language or len(self._analysed) > ANALYSED_KEPT:
                self._analysed, self._vocabulary = {}, Vocabulary()
                self._analysed_language = language
            analysed, vocabulary = self._analysed, self._vocabulary
            ids = sorted(self._allowed(docs))
            missing = [c for c in ids if c not in analysed]
            for cid, text in self._index_texts(missing):
                analysed[cid] = vocabulary.encode(terms_of(language, text))
            ids = [c for c in ids if c in analysed]  # (a chunk deleted since: gone)
            return Postings(ids, [analysed[c] for c in ids], vocabulary)

    def _index_texts(self, chunk_ids: list[int]) -> Iterator[tuple[int, str]]:
        """(chunk id, what tantivy indexes for it) of `chunk_ids` that are in the record."""
        for start in range(0, len(chunk_ids), 50_000):
            with self.lock:
                rows = self.db.execute(
                    "SELECT c.id, c.text, d.title, s.title_path FROM chunks c"
                    " JOIN documents d ON d.doc_id = c.doc_id"
                    " JOIN sections s ON s.doc_id = c.doc_id AND s.section = c.section"
                    " WHERE c.id IN (SELECT value FROM json_each(?))",
                    (json.dumps(chunk_ids[start:start + 50_000]),)).fetchall()
            for cid, text, title, path in rows:
                yield cid, index_text(title, json.loads(path), text)

    def search_vector(self, vector: np.ndarray, k: int,
                      within: list[str] | None = None) -> list[tuple[int, float]]:
        allowed = None if within is None else self._allowed(within)
        return self._search(lambda _, vectors: vectors.search(vector, k, allowed))

    def _allowed(self, within: list[str]) -> frozenset[int]:
        """The chunk ids of `within`'s documents, kept for the last filter and version of the
        content: a principal's readable documents (kb/access.py) are the same filter for
        every search until a write, and reading thousands of ids takes tens of ms."""
        key = (self.generation(), tuple(within))
        with self.lock:
            allowed = self._allowed_kept.pop(key, None)
        if allowed is None:
            allowed = frozenset(self._chunk_ids(within))
        with self.lock:
            self._allowed_kept[key] = allowed  # the newest last; the oldest goes
            while len(self._allowed_kept) > ALLOWED_KEPT:
                self._allowed_kept.pop(next(iter(self._allowed_kept)))
        return allowed

    def index_sizes(self) -> tuple[int, int]:
        fulltext, vectors = self._indexes()
        if fulltext.pending:
            fulltext.commit()
        return fulltext.size(), vectors.size()

    def indexed_ids(self) -> tuple[list[int], list[int]]:
        """(chunk ids in tantivy, chunk ids in HNSW): a consistency check against the record."""
        fulltext, vectors = self._indexes()
        if fulltext.pending:
            fulltext.commit()
        return fulltext.ids(), vectors.ids()

    def flush(self) -> None:
        """Persist the indexes, record that they match the current generation, and let the
        next writer in. A store that only read has nothing to save and writes nothing."""
        with self.lock:
            try:
                if self._fulltext is None or self._vectors is None or self._in_memory:
                    return
                if not (self.write_lock.held or self._fulltext.pending or self._vectors.dirty):
                    return
                try:
                    with self._no_space_is_a_user_error():
                        self._fulltext.commit()
                        self._vectors.save()
                        self._write_state(self._loaded_generation)
                except BaseException:
                    self._discard_indexes()
                    raise
            finally:
                self.write_lock.release()

    def close(self) -> None:
        with self.lock:
            try:
                self.flush()
            finally:
                # tantivy maps its segment files: a closed store lets go of them (a deleted
                # folder's space is only freed then)
                self._fulltext = self._vectors = None
                self.db.close()


def _fingerprint(path: Path) -> list[int] | None:
    """[size, crc32] of a file (None if missing): a truncated or garbled file shows."""
    try:
        crc = 0
        with path.open("rb") as f:
            while block := f.read(1 << 24):
                crc = zlib.crc32(block, crc)
        return [path.stat().st_size, crc]
    except OSError:
        return None
