"""Measure the offline citation checker (src/ragloop/language/support.py) against the
hand-labelled pairs of examples/evals/citation_support.jsonl.

The set was written before the checker's thresholds were chosen. Its `split` field divides
it: thresholds are tuned on `dev` only (`--sweep` prints the dev grid), and precision /
recall are reported for both halves, for detecting "unsupported" and for "supported". Each
pair is judged with the embedder a knowledge base in its language would use (MiniLM for
English, multilingual-e5 otherwise), the passage's document id standing in for its heading.

    PYTHONPATH=src .venv/bin/python benchmarks/citation_checker.py [--sweep]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "examples" / "evals" / "citation_support.jsonl"


def load() -> list[dict]:
    with SET.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def doc_id(source: str) -> str:
    return Path(source).with_suffix("").as_posix().removeprefix("tests/fixtures/lang/")


class Memo:
    """The embedder with its vectors kept: the sweep embeds the same texts many times."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, {}

    def embed(self, texts: list[str]):
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            self.seen.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.asarray([self.seen[t] for t in texts])


def judge(rows: list[dict], min_coverage: float, min_similarity: float,
          embedders: dict) -> list[bool]:
    from ragloop.language.support import Passage, SupportChecker

    out: list[bool] = []
    for row in rows:
        lang = "en" if row["source"].startswith(("products", "policies", "reports", "support",
                                                  "company", "hr", "filings")) else "other"
        checker = SupportChecker(embedders[lang], min_coverage=min_coverage,
                                 min_similarity=min_similarity)
        passage = Passage(row["passage"], doc_id(row["source"]))
        out.append(checker.check([(row["sentence"], passage)])[0].supported)
    return out


def scores(rows: list[dict], said: list[bool]) -> dict[str, float | int]:
    """Precision / recall of the checker for each label."""
    c = Counter((r["supported"], s) for r, s in zip(rows, said, strict=True))

    def pr(label: bool) -> tuple[float, float]:
        tp = c[(label, label)]
        predicted = c[(label, label)] + c[(not label, label)]
        actual = c[(label, label)] + c[(label, not label)]
        return (tp / predicted if predicted else 0.0, tp / actual if actual else 0.0)

    up, ur = pr(False)
    sp, sr = pr(True)
    return {"n": len(rows), "unsupported_n": sum(not r["supported"] for r in rows),
            "unsup_p": up, "unsup_r": ur, "sup_p": sp, "sup_r": sr,
            "accuracy": (c[(True, True)] + c[(False, False)]) / len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", action="store_true", help="print the dev grid")
    args = parser.parse_args()
    from ragloop.core.config import LOCAL_EMBEDDER, MULTILINGUAL_EMBEDDER
    from ragloop.embed import make_embedder
    from ragloop.language.support import MIN_COVERAGE, MIN_SIMILARITY

    embedders = {"en": Memo(make_embedder(LOCAL_EMBEDDER)),
                 "other": Memo(make_embedder(MULTILINGUAL_EMBEDDER))}
    rows = load()
    dev = [r for r in rows if r["split"] == "dev"]
    held = [r for r in rows if r["split"] == "held_out"]
    if args.sweep:
        print("coverage similarity  unsup_p unsup_r sup_p sup_r acc   (dev only)")
        for cov in (0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1.01):
            for sim in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.01):
                s = scores(dev, judge(dev, cov, sim, embedders))
                print(f"{cov:8.2f} {sim:10.2f}  {s['unsup_p']:.2f}    {s['unsup_r']:.2f}"
                      f"    {s['sup_p']:.2f}  {s['sup_r']:.2f}  {s['accuracy']:.2f}")
        return
    lines = ["| split | pairs | unsupported | 'unsupported' precision | 'unsupported' recall"
             " | 'supported' precision | 'supported' recall | accuracy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    misses: list[str] = []
    for name, part in (("dev (tuned on)", dev), ("held-out", held),
                       ("all, lexical only (no embedder)", rows)):
        embed = embedders if "lexical" not in name else {"en": None, "other": None}
        said = judge(part, MIN_COVERAGE, MIN_SIMILARITY, embed)
        s = scores(part, said)
        lines.append(f"| {name} | {s['n']} | {s['unsupported_n']} | {s['unsup_p']:.2f} |"
                     f" {s['unsup_r']:.2f} | {s['sup_p']:.2f} | {s['sup_r']:.2f} |"
                     f" {s['accuracy']:.2f} |")
        if "lexical" not in name:
            misses += [f"{r['id']} {r['kind']} labelled={r['supported']}: {r['sentence']}"
                       for r, v in zip(part, said, strict=True) if v != r["supported"]]
        if part is held:
            kinds = Counter(r["kind"] for r, v in zip(part, said, strict=True)
                            if not r["supported"] and v)
    print("\n".join(lines))
    print(f"\nthresholds: coverage {MIN_COVERAGE}, similarity {MIN_SIMILARITY}")
    print("held-out unsupported pairs judged supported, by kind:", dict(kinds))
    print("wrong verdicts (dev and held-out):", *misses, sep="\n  ", file=sys.stderr)


if __name__ == "__main__":
    main()
