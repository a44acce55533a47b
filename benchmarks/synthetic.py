"""The synthetic corpus the store benchmarks share (retrieval.py, pg_backend.py, backends.py):
real MiniLM passage vectors mixed into chunks with real sentences, the queries, a fixed
embedder for them, exact top-k, interleaved probes, and the corpus as ingest's write batches.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import numpy as np
from common import percentiles

from ragloop.core.types import Chunk, ParsedDocument, SectionText
from ragloop.storage.protocols import DocumentWrite

DIM = 384
CHUNKS_PER_DOC = 4
K = 10
NOISE = 0.03
MODEL = "all-MiniLM-L6-v2"


def synth_corpus(n: int, base: dict, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    pvecs = base["pvecs"]
    sentences = base["sentences"]
    p = len(pvecs)
    parts = rng.integers(2, 4, size=n)  # 2 or 3 components
    comp = rng.integers(0, p, size=(n, 3))
    weights = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    weights[parts == 2, 2] = 0.0
    vecs = np.empty((n, DIM), dtype=np.float32)
    step = 100_000
    for s in range(0, n, step):
        e = min(n, s + step)
        v = np.einsum("nk,nkd->nd", weights[s:e], pvecs[comp[s:e]])
        v += rng.normal(0, NOISE, size=v.shape).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        vecs[s:e] = v
    texts = []
    picks = rng.random(size=(n, 3, 2))
    for i in range(n):
        out = []
        for j in range(int(parts[i])):
            sents = sentences[comp[i, j]]
            if not sents:
                continue
            a = int(picks[i, j, 0] * len(sents))
            out.append(" ".join(sents[a:a + 1 + int(picks[i, j, 1] * 2)]))
        texts.append(" ".join(out) or "empty")
    return vecs, texts


def pick_queries(base: dict, nq: int, seed: int = 1) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(base["queries"]), size=nq, replace=False)
    return [base["queries"][i] for i in idx], base["qvecs"][idx]


class FixedEmbedder:
    """Returns the precomputed embedding of each known query text."""

    name = MODEL
    dim = DIM

    def __init__(self, queries: list[str], qvecs: np.ndarray) -> None:
        self.table = {q: qvecs[i] for i, q in enumerate(queries)}

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])

    embed_query = embed  # the queries' vectors are what was precomputed for them


class Probes:
    """Query timings, interleaved: query i runs on every engine (in a rotating order) before
    query i+1, so a noisy neighbour slows all engines alike instead of whichever ran then."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, object, list, object]] = []
        self.closers: list = []
        #: {(engine, metric): [each query's result as 0-based corpus ids]} of probes given `ids`
        self.found: dict[tuple[str, str], list[list[int]]] = {}

    def add(self, engine: str, metric: str, fn, inputs: list, ids=None) -> None:
        """`ids` maps a result to 0-based corpus ids: recall for a vector probe, overlap with
        another engine's results for the others."""
        self.items.append((engine, metric, fn, list(inputs), ids))

    def run(self, res: dict, truth: np.ndarray, warm: int = 5) -> None:
        """`warm`: untimed queries per probe first (all of them: a server that has been
        answering for a while, its caches filled)."""
        for _, _, fn, inputs, _ in self.items:
            for x in inputs[:warm]:
                fn(x)
        n = max(len(inputs) for _, _, _, inputs, _ in self.items)
        ms: list[list[float]] = [[] for _ in self.items]
        outs: list[list] = [[] for _ in self.items]
        for i in range(n):
            for step in range(len(self.items)):
                j = (step + i) % len(self.items)
                _, _, fn, inputs, _ = self.items[j]
                if i >= len(inputs):
                    continue
                t = time.perf_counter()
                outs[j].append(fn(inputs[i]))
                ms[j].append((time.perf_counter() - t) * 1000)
        for j, (engine, metric, _, _, ids) in enumerate(self.items):
            res[engine][metric] = percentiles(ms[j])
            if ids is not None:
                self.found[(engine, metric)] = [ids(o) for o in outs[j]]
                if metric == "vector":
                    res[engine]["recall"] = recall(self.found[(engine, metric)], truth)
        for close in self.closers:
            close()


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[:K]) & set(t.tolist())) / K
                          for f, t in zip(found, truth, strict=True)]))


def exact_topk(vecs: np.ndarray, qvecs: np.ndarray, k: int) -> np.ndarray:
    sims = qvecs @ vecs.T
    idx = np.argpartition(-sims, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, idx, axis=1), axis=1)
    return np.take_along_axis(idx, order, axis=1)


def synthetic_writes(vecs: np.ndarray, texts: list[str], batch_chunks: int
                     ) -> Iterator[list[DocumentWrite]]:
    """The corpus as documents of CHUNKS_PER_DOC chunks (one section each), in write batches
    of about `batch_chunks` chunks, with the vectors precomputed."""
    n = len(texts)
    writes: list[DocumentWrite] = []
    size = 0
    for d0 in range(0, n, CHUNKS_PER_DOC):
        d1 = min(n, d0 + CHUNKS_PER_DOC)
        doc_id = f"doc{d0 // CHUNKS_PER_DOC}"
        doc = ParsedDocument(doc_id=doc_id, title=doc_id, source="synthetic",
                             sections=[SectionText("0", (), "\n".join(texts[d0:d1]))])
        chunks = [Chunk(doc_id=doc_id, section="0", section_title="", ord=i - d0,
                        text=texts[i]) for i in range(d0, d1)]
        hashes = [hashlib.sha256(texts[i].encode()).hexdigest() for i in range(d0, d1)]
        writes.append(DocumentWrite(doc=doc, content_hash=doc_id, chunks=chunks,
                                    vectors=vecs[d0:d1], embed_hashes=hashes))
        size += d1 - d0
        if size >= batch_chunks or d1 == n:
            yield writes
            writes, size = [], 0
