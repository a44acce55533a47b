"""The codes of one family a knowledge base's titles name (offline/siblings.py), as the
condense rule reads them through the engine: "and the one above it?" asks the last question of
the next code of the family, over a real SQLite knowledge base."""

from __future__ import annotations

from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.core.conversation import Turn
from ragloop.kb import KnowledgeBase
from ragloop.language.text import reading
from ragloop.offline.siblings import TitleSiblings

DOCS = {
    "p100.md": "# P100 Pump Datasheet\n\nThe P100 pumps 20 litres a minute.\n",
    "p300.md": "# P300 Pump Datasheet\n\nThe P300 pumps 60 litres a minute.\n",
    "p200.md": "# P200 Pump Datasheet\n\nThe P200 pumps 40 litres a minute.\n",
    "q1.md": "# Sales Report Q1 FY2024\n\nWe sold 300 pumps.\n",
    "x10.md": "# X10 Valve\n\nThe X10 valve closes in 2 seconds.\n",
}


def _kb(root, embedder) -> KnowledgeBase:
    kb = KnowledgeBase.open(root / "kb", embedder=embedder)
    kb.ingest([write_docs(root / "docs", DOCS)])
    return kb


def test_a_family_is_its_codes_in_the_titles_in_order_without_periods(tmp_path,
                                                                     embedder) -> None:
    with _kb(tmp_path, embedder) as kb:
        siblings = TitleSiblings(kb, reading("en"))
        assert list(siblings("P200")) == ["P100", "P200", "P300"]
        assert list(siblings("X10")) == ["X10"]
        assert list(siblings("Q1")) == [] and list(siblings("E7")) == []


def test_the_one_above_is_asked_of_the_next_code_of_the_kb(tmp_path, embedder) -> None:
    with _kb(tmp_path, embedder) as kb:
        run = Engine(kb).ask("And the one above it?", route="single",
                             history=[Turn("How fast does the P200 pump?", answer="40 l/min.")])
        assert run.standalone == "How fast does the P300 pump?"
        assert "p300.md" in [c.doc_id for c in run.citations]


def test_the_titles_are_read_once_per_version_and_again_after_a_write(tmp_path,
                                                                       embedder) -> None:
    listed = []

    class Counting(KnowledgeBase):
        def documents(self):  # type: ignore[no-untyped-def]
            listed.append(1)
            return super().documents()

    kb = Counting.open(tmp_path / "kb", embedder=embedder)
    kb.ingest([write_docs(tmp_path / "docs", DOCS)])
    with kb:
        listed.clear()
        for _ in range(2):  # two runs, each with its own condenser
            assert list(TitleSiblings(kb, reading("en"))("P200")) == ["P100", "P200", "P300"]
        assert len(listed) == 1
        kb.ingest([write_docs(tmp_path / "more", {"p400.md": "# P400 Pump Datasheet\n\nBig.\n"})])
        assert list(TitleSiblings(kb, reading("en"))("P200"))[-1] == "P400"
