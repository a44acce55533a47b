"""What is made once from a knowledge base's content and shared by the runs over it (the
follow-ups' title index, offline/follow_ups.py `catalogue`; the common-word counts,
offline/common_words.py): never one store's for another store, and made again when a document
is edited, even when its chunk count stays the same; real SQLite, then real Postgres."""

from __future__ import annotations

import gc

from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.offline.common_words import CommonWords
from ragloop.offline.follow_ups import catalogue


def _docs(folder, titles: list[str], word: str) -> None:
    """One short one-section document per title, each naming `word` (one chunk each)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, title in enumerate(titles):
        (folder / f"d{i}.md").write_text(f"# {title}\n\n{word} staff read this page.\n",
                                         encoding="utf-8")


def _titles(kb: KnowledgeBase) -> set[str]:
    return {d.title for d in catalogue(kb, ENGLISH_READING).documents}


def test_a_store_never_reads_what_was_made_for_another(tmp_path, embedder) -> None:
    kbs = {"a": (["Probation", "Annual leave", "Laptops", "Parking"], "Northwind"),
           "b": (["Canteen", "Fire drill", "Printers", "Visitors"], "Contoso")}
    for name, (titles, word) in kbs.items():
        _docs(tmp_path / f"docs-{name}", titles, word)
        with KnowledgeBase.open(tmp_path / name, embedder=embedder) as kb:
            kb.ingest([tmp_path / f"docs-{name}"])
    # as many chunks in both (and both written once): neither version tells them apart.
    # Opened after the last one is closed and freed, a store is often put where that one
    # was, under the same id() (CPython), so a cache keyed by id() would hand it the other
    # KB's titles
    for turn in range(16):
        name, other = "ab"[turn % 2], "ba"[turn % 2]
        titles, word = kbs[name]
        kb = KnowledgeBase.open(tmp_path / name, embedder=embedder)
        try:
            assert _titles(kb) == set(titles), (turn, name)
            assert CommonWords(kb)(word) and not CommonWords(kb)(kbs[other][1])
        finally:
            kb.close()
        del kb
        gc.collect()
    # two open at once share nothing either
    with KnowledgeBase.open(tmp_path / "a", embedder=embedder) as a, \
            KnowledgeBase.open(tmp_path / "b", embedder=embedder) as b:
        assert _titles(a) == set(kbs["a"][0]) and _titles(b) == set(kbs["b"][0])


def test_an_edited_document_of_as_many_chunks_refreshes_the_titles(tmp_path, embedder,
                                                                  location) -> None:
    folder = tmp_path / "docs"
    _docs(folder, ["Probation", "Annual leave", "Laptops", "Parking"], "Northwind")
    with KnowledgeBase.open(location, embedder=embedder, create=True) as kb, \
            KnowledgeBase.open(location, embedder=embedder) as reader:
        kb.ingest([folder])
        assert _titles(reader) == {"Probation", "Annual leave", "Laptops", "Parking"}
        chunks = reader.store.chunk_count()
        (folder / "d3.md").write_text("# Car park\n\nNorthwind staff read this page.\n",
                                      encoding="utf-8")
        assert kb.ingest([folder]).updated == 1 and reader.store.chunk_count() == chunks
        # another open KB on the same location (as another process would) sees the edit
        assert _titles(reader) == {"Probation", "Annual leave", "Laptops", "Car park"}
        assert _titles(kb) == _titles(reader)
