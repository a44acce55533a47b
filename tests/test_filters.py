"""Search filters on both backends (SQLite + tantivy + hnswlib; a real Postgres + pgvector):
a filtered search returns k hits when k chunks match, and none from outside the filter, even
when every matching chunk ranks below the unfiltered top k (a filter applied after the top k
would return nothing)."""

from __future__ import annotations

import numpy as np
import pytest

from ragloop.core.config import Settings
from ragloop.core.errors import UserError
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.filters import Filter, make_filter
from ragloop.storage.sqlite import indexes

K = 5
NOISE = 30  # documents that match the query better than any filtered one
QUERY = "boiler pressure valve maintenance"


def _corpus(root):
    """NOISE manuals about the query's words, 8 archived memos that only touch them, dated
    2021-01 .. 2021-08, authored by two people, under archive/."""
    (root / "manuals").mkdir(parents=True)
    (root / "archive").mkdir()
    for i in range(NOISE):
        (root / "manuals" / f"m{i:02}.md").write_text(
            f"# Boiler manual {i}\n\nBoiler pressure valve maintenance: check the boiler"
            f" pressure valve weekly; valve maintenance keeps boiler pressure safe ({i}).\n",
            encoding="utf-8")
    for i in range(8):
        author = "Ada Byron" if i % 2 else "Bob Stone"
        (root / "archive" / f"memo{i}.md").write_text(
            f"---\ntitle: Memo {i}\nauthor: {author}\ndate: 2021-0{i + 1}-15\n---\n"
            f"# Memo {i}\n\nThe canteen menu changes on Monday {i}. The valve in the kitchen"
            f" was mentioned once.\n", encoding="utf-8")
    return root


@pytest.fixture
def kb(location, embedder, tmp_path):
    base = KnowledgeBase.open(location, Settings(), embedder=embedder)
    base.ingest([_corpus(tmp_path / "docs")], tags=["plant"])
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "note.md").write_text("# Note\n\nThe valve was replaced.\n",
                                               encoding="utf-8")
    base.ingest([tmp_path / "more"], tags=["old"])
    yield base
    base.close()


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_a_filtered_search_returns_k_hits_from_inside_the_filter(kb, mode) -> None:
    plain = kb.search(QUERY, K, mode)
    assert len(plain) == K and not any(h.doc_id.startswith("archive/") for h in plain)
    hits = kb.search(QUERY, K, mode, filter=make_filter(source=["*/archive/*"]))
    assert len(hits) == K
    assert all(h.doc_id.startswith("archive/") for h in hits)
    # fewer than k match: all of them, nothing else
    two = kb.search(QUERY, K, mode, filter=make_filter(doc_id_prefix=["archive/memo1",
                                                                      "archive/memo2"]))
    assert sorted(h.doc_id for h in two) == ["archive/memo1.md", "archive/memo2.md"]


def test_metadata_tags_and_date_ranges_select_documents(kb) -> None:
    def docs(flt: Filter | None) -> set[str]:
        return {h.doc_id for h in kb.search(QUERY, 20, "hybrid", filter=flt)}

    ada = docs(make_filter(metadata=["author=ada byron"]))
    assert ada == {f"archive/memo{i}.md" for i in (1, 3, 5, 7)}
    spring = docs(make_filter(date_from="2021-03", date_to="2021-05-31"))
    assert spring == {f"archive/memo{i}.md" for i in (2, 3, 4)}
    both = docs(make_filter(metadata=["author=Ada Byron"], date_from="2021-03",
                            date_to="2021-05"))
    assert both == {"archive/memo3.md"}
    assert docs(make_filter(tag=["old"])) == {"note.md"}
    assert "note.md" not in docs(make_filter(tag=["plant"]))
    assert docs(make_filter(metadata=["author=nobody"])) == set()
    memo = next(d for d in kb.documents() if d.doc_id == "archive/memo1.md")
    assert memo.metadata["author"] == "Ada Byron" and memo.metadata["date"] == "2021-02-15"
    assert memo.metadata["tags"] == ["plant"]


def test_a_bad_filter_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="KEY=VALUE"):
        make_filter(metadata=["author"])
    with pytest.raises(UserError, match="YYYY"):
        make_filter(date_from="March 2021")
    assert make_filter() is None


def test_the_hnsw_walk_applies_the_filter(tmp_path, monkeypatch) -> None:
    """Past the exact-scan threshold the filter goes into hnswlib's graph walk: still k hits
    when k are allowed, all of them allowed, the same as an exact scan of the allowed ones."""
    monkeypatch.setattr(indexes, "EXACT_SEARCH_BELOW", 50)
    monkeypatch.setattr(indexes, "READ_ALLOWED_BELOW", 50)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(2000, 32)).astype(np.float32)
    index = indexes.VectorIndex(tmp_path / "v.hnsw", 32)
    index.add(np.arange(2000, dtype=np.uint64), vectors)
    allowed = frozenset(range(0, 2000, 17))  # 118 of 2000: past the threshold, so the graph walk
    query = rng.normal(size=32).astype(np.float32)
    got = index.search(query, 10, allowed)
    assert len(got) == 10 and all(cid in allowed for cid, _ in got)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.asarray(sorted(allowed))
    exact = ids[np.argsort(-(unit[ids] @ (query / np.linalg.norm(query))))[:10]]
    assert len({cid for cid, _ in got} & set(exact.tolist())) >= 9
    few = index.search(query, 10, frozenset({3, 5}))  # under it: an exact scan of the two
    assert sorted(cid for cid, _ in few) == [3, 5]


def test_the_search_tool_takes_the_filter(kb) -> None:
    from ragloop.agent.tools import SEARCH, Toolbox

    box = Toolbox(kb, k=K)
    found = box.run_tool(SEARCH, {"query": QUERY, "doc_id_prefix": "archive/"})
    assert not found.is_error and found.event.chunks == K
    assert "archive/" in found.text and "manuals/" not in found.text
    bad = box.run_tool(SEARCH, {"query": QUERY, "date_from": "last spring"})
    assert bad.is_error and "YYYY" in bad.text


def test_postgres_filtered_knn_keeps_walking_the_hnsw_index(pg_url, embedder, tmp_path) -> None:
    """Through the HNSW index (sequential scans off) with a small ef_search, the filter's
    WHERE alone finds none of the chosen documents among the nearest; the iterative scan
    the store turns on reads on until k of them pass."""
    from pgvector.psycopg import register_vector

    from ragloop.storage.postgres.store import VECTOR_WITHIN_SQL, connect

    with KnowledgeBase.open(pg_url, Settings(), embedder=embedder) as base:
        base.ingest([_corpus(tmp_path / "docs")])
        docs = [d.doc_id for d in base.documents() if d.doc_id.startswith("archive/")]
        vector = embedder.embed_query([QUERY])[0]

    def knn(iterative: str) -> tuple[list, str]:
        with connect(pg_url) as conn, conn.transaction():
            register_vector(conn)
            for scan in ("seqscan", "bitmapscan", "sort"):  # leave the HNSW index scan
                conn.execute(f"SET LOCAL enable_{scan} = off")
            conn.execute("SET LOCAL hnsw.ef_search = 10")
            conn.execute(f"SET LOCAL hnsw.iterative_scan = {iterative}")
            args = {"v": vector, "depth": K, "docs": docs}
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + VECTOR_WITHIN_SQL, args))
            return conn.execute(VECTOR_WITHIN_SQL, args).fetchall(), plan

    rows, plan = knn("strict_order")
    assert "chunks_embedding_hnsw" in plan
    assert len(rows) == K
    assert len(knn("off")[0]) < K
