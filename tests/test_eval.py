"""The eval: datasets (seed jsonl, BEIR), metrics arithmetic, the runner (scripted model over a
real knowledge base), resumability, the report files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from graders import KeepsAll

from ragloop.agent.run import RunResult
from ragloop.agent.template import SINGLE_DEPTH_PER_DOC, top_documents
from ragloop.agent.tools_driver import FIRST_SEARCH_NOTE
from ragloop.core.answer_stream import in_pieces
from ragloop.core.decisions import Draft, Grade, Route
from ragloop.core.errors import UserError
from ragloop.core.events import event_from
from ragloop.core.types import Hit, RunStatus, Usage
from ragloop.eval.answer_judge import judge_answer
from ragloop.eval.datasets import (
    load_dataset,
    resolve_doc_name,
    resolve_gold,
)
from ragloop.eval.metrics import (
    abstained,
    answer_words,
    build_report,
    diagnose,
    exact_match,
    first_sentence,
    normalize_answer,
    percentile,
    summarize,
    token_f1,
)
from ragloop.eval.report import answer_warnings, markdown, write_reports
from ragloop.eval.runner import EvalOptions, grade_summary, parse_paths, run_eval
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import ChatResponse, ToolCall
from ragloop.llm.scripted import ScriptedChat

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

A, B, C, D = "a.md", "b.md", "c.md", "d.md"


def rec(path, qtype, gold, docs, *, answer="", reference=None, status="answered", steps=2,
        latency=1.0, tokens=0, cost=0.0, grades=(), answerable=True, route=None, qid=None,
        confirmed=None):
    return {"qid": qid or f"{path}-{qtype}-{len(docs)}", "path": path, "type": qtype,
            "gold": list(gold), "docs": list(docs),
            "confirmed_docs": list(docs if confirmed is None else confirmed),
            "answer": answer, "reference": reference,
            "status": status, "steps": steps, "latency_s": latency, "tokens": tokens,
            "cost_usd": cost, "grades": list(grades), "answerable": answerable,
            "route": route or ("single" if path == "single" else "agent")}


@pytest.fixture
def records():
    return [
        rec("single", "simple", [A], [B, A, C], answer="It is IP67 [1]", reference="IP67",
            latency=1.0, tokens=100, cost=0.01),
        rec("single", "multi_hop", [A, C], [C, B, A], answer="The CFO",
            reference="Priya Raman", latency=3.0, tokens=200, cost=0.02),
        rec("single", "unanswerable", [], [B], answer="The knowledge base does not say.",
            answerable=False, latency=2.0, tokens=300, cost=0.03),
        rec("agent", "simple", [A], [A], answer="IP67.", reference="IP67", steps=3,
            latency=4.0, tokens=1000, cost=0.1,
            grades=[{"chunks": 4, "kept": 2, "seen_docs": [A, B, A, C], "kept_docs": [A, B]}]),
        rec("agent", "multi_hop", [A, C], [B, D, A, C], answer="Priya Raman is CFO [1]",
            reference="Priya Raman", status="truncated", steps=6, latency=10.0, tokens=3000,
            cost=0.3, confirmed=[B, D, A],  # C: a nearest passage, unconfirmed
            grades=[{"chunks": 5, "kept": 1, "seen_docs": [C, C, B, A, D], "kept_docs": [C]},
                    {"chunks": 3, "kept": 3, "seen_docs": None, "kept_docs": None}]),
        rec("agent", "unanswerable", [], [B], answer="Tom Becker [1]", answerable=False,
            latency=1.0, tokens=500, cost=0.05,
            grades=[{"chunks": 2, "kept": 0, "seen_docs": [B, B], "kept_docs": []}]),
        rec("router", "multi_hop", [A], [A], route="agent"),
        rec("router", "simple", [A], [A], route="agent"),
        rec("router", "unanswerable", [], [], route="single", answerable=False),
        rec("router", "section_ref", [A], [A], route="single"),
        rec("router", "simple", [A], [], route="out_of_scope"),
    ]


# -- metrics on hand-made records ------------------------------------------------------------

def test_single_path_figures(records) -> None:
    s = summarize([r for r in records if r["path"] == "single"], k=2)
    assert s["n"] == 3 and s["retrieval_n"] == 2
    assert s["recall@2"] == 1.0  # [B, A] has A; [C, B] has C
    assert s["all_gold@2"] == 0.5  # the multi-hop one misses A in its top 2
    assert s["mrr"] == pytest.approx((0.5 + 1.0) / 2)
    assert s["recall_uncapped"] == 1.0 and s["all_gold_uncapped"] == 1.0
    assert s["all_gold@2_confirmed"] == s["all_gold@2"]  # nothing unconfirmed
    assert s["docs_mean"] == 3.0
    assert s["answer_em"] == 0.5 and s["answer_n"] == 2
    assert s["answer_f1"] == pytest.approx((0.5 + 0.0) / 2)  # "it is ip67" vs "ip67": P 1/3
    assert s["abstention"] == 1.0 and s["unanswerable_n"] == 1
    assert s["false_abstention"] == 0.0
    assert s["latency_mean_s"] == pytest.approx(2.0)
    assert s["latency_p95_s"] == 3.0
    assert s["tokens_mean"] == 200.0
    assert s["cost_mean"] == pytest.approx(0.02)
    assert s["steps_mean"] == 2.0 and s["truncated_pct"] == 0.0
    assert s["discarded_pct"] is None and s["grader_precision"] is None
    assert s["router_accuracy"] is None and s["router_n"] == 0


def test_agent_path_is_capped_at_k_and_grader_figures(records) -> None:
    agent = [r for r in records if r["path"] == "agent"]
    s = summarize(agent, k=2)
    assert s["recall@2"] == 0.5  # [B, D] of [B, D, A, C] has no gold
    assert s["all_gold@2"] == 0.5
    assert s["mrr"] == pytest.approx((1.0 + 0.0) / 2)
    assert s["recall_uncapped"] == 1.0 and s["all_gold_uncapped"] == 1.0
    assert s["docs_mean"] == 2.5
    assert summarize(agent, k=3)["mrr"] == pytest.approx((1.0 + 1 / 3) / 2)
    assert summarize(agent, k=3)["recall@3"] == 1.0
    assert summarize(agent, k=3)["all_gold@3"] == 0.5
    # C only among the unconfirmed evidence: the multi-hop question counts without it
    assert summarize(agent, k=4)["all_gold@4"] == 1.0
    assert summarize(agent, k=4)["all_gold@4_confirmed"] == 0.5
    assert s["all_gold@2_confirmed"] == 0.5
    assert s["answer_em"] == 1.0
    assert s["answer_f1"] == pytest.approx((1.0 + 2 / 3) / 2)
    assert s["abstention"] == 0.0  # answered the unanswerable one
    assert s["latency_mean_s"] == pytest.approx(5.0) and s["latency_p95_s"] == 10.0
    assert s["tokens_mean"] == 1500.0 and s["cost_mean"] == pytest.approx(0.15)
    assert s["steps_mean"] == pytest.approx(11 / 3)
    assert s["truncated_pct"] == pytest.approx(100 / 3)
    assert s["discarded_pct"] == pytest.approx(100 * 8 / 14)  # seen 14, kept 6
    assert s["grader_precision"] == pytest.approx(2 / 3)  # kept [A, B] | [C]; gold A | A, C
    assert s["grader_recall"] == pytest.approx(2 / 5)  # gold seen 2 + 3, kept 1 + 1


def test_router_accuracy_and_by_type(records) -> None:
    report = build_report(records, 2)
    assert list(report["paths"]) == ["single", "agent", "router"]
    router = report["paths"]["router"]
    assert router["router_n"] == 4  # unanswerable is not scored
    # only multi_hop → agent is right; simple → agent, simple → out_of_scope and
    # section_ref → single are wrong
    assert router["router_accuracy"] == pytest.approx(1 / 4)
    assert report["by_type"]["simple"]["agent"]["recall@2"] == 1.0
    assert report["by_type"]["multi_hop"]["agent"]["recall@2"] == 0.0
    assert report["by_type"]["multi_hop"]["single"]["all_gold@2"] == 0.0
    assert report["by_type"]["section_ref"]["router"]["router_accuracy"] == 0.0
    assert report["by_type"]["simple"]["single"]["n"] == 1
    assert report["by_type"]["simple"]["router"]["n"] == 2


def test_lost_and_gained_against_single_shot_per_type() -> None:
    """lost@k: single-shot's first k held every gold document and the agent's do not;
    gained@k the reverse; paired by question id, at k and at 5, in the report's tables."""
    five = [B, D, "e.md", "f.md", "g.md"]
    records = [
        rec("single", "bridge", [A], [A, B], qid="q1"),
        rec("agent", "bridge", [A], [*five, A], qid="q1"),  # lost at 5, kept at 10
        rec("single", "bridge", [A, C], [*five, A], qid="q2"),
        rec("agent", "bridge", [A, C], [A, C], qid="q2"),  # gained at 5 and at 10
        rec("single", "comparison", [A], [A], qid="q3"),
        rec("agent", "comparison", [A], [B], qid="q3"),  # lost at both
        rec("agent", "comparison", [A], [A], qid="q4"),  # single-shot did not run it
    ]
    report = build_report(records, 10)
    agent = report["paths"]["agent"]
    assert (agent["lost@5"], agent["lost@10"]) == (2, 1)
    assert (agent["gained@5"], agent["gained@10"]) == (1, 1)
    assert agent["lost@10_pct"] == pytest.approx(100 / 3)
    assert agent["all_gold@5"] == pytest.approx(2 / 4)
    bridge = report["by_type"]["bridge"]["agent"]
    assert (bridge["lost@5"], bridge["gained@5"], bridge["lost@10"]) == (1, 1, 0)
    assert report["paths"]["single"]["lost@10"] == 0
    text = markdown(report)
    assert "lost@10" in text and "agent lost@5" in text and "agent gained@10" in text
    # without a single-shot path there is nothing to lose against
    alone = build_report([r for r in records if r["path"] == "agent"], 10)
    assert "lost@10" not in alone["paths"]["agent"]
    assert "agent lost@5" not in markdown(alone)


def test_at_k_5_the_report_prints_each_at_5_row_once() -> None:
    """At k = 5 the @k rows and the fixed @5 rows are the same figures: printed once."""
    records = [rec("single", "bridge", [A], [A, B], qid="q1"),
               rec("agent", "bridge", [A], [B, A], qid="q1")]
    labels = [line.split(" | ")[0].lstrip("| ").split(" (")[0]
              for line in markdown(build_report(records, 5)).split("\n\n")[0].splitlines()]
    for row in ("all_gold@5", "lost@5", "gained@5"):
        assert labels.count(row) == 1, labels


def test_answer_normalisation_and_f1() -> None:
    assert normalize_answer("The limit is £2,500 [3].") == "limit is £ 2500"
    assert exact_match("£2,500", "Above £2500, the CFO approves [1].")
    assert exact_match("2500", "above £2,500")
    assert not exact_match("250", "up to 2500 sensors")  # word boundaries, not substrings
    assert not exact_match("", "anything")
    assert token_f1("Priya Raman", "Priya Raman") == 1.0
    assert token_f1("the CFO Priya Raman", "Raman") == pytest.approx(2 * 1 * (1 / 3) / (4 / 3))
    assert token_f1("IP67", "no idea") == 0.0


def test_abstention_markers() -> None:
    assert abstained({"status": "unanswerable", "answer": "Tom Becker"})
    assert abstained({"status": "answered", "answer": "That is not in the knowledge base."})
    assert abstained({"status": "answered", "answer": "The knowledge base does not say."})
    assert not abstained({"status": "answered", "answer": "Tom Becker [1]."})


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 4.0, 2.0, 3.0], 95) == 5.0
    assert percentile([float(x) for x in range(1, 101)], 95) == 95.0
    assert percentile([float(x) for x in range(1, 21)], 95) == 19.0
    assert percentile([], 95) is None


def test_diagnosis_lines() -> None:
    def single(hits: int, n: int):
        rs = [rec("single", "simple", [A], [A] if i < hits else [B], qid=str(i))
              for i in range(n)]
        return build_report(rs, 10)

    assert "retrieval is not the problem" in diagnose(single(9, 10))
    assert "the loop has work to do" in diagnose(single(6, 9))  # 3 of 9 missing
    middle = diagnose(single(8, 10))
    assert "not the problem" not in middle and "work to do" not in middle
    assert diagnose(build_report([rec("agent", "simple", [A], [A])], 10)) is None


def test_grade_summary_from_events() -> None:
    pipeline = event_from("grade", 1, {"query": "q", "enough": False, "chunks": 3, "kept": 1,
                                       "verdicts": [
        {"doc_id": A, "verdict": "relevant"}, {"doc_id": B, "verdict": "irrelevant"},
        {"doc_id": A, "verdict": "irrelevant"}]})
    assert grade_summary(pipeline) == {"chunks": 3, "kept": 1, "seen_docs": [A, B, A],
                                       "kept_docs": [A]}
    tools = event_from("grade", 1, {"query": "q", "enough": True, "chunks": 4, "kept": 2,
                                    "kept_ids": [7, 9]})
    assert grade_summary(tools, lambda ids: {7: C, 9: D}) == {
        "chunks": 4, "kept": 2, "seen_docs": None, "kept_docs": [C, D]}


def test_parse_paths() -> None:
    assert parse_paths("single, agent,single") == ["single", "agent"]
    with pytest.raises(UserError, match="--paths"):
        parse_paths("single,oracle")


# -- datasets --------------------------------------------------------------------------------

KB_IDS = ["policies/travel.md", "products/sensor.md", "org/leadership.md", "org/travel.txt",
          "archive/products/sensor.md"]


def test_gold_names_resolve_by_exact_suffix_basename_stem() -> None:
    assert resolve_doc_name("policies/travel.md", KB_IDS) == "policies/travel.md"
    assert resolve_doc_name("examples/kb/org/leadership.md", KB_IDS) == "org/leadership.md"
    assert resolve_doc_name("leadership.md", KB_IDS) == "org/leadership.md"
    assert resolve_doc_name("Leadership", KB_IDS) == "org/leadership.md"
    assert resolve_doc_name("travel.txt", KB_IDS) == "org/travel.txt"
    assert resolve_doc_name("travel", KB_IDS) is None  # two stems match: ambiguous
    assert resolve_doc_name("sensor.md", KB_IDS) is None  # two basenames match
    assert resolve_doc_name("kb/archive/products/sensor.md", KB_IDS) == \
        "archive/products/sensor.md"
    assert resolve_doc_name("nothing.md", KB_IDS) is None


def test_seed_jsonl(tmp_path) -> None:
    path = tmp_path / "set.jsonl"
    lines = [
        {"id": "q1", "q": "Who approves?", "gold_doc": ["travel.md", "leadership"],
         "type": "multi_hop", "answer": "the CFO", "gold_section": "4.2", "extra": 1},
        {"q": "What rating?", "gold_doc": "kb/products/sensor.md"},
        {"q": "CEO salary?", "gold_doc": [], "type": "unanswerable"},
        {"q": "What rating?", "gold_doc": "missing.pdf", "answerable": False},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    data = load_dataset(path)
    assert data.kind == "seed" and data.name == "set" and data.corpus is None
    q1, q2, q3, q4 = data.questions
    assert (q1.id, q1.type, q1.answer, q1.gold_section) == ("q1", "multi_hop", "the CFO", "4.2")
    assert q1.extra == {"extra": 1} and q1.needs_agent
    assert q2.type == "simple" and not q2.needs_agent and q2.answer is None
    assert q2.id != q4.id and q4.id.startswith(q2.id)  # same text: ids kept unique
    assert not q3.answerable and not q3.needs_agent and q3.gold_docs == []
    assert not q4.answerable
    misses = resolve_gold(data, ["policies/travel.md", "products/sensor.md",
                                 "org/leadership.md"])
    assert q1.gold_docs == ["policies/travel.md", "org/leadership.md"]
    assert q2.gold_docs == ["products/sensor.md"]
    assert misses == [(q4.id, "missing.pdf")] and q4.unresolved == ["missing.pdf"]


def test_gold_sections_are_paired_with_gold_documents(tmp_path) -> None:
    path = tmp_path / "set.jsonl"
    lines = [
        {"q": "a", "gold_doc": "travel.md", "gold_section": ["4.2", "5.2"]},
        {"q": "b", "gold_doc": ["travel.md", "leadership"], "gold_section": ["4.2", "1"]},
        {"q": "c", "gold_doc": ["travel.md", "leadership"], "gold_section": "4.2"},
        {"q": "d", "gold_doc": "travel.md", "gold_pairs": [["travel.md", "2"],
                                                           ["kb/org/leadership.md", "1"]]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    data = load_dataset(path)
    resolve_gold(data, ["policies/travel.md", "org/leadership.md"])
    a, b, c, d = data.questions
    assert a.gold_sections == [["policies/travel.md", "4.2"], ["policies/travel.md", "5.2"]]
    assert a.gold_section == "4.2, 5.2"
    assert b.gold_sections == [["policies/travel.md", "4.2"], ["org/leadership.md", "1"]]
    assert c.gold_sections == []  # one section for two documents: which one is unknown
    assert d.gold_sections == [["policies/travel.md", "2"], ["org/leadership.md", "1"]]


def test_section_metrics_by_hand() -> None:
    """section_recall@k / all_sections@k read the evidence of the first k documents; a
    section inside a gold one counts for it."""
    def with_sections(path, gold_sections, docs, sections, answerable=True):
        r = rec(path, "section_ref", {d for d, _ in gold_sections} or [A], docs,
                answerable=answerable)
        return {**r, "gold_sections": gold_sections, "sections": sections}

    one = with_sections("agent", [[A, "4.2"], [C, "7"]], [A, B, C],
                        [f"{A}§4.1", f"{B}§1", f"{A}§4.2", f"{C}§7.1"])
    two = with_sections("agent", [[A, "4.2"]], [B, A], [f"{B}§4.2", f"{A}§4.20"])
    three = with_sections("agent", [[B, "1"]], [B], [f"{B}§1"])
    none = rec("agent", "simple", [A], [A])  # no gold sections: not counted
    s3 = summarize([one, two, three, none], k=3)
    # one: 4.2 held, 7 held through 7.1 -> any and all; two: B§4.2 is another document's
    # section and 4.20 is not inside 4.2 -> neither; three: both
    assert s3["sections_n"] == 3
    assert s3["section_recall@3"] == pytest.approx(2 / 3)
    assert s3["all_sections@3"] == pytest.approx(2 / 3)
    s2 = summarize([one, two, three, none], k=2)
    # capped at 2 documents: C is third in `one`, so only 4.2 of its two gold sections
    assert s2["section_recall@2"] == pytest.approx(2 / 3)
    assert s2["all_sections@2"] == pytest.approx(1 / 3)
    assert summarize([none], k=3)["all_sections@3"] is None


def test_seed_jsonl_errors(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.jsonl:2"):
        load_dataset(bad)
    bad.write_text('{"gold_doc": "x"}\n', encoding="utf-8")
    with pytest.raises(UserError, match="needs a \"q\""):
        load_dataset(bad)
    with pytest.raises(UserError, match="no such"):
        load_dataset(tmp_path / "absent.jsonl")


def write_beir(folder):
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": "d1", "title": "T9 Sensor", "text": "The T9 sensor is rated IP67."},
              {"_id": "d2", "title": "Leadership", "text": "The CFO is Priya Raman."},
              {"_id": "d3", "title": "Travel", "text": "Expenses above 2,500 need the CFO."}]
    queries = [{"_id": "q1", "text": "Who approves big expenses?", "answer": "Priya Raman",
                "type": "bridge", "gold_doc_ids": ["d3", "d2"], "split": "dev"},
               {"_id": "q2", "text": "What rating does the T9 have?"},
               {"_id": "q3", "text": "CEO salary?", "type": "unanswerable",
                "answerable": False}]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t1\nq2\td3\t0\n")
    return folder


def test_beir_folder(tmp_path) -> None:
    folder = write_beir(tmp_path / "beir")
    data = load_dataset(folder)
    assert data.kind == "beir" and data.corpus == folder / "corpus.jsonl"
    q1, q2, q3 = data.questions
    assert q1.gold_docs == ["d2", "d3"]  # qrels first, then gold_doc_ids not already there
    assert (q1.answer, q1.type, q1.extra["split"]) == ("Priya Raman", "bridge", "dev")
    assert q1.extra["gold_doc_ids"] == ["d3", "d2"] and q1.needs_agent
    assert q2.gold_docs == ["d1"]  # score 0 is not relevant
    assert q2.type == "simple" and q2.answer is None
    assert not q3.answerable and q3.gold_docs == []
    assert load_dataset(folder / "queries.jsonl").questions[0].id == "q1"
    assert len(data.limit(2).questions) == 2


def test_beir_corpus_is_ingested_once(small_kb, tmp_path) -> None:
    from ragloop.eval.datasets import ingest_corpus

    folder = write_beir(tmp_path / "beir")
    before = {d.doc_id for d in small_kb.documents()}
    assert ingest_corpus(small_kb, folder / "corpus.jsonl") == 3
    after = {d.doc_id: d for d in small_kb.documents()}
    assert set(after) == before | {"d1", "d2", "d3"}
    assert after["d1"].title == "T9 Sensor" and after["d1"].chunks == 1
    assert small_kb.section("d2", "0").text == "The CFO is Priya Raman."
    assert small_kb.search("Priya Raman CFO", 3, mode="bm25")[0].doc_id == "d2"
    assert ingest_corpus(small_kb, folder / "corpus.jsonl") == 0


# -- the runner over a real knowledge base with a scripted model -----------------------------

QA = "Who approves travel expenses above £2,500, and what is that person's name?"
QB = "What ingress protection rating does the T9 sensor have?"
QC = "What is the salary of the Chief Executive Officer?"
QD = "What does section 4.1 of the travel policy say about booking flights?"
KEYS = {"approval": "policies/travel.md", "booking": "policies/travel.md",
        "t9": "products/sensor.md", "ceo": "org/leadership.md"}
REPLY_USAGE = Usage(input_tokens=100, output_tokens=10, cost_usd=0.001, calls=1)
SINGLE_USAGE = Usage(input_tokens=50, output_tokens=5, cost_usd=0.0005, calls=1)


class KeyedGrader:
    """Keeps every hit of the one document the search's first word names (see KEYS); a
    question with no such word (single-shot grades the question itself) keeps every hit."""
    usage = Usage()  # no model calls

    def grade(self, question: str, hits):
        query = question.rsplit("(this search: ", 1)[-1].rstrip(")").lower()
        if query.split()[0] not in KEYS:
            return Grade(kept=list(hits), discarded=[], enough=bool(hits))
        doc = KEYS[query.split()[0]]
        kept = [h for h in hits if h.doc_id == doc]
        for h in hits:
            h.verdict = "relevant" if h.doc_id == doc else "irrelevant"
        return Grade(kept=kept, discarded=[h for h in hits if h.doc_id != doc],
                     enough=bool(kept))


SINGLE_ANSWERS = {QA: "The Chief Financial Officer approves them [1].",
                  QB: "IP67 [1].",
                  QC: None,
                  QD: "Flights must be booked at least 14 days ahead [1]."}


class FixedAnswerer:
    """The single-shot answerer: one canned answer per question, citing [1]."""

    def __init__(self) -> None:
        self.usage = Usage(**SINGLE_USAGE.to_dict())

    def answer(self, question, sub_questions, evidence, context=""):
        text = SINGLE_ANSWERS[question]
        if text is None:
            return Draft(text="The knowledge base does not say.", unanswerable=True)
        return Draft(text=text)

    def write(self, question, sub_questions, evidence, context=""):
        return (yield from in_pieces(self.answer(question, sub_questions, evidence)))


def tool(name: str, n: int, **args) -> ChatResponse:
    return ChatResponse(text="", tool_calls=[ToolCall(f"c{n}", name, args)], usage=REPLY_USAGE)


def scripted_chat(leadership_section: str) -> ScriptedChat:
    search = "search_knowledge_base"
    plans = {
        QA: ([tool(search, 0, query="approval thresholds above £2,500"),
              tool("fetch_document_section", 1, doc_id="org/leadership.md",
                   section=leadership_section)],
             "Expenses above £2,500 are approved by the Chief Financial Officer, Priya Raman"
             " [1][2]."),
        QB: ([tool(search, 0, query="CEO of Northwind"), tool(search, 1, query="T9 ingress")],
             "The T9 is rated IP67 [2]."),
        QC: ([tool(search, 0, query="CEO salary")], "The CEO is Tom Becker [1]."),
        QD: ([tool(search, i, query="booking travel portal") for i in range(10)],
             "Book through the travel portal [1]."),
    }

    def reply(messages, tools, tool_choice):
        # the first message is the question, then single-shot's results (the driver's step 1)
        steps, final = plans[messages[0].content.split(FIRST_SEARCH_NOTE)[0]]
        turn = sum(1 for m in messages if m.role == "assistant")
        if tool_choice == "none" or turn >= len(steps):
            return ChatResponse(text=final, usage=REPLY_USAGE)
        return steps[turn]

    return ScriptedChat([reply], repeat_last=True)


ROUTER = {QA: "agent", QB: "single", QC: "single", QD: "single"}


@pytest.fixture
def scripted(small_kb, tmp_path, monkeypatch):
    """(dataset, engine factory): the four questions, gold named in four ways."""
    import ragloop.agent.engine as engine_mod

    def route(question, kb, how):
        if how == "auto":
            return Route(ROUTER[question], "scripted router")  # type: ignore[arg-type]
        return Route(how, f"forced by --route {how}")

    monkeypatch.setattr(engine_mod, "_route", route)
    lead = next(s.section for s in small_kb.sections("org/leadership.md")
                if s.title == "Executive team")

    class ScriptedEngine(engine_mod.Engine):
        def _answerer(self, comps):
            return FixedAnswerer()

    def factory():
        # the support check offline: the script does not answer a citation judge's call
        # step 1 is the driver's own search; the scripts' model calls follow it
        return ScriptedEngine(small_kb, small_kb.settings.with_(max_steps=5,
                                                                citation_check="offline"),
                              chat=scripted_chat(lead), grader=KeyedGrader())

    path = tmp_path / "set.jsonl"
    rows = [{"id": "a", "q": QA, "gold_doc": ["policies/travel.md", "leadership.md"],
             "type": "multi_hop", "answer": "Priya Raman"},
            {"id": "b", "q": QB, "gold_doc": "docs/products/sensor.md", "type": "simple",
             "answer": "IP67"},
            {"id": "c", "q": QC, "gold_doc": [], "type": "unanswerable"},
            {"id": "d", "q": QD, "gold_doc": "travel", "type": "section_ref",
             "answer": "14 days"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    data = load_dataset(path)
    assert resolve_gold(data, [d.doc_id for d in small_kb.documents()]) == []
    return data, factory


def test_eval_with_a_scripted_model_over_a_real_kb(scripted, small_kb, tmp_path) -> None:
    data, factory = scripted
    out = tmp_path / "out"
    records = run_eval(data, factory, EvalOptions(out=out, k=1))
    assert [(r["qid"], r["path"]) for r in records] == [
        (q, p) for q in "abcd" for p in ("single", "agent", "router")]
    by = {(r["qid"], r["path"]): r for r in records}
    total_chunks = sum(d.chunks for d in small_kb.documents())

    # what each run recorded: the tools run starts from single-shot's search (its step 1,
    # graded against the question, which this grader keeps whole), so its evidence begins
    # with single-shot's documents in single-shot's order; b no longer looks at leadership
    # first
    for q in "abcd":
        assert by[q, "agent"]["docs"] == by[q, "single"]["docs"]
    assert by["b", "agent"]["docs"][0] == "products/sensor.md"
    # everything the tools run holds was kept by the grader: all of it is confirmed
    assert all(r["confirmed_docs"] == r["docs"] for r in by.values())
    assert [by[q, "agent"]["status"] for q in "abcd"] == ["answered", "answered", "answered",
                                                        "truncated"]
    assert [by[q, "agent"]["steps"] for q in "abcd"] == [4, 4, 3, 5]
    assert [by[q, "agent"]["tokens"] for q in "abcd"] == [330, 330, 220, 440]
    assert by["c", "single"]["status"] == "unanswerable"
    assert [by[q, "single"]["tokens"] for q in "abcd"] == [55, 55, 55, 55]
    assert [by[q, "router"]["route"] for q in "abcd"] == ["agent", "single", "single", "single"]
    assert by["a", "router"]["docs"] == by["a", "agent"]["docs"]
    # single-shot evidence is the first single_k documents of one search, in rank order
    single_k = small_kb.settings.single_k
    for q in data.questions:
        hits = small_kb.search(q.q, single_k * SINGLE_DEPTH_PER_DOC)
        docs = list(dict.fromkeys(h.doc_id for h in hits))[:single_k]
        assert by[q.id, "single"]["docs"] == docs
    assert [by[q, "single"]["docs"][0] for q in "abd"] == [
        "policies/travel.md", "products/sensor.md", "policies/travel.md"]
    # the runs are in the knowledge base's run store too
    stored = factory().runs
    assert stored.get(by["d", "agent"]["run_id"])["status"] == "truncated"
    stored.close()

    report = build_report(records, 1, ["single", "agent", "router"])
    single, agent, router = (report["paths"][p] for p in ("single", "agent", "router"))
    # retrieval: a, b, d have gold documents
    assert single["retrieval_n"] == 3
    assert single["recall@1"] == 1.0 and single["mrr"] == 1.0
    assert single["all_gold@1"] == pytest.approx(2 / 3)  # a has two gold documents
    # the agent holds what single-shot holds at every k
    assert agent["recall@1"] == 1.0 and agent["all_gold@1"] == pytest.approx(2 / 3)
    assert agent["mrr"] == 1.0
    assert agent["recall_uncapped"] == 1.0 and agent["all_gold_uncapped"] == 1.0
    at2 = build_report(records, 2, ["agent"])["paths"]["agent"]
    assert at2["recall@2"] == 1.0 and at2["all_gold@2"] == 1.0 and at2["mrr"] == 1.0
    # answers
    assert single["answer_em"] == pytest.approx(2 / 3)  # b, d
    assert single["answer_f1"] == pytest.approx((0.0 + 1.0 + 4 / 11) / 3)  # d: P 2/9
    assert agent["answer_em"] == pytest.approx(2 / 3)  # a, b; d's forced answer lacks 14 days
    assert agent["answer_f1"] == pytest.approx((2 / 7 + 0.4 + 0.0) / 3)
    assert single["abstention"] == 1.0 and agent["abstention"] == 0.0
    assert single["false_abstention"] == 0.0
    # cost, steps, ceiling
    assert agent["tokens_mean"] == 330.0 and single["tokens_mean"] == 55.0
    assert agent["cost_mean"] == pytest.approx(0.003)
    assert single["cost_mean"] == pytest.approx(0.0005)
    assert agent["steps_mean"] == 4.0 and single["steps_mean"] == 2.0
    assert agent["truncated_pct"] == 25.0 and single["truncated_pct"] == 0.0
    lat = sorted(by[q, "agent"]["latency_s"] for q in "abcd")
    assert agent["latency_p95_s"] == lat[-1]
    assert agent["latency_mean_s"] == pytest.approx(sum(lat) / 4)
    # grader: every search sees every chunk (3 small documents) and keeps one document's
    per_doc = {d.doc_id: d.chunks for d in small_kb.documents()}
    t, s, lead = per_doc["policies/travel.md"], per_doc["products/sensor.md"], \
        per_doc["org/leadership.md"]
    grades = [g for q in "abcd" for g in by[q, "agent"]["grades"]]
    # step 1 is single-shot's search in every run (the question: every chunk kept); then the
    # model's: a searches once, b twice, c once, d three times (step 5 is d's answer)
    assert [g["chunks"] for g in grades] == [total_chunks] * 11
    kept = sum(g["kept"] for g in grades)
    assert kept == 4 * total_chunks + t + lead + s + lead + 3 * t
    assert agent["discarded_pct"] == pytest.approx(100 * (11 * total_chunks - kept)
                                                   / (11 * total_chunks))
    # gold kept at step 1: a's travel and leadership, b's sensor, d's travel; then by the
    # model's searches: a's travel, b's sensor, d's travel three times
    gold_kept = (t + lead + s + t) + (t + s + 3 * t)
    assert agent["grader_precision"] == pytest.approx(gold_kept / kept)
    # every GRADE event names every hit's verdict (the model's searches too, built as step
    # 1's): of the gold chunks seen, the model's searches drop a's leadership chunks and b's
    # second search the sensor's
    assert agent["grader_recall"] == pytest.approx(gold_kept / (gold_kept + lead + s))
    assert single["discarded_pct"] == 0.0  # single-shot grades its search (this grader keeps all)
    # router: a (multi_hop → agent) right, b (simple → single) right, d (section_ref) wrong
    assert router["router_n"] == 3 and router["router_accuracy"] == pytest.approx(2 / 3)
    assert report["by_type"]["section_ref"]["router"]["router_accuracy"] == 0.0

    files = write_reports(out, report, records)
    saved = json.loads(files["json"].read_text())
    assert saved["paths"]["agent"]["recall@1"] == 1.0
    assert set(saved["by_type"]) == {"multi_hop", "simple", "unanswerable", "section_ref"}
    page = files["html"].read_text()
    assert page.count("data:image/png;base64,") == 4 and "<table>" in page
    table = markdown(report)
    assert "| recall@1 (any gold doc in first 1 distinct docs) | 100.0% | 100.0% | 100.0% |" \
        in table
    assert "| router accuracy | – | – | 66.7% |" in table


# -- resumability ----------------------------------------------------------------------------

class FakeEngine:
    """Answers instantly; raises KeyboardInterrupt at call number `interrupt_at`."""

    calls = 0

    def __init__(self, interrupt_at: int | None = None) -> None:
        from types import SimpleNamespace

        self.interrupt_at = interrupt_at
        self.chat = None
        self.settings = SimpleNamespace(model="offline", max_steps=6)
        self.kb = SimpleNamespace(store=SimpleNamespace(chunks=lambda ids: {}),
                                  warm_up=lambda: None)
        self.runs = SimpleNamespace(close=lambda: None)

    def ask(self, question, *, route, driver=None, max_steps=None, on_event=None):
        FakeEngine.calls += 1
        if self.interrupt_at is not None and FakeEngine.calls >= self.interrupt_at:
            raise KeyboardInterrupt
        return RunResult(run_id=f"r{FakeEngine.calls}", question=question,
                         status=RunStatus.ANSWERED, route=route if route != "auto" else "agent",
                         route_reason="", driver="fake", model="offline", answer="ok",
                         citations=[], invalid_citations=[], missing=[], conflicts=[], steps=2,
                         max_steps=6, usage=Usage(), latency_s=0.01,
                         evidence=[{"n": 1, "doc_id": A, "section": "1", "section_title": "",
                                    "step": 1}])


def seed(tmp_path, n: int):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "q": f"question {i}", "gold_doc": A})
                            + "\n" for i in range(n)), encoding="utf-8")
    return load_dataset(path)


def lines(out):
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_an_interrupted_eval_resumes_without_duplicates(tmp_path) -> None:
    data, out = seed(tmp_path, 5), tmp_path / "out"
    options = EvalOptions(out=out, paths=["single", "agent"])
    FakeEngine.calls = 0
    with pytest.raises(KeyboardInterrupt):
        run_eval(data, lambda: FakeEngine(interrupt_at=4), options)
    assert len(lines(out)) == 3  # calls 1-3 finished and were saved
    # a run killed mid-write leaves a torn line
    with (out / "results.jsonl").open("a") as fh:
        fh.write('{"qid": "q1", "path": "ag')
    FakeEngine.calls = 0
    records = run_eval(data, FakeEngine, options)
    assert FakeEngine.calls == 7  # 10 pairs, 3 done
    saved = lines(out)
    pairs = [(r["qid"], r["path"]) for r in saved]
    assert len(pairs) == 10 and len(set(pairs)) == 10
    assert [(r["qid"], r["path"]) for r in records] == [
        (f"q{i}", p) for i in range(5) for p in ("single", "agent")]
    FakeEngine.calls = 0
    again = run_eval(data, FakeEngine, options)
    assert FakeEngine.calls == 0 and again == records
    # adding a path runs only the new pairs
    run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single", "agent", "router"]))
    assert FakeEngine.calls == 5 and len(lines(out)) == 15


def test_resume_refuses_other_settings_unless_fresh(tmp_path) -> None:
    data, out = seed(tmp_path, 2), tmp_path / "out"
    run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single"]))
    with pytest.raises(UserError, match="max_steps"):
        run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single"], max_steps=3))
    FakeEngine.calls = 0
    run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single"], max_steps=3, fresh=True))
    assert FakeEngine.calls == 2 and len(lines(out)) == 2


def test_parallel_workers_and_limit(tmp_path) -> None:
    data, out = seed(tmp_path, 6), tmp_path / "out"
    FakeEngine.calls = 0
    records = run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single", "agent"],
                                                      workers=3, limit=4))
    assert FakeEngine.calls == 8
    assert [r["qid"] for r in records] == ["q0", "q0", "q1", "q1", "q2", "q2", "q3", "q3"]
    assert sorted((r["qid"], r["path"]) for r in lines(out)) == sorted(
        (r["qid"], r["path"]) for r in records)


def test_a_crashing_run_is_recorded_as_failed(tmp_path) -> None:
    class Broken(FakeEngine):
        def ask(self, question, **kw):
            if question == "question 1":
                raise ValueError("boom")
            return super().ask(question, **kw)

    data, out = seed(tmp_path, 2), tmp_path / "out"
    records = run_eval(data, Broken, EvalOptions(out=out, paths=["single"]))
    assert [r["status"] for r in records] == ["answered", "failed"]
    assert records[1]["error"] == "ValueError: boom"
    s = summarize(records, 10)
    assert s["failed_pct"] == 50.0 and s["recall@10"] == 0.5
    assert math.isclose(s["latency_mean_s"], 0.005)


# -- the command line ------------------------------------------------------------------------

class CitesFirst:
    usage = Usage()  # no model calls

    def answer(self, question, sub_questions, evidence, context=""):
        return Draft(text="See [1].")

    def write(self, question, sub_questions, evidence, context=""):
        return (yield from in_pieces(self.answer(question, sub_questions, evidence)))


def test_cli_eval_ingests_a_beir_corpus_and_resumes(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import ragloop.agent.engine as engine_mod
    from ragloop.apps.cli import app

    class CliEngine(engine_mod.Engine):
        def __init__(self, kb, settings=None, **kw):
            super().__init__(kb, (settings or kb.settings).with_(citation_check="offline"),
                             chat=ScriptedChat([], name="scripted:cli"), grader=KeepsAll())

        def _answerer(self, comps):
            return CitesFirst()

    monkeypatch.setattr(engine_mod, "Engine", CliEngine)
    monkeypatch.setattr(engine_mod, "_route", lambda q, kb, how: Route("single", "forced"))
    folder = write_beir(tmp_path / "beir")
    out, kb = tmp_path / "out", tmp_path / "kb"
    args = ["eval", str(folder), "--kb", str(kb), "--paths", "single", "-k", "3", "--out",
            str(out), "--json"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    single = report["paths"]["single"]
    assert single["failed_pct"] == 0.0
    # three one-chunk documents: single-shot evidence holds all of them
    assert single["recall@3"] == 1.0 and single["all_gold@3"] == 1.0
    assert single["n"] == 3 and single["retrieval_n"] == 2
    assert report["model"] == "scripted:cli"
    assert any("retrieval is not the problem" in n for n in report["notes"])
    assert json.loads((out / "report.json").read_text())["paths"]["single"]["recall@3"] == 1.0
    assert (out / "report.html").exists() and len(lines(out)) == 3
    assert {r["qid"] for r in lines(out)} == {"q1", "q2", "q3"}
    again = CliRunner().invoke(app, [*args[:-1]])  # the Markdown table this time
    assert again.exit_code == 0, again.output
    assert "| recall@3 (any gold doc in first 3 distinct docs) | 100.0% |" in again.stdout
    assert "retrieval is not the problem" in again.stdout
    assert len(lines(out)) == 3  # nothing re-run
    # single-shot reads as many documents as -k counts, not its default single_k
    at_one = CliRunner().invoke(app, ["eval", str(folder), "--kb", str(kb), "--paths", "single",
                                      "-k", "1", "--out", str(tmp_path / "k1"), "--json"])
    assert at_one.exit_code == 0, at_one.output
    assert [len(r["docs"]) for r in lines(tmp_path / "k1")] == [1, 1, 1]
    from ragloop.kb import KnowledgeBase

    with KnowledgeBase.open(kb) as base:
        assert sorted(d.doc_id for d in base.documents()) == ["d1", "d2", "d3"]


def _hit(chunk_id: int, doc_id: str) -> Hit:
    return Hit(chunk_id=chunk_id, doc_id=doc_id, section="1", section_title="", text="")


def test_top_documents_keeps_every_chunk_of_the_first_k_documents() -> None:
    hits = [_hit(1, "a"), _hit(2, "b"), _hit(3, "a"), _hit(4, "c"), _hit(5, "b"), _hit(6, "d")]
    assert [h.chunk_id for h in top_documents(hits, 2)] == [1, 2, 3, 5]
    assert [h.chunk_id for h in top_documents(hits, 1)] == [1, 3]
    assert top_documents(hits, 9) == hits


def test_path_order_rotates_per_question(tmp_path) -> None:
    """A path run second on a question finds its query embeddings cached: no path always
    goes first."""
    data, out = seed(tmp_path, 3), tmp_path / "out"
    run_eval(data, FakeEngine, EvalOptions(out=out, paths=["single", "agent", "router"]))
    order = [(r["qid"], r["path"]) for r in lines(out)]
    assert order == [("q0", "single"), ("q0", "agent"), ("q0", "router"),
                     ("q1", "agent"), ("q1", "router"), ("q1", "single"),
                     ("q2", "router"), ("q2", "single"), ("q2", "agent")]


def test_warm_up_loads_the_model_even_when_its_text_is_cached(small_kb_template,
                                                              tmp_path) -> None:
    """The clock must not pay the model load: a cached warm-up text would not load it."""
    import shutil
    from types import SimpleNamespace

    from ragloop.eval.runner import _warm_up
    from ragloop.kb import KnowledgeBase

    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    with KnowledgeBase.open(folder) as kb:
        kb.embedder.embed(["warm-up"])  # now cached in the knowledge base
    with KnowledgeBase.open(folder) as kb:
        inner = kb.embedder.inner
        assert inner._model is None and inner._numpy_model is None
        kb.embedder.embed(["warm-up"])
        assert inner._model is None and inner._numpy_model is None  # a cache hit loads nothing
        _warm_up(SimpleNamespace(kb=kb))
        # a question's embedding is short: the numpy query path is the model the runs use
        assert inner._numpy_model is not None


def _t9_beir(tmp_path, queries: list[dict]) -> Path:
    """A BEIR folder of two T9 documents (a warranty that "does not cover" something, a
    datasheet) with `queries`; query "a" has the warranty as its gold document."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": "w1", "title": "T9 warranty terms", "text":
               "The T9 warranty does not cover damage from mounting torque above the value in "
               "the guide. Mounting torque above 5 Nm voids the T9 warranty."},
              {"_id": "s1", "title": "T9 Sensor", "text": "The T9 sensor is rated IP67."}]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\na\tw1\t1\n")
    return folder


def test_a_quoted_does_not_cover_is_no_decline_but_a_declined_part_is(tmp_path) -> None:
    """The offline answerer states which parts it declines; the eval counts those, not the
    words of a source it quotes (a warranty's "does not cover" sentence is an answer)."""
    from typer.testing import CliRunner

    from ragloop.apps.cli import app

    queries = [{"_id": "a", "text": "Above what mounting torque does the T9 warranty end?",
                "answer": "5 Nm"},
               {"_id": "u", "text": "What is the warranty of the Z7 drone?",
                "type": "unanswerable", "answerable": False}]
    folder = _t9_beir(tmp_path, queries)
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["eval", str(folder), "--kb", str(tmp_path / "kb"),
                                    "--paths", "single,agent", "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    by = {(r["qid"], r["path"]): r for r in lines(out)}
    for path in ("single", "agent"):
        answered, declined = by[("a", path)], by[("u", path)]
        assert "5 Nm" in answered["answer"] and "does not cover" in answered["answer"]
        assert answered["missing"] == [] and not abstained(answered)
        assert declined["missing"] and abstained(declined)
    report = json.loads(done.stdout)
    for path in ("single", "agent"):
        assert report["paths"][path]["false_abstention"] == 0.0
        assert report["paths"][path]["abstention"] == 1.0


def test_the_runs_status_and_the_evals_abstention_agree_on_every_record(tmp_path) -> None:
    """One decline vocabulary (language/lang `decline`): the eval's abstention is the run's own
    word (`declined`), and reading a record's text the old way gives the same on every record
    of an eval run; a free-text answer's status reads the same words."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from ragloop.agent.engine import Engine
    from ragloop.apps.cli import app
    from ragloop.eval.runner import make_record
    from ragloop.kb import KnowledgeBase
    from ragloop.offline.grader import LocalGrader

    queries = [{"_id": "a", "text": "Above what mounting torque does the T9 warranty end?"},
               {"_id": "b", "text": "Is the T9 sensor rated IP67, and what does it weigh?"},
               {"_id": "u", "text": "What is the warranty of the Z7 drone?",
                "type": "unanswerable", "answerable": False}]
    folder = _t9_beir(tmp_path, queries)
    out, kb = tmp_path / "out", tmp_path / "kb"
    done = CliRunner().invoke(app, ["eval", str(folder), "--kb", str(kb),
                                    "--paths", "single,agent,router", "--out", str(out)])
    assert done.exit_code == 0, done.output
    records = lines(out)
    assert len(records) == 9
    for r in records:
        stored_before = {k: v for k, v in r.items() if k != "declined"}
        assert abstained(r) == r["declined"] == abstained(stored_before), r["qid"]
        assert r["status"] != "unanswerable" or abstained(r)
    # a model's free-text answer: declined by the words the eval reads ("not stated" and
    # "cannot find" were the eval's alone before, so the run called such an answer answered)
    question = SimpleNamespace(id="m", q="Who approves?", type="simple", answerable=True,
                               gold_docs=[], gold_section=None, gold_sections=None, answer=None)
    with KnowledgeBase.open(kb, create=False) as base:
        for text, declines in (("It is not stated in the sources; I cannot find it.", True),
                               ("The T9 sensor is rated IP67.", False)):
            engine = Engine(base, base.settings.with_(citation_check="offline"),
                            chat=ScriptedChat([ChatResponse(text=text)]),
                            grader=LocalGrader(base.embedder, reading=EN_RD))
            result = engine.ask("What is the T9 rated?", route="agent", driver="tools")
            record = make_record(question, "agent", result, [])
            assert abstained(record) == declines == result.declined
            assert (result.status == RunStatus.UNANSWERABLE) == declines
            assert abstained({k: v for k, v in record.items() if k != "declined"}) == declines


# -- the answer against the reference (issue 41) -------------------------------------------

def test_first_sentence_words_and_cjk_matching() -> None:
    assert first_sentence("By default it is 25 steps. [1] See the guide. [2]") == \
        "By default it is 25 steps. [1]"
    assert first_sentence("No marker here. Second one.") == "No marker here."
    assert first_sentence("part one: 25 steps [1]\npart two: more [2]") == \
        "part one: 25 steps [1]"
    assert answer_words("By default it is 25 steps. [1]") == 6
    assert answer_words("生命数耗完即算踢爆。[1]") == 9  # a CJK character is a word
    # a reference in a script without spaces matches inside a longer run of characters
    assert exact_match("踢爆", "生命数耗完即算踢爆。[1]")
    assert token_f1("踢爆", "即算踢爆") == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_answer_figures_per_type_with_aliases_found_gold_and_the_warning() -> None:
    records = [
        # the reference leads the answer
        {**rec("agent", "simple", [A], [A], answer="It is 25 steps. [1] Also more. [1]",
               reference="25 steps", qid="1"), "reference_aliases": ["25"]},
        # an alias, but only in the second sentence
        {**rec("agent", "simple", [A], [A], answer="The limit is set. [1] It is 25. [1]",
               reference="twenty-five", qid="2"), "reference_aliases": ["25"]},
        # gold found, answer misses: retrieval did its part
        rec("agent", "simple", [A], [A, B], answer="See the how-to guide. [1]",
            reference="rollback", qid="3"),
        # gold not found: not counted among the found ones
        rec("agent", "simple", [A], [B], answer="Something else. [1]", reference="x",
            qid="4"),
        rec("agent", "unanswerable", [], [B], answer="Tom Becker [1]", answerable=False,
            qid="5"),
        {**rec("agent", "unanswerable", [], [B], answer="", answerable=False, qid="6"),
         "declined": True},
    ]
    report = build_report(records, 10)
    simple = report["by_type"]["simple"]["agent"]
    assert simple["answer_n"] == 4
    assert simple["answer_first"] == 0.25 and simple["answer_em"] == 0.5
    assert simple["found_n"] == 3 and simple["found_missed"] == 1
    assert simple["answer_first_found"] == pytest.approx(1 / 3)
    assert simple["answer_em_found"] == pytest.approx(2 / 3)
    assert simple["answer_words_mean"] == pytest.approx((6 + 7 + 5 + 2) / 4)
    assert simple["answer_f1"] > 0
    assert simple["answer_judged"] is None  # no judge ran
    assert report["by_type"]["unanswerable"]["agent"]["answered_anyway"] == 0.5
    warnings = answer_warnings(report)
    assert len(warnings) == 1 and "agent, simple" in warnings[0] and "1 (33%)" in warnings[0]
    text = markdown(report)
    assert "reference in the answer's first sentence" in text
    assert "warning: agent, simple" in text
    # a set where the answer holds what retrieval found gets no warning
    assert answer_warnings(build_report(records[:2], 10)) == []


def test_the_judge_reads_the_models_verdict_and_none_for_an_unreadable_reply() -> None:
    said_yes = ScriptedChat([ChatResponse(text='{"correct": true}')])
    assert judge_answer(said_yes, "How many?", ["25"], "twenty-five steps [1]") is True
    said_no = ScriptedChat([ChatResponse(text='{"correct": false}')])
    assert judge_answer(said_no, "How many?", ["25"], "See the guide [1]") is False
    garbled = ScriptedChat([ChatResponse(text="no idea"), ChatResponse(text="still not")])
    assert judge_answer(garbled, "How many?", ["25"], "x") is None
