"""The conversation set (`examples/evals/conversations.jsonl`): reading it, scoring each turn
three ways, and the per-turn-type table (`ragloop eval` and benchmarks/conversations.py).

A line is one conversation: `{"id", "split", "turns": [{"q", "type", "form", "gold_doc",
"answer", "rewrite"}]}`; turn types `first`, `follow_up`, `two_back` (refers two turns
back), `topic_switch` and `unanswerable` (a follow-up the knowledge base cannot answer: no
gold). Each turn is asked four ways:

- `typed`: as typed, on its own (no history);
- `naive`: the previous turn's question and this one joined with a space, on its own (the
  one-line baseline a follow-up method has to beat; the first turn as typed);
- `history`: as typed, as the next turn of one conversation (made standalone from the earlier
  turns before searching: what a user gets);
- `rewrite`: the human standalone rewrite (the ceiling; the question itself when it has none).

all-gold@k: every gold document among the first k distinct documents the turn's run gathered
(its evidence, in order: what the normal eval's recall@k reads). Abstention: the share of
unanswerable turns whose run declined (`metrics.abstained`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloop.core.errors import UserError
from ragloop.eval.datasets import EvalQuestion, read_jsonl, resolve_doc_name
from ragloop.eval.metrics import abstained, recall_all, share

if TYPE_CHECKING:
    from ragloop.agent.engine import Engine
    from ragloop.kb import KnowledgeBase

WAYS = ("typed", "naive", "history", "rewrite")
WAY_TITLES = {"typed": "no history (typed)", "naive": "naive join",
              "history": "engine (history)", "rewrite": "human rewrite"}
KS = (5, 1)  # all-gold@5 (the figure) and @1 (which tells the three apart on 34 docs)
FOLLOW_UPS = ("follow_up", "two_back")
ALL_FOLLOW_UPS = "all follow-ups"
UNANSWERABLE = "unanswerable"


@dataclass
class ConversationTurn:
    q: str
    type: str
    gold_docs: list[str]
    rewrite: str | None = None
    answer: str | None = None
    form: str | None = None


@dataclass
class Conversation:
    id: str
    split: str
    turns: list[ConversationTurn] = field(default_factory=list)


def is_conversation_set(path: Path) -> bool:
    """A .jsonl file whose first object has "turns"."""
    if path.is_dir() or path.suffix != ".jsonl":
        return False
    for _, obj in read_jsonl(path):
        return "turns" in obj
    return False


def load_conversations(path: Path) -> list[Conversation]:
    out: list[Conversation] = []
    lines: dict[str, int] = {}  # id -> its line: records and reports key turns by the id
    for n, obj in read_jsonl(path):
        turns = obj.get("turns")
        if not isinstance(turns, list) or not turns:
            raise UserError(f"{path}:{n}: a conversation needs a non-empty \"turns\" list")
        conv = Conversation(str(obj.get("id") or f"line{n}"), str(obj.get("split") or "all"))
        if conv.id in lines:
            raise UserError(f"{path}:{n}: the conversation id {conv.id!r} is also on line"
                            f" {lines[conv.id]}; each conversation needs an id of its own")
        lines[conv.id] = n
        for i, t in enumerate(turns, start=1):
            if not isinstance(t, dict) or not str(t.get("q") or "").strip():
                raise UserError(f"{path}:{n}: turn {i} needs a \"q\"")
            gold = t.get("gold_doc") or []
            conv.turns.append(ConversationTurn(
                q=str(t["q"]), type=str(t.get("type") or "follow_up"),
                gold_docs=[gold] if isinstance(gold, str) else [str(g) for g in gold],
                rewrite=t.get("rewrite") or None, answer=t.get("answer") or None,
                form=t.get("form")))
        out.append(conv)
    return out


def resolve(conversations: list[Conversation], doc_ids: list[str]) -> list[str]:
    """Gold names as the knowledge base's doc ids; the names that matched none."""
    misses: list[str] = []
    for conv in conversations:
        for t in conv.turns:
            found = [resolve_doc_name(g, doc_ids) for g in t.gold_docs]
            misses += [g for g, f in zip(t.gold_docs, found, strict=True) if f is None]
            t.gold_docs = [f or g for g, f in zip(t.gold_docs, found, strict=True)]
    return misses


# -- running through the engine --------------------------------------------------------------

def _asked(conv: Conversation, i: int, t: ConversationTurn, way: str) -> str:
    if way == "rewrite":
        return t.rewrite or t.q
    if way == "naive" and i > 0:
        return f"{conv.turns[i - 1].q} {t.q}"
    return t.q


def _question(conv: Conversation, i: int, t: ConversationTurn, way: str) -> EvalQuestion:
    return EvalQuestion(id=f"{conv.id}.{i}", q=_asked(conv, i, t, way),
                        type=t.type, gold_docs=list(t.gold_docs), answer=t.answer,
                        answerable=t.type != UNANSWERABLE)


def run_conversations(engine: Engine, conversations: Sequence[Conversation], paths: list[str],
                      record: Callable[..., dict[str, Any]],
                      progress: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Every turn of every conversation, each way, on each path (`eval.runner.PATHS`); one
    record per (turn, way, path): `record(question, path, result, grades)` (the normal eval's
    `make_record`) plus the conversation's id, split, turn, way and the standalone question."""
    from ragloop.eval.runner import PATHS

    out: list[dict[str, Any]] = []
    for path in paths:
        for conv in conversations:
            chat = engine.conversation()
            for i, t in enumerate(conv.turns):
                for way in WAYS:
                    q = _question(conv, i, t, way)
                    ask = chat.ask if way == "history" else engine.ask
                    result = ask(q.q, route=PATHS[path])
                    out.append({**record(q, path, result, []), "conversation": conv.id,
                                "split": conv.split, "turn": i, "way": way,
                                "standalone": result.standalone})
                    if progress is not None:
                        progress()
    return out


# -- the table ---------------------------------------------------------------------------------

Flags = dict[str, list[bool]]  # "history@5" -> one flag per turn


def score(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], Flags]:
    """(path, split, turn type) -> flags per way and k; unanswerable turns score abstention
    (`way@abstain`), the others all-gold@k. An "all follow-ups" group adds follow_up and
    two_back together."""
    rows: dict[tuple[str, str, str], Flags] = defaultdict(lambda: defaultdict(list))
    for r in records:
        groups = [r["type"]] + ([ALL_FOLLOW_UPS] if r["type"] in FOLLOW_UPS else [])
        for group in groups:
            flags = rows[(r.get("path", ""), r["split"], group)]
            if r["type"] == UNANSWERABLE:
                flags[f"{r['way']}@abstain"].append(abstained(r))
            else:
                for k in KS:
                    flags[f"{r['way']}@{k}"].append(recall_all(r["docs"], r["gold"], k))
    return rows


def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def table(rows: dict[tuple[str, str, str], Flags], k: int | str) -> list[str]:
    """One markdown table: per (path, split, turn type) the share typed, joined naively, with
    history (the engine), with the rewrite, then history / rewrite and history − typed."""
    lines = ["| path | split | turn type | turns | typed | naive join | engine (history)"
             " | human rewrite | history / rewrite | history − typed |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    order = {"test": 0, "dev": 1}
    for (path, split, kind), flags in sorted(rows.items(),
                                             key=lambda x: (x[0][0], order.get(x[0][1], 2),
                                                            x[0][2] != ALL_FOLLOW_UPS, x[0][2])):
        typed, naive, hist, rew = (share(flags.get(f"{w}@{k}", [])) for w in WAYS)
        if hist is None:
            continue
        ratio = hist / rew if rew else None
        diff = hist - typed if typed is not None else None
        n = len(flags[f"history@{k}"])
        lines.append(f"| {path} | {split} | {kind} | {n} | {_fmt(typed)} | {_fmt(naive)}"
                     f" | {_fmt(hist)} | {_fmt(rew)} | {_fmt(ratio)} | {_fmt(diff, True)} |")
    return lines


def markdown(records: Sequence[dict[str, Any]], source: str) -> str:
    rows = score(records)
    turns = {(r["conversation"], r["turn"]) for r in records}
    out = [f"Conversation set `{source}`: {len({c for c, _ in turns})} conversations,"
           f" {len(turns)} turns, each asked {len(WAYS)} ways"
           f" ({', '.join(WAY_TITLES.values())}) on each path.", ""]
    for k in KS:
        out += [f"all-gold@{k}: every gold document among the first {k} distinct documents"
                " of the turn's evidence", "", *table(rows, k), ""]
    out += ["Abstention on the follow-ups the knowledge base cannot answer (share declined)",
            "", *table({key: v for key, v in rows.items() if key[2] == UNANSWERABLE},
                       "abstain")]
    return "\n".join(out)


def evaluate(kb: KnowledgeBase, engine: Engine, path: Path, paths: list[str], out: Path,
             limit: int | None = None,
             progress: Callable[[], None] | None = None) -> tuple[str, list[str]]:
    """Run the conversation set at `path` (its first `limit` conversations) on `paths`;
    OUT/results.jsonl (one record per turn, way and path) and OUT/report.md are written
    afresh. Returns the report and the gold names no document matched."""
    from ragloop.eval.runner import make_record

    conversations = load_conversations(path)[:limit]
    misses = resolve(conversations, [d.doc_id for d in kb.documents()])
    records = run_conversations(engine, conversations, paths, make_record, progress)
    report = markdown(records, path.name)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    (out / "report.md").write_text(report + "\n", encoding="utf-8")
    return report, misses
