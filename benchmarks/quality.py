"""Retrieval quality and ingest cost on real BEIR samples, through the public KnowledgeBase API.

    .venv/bin/python benchmarks/quality.py [--dataset scifact-train|hotpotqa-dev|all]
                                           [--limit-queries N] [--out DIR]

For each dataset: ingest ../shared/data/<name>/corpus.jsonl into a fresh KB folder with
``KnowledgeBase.open(folder).ingest([...])`` (timed), and time bare embedding of the very same
chunk texts with the same (pre-warmed) embedder: the target is ingest <= 1.2x bare embedding.
Then run queries.jsonl through ``kb.search(q, k=10, mode=...)`` for bm25, vector and hybrid and
print recall@10 (fraction of gold docs among the top-10 distinct doc_ids), "all gold found"
(hotpotqa: both paragraphs), MRR@10 and latency. Finally a fusion sweep (candidate depth, RRF k,
BM25/vector weight) computed offline from the two components' ranked lists, to show what would
move hybrid.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    DATA,
    DATASETS,
    EMBEDDER_SPEC,
    OUT,
    Timer,
    machine_note,
    percentiles,
    read_jsonl,
    table,
)

from ragloop.core.config import Settings
from ragloop.embed import make_embedder
from ragloop.ingest.chunking import chunk_document
from ragloop.ingest.pipeline import embed_text
from ragloop.ingest.readers import read_file
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.fusion import RRF_K, candidate_depth, fused_top
from ragloop.retrieval.query_text import query_terms

K = 10
SWEEP_DEPTH = 200


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_queries(name: str) -> list[tuple[str, str, list[str]]]:
    folder = DATA / name
    rows = read_jsonl(folder / "queries.jsonl")
    qrels: dict[str, list[str]] = {}
    tsv = folder / "qrels" / "test.tsv"
    if tsv.exists():
        for line in tsv.read_text().splitlines()[1:]:
            qid, did, score = line.split("\t")[:3]
            if float(score) > 0:
                qrels.setdefault(qid, []).append(did)
    out = []
    for r in rows:
        gold = r.get("gold_doc_ids") or qrels.get(str(r["_id"])) or []
        if gold:
            out.append((str(r["_id"]), r["text"], [str(g) for g in gold]))
    return out


def doc_ranking(doc_ids: list[str], k: int = K) -> list[str]:
    return list(dict.fromkeys(doc_ids))[:k]


def score(rankings: list[list[str]], golds: list[list[str]]) -> dict[str, float]:
    rec, allf, mrr = [], [], []
    for ranking, gold in zip(rankings, golds, strict=True):
        top = ranking[:K]
        hit = set(top) & set(gold)
        rec.append(len(hit) / len(gold))
        allf.append(float(len(hit) == len(set(gold))))
        rr = next((1.0 / (i + 1) for i, d in enumerate(top) if d in gold), 0.0)
        mrr.append(rr)
    return {"recall": float(np.mean(rec)), "all": float(np.mean(allf)), "mrr": float(np.mean(mrr))}


def fuse(bm25: list[int], vec: list[int], depth: int, rrf_k: float, w_bm25: float,
         chunk_doc: dict[int, str], doc_level: bool = False,
         keep_firsts: bool = True) -> list[str]:
    """The top-K documents of one fusion; `keep_firsts` (ragloop's default): each side's first
    chunk stays among the top K chunks, as `ragloop.kb.search.fused_top` does."""
    scores: dict[object, float] = {}
    for weight, ranking in ((w_bm25, bm25[:depth]), (2.0 - w_bm25, vec[:depth])):
        if doc_level:  # fuse over documents: a doc's rank is its best chunk's rank
            ranking = list(dict.fromkeys(chunk_doc[c] for c in ranking))
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (rrf_k + rank)
    top = sorted(scores, key=lambda c: scores[c], reverse=True)
    if doc_level:
        return [str(d) for d in top[:K]]
    if keep_firsts:
        firsts = [r[0] for r in (bm25[:depth], vec[:depth]) if r]
        top = fused_top(scores, firsts, K)  # type: ignore[arg-type]
    return doc_ranking([chunk_doc[c] for c in top[:K]])  # type: ignore[index]


def subset_corpus(corpus: Path, out: Path, queries: list, max_docs: int) -> Path:
    """The gold documents of `queries` plus the corpus's first other documents, up to
    `max_docs` lines: a smaller, easier corpus for machines where full ingest is too slow."""
    gold = {g for _, _, gs in queries for g in gs}
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [ln for ln in lines if json.loads(ln)["_id"] in gold]
    keep += [ln for ln in lines if json.loads(ln)["_id"] not in gold][:max(0, max_docs - len(keep))]
    sub = out / f"subset-{corpus.parent.name}-{max_docs}" / "corpus.jsonl"
    sub.parent.mkdir(parents=True, exist_ok=True)
    sub.write_text("".join(keep), encoding="utf-8")
    return sub


def run(name: str, limit: int | None, out: Path, subset_docs: int | None = None,
        bare: bool = True) -> str:
    corpus = DATA / name / "corpus.jsonl"
    queries = load_queries(name)[:limit] if limit else load_queries(name)
    if subset_docs:
        corpus = subset_corpus(corpus, out, queries, subset_docs)
    folder = out / f"kb-{name}"
    shutil.rmtree(folder, ignore_errors=True)
    settings = Settings.from_env()
    emb = make_embedder(EMBEDDER_SPEC)
    emb.embed(["warm-up"])  # model load and the bf16 probe happen here, outside both timings

    # the chunk texts ingest will embed, prepared outside the bare timing
    texts = []
    for doc in read_file(corpus, corpus.name):
        for c in chunk_document(doc, settings.chunk_tokens, settings.chunk_overlap):
            texts.append(embed_text(doc, c))
    bare_s = bare_cpu = None
    if bare:
        with Timer() as t:
            emb.embed(texts)
        bare_s, bare_cpu = t.seconds, t.cpu
        log(f"{name}: bare embedding of {len(texts)} chunk texts {bare_s:.1f} s"
            f" (cpu {bare_cpu:.1f} s)")

    kb = KnowledgeBase.open(folder, settings=settings, embedder=emb)
    with Timer() as ing:
        rep = kb.ingest([corpus])
    log(f"{name}: ingest {rep.summary()} (wall {ing.seconds:.1f} s, cpu {ing.cpu:.1f} s)")

    golds = [g for _, _, g in queries]
    rows, res = [], {}
    for mode in ("bm25", "vector", "hybrid"):
        rankings, ms = [], []
        for _, q, _ in queries:
            t = time.perf_counter()
            hits = kb.search(q, k=K, mode=mode)
            ms.append((time.perf_counter() - t) * 1000)
            rankings.append(doc_ranking([h.doc_id for h in hits]))
        s = score(rankings, golds)
        res[mode] = s
        p50, p95 = percentiles(ms)
        rows.append([mode, f"{s['recall']:.3f}", f"{s['all']:.3f}", f"{s['mrr']:.3f}",
                     f"{p50:.1f} / {p95:.1f}"])

    # -- fusion sweep from the raw component lists -------------------------------------------
    store = kb.store
    chunk_doc = dict(store.db.execute("SELECT id, doc_id FROM chunks"))  # type: ignore[attr-defined]
    qvecs = kb.embedder.embed([q for _, q, _ in queries])
    comps = []
    for (_, q, _), v in zip(queries, qvecs, strict=True):
        comps.append(([c for c, _ in store.search_bm25(query_terms(q, kb.language), SWEEP_DEPTH)],
                      [c for c, _ in store.search_vector(v, SWEEP_DEPTH)]))
    sweep_rows = []
    default_depth = candidate_depth(K)
    configs = [(default_depth, RRF_K, 1.0, False, "current (ragloop default)"),
               (default_depth, RRF_K, 1.0, False, "plain RRF: a side's first hit may drop out")]
    configs += [(d, RRF_K, 1.0, False, "") for d in (10, 20, 100, 200)]
    configs += [(default_depth, k, 1.0, False, "") for k in (5, 10, 20, 30)]
    configs += [(default_depth, RRF_K, w, False, "") for w in (0.6, 0.8, 1.2, 1.4)]
    configs += [(default_depth, 10, w, False, "") for w in (0.8, 1.2)]
    configs += [(default_depth, RRF_K, 1.0, True, "doc-level fusion"),
                (default_depth, 10, 1.0, True, "doc-level fusion")]
    best = None
    for depth, rrf_k, w, doc_level, note in configs:
        rankings = [fuse(b, v, depth, rrf_k, w, chunk_doc, doc_level,
                         keep_firsts=not note.startswith("plain")) for b, v in comps]
        s = score(rankings, golds)
        sweep_rows.append([depth, rrf_k, f"{w:.1f} / {2 - w:.1f}", "doc" if doc_level else "chunk",
                           f"{s['recall']:.3f}", f"{s['all']:.3f}", f"{s['mrr']:.3f}", note])
        if best is None or s["recall"] > best[0]:
            best = (s["recall"], depth, rrf_k, w, doc_level)
    kb.close()

    beats = res["hybrid"]["recall"] > max(res["bm25"]["recall"], res["vector"]["recall"])
    if bare_s:
        cost = (f"- ingest vs bare embedding of the same {len(texts)} chunk texts: CPU"
                f" {ing.cpu:.1f} s vs {bare_cpu:.1f} s = **{ing.cpu / bare_cpu:.2f}x**"
                f" (target <= 1.2x); wall {ing.seconds:.1f} s vs {bare_s:.1f} s ="
                f" {ing.seconds / bare_s:.2f}x")
    else:
        cost = f"- ingest {ing.seconds:.1f} s (bare embedding not timed: --no-bare)"
    what = f" (subset: {corpus})" if subset_docs else ""
    text = [f"### {name}{what}: {len(queries)} queries, {rep.added} documents,"
            f" {rep.chunks} chunks", "", cost,
            f"- hybrid beats both components on recall@10: **{'yes' if beats else 'NO'}**", "",
            table(["mode", "recall@10", "all gold in top 10", "MRR@10", "latency p50 / p95 ms"],
                  rows), "",
            "Fusion sweep (offline, from the components' top-200 lists; weights BM25 / vector):",
            "",
            table(["depth", "RRF k", "weights", "fuse over", "recall@10", "all gold", "MRR@10",
                   ""], sweep_rows), ""]
    return "\n".join(text) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="all", choices=[*DATASETS, "all"])
    ap.add_argument("--limit-queries", type=int, default=None)
    ap.add_argument("--subset-docs", type=int, default=None,
                    help="ingest only the queries' gold docs plus other docs up to this many")
    ap.add_argument("--no-bare", action="store_true", help="skip timing bare embedding")
    ap.add_argument("--out", type=Path, default=OUT / "quality")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log(machine_note())
    names = DATASETS if args.dataset == "all" else (args.dataset,)
    for name in names:
        text = run(name, args.limit_queries, args.out, args.subset_docs, not args.no_bare)
        print(text, flush=True)
        (args.out / f"{name}.md").write_text(f"{machine_note()}\n\n{text}")
    log("done")


if __name__ == "__main__":
    main()
