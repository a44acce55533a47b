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
ef = 64, ragloop's ef_search and 128), usearch raw (ef 128), numpy exact kNN (matrix product),
and the embedded stores users pick instead (the `peers` extra; skipped with a line when not
installed): LanceDB (its native full-text index and IVF_HNSW_SQ vector index, hybrid fused by
its RRFReranker at k = 60, each side as deep as ragloop's) and Chroma (HNSW; its local full
text is a substring filter, timed beside). BM25 overlap@10 is each engine's share of raw
tantivy's top 10. RSS is what building and opening an engine added to this process (rough).
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sqlite3
import sys
import time
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
    table,
    tantivy_index,
    tantivy_top,
)
from synthetic import (
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

from ragloop.kb.search import hybrid_search
from ragloop.retrieval.fusion import candidate_depth
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.sqlite.indexes import HNSW_EF_SEARCH
from ragloop.storage.sqlite.store import SqliteStore

WRITE_BATCH_CHUNKS = 512  # as ragloop.ingest.pipeline
HNSW_M, HNSW_EF_C = 16, 128
# peers at ragloop's ef_search and either side of it
HNSW_EFS = sorted({64, HNSW_EF_SEARCH, 128})


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- corpus ----------------------------------------------------------------------------------

# -- engines ---------------------------------------------------------------------------------

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
    before = rss()
    with Timer() as t:
        store = build_sqlite(folder, vecs, texts)
    build = t.seconds
    log(f"ragloop build {build:.1f} s")
    emb = FixedEmbedder(queries, qvecs)
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
    res["ragloop"] = {"build_s": build, "rss": rss() - before}

    def close() -> None:  # sizes after close, when the WAL is checkpointed into the file
        store.close()
        res["ragloop"].update(disk=dir_size(folder), disk_db=dir_size(folder / "ragloop.db"),
                              disk_index=dir_size(folder / "index"))

    probes.add("ragloop", "bm25", lambda ts: store.search_bm25(ts, K), terms,
               ids=lambda f: [c - 1 for c, _ in f])
    # chunk ids are 1-based AUTOINCREMENT in insertion order
    probes.add("ragloop", "vector", lambda q: [c for c, _ in store.search_vector(q, K)],
               list(qvecs), ids=lambda f: [c - 1 for c in f])
    probes.add("ragloop", "hybrid", lambda q: hybrid_search(store, emb, q, K, "hybrid"), queries,
               ids=lambda f: [h.chunk_id - 1 for h in f])
    probes.closers.append(close)


def run_tantivy(work: Path, texts, terms, res: dict, probes: Probes) -> None:
    folder = work / "tantivy"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with Timer() as t:
        index = tantivy_index(folder, enumerate(texts))
    log(f"tantivy build {t.seconds:.1f} s")
    res["tantivy"] = {"build_s": t.seconds, "disk": dir_size(folder)}
    probes.add("tantivy", "bm25", tantivy_top(index, K), terms, ids=list)


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


def rss() -> int:
    """This process's resident set, bytes (an engine's figure is what building and opening it
    added: a rough share, since freed memory is not always returned to the system)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


PAGE = 4096
# LanceDB's HNSW (one IVF partition: the setting its docs advise for HNSW) at ragloop's graph
# settings and ef; hybrid = its full-text search and its vector search fused by its
# RRFReranker (k = 60), each side searched as deep as ragloop's (candidate_depth)
LANCE_DEPTH = candidate_depth(K)


def missing_peer(name: str, module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        log(f"skip {name}: not installed (pip install -c requirements.lock '.[peers]')")
        return True
    return False


def run_lancedb(work: Path, vecs, texts, queries, qvecs, terms, res: dict,
                probes: Probes) -> None:
    if missing_peer("lancedb", "lancedb"):
        return
    import lancedb
    import pyarrow as pa
    from lancedb.index import HnswSq
    from lancedb.rerankers import RRFReranker

    folder = work / "lancedb"
    shutil.rmtree(folder, ignore_errors=True)
    before = rss()
    n = len(texts)
    with Timer() as t:
        db = lancedb.connect(str(folder))
        table = db.create_table("chunks", pa.table({
            "id": pa.array(np.arange(n), pa.int64()), "text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel(), pa.float32()),
                                                        DIM)}))
        table.create_index("vector", config=HnswSq(distance_type="cosine", num_partitions=1,
                                                   m=HNSW_M, ef_construction=HNSW_EF_C))
        # its native full-text index: simple tokenizer, lower case, English stemmer, stop words
        table.create_fts_index("text", language="English", stem=True)
    log(f"lancedb build {t.seconds:.1f} s")
    res["lancedb"] = {"build_s": t.seconds, "disk": dir_size(folder), "rss": rss() - before}
    rrf_k = RRFReranker(K=60)

    def ids(rows) -> list[int]:
        return rows.column("id").to_pylist()

    def vector(v):
        return table.search(v).distance_type("cosine").ef(HNSW_EF_SEARCH).limit(K) \
            .select(["id"]).to_arrow()

    def fts(ts):
        return table.search(" ".join(ts), query_type="fts").limit(K).select(["id"]).to_arrow()

    def hybrid(i):
        rows = (table.search(query_type="hybrid").vector(qvecs[i]).text(" ".join(terms[i]))
                .distance_type("cosine").ef(HNSW_EF_SEARCH).rerank(rrf_k).limit(LANCE_DEPTH)
                .select(["id"]).to_arrow())
        return rows.slice(0, K)

    probes.add("lancedb", "vector", vector, list(qvecs), ids=ids)
    probes.add("lancedb", "bm25", fts, terms, ids=ids)
    probes.add("lancedb", "hybrid", hybrid, list(range(len(queries))), ids=ids)


def run_chroma(work: Path, vecs, texts, qvecs, terms, res: dict, probes: Probes) -> None:
    if missing_peer("chroma", "chromadb"):
        return
    import chromadb

    folder = work / "chroma"
    shutil.rmtree(folder, ignore_errors=True)
    before = rss()
    n = len(texts)
    with Timer() as t:
        client = chromadb.PersistentClient(
            path=str(folder), settings=chromadb.Settings(anonymized_telemetry=False))
        col = client.create_collection("chunks", embedding_function=None, configuration={
            "hnsw": {"space": "cosine", "max_neighbors": HNSW_M,
                     "ef_construction": HNSW_EF_C, "ef_search": HNSW_EF_SEARCH}})
        step = client.get_max_batch_size()
        for s in range(0, n, step):
            e = min(n, s + step)
            col.add(ids=[str(i) for i in range(s, e)], embeddings=vecs[s:e], documents=texts[s:e])
    log(f"chroma build {t.seconds:.1f} s")
    res["chroma"] = {"build_s": t.seconds, "disk": dir_size(folder), "rss": rss() - before}

    def ids(out) -> list[int]:
        return [int(i) for i in out["ids"][0]]

    probes.add("chroma", "vector",
               lambda v: col.query(query_embeddings=[v], n_results=K, include=[]),
               list(qvecs), ids=ids)
    # Chroma's local full text is a filter (substring, unranked), not BM25: the vector search
    # among the chunks holding the query's first term; timed, no overlap figure
    probes.add("chroma", "filtered",
               lambda i: col.query(query_embeddings=[qvecs[i]], n_results=K, include=[],
                                   where_document={"$contains": terms[i][0]}),
               [i for i in range(len(terms)) if terms[i]])


def run_numpy(vecs, qvecs, res: dict, probes: Probes) -> None:
    def q(v):
        s = vecs @ v
        idx = np.argpartition(-s, K)[:K]
        return idx[np.argsort(-s[idx])]

    res["numpy"] = {"build_s": 0.0, "disk": vecs.nbytes}
    probes.add("numpy", "vector", lambda v: q(v).tolist(), list(qvecs), ids=list)


# -- report ----------------------------------------------------------------------------------

def overlap(a: list[list[int]], b: list[list[int]]) -> float:
    """Mean share of b's top K that a's top K holds (queries where b found nothing skipped)."""
    shares = [len(set(x[:K]) & set(y[:K])) / len(y[:K]) for x, y in zip(a, b, strict=True) if y]
    return float(np.mean(shares)) if shares else float("nan")


def overlaps(res: dict, found: dict[tuple[str, str], list[list[int]]]) -> None:
    """BM25 overlap@10 with raw tantivy, and LanceDB's hybrid overlap with ragloop's."""
    truth = found.get(("tantivy", "bm25"))
    for (engine, metric), got in found.items():
        if metric == "bm25" and truth is not None and engine != "tantivy":
            res[engine]["bm25_overlap"] = overlap(got, truth)
    if ("lancedb", "hybrid") in found and ("ragloop", "hybrid") in found:
        res["lancedb"]["hybrid_overlap"] = overlap(found[("lancedb", "hybrid")],
                                                   found[("ragloop", "hybrid")])


def fmt(pair) -> str:
    return f"{pair[0]:.2f} / {pair[1]:.2f}" if pair else "–"


def report(n: int, nq: int, res: dict) -> str:
    rows = []
    hnsw_keys = [f"hnswlib-ef{ef}" for ef in HNSW_EFS]
    order = ["ragloop", "postgres", "lancedb", "chroma", "tantivy", "fts5", *hnsw_keys,
             "usearch", "numpy"]
    names = {"ragloop": f"ragloop SqliteStore (tantivy+hnswlib ef{HNSW_EF_SEARCH}+SQLite)",
             "postgres": "ragloop PostgresStore (pgvector+BM25 postings)",
             "tantivy": "tantivy raw", "fts5": "SQLite FTS5",
             **{f"hnswlib-ef{ef}": f"hnswlib raw M{HNSW_M} efC{HNSW_EF_C} ef{ef}"
                for ef in HNSW_EFS},
             "usearch": f"usearch raw M{HNSW_M} efC{HNSW_EF_C} ef128", "numpy": "numpy exact",
             "lancedb": f"LanceDB (FTS + IVF_HNSW_SQ M{HNSW_M} efC{HNSW_EF_C} ef{HNSW_EF_SEARCH},"
                        " RRF reranker)",
             "chroma": f"Chroma (HNSW M{HNSW_M} efC{HNSW_EF_C} ef{HNSW_EF_SEARCH})"}
    for key in order:
        r = res.get(key)
        if not r:
            continue
        rec = r.get("recall")
        over = r.get("bm25_overlap")
        rows.append([names[key], f"{r['build_s']:.1f}", fmt(r.get("bm25")), fmt(r.get("vector")),
                     fmt(r.get("hybrid")), f"{rec:.3f}" if rec is not None else "–",
                     f"{over:.3f}" if over is not None else "–",
                     mb(r["disk"]) if "disk" in r else "–",
                     mb(r["rss"]) if "rss" in r else "–"])
    text = [f"### N = {n:,} chunks, {nq} queries (k = {K})", "",
            table(["engine", "build s", "bm25 p50 / p95 ms", "vector p50 / p95 ms",
                   "hybrid p50 / p95 ms", "vector recall@10", "bm25 overlap@10 vs tantivy",
                   "disk MB", "RSS added MB"], rows), ""]
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
    ld = res.get("lancedb")
    if rg and ld and "hybrid" in ld:
        text.append(f"- ragloop hybrid p50 / LanceDB hybrid p50: "
                    f"{rg['hybrid'][0] / ld['hybrid'][0]:.2f}x (p95"
                    f" {rg['hybrid'][1] / ld['hybrid'][1]:.2f}x); their hybrid top 10 share"
                    f" {ld.get('hybrid_overlap', float('nan')):.3f} of ragloop's")
    ch = res.get("chroma")
    if ch and "filtered" in ch:
        text.append(f"- Chroma vector search within the chunks holding the query's first term"
                    f" (`where_document` $contains, its local full-text filter: unranked):"
                    f" p50 / p95 {fmt(ch['filtered'])} ms")
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
                    help="subset of: ragloop tantivy fts5 hnswlib usearch numpy lancedb chroma")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite",
                    help="postgres: also build a PostgresStore (embedded server) beside SQLite")
    args = ap.parse_args()
    engines = set(args.only or ["ragloop", "tantivy", "fts5", "hnswlib", "usearch", "numpy",
                                "lancedb", "chroma"])
    if args.backend == "postgres":
        engines.add("postgres")
    base = base_set()
    queries, qvecs = pick_queries(base, args.queries)
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
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
        if "lancedb" in engines:
            run_lancedb(work, vecs, texts, queries, qvecs, terms, res, probes)
        if "chroma" in engines:
            run_chroma(work, vecs, texts, qvecs, terms, res, probes)
        gc.collect()
        if "hnswlib" in engines:
            run_hnswlib(work, vecs, qvecs, res, probes)
        if "numpy" in engines:
            run_numpy(vecs, qvecs, res, probes)
        if "fts5" in engines:
            run_fts5(work, texts, terms, res, args.fts5_queries, probes)
        log("timing queries (interleaved) ...")
        probes.run(res, truth)
        overlaps(res, probes.found)
        text = report(n, len(queries), res)
        print(text, flush=True)
        (args.out / f"n{n}.md").write_text(f"{machine_note()}\n\n{text}")
        (args.out / f"n{n}.json").write_text(json.dumps(res, indent=1))
        shutil.rmtree(work, ignore_errors=True)
        del vecs, texts
        gc.collect()


if __name__ == "__main__":
    main()
