"""The two derived indexes of a knowledge base: tantivy (BM25) and usearch (HNSW).

Both are rebuilt from the SQLite record when missing or stale; they hold only chunk ids.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import tantivy
from usearch.index import Index as UsearchIndex

# Below this many vectors an exact scan is both fast and perfect.
EXACT_SEARCH_BELOW = 20_000


class FullTextIndex:
    """BM25 over chunk text (English stemming); documents are (chunk_id, doc_id, text)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("chunk_id", stored=False, indexed=True, fast=True)
        builder.add_text_field("doc_id", stored=False, tokenizer_name="raw")
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem", index_option="freq")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(folder), reuse=True)
        self._writer: tantivy.IndexWriter | None = None

    def _w(self) -> tantivy.IndexWriter:
        if self._writer is None:
            self._writer = self.index.writer(heap_size=256_000_000, num_threads=2)
        return self._writer

    def add(self, chunk_id: int, doc_id: str, text: str) -> None:
        doc = tantivy.Document()
        doc.add_unsigned("chunk_id", int(chunk_id))
        doc.add_text("doc_id", doc_id)
        doc.add_text("text", text)
        self._w().add_document(doc)

    def delete_doc(self, doc_id: str) -> None:
        self._w().delete_documents_by_term("doc_id", doc_id)

    def clear(self) -> None:
        self._w().delete_all_documents()

    @property
    def pending(self) -> bool:
        return self._writer is not None

    def commit(self) -> None:
        """Make writes durable and visible; the writer (and its lock) is released."""
        if self._writer is None:
            return
        self._writer.commit()
        self._writer.wait_merging_threads()
        self._writer = None
        self.index.reload()

    def search(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        query = self.index.parse_query(" ".join(terms), ["text"])
        searcher = self.index.searcher()
        hits = searcher.search(query, k, count=False).hits
        if not hits:
            return []
        ids = searcher.fast_field_values("chunk_id", [addr for _, addr in hits])
        return [(int(cid), float(score)) for (score, _), cid in zip(hits, ids, strict=True)]

    def size(self) -> int:
        return self.index.searcher().num_docs

    def destroy(self) -> None:
        self._writer = None
        shutil.rmtree(self.folder, ignore_errors=True)


class VectorIndex:
    """Cosine HNSW over unit vectors, keyed by chunk id; saved atomically on flush."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.dirty = False
        self.index = self._new()
        if path.exists():
            self.index.load(str(path))

    def _new(self) -> UsearchIndex:
        return UsearchIndex(ndim=self.dim, metric="cos", dtype="f32", connectivity=16,
                            expansion_add=128, expansion_search=128)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if len(keys):
            self.index.add(np.asarray(keys, dtype=np.uint64),
                           np.ascontiguousarray(vectors, dtype=np.float32))
            self.dirty = True

    def remove(self, keys: list[int]) -> None:
        if keys:
            self.index.remove(np.asarray(keys, dtype=np.uint64))
            self.dirty = True

    def clear(self) -> None:
        self.index = self._new()
        self.dirty = True

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        n = len(self.index)
        if n == 0:
            return []
        matches = self.index.search(np.asarray(vector, dtype=np.float32), min(k, n),
                                    exact=n < EXACT_SEARCH_BELOW)
        return [(int(key), 1.0 - float(dist))
                for key, dist in zip(matches.keys, matches.distances, strict=True)]

    def size(self) -> int:
        return len(self.index)

    def save(self) -> None:
        if not self.dirty:
            return
        tmp = self.path.with_suffix(".tmp")
        self.index.save(str(tmp))
        os.replace(tmp, self.path)
        self.dirty = False
