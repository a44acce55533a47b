"""Hybrid search: BM25 and vector kNN, fused by reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ragloop.core.types import Hit
from ragloop.embed.base import Embedder
from ragloop.retrieval.fusion import (
    MODES,
    Mode,
    candidate_depth,
    fuse,
    reordered,
    shared_documents,
    term_level_ranks,
    tied,
)
from ragloop.retrieval.matched_terms import matched_terms
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.protocols import Store


def hybrid_search(store: Store, embedder: Embedder | None, query: str, k: int = 8,
                  mode: Mode = "hybrid", within: list[str] | None = None) -> list[Hit]:
    """Search `store` for `query`; any text is valid, an empty one raises EmptyQueryError.
    `within`: the doc ids hits may come from (a filter's selection; None: all)."""
    if mode not in MODES:
        raise ValueError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    # the KB's language picks the query's stop words and CJK bigrams, as on the index side
    language = store.language()
    terms = query_terms(query, language)
    depth = candidate_depth(k)
    if mode in ("hybrid", "vector") and embedder is None:
        raise ValueError("vector search needs an embedder")
    if mode == "hybrid":
        assert embedder is not None
        bm25 = store.search_bm25(terms, depth, within)
        vector = store.search_vector(embedder.embed_query([query])[0], depth, within)
        doc_of = store.chunk_docs(c for c, _ in bm25)
        # Only the candidates whose rank the rule may change are read and analysed (most are
        # alone in their document or already in vector order); the rest of the record is
        # read for the final k alone. Equal fused scores keep the groups' order, which needs
        # every shared document's terms: then those are read too.
        rows = store.chunks(reordered(bm25, doc_of, vector))
        ranks = term_level_ranks(bm25, _groups(rows, terms, language), vector)
        if tied(ranks, vector):
            rows.update(store.chunks(c for c in shared_documents(bm25, doc_of)
                                     if c not in rows))
            ranks = term_level_ranks(bm25, _groups(rows, terms, language), vector)
        return fuse(bm25, vector, k, mode, _reuse(rows, store.chunks), bm25_ranks=ranks)
    if mode == "bm25":
        return fuse(store.search_bm25(terms, depth, within), [], k, mode, store.chunks)
    assert embedder is not None
    return fuse([], store.search_vector(embedder.embed_query([query])[0], depth, within), k,
                mode, store.chunks)


def _groups(rows: dict[int, Hit], terms: list[str], language: str
            ) -> dict[int, tuple[str, frozenset[str]]]:
    """{chunk_id: (its document, the query terms it holds)}: tied within one document only,
    as across documents BM25's length and frequency order still carries signal (a corpus of
    one-chunk abstracts lost gold documents to it)."""
    held = matched_terms(rows, terms, language)
    return {cid: (rows[cid].doc_id, terms_held) for cid, terms_held in held.items()}


def _reuse(rows: dict[int, Hit], read: Callable[[Iterable[int]], dict[int, Hit]]
           ) -> Callable[[Iterable[int]], dict[int, Hit]]:
    """The record's rows for `ids`: those already read for the BM25 side, the rest read now."""
    def chunks(ids: Iterable[int]) -> dict[int, Hit]:
        ids = list(ids)
        out = {cid: rows[cid] for cid in ids if cid in rows}
        out.update(read(cid for cid in ids if cid not in rows))
        return out
    return chunks
