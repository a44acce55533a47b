"""The placement policy (agent/placement.py): which documents get single-shot's places, and the
run's placement event, on a real SQLite knowledge base."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_agent_local import DOCS as AGENT_DOCS

from ragloop.agent.pipeline_driver import PipelineDriver
from ragloop.agent.placement import DEFAULT_POLICY, Hop, Policy, place
from ragloop.agent.run import RunContext, drain
from ragloop.agent.template import RunTemplate
from ragloop.agent.tools import Toolbox
from ragloop.core.decisions import Grade
from ragloop.core.events import PlacementEvent, event_from
from ragloop.core.types import EventKind, Hit, Usage
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.language.vocabulary import ENGLISH_WORDS
from ragloop.offline.answerer import ExtractiveAnswerer
from ragloop.offline.follow_ups import LocalFollowUps
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.rewriter import LocalRewriter

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING
EN_WORDS = ENGLISH_WORDS

# -- the policy alone ------------------------------------------------------------------------


def test_a_pointer_takes_the_place_of_a_single_shot_document_the_grader_did_not_keep() -> None:
    made = place(["a", "b", "c"], ["a", "p", "b"], {"p": {Hop.POINTER}},
                 {"a": 1.0, "b": 0.6, "c": 1.0}, confirmed=["a", "p", "c"])
    assert made.order[:3] == ["a", "p", "c"]
    assert made.given_up == ["b"]
    taken = next(p for p in made.places if p.doc_id == "p")
    assert (taken.place, taken.why, taken.took) == (2, ("pointer",), "b")
    # the document that gave its place is still in the evidence, after the run's finds
    assert made.order[-1] == "b"


def test_each_place_says_its_reason_in_words_not_codes() -> None:
    made = place(["a", "b", "c"], ["a", "p", "b", "q"], {"p": {Hop.POINTER}, "q": set()},
                 {"a": 1.0, "b": 0.6, "c": 1.0}, confirmed=["a", "p", "c", "q"])
    said = {p.doc_id: p.to_dict()["reason"] for p in made.places}
    assert said["a"] == "kept its place (#1 of the first search)"
    assert said["p"] == ("took the place of b (a document of the first search the grader did"
                         " not keep): a kept passage names it")
    assert said["q"] == "found by the run's further searches"
    assert not any("single" in r for r in said.values())


def test_kept_single_shot_documents_keep_their_places() -> None:
    made = place(["a", "b"], ["a", "b", "p"], {"p": {Hop.POINTER}}, {"a": 1.0, "b": 1.0},
                 confirmed=["a", "b", "p"])
    assert made.order == ["a", "b", "p"]
    assert made.given_up == []


def test_a_requery_find_earns_no_place_but_a_sure_irrelevant_one_is_given_up() -> None:
    scores = {"a": 1.0, "b": 0.6, "c": 0.1}
    made = place(["a", "b", "c"], ["a", "r"], {"r": {Hop.REQUERY}}, scores,
                 confirmed=["a", "r"])
    # b (graded 0.6) keeps its place from a find with no hop; c (0.1) gives its own
    assert made.order[:3] == ["a", "b", "r"]
    assert made.given_up == ["c"]


def test_a_single_shot_document_covering_an_open_part_keeps_its_place() -> None:
    reached = {"b": {Hop.COVERS_PART}, "p": {Hop.POINTER}}
    # b's best grade against the whole question is low, but a part's own search kept it
    made = place(["a", "b"], ["a", "b", "p"], reached, {"a": 1.0, "b": 0.5},
                 confirmed=["a", "b", "p"])
    assert made.order[:2] == ["a", "b"]


def test_a_lower_single_shot_document_reached_through_a_hop_moves_up() -> None:
    made = place(["a", "b", "c", "p"], ["a", "p"], {"p": {Hop.POINTER}},
                 {"a": 1.0, "b": 0.4, "c": 1.0, "p": 0.4}, confirmed=["a", "c", "p"])
    # p takes b's place and b takes the place p left: nothing leaves the first four
    assert made.order == ["a", "p", "c", "b"]
    assert next(p for p in made.places if p.doc_id == "p").single_rank == 4


def test_the_strongest_hop_takes_the_first_free_place() -> None:
    reached = {"s": {Hop.SECOND_HOP}, "p": {Hop.POINTER, Hop.REQUERY}}
    made = place(["a", "b", "c"], ["s", "p"], reached, {"a": 1.0},
                 confirmed=["a", "s", "p"])
    assert made.order[:3] == ["a", "p", "s"]
    assert next(p for p in made.places if p.doc_id == "p").why == ("pointer", "requery")


@pytest.mark.parametrize(("policy", "first"), [
    (replace(DEFAULT_POLICY, signals=frozenset()), ["a", "b"]),  # hops switched off
    (replace(DEFAULT_POLICY, give_up_below=0.5), ["a", "b"]),  # b graded 0.6 stays
    (replace(DEFAULT_POLICY, give_up_below=0.7), ["a", "p"]),
    (Policy(signals=frozenset({Hop.SECOND_HOP})), ["a", "b"]),  # pointer not a signal
])
def test_the_policy_knob_and_signals(policy, first) -> None:
    made = place(["a", "b"], ["a", "p"], {"p": {Hop.POINTER}}, {"a": 1.0, "b": 0.6},
                 confirmed=["a", "p"], policy=policy)
    assert made.order[:2] == first


def test_an_unconfirmed_find_takes_no_place() -> None:
    made = place(["a", "b"], ["a", "p"], {"p": {Hop.POINTER}}, {"a": 1.0, "b": 0.0},
                 confirmed=["a"])
    assert made.order[:2] == ["a", "b"]


# -- the driver ------------------------------------------------------------------------------

DOCS = {
    # the two-hop pair of the local agent's tests, and two distractors that share its words
    "harrow-vale.md": AGENT_DOCS["wiki/harrow-vale.md"],
    "quiet-orchards.md": AGENT_DOCS["wiki/quiet-orchards.md"],
    "harrow-fair.md": """# Harrow Fair

Harrow Fair is a yearly album of concert recordings made at the Harrow market, where the
first concert of the fair is given by a group of school bands.
""",
    "vale-records.md": """# Vale Records

Vale Records released the debut album of many groups and held its first concert in 1990.
""",
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    for rel, text in DOCS.items():
        (root / rel).write_text(text, encoding="utf-8")
    base = KnowledgeBase.open(tmp_path_factory.mktemp("kb") / "kb")
    base.ingest([root])
    yield base
    base.close()


class _OnlyDocs:
    """Keeps the hits of some documents only (and says it has enough when it keeps any)."""
    usage = Usage()

    def __init__(self, docs: set[str]) -> None:
        self.docs = docs

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        kept = [replace(h, verdict="relevant", grade_score=0.9) for h in hits
                if h.doc_id in self.docs]
        rest = [replace(h, verdict="irrelevant", grade_score=0.5) for h in hits
                if h.doc_id not in self.docs]
        return Grade(kept, rest, bool(kept), "" if kept else "nothing relevant")


def test_the_run_gives_a_place_to_the_second_hop_and_says_why(kb) -> None:
    question = "Where did the group behind the album Harrow Vale give its first concert?"
    single = Toolbox(kb, k=12)
    grader = _OnlyDocs({"harrow-vale.md"})
    driver = PipelineDriver(Toolbox(kb, k=4), LocalPlanner(words=EN_WORDS, reading=EN_RD), grader,
                            LocalRewriter(reading=EN_RD), LocalFollowUps(kb, EN_RD),
                            reading=EN_RD)
    template = RunTemplate(single, grader, ExtractiveAnswerer(kb.embedder, reading=ENGLISH_READING),
                           4, reading=EN_RD)
    ctx = RunContext(question, 6)
    drain(template.run(ctx, driver), ctx)
    single_docs = list(dict.fromkeys(h.doc_id for h in single.search(question)))[:4]
    docs = list(dict.fromkeys(e.doc_id for e in ctx.ledger.items))
    events = [e for e in ctx.events if e.kind == EventKind.PLACEMENT]
    assert len(events) == 1
    placed = {p["doc_id"]: p for p in events[0].data["places"]}
    hop = placed["quiet-orchards.md"]
    assert "pointer" in hop["why"]
    # the second hop is among the first two documents whatever single-shot's rank of it
    assert docs.index("quiet-orchards.md") <= 1
    if single_docs.index("quiet-orchards.md") > 1:
        assert hop.get("took") in single_docs and hop["took"] != "harrow-vale.md"
    # the event reads back as it was stored
    again = event_from("placement", 0, events[0].data)
    assert isinstance(again, PlacementEvent) and again.places == events[0].data["places"]
