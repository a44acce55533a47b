"""Which words occur in nearly every document of a knowledge base (the company's own name): a
property of the KB's content, which the offline condense rule reads so as never to carry such a
word into a follow-up (it tells no document apart).

Counting a word costs a read of the document list and a BM25 search deep enough to see every
document, so what is counted is kept per store and per version of its content, shared by every
run over it (offline/content_cache.py): the engine builds a condenser per run, and each
follow-up would count again. A write of any document makes the counts again. A run reads the
version once, when it first asks of a word, and keeps it to its end.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases
from ragloop.offline.content_cache import PerContent, documents

# a KB of fewer documents has no word "in most of them" worth dropping; the hits read per
# word (chunks, so a word in many chunks of few documents is still counted right)
_COMMON_MIN_DOCUMENTS = 4
_COMMON_HITS = 2000
# "nearly every document": a product a KB is about may be in three of four of its documents
# and still tell a question's documents apart; the company's name is in all of them
_COMMON_SHARE = 0.9


@dataclass
class _Known:
    """What has been counted of one version of a store's content (never its store)."""

    documents: int | None = None  # read on the first word asked
    words: dict[str, bool] = field(default_factory=dict)


_known: PerContent[_Known] = PerContent()


class CommonWords:
    """`common(word)`: whether `word` occurs in nearly every one of `kb`'s documents; several
    knowledge bases (`KnowledgeBases`) count the documents of all of them, each word searched
    as the catalog searches it. Each word is counted once per version of the content."""

    def __init__(self, kb: KnowledgeBase | KnowledgeBases) -> None:
        self.kb = kb

    @functools.cached_property
    def _known(self) -> _Known:
        """The version this run reads: looked up on the first word asked, kept for the run."""
        return _known.get(self.kb.store, _Known)

    @property
    def documents(self) -> int:
        """How many documents the knowledge base holds (read once per version)."""
        known = self._known
        if known.documents is None:
            known.documents = len(documents(self.kb))
        return known.documents

    def __call__(self, word: str) -> bool:
        words = self._known.words
        if word not in words:
            words[word] = self._count(word)
        return words[word]

    def _count(self, word: str) -> bool:
        # one word of letters only: the full-text search splits a code or a hyphenated word
        # into pieces and would count the documents of any of them
        if self.documents < _COMMON_MIN_DOCUMENTS or not word.isalpha():
            return False
        hits = self.kb.search(word, k=_COMMON_HITS, mode="bm25")
        return len({(h.kb, h.doc_id) for h in hits}) >= _COMMON_SHARE * self.documents
