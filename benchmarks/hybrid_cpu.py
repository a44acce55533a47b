"""ragloop's hybrid query against the bare pair *on the same index files*, in CPU time.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/hybrid_cpu.py KB_FOLDER [--queries 200]

KB_FOLDER is a knowledge base of the benchmark corpus (retrieval.build_sqlite, e.g. one kept
by interleaved.py --keep). The bare pair is the store's own tantivy index searched for the
top 10 (parse_query + search + fast field) and its own hnswlib graph (knn_query, k 10, one
thread), so the difference is only ragloop's code: the wrapper, the 50-deep candidate lists,
fusion, the record reads. Queries are interleaved (query i on every probe, in a rotating order,
before query i+1), all in this one single-threaded process. Besides wall time it reports each
call's CPU time (time.thread_time), which a loaded machine's scheduler does not inflate: on 2
cores at load 20 a 2 ms call is often preempted and waits tens of ms, a 0.5 ms one seldom.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import base_set, machine_note, percentiles, table
from synthetic import FixedEmbedder, K, pick_queries

from ragloop.kb.search import hybrid_search
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.sqlite.store import SqliteStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kb", type=Path)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warm", type=int, default=5)
    args = ap.parse_args()
    queries, qvecs = pick_queries(base_set(), args.queries)
    terms = [query_terms(q) for q in queries]
    emb = FixedEmbedder(queries, qvecs)
    store = SqliteStore(args.kb)
    fulltext, vectors = store._indexes()  # the loaded index objects themselves
    searcher = fulltext.index.searcher()

    def bare_tantivy(i: int) -> list[int]:
        hits = searcher.search(fulltext.index.parse_query(" ".join(terms[i]), ["text"]), K,
                               count=False).hits
        return searcher.fast_field_values("chunk_id", [a for _, a in hits]) if hits else []

    def bare_hnswlib(i: int) -> list[int]:
        return vectors.index.knn_query(qvecs[i], k=K, num_threads=1)[0][0].tolist()

    probes = {
        "ragloop hybrid": lambda i: hybrid_search(store, emb, queries[i], K, "hybrid"),
        "ragloop bm25": lambda i: store.search_bm25(terms[i], K),
        "ragloop vector": lambda i: store.search_vector(qvecs[i], K),
        "tantivy (same index)": bare_tantivy,
        "hnswlib (same graph)": bare_hnswlib,
    }
    names = list(probes)
    for name in names:
        for i in range(args.warm):
            probes[name](i)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for i in range(len(queries)):
        for step in range(len(names)):
            name = names[(step + i) % len(names)]
            t, c = time.perf_counter(), time.thread_time()
            probes[name](i)
            cpu[name].append((time.thread_time() - c) * 1000)
            wall[name].append((time.perf_counter() - t) * 1000)
    rows = [[n, "{:.2f} / {:.2f}".format(*percentiles(wall[n])),
             "{:.2f} / {:.2f}".format(*percentiles(cpu[n]))] for n in names]
    print(machine_note(), f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print(f"\n{store.chunk_count():,} chunks, {len(queries)} queries (k = {K})\n")
    print(table(["probe", "wall p50 / p95 ms", "CPU p50 / p95 ms"], rows))
    for label, d in (("wall", wall), ("CPU", cpu)):
        pair = [percentiles(d["tantivy (same index)"])[j]
                + percentiles(d["hnswlib (same graph)"])[j] for j in (0, 1)]
        hyb = percentiles(d["ragloop hybrid"])
        print(f"- {label}: ragloop hybrid p50 / p95 {hyb[0]:.2f} / {hyb[1]:.2f} ms vs the bare"
              f" pair {pair[0]:.2f} / {pair[1]:.2f} ms: **{hyb[0] / pair[0]:.2f}x /"
              f" {hyb[1] / pair[1]:.2f}x**")
    store.close()


if __name__ == "__main__":
    main()
