"""Which words occur in nearly every document of a knowledge base (the company's own name): a
property of the KB's content, which the offline condense rule reads so as never to carry such a
word into a follow-up (it tells no document apart).

Counting a word costs a read of the document list and a BM25 search deep enough to see every
document, so what is counted is kept per store and per version of its content, shared by every
run over it: the engine builds a condenser per run, and each follow-up would count again. The
version is the chunk count, as for the follow-ups' title index (`follow_ups.catalogue`): a
document added or removed changes it, and the counts are made again. A run reads the version
once, when it first asks of a word, and keeps it to its end.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass, field

from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases

# a KB of fewer documents has no word "in most of them" worth dropping; the hits read per
# word (chunks, so a word in many chunks of few documents is still counted right)
_COMMON_MIN_DOCUMENTS = 4
_COMMON_HITS = 2000
# "nearly every document": a product a KB is about may be in three of four of its documents
# and still tell a question's documents apart; the company's name is in all of them
_COMMON_SHARE = 0.9


@dataclass
class _Known:
    """What has been counted of one version of a store's content."""

    chunks: int  # the version: the store's chunk count when it was read
    documents: int | None = None  # read on the first word asked
    words: dict[str, bool] = field(default_factory=dict)


# keyed by the store itself, held weakly: a closed KB's counts go with it, and a new store
# never finds another's (an id() could be reused). A value must not refer to its store.
_known: weakref.WeakKeyDictionary[object, _Known] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _known_now(kb: KnowledgeBase | KnowledgeBases) -> _Known:
    """The counts of `kb`'s content as it is now (new ones when its chunk count changed)."""
    chunks = kb.store.chunk_count()
    with _lock:
        known = _known.get(kb.store)
        if known is None or known.chunks != chunks:
            known = _known[kb.store] = _Known(chunks)
        return known


class CommonWords:
    """`common(word)`: whether `word` occurs in nearly every one of `kb`'s documents; several
    knowledge bases (`KnowledgeBases`) count the documents of all of them, each word searched
    as the catalog searches it. Each word is counted once per version of the content."""

    def __init__(self, kb: KnowledgeBase | KnowledgeBases) -> None:
        self.kb = kb

    @functools.cached_property
    def _known(self) -> _Known:
        """The version this run reads: looked up on the first word asked, kept for the run."""
        return _known_now(self.kb)

    @property
    def documents(self) -> int:
        """How many documents the knowledge base holds (read once per version)."""
        known = self._known
        if known.documents is None:
            known.documents = len(self.kb.documents())
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
