"""One store suite, run against both backends: SqliteStore and PostgresStore (a real
PostgreSQL 18 + pgvector, see pg_server.py), through the KnowledgeBase API and the Store
protocol itself, with real MiniLM vectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL_DOCS, write_docs

from ragloop.core.config import Settings
from ragloop.core.errors import EmbedderMismatchError, EmptyQueryError, NotFoundError
from ragloop.kb import KnowledgeBase
from ragloop.kb.search import hybrid_search
from ragloop.retrieval.fusion import (
    candidate_depth,
    fused_top,
    positions,
    rrf,
    term_level_ranks,
)
from ragloop.retrieval.matched_terms import matched_terms
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.backend import open_backend

NASTY = [
    '"foo" AND (bar OR -baz*) NEAR: 🙂',
    '"ingress protection',
    "(battery OR life",
    "battery AND NOT life",
    "NEAR(approval, cfo)",
    "approv*",
    "-waterproof sensor",
    "title:approval",
    "battery life? 💧🌊",
    "a:b:c ((battery)) \"\" '' ^~ {}[] \\ ' ; DROP TABLE chunks; --",
    "AND OR NOT",
    "l'approvazione è già",
]


@pytest.fixture
def docs(tmp_path):
    return write_docs(tmp_path / "docs")


@pytest.fixture
def kb(location, embedder, docs):
    base = KnowledgeBase.open(location, Settings(), embedder=embedder)
    report = base.ingest([docs])
    assert (report.added, report.updated, report.unchanged) == (len(SMALL_DOCS), 0, 0)
    yield base
    base.close()


def test_ingest_is_idempotent_by_content_hash(kb: KnowledgeBase, docs) -> None:
    chunks = kb.store.chunk_count()
    hashes = kb.store.content_hashes()
    again = kb.ingest([docs])
    assert (again.added, again.updated, again.unchanged, again.chunks) == (0, 0, 3, 0)
    assert kb.store.chunk_count() == chunks
    assert kb.store.content_hashes() == hashes


def test_a_changed_document_replaces_its_chunks(kb: KnowledgeBase, docs) -> None:
    before = {d.doc_id: d for d in kb.documents()}
    (docs / "products/sensor.md").write_text(
        "# T9 Sensor Datasheet\n\n## Environmental ratings\nThe T9 is rated IP68 and survives"
        " a zebra stampede.\n", encoding="utf-8")
    report = kb.ingest([docs])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 2)
    after = {d.doc_id: d for d in kb.documents()}
    assert after["products/sensor.md"].content_hash != before["products/sensor.md"].content_hash
    assert after["products/sensor.md"].chunks >= 1
    assert kb.search("zebra stampede", k=1, mode="bm25")[0].doc_id == "products/sensor.md"
    assert kb.search("CR123A battery", k=5, mode="bm25") == []
    assert kb.store.chunk_count() == sum(d.chunks for d in after.values())


def test_the_generation_changes_with_every_write_seen_by_another_open_store(
        kb: KnowledgeBase, docs, location, embedder) -> None:
    # another KnowledgeBase on the same location: its own connection (another process's view)
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as reader:
        start = reader.store.generation()
        assert start == kb.store.generation() > 0
        kb.ingest([docs])  # nothing changed: nothing written
        assert reader.store.generation() == start
        # an edit of one document that keeps its chunk count: the chunk count cannot tell
        chunks = kb.store.chunk_count()
        path = docs / "org/leadership.md"
        path.write_text(path.read_text(encoding="utf-8").replace("Priya", "Anjali"),
                        encoding="utf-8")
        assert kb.ingest([docs]).updated == 1 and kb.store.chunk_count() == chunks
        edited = reader.store.generation()
        assert edited != start
        assert kb.remove("org/leadership.md")
        assert reader.store.generation() not in (start, edited)


def test_remove_a_document(kb: KnowledgeBase) -> None:
    assert kb.remove("org/leadership.md")
    assert not kb.remove("org/leadership.md")
    assert "org/leadership.md" not in {d.doc_id for d in kb.documents()}
    for mode in ("bm25", "vector", "hybrid"):
        assert all(h.doc_id != "org/leadership.md"
                   for h in kb.search("Priya Raman chief financial officer", k=10, mode=mode))


def test_bm25_vector_and_hybrid_search(kb: KnowledgeBase) -> None:
    top = kb.search("who approves expenses above 2,500", k=3)[0]
    assert (top.doc_id, top.section, top.section_title) == (
        "policies/travel.md", "4.2", "4.2 Approval thresholds")
    assert top.doc_title == "Travel and Expense Policy"
    assert top.bm25_rank == 1 and top.bm25_score > 0
    assert top.vector_rank is not None and 0 < top.vector_score <= 1
    assert top.score == pytest.approx(1 / 61 + 1 / (60 + top.vector_rank))
    bm = kb.search("CR123A battery", k=2, mode="bm25")
    assert bm[0].doc_id == "products/sensor.md" and bm[0].vector_rank is None
    assert bm[0].score == bm[0].bm25_score
    # vocabulary gap: no shared word with "waterproof", found by meaning
    vec = kb.search("is it waterproof", k=1, mode="vector")[0]
    assert vec.doc_id == "products/sensor.md" and vec.bm25_rank is None
    assert vec.score == vec.vector_score
    # titles are searchable too (the section heading "Executive team")
    assert kb.search("executive team", k=1, mode="bm25")[0].doc_id == "org/leadership.md"


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_any_user_text_is_a_valid_query(kb: KnowledgeBase, mode: str) -> None:
    for query in NASTY:
        hits = kb.search(query, k=3, mode=mode)
        if mode == "bm25" and query.startswith(('"foo"', "l'appro", "AND OR")):
            continue  # words the corpus lacks (or stop words only): bm25 may find nothing
        assert hits, f"{query!r} found nothing in {mode} mode"
    assert kb.search(NASTY[0], k=3, mode="vector")
    with pytest.raises(EmptyQueryError):
        kb.search("?! 🙂", mode=mode)


@pytest.mark.parametrize("query", ["who approves expenses above 2,500", "battery life",
                                   "chief financial officer", NASTY[0], "zzzz unknown"])
def test_hybrid_equals_the_python_fusion_of_the_components(kb: KnowledgeBase,
                                                           query: str) -> None:
    """The hybrid search gives exactly the RRF (k=60) of the store's BM25 ranks (chunks
    holding the same query terms tied) and vector ranks, each list's first hit kept, each
    side's own position and score on the hit."""
    k = 5
    depth = candidate_depth(k)
    store = kb.store
    terms = query_terms(query, "en")
    bm25 = store.search_bm25(terms, depth)
    vector = store.search_vector(kb.embedder.embed([query])[0], depth)
    rows = store.chunks(c for c, _ in bm25)
    held = matched_terms(rows, terms, store.language())
    groups = {cid: (rows[cid].doc_id, t) for cid, t in held.items()}
    fused = rrf([term_level_ranks(bm25, groups, vector), positions(vector)])
    firsts = [ranked[0][0] for ranked in (bm25, vector) if ranked]
    expected = fused_top(fused, firsts, k)
    hits = hybrid_search(store, kb.embedder, query, k, "hybrid")
    assert set(firsts) <= {h.chunk_id for h in hits}
    assert [h.chunk_id for h in hits] == expected
    bm_pos = {c: (r, s) for r, (c, s) in enumerate(bm25, start=1)}
    vec_pos = {c: (r, s) for r, (c, s) in enumerate(vector, start=1)}
    for h in hits:
        assert h.score == pytest.approx(fused[h.chunk_id], rel=1e-12)
        assert (h.bm25_rank, h.bm25_score) == (bm_pos.get(h.chunk_id) or (None, None))
        assert h.vector_rank == (vec_pos.get(h.chunk_id) or (None, None))[0]
        if h.vector_rank is not None:
            assert h.vector_score == pytest.approx(vec_pos[h.chunk_id][1], abs=1e-6)
        assert h.text and h.doc_title and h.section


EXAMPLE_KB = Path(__file__).resolve().parents[1] / "examples" / "kb"


def test_a_hit_only_one_retriever_finds_first_stays_in_the_top_k(location, embedder,
                                                                 tmp_path) -> None:
    """A paraphrase with no shared words ("money back" for a refund rule) is vector #1 and
    not in BM25's list; plain RRF ranks it below chunks both sides rank mediocre, so it used
    to fall out of the top k. Both backends keep it."""
    docs = tmp_path / "example"
    for rel in ["policies/returns-rma-policy.md", "policies/procurement-policy.md",
                "filings/fy2024-annual-report.md", "products/s100-datasheet.md",
                "reports/fy2024-q1-sales.md", "reports/fy2024-q3-sales.md",
                "reports/fy2025-q2-sales.md", "reports/fy2024-q2-sales.html",
                "reports/fy2025-q1-sales.html", "products/s200-datasheet.md"]:
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLE_KB / rel, docs / rel)
    query = "Can I get my money back for sensors I bought but never used?"
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as base:
        base.ingest([docs])
        k = 5
        vector = base.store.search_vector(embedder.embed([query])[0], candidate_depth(k))
        bm25 = base.store.search_bm25(query_terms(query, "en"), candidate_depth(k))
        best = vector[0][0]
        plain = rrf([positions(bm25), positions(vector)])
        assert best not in sorted(plain, key=lambda c: plain[c], reverse=True)[:k]
        hits = base.search(query, k)
        assert len(hits) == k and best in {h.chunk_id for h in hits}
        found = next(h for h in hits if h.chunk_id == best)
        assert (found.doc_id, found.section) == ("policies/returns-rma-policy.md", "2.1")
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_product_and_property_question_ranks_the_property_section_first(
        location, embedder, tmp_path) -> None:
    """"is the S200 waterproof": no chunk says "waterproof", so every S200 chunk matches
    "s200" alone (the title holds it) and BM25's order among them is length only; it put the
    Certifications section first and ingress protection (vector #1) ninth, and fusion
    ranked that fourth. Chunks holding the same query terms now tie on the BM25 side."""
    docs = tmp_path / "example"
    for rel in ["products/s200-datasheet.md", "products/s100-datasheet.md",
                "policies/returns-rma-policy.md"]:
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLE_KB / rel, docs / rel)
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as base:
        base.ingest([docs])
        hits = base.search("is the S200 waterproof", 5)
    assert (hits[0].doc_id, hits[0].section) == ("products/s200-datasheet.md", "3.2")
    assert "IP67" in hits[0].text


def test_term_level_ranks_let_the_vectors_order_one_documents_equal_chunks() -> None:
    bm25 = [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 5.0)]
    held = {1: ("d", frozenset({"a"})), 2: ("d", frozenset({"a", "b"})),
            3: ("d", frozenset({"a"})), 4: ("d", frozenset({"a", "b"})),
            5: ("e", frozenset({"a"}))}
    vector = [(3, 0.9), (4, 0.8), (1, 0.7)]
    # chunks 1 and 3 (one document, the same terms) swap their BM25 ranks, as do 2 and 4;
    # chunk 5 (another document) keeps its own, and each group keeps its set of ranks
    assert term_level_ranks(bm25, held, vector) == {3: 1, 1: 3, 4: 2, 2: 4, 5: 5}
    fused = rrf([term_level_ranks(bm25, held, vector), positions(vector)])
    assert fused[3] > fused[1]


def test_equal_bm25_scores_rank_by_chunk_id(location, embedder, tmp_path) -> None:
    """Sibling documents with the same templated section tie on BM25; ingested one by one
    (each its own tantivy segment), they must still come back in chunk-id order, so two
    ingests of the same files give the same ranking."""
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as base:
        for n in range(1, 7):
            doc = tmp_path / f"q{n}" / f"report-{n}.md"
            doc.parent.mkdir()
            doc.write_text(f"# Report {n}\n\n## Sensors\nSensor shipments were flat.\n",
                           encoding="utf-8")
            base.ingest([doc.parent])
        hits = base.store.search_bm25(query_terms("sensor shipments", "en"), 4)
        assert len(hits) == 4 and len({score for _, score in hits}) == 1
        everything = base.store.search_bm25(query_terms("sensor shipments", "en"), 10)
        assert [cid for cid, _ in everything] == sorted(cid for cid, _ in everything)
        assert [cid for cid, _ in hits] == [cid for cid, _ in everything][:4]


def test_fused_top_keeps_each_first_and_orders_by_fused_score() -> None:
    fused = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.1, 5: 0.05}
    assert fused_top(fused, [1, 2], 3) == [1, 2, 3]
    assert fused_top(fused, [5, 1], 3) == [1, 2, 5]
    assert fused_top(fused, [5, 4], 3) == [1, 4, 5]
    assert fused_top(fused, [5, 4], 1) == [4]
    assert fused_top(fused, [], 2) == [1, 2]


def test_vector_scores_are_cosine_similarities(kb: KnowledgeBase) -> None:
    q = kb.embedder.embed(["CR123A battery life"])[0]
    found = kb.store.search_vector(q, 3)
    assert len(found) == 3 and found[0][1] >= found[1][1] >= found[2][1]
    assert all(-1.0 <= s <= 1.0 for _, s in found)
    assert kb.store.search_bm25([], 5) == []


def test_section_fetch_and_documents(kb: KnowledgeBase) -> None:
    s = kb.section("policies/travel.md", "4.2")
    assert s.title_path == ("Travel and Expense Policy", "4 Approvals", "4.2 Approval thresholds")
    assert "Chief Financial Officer" in s.text and "Booking" not in s.text
    ords = [x.ord for x in kb.sections("policies/travel.md")]
    assert ords == sorted(ords) and len(ords) >= 3
    docs = kb.documents()
    assert [d.doc_id for d in docs] == sorted(SMALL_DOCS)
    by_id = {d.doc_id: d for d in docs}
    assert by_id["policies/travel.md"].title == "Travel and Expense Policy"
    assert by_id["policies/travel.md"].sections >= 3
    assert sum(d.chunks for d in docs) == kb.store.chunk_count()
    hits = kb.store.chunks([h.chunk_id for h in kb.search("battery", k=2)])
    assert all(h.doc_title and h.section_title is not None for h in hits.values())
    with pytest.raises(NotFoundError, match="its sections: "):
        kb.section("policies/travel.md", "9.9")
    # a heading with no text of its own is read as its subsections, each under its title
    whole = kb.section("policies/travel.md", "4")
    assert whole.title == "4 Approvals" and whole.section == "4"
    assert whole.title_path == ("Travel and Expense Policy", "4 Approvals")
    assert whole.text.index("4.1 Booking.\n") < whole.text.index("4.2 Approval thresholds.\n")
    assert "14 days ahead" in whole.text and "Chief Financial Officer" in whole.text
    with pytest.raises(NotFoundError, match="its sections: "):
        kb.section("policies/travel.md", "4.2.9")
    with pytest.raises(NotFoundError, match="ragloop docs"):
        kb.section("nope.md", "1")


def test_embedding_cache(location) -> None:
    backend = open_backend(location)
    store = backend.store
    try:
        a = np.arange(4, dtype=np.float32) / 7
        b = np.ones(3, dtype=np.float32)
        store.put_embeddings("m1", {"h1": a, "h2": b})
        store.put_embeddings("m1", {"h1": a * 0})  # first write wins (same text, same vector)
        got = store.get_embeddings("m1", ["h1", "h2", "h3"])
        assert set(got) == {"h1", "h2"}
        assert np.array_equal(got["h1"], a) and got["h1"].dtype == np.float32
        assert np.array_equal(got["h2"], b)
        assert store.get_embeddings("m2", ["h1"]) == {}
        assert store.get_embeddings("m1", []) == {}
        many = {f"x{i}": np.full(2, i, dtype=np.float32) for i in range(1200)}
        store.put_embeddings("m1", many)
        assert len(store.get_embeddings("m1", list(many))) == 1200
    finally:
        backend.close()


def test_meta_round_trip(location) -> None:
    backend = open_backend(location)
    store = backend.store
    try:
        assert store.get_meta("nope") is None
        store.set_meta("k", "v1")
        store.set_meta("k", "v2")
        assert store.get_meta("k") == "v2"
        assert store.chunk_count() == 0 and store.documents() == []
    finally:
        backend.close()


def test_another_embedder_on_open_is_a_clear_error(kb: KnowledgeBase, location) -> None:
    with pytest.raises(EmbedderMismatchError, match="all-MiniLM-L6-v2"):
        KnowledgeBase.open(location, Settings(embedder="openai:text-embedding-3-small"))
