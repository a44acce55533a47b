"""Reciprocal rank fusion of a BM25 ranking and a vector ranking, keeping each side's first hit:
the one definition every store and mode uses."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Literal

from ragloop.core.types import Hit

Mode = Literal["hybrid", "bm25", "vector"]
MODES: tuple[str, ...] = ("hybrid", "bm25", "vector")
# The constant of Cormack et al.; it damps the weight of the very first ranks.
RRF_K = 60


def candidate_depth(k: int) -> int:
    """How deep each component searches before fusion: a hit ranked 40th by one side can
    still win if the other ranks it first."""
    return max(50, 3 * k)


def rrf(rankings: list[dict[int, int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion of {id: rank} rankings (equal ranks are ties)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for key, rank in ranking.items():
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def positions(ranked: list[tuple[int, float]]) -> dict[int, int]:
    return {cid: rank for rank, (cid, _) in enumerate(ranked, start=1)}


def term_level_ranks(bm25: list[tuple[int, float]], matched: Mapping[int, Hashable],
                     vector: list[tuple[int, float]]) -> dict[int, int]:
    """BM25 ranks in which the chunks of one group (the caller's: a document and the query
    terms its chunk holds) hand out the group's BM25 ranks in the vector side's order. Among
    one document's chunks that hold the same query terms BM25's order is term frequency and
    length only: for a question naming a product and a property no chunk words the same way,
    every chunk of the product's document matched the product's name alone (the document's
    title holds it), and that order put a short unrelated section first and the section the
    vectors ranked first ninth. The group keeps its set of ranks (no document gains places);
    only which of its chunks holds which rank changes. A chunk with no entry in `matched`
    keeps its rank."""
    position = positions(vector)
    groups: dict[Hashable, list[tuple[int, int]]] = {}
    for rank, (cid, _) in enumerate(bm25, start=1):
        # a chunk with no entry is a group of its own, in its place: the ranks come out in
        # the order of the groups' first members, the order RRF's equal scores keep
        groups.setdefault(matched.get(cid, (_ALONE, cid)), []).append((rank, cid))
    ranks: dict[int, int] = {}
    for members in groups.values():
        by_vector = sorted(members, key=lambda m: (position.get(m[1], len(position) + 1), m[0]))
        for (rank, _), (_, cid) in zip(members, by_vector, strict=True):
            ranks[cid] = rank
    return ranks


_ALONE = object()


def shared_documents(bm25: list[tuple[int, float]], doc_of: Mapping[int, str]) -> list[int]:
    """The BM25 candidates whose document has two or more candidates: the only ones whose
    group (document and terms held) can hold more than one chunk."""
    count: dict[str, int] = {}
    for cid, _ in bm25:
        if cid in doc_of:
            count[doc_of[cid]] = count.get(doc_of[cid], 0) + 1
    return [cid for cid, _ in bm25 if count.get(doc_of.get(cid, ""), 0) > 1]


def reordered(bm25: list[tuple[int, float]], doc_of: Mapping[int, str],
              vector: list[tuple[int, float]]) -> list[int]:
    """The BM25 candidates whose rank term_level_ranks may change: those of a document with
    two or more candidates that the vector side orders otherwise than BM25. In any other
    document each group's members are already in vector order, so every chunk keeps its
    rank whatever terms it holds, and its text need not be read or analysed."""
    position = positions(vector)
    missing = len(position) + 1
    by_doc: dict[str, list[int]] = {}
    for cid in shared_documents(bm25, doc_of):
        by_doc.setdefault(doc_of[cid], []).append(cid)
    out: list[int] = []
    for members in by_doc.values():
        keys = [position.get(cid, missing) for cid in members]
        # members are in BM25 order; term_level_ranks sorts by (vector position, BM25 rank)
        if any(a > b for a, b in pairwise(keys)):
            out += members
    return out


def tied(bm25_ranks: dict[int, int], vector: list[tuple[int, float]]) -> bool:
    """Whether two BM25 candidates get the same fused score: their order (and which of
    them makes the top k) is then the order of `bm25_ranks`, that is of the groups."""
    fused = rrf([bm25_ranks, positions(vector)])
    scores = [fused[cid] for cid in bm25_ranks]
    return len(set(scores)) < len(scores)


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


def fuse(bm25: list[tuple[int, float]], vector: list[tuple[int, float]], k: int, mode: Mode,
         chunks: Callable[[Iterable[int]], dict[int, Hit]],
         bm25_ranks: dict[int, int] | None = None) -> list[Hit]:
    """The top `k` hits of one mode from each side's (chunk_id, score) ranking, best first,
    with each side's rank and score on the hit; `chunks` reads the hits from the record.
    `bm25_ranks` (hybrid): the BM25 ranks fusion uses (term_level_ranks), else positions."""
    if mode == "bm25":
        fused = {cid: score for cid, score in bm25}
    elif mode == "vector":
        fused = {cid: score for cid, score in vector}
    else:
        fused = rrf([bm25_ranks or positions(bm25), positions(vector)])
    firsts = [ranked[0][0] for ranked in (bm25, vector) if ranked]
    top = (fused_top(fused, firsts, k) if mode == "hybrid"
           else sorted(fused, key=lambda cid: fused[cid], reverse=True)[:k])
    rows = chunks(top)
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


def fused_pages(pages: Sequence[Sequence[Hit]], prior: Sequence[str] = ()) -> list[Hit]:
    """Several searches' pages as one (a conversation's follow-up: offline/follow_up.py): the
    hits in reciprocal-rank-fused order (each chunk once; as long as the longest page), each
    chunk of a `prior` document credited as that document's place in `prior`, one more list."""
    score: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], Hit] = {}
    for page in pages:
        for rank, h in enumerate(page):
            key = (h.kb, h.chunk_id)  # chunk ids are per knowledge base
            score[key] = score.get(key, 0.0) + 1 / (RRF_K + rank + 1)
            first.setdefault(key, h)
    place = {d: r for r, d in enumerate(dict.fromkeys(prior))}
    for key, h in first.items():
        if h.doc_id in place:
            score[key] += 1 / (RRF_K + place[h.doc_id] + 1)
    order = sorted(first, key=lambda c: -score[c])
    return [first[c] for c in order[:max((len(p) for p in pages), default=0)]]
