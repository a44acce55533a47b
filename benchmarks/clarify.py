"""Asking the user back, measured through the engine (issues 30 and 40.5): every question is
asked offline with `Engine.ask` (default route and driver, as `ragloop ask` runs it) and the
run's status read: the share that ended with `needs_input`.

    .venv/bin/python benchmarks/clarify.py --kb KB [--set FILE] [--show]
    .venv/bin/python benchmarks/clarify.py --kb KB --beir DIR [--limit 100] [--docs 1000]

An ambiguity set (`--set`, default `examples/evals/ambiguity.jsonl`; the FastAPI one is
`examples/evals/fastapi_ambiguity.jsonl`) gives per split and type the share asked back, and
for the ambiguous questions asked, the share whose options all lead to pages the set lists
for its readings (each option's evidence documents among its `gold_doc`: a wrong option is
worse than none). KB is a knowledge base of the set's documents (runs are written to it: use
a copy).

`--beir DIR` asks the first `--limit` queries of a BEIR folder, every one a question with one
reading, so any ask-back is a false one. An empty KB is first filled with a bounded sample of
the corpus: those queries' gold documents, then the corpus's first documents up to `--docs`.
Set RAGLOOP_CLARIFY=off to see the same runs with asking back switched off.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ragloop.agent.engine import Engine
from ragloop.agent.run import RunResult
from ragloop.core.config import Settings
from ragloop.eval.datasets import iter_corpus, load_beir
from ragloop.kb import KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]
AMBIGUITY = ROOT / "examples" / "evals" / "ambiguity.jsonl"
Rows = dict[tuple[str, str], dict[str, list[bool]]]


def _read(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _asked(result: RunResult) -> tuple[bool, dict]:
    c = result.clarification or {}
    return result.status == "needs_input", c


def _options_right(c: dict, gold: list[str]) -> bool:
    """Every option leads to a page the set lists for one of the readings."""
    evidence = c.get("evidence") or {}
    return bool(evidence) and all(set(ids) & set(gold) for ids in evidence.values())


def run_set(engine: Engine, path: Path, show: bool) -> Rows:
    rows: Rows = defaultdict(lambda: defaultdict(list))
    for q in _read(path):
        asked, c = _asked(engine.ask(q["q"]))
        row = rows[(q.get("split", "tuned"), q["type"])]
        row["needs_input"].append(asked)
        gold = q["gold_doc"] if isinstance(q["gold_doc"], list) else [q["gold_doc"]]
        if asked and q["type"] == "ambiguous":
            row["options_right"].append(_options_right(c, gold))
        if show:
            print(f"{q['id']} {q['type']:9} {'ASKED' if asked else '-':5} {q['q']!r}"
                  f" -> {c.get('options') or ''}", flush=True)
    return rows


def fill_beir(kb: KnowledgeBase, folder: Path, limit: int, docs: int) -> None:
    """A bounded sample of the corpus: the asked queries' gold documents, then the first
    others, `docs` in all (nothing when the KB holds documents already)."""
    if kb.store.content_hashes():
        return
    gold = {g for q in load_beir(folder).questions[:limit] for g in q.gold_docs}
    picked = [d for d in iter_corpus(folder / "corpus.jsonl") if d.doc_id in gold]
    for d in iter_corpus(folder / "corpus.jsonl"):
        if len(picked) >= max(docs, len(gold)):
            break
        if d.doc_id not in gold:
            picked.append(d)
    kb.ingest_documents(picked, label="ingest sample")


def run_beir(engine: Engine, folder: Path, limit: int, show: bool) -> Rows:
    rows: Rows = defaultdict(lambda: defaultdict(list))
    for q in load_beir(folder).questions[:limit]:
        asked, c = _asked(engine.ask(q.q))
        rows[(folder.name, "single")]["needs_input"].append(asked)
        if show or asked:
            print(f"{q.id} {'ASKED' if asked else '-':5} {q.q!r} -> {c.get('options') or ''}",
                  flush=True)
    return rows


def _share(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):.2f} ({sum(flags)}/{len(flags)})" if flags else "–"


def report(rows: Rows) -> str:
    lines = ["| split | questions | n | needs_input | options lead to listed pages (if asked) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for (split, kind), r in sorted(rows.items()):
        right = _share(r["options_right"]) if kind == "ambiguous" else "–"
        lines.append(f"| {split} | {kind} | {len(r['needs_input'])} | {_share(r['needs_input'])}"
                     f" | {right} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, help="a knowledge base (a copy: runs are written)")
    parser.add_argument("--set", type=Path, default=AMBIGUITY, help="an ambiguity set (jsonl)")
    parser.add_argument("--beir", type=Path, help="a BEIR folder: its queries, one reading each")
    parser.add_argument("--limit", type=int, default=100, help="BEIR queries asked")
    parser.add_argument("--docs", type=int, default=1000, help="BEIR corpus sample size")
    parser.add_argument("--show", action="store_true", help="print every question's run")
    args = parser.parse_args(argv)
    settings = Settings.from_env().with_(kb=Path(args.kb))
    with KnowledgeBase.open(args.kb, settings) as kb:
        if args.beir:
            fill_beir(kb, args.beir, args.limit, args.docs)
        engine = Engine(kb, settings, kb.backend.runs, source="eval")
        rows = (run_beir(engine, args.beir, args.limit, args.show) if args.beir
                else run_set(engine, args.set, args.show))
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
