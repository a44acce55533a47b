"""The Postgres Store: pgvector HNSW (cosine) + BM25 postings (storage/postgres/fulltext.py).

Selected by a URL: `--kb postgresql://user@host/db` (or RAGLOOP_KB). Everything lives in the
database (documents, sections, chunks with their vectors, the embedding cache, runs), so any
number of processes on any number of machines can share one knowledge base.

Full text is the SQLite default's BM25: the same analyzer and the same formula, so a chunk
scores the same on both; which chunks get scored is bounded by a read budget per query term
(see fulltext.py). Hybrid search fuses the two rankings with the same function as the SQLite
store (retrieval.fusion.fuse).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from ragloop.core.config import Settings, env_setting
from ragloop.core.errors import ConfigError
from ragloop.core.types import DocumentInfo, Hit, SectionInfo
from ragloop.retrieval.bm25 import query_weights
from ragloop.retrieval.index_text import index_text
from ragloop.retrieval.languages import LANGUAGES, get_language
from ragloop.storage.postgres import fulltext
from ragloop.storage.postgres import schema as pg_schema
from ragloop.storage.protocols import DocumentWrite

# Each RAGLOOP_PG_* variable is a setting of core/config.py, read through `env_setting`.
# RAGLOOP_PG_TS_CONFIG: replaced by the KB's language (`--language`), which picks the analyzer
# on both backends.
TS_CONFIG_ENV = Settings.setting_name("pg_ts_config")
# The search statements are prepared once per connection and run on their generic plan
# (plan_cache_mode = force_generic_plan on this store's connections): planning them cost more
# than running them, and their plans do not depend on the parameters. RAGLOOP_PG_PREPARE=0
# turns both off, for a pooler in transaction mode.
# maintenance_work_mem of the HNSW build: pgvector builds much faster while the whole graph
# fits (about 2 GB at 1M 384-dim chunks); the server must have that memory to spare.
MAINTENANCE_WORK_MEM_ENV = Settings.setting_name("pg_maintenance_work_mem")
# URL query parameters that are ours, not libpq's (removed before connecting).
OWN_PARAMS = ("ts_config",)
# hnsw.ef_search by KB size (unless RAGLOOP_PG_EF_SEARCH): HNSW recall falls as the graph
# grows at a fixed ef_search (benchmarks/backends.py, recall@10 against exact kNN).
EF_SEARCH_BY_SIZE = ((500_000, 64), (None, 128))
# Query words beyond this many are not searched (a pasted paragraph is not a query).
MAX_TERMS = 32


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """(libpq URL without our own parameters, our parameters)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_PARAMS}
    rest = [(k, v) for k, v in query if k not in OWN_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest))), own


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def connect(url: str, **kwargs: object) -> psycopg.Connection:
    """A plain connection, with a message that names the fix when the server is not there."""
    conninfo, _ = split_url(url)
    try:
        return psycopg.connect(conninfo, connect_timeout=10, **kwargs)  # type: ignore[arg-type]
    except psycopg.OperationalError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"Cannot connect to {redact(url)}: is the server running, and do the"
                          f" database and user exist? ({detail})") from None


MAX_TERMS = 32


VECTOR_SQL = """
SELECT id, 1 - dist FROM (
  SELECT id, embedding <=> %(v)s AS dist FROM chunks
  ORDER BY embedding <=> %(v)s LIMIT %(depth)s) v
ORDER BY dist, id"""

# Within some documents (a search filter): the WHERE is applied during the HNSW scan, and
# pgvector 0.8's iterative scan goes on reading the graph until `depth` rows pass it
# (strict_order keeps the distance order); without it a filter applied to the ef_search
# nearest returns fewer than k whenever the chosen documents are not among them.
VECTOR_WITHIN_SQL = """
SELECT id, 1 - dist FROM (
  SELECT id, embedding <=> %(v)s AS dist FROM chunks WHERE doc_id = ANY(%(docs)s)
  ORDER BY embedding <=> %(v)s LIMIT %(depth)s) v
ORDER BY dist, id"""


class PostgresStore:
    """The Store protocol over one Postgres database (pgvector + full text)."""

    def __init__(self, url: str, *, ts_config: str | None = None,
                 pool_size: int | None = None, ef_search: int | None = None) -> None:
        self.url = url
        self.location = url
        self.folder: Path | None = None
        self.conninfo, own = split_url(url)
        requested = ts_config or own.get("ts_config") or env_setting("pg_ts_config")
        hint = _language_of_ts_config(requested) if requested else None
        fixed = env_setting("pg_ef_search", ef_search or None)
        budget = env_setting("pg_fts_budget")
        self.prepare = env_setting("pg_prepare") not in ("0", "false", "no", "off")
        with connect(url, autocommit=True) as conn:
            pg_schema.apply_migrations(conn)
            recorded = conn.execute("SELECT value FROM meta WHERE key='language'").fetchone()
            self._language = fulltext.kb_language(conn)
            chunks = _estimated_chunks(conn)
            self.ef_search = fixed if fixed else ef_search_for(chunks)
            self.fts_budget = budget if budget else fulltext.read_budget(chunks)
        if hint and recorded and hint != self._language:
            raise ConfigError(
                f"This knowledge base's language is {self._language!r}, not {hint!r}"
                f" (ts_config={requested}): drop ts_config / {TS_CONFIG_ENV}, or `ragloop"
                " migrate` it into a new database.")
        size = env_setting("pg_pool_size", pool_size or None)
        self.pool = ConnectionPool(self.conninfo, min_size=1, max_size=max(1, size),
                                   kwargs={"autocommit": True, "connect_timeout": 10},
                                   configure=self._configure, open=False, name="ragloop")
        try:
            self.pool.open(wait=True, timeout=15)
        except PoolTimeout:
            raise ConfigError(f"Cannot connect to {redact(url)}: is the server running?") from None
        self._dim_ready = False
        self._lock = threading.Lock()
        if hint and not recorded:
            self.set_language(hint)

    def _configure(self, conn: psycopg.Connection) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(self.ef_search)))
        if self.prepare:
            conn.execute("SET plan_cache_mode = force_generic_plan")

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as conn:
            yield conn

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"

    # -- meta -----------------------------------------------------------------------------

    def language(self) -> str:
        """The KB's language code (retrieval/languages.py); a KB from before languages: the
        language of its text search configuration (`italian` -> it), else English."""
        return self._language

    def set_language(self, code: str) -> None:
        """Record the KB's language; chunks already stored are analysed again with its
        analyzer if it differs from the one they were indexed with."""
        code = get_language(code).code
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.STATS_LOCK,))
            before = fulltext.kb_language(conn)
            conn.execute("INSERT INTO meta(key, value) VALUES ('language', %s)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (code,))
            if code != before and conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
                fulltext.reindex(conn, code)
        self._language = code

    def get_meta(self, key: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=%s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._conn() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    def claim_meta(self, key: str, value: str) -> str:
        with self._conn() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s)"
                         " ON CONFLICT (key) DO NOTHING", (key, value))
            return conn.execute("SELECT value FROM meta WHERE key=%s", (key,)).fetchone()[0]

    def content_hashes(self) -> dict[str, str]:
        with self._conn() as conn:
            return dict(conn.execute("SELECT doc_id, content_hash FROM documents").fetchall())

    # -- writing --------------------------------------------------------------------------

    def _ensure_dim(self, conn: psycopg.Connection, dim: int) -> None:
        if not self._dim_ready:
            pg_schema.ensure_vector_column(conn, dim)
            self._dim_ready = True

    def write_documents(self, writes: list[DocumentWrite]) -> None:
        """Replace each document in its own transaction, under an advisory lock on its doc_id;
        a document whose stored content hash already matches is left alone (so two ingests of
        the same folder at once write each document once)."""
        if not writes:
            return
        with self._conn() as conn:
            dim = next((w.vectors.shape[1] for w in writes if len(w.chunks)), None)
            if dim is not None:
                self._ensure_dim(conn, int(dim))
            for w in writes:
                with conn.transaction():
                    self._write_one(conn, w)

    def _write_one(self, conn: psycopg.Connection, w: DocumentWrite) -> bool:
        d = w.doc
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (d.doc_id,))
        row = conn.execute("SELECT content_hash FROM documents WHERE doc_id=%s",
                           (d.doc_id,)).fetchone()
        if row is not None and row[0] == w.content_hash:
            return False
        if row is not None:
            fulltext.forget_documents(conn, [d.doc_id])
            conn.execute("DELETE FROM documents WHERE doc_id=%s", (d.doc_id,))
        conn.execute(
            "INSERT INTO documents(doc_id, title, source, mime, content_hash, ingested_at,"
            " metadata) VALUES (%s, %s, %s, %s, %s, %s, %s)", w.document_row())
        rows, terms = self._chunk_rows(conn, [w])
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sections(doc_id, section, ord, title, title_path, text)"
                " VALUES (%s, %s, %s, %s, %s, %s)", w.section_rows())
            cur.executemany(
                "INSERT INTO chunks(id, doc_id, section, ord, text, embed_hash, head, tokens,"
                " embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)
        if terms:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO postings(term, chunk_id, tf, dl, impact)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    list(fulltext.posting_rows(terms, fulltext.add_stats(conn, terms))))
        _bump(conn)
        return True

    def _chunk_rows(self, conn: psycopg.Connection, writes: list[DocumentWrite]
                    ) -> tuple[list[tuple], list[fulltext.ChunkTerms]]:
        """The chunks rows of `writes` with new ids, and what full text indexes of each."""
        count = sum(len(w.chunks) for w in writes)
        if not count:
            return [], []
        ids = [r[0] for r in conn.execute(
            "SELECT nextval(pg_get_serial_sequence('chunks', 'id'))"
            " FROM generate_series(1, %s)", (count,))]
        rows, terms = [], []
        for w in writes:
            paths = {s.section: s.title_path for s in w.doc.sections}
            vectors = np.asarray(w.vectors, dtype=np.float32)
            for i, (c, h) in enumerate(zip(w.chunks, w.embed_hashes, strict=True)):
                cid = ids[len(rows)]
                head = _head(w.doc.title, paths.get(c.section, ()))
                t = fulltext.analyse(self._language, cid, head, c.text)
                terms.append(t)
                rows.append((cid, c.doc_id, c.section, c.ord, c.text, h, head, t.tokens,
                             vectors[i]))
        return rows, terms

    def bulk_load(self, batches: Iterable[list[DocumentWrite]]) -> int:
        """Fast path for an empty or new knowledge base (migrate, benchmarks): COPY every
        batch, then build the HNSW and postings indexes once at the end and count the
        full-text statistics. Documents already present are replaced. Returns the number of
        chunks written."""
        total = 0
        with self._conn() as conn:
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            pg_schema.drop_postings_indexes(conn)
            stats = fulltext.BulkStats(conn)
            try:
                for writes in batches:
                    if not writes:
                        continue
                    dim = next((w.vectors.shape[1] for w in writes if len(w.chunks)), None)
                    if dim is not None:
                        self._ensure_dim(conn, int(dim))
                        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
                    with conn.transaction():
                        total += self._copy_batch(conn, writes, stats)
            finally:
                with conn.transaction():
                    pg_schema.create_postings_indexes(conn)
                    fulltext.recount(conn)
                self.build_vector_index(conn)
        self.refresh_stats()
        return total

    def _copy_batch(self, conn: psycopg.Connection, writes: list[DocumentWrite],
                    stats: fulltext.BulkStats) -> int:
        ids = [w.doc.doc_id for w in writes]
        # postings are unindexed during a bulk load: drop those of replaced documents by join
        conn.execute("DELETE FROM postings p USING chunks c"
                     " WHERE p.chunk_id = c.id AND c.doc_id = ANY(%s)", (ids,))
        conn.execute("DELETE FROM documents WHERE doc_id = ANY(%s)", (ids,))
        rows, terms = self._chunk_rows(conn, writes)
        with conn.cursor() as cur:
            with cur.copy("COPY documents (doc_id, title, source, mime, content_hash,"
                          " ingested_at, metadata) FROM STDIN") as copy:
                for w in writes:
                    copy.write_row(w.document_row())
            with cur.copy("COPY sections (doc_id, section, ord, title, title_path, text)"
                          " FROM STDIN") as copy:
                for w in writes:
                    for row in w.section_rows():
                        copy.write_row(row)
            with cur.copy("COPY chunks (id, doc_id, section, ord, text, embed_hash, head,"
                          " tokens, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "text", "text", "int4", "text", "text", "text", "int4",
                                "vector"])
                for row in rows:
                    copy.write_row(row)
        if terms:
            fulltext.copy_postings(conn, terms, stats.avgdl_with(terms))
        _bump(conn)
        return len(rows)

    def build_vector_index(self, conn: psycopg.Connection | None = None) -> None:
        """(Re)create the HNSW index if it is missing (after bulk_load dropped it)."""
        if conn is None:
            with self._conn() as c:
                return self.build_vector_index(c)
        if conn.execute("SELECT value FROM meta WHERE key='pg_vector_dim'").fetchone() is None:
            return None
        mem = env_setting("pg_maintenance_work_mem")
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(mem)))
        try:
            pg_schema.create_vector_index(conn)
        finally:
            conn.execute("RESET maintenance_work_mem")
        return None

    def remove_document(self, doc_id: str) -> bool:
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (doc_id,))
            fulltext.forget_documents(conn, [doc_id])
            existed = conn.execute("DELETE FROM documents WHERE doc_id=%s",
                                   (doc_id,)).rowcount > 0
            if existed:
                _bump(conn)
        return existed

    # -- statistics -------------------------------------------------------------------------

    def refresh_stats(self) -> None:
        """ANALYZE the tables the searches plan over (the full-text statistics BM25 reads are
        kept exact by every write)."""
        with self._conn() as conn:
            conn.execute("ANALYZE chunks")
            conn.execute("ANALYZE postings")
            conn.execute("ANALYZE term_stats")

    # -- reading ----------------------------------------------------------------------------

    @contextmanager
    def _search_conn(self, depth: int) -> Iterator[psycopg.Connection]:
        """A connection whose hnsw.ef_search covers `depth` (the index returns at most
        ef_search rows)."""
        with self._conn() as conn:
            if depth <= self.ef_search:
                yield conn
                return
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                    sql.Literal(min(1000, depth))))
                yield conn

    def document_fields(self) -> list[tuple[str, str, dict]]:
        with self._conn() as conn:
            rows = conn.execute("SELECT doc_id, source, metadata FROM documents").fetchall()
        return [(d, src, meta or {}) for d, src, meta in rows]

    def search_bm25(self, terms: list[str], k: int, within: list[str] | None = None,
                    counted: list[str] | None = None) -> list[tuple[int, float]]:
        weights = query_weights(self._language, list(terms)[:MAX_TERMS])
        if not weights:
            return []
        with self._conn() as conn:
            if counted is not None:
                docs = None if within is None or within is counted or within == counted \
                    else within
                return fulltext.search_counted(conn, weights, k, counted, docs,
                                               prepare=self.prepare)
            if within is not None:
                return fulltext.search_within(conn, weights, k, within, prepare=self.prepare)
            return fulltext.search(conn, weights, k, self.fts_budget, prepare=self.prepare)

    def search_vector(self, vector: np.ndarray, k: int,
                      within: list[str] | None = None) -> list[tuple[int, float]]:
        v = np.asarray(vector, dtype=np.float32)
        if within is not None:
            with self._conn() as conn, conn.transaction():
                conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                rows = conn.execute(VECTOR_WITHIN_SQL, {"v": v, "depth": k,
                                                        "docs": list(within)},
                                    prepare=self.prepare).fetchall()
            return [(int(i), float(s)) for i, s in rows]
        with self._search_conn(k) as conn:
            rows = conn.execute(VECTOR_SQL, {"v": v, "depth": k},
                                prepare=self.prepare).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.id, c.doc_id, c.section, s.title, c.text, d.title FROM chunks c"
                " JOIN sections s ON s.doc_id = c.doc_id AND s.section = c.section"
                " JOIN documents d ON d.doc_id = c.doc_id WHERE c.id = ANY(%s)",
                (ids,)).fetchall()
        return {r[0]: Hit(chunk_id=r[0], doc_id=r[1], section=r[2], section_title=r[3],
                          text=r[4], doc_title=r[5]) for r in rows}

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, str]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        with self._conn() as conn:
            return dict(conn.execute("SELECT id, doc_id FROM chunks WHERE id = ANY(%s)",
                                     (ids,)).fetchall())

    @staticmethod
    def _section(row: tuple) -> SectionInfo:
        path = row[3] if isinstance(row[3], list) else json.loads(row[3])
        return SectionInfo(doc_id=row[0], section=row[1], title=row[2], title_path=tuple(path),
                           text=row[4], ord=row[5])

    def section(self, doc_id: str, section: str) -> SectionInfo | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT doc_id, section, title, title_path, text, ord FROM sections"
                " WHERE doc_id=%s AND section=%s", (doc_id, section)).fetchone()
        return self._section(row) if row else None

    def sections(self, doc_id: str) -> list[SectionInfo]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT doc_id, section, title, title_path, text, ord FROM sections"
                " WHERE doc_id=%s ORDER BY ord", (doc_id,)).fetchall()
        return [self._section(r) for r in rows]

    def documents(self) -> list[DocumentInfo]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT d.doc_id, d.title, d.source, d.content_hash,"
                " (SELECT count(*) FROM sections s WHERE s.doc_id = d.doc_id),"
                " (SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id), d.metadata"
                " FROM documents d ORDER BY d.doc_id COLLATE \"C\"").fetchall()
        return [DocumentInfo(doc_id=r[0], title=r[1], source=r[2], content_hash=r[3],
                             sections=int(r[4]), chunks=int(r[5]), metadata=r[6] or {})
                for r in rows]

    def chunk_count(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def generation(self) -> int:
        # bumped in each write's transaction (`_bump`): read committed, so a reader sees it
        # change exactly when the write's documents become visible
        return int(self.get_meta("generation") or 0)

    # -- embedding cache ------------------------------------------------------------------

    def get_embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        with self._conn() as conn:
            rows = conn.execute("SELECT hash, vector FROM embeddings"
                                " WHERE model=%s AND hash = ANY(%s)",
                                (model, list(hashes))).fetchall()
        return {h: np.frombuffer(bytes(b), dtype=np.float32) for h, b in rows}

    def put_embeddings(self, model: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        with self._conn() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embeddings(model, hash, vector) VALUES (%s, %s, %s)"
                " ON CONFLICT (model, hash) DO NOTHING",
                [(model, h, np.asarray(v, dtype=np.float32).tobytes())
                 for h, v in items.items()])

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        """Everything is durable at commit, and the BM25 statistics are exact."""

    def close(self) -> None:
        self.pool.close()


def _bump(conn: psycopg.Connection) -> None:
    """Count one more write of documents (`generation`), in the caller's transaction. The
    row is locked until commit, as `fts_stats`' is by the same writes (taken before it, so
    the two locks are always taken in one order)."""
    conn.execute("INSERT INTO meta(key, value) VALUES ('generation', '1') ON CONFLICT (key)"
                 " DO UPDATE SET value = (meta.value::bigint + 1)::text")


def ef_search_for(chunks: int) -> int:
    return next(ef for limit, ef in EF_SEARCH_BY_SIZE if limit is None or chunks < limit)


def _estimated_chunks(conn: psycopg.Connection) -> int:
    """The planner's row estimate of chunks (instant; count(*) reads the table)."""
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass('chunks')"
                       ).fetchone()
    return max(0, int(row[0])) if row and row[0] is not None else 0


def _language_of_ts_config(name: str) -> str:
    """The language a text search configuration named before languages stands for."""
    for lang in LANGUAGES.values():
        if lang.ts_config == name and lang.ts_config != "simple":
            return lang.code
    raise ConfigError(f"Unknown text search configuration {name!r}: {TS_CONFIG_ENV} and"
                      " ?ts_config= now only name a language (english, italian, ...); set the"
                      " knowledge base's language instead (`--language`).")


def _head(doc_title: str, title_path: Iterable[str]) -> str:
    """The titles part of store.sqlite.index_text (what BM25 sees before the chunk text)."""
    return index_text(doc_title, title_path, "").rstrip(" \n")
