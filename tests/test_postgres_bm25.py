"""Postgres full text is the SQLite default's BM25: the same chunks and scores while the read
budget covers the query's terms, every returned chunk scored in full when it does not, and
exact statistics after documents are replaced and removed."""

from __future__ import annotations

import hashlib

import numpy as np
import psycopg
import pytest

from ragloop.core.types import Chunk, ParsedDocument, SectionText
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.postgres import fulltext
from ragloop.storage.postgres import schema as pg_schema
from ragloop.storage.postgres.store import PostgresStore
from ragloop.storage.protocols import DocumentWrite
from ragloop.storage.sqlite.store import SqliteStore

WORDS = ["invoice", "approval", "travel", "expense", "limit", "director", "finance",
         "quarterly", "revenue", "sensor", "waterproof", "firmware", "update", "warranty",
         "return", "shipping", "refund", "policy", "office", "berlin", "austin", "halden",
         "contract", "supplier", "audit", "security", "password", "laptop", "network",
         "printer", "onboarding", "benefit", "pension", "salary", "review", "board", "meeting",
         "minutes", "budget", "forecast", "running", "runs", "runner"]


def _writes(seed: int, docs: int, version: int = 0) -> list[DocumentWrite]:
    """Documents of 1-6 chunks of Zipf-distributed words (repeats, so tf > 1, and lengths
    from 3 to 70 tokens, across tantivy's exact and rounded field norms)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, len(WORDS) + 1)
    p = (1 / ranks) / (1 / ranks).sum()
    writes = []
    for d in range(docs):
        doc_id = f"d{d:04d}.md"
        texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 70)), p=p))
                 for _ in range(int(rng.integers(1, 7)))]
        doc = ParsedDocument(doc_id=doc_id, title=f"Doc {d} v{version}", source="test",
                             sections=[SectionText("0", ("Part",), "\n".join(texts))])
        chunks = [Chunk(doc_id=doc_id, section="0", section_title="Part", ord=i, text=t)
                  for i, t in enumerate(texts)]
        vecs = rng.normal(size=(len(texts), 8)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        writes.append(DocumentWrite(
            doc=doc, content_hash=f"{doc_id}-{version}", chunks=chunks, vectors=vecs,
            embed_hashes=[hashlib.sha256(t.encode()).hexdigest() for t in texts]))
    return writes


QUERIES = ["travel expense approval limit", "waterproof sensor firmware", "running",
           "revenue forecast budget quarterly review", "halden", "the policy of the office",
           "runs runner running run", "password security network laptop printer audit",
           "zzz unknownword", "refund"]


def _ranking(store, terms: list[str], k: int) -> list[tuple[tuple[str, str], float]]:
    ids = store.search_bm25(terms, k)
    hits = store.chunks([cid for cid, _ in ids])
    return [((hits[cid].doc_id, hits[cid].text), score) for cid, score in ids]


def _same(a, b, ids_differ: bool = False) -> None:
    # tantivy scores in float32
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-4)
    if not ids_differ:
        assert [key for key, _ in a] == [key for key, _ in b]
        return
    # equal scores are ordered by chunk id, which two stores filled in another order assign
    # differently: compare the chunks of each score, and those above the last score only
    def groups(ranking):
        last = ranking[-1][1] if ranking else 0.0
        out: dict[float, set] = {}
        for key, score in ranking:
            if score > last * (1 + 1e-4):
                out.setdefault(round(score, 3), set()).add(key)
        return out
    assert groups(a) == groups(b)


@pytest.fixture
def both(pg_url, tmp_path):
    sqlite, pg = SqliteStore(tmp_path / "kb"), PostgresStore(pg_url)
    for store in (sqlite, pg):
        store.set_meta("dim", "8")
    yield sqlite, pg
    sqlite.close()
    pg.close()


def test_postgres_bm25_gives_the_sqlite_stores_chunks_and_scores(both) -> None:
    sqlite, pg = both
    writes = _writes(1, 300)
    sqlite.write_documents(writes)
    sqlite.flush()
    pg.write_documents(writes[:150])  # one document per transaction
    pg.bulk_load([writes[150:]])  # and the bulk path
    for q in QUERIES:
        terms = query_terms(q, "en")
        _same(_ranking(pg, terms, 10), _ranking(sqlite, terms, 10))
        _same(_ranking(pg, terms, 50), _ranking(sqlite, terms, 50))


def test_a_read_budget_bounds_the_candidates_and_they_are_scored_in_full(both, monkeypatch
                                                                          ) -> None:
    """With a budget of 5 postings per term the candidates are fewer, but every chunk returned
    carries its whole BM25 score (all its query terms, not only those read)."""
    sqlite, pg = both
    writes = _writes(2, 200)
    sqlite.write_documents(writes)
    sqlite.flush()
    pg.bulk_load([writes])
    pg.fts_budget = 5  # RAGLOOP_PG_FTS_BUDGET
    monkeypatch.setattr(fulltext, "WHOLE_READ", 0)  # no term is read whole
    monkeypatch.setattr(fulltext, "MIN_READ", 5)
    monkeypatch.setattr(fulltext, "RESCORED", 20)
    overlaps = []
    for q in QUERIES:
        terms = query_terms(q, "en")
        budgeted = _ranking(pg, terms, 10)
        full = dict(_ranking(sqlite, terms, 10_000))
        for key, score in budgeted:
            assert score == pytest.approx(full[key], rel=1e-4)
        top = {key for key, _ in _ranking(sqlite, terms, 10)}
        if top:
            overlaps.append(len(top & {key for key, _ in budgeted}) / len(top))
    assert 0 < sum(overlaps) / len(overlaps) < 1.0  # fewer postings read: not all found


def test_replaced_and_removed_documents_leave_exact_statistics(both, tmp_path) -> None:
    """After replacing and removing, Postgres ranks as a KB that only ever held the final
    documents (tantivy still counts deleted documents in its statistics until segments merge,
    so the SQLite store that saw the deletions is not the reference here)."""
    _, pg = both
    first = _writes(3, 120)
    pg.write_documents(first)
    changed = _writes(4, 40, version=1)  # the first 40 documents again, with other text
    pg.write_documents(changed)
    removed = {"d0050.md", "d0051.md", "d0099.md"}
    for doc in removed:
        assert pg.remove_document(doc)
    final = SqliteStore(tmp_path / "final")
    final.set_meta("dim", "8")
    final.write_documents(changed + [w for w in first[40:] if w.doc.doc_id not in removed])
    final.flush()
    for q in QUERIES:
        terms = query_terms(q, "en")
        _same(_ranking(pg, terms, 10), _ranking(final, terms, 10), ids_differ=True)
    final.close()
    with pg._conn() as conn:
        kept = conn.execute("SELECT n, tokens FROM fts_stats").fetchone()
        dfs = dict(conn.execute("SELECT term, df FROM term_stats WHERE df > 0").fetchall())
        assert sum(dfs.values()) == conn.execute("SELECT count(*) FROM postings").fetchone()[0]
        with conn.transaction():  # counted again from scratch, then thrown away
            fulltext.recount(conn)
            assert conn.execute("SELECT n, tokens FROM fts_stats").fetchone() == kept
            assert dict(conn.execute("SELECT term, df FROM term_stats").fetchall()) == dfs
            raise psycopg.Rollback()
    assert kept[0] == pg.chunk_count()


def test_a_kb_from_before_the_postings_is_analysed_when_opened(pg_url, caplog) -> None:
    """A database at schema 2 (tsvector full text) with chunks gets its postings from the
    migration, in the language its text search configuration stands for."""
    with psycopg.connect(pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY,"
                     " description text NOT NULL, applied_at timestamptz DEFAULT now())")
        for m in pg_schema.MIGRATIONS[:2]:
            m.apply(conn, {"ts_config": "italian"})
            conn.execute("INSERT INTO schema_version VALUES (%s, %s)",
                         (m.version, m.description))
        conn.execute("INSERT INTO documents VALUES ('v.md', 'Vulcani', 's', 'text/markdown',"
                     " 'h', 0)")
        conn.execute("INSERT INTO sections VALUES ('v.md', '0', 0, 'Etna', '[]', 'x')")
        conn.execute("INSERT INTO chunks(doc_id, section, ord, text, embed_hash, head)"
                     " VALUES ('v.md', '0', 0, 'I vulcani attivi della Sicilia.', 'h',"
                     " 'Vulcani')")
    with caplog.at_level("WARNING", logger="ragloop.storage"):
        store = PostgresStore(pg_url)
    assert "Analysing the 1 stored chunks" in caplog.text  # a long open is explained
    try:
        assert store.language() == "it"
        # Italian stemming: the singular finds the plural
        assert [cid for cid, _ in store.search_bm25(["attivo"], 5)] == [1]
        store.set_language("en")  # analysed again: the English stemmer does not meet them
        assert store.search_bm25(["attivo"], 5) == []
        assert [cid for cid, _ in store.search_bm25(["vulcani"], 5)] == [1]
    finally:
        store.close()
