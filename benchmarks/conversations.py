"""Conversations without the engine (issue 30, groundwork): does the offline follow-up method find
what a follow-up needs, and does the offline clarify rule ask back when it should?

    .venv/bin/python benchmarks/conversations.py --kb KB [--split test,holdout] [--show]
        [--base-url URL --model NAME [--provider llamacpp]]

KB is the examples knowledge base (`ragloop ingest examples/kb --kb KB`, or a copy of a
prebuilt one). For every turn of `examples/evals/conversations.jsonl` the KB's own search runs
three ways: the question as typed (no history), the question condensed with the history
(`offline/follow_up.py`; the history holds each earlier turn's searched query, its
reference answer and its search's top documents, as the engine would cite them),
and the human rewrite (the ceiling). all-gold@5: every gold document among the first 5
distinct documents of the top 10 hits; all-gold@1 too, because on a KB of 34 documents five of
them often hold the gold one even for a question typed without its subject. Unanswerable
follow-ups have no gold and are not scored here (abstaining needs the engine:
`ragloop eval examples/evals/conversations.jsonl` runs the whole engine, eval/conversations.py,
whose reader and table this script shares).

With `--base-url` and `--model` a fourth way condenses with a model: the engine's own
`Condenser` (`Engine.make_condenser`: agent/llm_condense.py, one schema-constrained JSON
decision, the offline rule its fallback) through the project's model client
(`make_chat_model("PROVIDER:NAME")`, default provider `llamacpp`, the response_format form
llama.cpp's servers take), with its own history (the model's condensed questions). Per split
it reports each decision: schema-valid (its last reply parses as the reply schema; and the
first, before any retry), fell back to the rule, follow-ups it called a new topic or
standalone and topic switches it called a follow-up (against the set's turn types; the rule's
beside it), and the mean seconds per decision. benchmarks/with_llama_server.py runs it against
the tests' real llama.cpp server.

For `examples/evals/ambiguity.jsonl`: search, grade with the offline grader (the engine's
search-and-grade step), then `offline/clarify.py` on the kept passages; the share that would
end with needs_input, for the ambiguous and the single-reading halves.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragloop.agent.engine import Components, Engine
from ragloop.agent.jsonparse import BadModelJSON, parse_json_object
from ragloop.agent.llm_condense import CondenseReply
from ragloop.agent.search_grade import search_and_grade
from ragloop.agent.tools import Toolbox
from ragloop.core.conversation import Turn, TurnKind
from ragloop.core.decisions import Condenser
from ragloop.core.errors import UserError
from ragloop.core.types import Hit
from ragloop.eval.conversations import (
    ALL_FOLLOW_UPS,
    FOLLOW_UPS,
    KS,
    UNANSWERABLE,
    Conversation,
    load_conversations,
    score,
    table,
)
from ragloop.eval.metrics import distinct, share
from ragloop.kb import KnowledgeBase
from ragloop.language.text import reading
from ragloop.language.vocabulary import vocabulary
from ragloop.llm import make_chat_model
from ragloop.llm.base import ChatModel, ChatResponse, ChatStream, Message
from ragloop.offline.clarify import clarify
from ragloop.offline.follow_up import RetrievalCondenser
from ragloop.offline.grader import LocalGrader
from ragloop.retrieval.fusion import fused_pages

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = ROOT / "examples" / "evals" / "conversations.jsonl"
AMBIGUITY = ROOT / "examples" / "evals" / "ambiguity.jsonl"
SEARCH_K = 10  # hits searched per query
CITED = 2  # documents of a turn a later turn sees as cited
PROVIDERS = ("llamacpp", "openai", "ollama")
# the set's turn types a condenser should call a follow-up (it refers back) or a new topic
REFERS_BACK = (*FOLLOW_UPS, UNANSWERABLE)
SWITCH = "topic_switch"


def _read(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _docs(hits: list[Hit]) -> list[str]:
    return distinct(h.doc_id for h in hits)


def _cited(hits: list[Hit]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for h in hits:
        if h.doc_id not in seen and len(seen) < CITED:
            seen[h.doc_id] = h.doc_id
    return tuple(seen)


class Recording:
    """A chat model that keeps the replies it returned since `start()`: one condense
    decision's calls (the first reply, a retry), read back to tell schema-valid from not."""

    def __init__(self, inner: ChatModel) -> None:
        self._inner = inner
        self.name = inner.name
        self.traits = inner.traits
        self.replies: list[ChatResponse] = []

    def start(self) -> None:
        self.replies = []

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        reply = self._inner.chat(messages, **options)
        self.replies.append(reply)
        return reply

    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        reply = yield from self._inner.stream(messages, **options)
        self.replies.append(reply)
        return reply


def _valid(reply: ChatResponse) -> bool:
    try:
        parse_json_object(reply.text, CondenseReply)
    except BadModelJSON:
        return False
    return True


@dataclass
class ModelWay:
    """The model's condenser and what each of its decisions did."""

    condenser: Condenser
    chat: Recording
    decisions: list[dict] = field(default_factory=list)

    def condense(self, history: Sequence[Turn], question: str, split: str,
                 kind: str, rule_kind: TurnKind) -> str:
        self.chat.start()
        began = time.perf_counter()
        c = self.condenser.condense(history, question)
        seconds = time.perf_counter() - began
        replies = self.chat.replies
        self.decisions.append({
            "split": split, "type": kind, "kind": str(c.kind), "rule_kind": str(rule_kind),
            "seconds": seconds, "calls": len(replies),
            "first_valid": bool(replies) and _valid(replies[0]),
            "valid": bool(replies) and _valid(replies[-1]),
            "fallback": c.fell_back,
            "typed": question, "standalone": c.question,
            "replies": [[r.text, str(r.finish)] for r in replies]})
        return c.question


def model_way(kb: KnowledgeBase, provider: str, name: str, base_url: str) -> ModelWay:
    """The condenser a run of `Engine` gets for this model (the offline rule its fallback)."""
    settings = kb.settings.with_(model=f"{provider}:{name}", base_url=base_url)
    chat = make_chat_model(settings.model, settings)
    assert chat is not None
    recording = Recording(chat)
    engine = Engine(kb, settings, chat=recording)
    return ModelWay(engine.make_condenser(Components.from_settings(settings, "pipeline",
                                                                   recording)), recording)


def chosen(conversations: list[Conversation], splits: str) -> list[Conversation]:
    """The conversations of the comma-separated `splits` ("all": every one); an unknown
    split name is an error naming the file's splits."""
    if splits == "all":
        return conversations
    names = [s.strip() for s in splits.split(",") if s.strip()]
    known = sorted({c.split for c in conversations})
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UserError(f"--split {splits!r}: no such split in {CONVERSATIONS.name}"
                        f" (its splits: {', '.join(known)}, or all)")
    return [c for c in conversations if c.split in names]


def run_conversations(kb: KnowledgeBase, conversations: list[Conversation], show: bool,
                      model: ModelWay | None = None, switches: bool = False) -> list[dict]:
    """One record per (turn, way) in eval/conversations.py's shape; the "history" way is the
    offline rule's condensed question's search, "model" the model condenser's."""
    condenser = RetrievalCondenser(kb, reading(kb.language), switches=switches)
    records: list[dict] = []
    for conv in conversations:
        history: list[Turn] = []
        model_history: list[Turn] = []
        for i, t in enumerate(conv.turns):
            c = condenser.condense(history, t.q)
            queries = {"typed": t.q, "history": c.question, "rewrite": t.rewrite or t.q}
            if model is not None:
                queries["model"] = (model.condense(model_history, t.q, conv.split, t.type,
                                                   c.kind) if model_history else t.q)
            hits = {way: kb.search(q, SEARCH_K) for way, q in queries.items()}
            if c.queries or c.prior:  # the offline follow-up's searches, fused as the engine's
                hits["history"] = fused_pages([kb.search(q, SEARCH_K) for q in c.searches],
                                              c.prior)
            if t.gold_docs:  # unanswerable turns: no gold, not scored here
                records += [{"path": "search", "split": conv.split, "type": t.type,
                             "conversation": conv.id, "turn": i, "way": way,
                             "docs": _docs(hits[way]), "gold": t.gold_docs} for way in hits]
            if show:
                print(f"{conv.id} {t.type:12} {c.kind:10} {t.q!r} -> {c.question!r}")
                if model is not None and model_history:
                    d = model.decisions[-1]
                    print(f"{'':4}model {d['kind']:10} {'fallback ' if d['fallback'] else ''}"
                          f"{d['seconds']:.1f}s -> {queries['model']!r}")
            history.append(Turn(t.q, c.question, t.answer or "", _cited(hits["history"])))
            if model is not None:
                model_history.append(Turn(t.q, queries["model"], t.answer or "",
                                          _cited(hits["model"])))
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


def _share(flags: Sequence[bool]) -> str:
    return f"{sum(flags) / len(flags):.2f}" if flags else "–"


def _of(flags: Sequence[bool]) -> str:
    return f"{_share(flags)} ({sum(flags)}/{len(flags)})" if flags else "–"


def model_table(records: list[dict], k: int) -> list[str]:
    """Per split and turn type: all-gold@k typed, with the offline rule, with the model
    condenser, with the human rewrite."""
    ways = ("typed", "history", "model", "rewrite")
    lines = ["| split | turn type | turns | no history (typed) | offline rule | model"
             " | human rewrite |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for (_, split, kind), flags in sorted(score(records).items(),
                                          key=lambda x: (x[0][1], x[0][2] != ALL_FOLLOW_UPS,
                                                         x[0][2])):
        cells = [share(flags.get(f"{w}@{k}", [])) for w in ways]
        if cells[0] is None:
            continue
        lines.append(f"| {split} | {kind} | {len(flags[f'typed@{k}'])} | "
                     + " | ".join("–" if x is None else f"{x:.2f}" for x in cells) + " |")
    return lines


def decision_table(decisions: list[dict]) -> list[str]:
    by_split: dict[str, list[dict]] = defaultdict(list)
    for d in decisions:
        by_split[d["split"]].append(d)
    lines = ["| split | decisions | schema-valid | valid at the first reply | fell back to"
             " the rule | follow-up not called one: model / rule | topic switch called a"
             " follow-up: model / rule | mean s per decision |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for split in sorted(by_split):
        ds = by_split[split]
        back = [d for d in ds if d["type"] in REFERS_BACK]
        switch = [d for d in ds if d["type"] == SWITCH]
        missed = ([d["kind"] != TurnKind.FOLLOW_UP for d in back],
                  [d["rule_kind"] != TurnKind.FOLLOW_UP for d in back])
        wrong = ([d["kind"] == TurnKind.FOLLOW_UP for d in switch],
                 [d["rule_kind"] == TurnKind.FOLLOW_UP for d in switch])
        mean = sum(d["seconds"] for d in ds) / len(ds)
        lines.append(f"| {split} | {len(ds)} | {_of([d['valid'] for d in ds])}"
                     f" | {_of([d['first_valid'] for d in ds])}"
                     f" | {_of([d['fallback'] for d in ds])}"
                     f" | {_of(missed[0])} / {_of(missed[1])}"
                     f" | {_of(wrong[0])} / {_of(wrong[1])} | {mean:.1f} |")
    return lines


def report(records: list[dict], amb: dict[str, list[bool]], split: str,
           model: ModelWay | None = None, model_name: str = "") -> str:
    lines = []
    if model is None:
        rows = score(records)
        for k in KS:
            lines += [f"Conversation set, split `{split}`, all-gold@{k}: every gold document"
                      f" among the first {k} distinct documents of the top {SEARCH_K} hits"
                      " ('with history': the offline rule's condensed question)", "",
                      *table(rows, k), ""]
    else:
        for k in KS:
            lines += [f"Conversation set, split `{split}`, all-gold@{k} (the first {k} distinct"
                      f" documents of the top {SEARCH_K} hits), condensed by the offline rule"
                      f" and by `{model_name}` (untuned)", "", *model_table(records, k), ""]
        lines += [f"The model's condense decisions (`{model_name}`), one per turn after the"
                  " first", "", *decision_table(model.decisions), ""]
    if amb:
        lines += ["Ambiguity set (offline grader on the top 10 hits, then the clarify rule;"
                  " split `tuned`: the rule was fixed on it, `holdout`: never tuned on): share"
                  " ending with needs_input", "",
                  "| split and questions | n | needs_input |", "| --- | ---: | ---: |"]
        for kind in sorted(amb, key=lambda k: (not k.startswith("tuned"), k)):
            lines.append(f"| {kind} | {len(amb[kind])} | {_share(amb[kind])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, help="the examples knowledge base")
    parser.add_argument("--split", default="all",
                        help="the conversation set's splits to run, comma-separated (dev,"
                             " test, holdout, …; default all)")
    parser.add_argument("--show", action="store_true", help="print every turn and question")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (…/v1): condense"
                                           " with its model too")
    parser.add_argument("--model", help="the model's name on that server")
    parser.add_argument("--provider", default="llamacpp", choices=PROVIDERS,
                        help="how ragloop talks to the server (default llamacpp)")
    parser.add_argument("--no-ambiguity", action="store_true",
                        help="skip the ambiguity set")
    parser.add_argument("--json", type=Path, help="write every model decision here")
    parser.add_argument("--switches", action="store_true",
                        help="the offline follow-up decides topic switches (off by default:"
                             " offline/follow_up.py)")
    args = parser.parse_args(argv)
    if bool(args.base_url) != bool(args.model):
        parser.error("--base-url and --model go together")
    try:
        conversations = chosen(load_conversations(CONVERSATIONS), args.split)
    except UserError as exc:
        parser.error(str(exc))
    with KnowledgeBase.open(args.kb) as kb:
        model = model_way(kb, args.provider, args.model, args.base_url) if args.model else None
        rows = run_conversations(kb, conversations, args.show, model, args.switches)
        amb = {} if args.no_ambiguity else run_ambiguity(kb, args.show)
    name = f"{args.provider}:{args.model}"
    if model is not None and args.json:
        args.json.write_text("".join(json.dumps(d) + "\n" for d in model.decisions))
    print(report(rows, amb, args.split, model, name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
