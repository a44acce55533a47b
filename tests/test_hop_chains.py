"""Issue 45: the placement knob's kept-document part, and 3-4 hop chains read through the
pointers of a section that was itself read through a pointer, on a real SQLite KB."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ragloop.agent.pipeline_driver as pipeline_driver
from ragloop.agent.pipeline_driver import PipelineDriver
from ragloop.agent.placement import DEFAULT_POLICY, Hop, place
from ragloop.agent.run import RunContext, drain
from ragloop.agent.template import RunTemplate
from ragloop.agent.tools import Toolbox
from ragloop.core.decisions import Grade
from ragloop.core.types import EventKind, Hit, Usage
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.language.vocabulary import ENGLISH_WORDS
from ragloop.offline.answerer import ExtractiveAnswerer
from ragloop.offline.follow_ups import LocalFollowUps
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.rewriter import LocalRewriter

EN_RD = ENGLISH_READING

# -- the knob's part for kept documents ------------------------------------------------------

SINGLE = ["a", "b", "c", "d"]
FOUND = ["a", "b", "c", "d", "p", "x", "y"]
SCORES = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}


def _placed(**policy):
    return place(SINGLE, FOUND, {"p": {Hop.POINTER}}, SCORES,
                 confirmed=["a", "b", "c", "d", "p", "x", "y"],
                 policy=replace(DEFAULT_POLICY, **policy))


def test_kept_documents_above_the_knobs_rank_keep_their_places() -> None:
    made = _placed(kept_from_rank=None)
    assert made.order[:4] == SINGLE and made.given_up == []
    # the default never gives a kept document's place
    assert _placed().given_up == []


def test_a_kept_document_from_the_knobs_rank_on_gives_its_place_to_a_hop() -> None:
    made = _placed(kept_from_rank=4)
    assert made.order[:4] == ["a", "b", "c", "p"]
    assert made.given_up == ["d"]
    # ranks above the knob's keep their places
    assert _placed(kept_from_rank=5).given_up == []


def test_a_given_up_document_comes_right_after_the_hops_when_asked() -> None:
    last = _placed(kept_from_rank=3)
    assert last.order[-1] == "c"  # as before: after everything the run found
    near = _placed(kept_from_rank=3, displaced_next=True)
    assert near.order[:5] == ["a", "b", "p", "d", "c"]


# -- chains: P names A, A names B ------------------------------------------------------------

DOCS = {
    "lantern-guild.md": """# Lantern Guild

The Lantern Guild is a society of glass makers. Its best-known member wrote the handbook
Copper Kettle for the guild's apprentices. Its hall stands in the town of Orvell.
""",
    "copper-kettle.md": """# Copper Kettle

Copper Kettle is a handbook on glass furnaces and their fuel, printed by Marrow Press.
""",
    "orvell.md": """# Orvell

Orvell is a town on the river Dane with a weekly market.
""",
    "marrow-press.md": """# Marrow Press

Marrow Press is a printing house in the port of Sellin, established in 1821.
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


class _OnlyDoc:
    """Keeps the hits of one document only; never says it has enough."""
    usage = Usage()

    def __init__(self, doc: str) -> None:
        self.doc = doc

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        kept = [replace(h, verdict="relevant", grade_score=1.0) for h in hits
                if h.doc_id == self.doc]
        rest = [replace(h, verdict="irrelevant", grade_score=0.2) for h in hits
                if h.doc_id != self.doc]
        return Grade(kept, rest, False, "the printing house's port")


def _run(kb) -> RunContext:
    question = "In which port is the printing house of the Lantern Guild's handbook?"
    grader = _OnlyDoc("lantern-guild.md")
    # one hit a search: the chain's later links come only through reads
    driver = PipelineDriver(Toolbox(kb, k=1), LocalPlanner(words=ENGLISH_WORDS, reading=EN_RD),
                            grader, LocalRewriter(reading=EN_RD), LocalFollowUps(kb, EN_RD),
                            reading=EN_RD)
    template = RunTemplate(Toolbox(kb, k=1), grader,
                           ExtractiveAnswerer(kb.embedder, reading=EN_RD), 1, reading=EN_RD)
    ctx = RunContext(question, 6)
    drain(template.run(ctx, driver), ctx)
    return ctx


def _docs(ctx: RunContext) -> list[str]:
    return list(dict.fromkeys(e.doc_id for e in ctx.ledger.items))


def test_a_chain_of_pointers_is_read_to_its_third_document(kb) -> None:
    ctx = _run(kb)
    docs = _docs(ctx)
    assert docs[0] == "lantern-guild.md"
    assert {"copper-kettle.md", "marrow-press.md"} <= set(docs)
    # each link says how it was reached: the first by a pointer, the next through the chain
    event = next(e for e in ctx.events if e.kind == EventKind.PLACEMENT)
    why = {p["doc_id"]: p["why"] for p in event.data["places"]}
    assert "pointer" in why["copper-kettle.md"]
    assert "chain" in why["marrow-press.md"] and "pointer" not in why["marrow-press.md"]


def test_without_chain_reads_the_third_document_is_not_reached(kb, monkeypatch) -> None:
    monkeypatch.setattr(pipeline_driver, "FOLLOW_READ_POINTERS", False)
    docs = _docs(_run(kb))
    assert "copper-kettle.md" in docs and "marrow-press.md" not in docs


def test_the_newest_link_is_followed_before_the_first_passages_other_pointers(kb,
                                                                              monkeypatch) -> None:
    # the guild's passage names the handbook and the town; the handbook's passage names the
    # press: depth first reads the press second, by grade the town comes second
    assert "orvell.md" not in _docs(_run(kb))
    monkeypatch.setattr(pipeline_driver, "CHAIN_FIRST", False)
    docs = _docs(_run(kb))
    assert "orvell.md" in docs and "marrow-press.md" not in docs
