"""Which words are in nearly every document (offline/common_words.py), as the condense rule
reads them through the engine: counted once per version of the knowledge base's content and
shared by the runs over it, counted again when a document is added or edited (even to as many
chunks), for one knowledge base (SQLite, then Postgres) and for several served as one."""

from __future__ import annotations

from ragloop.agent.engine import Engine
from ragloop.core.conversation import Turn
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases

# the company's name in every document; the follow-up's subject in one of them
DOCS = {
    "hr/probation.md": "# Probation\n\nAt Northwind a probation period lasts three months and"
                       " may be extended once by the line manager.\n",
    "hr/leave.md": "# Annual leave\n\nNorthwind staff have 25 days of annual leave a year.\n",
    "it/laptops.md": "# Laptops\n\nNorthwind issues every employee a laptop on the first day.\n",
    "finance/expenses.md": "# Expenses\n\nNorthwind repays approved expenses within 30 days.\n",
    "office/parking.md": "# Parking\n\nThe Northwind office has 40 parking spaces for staff.\n",
}
HISTORY = [Turn("How long is probation at Northwind?", answer="Three months.")]
FOLLOW_UP = "Can it be extended?"


class CountingKB(KnowledgeBase):
    """A real SQLite knowledge base that counts the reads the common-word rule makes: the
    document list, and the deep BM25 search of each word it asks about."""

    listed = 0
    counted: list[str]

    def documents(self):  # type: ignore[no-untyped-def]
        self.listed += 1
        return super().documents()

    def search(self, query, k=None, mode="hybrid", filter=None):  # type: ignore[no-untyped-def]
        if mode == "bm25" and " " not in query:  # a word's, not a question's (the router's)
            self.counted.append(query)
        return super().search(query, k, mode, filter)


def _kb(root, embedder, docs: dict[str, str], location: str | None = None) -> CountingKB:
    folder = root / "docs"
    for rel, text in docs.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    kb = CountingKB.open(location or root / "kb", embedder=embedder)
    kb.ingest([folder])
    kb.listed, kb.counted = 0, []
    return kb  # type: ignore[return-value]


def test_common_words_are_counted_once_per_version_of_the_kb(tmp_path, embedder,
                                                             location) -> None:
    with _kb(tmp_path, embedder, DOCS, location) as kb:
        engine = Engine(kb)
        first = engine.ask(FOLLOW_UP, history=HISTORY, route="single")
        assert "probation" in first.standalone and "Northwind" not in first.standalone
        assert kb.listed == 1 and "Northwind" in kb.counted
        counted = list(kb.counted)
        # a second run over the same content reads what the first counted: no I/O for it
        second = Engine(kb).ask(FOLLOW_UP, history=HISTORY, route="single")
        assert second.standalone == first.standalone
        assert (kb.listed, kb.counted) == (1, counted)

        # a document without the name: 5 of 6 is no longer nearly every one, so the name
        # tells documents apart again and is carried (a stale count would drop it)
        (tmp_path / "docs" / "news.md").write_text(
            "# News\n\nThe canteen opens at eight from Monday.\n", encoding="utf-8")
        kb.ingest([tmp_path / "docs"])
        third = engine.ask(FOLLOW_UP, history=HISTORY, route="single")
        assert kb.listed == 2 and kb.counted == counted * 2
        assert "Northwind" in third.standalone


def test_an_edited_document_of_as_many_chunks_is_counted_again(tmp_path, embedder,
                                                               location) -> None:
    with _kb(tmp_path, embedder, DOCS, location) as kb:
        first = Engine(kb).ask(FOLLOW_UP, history=HISTORY, route="single")
        assert "Northwind" not in first.standalone and kb.listed == 1
        chunks = kb.store.chunk_count()
        # the name leaves one document, which keeps its one chunk: 4 of 5 is not nearly
        # every one, and only a version that every write changes sees it
        (tmp_path / "docs" / "office/parking.md").write_text(
            "# Parking\n\nThe office has 40 parking spaces for staff.\n", encoding="utf-8")
        assert kb.ingest([tmp_path / "docs"]).updated == 1
        assert kb.store.chunk_count() == chunks
        again = Engine(kb).ask(FOLLOW_UP, history=HISTORY, route="single")
        assert kb.listed == 2 and "Northwind" in again.standalone


def test_several_knowledge_bases_count_their_documents_together(tmp_path, embedder) -> None:
    names = sorted(DOCS)
    hr = _kb(tmp_path / "hr", embedder, {n: DOCS[n] for n in names[:3]})
    rest = _kb(tmp_path / "rest", embedder, {n: DOCS[n] for n in names[3:]})
    with KnowledgeBases({"hr": hr, "rest": rest}, {}) as kbs:
        first = Engine(kbs).ask(FOLLOW_UP, history=HISTORY, route="single")
        # three documents in one, two in the other: the name is in all five of the catalog
        assert "probation" in first.standalone and "Northwind" not in first.standalone
        listed = (hr.listed, rest.listed)
        assert listed == (1, 1) and "Northwind" in hr.counted
        Engine(kbs).ask(FOLLOW_UP, history=HISTORY, route="single")
        assert (hr.listed, rest.listed) == listed

        (tmp_path / "rest" / "docs" / "news.md").write_text(
            "# News\n\nThe canteen opens at eight from Monday.\n", encoding="utf-8")
        rest.ingest([tmp_path / "rest" / "docs"])  # a change in one KB is a change of all
        third = Engine(kbs).ask(FOLLOW_UP, history=HISTORY, route="single")
        assert (hr.listed, rest.listed) == (2, 2) and "Northwind" in third.standalone
