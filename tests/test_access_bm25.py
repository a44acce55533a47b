"""Issue 43.3, BM25's statistics: a principal's search scores the readable chunks with their
own statistics (N, df, avgdl of the readable chunks alone), so a readable chunk's bm25_score
is what a knowledge base holding only the readable documents gives it, on either backend,
whatever the hidden documents hold. The reference is tantivy itself: a SQLite knowledge base
into which only the readable files were ingested."""

from __future__ import annotations

import pytest

from ragloop.core.access import Principal
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.filters import Filter

PUBLIC = {
    "guide/battery.md": "# Battery Guide\n\n## Life\nThe battery lasts three years. Charge the"
                        " battery before the first use.\n\n## Storage\nStore the sensor dry,"
                        " away from water and dust.\n",
    "guide/water.md": "# Water Rating\n\n## Rating\nThe enclosure keeps water and dust out;"
                      " the sensor survives one metre of water.\n",
    "guide/travel.md": "# Travel\n\n## Booking\nBook travel two weeks ahead; the manager"
                       " approves travel expenses.\n",
}
# hidden (hr only): many chunks holding the public words, and long ones (avgdl moves)
HIDDEN = {f"hr/report{i}.md": f"# Report {i}\n\n## Findings\n" + " ".join(
    ["battery"] * (1 + i % 3) + ["sensor", "salary", "review"] * (4 + 6 * i)) + ".\n"
    for i in range(12)}
QUERIES = ("battery", "battery life sensor", "water dust", "sensor salary", "travel manager",
           "salary", "charge storage enclosure")


def _write(root, docs, hidden_access: bool) -> object:
    for rel, text in docs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    if hidden_access:
        (root / "hr" / ".ragloop-access").write_text("hr\n", encoding="utf-8")
    return root


def _scores(kb, query: str) -> list[tuple[tuple[str, str, str], float]]:
    return [((h.doc_id, h.section, h.text), h.bm25_score)
            for h in kb.search(query, k=50, mode="bm25")]


def _same_ranking(got, want) -> None:
    assert [key for key, _ in got] == [key for key, _ in want]
    # tantivy scores in float32; Postgres in float8
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)


@pytest.fixture
def shared(location, embedder, tmp_path):
    kb = KnowledgeBase.open(location, embedder=embedder)
    kb.ingest([_write(tmp_path / "docs", {**PUBLIC, **HIDDEN}, hidden_access=True)])
    only = KnowledgeBase.open(tmp_path / "only", embedder=embedder)
    only.ingest([_write(tmp_path / "only-docs", PUBLIC, hidden_access=False)])
    yield kb, only, tmp_path
    kb.close()
    only.close()


def test_a_readable_chunks_score_is_that_of_a_kb_holding_only_the_readable_documents(shared):
    kb, only, tmp_path = shared
    bob = kb.for_principal(Principal(user="bob"))
    assert sorted(d.doc_id for d in bob.documents()) == sorted(PUBLIC)
    moved = 0
    for query in QUERIES:
        got = _scores(bob, query)
        _same_ranking(got, _scores(only, query))
        everything = dict(_scores(kb, query))  # the admin's: the whole KB's statistics
        moved += any(everything[key] != pytest.approx(score, rel=1e-3) for key, score in got)
    assert moved >= 5  # the control: the hidden documents do move the whole KB's scores
    assert _scores(bob, "salary") == []  # only hidden documents hold it
    # a new readable document: the next search counts it (the statistics follow the content)
    extra = {"guide/more.md": "# More\n\n## Battery\nA spare battery, a spare sensor.\n"}
    kb.ingest([_write(tmp_path / "docs", extra, hidden_access=True)])
    only.ingest([_write(tmp_path / "only-docs", extra, hidden_access=False)])
    for query in QUERIES:
        _same_ranking(_scores(bob, query), _scores(only, query))
    # a readable document replaced: its new chunks counted, its old ones not
    changed = {"guide/water.md": "# Water Rating\n\n## Rating\nNo water rating: keep the"
                                 " battery and the sensor dry.\n"}
    for root in (tmp_path / "docs", tmp_path / "only-docs"):
        _write(root, changed, hidden_access=False)
    kb.ingest([tmp_path / "docs"])
    # a fresh reference: tantivy counts a replaced document's old chunks until its segments
    # merge (tests/test_postgres_bm25.py), the readable statistics count the record's
    with KnowledgeBase.open(tmp_path / "fresh", embedder=only.embedder) as fresh:
        fresh.ingest([tmp_path / "only-docs"])
        for query in QUERIES:
            _same_ranking(_scores(bob, query), _scores(fresh, query))


def test_a_hidden_documents_words_do_not_move_a_readable_score(shared, tmp_path):
    """The same readable documents score the same whether the hidden ones hold a word
    or not: replace every hidden report by one without the public words."""
    kb, _, _ = shared
    bob = kb.for_principal(Principal(user="bob"))
    before = {q: _scores(bob, q) for q in QUERIES}
    plain = {rel: f"# Report\n\n## Findings\nsalary review {rel}.\n" for rel in HIDDEN}
    _write(tmp_path / "docs", plain, hidden_access=True)
    kb.ingest([tmp_path / "docs"])
    assert kb.search("battery sensor", k=50, mode="bm25")[0].doc_id in PUBLIC  # replaced
    for query in QUERIES:
        _same_ranking(_scores(bob, query), before[query])


def test_a_filter_narrows_the_hits_not_the_statistics(shared):
    """bob's filtered search scores as the readable-only KB's filtered search does: the hits
    of the filter's documents, the statistics of all his readable ones."""
    kb, only, _ = shared
    bob = kb.for_principal(Principal(user="bob"))
    narrow = Filter(doc_prefixes=("guide/battery",))
    for query in QUERIES:
        got = [((h.doc_id, h.text), h.bm25_score)
               for h in bob.search(query, k=50, mode="bm25", filter=narrow)]
        want = [((h.doc_id, h.text), h.bm25_score)
                for h in only.search(query, k=50, mode="bm25", filter=narrow)]
        _same_ranking(got, want)
        assert all(doc.startswith("guide/battery") for (doc, _), _ in got)
