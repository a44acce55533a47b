"""Retrieval figures behind the eval acceptance points (issue 4), offline.

    .venv/bin/python benchmarks/eval_figures.py retrieval ../shared/data/scifact-train \
        --kb /tmp/eval-scifact-kb [--modes bm25,vector,hybrid] [-k 10] [--limit N]
    .venv/bin/python benchmarks/eval_figures.py table eval-results/rag_hard/results.jsonl

Ingests the BEIR corpus into --kb if needed, then for every query and search mode collects the
first k distinct documents of one search (deep enough in chunks to hold k documents) and
prints recall@k (any gold document among them), all-gold@k (every gold document among them)
and MRR@k, with the mean search latency. This is the single-shot retrieval figure: the
`ragloop eval` single path reads the same first k documents.
`table` prints, per question type and path, recall@k, all-gold@k (capped and uncapped),
abstention, latency mean/p95, steps and the grader's precision/recall from results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def distinct_docs(hits, k: int) -> list[str]:
    out: list[str] = []
    for h in hits:
        if h.doc_id not in out:
            out.append(h.doc_id)
        if len(out) >= k:
            break
    return out


def retrieval(args: argparse.Namespace) -> int:
    from ragloop.core.config import Settings
    from ragloop.eval.datasets import ingest_corpus, load_dataset, resolve_gold
    from ragloop.kb import KnowledgeBase

    data = load_dataset(args.dataset).limit(args.limit)
    settings = Settings.from_env().with_(kb=Path(args.kb))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    out: dict[str, dict[str, float]] = {}
    with KnowledgeBase.open(args.kb, settings) as kb:
        if data.corpus is not None:
            t0 = time.perf_counter()
            added = ingest_corpus(kb, data.corpus)
            if added:
                print(f"ingested {added} documents in {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr)
        resolve_gold(data, [d.doc_id for d in kb.documents()])
        questions = [q for q in data.questions if q.gold_docs and q.answerable]
        depth = args.k * args.chunks_per_doc
        for mode in modes:
            found_any = found_all = rr = 0.0
            elapsed = 0.0
            for q in questions:
                t0 = time.perf_counter()
                hits = kb.search(q.q, k=depth, mode=mode)  # type: ignore[arg-type]
                elapsed += time.perf_counter() - t0
                docs = distinct_docs(hits, args.k)
                gold = set(q.gold_docs)
                found_any += any(d in gold for d in docs)
                found_all += all(g in docs for g in gold)
                rank = next((i for i, d in enumerate(docs, start=1) if d in gold), None)
                rr += 1.0 / rank if rank else 0.0
            n = max(len(questions), 1)
            out[mode] = {"n": len(questions), f"recall@{args.k}": round(found_any / n, 4),
                         f"all_gold@{args.k}": round(found_all / n, 4),
                         f"mrr@{args.k}": round(rr / n, 4),
                         "search_ms_mean": round(1000 * elapsed / n, 1)}
    if args.json:
        print(json.dumps({"dataset": str(args.dataset), "k": args.k, "modes": out}, indent=2))
    else:
        print(f"{args.dataset}  (k={args.k} documents, {len(questions)} questions)")
        print(f"{'mode':8} {'recall':>8} {'all_gold':>9} {'mrr':>7} {'ms':>7}")
        for mode, row in out.items():
            print(f"{mode:8} {row[f'recall@{args.k}']:8.3f} {row[f'all_gold@{args.k}']:9.3f}"
                  f" {row[f'mrr@{args.k}']:7.3f} {row['search_ms_mean']:7.1f}")
    return 0


def table(args: argparse.Namespace) -> int:
    """Per question type and path: the capped and uncapped gold recall, latency and steps."""
    from ragloop.eval.metrics import build_report

    records = [json.loads(line) for line in Path(args.results).read_text().splitlines()
               if line.strip()]
    k = args.k
    report = build_report(records, k)
    cols = [(f"recall@{k}", "rec"), (f"all_gold@{k}", "all"), ("recall_uncapped", "rec_u"),
            ("all_gold_uncapped", "all_u"), ("abstention", "abst"), ("latency_mean_s", "lat"),
            ("latency_p95_s", "p95"), ("steps_mean", "steps"), ("truncated_pct", "trunc%"),
            ("grader_precision", "gP"), ("grader_recall", "gR")]
    print("| type | path | n | " + " | ".join(c for _, c in cols) + " |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in cols) + " |")

    def fmt(v: object) -> str:
        return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    rows = [("ALL", report["paths"]), *sorted(report["by_type"].items())]
    for qtype, by_path in rows:
        for path, fig in by_path.items():
            print(f"| {qtype} | {path} | {fig['n']} | "
                  + " | ".join(fmt(fig.get(key)) for key, _ in cols) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("retrieval", help="single-shot retrieval recall per search mode")
    r.add_argument("dataset", type=Path)
    r.add_argument("--kb", required=True)
    r.add_argument("--modes", default="bm25,vector,hybrid")
    r.add_argument("-k", type=int, default=10)
    r.add_argument("--limit", type=int, default=None)
    r.add_argument("--chunks-per-doc", type=int, default=4,
                   help="search depth in chunks per wanted document")
    r.add_argument("--json", action="store_true")
    t = sub.add_parser("table", help="per-type figures from an eval's results.jsonl")
    t.add_argument("results", type=Path)
    t.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    return retrieval(args) if args.cmd == "retrieval" else table(args)


if __name__ == "__main__":
    raise SystemExit(main())
