"""Issue 40 pt 2: the offline follow-up options side by side, on the KB's own search (a
retrieval proxy of the engine's first search; the engine itself: `ragloop eval SET --paths
single`).

    .venv/bin/python benchmarks/follow_up_options.py --kb KB --set SET.jsonl
        [--split dev,test] [--conversations fc01,fc02,…]

Per follow-up (and topic switch), all gold documents among the first 5 distinct documents of
each way's ranking:

- typed / naive (the previous question and this one joined) / rewrite (the ceiling);
- joined: the follow-up + what the previous turn searched (offline/follow_up.py's query),
  with no topic-switch test;
- fused: reciprocal rank fusion of the typed list and the joined list;
- fused+prior: the same, and the previous turn's cited documents as a third ranked list;
- topic+prior: fused+prior carrying the previous turn's typed question when that turn left
  the conversation's documents;
- switch+prior (offline/follow_up.py with `switches=True`, off by default): fused+prior,
  and a topic switch
  (`follow_up.switched`: the typed question's BM25 and vector searches share one of their
  best 3 documents, and the conversation's documents, cited and found by the previous turn's
  searches, are in neither's best 10) searched as typed.

all-gold@5 and @1 (the first document) per group.

A turn's cited documents are the top `CITED` of what its way searched (as
benchmarks/conversations.py); each way keeps its own history.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from ragloop.core.conversation import Turn
from ragloop.eval.conversations import FOLLOW_UPS, load_conversations, resolve
from ragloop.eval.metrics import distinct, recall_all
from ragloop.kb import KnowledgeBase
from ragloop.offline.follow_up import (
    conversation_documents,
    joined,
    switched,
    talked_about,
)

SEARCH_K = 10
CITED = 2
RRF_K = 60
AT = 5


def ranking(kb: KnowledgeBase, query: str) -> list[str]:
    return distinct(h.doc_id for h in kb.search(query, SEARCH_K))


def fused(lists: list[list[str]]) -> list[str]:
    score: dict[str, float] = defaultdict(float)
    for ranked in lists:
        for r, d in enumerate(ranked):
            score[d] += 1 / (RRF_K + r + 1)
    return sorted(score, key=lambda d: -score[d])


def carried_topic(history: list[Turn]) -> str:
    """The option under test: the previous turn's typed question, and what it carried only
    when it stayed on the conversation's documents (what it cited shares a document with what
    the turn before it cited); a turn whose citations left them started a topic of its own."""
    last = history[-1]
    if len(history) < 2 or not set(last.cited_docs) & set(history[-2].cited_docs):
        return last.question
    return last.searched


def way(kb: KnowledgeBase, name: str, history: list[Turn], q: str) -> tuple[list[str], str]:
    """The way's ranking of the turn and what it carries as searched."""
    if not history:
        return ranking(kb, q), q
    if name == "switch+prior" and switched(kb, q, talked_about(kb, history)):
        return ranking(kb, q), q
    if name.startswith("topic"):
        previous = carried_topic(history)
        query = q if previous in q else f"{q} {previous}"
    else:
        query = joined(q, history[-1])
    if name == "joined":
        return ranking(kb, query), query
    lists = [ranking(kb, q), ranking(kb, query)]
    if name.endswith("+prior"):
        lists.append(list(conversation_documents(history)))
    return fused(lists), query


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kb", required=True)
    p.add_argument("--set", required=True, type=Path)
    p.add_argument("--split", default="")
    p.add_argument("--conversations", default="")
    a = p.parse_args(argv)
    convs = load_conversations(a.set)
    if a.split:
        convs = [c for c in convs if c.split in a.split.split(",")]
    if a.conversations:
        convs = [c for c in convs if c.id in a.conversations.split(",")]
    ways = ["joined", "fused", "fused+prior", "topic+prior", "switch+prior"]
    flags: dict[tuple[str, str], list[bool]] = defaultdict(list)
    with KnowledgeBase.open(a.kb) as kb:
        resolve(convs, [d.doc_id for d in kb.documents()])
        for conv in convs:
            hist: dict[str, list[Turn]] = {w: [] for w in ways}
            for i, t in enumerate(conv.turns):
                group = "follow-ups" if t.type in FOLLOW_UPS else t.type
                base = {"typed": t.q, "rewrite": t.rewrite or t.q,
                        "naive": f"{conv.turns[i - 1].q} {t.q}" if i else t.q}
                for n, q in base.items():
                    if t.gold_docs and i:
                        r = ranking(kb, q)
                        flags[(group, n)].append(recall_all(r, t.gold_docs, AT))
                        flags[(group + "@1", n)].append(recall_all(r, t.gold_docs, 1))
                for w in ways:
                    docs, searched = way(kb, w, hist[w], t.q)
                    if t.gold_docs and i:
                        flags[(group, w)].append(recall_all(docs, t.gold_docs, AT))
                        flags[(group + "@1", w)].append(recall_all(docs, t.gold_docs, 1))
                    hist[w].append(Turn(t.q, searched, "", tuple(docs[:CITED])))
    groups = sorted({g for g, _ in flags})
    names = list(dict.fromkeys(n for _, n in flags))
    print("| way | " + " | ".join(f"{g} (n={len(flags[(g, 'typed')])})" for g in groups) + " |")
    print("| --- |" + " ---: |" * len(groups))
    for n in names:
        cells = [flags[(g, n)] for g in groups]
        print(f"| {n} | " + " | ".join(f"{sum(c) / len(c):.2f}" if c else "–" for c in cells)
              + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
