"""The two derived indexes of a knowledge base: tantivy (BM25) and hnswlib (HNSW).

Both are rebuilt from the SQLite record when missing or stale; they hold only chunk ids.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path

import hnswlib
import numpy as np
import tantivy

from ragloop.retrieval import languages

# Below this many vectors an exact scan is both fast and perfect.
EXACT_SEARCH_BELOW = 20_000
# HNSW graph: M=16 / ef_construction=128 is the common default; ef_search 96 keeps vector
# recall@10 vs exact >= 0.95 up to 1M chunks here (benchmarks/retrieval.py).
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 16, 128, 96
INITIAL_CAPACITY = 1024
# BM25 hits fetched past k so that a tie at the k-th score is broken by chunk id, not by
# which segment an indexing thread put a chunk in.
TIE_MARGIN = 16
# A filtered search reads the unfiltered ranking this many times as deep as the allowed
# share predicts (k / share), and at most WIDEN_MAX hits, before it filters inside the index
# (benchmarks/filtered.py: 10% of 100k chunks allowed).
OVERFETCH = 2
WIDEN_MAX = 20_000
# the graph walk's cost grows with its depth: read less extra there (a short result falls
# back to hnswlib's filter callback, which always finds k)
VECTOR_OVERFETCH = 1.5
# below this many allowed chunks in a large index their vectors are read and searched
# exactly, as a small index is (a principal reading 10,000 of 100,000 chunks: about 0.9 ms
# a search against 2.3 ms for the over-fetched walk, and exact); the vectors of the last
# ALLOWED_MATRICES_KEPT filters are kept (15 MB for 10,000 MiniLM vectors)
READ_ALLOWED_BELOW = EXACT_SEARCH_BELOW
ALLOWED_MATRICES_KEPT = 2


class FullTextIndex:
    """BM25 over chunk text with the KB language's analyzer (retrieval/languages.py);
    documents are (chunk_id, doc_id, text)."""

    def __init__(self, folder: Path | None, language: str | None) -> None:
        """`folder` None: an index in memory only (a read that cannot write its folder)."""
        self.folder = folder
        self.language = languages.get_language(language).code
        tokenizer = languages.tokenizer_name(self.language)
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("chunk_id", stored=False, indexed=True, fast=True)
        builder.add_text_field("doc_id", stored=False, tokenizer_name="raw")
        builder.add_text_field("text", stored=False, tokenizer_name=tokenizer, index_option="freq")
        self.schema = builder.build()
        if folder is None:
            self.index = tantivy.Index(self.schema)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self.index = tantivy.Index(self.schema, path=str(folder), reuse=True)
        analyzer = languages.text_analyzer(self.language)
        if analyzer is not None:  # custom analyzers live in the process, not in the index files
            self.index.register_tokenizer(tokenizer, analyzer)
        self._writer: tantivy.IndexWriter | None = None

    def _w(self) -> tantivy.IndexWriter:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=256_000_000, num_threads=2)
        return self._writer

    def add(self, chunk_id: int, doc_id: str, text: str) -> None:
        doc = tantivy.Document()
        doc.add_unsigned("chunk_id", int(chunk_id))
        doc.add_text("doc_id", doc_id)
        doc.add_text("text", languages.prepare(self.language, text))
        self._w().add_document(doc)

    def delete_doc(self, doc_id: str) -> None:
        self._w().delete_documents_by_term("doc_id", doc_id)

    def clear(self) -> None:
        self._w().delete_all_documents()

    @property
    def pending(self) -> bool:
        return self._writer is not None

    def rollback(self) -> None:
        """Drop the writes not yet committed (a failed batch); the writer's lock is released."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.rollback()

    def commit(self) -> None:
        """Make writes durable and visible; the writer (and its lock) is released."""
        if self._writer is None:
            return
        self._writer.commit()
        self._writer.wait_merging_threads()
        self._writer = None
        self.index.reload()

    def search(self, terms: list[str], k: int, within: list[str] | None = None,
               allowed: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """`within`: doc ids the hits must come from (a search filter), applied in the query
        so that the top k are the top k of those documents. `allowed`: their chunk ids, when
        known: the unfiltered ranking is read as deep as needed and filtered, the same top k
        (ties by chunk id, as always) without a term set of every allowed doc id in the
        query, which costs tens of milliseconds once there are thousands of them."""
        if not terms:
            return []
        try:
            query = self.index.parse_query(" ".join(terms), ["text"])
        except ValueError:  # the analyzer dropped every term (a word over 40 bytes, e.g. a
            return []  # whole Chinese sentence under the English analyzer): nothing matches
        if allowed is not None:
            found = self._search_allowed(query, k, allowed)
            if found is not None:
                return found
        if within is not None:
            # scored 0 so the BM25 scores stay those of the text alone
            docs = tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(self.schema, "doc_id", list(within)), 0.0)
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query),
                                                 (tantivy.Occur.Must, docs)])
        searcher = self.index.searcher()
        # equal scores (the same templated section of every quarter's report) come back in
        # segment order, which differs between two ingests of the same files: fetch a margin
        # and break ties by chunk id, as the Postgres store does
        hits = searcher.search(query, k + TIE_MARGIN, count=False).hits
        if not hits:
            return []
        ids = searcher.fast_field_values("chunk_id", [addr for _, addr in hits])
        ranked = sorted(((int(cid), float(score)) for (score, _), cid
                         in zip(hits, ids, strict=True)), key=lambda x: (-x[1], x[0]))
        return ranked[:k]

    def _search_allowed(self, query: tantivy.Query, k: int,
                        allowed: frozenset[int]) -> list[tuple[int, float]] | None:
        """The top k of `allowed` from the unfiltered ranking, read `OVERFETCH` times as deep
        as their share predicts, deeper while short; None (filter in the query instead) when
        that would read more than WIDEN_MAX hits. Exact: a hit counts only when its score is
        above the last one read (or the ranking was read to its end), so a tie at the cut
        cannot hide an allowed chunk of equal score and lower id."""
        searcher = self.index.searcher()
        total = max(1, searcher.num_docs)
        depth = max(k, int(k * OVERFETCH * total / max(1, len(allowed))))
        while depth <= WIDEN_MAX:
            hits = searcher.search(query, depth + TIE_MARGIN, count=False).hits
            if not hits:
                return []
            ids = searcher.fast_field_values("chunk_id", [addr for _, addr in hits])
            whole = len(hits) < depth + TIE_MARGIN
            last = min(score for score, _ in hits)
            kept = [(int(cid), float(score)) for (score, _), cid in zip(hits, ids, strict=True)
                    if cid in allowed and (whole or score > last)]
            if whole or len(kept) >= k:
                kept.sort(key=lambda x: (-x[1], x[0]))
                return kept[:k]
            depth *= 4
        return None

    def size(self) -> int:
        return self.index.searcher().num_docs

    def ids(self) -> list[int]:
        """Every chunk id the index holds (what a consistency check compares with the record)."""
        searcher = self.index.searcher()
        if not searcher.num_docs:
            return []
        hits = searcher.search(tantivy.Query.all_query(), searcher.num_docs, count=False).hits
        return sorted(int(c) for c in searcher.fast_field_values(
            "chunk_id", [addr for _, addr in hits]))


class VectorIndex:
    """Cosine HNSW (hnswlib) over unit vectors, keyed by chunk id; saved atomically on flush.

    hnswlib rather than usearch: on these machines it built 2x faster and answered 2.5x faster
    at the same recall (benchmarks/retrieval.py). Removed chunks stay in the graph as tombstones
    (hnswlib skips them); their ids are kept in a sidecar so counts and the exact path know them.
    """

    def __init__(self, path: Path | None, dim: int) -> None:
        """`path` None: in memory only, never saved."""
        self.path = path
        self.dim = dim
        self.dirty = False
        self.lock = threading.RLock()  # hnswlib may not be searched while it is written
        self.deleted: set[int] = set()
        self._exact: tuple[np.ndarray, np.ndarray] | None = None
        # the vectors of the last filters searched exactly, by their chunk id set
        self._allowed_exact: dict[frozenset[int], hnswlib.BFIndex] = {}
        if path is not None and path.exists() and self._sidecar(path).exists():
            meta = json.loads(self._sidecar(path).read_text())
            self.index = hnswlib.Index(space="cosine", dim=dim)
            self.index.load_index(str(path), max_elements=int(meta["capacity"]))
            self.index.set_ef(HNSW_EF_SEARCH)
            self.deleted = {int(k) for k in meta["deleted"]}
        else:
            self.index = self._new(INITIAL_CAPACITY)

    @staticmethod
    def _sidecar(path: Path) -> Path:
        return path.with_name(path.name + ".json")

    def _new(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(max_elements=capacity, M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION)
        index.set_ef(HNSW_EF_SEARCH)
        return index

    def __len__(self) -> int:
        return self.index.element_count - len(self.deleted)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if not len(keys):
            return
        with self.lock:
            need = self.index.element_count + len(keys)
            if need > self.index.get_max_elements():
                self.index.resize_index(max(need, 2 * self.index.get_max_elements()))
            self.index.add_items(np.ascontiguousarray(vectors, dtype=np.float32),
                                 np.asarray(keys, dtype=np.uint64))
            self.deleted.difference_update(int(k) for k in keys)
            self._changed()

    def remove(self, keys: list[int]) -> None:
        with self.lock:
            for key in keys:
                if key not in self.deleted:
                    try:
                        self.index.mark_deleted(int(key))
                    except RuntimeError:  # not in the index (no vector was stored for it)
                        continue
                    self.deleted.add(int(key))
                    self._changed()

    def clear(self) -> None:
        with self.lock:
            self.index = self._new(INITIAL_CAPACITY)
            self.deleted = set()
            self._changed()

    def _changed(self) -> None:
        self.dirty, self._exact = True, None
        self._allowed_exact.clear()

    def _exact_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        if self._exact is None:
            ids = np.asarray([i for i in self.index.get_ids_list() if i not in self.deleted],
                             dtype=np.uint64)
            mat = self.index.get_items(ids, return_type="numpy").astype(np.float32)
            mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
            self._exact = (ids, mat)
        return self._exact

    def search(self, vector: np.ndarray, k: int,
               within: frozenset[int] | None = None) -> list[tuple[int, float]]:
        """`within`: the chunk ids allowed (a search filter): in a small index, or when
        fewer than EXACT_SEARCH_BELOW, searched exactly; else by an over-fetched unfiltered
        walk, else hnswlib's filter callback, which the graph walk applies as it goes (so
        it still finds k of them)."""
        query = np.asarray(vector, dtype=np.float32)
        with self.lock:
            if within is not None:
                return self._search_within(query, k, within)
            n = len(self)
            if n == 0:
                return []
            k = min(k, n)
            if n < EXACT_SEARCH_BELOW:
                ids, mat = self._exact_matrix()
                scores = mat @ (query / max(float(np.linalg.norm(query)), 1e-12))
                top = np.argpartition(-scores, k - 1)[:k]
                top = top[np.argsort(-scores[top])]
                return [(int(ids[i]), float(scores[i])) for i in top]
            self.index.set_ef(max(HNSW_EF_SEARCH, k))
            try:
                labels, dists = self.index.knn_query(query, k=k, num_threads=1)
            except RuntimeError:  # tombstones left fewer than k reachable: ask for fewer
                self.index.set_ef(max(HNSW_EF_SEARCH, 4 * k))
                labels, dists = self.index.knn_query(query, k=max(1, k // 2), num_threads=1)
        return [(int(key), 1.0 - float(d)) for key, d in zip(labels[0], dists[0], strict=True)]

    def _search_within(self, query: np.ndarray, k: int,
                       within: frozenset[int]) -> list[tuple[int, float]]:
        live = within - self.deleted if self.deleted else within
        if not live:
            return []
        k = min(k, len(live))
        if len(self) < EXACT_SEARCH_BELOW:  # the exact matrix is small and kept
            ids, mat = self._exact_matrix()
            rows = np.flatnonzero(np.isin(ids, np.fromiter(live, dtype=np.uint64)))
            return self._exact_top(query, ids[rows], mat[rows], k)
        if len(live) < READ_ALLOWED_BELOW:
            # as few as a small index holds: searched exactly as one, their vectors read once
            # per filter and version of the index (the store keeps a filter's frozenset)
            return self._allowed_exact_top(query, k, within, live)
        # many allowed in a large index: the unfiltered walk as deep as the allowed share
        # predicts, then filtered, deeper while short; hnswlib's filter callback (a Python
        # call per node visited) after that
        wide = max(k, int(k * VECTOR_OVERFETCH * len(self) / len(live)))
        while wide <= WIDEN_MAX // 4:
            self.index.set_ef(max(HNSW_EF_SEARCH, wide))
            try:
                labels, dists = self.index.knn_query(query, k=min(wide, len(self)),
                                                     num_threads=1)
            except RuntimeError:  # tombstones left fewer reachable: the filtered walk
                break
            kept = [(int(key), 1.0 - float(d)) for key, d in
                    zip(labels[0], dists[0], strict=True) if int(key) in live]
            if len(kept) >= k:
                return kept[:k]
            wide *= 4
        allowed = live
        self.index.set_ef(max(HNSW_EF_SEARCH, 2 * k))
        try:
            labels, dists = self.index.knn_query(query, k=k, num_threads=1,
                                                 filter=lambda key: key in allowed)
        except RuntimeError:  # the walk reached fewer than k allowed: ask for fewer
            labels, dists = self.index.knn_query(query, k=max(1, k // 2), num_threads=1,
                                                 filter=lambda key: key in allowed)
        return [(int(key), 1.0 - float(d)) for key, d in zip(labels[0], dists[0], strict=True)]

    def _allowed_exact_top(self, query: np.ndarray, k: int, within: frozenset[int],
                           live: frozenset[int]) -> list[tuple[int, float]]:
        """The exact top k of `live` (`within` less tombstones): their vectors read once
        (hnswlib's get_items, about 30,000 a second here) into a brute-force index kept
        for the last filters. hnswlib's brute force on one thread, not a numpy product:
        OpenBLAS's threads cost ten times as much on a machine whose cores are busy."""
        found = self._allowed_exact.pop(within, None)
        if found is None:
            ids = np.fromiter(live, dtype=np.uint64, count=len(live))
            mat = self.index.get_items(ids, return_type="numpy").astype(np.float32)
            mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
            # "ip" on unit vectors: hnswlib's brute force does not normalise for "cosine"
            found = hnswlib.BFIndex(space="ip", dim=self.dim)
            found.init_index(max_elements=len(ids))
            found.add_items(mat, ids)
        self._allowed_exact[within] = found  # the newest last; the oldest goes
        while len(self._allowed_exact) > ALLOWED_MATRICES_KEPT:
            self._allowed_exact.pop(next(iter(self._allowed_exact)))
        unit = query / max(float(np.linalg.norm(query)), 1e-12)
        labels, dists = found.knn_query(unit, k=min(k, len(live)), num_threads=1)
        return [(int(key), 1.0 - float(d)) for key, d in zip(labels[0], dists[0], strict=True)]

    @staticmethod
    def _exact_top(query: np.ndarray, ids: np.ndarray, mat: np.ndarray,
                   k: int) -> list[tuple[int, float]]:
        k = min(k, len(ids))
        if k == 0:
            return []
        scores = mat @ (query / max(float(np.linalg.norm(query)), 1e-12))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def size(self) -> int:
        return len(self)

    def ids(self) -> list[int]:
        """Every live chunk id (tombstones excluded)."""
        with self.lock:
            return sorted(int(i) for i in self.index.get_ids_list() if int(i) not in self.deleted)

    def _least_file_size(self) -> int:
        """The fewest bytes hnswlib's saveIndex writes for this graph: a 96-byte header, then
        per element its level-0 record (links, vector, label) and a 4-byte link-list size."""
        level0 = (4 + 2 * HNSW_M * 4) + 4 * self.dim + 8
        return 96 + self.index.element_count * (level0 + 4)

    def save(self) -> None:
        with self.lock:
            if not self.dirty or self.path is None:
                return
            tmp = self.path.with_suffix(".tmp")
            self.index.save_index(str(tmp))
            # hnswlib does not check its writes: on a full disk the file is just short
            written = tmp.stat().st_size if tmp.exists() else 0
            if written < self._least_file_size():
                tmp.unlink(missing_ok=True)
                raise OSError(errno.ENOSPC, f"hnswlib wrote {written} of at least"
                              f" {self._least_file_size()} bytes (disk full?)", str(tmp))
            meta = {"capacity": self.index.get_max_elements(), "deleted": sorted(self.deleted)}
            side_tmp = self._sidecar(self.path).with_suffix(".tmp")
            side_tmp.write_text(json.dumps(meta))
            os.replace(tmp, self.path)
            os.replace(side_tmp, self._sidecar(self.path))
            self.dirty = False
