"""Several knowledge bases served at once: does the offline choice of KB find each question's
own KB, and what does serving three cost in retrieval against asking the question's own KB?

    PYTHONPATH=src python benchmarks/multi_kb.py [--work DIR] [--limit 100] [--merged]

Three KBs, copied from the prebuilt ones (/work/kbs, or built with `ragloop ingest` /
`ragloop eval`): `examples` (examples/kb), `hotpotqa` (../shared/data/hotpotqa-dev) and
`scifact` (../shared/data/scifact-train). Questions from each: the examples' hard dev split
(rag_hard.jsonl) and test split (rag_hard_test.jsonl), and the first `--limit` queries of each
BEIR set. The margin of the choice (offline/source_choice.py) was set on the TUNING part (the
dev split and the first half of each BEIR subset); the HELD-OUT part (the test split and the
second half) was not looked at while setting it. Both are printed.

Per question: the KBs the chooser picks (its own alone = right); all-gold@5 (every gold
document among the first 5 distinct documents of a 20-chunk search) when the three KBs are
served (the chooser's pick, merged by rank) against asking its own KB alone; and, with
`--merged`, one KB holding all three corpora (built once into WORK/merged, reused after).
Latency of one search: served three vs own KB alone, in the same run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, OUT, ROOT, machine_note, percentiles, read_jsonl, table

from ragloop.core.config import Settings
from ragloop.eval.datasets import ingest_corpus, load_seed, resolve_gold
from ragloop.kb import KnowledgeBase
from ragloop.kb.catalog import CatalogEntry, open_catalog
from ragloop.offline.factory import source_chooser

PREBUILT = Path("/work/kbs")
# ../shared/data beside the repository; a worktree elsewhere reads the machine's copy
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
SOURCES = {"examples": "examples", "hotpotqa": "hotpotqa-dev", "scifact": "scifact-train"}
K_DOCS = 5
DEPTH = 20


@dataclass
class Question:
    kb: str
    text: str
    gold: list[str]
    part: str  # "tuning" | "held-out"


def questions(examples: KnowledgeBase, limit: int) -> list[Question]:
    out = []
    doc_ids = [d.doc_id for d in examples.documents()]
    for name, part in (("rag_hard.jsonl", "tuning"), ("rag_hard_test.jsonl", "held-out")):
        ds = load_seed(ROOT / "examples" / "evals" / name)
        resolve_gold(ds, doc_ids)
        out += [Question("examples", q.q, list(q.gold_docs), part) for q in ds.questions]
    for name, folder in (("hotpotqa", "hotpotqa-dev"), ("scifact", "scifact-train")):
        rows = read_jsonl(DATA / folder / "queries.jsonl")[:limit]
        out += [Question(name, r["text"], list(r["gold_doc_ids"]),
                         "tuning" if i < limit // 2 else "held-out") for i, r in enumerate(rows)]
    return out


def top_docs(hits, k: int = K_DOCS) -> list[tuple[str, str]]:
    return list(dict.fromkeys((h.kb, h.doc_id) for h in hits))[:k]


def copy_kbs(work: Path) -> dict[str, Path]:
    out = {}
    for name, prebuilt in SOURCES.items():
        dest = work / name
        if not dest.exists():
            shutil.copytree(PREBUILT / prebuilt, dest)
        out[name] = dest
    return out


def build_merged(work: Path, settings: Settings) -> Path:
    """One KB with all three corpora: a copy of the largest (scifact) plus the other two
    ingested through the ordinary write path (its embedding cache holds none of theirs)."""
    dest = work / "merged"
    if (dest / "BUILT").exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(PREBUILT / "scifact-train", dest)
    started = time.time()
    with KnowledgeBase.open(dest, settings) as kb:
        ingest_corpus(kb, DATA / "hotpotqa-dev" / "corpus.jsonl")
        kb.ingest([ROOT / "examples" / "kb"])
    (dest / "BUILT").write_text(f"{time.time() - started:.0f} s\n")
    return dest


def run(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env()
    paths = copy_kbs(work)
    entries = [CatalogEntry(n, str(p)) for n, p in paths.items()]
    kbs = open_catalog(entries, settings)
    kbs.chooser = source_chooser(kbs)
    if args.margin is not None:
        kbs.chooser.margin = args.margin  # type: ignore[attr-defined]
    kbs.warm_up()
    qs = questions(kbs.kbs["examples"], args.limit)
    merged = None
    if args.merged:
        merged = KnowledgeBase.open(build_merged(work, settings), settings, create=False)
        merged.warm_up()
    rows: dict[tuple[str, str], dict[str, list]] = {}
    ms_multi: list[float] = []
    ms_own: list[float] = []
    for i, q in enumerate(qs):
        r = rows.setdefault((q.part, q.kb), {"own": [], "among": [], "n_kbs": [],
                                             "gold_multi": [], "gold_own": [],
                                             "gold_merged": []})
        choice = kbs.choose(q.text)
        r["own"].append(choice.knowledge_bases == (q.kb,))
        r["among"].append(q.kb in choice.knowledge_bases)
        r["n_kbs"].append(len(choice.knowledge_bases))
        if not q.gold:  # an unanswerable question: its KB choice counts, no gold to find
            continue
        gold = {(q.kb, g) for g in q.gold}
        t0 = time.perf_counter()
        multi = kbs.search(q.text, DEPTH)
        t1 = time.perf_counter()
        own = [h for h in kbs.kbs[q.kb].search(q.text, DEPTH)]
        t2 = time.perf_counter()
        ms_multi.append((t1 - t0) * 1000)
        ms_own.append((t2 - t1) * 1000)
        r["gold_multi"].append(gold <= set(top_docs(multi)))
        r["gold_own"].append(set(q.gold) <= {d for _, d in top_docs(own)})
        if merged is not None:
            found = {d for _, d in top_docs(merged.search(q.text, DEPTH))}
            r["gold_merged"].append(set(q.gold) <= found)
        if (i + 1) % 50 == 0:
            print(f"… {i + 1}/{len(qs)}", file=sys.stderr, flush=True)

    def share(flags: list[bool]) -> str:
        return f"{sum(flags) / len(flags):.3f}" if flags else "–"

    body = []
    for part in ("tuning", "held-out"):
        total: dict[str, list] = {}
        for (p, name), r in sorted(rows.items()):
            if p != part:
                continue
            for key, v in r.items():
                total.setdefault(key, []).extend(v)
            body.append(_row(part, name, r, share))
        body.append(_row(part, "all", total, share))
    headers = ["part", "questions of", "n", "own KB alone chosen", "own among chosen",
               "KBs searched (mean)", "gold qs", "all-gold@5 served 3", "all-gold@5 own KB",
               "ratio"] + (["all-gold@5 one merged KB"] if merged is not None else [])
    print(machine_note())
    print(f"margin {kbs.chooser.margin:.3f}; limit {args.limit} per BEIR set;"  # type: ignore[attr-defined]
          f" search depth {DEPTH} chunks, first {K_DOCS} documents")
    print(table(headers, [b if merged is not None else b[:-1] for b in body]))
    p50m, p95m = percentiles(ms_multi)
    p50o, p95o = percentiles(ms_own)
    print(f"one search, ms p50/p95: three KBs served (choice + searches) {p50m:.0f}/{p95m:.0f};"
          f" own KB alone {p50o:.0f}/{p95o:.0f}; ratio p50 {p50m / p50o:.2f}")
    kbs.close()
    if merged is not None:
        merged.close()


def _row(part: str, name: str, r: dict[str, list], share) -> list[object]:
    gm, go = r["gold_multi"], r["gold_own"]
    ratio = (sum(gm) / sum(go)) if go and sum(go) else float("nan")
    n_kbs = sum(r["n_kbs"]) / len(r["n_kbs"]) if r["n_kbs"] else 0
    return [part, name, len(r["own"]), share(r["own"]), share(r["among"]), f"{n_kbs:.2f}",
            len(gm), share(gm), share(go), f"{ratio:.3f}", share(r["gold_merged"])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(OUT / "multi_kb"))
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--margin", type=float, default=None)
    ap.add_argument("--merged", action="store_true")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
