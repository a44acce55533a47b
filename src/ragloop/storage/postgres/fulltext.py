"""BM25 on Postgres with the SQLite default's analyzer and formula, candidates by impact.

The SQLite store ranks with tantivy. Here every chunk is analysed in Python with the same
tantivy analyzer (the KB language's, `retrieval.languages.analyzer`), and its terms go into
`postings` (term, chunk_id, tf, dl, impact); `term_stats` holds each term's document frequency
and `fts_stats` the corpus size and token count, kept exact in the transaction that writes or
deletes a chunk. A chunk's score is tantivy's BM25 (src/query/bm25.rs): the sum over query
terms of idf · tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl)), idf = ln(1 + (N - df + 0.5) /
(df + 0.5)), dl the chunk's token count rounded down to tantivy's one-byte field norm
(src/fieldnorm/code.rs), avgdl the exact mean token count (the formula and the analysis:
retrieval/bm25.py, shared with the SQLite store). So a chunk scores the same on both
backends, to float32 precision; under a principal's readable documents (`search_counted`)
N, df and avgdl are counted within them, as the SQLite store's `Postings` counts them.

Which chunks are scored: each query term's first postings in impact order (the index (term,
impact DESC); impact is the term's tf part at the avgdl of the moment the posting was written),
up to the term's read budget (read_budget, larger for rarer terms), so every posting of a term
rarer than that; of the chunks they reach, the RESCORED best by the part of their score those
postings give are scored in full (all their query terms, by (chunk_id, term)). One statement,
no server extension (a managed Postgres has pgvector but rarely a BM25 index). It is not the
exact top k of the whole corpus: a chunk whose query terms are all common, and which sits past
the budget in each of their lists, is not seen. benchmarks/backends.py measures how often that
changes the top 10 (RESULTS.md, "Postgres at a million chunks"). The exact top k (the
threshold algorithm over these same lists) cost 0.2-1 s a query at 100k chunks: query terms'
impacts are flat (short chunks, tf 1), so its bound falls slowly.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import psycopg

from ragloop.retrieval import languages
from ragloop.retrieval.bm25 import (
    K1,
    B,
    fieldnorm,
    idf,
    mean_length,
    terms_of,
    tf_part,
)

log = logging.getLogger("ragloop.storage")

# Postings read per query term, best impact first (every posting of a rarer term): the term
# with the largest idf gets the budget, another term budget · (its idf / largest)^2, at least
# MIN_READ; how many chunks they reach are then scored in full. Tuned on other queries than
# the benchmark's (benchmarks/backends.py, RESULTS.md "Postgres at a million chunks").
RESCORED = 200
MIN_READ = 100
WEIGHT_POWER = 2.0
# A term in at most this many chunks is read whole, whatever its weight (a small KB: exact).
WHOLE_READ = 1000


def read_budget(chunks: int) -> int:
    """The per-term budget for a KB of `chunks` chunks: a fixed share of the corpus, since a
    term's list grows with it (2,000 at 100k chunks, 8,000 at 1M)."""
    return max(2000, chunks // 125)


@dataclass(frozen=True)
class ChunkTerms:
    """What one chunk adds to the full-text tables."""

    chunk_id: int
    tokens: int  # token count (avgdl counts these)
    counts: Counter[str]

    @property
    def dl(self) -> int:
        return fieldnorm(self.tokens)


def analyse(language: str, chunk_id: int, head: str, text: str) -> ChunkTerms:
    """What BM25 indexes of a stored chunk: its titles (`head`), then its text."""
    tokens = terms_of(language, f"{head}\n{text}")
    return ChunkTerms(chunk_id, len(tokens), Counter(tokens))


def posting_rows(chunks: Iterable[ChunkTerms], avgdl: float) -> Iterator[tuple]:
    """(term, chunk_id, tf, dl, impact) rows; impact is the tf part at `avgdl`."""
    for c in chunks:
        dl = c.dl
        for term, tf in c.counts.items():
            yield term, c.chunk_id, tf, dl, tf_part(tf, dl, avgdl)


# -- statistics, kept in the writing transaction -----------------------------------------

def add_stats(conn: psycopg.Connection, chunks: list[ChunkTerms]) -> float:
    """Count `chunks` into term_stats / fts_stats; returns the corpus's avgdl after this
    write (their impacts are computed with it)."""
    df: Counter[str] = Counter()
    for c in chunks:
        df.update(c.counts.keys())
    tokens = sum(c.tokens for c in chunks)
    # terms in a fixed order: two writers meeting on the same terms lock them alike
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO term_stats(term, df) VALUES (%s, %s)"
            " ON CONFLICT (term) DO UPDATE SET df = term_stats.df + excluded.df",
            sorted(df.items()))
    n, total = conn.execute(
        "INSERT INTO fts_stats(id, n, tokens) VALUES (1, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET n = fts_stats.n + excluded.n,"
        " tokens = fts_stats.tokens + excluded.tokens RETURNING n, tokens",
        (len(chunks), tokens)).fetchone()
    return mean_length(int(total), int(n))


def forget_documents(conn: psycopg.Connection, doc_ids: list[str]) -> None:
    """Take the chunks of `doc_ids` out of the statistics (their postings go with the chunks,
    ON DELETE CASCADE); call before deleting them, in the same transaction."""
    conn.execute("""
        WITH gone AS (SELECT id, tokens FROM chunks WHERE doc_id = ANY(%(ids)s)),
        terms AS (
          SELECT p.term, count(*) AS c FROM postings p JOIN gone ON p.chunk_id = gone.id
          GROUP BY p.term ORDER BY p.term),
        upd AS (
          UPDATE term_stats t SET df = t.df - terms.c FROM terms WHERE t.term = terms.term)
        UPDATE fts_stats SET n = n - (SELECT count(*) FROM gone),
               tokens = tokens - (SELECT coalesce(sum(tokens), 0) FROM gone)
        WHERE id = 1""", {"ids": doc_ids})


class BulkStats:
    """Running corpus size and token count of a bulk load (COPY without per-batch statistics;
    `recount` makes them exact at the end)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        row = conn.execute("SELECT n, tokens FROM fts_stats WHERE id = 1").fetchone()
        self.n, self.tokens = (int(row[0]), int(row[1])) if row else (0, 0)

    def avgdl_with(self, chunks: list[ChunkTerms]) -> float:
        self.n += len(chunks)
        self.tokens += sum(c.tokens for c in chunks)
        return mean_length(self.tokens, self.n)


def copy_postings(conn: psycopg.Connection, chunks: list[ChunkTerms], avgdl: float) -> None:
    with conn.cursor() as cur, cur.copy(
            "COPY postings (term, chunk_id, tf, dl, impact) FROM STDIN WITH (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["text", "int8", "int4", "int4", "float4"])
        for row in posting_rows(chunks, avgdl):
            copy.write_row(row)


def recount(conn: psycopg.Connection) -> None:
    """term_stats and fts_stats counted again from postings and chunks (after a bulk load)."""
    conn.execute("DELETE FROM term_stats")
    conn.execute("INSERT INTO term_stats(term, df) SELECT term, count(*) FROM postings"
                 " GROUP BY term")
    conn.execute(
        "INSERT INTO fts_stats(id, n, tokens) SELECT 1, count(*), coalesce(sum(tokens), 0)"
        " FROM chunks ON CONFLICT (id) DO UPDATE SET n = excluded.n, tokens = excluded.tokens")


def kb_language(conn: psycopg.Connection) -> str:
    """The KB's language: recorded, else that of a KB from before languages (its text search
    configuration's, `italian` -> it), else English."""
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('language',"
                             " 'ts_config')").fetchall())
    if "language" in rows:
        return languages.get_language(rows["language"]).code
    return next((lang.code for lang in languages.LANGUAGES.values()
                 if lang.ts_config == rows.get("ts_config")), languages.ENGLISH)


REINDEX_BATCH = 5000


def reindex(conn: psycopg.Connection, language: str | None) -> None:
    """Analyse every stored chunk again with the language's analyzer (a KB from before the
    postings, or one whose language changed); in the caller's transaction."""
    language = language or kb_language(conn)
    count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    if count:  # once per KB, and long for a large one: say why the open is slow
        log.warning("Analysing the %d stored chunks for full-text search (%s analyzer); this"
                    " happens once, after an upgrade or a change of language.", count, language)
    conn.execute("DELETE FROM postings")
    conn.execute("DELETE FROM fts_stats")
    stats = BulkStats(conn)
    with conn.cursor(name="ragloop_reindex") as rows:
        rows.execute("SELECT id, head, text FROM chunks ORDER BY id")
        while batch := rows.fetchmany(REINDEX_BATCH):
            chunks = [analyse(language, cid, head, text) for cid, head, text in batch]
            with conn.cursor() as cur:
                cur.executemany("UPDATE chunks SET tokens = %s WHERE id = %s",
                                [(c.tokens, c.chunk_id) for c in chunks])
            copy_postings(conn, chunks, stats.avgdl_with(chunks))
    recount(conn)


# -- search ------------------------------------------------------------------------------

STATS_SQL = """
SELECT (SELECT n FROM fts_stats WHERE id = 1), (SELECT tokens FROM fts_stats WHERE id = 1),
       (SELECT array_agg(df ORDER BY i) FROM unnest(%(terms)s::text[]) WITH ORDINALITY q(t, i)
        LEFT JOIN term_stats s ON s.term = q.t)"""

SEARCH_SQL = f"""
WITH q AS MATERIALIZED (
  SELECT term, w, take FROM unnest(%(terms)s::text[], %(w)s::float8[], %(take)s::int[])
    AS q(term, w, take)
), lb AS (
  -- the part of each reached chunk's score its read postings give (impact: the tf part at
  -- the avgdl of their writing), the best of them to be scored in full
  SELECT p.chunk_id FROM q CROSS JOIN LATERAL (
    SELECT chunk_id, impact FROM postings p WHERE p.term = q.term
    ORDER BY p.impact DESC, p.chunk_id LIMIT q.take) p
  GROUP BY p.chunk_id ORDER BY sum(q.w * p.impact) DESC, p.chunk_id LIMIT %(m)s
 ), ex AS (
  SELECT lb.chunk_id, (
    SELECT sum(q.w * p.tf * {K1 + 1} / (p.tf + {K1} * ({1 - B} + {B} * p.dl
                                                         / %(avgdl)s::float8)))
    FROM postings p JOIN q ON q.term = p.term
    WHERE p.chunk_id = lb.chunk_id AND p.term = ANY(%(terms)s::text[])) AS score
  FROM lb
)
SELECT chunk_id, score FROM ex ORDER BY score DESC, chunk_id LIMIT %(k)s"""


def search(conn: psycopg.Connection, weights: Counter[str], k: int, budget: int,
           prepare: bool = True) -> list[tuple[int, float]]:
    """The BM25 top `k` (chunk_id, score), best first, ties by chunk id (see the module
    docstring); `budget`: the read budget of the query's rarest term."""
    if not weights or k <= 0:
        return []
    terms = sorted(weights)
    n, total, dfs = conn.execute(STATS_SQL, {"terms": terms}, prepare=prepare).fetchone()
    if not n:
        return []
    avgdl = mean_length(int(total), int(n))
    live = [(t, weights[t] * idf(float(df), float(n)), int(df))
            for t, df in zip(terms, dfs or [], strict=True) if df]
    if not live:
        return []
    top_w = max(w for _, w, _ in live)
    takes = [df if df <= WHOLE_READ else max(MIN_READ, round(budget * (w / top_w) ** WEIGHT_POWER))
             for _, w, df in live]
    rows = conn.execute(SEARCH_SQL, {"terms": [t for t, _, _ in live],
                                     "w": [w for _, w, _ in live],
                                     "avgdl": avgdl, "take": takes, "m": max(RESCORED, k),
                                     "k": k}, prepare=prepare).fetchall()
    return [(int(c), float(score)) for c, score in rows]


WITHIN_SQL = f"""
WITH q AS MATERIALIZED (
  SELECT term, w FROM unnest(%(terms)s::text[], %(w)s::float8[]) AS q(term, w)
)
SELECT p.chunk_id, sum(q.w * p.tf * {K1 + 1} / (p.tf + {K1} * ({1 - B} + {B} * p.dl
                                                      / %(avgdl)s::float8))) AS score
FROM q JOIN postings p ON p.term = q.term JOIN chunks c ON c.id = p.chunk_id
WHERE c.doc_id = ANY(%(docs)s)
GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(k)s"""


def search_within(conn: psycopg.Connection, weights: Counter[str], k: int, docs: list[str],
                  prepare: bool = True) -> list[tuple[int, float]]:
    """The BM25 top `k` among the chunks of `docs` (a search filter), scored in full: the
    read budget of `search` bounds postings read in impact order across the whole corpus,
    which would miss a filtered document's chunks; the statistics (n, df, avgdl) stay those
    of the whole knowledge base, as tantivy's do under a filter."""
    if not weights or k <= 0 or not docs:
        return []
    terms = sorted(weights)
    n, total, dfs = conn.execute(STATS_SQL, {"terms": terms}, prepare=prepare).fetchone()
    if not n:
        return []
    live = [(t, weights[t] * idf(float(df), float(n)))
            for t, df in zip(terms, dfs or [], strict=True) if df]
    # run even when no term is in the index: a filter (a principal's readable documents,
    # kb/access.py) must not answer a word only hidden documents hold slower than a word
    # nobody holds (one round trip more), or the time would tell that they hold it
    rows = conn.execute(WITHIN_SQL, {"terms": [t for t, _ in live], "w": [w for _, w in live],
                                     "avgdl": mean_length(int(total), int(n)), "docs": docs,
                                     "k": k}, prepare=prepare).fetchall()
    return [(int(c), float(score)) for c, score in rows]


COUNTED_SQL = f"""
WITH q AS MATERIALIZED (
  SELECT term, w FROM unnest(%(terms)s::text[], %(w)s::int[]) AS q(term, w)
), r AS MATERIALIZED (
  SELECT id, doc_id, tokens FROM chunks WHERE doc_id = ANY(%(counted)s)
), st AS (
  -- the statistics of the counted chunks alone: N and avgdl (bm25.mean_length)
  SELECT count(*)::float8 AS n,
         greatest(1.0, coalesce(sum(tokens), 0)::float8 / greatest(count(*), 1)) AS avgdl
  FROM r
), m AS MATERIALIZED (
  SELECT p.term, p.chunk_id, p.tf, p.dl, r.doc_id FROM q JOIN postings p ON p.term = q.term
  JOIN r ON r.id = p.chunk_id
), df AS (
  SELECT term, count(*)::float8 AS df FROM m GROUP BY term
)
SELECT m.chunk_id, sum(q.w * ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5))
                       * m.tf * {K1 + 1} / (m.tf + {K1} * ({1 - B} + {B} * m.dl / st.avgdl)))
       AS score
FROM m JOIN q ON q.term = m.term JOIN df ON df.term = m.term CROSS JOIN st
WHERE %(docs)s::text[] IS NULL OR m.doc_id = ANY(%(docs)s)
GROUP BY m.chunk_id ORDER BY score DESC, m.chunk_id LIMIT %(k)s"""


def search_counted(conn: psycopg.Connection, weights: Counter[str], k: int, counted: list[str],
                   docs: list[str] | None = None, prepare: bool = True
                   ) -> list[tuple[int, float]]:
    """The BM25 top `k` among the chunks of `counted` (a principal's readable documents,
    kb/access.py), or of `docs` among them (a search filter too), scored in full with the
    statistics of the chunks of `counted` alone (N, each term's df and avgdl counted in the
    same statement): a readable chunk scores as in a knowledge base holding only `counted`,
    so its score says nothing of the other documents. No statistics of the whole KB are
    read: the statement is the same for a word only hidden documents hold and for a word
    nobody holds."""
    if not weights or k <= 0 or not counted or docs == []:
        return []
    terms = sorted(weights)
    rows = conn.execute(COUNTED_SQL, {"terms": terms, "w": [weights[t] for t in terms],
                                      "counted": counted, "docs": docs, "k": k},
                        prepare=prepare).fetchall()
    return [(int(c), float(score)) for c, score in rows]
