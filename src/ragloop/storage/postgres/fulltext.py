"""BM25 on Postgres that is the SQLite default's BM25, at any corpus size.

The SQLite store ranks with tantivy. Here every chunk is analysed in Python with the same
tantivy analyzer (the KB language's, `retrieval.languages.analyzer`), and its terms go into
`postings` (term, chunk_id, tf, dl, impact); `term_stats` holds each term's document frequency
and `fts_stats` the corpus size and token count, kept exact in the transaction that writes or
deletes a chunk. A chunk's score is tantivy's BM25 (src/query/bm25.rs): the sum over query
terms of idf · tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl)), idf = ln(1 + (N - df + 0.5) /
(df + 0.5)), dl the chunk's token count rounded down to tantivy's one-byte field norm
(src/fieldnorm/code.rs), avgdl the exact mean token count.

The top k is exact, without ranking every match: each term's postings are read best first
from the index (term, impact DESC), where impact is the tf part above computed with the avgdl
of the moment the posting was written. After reading the first L postings of every term, a
chunk that none of the lists reached scores at most the sum over unfinished lists of idf ·
ρ · (impact of the L-th posting), ρ = max(1, avgdl now / smallest avgdl any impact was computed
with) bounding how far the tf part can have grown since. When the k-th best score of the
chunks read (scored exactly, their other terms looked up by (chunk_id, term)) is above that
bound, no unread chunk can enter the top k; otherwise the lists are read further (Fagin,
Lotem and Naor's threshold algorithm). This is the "per-term impact-ordered candidates"
choice: no server extension is needed (a managed Postgres has pgvector but rarely a BM25
index), and the candidate set grows with what the query needs, not with the corpus.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import psycopg

from ragloop.retrieval import languages

K1, B = 1.2, 0.75
# Postings read per term in the first round, and the growth factor of each further round.
FIRST_READ = 64
GROWTH = 4
# A term's list is never read past this many postings in one query; a query that reaches it
# gets the best of what was read (counted in `inexact`), not an unbounded scan.
MAX_READ = 65_536


def _decode_fieldnorm(code: int) -> int:
    """tantivy's field-norm byte -> length: 0..23 exact, then 3 mantissa bits + exponent."""
    if code < 24:
        return code
    b = code - 24
    bits, shift = b & 0b111, b >> 3
    return 24 + (bits if shift == 0 else (bits | 8) << (shift - 1))


FIELDNORMS = [_decode_fieldnorm(i) for i in range(256)]


def fieldnorm(length: int) -> int:
    """The length tantivy scores a field of `length` tokens with (rounded down to its table)."""
    return FIELDNORMS[bisect.bisect_right(FIELDNORMS, length) - 1]


def tf_part(tf: float, dl: float, avgdl: float) -> float:
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


def idf(df: float, n: float) -> float:
    return math.log(1 + (max(n, df) - df + 0.5) / (df + 0.5))


@lru_cache(maxsize=64)
def _analyzer(code: str):
    return languages.analyzer(code)


def terms_of(language: str, text: str) -> list[str]:
    """The tokens BM25 indexes for `text` in a KB of `language`, as the SQLite store's."""
    return _analyzer(languages.get_language(language).code).analyze(
        languages.prepare(language, text))


def query_weights(language: str, words: Iterable[str]) -> Counter[str]:
    """Query words -> index terms with their multiplicity: tantivy's query parser makes one
    clause per word, so two words that stem alike ("run", "running") count twice."""
    weights: Counter[str] = Counter()
    for word in words:
        weights.update(terms_of(language, word))
    return weights


@dataclass(frozen=True)
class ChunkTerms:
    """What one chunk adds to the full-text tables."""

    chunk_id: int
    tokens: int  # token count (avgdl counts these)
    counts: Counter[str]

    @property
    def dl(self) -> int:
        return fieldnorm(self.tokens)


def analyse(language: str, chunk_id: int, text: str) -> ChunkTerms:
    tokens = terms_of(language, text)
    return ChunkTerms(chunk_id, len(tokens), Counter(tokens))


def posting_rows(chunks: Iterable[ChunkTerms], avgdl: float) -> Iterator[tuple]:
    """(term, chunk_id, tf, dl, impact) rows; impact is the tf part at `avgdl`."""
    for c in chunks:
        dl = c.dl
        for term, tf in c.counts.items():
            yield term, c.chunk_id, tf, dl, tf_part(tf, dl, avgdl)


# -- statistics, kept in the writing transaction -----------------------------------------

def add_stats(conn: psycopg.Connection, chunks: list[ChunkTerms]) -> float:
    """Count `chunks` into term_stats / fts_stats; returns the avgdl to compute their impacts
    with (the corpus's after this write) and records it if it is the smallest used so far."""
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
    n, total, low = conn.execute(
        "INSERT INTO fts_stats(id, n, tokens, impact_avgdl) VALUES (1, %s, %s, NULL)"
        " ON CONFLICT (id) DO UPDATE SET n = fts_stats.n + excluded.n,"
        " tokens = fts_stats.tokens + excluded.tokens"
        " RETURNING n, tokens, impact_avgdl", (len(chunks), tokens)).fetchone()
    avgdl = max(1.0, float(total) / max(float(n), 1.0))
    if low is None or avgdl < low:
        conn.execute("UPDATE fts_stats SET impact_avgdl = %s WHERE id = 1", (avgdl,))
    return avgdl


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
        row = conn.execute("SELECT n, tokens, impact_avgdl FROM fts_stats WHERE id = 1"
                           ).fetchone()
        self.n, self.tokens, self.low = (int(row[0]), int(row[1]), row[2]) if row else (0, 0,
                                                                                       None)

    def avgdl_with(self, chunks: list[ChunkTerms]) -> float:
        self.n += len(chunks)
        self.tokens += sum(c.tokens for c in chunks)
        avgdl = max(1.0, self.tokens / max(self.n, 1))
        self.low = avgdl if self.low is None else min(self.low, avgdl)
        return avgdl


def copy_postings(conn: psycopg.Connection, chunks: list[ChunkTerms], avgdl: float) -> None:
    with conn.cursor() as cur, cur.copy(
            "COPY postings (term, chunk_id, tf, dl, impact) FROM STDIN WITH (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["text", "int8", "int4", "int4", "float4"])
        for row in posting_rows(chunks, avgdl):
            copy.write_row(row)


def recount(conn: psycopg.Connection, low: float | None) -> None:
    """term_stats and fts_stats counted again from postings and chunks (after a bulk load);
    `low`: the smallest avgdl the load computed impacts with."""
    conn.execute("DELETE FROM term_stats")
    conn.execute("INSERT INTO term_stats(term, df) SELECT term, count(*) FROM postings"
                 " GROUP BY term")
    conn.execute(
        "INSERT INTO fts_stats(id, n, tokens, impact_avgdl)"
        " SELECT 1, count(*), coalesce(sum(tokens), 0), %s FROM chunks"
        " ON CONFLICT (id) DO UPDATE SET n = excluded.n, tokens = excluded.tokens,"
        " impact_avgdl = least(fts_stats.impact_avgdl, excluded.impact_avgdl)", (low,))


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


def reindex(conn: psycopg.Connection, language: str | None = None) -> int:
    """Analyse every stored chunk again with the language's analyzer (a KB from before the
    postings, or one whose language changed); in the caller's transaction. Returns the
    number of chunks."""
    language = language or kb_language(conn)
    conn.execute("DELETE FROM postings")
    conn.execute("DELETE FROM fts_stats")
    stats = BulkStats(conn)
    done = 0
    with conn.cursor(name="ragloop_reindex") as rows:
        rows.execute("SELECT id, head, text FROM chunks ORDER BY id")
        while batch := rows.fetchmany(REINDEX_BATCH):
            chunks = [analyse(language, cid, f"{head}\n{text}") for cid, head, text in batch]
            with conn.cursor() as cur:
                cur.executemany("UPDATE chunks SET tokens = %s WHERE id = %s",
                                [(c.tokens, c.chunk_id) for c in chunks])
            copy_postings(conn, chunks, stats.avgdl_with(chunks))
            done += len(chunks)
    recount(conn, stats.low)
    return done


# -- search ------------------------------------------------------------------------------

STATS_SQL = """
SELECT (SELECT n FROM fts_stats WHERE id = 1), (SELECT tokens FROM fts_stats WHERE id = 1),
       (SELECT impact_avgdl FROM fts_stats WHERE id = 1),
       (SELECT array_agg(df ORDER BY i) FROM unnest(%(terms)s::text[]) WITH ORDINALITY q(t, i)
        LEFT JOIN term_stats s ON s.term = q.t)"""

READ_SQL = """
SELECT q.i, p.chunk_id, p.tf, p.dl, p.impact
FROM unnest(%(terms)s::text[], %(skip)s::int[], %(take)s::int[]) WITH ORDINALITY
     AS q(term, skip, take, i)
CROSS JOIN LATERAL (
  SELECT chunk_id, tf, dl, impact FROM postings p WHERE p.term = q.term
  ORDER BY p.impact DESC, p.chunk_id OFFSET q.skip LIMIT q.take) p"""

PAIRS_SQL = """
SELECT p.chunk_id, p.term, p.tf FROM postings p
WHERE p.chunk_id = ANY(%(ids)s::bigint[]) AND p.term = ANY(%(terms)s::text[])"""


@dataclass
class _List:
    term: str
    weight: float  # idf times the term's multiplicity in the query
    read: int = 0
    done: bool = False
    last_impact: float = 0.0


class SearchStats:
    """How many searches could not prove their top k (MAX_READ reached); for the benchmark."""

    searches = 0
    inexact = 0


def search(conn: psycopg.Connection, weights: Counter[str], k: int,
           prepare: bool = True) -> list[tuple[int, float]]:
    """The exact BM25 top `k` (chunk_id, score), best first, ties by chunk id."""
    if not weights or k <= 0:
        return []
    terms = sorted(weights)
    n, total, impact_avgdl, dfs = conn.execute(STATS_SQL, {"terms": terms},
                                                prepare=prepare).fetchone()
    if not n:
        return []
    avgdl = max(1.0, float(total) / float(n))
    rho = max(1.0, avgdl / float(impact_avgdl or avgdl))
    lists = [_List(t, weights[t] * idf(float(df), float(n)))
             for t, df in zip(terms, dfs or [], strict=True) if df]
    if not lists:
        return []
    by_term = {x.term: x for x in lists}
    scores: dict[int, float] = {}
    known: dict[int, set[str]] = {}  # terms whose contribution to a chunk is counted
    dls: dict[int, int] = {}
    take = max(FIRST_READ, k)
    SearchStats.searches += 1
    while True:
        todo = [x for x in lists if not x.done]
        rows = conn.execute(READ_SQL, {"terms": [x.term for x in todo],
                                       "skip": [x.read for x in todo],
                                       "take": [take] * len(todo)},
                            prepare=prepare).fetchall()
        got = Counter()
        new: set[int] = set()
        for i, cid, tf, dl, impact in rows:
            x = todo[i - 1]
            got[x.term] += 1
            x.last_impact = impact
            dls[cid] = dl
            seen = known.setdefault(cid, set())
            if x.term not in seen:
                seen.add(x.term)
                scores[cid] = scores.get(cid, 0.0) + x.weight * tf_part(tf, dl, avgdl)
                new.add(cid)
        for x in todo:
            x.read += got[x.term]
            x.done = got[x.term] < take
        # the other terms of chunks met for the first time this round
        open_terms = [x.term for x in lists]
        if new and len(lists) > 1:
            for cid, term, tf in conn.execute(PAIRS_SQL, {"ids": sorted(new),
                                                          "terms": open_terms},
                                              prepare=prepare).fetchall():
                seen = known[cid]
                if term not in seen:
                    seen.add(term)
                    scores[cid] += by_term[term].weight * tf_part(tf, dls[cid], avgdl)
        unread = sum(x.weight * rho * x.last_impact for x in lists if not x.done)
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        if not unread or (len(best) == k and best[-1][1] > unread):
            return best
        if all(x.read >= MAX_READ for x in lists if not x.done):
            SearchStats.inexact += 1
            return best
        take *= GROWTH
