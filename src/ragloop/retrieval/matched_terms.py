"""Which of a query's terms each BM25 hit holds, analysed as the full-text index analyses them."""

from __future__ import annotations

from functools import lru_cache

from ragloop.core.types import Hit
from ragloop.retrieval import languages
from ragloop.retrieval.index_text import index_text


@lru_cache(maxsize=8)
def _analyzer(code: str | None):  # -> tantivy.TextAnalyzer
    return languages.analyzer(code)


def analysed(text: str, language: str | None) -> set[str]:
    return set(_analyzer(language).analyze(languages.prepare(language, text)))


def matched_terms(hits: dict[int, Hit], terms: list[str],
                  language: str | None) -> dict[int, frozenset[str]]:
    """{chunk_id: the query's analysed terms its indexed text holds}. The text is rebuilt from
    the document and section titles and the chunk (a parent section's title, which the index
    also holds, is not on a Hit: a term only there counts as not held)."""
    wanted = analysed(" ".join(terms), language)
    return {cid: frozenset(wanted & analysed(index_text(h.doc_title, [h.section_title], h.text),
                                              language))
            for cid, h in hits.items()}
