"""The figures of the honest-answers work (issue 16), per path and question type, from the
results.jsonl of `ragloop eval` runs, before and after side by side.

    .venv/bin/python benchmarks/honest_answers.py BEFORE/results.jsonl AFTER/results.jsonl
    .venv/bin/python benchmarks/honest_answers.py AFTER/results.jsonl        # one run
    .venv/bin/python benchmarks/honest_answers.py calibrate DATASET --kb KB [--limit N]

Columns: all_gold@5 and @10 (every gold document among the first k of the run's evidence),
abstained (unanswerable questions the run declined), declined (answerable questions it
wrongly declined), mean steps, used every step (steps = max_steps), forced (status
`truncated`: the ceiling stopped work), the agent's losses against single-shot (questions
where single-shot's first k documents held every gold document and the agent's did not), and
`facts`: per answerable question, the share of its reference answer's figures (words with a
digit: £11.8m, IP65, 3.4%) that the answer states, averaged. Each part of a multi-part
reference ("£11.8m in Q1 FY2024 and £14.9m in Q1 FY2025") carries its own figures, so the
column scores a multi-part answer part by part, which the retrieval columns do not see.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ragloop.eval.metrics import (
    abstained,
    citation_figures,
    mean,
    normalize_answer,
    recall_all,
    share,
)
from ragloop.language.text import ENGLISH_READING

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING


def figures_of(text: str) -> set[str]:
    """The words with a digit of a text, normalised as the eval normalises answers."""
    return {w for w in normalize_answer(text).split() if any(c.isdigit() for c in w)}


def facts_stated(record: dict[str, Any]) -> float | None:
    """Share of the reference's figures the answer states; None when it has none."""
    wanted = figures_of(record.get("reference") or "")
    if not wanted:
        return None
    return len(wanted & figures_of(record.get("answer") or "")) / len(wanted)


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def figures(records: list[dict[str, Any]], single: dict[str, dict[str, Any]]) -> dict[str, Any]:
    gold = [r for r in records if r.get("gold") and r.get("answerable", True)]
    out: dict[str, Any] = {"n": len(records)}
    for k in (5, 10):
        out[f"all@{k}"] = share([recall_all(r.get("docs") or [], r["gold"], k) for r in gold])
        lost = 0
        for r in gold:
            s = single.get(r["qid"])
            if s is not None and recall_all(s.get("docs") or [], r["gold"], k) \
                    and not recall_all(r.get("docs") or [], r["gold"], k):
                lost += 1
        out[f"lost@{k}"] = lost
    out["abst"] = share([abstained(r) for r in records if not r.get("answerable", True)])
    out["declined"] = share([abstained(r) for r in records if r.get("answerable", True)])
    out["steps"] = (sum(r.get("steps") or 0 for r in records) / len(records)) if records else None
    out["every%"] = 100 * share([(r.get("steps") or 0) >= (r.get("max_steps") or 1)
                                 for r in records]) if records else None
    out["forced%"] = 100 * share([r.get("status") == "truncated" for r in records]) \
        if records else None
    out["cite_prec"] = citation_figures(records)["citation_precision"]
    stated = [facts_stated(r) for r in records if r.get("answerable", True)]
    out["facts"] = mean([f for f in stated if f is not None])
    return out


COLS = ["n", "all@5", "all@10", "lost@5", "lost@10", "abst", "declined", "steps", "every%",
        "forced%", "cite_prec", "facts"]


def fmt(v: object, col: str = "") -> str:
    if v is None:
        return "–"
    if col.endswith("%"):
        return f"{v:.1f}"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}" if v < 1 else f"{v:.2f}"
    return str(v)


def report(runs: list[list[dict[str, Any]]]) -> list[str]:
    """A markdown table: one row per (type, path), each cell `before → after`."""
    per_run = []
    for records in runs:
        single = {r["qid"]: r for r in records if r["path"] == "single"}
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        paths = list(dict.fromkeys(r["path"] for r in records))
        types = ["ALL", *sorted({r.get("type", "") for r in records})]
        for t in types:
            for p in paths:
                chosen = [r for r in records if r["path"] == p
                          and (t == "ALL" or r.get("type", "") == t)]
                if chosen:
                    rows[(t, p)] = figures(chosen, single)
        per_run.append(rows)
    keys = list(dict.fromkeys(k for rows in per_run for k in rows))
    lines = ["| type | path | " + " | ".join(COLS) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in COLS) + " |"]
    for key in keys:
        cells = []
        for col in COLS:
            vals = [fmt(rows.get(key, {}).get(col), col) for rows in per_run]
            cells.append(" → ".join(vals) if len(set(vals)) > 1 else vals[0])
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return lines


def calibrate(argv: list[str]) -> int:
    """How sure is the local grader that a single-shot document is irrelevant? For single-shot's
    top 10 documents: the share scoring below each threshold, and of the gold ones."""
    from ragloop.agent.template import SINGLE_DEPTH_PER_DOC, top_documents
    from ragloop.eval.datasets import load_dataset, resolve_gold
    from ragloop.kb import KnowledgeBase
    from ragloop.offline.grader import LocalGrader

    parser = argparse.ArgumentParser(prog="honest_answers.py calibrate")
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--kb", required=True)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    data = load_dataset(args.dataset).limit(args.limit)
    rows: list[tuple[float, bool]] = []
    with KnowledgeBase.open(args.kb) as kb:
        resolve_gold(data, [d.doc_id for d in kb.documents()])
        grader = LocalGrader(kb.embedder, reading=EN_RD)
        for q in data.questions:
            if not q.gold_docs:
                continue
            hits = top_documents(kb.search(q.q, args.k * SINGLE_DEPTH_PER_DOC), args.k)
            grade = grader.grade(q.q, hits)
            best: dict[str, float] = {}
            for h in [*grade.kept, *grade.discarded]:
                best[h.doc_id] = max(best.get(h.doc_id, 0.0), h.grade_score or 0.0)
            rows += [(score, doc in q.gold_docs) for doc, score in best.items()]
    gold = sum(g for _, g in rows)
    print(f"{args.dataset}: {len(rows)} single-shot documents, {gold} gold")
    print("| threshold | documents below | gold documents below |")
    print("| ---: | ---: | ---: |")
    for t in (0.25, 0.3, 0.35, 0.4, 0.45, 0.5):
        below = [g for s, g in rows if s < t]
        print(f"| {t} | {len(below) / len(rows):.1%} | {sum(below) / max(gold, 1):.1%} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        return calibrate(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="results.jsonl, before first")
    args = parser.parse_args(argv)
    print("\n".join(report([load(p) for p in args.results])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
