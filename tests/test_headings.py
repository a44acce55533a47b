"""Whether a phrase heads a part of a knowledge base (offline/headings.py), over a real SQLite
knowledge base: a section title or a line of its own heads one, a phrase used in passing does
not; and through the engine, a follow-up asks about what the last answer introduced when the
KB heads a part with it."""

from __future__ import annotations

from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.core.conversation import Turn
from ragloop.kb import KnowledgeBase
from ragloop.offline.headings import KbHeadings

DOCS = {
    "warranty.txt": "Pump Warranty Terms\n\nEvery P200 pump has a warranty of 2 years.\n"
                    "Extended warranty\nCustomers may buy an extended warranty that adds 3 "
                    "years. The extended warranty costs 10% of the list price.\n",
    "pump.md": "# P200 Pump Guide\n\n## 1.2 Flow rate\n\nThe P200 pumps 40 litres a minute. "
               "Its price is £900. The monthly uptime is high.\n",
}


def _kb(root, embedder) -> KnowledgeBase:
    kb = KnowledgeBase.open(root / "kb", embedder=embedder)
    kb.ingest([write_docs(root / "docs", DOCS)])
    return kb


def test_a_title_or_a_line_of_its_own_heads_a_part(tmp_path, embedder) -> None:
    with _kb(tmp_path, embedder) as kb:
        heads = KbHeadings(kb)
        assert heads("extended warranty") and heads("Flow rate") and heads("p200 pump guide")
        assert not heads("monthly uptime") and not heads("list price")


def test_a_follow_up_asks_about_what_the_last_answer_introduced(tmp_path, embedder) -> None:
    with _kb(tmp_path, embedder) as kb:
        history = [Turn("How long is the P200 pump's warranty?", answer="2 years. [1]"),
                   Turn("can we get more?", "Can we get more (P200 pump warranty)?",
                        answer="Customers may buy an extended warranty that adds 3 years. [1]")]
        run = Engine(kb).ask("What does it cost?", route="single", history=history)
        assert "extended warranty" in run.standalone
        assert "warranty.txt" in [c.doc_id for c in run.citations]
