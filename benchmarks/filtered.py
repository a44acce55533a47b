"""Permission-filtered search against unfiltered, in one interleaved run (issue 43, Measured).

    nice .venv/bin/python benchmarks/filtered.py [--chunks 100000] [--share 0.1] [--queries 200]

A synthetic corpus of N chunks (synthetic.py: real MiniLM vectors mixed, real sentences; 4
chunks a document) is written to a SqliteStore under --out (kept and reused by the next run
of the same size: the build is the slow part). Every document carries an access list: a
`--share` of them (every 1/share-th) is readable by the group `readers`, the rest by another
group only. The principal `bench` (group `readers`) then searches through its view
(kb/access.py ReadableStore: the readable doc ids as each index's filter) and the admin
searches the store itself, query by query interleaved (synthetic.Probes), hybrid, BM25 and
vector. Printed: p50/p95 ms of each side and the filtered/unfiltered ratio (the issue's
target: hybrid p95 within 1.5x), the share of filtered queries that still got k hits, that
no hit of the view is unreadable, and the filtered vector side's recall@10 against exact
search over the readable chunks. Embedding time is excluded (query vectors precomputed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Timer, base_set, machine_note, table
from synthetic import (
    CHUNKS_PER_DOC,
    DIM,
    MODEL,
    FixedEmbedder,
    K,
    Probes,
    exact_topk,
    pick_queries,
    synth_corpus,
    synthetic_writes,
)

from ragloop.core.access import Principal
from ragloop.kb.access import ReadableStore
from ragloop.kb.public_ids import ShownIds
from ragloop.kb.search import hybrid_search
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.sqlite.store import SqliteStore

WRITE_BATCH_CHUNKS = 512  # as ragloop.ingest.pipeline
READERS = "readers"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def readable(doc_index: int, every: int) -> bool:
    return doc_index % every == 0


def build(folder: Path, vecs: np.ndarray, texts: list[str], every: int) -> SqliteStore:
    """The corpus as ingest writes it, each document with its access list."""
    store = SqliteStore(folder)
    store.set_meta("embedder", MODEL)
    store.set_meta("dim", str(DIM))
    for writes in synthetic_writes(vecs, texts, WRITE_BATCH_CHUNKS):
        for w in writes:
            index = int(w.doc.doc_id.removeprefix("doc"))
            w.doc.metadata["access"] = [READERS] if readable(index, every) else ["others"]
        store.put_embeddings(MODEL, {h: v for w in writes
                                     for h, v in zip(w.embed_hashes, w.vectors, strict=True)})
        store.write_documents(writes)
    store.flush()
    return store


def open_or_build(folder: Path, vecs, texts, every: int) -> tuple[SqliteStore, float | None]:
    marker = folder / "bench.json"
    wanted = {"chunks": len(texts), "every": every}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return SqliteStore(folder), None
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    with Timer() as t:
        store = build(folder, vecs, texts, every)
    marker.write_text(json.dumps(wanted))
    return store, t.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--share", type=float, default=0.1,
                    help="the share of documents the principal may read")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=OUT / "filtered")
    args = ap.parse_args()
    every = max(1, round(1 / args.share))
    base = base_set()
    queries, qvecs = pick_queries(base, args.queries)
    log(machine_note())
    vecs, texts = synth_corpus(args.chunks, base)
    args.out.mkdir(parents=True, exist_ok=True)
    store, built = open_or_build(args.out / f"n{args.chunks}", vecs, texts, every)
    log(f"store of {store.chunk_count()} chunks " + (f"built in {built:.0f} s" if built
                                                     else "reused"))
    # as KnowledgeBase.for_principal makes it: its chunk ids shown through the KB's key
    view = ShownIds(ReadableStore(store, Principal(user="bench", groups=frozenset({READERS}))))
    seen = view.readable()
    log(f"the principal reads {len(seen.ids)} of {len(store.documents())} documents"
        f" ({seen.chunks} chunks)")
    emb = FixedEmbedder(queries, qvecs)
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
    # the first filtered search of a content version builds the readable chunks' BM25
    # postings (retrieval/bm25.py) and reads their vectors (fewer than READ_ALLOWED_BELOW);
    # the timed searches below find them kept
    with Timer() as first:
        hybrid_search(view, emb, queries[0], K, "hybrid")
    log(f"first filtered hybrid search (postings built, vectors read): {first.seconds:.2f} s")
    res: dict = {"unfiltered": {}, "filtered": {}}
    probes = Probes()
    for name, s in (("unfiltered", store), ("filtered", view)):
        probes.add(name, "hybrid", lambda q, s=s: hybrid_search(s, emb, q, K, "hybrid"), queries)
        probes.add(name, "bm25", lambda ts, s=s: s.search_bm25(ts, K), terms)
        probes.add(name, "vector", lambda v, s=s: s.search_vector(v, K), list(qvecs))
    log("timing queries (interleaved) ...")
    probes.run(res, np.zeros((len(queries), K), dtype=np.int64))

    # correctness of the filtered side, untimed: k hits, all readable, vector recall
    allowed_docs = set(seen.allowed)
    full = 0
    for q in queries:
        hits = hybrid_search(view, emb, q, K, "hybrid")
        assert all(h.doc_id in allowed_docs for h in hits), "a hidden document was returned"
        full += len(hits) == K
    rows = np.asarray([i for i in range(len(texts)) if readable(i // CHUNKS_PER_DOC, every)])
    truth = rows[exact_topk(vecs[rows], qvecs, K)]
    found = [[view.ids.internal(c) - 1 for c, _ in view.search_vector(v, K)]  # 1-based
             for v in qvecs]
    recall = float(np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth,
                                                                           strict=True)]))
    store.close()
    lines = []
    for metric in ("hybrid", "bm25", "vector"):
        u, f = res["unfiltered"][metric], res["filtered"][metric]
        lines.append([metric, f"{u[0]:.1f} / {u[1]:.1f}", f"{f[0]:.1f} / {f[1]:.1f}",
                      f"{f[0] / u[0]:.2f}x / {f[1] / u[1]:.2f}x"])
    text = (f"{args.chunks} chunks, the principal reads {args.share:.0%} of the documents"
            f" ({seen.chunks} chunks); {len(queries)} queries, k={K}, interleaved; the first"
            f" filtered hybrid search (postings built, vectors read) {first.seconds:.2f} s\n\n"
            + table(["search", "unfiltered p50 / p95 ms", "filtered p50 / p95 ms",
                     "ratio p50 / p95"], lines)
            + f"\n\nfiltered hybrid: {full}/{len(queries)} queries got k={K} hits, none"
              f" unreadable; filtered vector recall@{K} vs exact over the readable chunks:"
              f" {recall:.3f}")
    print(text, flush=True)
    (args.out / f"n{args.chunks}.md").write_text(f"{machine_note()}\n\n{text}\n")


if __name__ == "__main__":
    main()
