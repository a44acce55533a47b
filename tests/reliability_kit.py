"""Shared parts of the reliability tests: a small deterministic embedder (the write path, not
the model, is under test) and the check that each index holds exactly the record's chunks."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from ragloop.core.config import Settings
from ragloop.kb import KnowledgeBase

DOCS = {
    "a.md": "# Harvest\n\nThe zanzibar clove harvest was early this year.\n",
    "b.md": "# Sensor\n\n## Power\nThe T9 sensor runs on a CR123A battery.\n\n## Rating\nIP67.\n",
    "c.md": "# Leadership\n\nThe Chief Financial Officer is Priya Raman.\n",
}


class HashEmbedder:
    """Bag of hashed words, 32 dims, unit length: similar texts get similar vectors."""

    name = "test:hash32"
    dim = 32

    symmetric = True

    def embed_query(self, texts):
        return self.embed(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % self.dim] += 1
            out[i, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def open_kb(folder: Path, create: bool = True) -> KnowledgeBase:
    return KnowledgeBase.open(folder, Settings(), embedder=HashEmbedder(), create=create)


def write_files(root: Path, docs: dict[str, str]) -> Path:
    for rel, text in docs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def ingested_kb(root: Path) -> Path:
    """A knowledge base of DOCS at root/kb (the files at root/docs), closed: tests copy it."""
    docs = write_files(root / "docs", DOCS)
    with open_kb(root / "kb") as kb:
        kb.ingest([docs])
    return root / "kb"


def record_ids(kb: KnowledgeBase) -> list[int]:
    return sorted(r[0] for r in kb.store.db.execute("SELECT id FROM chunks"))


def assert_consistent(kb: KnowledgeBase) -> None:
    """tantivy and HNSW hold exactly the chunk ids of the SQLite record."""
    fulltext, vectors = kb.store.indexed_ids()
    record = record_ids(kb)
    assert fulltext == record, "tantivy differs from the record"
    assert vectors == record, "HNSW differs from the record"


def top_doc(kb: KnowledgeBase, query: str, mode: str = "bm25") -> str | None:
    hits = kb.search(query, k=1, mode=mode)  # type: ignore[arg-type]
    return hits[0].doc_id if hits else None
