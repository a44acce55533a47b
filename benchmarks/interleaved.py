"""Search side by side with every engine in its own process, queries interleaved across them.

    .venv/bin/python benchmarks/interleaved.py --size 100000 [--engines ragloop tantivy hnswlib
        lancedb chroma] [--queries 200] [--out DIR]

retrieval.py times every engine inside one process; there LanceDB's and Chroma's background
threads run beside ragloop's queries (one such run gave ragloop hybrid 12x the bare pair while
its bm25 and vector probes stayed level). Here each engine is built in a process of its own
(with its default threads), then opened from disk by a fresh query process that runs with one
thread (OMP/MKL/OpenBLAS/Rayon/Lance CPU threads = 1). The parent sends query i to each engine's
process in a rotating order before query i+1; each process times its own call, so the pipe is
outside the figure. Same corpus, vectors and queries as retrieval.py (synthetic.py).

Also measured per engine: build wall time, disk, the query process's resident memory after the
queries; for ragloop the cold open (SqliteStore() + the first hybrid query, files in the page
cache since they were just written) in the query process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, base_set, dir_size, machine_note, mb, percentiles, table
from synthetic import DIM, K, exact_topk, pick_queries, synth_corpus

ONE_THREAD = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                "RAYON_NUM_THREADS", "LANCE_CPU_THREADS", "NUMEXPR_NUM_THREADS")}
HNSW_M, HNSW_EF_C, HNSW_EF = 16, 128, 96


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- build (one process per engine, default threads) ------------------------------------------

def build(engine: str, n: int, folder: str, out) -> None:
    from retrieval import build_sqlite, run_lancedb

    base = base_set()
    vecs, texts = synth_corpus(n, base)
    work = Path(folder)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t, cpu = time.perf_counter(), time.process_time()
    stats: dict = {}
    if engine == "ragloop":
        store = build_sqlite(work / "kb", vecs, texts)
        store.close()
        stats.update(disk_db=dir_size(work / "kb" / "ragloop.db"),
                     disk_index=dir_size(work / "kb" / "index"))
    elif engine == "tantivy":
        from common import tantivy_index

        (work / "tantivy").mkdir()
        tantivy_index(work / "tantivy", enumerate(texts))
    elif engine == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=n, M=HNSW_M, ef_construction=HNSW_EF_C, random_seed=0)
        index.add_items(vecs, np.arange(n), num_threads=2)
        index.save_index(str(work / "hnswlib.bin"))
    elif engine == "lancedb":
        from synthetic import Probes

        queries, qvecs = pick_queries(base, 5)
        res: dict = {}
        run_lancedb(work, vecs, texts, queries, qvecs, [q.split() for q in queries], res,
                    Probes())
    elif engine == "chroma":
        from retrieval import run_chroma
        from synthetic import Probes

        run_chroma(work, vecs, texts, pick_queries(base, 5)[1], [["x"]] * 5, {}, Probes())
    stats["build_s"] = time.perf_counter() - t
    stats["build_cpu_s"] = time.process_time() - cpu  # all threads of the build process
    stats["disk"] = dir_size(work)
    out.send(stats)


# -- query processes (one thread each) -------------------------------------------------------

def serve(engine: str, folder: str, nq: int, conn) -> None:
    """Open `engine` from disk, then answer (metric, i) -> (ms, 0-based ids) until None."""
    from ragloop.retrieval.query_text import query_terms

    base = base_set()
    queries, qvecs = pick_queries(base, nq)
    terms = [query_terms(q) for q in queries]
    work = Path(folder)
    fns: dict = {}
    info: dict = {}
    if engine == "ragloop":
        from synthetic import FixedEmbedder

        from ragloop.kb.search import hybrid_search
        from ragloop.storage.sqlite.store import SqliteStore

        emb = FixedEmbedder(queries, qvecs)
        t = time.perf_counter()
        store = SqliteStore(work / "kb")
        hybrid_search(store, emb, queries[0], K, "hybrid")
        info["cold_open_s"] = time.perf_counter() - t
        fns["bm25"] = lambda i: [c - 1 for c, _ in store.search_bm25(terms[i], K)]
        fns["vector"] = lambda i: [c - 1 for c, _ in store.search_vector(qvecs[i], K)]
        fns["hybrid"] = lambda i: [h.chunk_id - 1
                                   for h in hybrid_search(store, emb, queries[i], K, "hybrid")]
    elif engine == "tantivy":
        import tantivy
        from common import tantivy_top

        top = tantivy_top(tantivy.Index.open(str(work / "tantivy")), K)
        fns["bm25"] = lambda i: list(top(terms[i]))
    elif engine == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=DIM)
        index.load_index(str(work / "hnswlib.bin"))
        index.set_num_threads(1)
        index.set_ef(HNSW_EF)
        fns["vector"] = lambda i: index.knn_query(qvecs[i], k=K)[0][0].tolist()
    elif engine == "lancedb":
        import lancedb
        from lancedb.rerankers import RRFReranker
        from retrieval import HNSW_EF_SEARCH, LANCE_DEPTH

        table_ = lancedb.connect(str(work / "lancedb")).open_table("chunks")
        rrf = RRFReranker(K=60)

        def ids(rows) -> list[int]:
            return rows.column("id").to_pylist()

        fns["vector"] = lambda i: ids(table_.search(qvecs[i]).distance_type("cosine")
                                      .ef(HNSW_EF_SEARCH).limit(K).select(["id"]).to_arrow())
        fns["bm25"] = lambda i: ids(table_.search(" ".join(terms[i]), query_type="fts")
                                    .limit(K).select(["id"]).to_arrow())
        fns["hybrid"] = lambda i: ids(
            table_.search(query_type="hybrid").vector(qvecs[i]).text(" ".join(terms[i]))
            .distance_type("cosine").ef(HNSW_EF_SEARCH).rerank(rrf).limit(LANCE_DEPTH)
            .select(["id"]).to_arrow())[:K]
    elif engine == "chroma":
        import chromadb

        client = chromadb.PersistentClient(
            path=str(work / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False))
        col = client.get_collection("chunks")
        fns["vector"] = lambda i: [int(x) for x in col.query(
            query_embeddings=[qvecs[i]], n_results=K, include=[])["ids"][0]]
    conn.send(sorted(fns))
    # CPU ms of this process per query (all its threads): what a loaded machine's scheduler
    # does not add, unlike wall time, where a query longer than a time slice waits its turn
    cpu_ms: dict[str, list[float]] = {m: [] for m in fns}
    while (msg := conn.recv()) is not None:
        metric, i = msg
        t, c = time.perf_counter(), time.process_time()
        got = fns[metric](i)
        cpu_ms[metric].append((time.process_time() - c) * 1000)
        conn.send(((time.perf_counter() - t) * 1000, got))
    info["rss_mb"] = rss_mb()
    info["cpu_ms"] = cpu_ms
    conn.send(info)


# -- the run ----------------------------------------------------------------------------------

def run(n: int, engines: list[str], nq: int, work: Path, warm: int) -> dict:
    ctx = mp.get_context("spawn")
    res: dict = {e: {} for e in engines}
    for e in engines:
        log(f"build {e} ...")
        a, b = ctx.Pipe()
        p = ctx.Process(target=build, args=(e, n, str(work / e), b))
        p.start()
        res[e].update(a.recv())
        p.join()
        log(f"build {e}: {res[e]['build_s']:.1f} s, {mb(res[e]['disk'])} MB")
    saved = {k: os.environ.get(k) for k in ONE_THREAD}
    os.environ.update(ONE_THREAD)  # inherited by the spawned query processes
    procs, conns, probes = [], {}, []
    try:
        for e in engines:
            a, b = ctx.Pipe()
            p = ctx.Process(target=serve, args=(e, str(work / e), nq, b))
            p.start()
            procs.append(p)
            conns[e] = a
        for e in engines:
            probes += [(e, m) for m in conns[e].recv()]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    log(f"probes: {probes}; warm-up {warm} each, then {nq} queries interleaved")
    for e, m in probes:
        for i in range(warm):
            conns[e].send((m, i))
            conns[e].recv()
    ms: dict = {p: [] for p in probes}
    found: dict = {p: [] for p in probes}
    for i in range(nq):
        for step in range(len(probes)):
            e, m = probes[(step + i) % len(probes)]
            conns[e].send((m, i))
            t, got = conns[e].recv()
            ms[(e, m)].append(t)
            found[(e, m)].append(got)
    for e in engines:
        conns[e].send(None)
        res[e].update(conns[e].recv())
    for p in procs:
        p.join()
    base = base_set()
    _, qvecs = pick_queries(base, nq)
    vecs, _ = synth_corpus(n, base)
    truth = exact_topk(vecs, qvecs, K)
    del vecs
    for e in engines:
        for m, cpu in res[e].pop("cpu_ms", {}).items():
            res[e][f"{m}_cpu"] = percentiles(cpu[warm:])  # the first `warm` were warm-up
    for (e, m), times in ms.items():
        res[e][m] = percentiles(times)
        if m == "vector":
            res[e]["recall"] = float(np.mean([len(set(f) & set(t.tolist())) / K
                                              for f, t in zip(found[(e, m)], truth,
                                                              strict=True)]))
    exact_bm25 = found.get(("tantivy", "bm25"))
    for (e, m), got in found.items():
        if m == "bm25" and exact_bm25 and e != "tantivy":
            res[e]["bm25_overlap"] = float(np.mean(
                [len(set(x) & set(y)) / len(y) for x, y in zip(got, exact_bm25, strict=True)
                 if y]))
    if ("lancedb", "hybrid") in found and ("ragloop", "hybrid") in found:
        res["lancedb"]["hybrid_overlap"] = float(np.mean(
            [len(set(x) & set(y)) / K for x, y in zip(found[("lancedb", "hybrid")],
                                                      found[("ragloop", "hybrid")],
                                                      strict=True)]))
    return res


def fmt(pair) -> str:
    return f"{pair[0]:.2f} / {pair[1]:.2f}" if pair else "–"


def report(n: int, nq: int, res: dict) -> str:
    rows = []
    for e, r in res.items():
        cpu = r.get("build_cpu_s", float("nan"))
        rows.append([e, f"{r['build_s']:.1f} ({cpu:.0f})", fmt(r.get("bm25")),
                     fmt(r.get("vector")), fmt(r.get("hybrid")),
                     f"{r['recall']:.3f}" if "recall" in r else "–",
                     f"{r['bm25_overlap']:.3f}" if "bm25_overlap" in r else "–",
                     mb(r["disk"]), f"{r.get('rss_mb', float('nan')):,.0f}"])
    text = [f"### N = {n:,} chunks, {nq} queries (k = {K}), one process per engine", "",
            table(["engine", "build s (CPU s)", "bm25 p50 / p95 ms", "vector p50 / p95 ms",
                   "hybrid p50 / p95 ms", "vector recall@10", "bm25 overlap@10 vs tantivy",
                   "disk MB", "query process RSS MB"], rows), ""]
    rg, tv, hn = res.get("ragloop"), res.get("tantivy"), res.get("hnswlib")
    cpu_rows = [[e, *(fmt(r.get(f"{m}_cpu")) for m in ("bm25", "vector", "hybrid"))]
                for e, r in res.items() if any(k.endswith("_cpu") for k in r)]
    if cpu_rows:
        text += ["CPU ms per query (the query process, all threads), p50 / p95:", "",
                 table(["engine", "bm25", "vector", "hybrid"], cpu_rows), ""]
    if rg and tv and hn and "hybrid_cpu" in rg:
        for i, name in ((0, "p50"), (1, "p95")):
            pair = tv["bm25_cpu"][i] + hn["vector_cpu"][i]
            text.append(f"- CPU: ragloop hybrid {name} {rg['hybrid_cpu'][i]:.2f} ms vs tantivy +"
                        f" hnswlib {pair:.2f} ms: **{rg['hybrid_cpu'][i] / pair:.2f}x**")
    if rg and tv and hn and "hybrid" in rg:
        for i, name in ((0, "p50"), (1, "p95")):
            pair = tv["bm25"][i] + hn["vector"][i]
            text.append(f"- ragloop hybrid {name} {rg['hybrid'][i]:.2f} ms vs tantivy {name} +"
                        f" hnswlib ef{HNSW_EF} {name} = {pair:.2f} ms:"
                        f" **{rg['hybrid'][i] / pair:.2f}x**"
                        + (" (target <= 2x)" if i else ""))
        text.append(f"- ragloop bm25 / tantivy: p50 {rg['bm25'][0] / tv['bm25'][0]:.2f}x, p95"
                    f" {rg['bm25'][1] / tv['bm25'][1]:.2f}x; ragloop vector / hnswlib: p50"
                    f" {rg['vector'][0] / hn['vector'][0]:.2f}x, p95"
                    f" {rg['vector'][1] / hn['vector'][1]:.2f}x")
    if rg:
        text.append(f"- ragloop: disk {mb(rg['disk'])} MB (SQLite {mb(rg['disk_db'])} MB, indexes"
                    f" {mb(rg['disk_index'])} MB); cold open + first hybrid query"
                    f" {rg['cold_open_s'] * 1000:.0f} ms (files in the page cache)")
    ld = res.get("lancedb")
    if rg and ld and "hybrid" in ld and "hybrid" in rg:
        text.append(f"- ragloop / LanceDB hybrid: p50 {rg['hybrid'][0] / ld['hybrid'][0]:.2f}x,"
                    f" p95 {rg['hybrid'][1] / ld['hybrid'][1]:.2f}x; LanceDB's hybrid top 10"
                    f" shares {ld['hybrid_overlap']:.3f} of ragloop's")
    return "\n".join(text) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--engines", nargs="+",
                    default=["ragloop", "tantivy", "hnswlib", "lancedb", "chroma"])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT / "interleaved")
    args = ap.parse_args()
    work = args.out / f"n{args.size}"
    log(machine_note())
    res = run(args.size, args.engines, args.queries, work, args.warm)
    text = report(args.size, args.queries, res)
    note = machine_note()
    log(note)
    print(text, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"n{args.size}.md").write_text(f"{note}\n\n{text}")
    (args.out / f"n{args.size}.json").write_text(json.dumps(res, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
