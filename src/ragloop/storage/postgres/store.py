"""The Postgres Store: pgvector HNSW (cosine) + a generated tsvector with a GIN index.

Selected by a URL: `--kb postgresql://user@host/db` (or RAGLOOP_KB). Everything lives in the
database (documents, sections, chunks with their vectors, the embedding cache, runs), so any
number of processes on any number of machines can share one knowledge base.

Full-text ranking is BM25 with binary term frequency (chunks are short, tf is almost always 1):
score = sum of idf(t) over the query lexemes the chunk contains, times the BM25 length factor
(k1=1.2, b=0.75, length = distinct lexemes; `tsv` is strip()ped). `ts_rank` over an OR query
is neither BM25 nor fast (it ranks every match); here only a candidate set is ranked: the
chunks matching the rarest query lexemes, up to CANDIDATE_BUDGET estimated matches (at least
the rarest lexeme), so a query of common words does not rank half the table. Document
frequencies come from `lexeme_stats` (ts_stat over the corpus, refreshed by `flush()` when the
chunk count moved by more than 10%); a lexeme newer than the statistics is counted (capped).
On 100k synthetic chunks its top 10 overlaps exact BM25 (tantivy) by ~0.65.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from ragloop.core.errors import ConfigError
from ragloop.core.types import DocumentInfo, Hit, SectionInfo
from ragloop.retrieval.fusion import RRF_K
from ragloop.retrieval.index_text import index_text
from ragloop.retrieval.languages import ENGLISH, LANGUAGES, get_language
from ragloop.storage.postgres import schema as pg_schema
from ragloop.storage.protocols import DocumentWrite

TS_CONFIG_ENV = "RAGLOOP_PG_TS_CONFIG"
EF_SEARCH_ENV = "RAGLOOP_PG_EF_SEARCH"
POOL_SIZE_ENV = "RAGLOOP_PG_POOL_SIZE"
# The search statements are prepared once per connection and run on their generic plan
# (plan_cache_mode = force_generic_plan on this store's connections): planning the hybrid
# statement took ~2 ms of its ~13, and its plan does not depend on the parameters (the
# candidate tsquery is an InitPlan). 0 turns both off, for a pooler in transaction mode.
PREPARE_ENV = "RAGLOOP_PG_PREPARE"
# maintenance_work_mem of the HNSW build: pgvector builds much faster while the whole graph
# fits (about 2 GB at 1M 384-dim chunks); the server must have that memory to spare.
MAINTENANCE_WORK_MEM_ENV = "RAGLOOP_PG_MAINTENANCE_WORK_MEM"
DEFAULT_MAINTENANCE_WORK_MEM = "512MB"
# URL query parameters that are ours, not libpq's (removed before connecting).
OWN_PARAMS = ("ts_config",)
DEFAULT_EF_SEARCH = 64
BM25_K1, BM25_B = 1.2, 0.75
# Candidate set of the full-text side: chunks matching the rarest lexemes whose estimated
# matches add up to this budget (at least one lexeme), and never more than twice that many.
# At 100k chunks: budget 500 -> top-10 overlap with exact BM25 0.63, 1000 -> 0.65, 3000 -> 0.68,
# at roughly proportional cost.
CANDIDATE_BUDGET = 500
FTS_BUDGET_ENV = "RAGLOOP_PG_FTS_BUDGET"
# Lexemes missing from lexeme_stats are rare; their document frequency is counted up to this.
RARE_COUNT_CAP = 500
# flush() refreshes the statistics when the chunk count moved by more than this share.
STATS_DRIFT = 0.1



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


@lru_cache(maxsize=MAX_TERMS + 1)
def _bm25_ctes(slots: int) -> str:
    """The BM25 CTEs for up to `slots` query words -> bm(id, score).

    Parameters: %(terms)s (plain words), %(cfg)s, %(budget)s, %(cap)s, %(depth)s. Each word
    is one slot: its lexeme's tsquery and idf are the columns q<i>, idf<i> of one row, so a
    candidate's score is one flat expression (no per-row subquery)."""
    score = " + ".join(f"CASE WHEN c.tsv @@ a.q{i} THEN a.idf{i} ELSE 0 END"
                       for i in range(1, slots + 1)) or "0"
    cols = "".join(f"(SELECT w.q FROM w WHERE w.i = {i} ORDER BY w.df LIMIT 1) AS q{i},"
                   f" (SELECT w.idf FROM w WHERE w.i = {i} ORDER BY w.df LIMIT 1) AS idf{i}, "
                   for i in range(1, slots + 1))
    return f"""
    lx AS MATERIALIZED (
      SELECT DISTINCT ON (l.lex) l.lex, w.i
      FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS w(word, i)
      CROSS JOIN LATERAL unnest(tsvector_to_array(
          to_tsvector(%(cfg)s::regconfig, w.word))) AS l(lex)
      ORDER BY l.lex, w.i
    ), st AS MATERIALIZED (
      SELECT coalesce((SELECT n FROM fts_stats), (SELECT count(*) FROM chunks))::float8 AS n,
             coalesce((SELECT avgdl FROM fts_stats), 1)::float8 AS avgdl
    ), t AS MATERIALIZED (
      SELECT lx.lex, lx.i, plainto_tsquery('simple', lx.lex) AS q,
             coalesce(ls.df, (SELECT count(*) FROM (
                 SELECT 1 FROM chunks c WHERE c.tsv @@ plainto_tsquery('simple', lx.lex)
                 LIMIT {RARE_COUNT_CAP}) x))::float8 AS df
      FROM lx LEFT JOIN lexeme_stats ls ON ls.lex = lx.lex
    ), w AS MATERIALIZED (
      SELECT t.i, t.q, ln(1 + (greatest(st.n, t.df) - t.df + 0.5) / (t.df + 0.5)) AS idf,
             sum(t.df) OVER (ORDER BY t.df, t.lex) - t.df AS before, t.df
      FROM t, st WHERE t.df > 0 AND numnode(t.q) > 0
    ), a AS MATERIALIZED (
      SELECT {cols}
             (SELECT string_agg('(' || w.q::text || ')', ' | ')::tsquery
              FROM w WHERE w.before < %(budget)s) AS cand
    ), bm AS (
      SELECT c.id,
             ({score}) * {BM25_K1 + 1} / (1 + {BM25_K1} * (1 - {BM25_B}
                                  + {BM25_B}::float8 * length(c.tsv) / st.avgdl)) AS score
      FROM (SELECT id, tsv FROM chunks WHERE tsv @@ (SELECT cand FROM a) LIMIT %(cap)s) c,
           a, st
      ORDER BY score DESC, c.id LIMIT %(depth)s
    )"""


@lru_cache(maxsize=MAX_TERMS + 1)
def bm25_sql(slots: int) -> str:
    return "WITH" + _bm25_ctes(slots) + "\nSELECT id, score FROM bm ORDER BY score DESC, id"


VECTOR_SQL = """
SELECT id, 1 - dist FROM (
  SELECT id, embedding <=> %(v)s AS dist FROM chunks
  ORDER BY embedding <=> %(v)s LIMIT %(depth)s) v
ORDER BY dist, id"""


@lru_cache(maxsize=MAX_TERMS + 1)
def hybrid_sql(slots: int) -> str:
    return "WITH" + _bm25_ctes(slots) + f""",
br AS (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS r FROM bm),
vr AS (
  SELECT id, 1 - dist AS score, row_number() OVER (ORDER BY dist, id) AS r FROM (
    SELECT id, embedding <=> %(v)s AS dist FROM chunks
    ORDER BY embedding <=> %(v)s LIMIT %(depth)s) v0
), f AS (
  SELECT coalesce(br.id, vr.id) AS id,
         coalesce(1.0::float8 / ({RRF_K} + br.r), 0) + coalesce(1.0::float8 / ({RRF_K} + vr.r), 0)
           AS fused,
         br.r AS bm25_rank, br.score AS bm25_score, vr.r AS vector_rank, vr.score AS vector_score
  FROM br FULL JOIN vr ON br.id = vr.id
  -- each side's first hit is kept (see ragloop.kb.search.fused_top), then the best fused
  ORDER BY (br.r = 1 OR vr.r = 1) IS TRUE DESC, fused DESC, br.r NULLS LAST, vr.r NULLS LAST
  LIMIT %(k)s
)
SELECT f.id, c.doc_id, c.section, s.title, c.text, d.title, f.fused,
       f.bm25_rank, f.bm25_score, f.vector_rank, f.vector_score
FROM f JOIN chunks c ON c.id = f.id
JOIN sections s ON s.doc_id = c.doc_id AND s.section = c.section
JOIN documents d ON d.doc_id = c.doc_id
ORDER BY f.fused DESC, f.bm25_rank NULLS LAST, f.vector_rank NULLS LAST"""


class PostgresStore:
    """The Store protocol over one Postgres database (pgvector + full text)."""

    def __init__(self, url: str, *, ts_config: str | None = None,
                 pool_size: int | None = None, ef_search: int | None = None) -> None:
        self.url = url
        self.location = url
        self.folder: Path | None = None
        self.conninfo, own = split_url(url)
        requested = ts_config or own.get("ts_config") or os.environ.get(TS_CONFIG_ENV) or None
        self.ef_search = int(ef_search or os.environ.get(EF_SEARCH_ENV) or DEFAULT_EF_SEARCH)
        self.fts_budget = max(1, int(os.environ.get(FTS_BUDGET_ENV) or CANDIDATE_BUDGET))
        self.prepare = os.environ.get(PREPARE_ENV, "1").strip().lower() not in (
            "0", "false", "no", "off")
        with connect(url, autocommit=True) as conn:
            pg_schema.apply_migrations(conn, requested or pg_schema.DEFAULT_TS_CONFIG)
            row = conn.execute("SELECT value FROM meta WHERE key='ts_config'").fetchone()
        self.ts_config = row[0] if row else pg_schema.DEFAULT_TS_CONFIG
        self._ts_requested = bool(requested)
        if requested and requested != self.ts_config:
            raise ConfigError(
                f"This knowledge base was created with the text search configuration"
                f" {self.ts_config!r}, not {requested!r}: its full-text index is built with"
                f" it. Drop ts_config / {TS_CONFIG_ENV}, or `ragloop migrate` it into a new"
                f" database created with ?ts_config={requested}.")
        size = int(pool_size or os.environ.get(POOL_SIZE_ENV) or 4)
        self.pool = ConnectionPool(self.conninfo, min_size=1, max_size=max(1, size),
                                   kwargs={"autocommit": True, "connect_timeout": 10},
                                   configure=self._configure, open=False, name="ragloop")
        try:
            self.pool.open(wait=True, timeout=15)
        except PoolTimeout:
            raise ConfigError(f"Cannot connect to {redact(url)}: is the server running?") from None
        self._dim_ready = False
        self._lock = threading.Lock()

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
        recorded = self.get_meta("language")
        if recorded is not None:
            return get_language(recorded).code
        return next((lang.code for lang in LANGUAGES.values()
                     if lang.ts_config == self.ts_config), ENGLISH)

    def set_language(self, code: str) -> None:
        """Record the KB's language and make its text search configuration the language's
        (Chinese/Japanese/Korean/Hebrew: `simple`, whole runs as lexemes: see README). A
        ts_config asked for explicitly wins, and so does the one of a KB that already holds
        chunks (one made before languages: the generated `tsv` column bakes it in)."""
        wanted = get_language(code).ts_config
        if not self._ts_requested and wanted != self.ts_config:
            with self._conn() as conn, conn.transaction():
                if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None:
                    pg_schema.check_ts_config(conn, wanted)
                    conn.execute(sql.SQL(
                        "DROP INDEX IF EXISTS chunks_tsv; ALTER TABLE chunks DROP COLUMN tsv;"
                        " ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS"
                        " (strip(to_tsvector({cfg}::regconfig, head || ' ' || text))) STORED;"
                        " CREATE INDEX chunks_tsv ON chunks USING gin (tsv);"
                        " DELETE FROM lexeme_stats; DELETE FROM fts_stats;"
                    ).format(cfg=sql.Literal(wanted)))
                    conn.execute("UPDATE meta SET value=%s WHERE key='ts_config'", (wanted,))
                    self.ts_config = wanted
        self.set_meta("language", get_language(code).code)

    def get_meta(self, key: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=%s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._conn() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

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
            conn.execute("DELETE FROM documents WHERE doc_id=%s", (d.doc_id,))
        conn.execute(
            "INSERT INTO documents(doc_id, title, source, mime, content_hash, ingested_at)"
            " VALUES (%s, %s, %s, %s, %s, %s)", w.document_row())
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sections(doc_id, section, ord, title, title_path, text)"
                " VALUES (%s, %s, %s, %s, %s, %s)", w.section_rows())
            paths = {s.section: s.title_path for s in d.sections}
            vectors = np.asarray(w.vectors, dtype=np.float32)
            cur.executemany(
                "INSERT INTO chunks(doc_id, section, ord, text, embed_hash, head, embedding)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(c.doc_id, c.section, c.ord, c.text, h,
                  _head(d.title, paths.get(c.section, ())), vectors[i])
                 for i, (c, h) in enumerate(zip(w.chunks, w.embed_hashes, strict=True))])
        return True

    def bulk_load(self, batches: Iterable[list[DocumentWrite]]) -> int:
        """Fast path for an empty or new knowledge base (migrate, benchmarks): COPY every
        batch, then build the HNSW index once at the end. Documents already present are
        replaced. Returns the number of chunks written."""
        total = 0
        with self._conn() as conn:
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            try:
                for writes in batches:
                    if not writes:
                        continue
                    dim = next((w.vectors.shape[1] for w in writes if len(w.chunks)), None)
                    if dim is not None:
                        self._ensure_dim(conn, int(dim))
                        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
                    with conn.transaction():
                        total += self._copy_batch(conn, writes)
            finally:
                self.build_vector_index(conn)
        self.refresh_stats()
        return total

    def _copy_batch(self, conn: psycopg.Connection, writes: list[DocumentWrite]) -> int:
        ids = [w.doc.doc_id for w in writes]
        conn.execute("DELETE FROM documents WHERE doc_id = ANY(%s)", (ids,))
        n = 0
        with conn.cursor() as cur:
            with cur.copy("COPY documents (doc_id, title, source, mime, content_hash,"
                          " ingested_at) FROM STDIN") as copy:
                for w in writes:
                    copy.write_row(w.document_row())
            with cur.copy("COPY sections (doc_id, section, ord, title, title_path, text)"
                          " FROM STDIN") as copy:
                for w in writes:
                    for row in w.section_rows():
                        copy.write_row(row)
            with cur.copy("COPY chunks (doc_id, section, ord, text, embed_hash, head, embedding)"
                          " FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "int4", "text", "text", "text", "vector"])
                for w in writes:
                    paths = {s.section: s.title_path for s in w.doc.sections}
                    vectors = np.asarray(w.vectors, dtype=np.float32)
                    for i, (c, h) in enumerate(zip(w.chunks, w.embed_hashes, strict=True)):
                        copy.write_row((c.doc_id, c.section, c.ord, c.text, h,
                                        _head(w.doc.title, paths.get(c.section, ())),
                                        vectors[i]))
                        n += 1
        return n

    def build_vector_index(self, conn: psycopg.Connection | None = None) -> None:
        """(Re)create the HNSW index if it is missing (after bulk_load dropped it)."""
        if conn is None:
            with self._conn() as c:
                return self.build_vector_index(c)
        if conn.execute("SELECT value FROM meta WHERE key='pg_vector_dim'").fetchone() is None:
            return None
        mem = os.environ.get(MAINTENANCE_WORK_MEM_ENV) or DEFAULT_MAINTENANCE_WORK_MEM
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(mem)))
        try:
            pg_schema.create_vector_index(conn)
        finally:
            conn.execute("RESET maintenance_work_mem")
        return None

    def remove_document(self, doc_id: str) -> bool:
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (doc_id,))
            existed = conn.execute("DELETE FROM documents WHERE doc_id=%s",
                                   (doc_id,)).rowcount > 0
        return existed

    # -- statistics -------------------------------------------------------------------------

    def refresh_stats(self) -> None:
        """ANALYZE chunks and copy its most common lexemes' document frequencies, the corpus
        size and the mean number of lexemes per chunk into lexeme_stats / fts_stats."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.STATS_LOCK,))
            conn.execute("ANALYZE chunks")
            n = float(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
            conn.execute("DELETE FROM lexeme_stats")
            conn.execute("INSERT INTO lexeme_stats(lex, df)"
                         " SELECT word, ndoc FROM ts_stat('SELECT tsv FROM chunks')")
            # tsv is stripped: a chunk's length is its number of distinct lexemes
            total = conn.execute("SELECT coalesce(sum(df), 0) FROM lexeme_stats").fetchone()[0]
            conn.execute(
                "INSERT INTO fts_stats(id, n, avgdl, analyzed_at) VALUES (1, %s, %s, now())"
                " ON CONFLICT (id) DO UPDATE SET n = excluded.n, avgdl = excluded.avgdl,"
                " analyzed_at = excluded.analyzed_at", (n, max(1.0, float(total) / max(n, 1.0))))

    def _stats_stale(self) -> bool:
        with self._conn() as conn:
            n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            row = conn.execute("SELECT n FROM fts_stats").fetchone()
        if row is None:
            return n > 0
        return abs(n - row[0]) > STATS_DRIFT * max(row[0], 1.0)

    # -- reading ----------------------------------------------------------------------------

    def _params(self, terms: list[str], depth: int) -> dict:
        return {"terms": list(terms)[:MAX_TERMS], "cfg": self.ts_config,
                "budget": self.fts_budget, "cap": max(2 * self.fts_budget, depth),
                "depth": depth}

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

    def search_bm25(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        with self._conn() as conn:
            params = self._params(terms, k)
            rows = conn.execute(bm25_sql(len(params["terms"])), params,
                                prepare=self.prepare).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def search_vector(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        v = np.asarray(vector, dtype=np.float32)
        with self._search_conn(k) as conn:
            rows = conn.execute(VECTOR_SQL, {"v": v, "depth": k},
                                prepare=self.prepare).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def search_hybrid(self, terms: list[str], vector: np.ndarray, k: int,
                      depth: int) -> list[Hit]:
        """BM25 and kNN to `depth` each, fused by RRF (k=60), the top `k` chunks joined with
        their section and document: one statement, one round trip."""
        params = self._params(terms, depth)
        params.update(v=np.asarray(vector, dtype=np.float32), k=k)
        if not terms:
            params["terms"] = []
        with self._search_conn(depth) as conn:
            rows = conn.execute(hybrid_sql(len(params["terms"])), params,
                                prepare=self.prepare).fetchall()
        hits = []
        for cid, doc_id, section, stitle, text, dtitle, fused, br, bs, vr, vs in rows:
            hits.append(Hit(chunk_id=int(cid), doc_id=doc_id, section=section,
                            section_title=stitle, text=text, doc_title=dtitle,
                            score=float(fused),
                            bm25_rank=int(br) if br is not None else None,
                            bm25_score=float(bs) if bs is not None else None,
                            vector_rank=int(vr) if vr is not None else None,
                            vector_score=float(vs) if vs is not None else None))
        return hits

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
                " (SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id)"
                " FROM documents d ORDER BY d.doc_id COLLATE \"C\"").fetchall()
        return [DocumentInfo(doc_id=r[0], title=r[1], source=r[2], content_hash=r[3],
                             sections=int(r[4]), chunks=int(r[5])) for r in rows]

    def chunk_count(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

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
        """Everything is durable at commit; refresh the ranking statistics when stale."""
        if self._stats_stale():
            self.refresh_stats()

    def close(self) -> None:
        self.pool.close()


def _head(doc_title: str, title_path: Iterable[str]) -> str:
    """The titles part of store.sqlite.index_text (what BM25 sees before the chunk text)."""
    return index_text(doc_title, title_path, "").rstrip(" \n")
