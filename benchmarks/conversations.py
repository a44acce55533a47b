"""Conversations without the engine (issue 30, groundwork): does the offline condense rule find
what a follow-up needs, and does the offline clarify rule ask back when it should?

    .venv/bin/python benchmarks/conversations.py --kb KB [--split test] [--show]

KB is the examples knowledge base (`ragloop ingest examples/kb --kb KB`, or a copy of a
prebuilt one). For every turn of `examples/evals/conversations.jsonl` the KB's own search runs
three ways: the question as typed (no history), the question condensed with the history
(`offline/condense.py`; the history holds each earlier turn's condensed question, its
reference answer and the titles of its search's top documents, as the engine would cite them),
and the human rewrite (the ceiling). all-gold@5: every gold document among the first 5
distinct documents of the top 10 hits; all-gold@1 too, because on a KB of 34 documents five of
them often hold the gold one even for a question typed without its subject. Unanswerable
follow-ups have no gold and are not scored here (abstaining needs the engine:
`ragloop eval examples/evals/conversations.jsonl` runs the whole engine, eval/conversations.py,
whose reader and table this script shares).

For `examples/evals/ambiguity.jsonl`: search, grade with the offline grader (the engine's
search-and-grade step), then `offline/clarify.py` on the kept passages; the share that would
end with needs_input, for the ambiguous and the single-reading halves.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ragloop.agent.search_grade import search_and_grade
from ragloop.agent.tools import Toolbox
from ragloop.core.conversation import Turn
from ragloop.core.types import Hit
from ragloop.eval.conversations import KS, load_conversations, score, table
from ragloop.eval.metrics import distinct
from ragloop.kb import KnowledgeBase
from ragloop.language.text import reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.clarify import clarify
from ragloop.offline.condense import condense
from ragloop.offline.grader import LocalGrader

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = ROOT / "examples" / "evals" / "conversations.jsonl"
AMBIGUITY = ROOT / "examples" / "evals" / "ambiguity.jsonl"
SEARCH_K = 10  # hits searched per query
CITED = 2  # documents of a turn a later turn sees as cited


def _read(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _docs(hits: list[Hit]) -> list[str]:
    return distinct(h.doc_id for h in hits)


def _cited(hits: list[Hit]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for h in hits:
        if h.doc_id not in seen and len(seen) < CITED:
            seen[h.doc_id] = " › ".join(x for x in (h.doc_title, h.section_title) if x)
    return tuple(seen.values())


def run_conversations(kb: KnowledgeBase, split: str, show: bool) -> list[dict]:
    """One record per (turn, way) in eval/conversations.py's shape; the "history" way is the
    condensed question's search."""
    words = vocabulary(kb.language)
    records: list[dict] = []
    for conv in load_conversations(CONVERSATIONS):
        if split != "all" and conv.split != split:
            continue
        history: list[Turn] = []
        for i, t in enumerate(conv.turns):
            c = condense(history, t.q, words, reading(kb.language))
            queries = {"typed": t.q, "history": c.question, "rewrite": t.rewrite or t.q}
            hits = {way: kb.search(q, SEARCH_K) for way, q in queries.items()}
            if t.gold_docs:  # unanswerable turns: no gold, not scored here
                records += [{"path": "search", "split": conv.split, "type": t.type,
                             "conversation": conv.id, "turn": i, "way": way,
                             "docs": _docs(hits[way]), "gold": t.gold_docs} for way in hits]
            if show:
                print(f"{conv.id} {t.type:12} {c.kind:10} {t.q!r} -> {c.question!r}")
            history.append(Turn(t.q, c.question, t.answer or "", _cited(hits["history"])))
    return records


def run_ambiguity(kb: KnowledgeBase, show: bool) -> dict[str, list[bool]]:
    words = vocabulary(kb.language)
    toolbox = Toolbox(kb, k=SEARCH_K)
    grader = LocalGrader(kb.embedder, reading=reading(kb.language))
    out: dict[str, list[bool]] = defaultdict(list)
    for q in _read(AMBIGUITY):
        graded = search_and_grade(toolbox, grader, q["q"], q["q"])
        c = clarify(q["q"], graded.grade.kept, words, reading(kb.language))
        out[f"{q.get('split', 'tuned')} {q['type']}"].append(c is not None)
        if show:
            print(f"{q['id']} {q['type']:9} {q['q']!r} -> {c.options if c else None}")
    return out


def _share(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):.2f}" if flags else "–"


def report(records: list[dict], amb: dict[str, list[bool]], split: str) -> str:
    rows = score(records)
    lines = []
    for k in KS:
        lines += [f"Conversation set, split `{split}`, all-gold@{k}: every gold document among"
                  f" the first {k} distinct documents of the top {SEARCH_K} hits ('with"
                  " history': the offline rule's condensed question)", "", *table(rows, k), ""]
    lines += ["Ambiguity set (offline grader on the top 10 hits, then the clarify rule; split"
              " `tuned`: the rule was fixed on it, `holdout`: never tuned on): share ending"
              " with needs_input", "",
              "| split and questions | n | needs_input |", "| --- | ---: | ---: |"]
    for kind in sorted(amb, key=lambda k: (not k.startswith("tuned"), k)):
        lines.append(f"| {kind} | {len(amb[kind])} | {_share(amb[kind])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, help="the examples knowledge base")
    parser.add_argument("--split", default="all", choices=("dev", "test", "all"))
    parser.add_argument("--show", action="store_true", help="print every turn and question")
    args = parser.parse_args(argv)
    with KnowledgeBase.open(args.kb) as kb:
        rows = run_conversations(kb, args.split, args.show)
        amb = run_ambiguity(kb, args.show)
    print(report(rows, amb, args.split))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
