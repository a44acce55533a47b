"""Calibrate the local grader's threshold on labelled (question, retrieved chunk) pairs.

Data:
- BEIR samples in ../shared/data (SciFact-train, HotpotQA-dev): for a sample of questions, a
  pool of the corpus (every sampled question's gold docs plus random others) is embedded
  with the shipped MiniLM; each question's candidates are its vector top-k from the pool
  plus its gold docs; a candidate is relevant when its doc is in the question's qrels.
- examples/evals/rag_hard.jsonl over examples/kb (when both exist): hybrid top-k per
  question; a hit is relevant when its doc is the gold doc; every hit of an `unanswerable`
  question is irrelevant.

For each mixing weight W_VEC and threshold, the grader's keep rule (`select`: ≥ threshold,
else the best hit if ≥ floor) is applied per question; precision / recall / F1 over all
pairs are printed per dataset, and the setting with the best mean F1 across datasets is
chosen. Hardcode the chosen figures in src/ragloop/offline/grader.py.

    .venv/bin/python benchmarks/grader_calibration.py [--n 150] [--pool 1500]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragloop.core.types import Hit
from ragloop.language.text import ENGLISH_READING
from ragloop.language.vocabulary import ENGLISH_WORDS
from ragloop.offline.grader import (
    LocalGrader,
    QuestionTerms,
    code_penalty,
    combine,
    context_text,
    coverage,
    select,
)

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING
EN_WORDS = ENGLISH_WORDS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FLOOR_GAP = 0.07
# embeddings and the example KB are kept here between runs (outside the repo)
CACHE = Path(tempfile.gettempdir()) / "ragloop-grader-calibration"  # floor = threshold - FLOOR_GAP


@dataclass
class Pair:
    query: str  # question id
    cos: float
    cov: float
    penalty: float
    relevant: bool


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _features(question: str, hit: Hit, cos: float) -> tuple[float, float, float]:
    # the calibration sets are English's
    terms = QuestionTerms.of(question, ENGLISH_READING)
    qcodes = [e.upper() for e in terms.entities if ENGLISH_READING.is_code(e)]
    ctx = context_text(hit)
    covered = coverage(terms, ENGLISH_READING.term_set(ctx))
    return cos, covered, code_penalty(qcodes, ctx, ENGLISH_READING)


def beir_pairs(name: str, embedder, n: int, pool_size: int, k: int, seed: int = 0) -> list[Pair]:
    folder = DATA / name
    queries = [q for q in _jsonl(folder / "queries.jsonl") if q.get("gold_doc_ids")]
    rng = random.Random(seed)
    queries = rng.sample(queries, min(n, len(queries)))
    corpus = {d["_id"]: d for d in _jsonl(folder / "corpus.jsonl")}
    gold = {d for q in queries for d in q["gold_doc_ids"] if d in corpus}
    others = [d for d in corpus if d not in gold]
    pool = sorted(gold) + rng.sample(others, max(0, min(len(others), pool_size - len(gold))))
    t0 = time.time()
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = CACHE / f"{name}-{n}-{pool_size}-{seed}.npz"
    if cached.exists():
        z = np.load(cached)
        dvec, qvec = z["d"], z["q"]
    else:
        dvec = embedder.embed([corpus[d]["text"] for d in pool])
        qvec = embedder.embed([q["text"] for q in queries])
        np.savez(cached, d=dvec, q=qvec)
    print(f"  {name}: embedded {len(pool)} docs + {len(queries)} questions"
          f" in {time.time() - t0:.0f} s", file=sys.stderr)
    sims = qvec @ dvec.T
    pairs = []
    for qi, q in enumerate(queries):
        top = list(np.argsort(-sims[qi])[:k])
        golds = {pool.index(d) for d in q["gold_doc_ids"] if d in corpus}
        for di in dict.fromkeys([*top, *sorted(golds)]):
            doc = corpus[pool[di]]
            hit = Hit(0, pool[di], "0", "", doc["text"], doc_title=doc.get("title", ""))
            pairs.append(Pair(q["_id"], *_features(q["text"], hit, float(sims[qi, di])),
                              relevant=di in golds))
    return pairs


def rag_hard_pairs(kb_dir: Path, evals: Path, k: int) -> list[Pair]:
    from ragloop.kb import KnowledgeBase

    rows = _jsonl(evals)
    pairs = []
    with KnowledgeBase.open(CACHE / "example-kb") as kb:
        kb.ingest([kb_dir])  # idempotent: unchanged documents are skipped
        grader = LocalGrader(kb.embedder, reading=EN_RD)
        for i, row in enumerate(rows):
            gold = [tuple(p) for p in row.get("gold_pairs") or []]
            if not gold and row.get("gold_doc"):
                docs = row["gold_doc"]
                gold = [(d, str(row.get("gold_section") or "")) for d in
                        ([docs] if isinstance(docs, str) else docs)]
            hits = kb.search(row["q"], k=k)
            cos = grader.cosines(row["q"], hits)
            for h, c in zip(hits, cos, strict=True):
                rel = row.get("type") != "unanswerable" and any(
                    h.doc_id == d and _same_section(h.section, s) for d, s in gold)
                pairs.append(Pair(f"rag{i}", *_features(row["q"], h, c), relevant=rel))
    return pairs


def _same_section(hit: str, gold: str) -> bool:
    """A hit in the gold section, a subsection of it, or its parent section counts."""
    if not gold:
        return True
    return hit == gold or hit.startswith(gold + ".") or gold.startswith(hit + ".")


def evaluate(pairs: list[Pair], w_vec: float, threshold: float) -> tuple[float, float, float]:
    by_q: dict[str, list[Pair]] = {}
    for p in pairs:
        by_q.setdefault(p.query, []).append(p)
    tp = fp = fn = 0
    for group in by_q.values():
        scores = [combine(p.cos, p.cov, p.penalty, w_vec) for p in group]
        kept = set(select(scores, threshold, threshold - FLOOR_GAP, max_keep=6))
        for i, p in enumerate(group):
            if i in kept and p.relevant:
                tp += 1
            elif i in kept:
                fp += 1
            elif p.relevant:
                fn += 1
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def router_calibration(kb_dir: Path, evals: Path, n_off: int = 100) -> None:
    """The out-of-scope floor: nearest-chunk cosine of on-topic questions (rag_hard, all
    types) vs off-topic ones (BEIR questions asked of the example KB); then route accuracy
    per rag_hard type at the chosen floor (simple → single, others → agent)."""
    from ragloop.kb import KnowledgeBase
    from ragloop.offline.router import RuleRouter

    rows = _jsonl(evals)
    off = []
    for name in ("hotpotqa-dev", "scifact-train"):
        qs = _jsonl(DATA / name / "queries.jsonl")
        off += [q["text"] for q in random.Random(1).sample(qs, min(n_off, len(qs)))]
    with KnowledgeBase.open(CACHE / "example-kb") as kb:
        kb.ingest([kb_dir])
        router = RuleRouter(kb, words=EN_WORDS, reading=EN_RD)
        on_checks = [router.scope(r["q"]) for r in rows]
        off_checks = [router.scope(q) for q in off]
        print(f"\nout-of-scope floor: {len(rows)} on-topic (rag_hard) vs {len(off)} off-topic"
              " (HotpotQA/SciFact questions) asked of examples/kb")
        print("| floor | on-topic wrongly out of scope | off-topic caught |")
        print("|---|---|---|")
        table = []
        for f in [round(0.15 + 0.025 * i, 3) for i in range(15)]:
            wrong = sum(not c.shared_terms and c.best_cosine < f for c in on_checks)
            caught = sum(not c.shared_terms and c.best_cosine < f for c in off_checks)
            table.append((f, wrong, caught))
            print(f"| {f:.3f} | {wrong}/{len(rows)} | {caught}/{len(off)} |")
        # the lowest floor with no on-topic refusal that catches ≥ 98% of what any floor
        # catches: a higher one would only risk refusing on-topic questions
        top = max(c for _, w, c in table if w == 0)
        floor = min(f for f, w, c in table if w == 0 and c >= 0.98 * top)
        lowest = min(c.best_cosine for c in on_checks)
        print(f"chosen OUT_OF_SCOPE_COSINE = {floor} (lowest on-topic nearest-chunk cosine"
              f" {lowest:.2f})")
        router = RuleRouter(kb, words=EN_WORDS, reading=EN_RD, out_of_scope_cosine=floor)
        by_type: dict[str, list[bool]] = {}
        for r in rows:
            want = {"simple": "single", "unanswerable": None}.get(r.get("type"), "agent")
            got = router.route(r["q"]).route
            if want is not None:
                by_type.setdefault(r["type"], []).append(got == want)
        total = [ok for oks in by_type.values() for ok in oks]
        print("route accuracy: " + ", ".join(f"{t} {sum(v)}/{len(v)}" for t, v in
                                             by_type.items())
              + f"; all {sum(total)}/{len(total)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=150, help="questions per BEIR dataset")
    ap.add_argument("--pool", type=int, default=1500, help="corpus docs embedded per dataset")
    ap.add_argument("--k", type=int, default=8, help="retrieved candidates per question")
    ap.add_argument("--kb", type=Path, default=ROOT / "examples" / "kb")
    ap.add_argument("--evals", type=Path, default=ROOT / "examples" / "evals" / "rag_hard.jsonl")
    ap.add_argument("--router", action="store_true",
                    help="calibrate the router's out-of-scope floor instead")
    args = ap.parse_args()
    if args.router:
        router_calibration(args.kb, args.evals)
        return

    from ragloop.embed import make_embedder

    embedder = make_embedder("local")
    datasets: dict[str, list[Pair]] = {}
    for name in ("scifact-train", "hotpotqa-dev"):
        if (DATA / name / "queries.jsonl").exists():
            datasets[name] = beir_pairs(name, embedder, args.n, args.pool, args.k)
    if args.evals.exists() and args.kb.exists():
        try:
            datasets["rag_hard"] = rag_hard_pairs(args.kb, args.evals, args.k)
        except Exception as exc:  # the example KB is optional for calibration
            print(f"  rag_hard skipped: {exc}", file=sys.stderr)
    for name, pairs in datasets.items():
        pos = sum(p.relevant for p in pairs)
        print(f"{name}: {len(pairs)} pairs, {pos} relevant")

    thresholds = [round(0.20 + 0.025 * i, 3) for i in range(25)]
    best = (-1.0, 0.0, 0.0)
    for w_vec in (0.4, 0.5, 0.6, 0.7, 0.8, 1.0):
        for t in thresholds:
            f1s = [evaluate(p, w_vec, t)[2] for p in datasets.values()]
            mean = sum(f1s) / len(f1s)
            if mean > best[0]:
                best = (mean, w_vec, t)
    _, w_best, t_best = best
    names = list(datasets)
    print(f"\nW_VEC = {w_best} (best mean F1 over {', '.join(names)}); floor = threshold - "
          f"{FLOOR_GAP}")
    print("| threshold | " + " | ".join(f"{n} P / R / F1" for n in names) + " | mean F1 |")
    print("|---" * (len(names) + 2) + "|")
    for t in thresholds:
        cells, f1s = [], []
        for n in names:
            p, r, f = evaluate(datasets[n], w_best, t)
            cells.append(f"{p:.2f} / {r:.2f} / {f:.2f}")
            f1s.append(f)
        mark = " ← chosen" if t == t_best else ""
        print(f"| {t:.3f} | " + " | ".join(cells) + f" | {sum(f1s) / len(f1s):.3f}{mark} |")
    print(f"\nchosen: W_VEC={w_best} THRESHOLD={t_best} FLOOR={t_best - FLOOR_GAP:.3f}")
    for n in names:
        p, r, f = evaluate(datasets[n], w_best, t_best)
        print(f"  {n}: precision {p:.3f} recall {r:.3f} F1 {f:.3f}")
    pooled = [p for ps in datasets.values() for p in ps]
    p, r, f = evaluate(pooled, w_best, t_best)
    print(f"  pooled: precision {p:.3f} recall {r:.3f} F1 {f:.3f}")
    # vector similarity alone, for comparison
    best_vec = max((evaluate(pooled, 1.0, t)[2], t) for t in thresholds)
    print(f"  (cosine alone, best pooled F1 {best_vec[0]:.3f} at {best_vec[1]})")


if __name__ == "__main__":
    main()
