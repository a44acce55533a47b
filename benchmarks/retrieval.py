"""Retrieval speed side by side: ragloop's SqliteStore against bare peers, in one run.

    .venv/bin/python benchmarks/retrieval.py [--sizes 100000 1000000] [--queries 200] [--out DIR]

For each size N a synthetic corpus of N chunks is built from real MiniLM embeddings (see
common.base_set): every chunk vector is a normalised mixture of 2-3 random real passage
embeddings plus small noise, and its text is sentences sampled from those same passages, so
BM25 and vectors see a realistic, clustered distribution. Queries are real query texts with
their real embeddings. Embedding time is excluded everywhere (vectors are precomputed).

Measured per engine: build time, query p50/p95 (ms), size on disk, recall@10 of the vector
part against exact (numpy) search. Engines: ragloop (write_documents in batches + flush;
queries via ragloop.kb.search.hybrid_search and store.search_bm25 / search_vector), tantivy
(raw BM25, OR query), SQLite FTS5 (bm25(), OR query), hnswlib (M=16, ef_construction=128,
ef = 64, ragloop's ef_search and 128), usearch raw (ef 128), numpy exact kNN (matrix product).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    OUT,
    Timer,
    base_set,
    dir_size,
    machine_note,
    mb,
    percentiles,
    table,
    tantivy_index,
    tantivy_top,
)

from ragloop.core.types import Chunk, ParsedDocument, SectionText
from ragloop.kb.search import hybrid_search
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.protocols import DocumentWrite
from ragloop.storage.sqlite.indexes import HNSW_EF_SEARCH
from ragloop.storage.sqlite.store import SqliteStore

DIM = 384
CHUNKS_PER_DOC = 4
WRITE_BATCH_CHUNKS = 512  # as ragloop.ingest.pipeline
K = 10
HNSW_M, HNSW_EF_C = 16, 128
# peers at ragloop's ef_search and either side of it
HNSW_EFS = sorted({64, HNSW_EF_SEARCH, 128})
NOISE = 0.03
MODEL = "all-MiniLM-L6-v2"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- corpus ----------------------------------------------------------------------------------

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

    def add(self, engine: str, metric: str, fn, inputs: list, ids=None) -> None:
        """`ids` maps a result to 0-based corpus ids for recall (vector probes only)."""
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
                res[engine]["recall"] = recall([ids(o) for o in outs[j]], truth)
        for close in self.closers:
            close()


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[:K]) & set(t.tolist())) / K
                          for f, t in zip(found, truth, strict=True)]))


# -- engines ---------------------------------------------------------------------------------

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


def build_sqlite(folder: Path, vecs: np.ndarray, texts: list[str]) -> SqliteStore:
    """A SqliteStore of the corpus in `folder`, written as ingest writes (batches, cache)."""
    store = SqliteStore(folder)
    store.set_meta("embedder", MODEL)
    store.set_meta("dim", str(DIM))
    for writes in synthetic_writes(vecs, texts, WRITE_BATCH_CHUNKS):
        # what CachedEmbedder does for every new vector during ingest
        store.put_embeddings(MODEL, {h: v for w in writes
                                     for h, v in zip(w.embed_hashes, w.vectors, strict=True)})
        store.write_documents(writes)
    store.flush()
    return store


def run_ragloop(work: Path, vecs, texts, queries, qvecs, res: dict, probes: Probes) -> None:
    folder = work / "ragloop"
    shutil.rmtree(folder, ignore_errors=True)
    with Timer() as t:
        store = build_sqlite(folder, vecs, texts)
    build = t.seconds
    log(f"ragloop build {build:.1f} s")
    emb = FixedEmbedder(queries, qvecs)
    terms = [query_terms(q) for q in queries]
    res["ragloop"] = {"build_s": build}

    def close() -> None:  # sizes after close, when the WAL is checkpointed into the file
        store.close()
        res["ragloop"].update(disk=dir_size(folder), disk_db=dir_size(folder / "ragloop.db"),
                              disk_index=dir_size(folder / "index"))

    probes.add("ragloop", "bm25", lambda ts: store.search_bm25(ts, K), terms)
    # chunk ids are 1-based AUTOINCREMENT in insertion order
    probes.add("ragloop", "vector", lambda q: [c for c, _ in store.search_vector(q, K)],
               list(qvecs), ids=lambda f: [c - 1 for c in f])
    probes.add("ragloop", "hybrid", lambda q: hybrid_search(store, emb, q, K, "hybrid"), queries)
    probes.closers.append(close)


def run_tantivy(work: Path, texts, terms, res: dict, probes: Probes) -> None:
    folder = work / "tantivy"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with Timer() as t:
        index = tantivy_index(folder, enumerate(texts))
    log(f"tantivy build {t.seconds:.1f} s")
    res["tantivy"] = {"build_s": t.seconds, "disk": dir_size(folder)}
    probes.add("tantivy", "bm25", tantivy_top(index, K), terms)


def run_fts5(work: Path, texts, terms, res: dict, max_queries: int, probes: Probes) -> None:
    path = work / "fts5.db"
    path.unlink(missing_ok=True)
    with Timer() as t:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61')")
        db.execute("BEGIN")
        db.executemany("INSERT INTO f(rowid, text) VALUES (?, ?)",
                       ((i, s) for i, s in enumerate(texts)))
        db.execute("COMMIT")
        db.execute("INSERT INTO f(f) VALUES ('optimize')")
    log(f"fts5 build {t.seconds:.1f} s")

    def q(ts):
        match = " OR ".join('"' + x.replace('"', '""') + '"' for x in ts)
        return [r[0] for r in db.execute(
            "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (match, K))]

    res["fts5"] = {"build_s": t.seconds, "disk": dir_size(path), "nq": len(terms[:max_queries])}
    probes.add("fts5", "bm25", q, terms[:max_queries])
    probes.closers.append(db.close)


def run_hnswlib(work: Path, vecs, qvecs, res: dict, probes: Probes) -> None:
    import hnswlib

    n = len(vecs)
    with Timer() as t:
        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=n, M=HNSW_M, ef_construction=HNSW_EF_C, random_seed=0)
        index.add_items(vecs, np.arange(n), num_threads=2)
    log(f"hnswlib build {t.seconds:.1f} s")
    path = work / "hnswlib.bin"
    index.save_index(str(path))
    index.set_num_threads(1)
    res["hnswlib"] = {"build_s": t.seconds, "disk": dir_size(path)}
    path.unlink()

    def q(v, ef):
        index.set_ef(ef)
        return index.knn_query(v, k=K)[0][0].tolist()

    for ef in HNSW_EFS:
        key = f"hnswlib-ef{ef}"
        res[key] = dict(res["hnswlib"])
        probes.add(key, "vector", lambda v, ef=ef: q(v, ef), list(qvecs), ids=list)
    del res["hnswlib"]


def run_usearch(work: Path, vecs, qvecs, res: dict, probes: Probes) -> None:
    from usearch.index import Index

    n = len(vecs)
    with Timer() as t:
        index = Index(ndim=DIM, metric="cos", dtype="f32", connectivity=HNSW_M,
                      expansion_add=HNSW_EF_C, expansion_search=128)
        index.add(np.arange(n, dtype=np.uint64), vecs, threads=2)
    log(f"usearch build {t.seconds:.1f} s")
    path = work / "usearch.bin"
    index.save(str(path))
    res["usearch"] = {"build_s": t.seconds, "disk": dir_size(path)}
    path.unlink()
    probes.add("usearch", "vector", lambda q: index.search(q, K, threads=1).keys.tolist(),
               list(qvecs), ids=list)


def run_numpy(vecs, qvecs, res: dict, probes: Probes) -> None:
    def q(v):
        s = vecs @ v
        idx = np.argpartition(-s, K)[:K]
        return idx[np.argsort(-s[idx])]

    res["numpy"] = {"build_s": 0.0, "disk": vecs.nbytes}
    probes.add("numpy", "vector", lambda v: q(v).tolist(), list(qvecs), ids=list)


# -- report ----------------------------------------------------------------------------------

def fmt(pair) -> str:
    return f"{pair[0]:.2f} / {pair[1]:.2f}" if pair else "–"


def report(n: int, nq: int, res: dict) -> str:
    rows = []
    hnsw_keys = [f"hnswlib-ef{ef}" for ef in HNSW_EFS]
    order = ["ragloop", "postgres", "tantivy", "fts5", *hnsw_keys, "usearch", "numpy"]
    names = {"ragloop": f"ragloop SqliteStore (tantivy+hnswlib ef{HNSW_EF_SEARCH}+SQLite)",
             "postgres": "ragloop PostgresStore (pgvector+BM25 postings)",
             "tantivy": "tantivy raw", "fts5": "SQLite FTS5",
             **{f"hnswlib-ef{ef}": f"hnswlib raw M{HNSW_M} efC{HNSW_EF_C} ef{ef}"
                for ef in HNSW_EFS},
             "usearch": f"usearch raw M{HNSW_M} efC{HNSW_EF_C} ef128", "numpy": "numpy exact"}
    for key in order:
        r = res.get(key)
        if not r:
            continue
        rec = r.get("recall")
        rows.append([names[key], f"{r['build_s']:.1f}", fmt(r.get("bm25")), fmt(r.get("vector")),
                     fmt(r.get("hybrid")), f"{rec:.3f}" if rec is not None else "–",
                     mb(r["disk"]) if "disk" in r else "–"])
    text = [f"### N = {n:,} chunks, {nq} queries (k = {K})", "",
            table(["engine", "build s", "bm25 p50 / p95 ms", "vector p50 / p95 ms",
                   "hybrid p50 / p95 ms", "vector recall@10", "disk MB"], rows), ""]
    text.append("Query timings are interleaved across engines (query i on every engine before"
                " query i+1); each engine's query runs single-threaded. Builds use both cores.")
    if "fts5" in res and res["fts5"]["nq"] != nq:
        text.append(f"FTS5 measured on the first {res['fts5']['nq']} queries.")
    rg = res.get("ragloop")
    peers = [k for k in (*hnsw_keys, "usearch") if k in res and res[k]["recall"] >= 0.95]
    if rg and "tantivy" in res and peers:
        best = min(peers, key=lambda k: res[k]["vector"][1])
        peer = res["tantivy"]["bm25"][1] + res[best]["vector"][1]
        text.append("")
        ratio = rg["hybrid"][1] / peer
        text.append(f"- ragloop hybrid p95 {rg['hybrid'][1]:.2f} ms vs tantivy p95 + fastest"
                    f" HNSW p95 at recall >= 0.95 ({best}) = {peer:.2f} ms: **{ratio:.2f}x**"
                    " (target <= 2x)")
        same = f"hnswlib-ef{HNSW_EF_SEARCH}"
        line = (f"- ragloop bm25 p95 / tantivy p95: "
                f"{rg['bm25'][1] / res['tantivy']['bm25'][1]:.2f}x")
        if same in res:
            line += (f"; ragloop vector p95 / {same} p95:"
                     f" {rg['vector'][1] / res[same]['vector'][1]:.2f}x")
        text.append(line)
        text.append(f"- vector recall@10: ragloop {rg['recall']:.3f} (target >= 0.95)")
        if same in res:
            bare = res["tantivy"]["build_s"] + res[same]["build_s"]
            text.append(f"- build overhead: ragloop {rg['build_s']:.1f} s vs its bare parts"
                        f" (tantivy + hnswlib) {bare:.1f} s = **{rg['build_s'] / bare:.2f}x**"
                        " (the SQLite record and embedding cache are the difference)")
        text.append(f"- ragloop disk: {mb(rg['disk'])} MB (SQLite {mb(rg['disk_db'])} MB incl."
                    f" float32 vectors, indexes {mb(rg['disk_index'])} MB)")
    pg = res.get("postgres")
    if rg and pg and "hybrid" in pg:
        text.append(f"- Postgres vs SQLite default: build {pg['build_s']:.1f} s vs"
                    f" {rg['build_s']:.1f} s; hybrid p50/p95 {fmt(pg['hybrid'])} ms vs"
                    f" {fmt(rg['hybrid'])} ms")
    return "\n".join(text) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--fts5-queries", type=int, default=200,
                    help="FTS5 OR queries are slow at 1M; cap how many are timed")
    ap.add_argument("--out", type=Path, default=OUT / "retrieval")
    ap.add_argument("--only", nargs="*", default=None,
                    help="subset of: ragloop tantivy fts5 hnswlib usearch numpy")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                    help="postgres: also build a PostgresStore (embedded server) beside SQLite")
    args = ap.parse_args()
    engines = set(args.only or ["ragloop", "tantivy", "fts5", "hnswlib", "usearch", "numpy"])
    if args.backend == "postgres":
        engines.add("postgres")
    base = base_set()
    queries, qvecs = pick_queries(base, args.queries)
    terms = [query_terms(q) for q in queries]
    log(machine_note())
    for n in args.sizes:
        work = args.out / f"n{n}"
        work.mkdir(parents=True, exist_ok=True)
        with Timer() as t:
            vecs, texts = synth_corpus(n, base)
        log(f"N={n}: synthetic corpus in {t.seconds:.1f} s; exact ground truth ...")
        truth = exact_topk(vecs, qvecs, K)
        res: dict = {}
        probes = Probes()
        # ragloop first, then its bare parts (tantivy, usearch), so the overhead ratio compares
        # neighbours in time; the builds are sequential, only queries are interleaved
        if "ragloop" in engines:
            run_ragloop(work, vecs, texts, queries, qvecs, res, probes)
        if "postgres" in engines:
            from pg_backend import run_postgres

            run_postgres(work, vecs, texts, queries, qvecs, res, probes)
        if "tantivy" in engines:
            run_tantivy(work, texts, terms, res, probes)
        if "usearch" in engines:
            run_usearch(work, vecs, qvecs, res, probes)
        gc.collect()
        if "hnswlib" in engines:
            run_hnswlib(work, vecs, qvecs, res, probes)
        if "numpy" in engines:
            run_numpy(vecs, qvecs, res, probes)
        if "fts5" in engines:
            run_fts5(work, texts, terms, res, args.fts5_queries, probes)
        log("timing queries (interleaved) ...")
        probes.run(res, truth)
        text = report(n, len(queries), res)
        print(text, flush=True)
        (args.out / f"n{n}.md").write_text(f"{machine_note()}\n\n{text}")
        (args.out / f"n{n}.json").write_text(json.dumps(res, indent=1))
        shutil.rmtree(work, ignore_errors=True)
        del vecs, texts
        gc.collect()


if __name__ == "__main__":
    main()
