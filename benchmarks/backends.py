"""Same answers on both backends: the SQLite default and Postgres on one corpus, in one run.

    .venv/bin/python benchmarks/backends.py [--sizes 100000 1000000] [--queries 200]
        [--work DIR] [--keep]

For each size N the synthetic corpus of retrieval.py (real MiniLM vectors and real passage
sentences) is written into a SqliteStore and a PostgresStore (embedded PostgreSQL +
pgvector, pg_backend.py's server settings). The same queries then run on both, interleaved
(query i on every probe before query i+1), and the script prints, per mode (bm25, vector,
hybrid): the overlap of the two backends' top 10, p50 / p95 latency of each and their
ratio, plus BM25 overlap with exact BM25 (a plain tantivy index of the same texts) and
vector recall@10 against exact kNN (numpy).

Builds are slow at 1M (tens of minutes each); `--keep` leaves both stores in WORK (default
benchmarks/out/backends) and a later run reuses a store whose build record matches.
`--build-only sqlite|postgres` builds one backend and stops, so the two builds can be run
apart from the timed queries.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Timer, base_set, dir_size, machine_note, mb, table
from pg_backend import exact_bm25
from retrieval import build_sqlite, log
from synthetic import FixedEmbedder, Probes, exact_topk, pick_queries, synth_corpus

from ragloop.kb.search import hybrid_search
from ragloop.retrieval.query_text import query_terms
from ragloop.storage.sqlite.store import SqliteStore

K = 10
MODES = ("bm25", "vector", "hybrid")


def sqlite_store(work: Path, vecs: np.ndarray, texts: list[str]) -> tuple[SqliteStore, dict]:
    """The SqliteStore of the corpus in work/sqlite, built unless a finished build is there."""
    folder, record = work / "sqlite", work / "sqlite.json"
    if record.exists() and folder.exists():
        store = SqliteStore(folder)
        if store.chunk_count() == len(texts):
            log(f"sqlite: reusing {folder}")
            return store, json.loads(record.read_text())
        store.close()
    shutil.rmtree(folder, ignore_errors=True)
    record.unlink(missing_ok=True)
    with Timer() as t:
        store = build_sqlite(folder, vecs, texts)
    info = {"build_s": t.seconds, "disk": dir_size(folder)}
    record.write_text(json.dumps(info))
    log(f"sqlite build {t.seconds:.1f} s")
    return store, info


def overlap(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x or y]
    return float(np.mean([len(set(x) & set(y)) / K for x, y in pairs])) if pairs else 1.0


def run_size(n: int, args, base: dict, queries: list[str], qvecs: np.ndarray) -> str:
    from pg_backend import build_store

    work = args.work / f"n{n}"
    work.mkdir(parents=True, exist_ok=True)
    with Timer() as t:
        vecs, texts = synth_corpus(n, base)
    log(f"N={n}: synthetic corpus in {t.seconds:.1f} s")
    stores: dict[str, object] = {}
    info: dict[str, dict] = {}
    closers = []
    if args.build_only in (None, "sqlite"):
        stores["sqlite"], info["sqlite"] = sqlite_store(work, vecs, texts)
        closers.append(stores["sqlite"].close)
    if args.build_only in (None, "postgres"):
        server, pg, timings = build_store(work, vecs, texts, reuse=None)
        stores["postgres"], info["postgres"] = pg, timings
        closers += [pg.close, server.cleanup]
    if args.build_only:
        for close in closers:
            close()
        return f"N={n}: built {args.build_only}: {json.dumps(info[args.build_only])}"
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
    truth = exact_topk(vecs, qvecs, K)
    log("exact BM25 (tantivy) ...")
    exact = exact_bm25(texts, terms)
    del vecs, texts
    gc.collect()
    emb = FixedEmbedder(queries, qvecs)
    probes = Probes()
    outs: dict[tuple[str, str], list[list[int]]] = {}

    def recorded(key, fn):
        outs[key] = []

        def probe(x):
            ids = fn(x)
            outs[key].append(ids)
            return ids
        return probe

    for name, store in stores.items():
        probes.add(name, "bm25", recorded((name, "bm25"), lambda ts, s=store: [
            c for c, _ in s.search_bm25(ts, K)]), terms)
        probes.add(name, "vector", recorded((name, "vector"), lambda q, s=store: [
            c for c, _ in s.search_vector(q, K)]), list(qvecs), ids=lambda f: [c - 1 for c in f])
        probes.add(name, "hybrid", recorded((name, "hybrid"), lambda q, s=store: [
            h.chunk_id for h in hybrid_search(s, emb, q, K, "hybrid")]), queries)
    from ragloop.storage.postgres.store import PostgresStore

    sweep = {}
    for ef in args.ef:
        sweep[ef] = PostgresStore(stores["postgres"].url, ef_search=ef)
        probes.add(f"ef{ef}", "vector", lambda q, s=sweep[ef]: [c for c, _ in s.search_vector(
            q, K)], list(qvecs), ids=lambda f: [c - 1 for c in f])
        closers.insert(0, sweep[ef].close)
    res: dict = {name: {} for name in [*stores, *(f"ef{ef}" for ef in args.ef)]}
    log("timing queries (interleaved) ...")
    probes.run(res, truth, warm=args.warm)
    for name in stores:  # the warm-up ran first: keep each probe's timed answers
        for mode in MODES:
            outs[(name, mode)] = outs[(name, mode)][-len(queries):]
    for close in closers:
        close()
    rows = []
    for mode in MODES:
        s, p = res["sqlite"][mode], res["postgres"][mode]
        rows.append([mode, f"{overlap(outs[('sqlite', mode)], outs[('postgres', mode)]):.3f}",
                     f"{s[0]:.2f} / {s[1]:.2f}", f"{p[0]:.2f} / {p[1]:.2f}",
                     f"{p[0] / s[0]:.2f} / {p[1] / s[1]:.2f}"])
    pg = info["postgres"]
    lines = [f"### N = {n:,} chunks, {len(queries)} queries (k = {K})", "",
             table(["mode", "top-10 overlap SQLite vs Postgres", "SQLite p50 / p95 ms",
                    "Postgres p50 / p95 ms", "Postgres / SQLite p50 / p95"], rows), "",
             f"- BM25 top-10 overlap with exact BM25 (tantivy): SQLite"
             f" {overlap(outs[('sqlite', 'bm25')], exact):.3f}, Postgres"
             f" {overlap(outs[('postgres', 'bm25')], exact):.3f}",
             f"- vector recall@10 against exact kNN: SQLite {res['sqlite']['recall']:.3f},"
             f" Postgres {res['postgres']['recall']:.3f} (hnsw.ef_search"
             f" {stores['postgres'].ef_search})",
             f"- build: SQLite {info['sqlite']['build_s']:.0f} s ({mb(info['sqlite']['disk'])}"
             f" MB), Postgres {pg['build_s']:.0f} s ({mb(pg['disk'])} MB; HNSW"
             f" {pg['hnsw_s']:.0f} s, full-text statistics {pg.get('stats_s', 0):.0f} s)",
             "- query timings interleaved (query i on every probe before query i+1), one"
             f" thread each, after {args.warm} untimed queries per probe on servers just"
             " (re)started; the builds ran apart."]
    if args.ef:
        lines += ["", table(["Postgres hnsw.ef_search", "vector recall@10", "p50 / p95 ms"],
                            [[str(ef), f"{res[f'ef{ef}']['recall']:.3f}",
                              f"{res[f'ef{ef}']['vector'][0]:.2f} /"
                              f" {res[f'ef{ef}']['vector'][1]:.2f}"] for ef in args.ef])]
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=OUT / "backends")
    ap.add_argument("--keep", action="store_true", help="keep both stores for a later run")
    ap.add_argument("--build-only", choices=["sqlite", "postgres"], default=None)
    ap.add_argument("--warm", type=int, default=5,
                    help="untimed queries per probe before timing (200: warm caches)")
    ap.add_argument("--ef", type=int, nargs="*", default=[],
                    help="also time Postgres kNN at these hnsw.ef_search values")
    args = ap.parse_args()
    if args.build_only:
        args.keep = True
    base = base_set()
    queries, qvecs = pick_queries(base, args.queries)
    log(machine_note())
    for n in args.sizes:
        text = run_size(n, args, base, queries, qvecs)
        print(text, flush=True)
        if not args.build_only:
            (OUT / f"backends-n{n}.md").write_text(f"{machine_note()}\n\n{text}")
        gc.collect()


if __name__ == "__main__":
    main()
