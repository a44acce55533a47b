"""Build the multi-hop dev set (comparison + 3-4 hop compositional chains) from HotpotQA dev.

    .venv/bin/python benchmarks/multihop_devset.py [--source ../shared/data/hotpotqa-dev] \
        [--out ../shared/data/hotpotqa-chains]

No 2WikiMultihopQA or MuSiQue split is on this machine and no package carries one, so the set
is composed from the local HotpotQA dev sample (distractor setting, 600 questions, 5,913
paragraphs; its queries carry the HotpotQA type), deterministically, over the same corpus:

- `comparison` (2 hops): HotpotQA's own comparison questions, unchanged.
- `compositional_3hop`: a bridge question names one of its gold documents (A) by title and
  reaches the other (B) from it. The name of A is replaced by a description through a third
  paragraph P of the corpus whose text names A's title: "the one the article “P” names". The
  chain is then P → A → B: the question names only P; A is reached through P's text (a
  pointer), B through A's (the bridge), as MuSiQue composes its chains through shared
  entities. P names neither B's title nor the answer, is not a gold document, and its title
  is not named by the question.
- `compositional_4hop`: the same, one step further back: P's title is replaced by a
  paragraph Q naming it ("the one named in the article that the article “Q” names"):
  Q → P → A → B.

Composing questions through each other's answers (HotpotQA question X's answer is question
Y's subject) was tried first: in this 600-question sample only one answer is the title of
another question's gold document and 14 answers appear in another question's text, mostly as
part of a longer name, so the chains go through the corpus's own paragraphs instead.

Each query keeps its HotpotQA source id (`source_id`), its `hops`, and its `split`: `tune`
when its source question is one of the first 300 of hotpotqa-dev (the half earlier placement
work was tuned on), `heldout` otherwise. OUT holds the whole set plus `tune/` and `heldout/`,
each a BEIR folder (corpus.jsonl linked to the source's, queries.jsonl, qrels/test.tsv), and
OUT.SOURCE beside it says where it came from. The set is large and derived from data under
../shared: build it there, never into the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

# RAGLOOP_BENCH_DATA: the shared data folder when the checkout is not beside it (a worktree),
# as benchmarks/common.py
DATA = Path(os.environ.get("RAGLOOP_BENCH_DATA")
            or Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()
DEFAULT_SOURCE = DATA / "hotpotqa-dev"
TUNE_HALF = 300  # the first 300 source questions: the half tuned on before (issue 27)
MIN_NAME = 4  # shorter titles match inside too many unrelated words
ONE_BACK = "the one the article “{title}” names"
TWO_BACK = "the one named in the article that the article “{title}” names"


def title_base(title: str) -> str:
    """A Wikipedia title without its disambiguation: "Drive (2011 film)" → "Drive"."""
    return re.sub(r"\s*\([^)]*\)$", "", title).strip()


def _names(text: str, name: str) -> re.Match[str] | None:
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text)


def _pointers(docs: dict[str, dict[str, Any]], target: str, question: str,
              exclude: set[str], avoid: list[str], subjects: set[str]) -> list[str]:
    """Paragraphs whose text names `target` (a title base), whose own title is not named by the
    question nor overlaps the target, and that name none of `avoid` (what would short-cut
    the chain); other questions' gold documents first, then by id."""
    out = []
    low = target.lower()
    for d in docs.values():
        name = title_base(d["title"])
        if (d["_id"] in exclude or len(name) < MIN_NAME or not _names(d["text"], target)
                or _names(question, name) or low in d["title"].lower()
                or name.lower() in low
                or any(a and a.lower() in d["text"].lower() for a in avoid)):
            continue
        out.append(d["_id"])
    return sorted(out, key=lambda i: (i not in subjects, i))


def build(source: Path) -> list[dict[str, Any]]:
    queries = [json.loads(x) for x in (source / "queries.jsonl").read_text("utf-8").splitlines()
               if x.strip()]
    docs: dict[str, dict[str, Any]] = {}
    for line in (source / "corpus.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            docs[d["_id"]] = d
    subjects = {g for q in queries for g in q["gold_doc_ids"]}
    used: set[str] = set()  # a pointer paragraph serves one chain, so chains stay distinct
    out: list[dict[str, Any]] = []
    for i, q in enumerate(queries):
        split = "tune" if i < TUNE_HALF else "heldout"
        base = {"answer": q["answer"], "source_id": q["_id"], "split": split}
        if q["type"] == "comparison":
            out.append({"_id": q["_id"], "text": q["text"], "type": "comparison", "hops": 2,
                        "gold_doc_ids": list(q["gold_doc_ids"]), **base})
            continue
        if q["type"] != "bridge" or len(q["gold_doc_ids"]) != 2:
            continue
        named = [g for g in q["gold_doc_ids"]
                 if len(title_base(docs[g]["title"])) >= MIN_NAME
                 and _names(q["text"], title_base(docs[g]["title"]))]
        if len(named) != 1:  # a chain needs one named start and one reached document
            continue
        a = named[0]
        b = next(g for g in q["gold_doc_ids"] if g != a)
        name_a, name_b = title_base(docs[a]["title"]), title_base(docs[b]["title"])
        gold = {a, b}
        ps = _pointers(docs, name_a, q["text"], gold | used, [name_b, q["answer"]], subjects)
        if not ps:
            continue
        p = ps[0]
        used.add(p)
        match = _names(q["text"], name_a)
        assert match is not None
        head, tail = q["text"][:match.start()], q["text"][match.end():]
        # quotes around the replaced name go with it
        if head.endswith(('"', "“")) and tail.startswith(('"', "”")):
            head, tail = head[:-1], tail[1:]
        out.append({"_id": f"{q['_id']}-3hop", "type": "compositional_3hop", "hops": 3,
                    "text": head + ONE_BACK.format(title=docs[p]["title"]) + tail,
                    "gold_doc_ids": [p, a, b], **base})
        # one step further back, through the first pointer paragraph that is itself named
        for p4 in ps:
            qs = _pointers(docs, title_base(docs[p4]["title"]), q["text"],
                           gold | used | {p4}, [name_a, name_b, q["answer"]], subjects)
            if qs:
                used.update((p4, qs[0]))
                out.append({"_id": f"{q['_id']}-4hop", "type": "compositional_4hop",
                            "hops": 4, "text": head + TWO_BACK.format(title=docs[qs[0]]["title"])
                            + tail, "gold_doc_ids": [qs[0], p4, a, b], **base})
                break
    return out


SOURCE_TEXT = """Multi-hop dev set (comparison and 3-4 hop compositional chains), built by
benchmarks/multihop_devset.py of the ragloop repository from ../hotpotqa-dev: the local sample
of HotpotQA dev (distractor setting; HotpotQA, Yang et al. 2018, CC BY-SA 4.0, Wikipedia
paragraphs), over the same corpus (corpus.jsonl is a link to hotpotqa-dev's).
Comparison questions are HotpotQA's own; compositional ones are HotpotQA bridge questions whose
named start document is replaced by a description through one (3 hops) or two (4 hops) further
corpus paragraphs that name it (the chain is the corpus's own title mentions, as MuSiQue
composes through shared entities). Types, hops, source ids and the tune / heldout split (by the
source question's position: 1-300 tune, 301-600 heldout) are in queries.jsonl.
Not HotpotQA test, 2WikiMultihopQA or MuSiQue: disjoint from the issue-45 held-out sets except
for sharing Wikipedia as the source of text.
"""


def write(folder: Path, rows: list[dict[str, Any]], corpus: Path) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    link = folder / "corpus.jsonl"
    if link.is_symlink() or link.exists():
        link.unlink()
    # relative, so the set still finds its corpus when the data folder is copied elsewhere
    link.symlink_to(os.path.relpath(corpus.resolve(), folder.resolve()))
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for r in rows:
            for g in r["gold_doc_ids"]:
                f.write(f"{r['_id']}\t{g}\t1\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=DEFAULT_SOURCE.parent / "hotpotqa-chains")
    args = ap.parse_args()
    rows = build(args.source)
    corpus = args.source / "corpus.jsonl"
    write(args.out, rows, corpus)
    for split in ("tune", "heldout"):
        write(args.out / split, [r for r in rows if r["split"] == split], corpus)
    counts: dict[tuple[str, str], int] = {}
    for r in rows:
        counts[(r["split"], r["type"])] = counts.get((r["split"], r["type"]), 0) + 1
    said = [f"{split:8} {kind:20} {n}" for (split, kind), n in sorted(counts.items())]
    print("\n".join(said))
    # where it came from, beside the folder as the other sets' (fastapi-docs.SOURCE)
    (args.out.parent / f"{args.out.name}.SOURCE").write_text(
        SOURCE_TEXT + f"\n{len(rows)} questions:\n" + "\n".join(said) + "\n", encoding="utf-8")
    print(f"{len(rows)} questions → {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
