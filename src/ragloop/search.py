"""Hybrid search: BM25 and vector kNN, fused by reciprocal rank fusion."""

from __future__ import annotations

from typing import Literal

import numpy as np

from ragloop.embed.base import Embedder
from ragloop.store.base import Store
from ragloop.store.query_text import query_terms
from ragloop.types import Hit

Mode = Literal["hybrid", "bm25", "vector"]
MODES: tuple[str, ...] = ("hybrid", "bm25", "vector")
# The constant of Cormack et al.; it damps the weight of the very first ranks.
RRF_K = 60


def candidate_depth(k: int) -> int:
    """How deep each component searches before fusion: a hit ranked 40th by one side can
    still win if the other ranks it first."""
    return max(50, 3 * k)


def rrf(rankings: list[list[int]], k: int = RRF_K) -> dict[int, float]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def fused_top(fused: dict[int, float], firsts: list[int], k: int) -> list[int]:
    """The k best fused ids, with each retriever's first hit among them: RRF ranks a chunk
    that only one side finds (a paraphrase with no shared words: vector #1, no BM25 rank)
    below chunks both sides rank mediocre, so a one-sided best hit fell out of the top k."""
    order = sorted(fused, key=lambda cid: fused[cid], reverse=True)
    wanted = set(firsts)
    must = [cid for cid in order if cid in wanted][:k]
    kept = set(must)
    rest = [cid for cid in order if cid not in kept][: k - len(must)]
    return sorted([*must, *rest], key=lambda cid: fused[cid], reverse=True)


def embed_query(embedder: Embedder, query: str) -> np.ndarray:
    """The query's vector: through `embed_query` where the model embeds queries and passages
    differently (e5's "query: " / "passage: " prefixes), else `embed`."""
    embed = getattr(embedder, "embed_query", None) or embedder.embed
    return embed([query])[0]


def hybrid_search(store: Store, embedder: Embedder | None, query: str, k: int = 8,
                  mode: Mode = "hybrid") -> list[Hit]:
    """Search `store` for `query`; any text is valid, an empty one raises EmptyQueryError."""
    if mode not in MODES:
        raise ValueError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    # the KB's language picks the query's stop words and CJK bigrams, as on the index side
    language = store.language() if hasattr(store, "language") else None
    terms = query_terms(query, language)
    depth = candidate_depth(k)
    fused_in_store = getattr(store, "search_hybrid", None)
    if mode == "hybrid" and fused_in_store is not None:  # same RRF, in one round trip
        if embedder is None:
            raise ValueError("vector search needs an embedder")
        return fused_in_store(terms, embed_query(embedder, query), k, depth)
    bm25 = store.search_bm25(terms, depth) if mode in ("hybrid", "bm25") else []
    vector: list[tuple[int, float]] = []
    if mode in ("hybrid", "vector"):
        if embedder is None:
            raise ValueError("vector search needs an embedder")
        vector = store.search_vector(embed_query(embedder, query), depth)
    if mode == "bm25":
        fused = {cid: score for cid, score in bm25}
    elif mode == "vector":
        fused = {cid: score for cid, score in vector}
    else:
        fused = rrf([[cid for cid, _ in bm25], [cid for cid, _ in vector]])
    firsts = [ranked[0][0] for ranked in (bm25, vector) if ranked]
    top = (fused_top(fused, firsts, k) if mode == "hybrid"
           else sorted(fused, key=lambda cid: fused[cid], reverse=True)[:k])
    rows = store.chunks(top)
    bm25_pos = {cid: (rank, score) for rank, (cid, score) in enumerate(bm25, start=1)}
    vec_pos = {cid: (rank, score) for rank, (cid, score) in enumerate(vector, start=1)}
    hits = []
    for cid in top:
        hit = rows.get(cid)
        if hit is None:  # index ahead of the record (concurrent delete): skip it
            continue
        hit.score = fused[cid]
        if cid in bm25_pos:
            hit.bm25_rank, hit.bm25_score = bm25_pos[cid]
        if cid in vec_pos:
            hit.vector_rank, hit.vector_score = vec_pos[cid]
        hits.append(hit)
    return hits
