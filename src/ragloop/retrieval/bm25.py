"""BM25 as tantivy scores it, for the scores the stores compute themselves.

tantivy (quickwit-oss/tantivy, src/query/bm25.rs): k1 = 1.2, b = 0.75; a term's weight is
idf · (1 + k1) with idf = ln(1 + (N - df + 0.5) / (df + 0.5)); a chunk's part for the term is
weight · tf / (tf + k1 · (1 - b + b · dl / avgdl)), dl the chunk's token count rounded down to
tantivy's one-byte field norm (src/fieldnorm/code.rs), avgdl the corpus's token count / N;
the parts of the query's clauses are summed (one clause per query word, so two words that stem
alike count twice). tantivy computes in float32, and so does `Postings` here.

The Postgres store scores with these in SQL (storage/postgres/fulltext.py); the SQLite store
asks tantivy itself for an admin's search and scores a search whose statistics count some
documents only (`counted`: a principal's readable ones, kb/access.py) with `Postings` over
those chunks alone, so that the statistics, and so a readable chunk's score, are what a
knowledge base holding only those documents would give: they say nothing of the others.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from ragloop.retrieval import languages

K1, B = 1.2, 0.75


def _decode_fieldnorm(code: int) -> int:
    """tantivy's field-norm byte -> length: 0..23 exact, then 3 mantissa bits + exponent."""
    if code < 24:
        return code
    b = code - 24
    bits, shift = b & 0b111, b >> 3
    return 24 + (bits if shift == 0 else (bits | 8) << (shift - 1))


FIELDNORMS = [_decode_fieldnorm(i) for i in range(256)]


def fieldnorm_id(length: int) -> int:
    """The byte tantivy stores for a field of `length` tokens (rounded down to its table)."""
    return bisect.bisect_right(FIELDNORMS, length) - 1


def fieldnorm(length: int) -> int:
    """The length tantivy scores a field of `length` tokens with."""
    return FIELDNORMS[fieldnorm_id(length)]


def tf_part(tf: float, dl: float, avgdl: float) -> float:
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


def idf(df: float, n: float) -> float:
    return math.log(1 + (max(n, df) - df + 0.5) / (df + 0.5))


def mean_length(tokens: int, chunks: int) -> float:
    """avgdl: the mean token count of `chunks` chunks holding `tokens` tokens (at least 1)."""
    return max(1.0, tokens / max(chunks, 1))


# -- analysis: the index's tokens, in Python ----------------------------------------------

@lru_cache(maxsize=64)
def _analyzer(code: str):
    return languages.analyzer(code)


def terms_of(language: str, text: str) -> list[str]:
    """The tokens BM25 indexes for `text` in a KB of `language` (the analyzer of the SQLite
    store's tantivy index, built in this process)."""
    return _analyzer(languages.get_language(language).code).analyze(
        languages.prepare(language, text))


def query_weights(language: str, words: Iterable[str]) -> Counter[str]:
    """Query words -> index terms with their multiplicity: tantivy's query parser makes one
    clause per word, so two words that stem alike ("run", "running") count twice."""
    weights: Counter[str] = Counter()
    for word in words:
        weights.update(terms_of(language, word))
    return weights


# -- exact BM25 over a fixed set of chunks ------------------------------------------------

_F32 = np.float32
_FIELDNORMS_F32 = np.asarray(FIELDNORMS, dtype=_F32)


class Vocabulary:
    """Terms numbered in the order first met: a chunk's tokens kept as a small int array."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, terms: list[str]) -> np.ndarray:
        ids = self.ids
        return np.fromiter((ids.setdefault(t, len(ids)) for t in terms), dtype=np.int32,
                           count=len(terms))


class Postings:
    """The chunks of some documents, as an inverted index in memory, scored by BM25 with
    their own statistics (N, df and avgdl of these chunks only) in tantivy's float32
    arithmetic, every matching chunk scored: the exact top k, ties by chunk id."""

    def __init__(self, ids: list[int], tokens: list[np.ndarray], vocabulary: Vocabulary
                 ) -> None:
        """`ids`: chunk ids; `tokens`: each one's tokens (`terms_of` of what the index holds
        for it), encoded by `vocabulary` (which may grow later: terms it numbers after this
        are not in these chunks)."""
        self.ids = np.asarray(ids, dtype=np.int64)
        self.n = n = len(ids)
        sizes = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=n)
        self.tokens = int(sizes.sum())
        self._norm_ids = (np.searchsorted(np.asarray(FIELDNORMS), sizes, side="right")
                          - 1).astype(np.uint8)
        # every (term, chunk) pair once, sorted by term then chunk: a term's postings are
        # one slice of _pos / _tf, found through _start (numpy: 10,000 chunks in ~0.1 s)
        self._terms = vocabulary.ids
        stream = np.concatenate(tokens).astype(np.int64) if n else np.zeros(0, np.int64)
        pairs, tf = np.unique(stream * max(n, 1) + np.repeat(np.arange(n), sizes),
                              return_counts=True)
        self._pos = (pairs % max(n, 1)).astype(np.int32)
        self._tf = tf.astype(_F32)
        self._known = len(self._terms)
        self._start = np.searchsorted(pairs // max(n, 1), np.arange(self._known + 1))

    @classmethod
    def of(cls, chunks: Iterable[tuple[int, list[str]]]) -> Postings:
        """From (chunk_id, its tokens) pairs, with a vocabulary of their own."""
        vocabulary = Vocabulary()
        ids, tokens = [], []
        for chunk_id, terms in chunks:
            ids.append(chunk_id)
            tokens.append(vocabulary.encode(terms))
        return cls(ids, tokens, vocabulary)

    def __len__(self) -> int:
        return self.n

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(positions in `ids`, tf) of the chunks holding `term`."""
        t = self._terms.get(term)
        if t is None or t >= self._known:  # numbered after these chunks were indexed
            return None
        part = slice(self._start[t], self._start[t + 1])
        return self._pos[part], self._tf[part]

    def df(self, term: str) -> int:
        found = self._postings(term)
        return 0 if found is None else len(found[0])

    def search(self, weights: Counter[str], k: int,
               keep: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The top `k` (chunk_id, score) for query terms with multiplicities, best first;
        `keep`: which chunks (a mask over `ids`) may be hits (a search filter: they are
        scored with the statistics of all these chunks all the same)."""
        if k <= 0 or not self.tokens:  # no chunk holds a term
            return []
        # tantivy: average_fieldnorm = total_num_tokens / total_num_docs, then per field-norm
        # byte K1 * (1 - B + B * fieldnorm / average_fieldnorm), all float32
        avgdl = _F32(self.tokens) / _F32(self.n)
        cache = _F32(K1) * (_F32(1) - _F32(B) + _F32(B) * _FIELDNORMS_F32 / avgdl)
        scores = np.zeros(self.n, dtype=_F32)
        n = _F32(self.n)
        for term, times in weights.items():
            found = self._postings(term)
            if found is None:
                continue
            pos, tf = found
            df = _F32(len(pos))
            x = (n - df + _F32(0.5)) / (df + _F32(0.5))
            weight = np.log(_F32(1) + x, dtype=_F32) * _F32(1 + K1)
            part = weight * tf / (tf + cache[self._norm_ids[pos]])
            for _ in range(times):  # one clause per query word, summed as tantivy sums them
                scores[pos] += part
        matched = scores > 0  # every matching chunk scores above 0 (idf > 0)
        hit = np.flatnonzero(matched if keep is None else matched & keep)
        if len(hit) > k:  # keep those at or above the k-th score (a tie there: by chunk id)
            kth = np.partition(scores[hit], len(hit) - k)[len(hit) - k]
            hit = hit[scores[hit] >= kth]
        order = np.lexsort((self.ids[hit], -scores[hit]))[:k]
        return [(int(self.ids[hit[i]]), float(scores[hit[i]])) for i in order]
