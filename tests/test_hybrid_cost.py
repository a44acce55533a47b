"""The hybrid path's cost: the same-terms rule (fusion.term_level_ranks) reads and analyses only
the BM25 candidates whose rank it may change, the record is read for the final k, and the
result is the one of grouping every candidate (real SQLite and Postgres stores, real MiniLM)."""

from __future__ import annotations

import pytest
from conftest import write_docs

from ragloop.core.config import Settings
from ragloop.kb import KnowledgeBase
from ragloop.kb.search import hybrid_search
from ragloop.retrieval.fusion import (
    candidate_depth,
    fused_top,
    positions,
    reordered,
    rrf,
    shared_documents,
    term_level_ranks,
    tied,
)
from ragloop.retrieval.matched_terms import matched_terms
from ragloop.retrieval.query_text import query_terms

# one document of many sections that all name the product (its title), and a few others
MANY = {
    "products/widget.md": "# Widget W7 manual\n\n" + "".join(
        f"## {i} Part {i}\nThe W7 part {i} holds {w} and a spare {w} for the W7.\n\n"
        for i, w in enumerate(["gears", "springs", "a battery", "a seal", "a fan", "a lid",
                               "a sensor", "a cable", "a clip", "a filter"], start=1)),
    "notes/one.md": "# Field notes\n\n## 1 Battery\nA battery in the W7 lasts two years.\n",
    "notes/two.md": "# Depot notes\n\n## 1 Seal\nThe seal keeps water out of the housing.\n",
    # documents of one chunk each: alone in their document, never analysed
    **{f"notes/site-{n}.md": f"# Site {n} log\n\n## 1 Visit\nAt site {n} the battery of"
       f" meter {n} was {'checked' if n % 2 else 'replaced'}.\n" for n in range(12)},
}
QUERIES = ["W7 battery", "widget seal water", "spare gears for the W7", "W7", "zzz unknown",
           "how long does the battery last"]


@pytest.fixture
def kb(location, embedder, tmp_path):
    base = KnowledgeBase.open(location, Settings(), embedder=embedder)
    base.ingest([write_docs(tmp_path / "docs", MANY)])
    yield base
    base.close()


def every_candidate_grouped(kb: KnowledgeBase, query: str, k: int) -> list[int]:
    """The fused top k with every BM25 candidate's text read and analysed (the rule as
    first written)."""
    store = kb.store
    terms = query_terms(query, store.language())
    bm25 = store.search_bm25(terms, candidate_depth(k))
    vector = store.search_vector(kb.embedder.embed_query([query])[0], candidate_depth(k))
    rows = store.chunks(c for c, _ in bm25)
    held = matched_terms(rows, terms, store.language())
    groups = {c: (rows[c].doc_id, t) for c, t in held.items()}
    fused = rrf([term_level_ranks(bm25, groups, vector), positions(vector)])
    return fused_top(fused, [r[0][0] for r in (bm25, vector) if r], k)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("k", [1, 3, 8])
def test_hybrid_equals_grouping_every_candidate(kb: KnowledgeBase, query: str, k: int) -> None:
    hits = hybrid_search(kb.store, kb.embedder, query, k, "hybrid")
    assert [h.chunk_id for h in hits] == every_candidate_grouped(kb, query, k)


def test_text_is_read_for_the_final_k_and_the_reordered_only(kb: KnowledgeBase,
                                                             monkeypatch) -> None:
    store = kb.store
    read: list[int] = []
    chunks = store.chunks

    def counting(ids):
        ids = list(ids)
        read.extend(ids)
        return chunks(ids)

    monkeypatch.setattr(store, "chunks", counting)
    query, k = "W7 battery", 2
    hits = hybrid_search(store, kb.embedder, query, k, "hybrid")
    bm25 = store.search_bm25(query_terms(query, "en"), candidate_depth(k))
    vector = store.search_vector(kb.embedder.embed_query([query])[0], candidate_depth(k))
    doc_of = store.chunk_docs(c for c, _ in bm25)
    # at most the final k and the chunks of documents with several candidates are read
    allowed = {h.chunk_id for h in hits} | set(shared_documents(bm25, doc_of))
    assert len(bm25) > len(allowed)  # the rule as first written read all of bm25
    assert set(read) <= allowed
    if not tied(term_level_ranks(bm25, {}, vector), vector):
        assert set(read) <= {h.chunk_id for h in hits} | set(reordered(bm25, doc_of, vector))
    assert len(read) == len(set(read))  # no chunk read twice


def test_chunk_docs_names_each_chunks_document(kb: KnowledgeBase) -> None:
    hits = kb.search("W7 battery", k=8, mode="bm25")
    ids = [h.chunk_id for h in hits]
    assert kb.store.chunk_docs([*ids, 10**9]) == {h.chunk_id: h.doc_id for h in hits}
    assert kb.store.chunk_docs([]) == {}


def test_a_document_in_vector_order_needs_no_terms() -> None:
    bm25 = [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 5.0)]
    doc_of = {1: "d", 2: "e", 3: "d", 4: "e", 5: "f"}
    vector = [(1, 0.9), (4, 0.8), (2, 0.7)]  # d: 1 before 3 (kept); e: 4 before 2 (swapped)
    assert shared_documents(bm25, doc_of) == [1, 2, 3, 4]
    assert reordered(bm25, doc_of, vector) == [2, 4]
    full = {1: ("d", "a"), 3: ("d", "a"), 2: ("e", "a"), 4: ("e", "a"), 5: ("f", "a")}
    partial = {c: full[c] for c in (2, 4)}
    assert term_level_ranks(bm25, partial, vector) == term_level_ranks(bm25, full, vector)
    # the order of the ranks (what equal fused scores keep) is the groups' order as well
    assert list(term_level_ranks(bm25, full, vector)) == [1, 3, 4, 2, 5]


def test_ties_are_seen() -> None:
    vector = [(3, 0.9), (1, 0.8), (2, 0.7)]
    assert tied({1: 1, 2: 2, 3: 3}, vector) is False
    assert tied({1: 1, 3: 2, 2: 3}, [(3, 0.9), (1, 0.8)]) is True  # (1, 2) and (2, 1)
