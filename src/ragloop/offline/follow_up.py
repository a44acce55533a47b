"""Offline follow-ups, decided by retrieval (issue 40): what a conversation's next turn
searches, without reading its grammar.

A follow-up ("and how do I delete it?", "e quello del 2010?", "它的价格呢?") rarely names its
subject; the previous turn's search did. So a turn with history is searched as the follow-up
together with what the previous turn searched (its query: already resolved, so a chain of
follow-ups keeps the subject its topic started with, clipped to `CARRIED_CHARS`). The one
decision is whether the conversation goes on or the user changed the subject, and it is read
off the knowledge base's own search (its analyzers and embedder, whatever the language):

- the conversation's documents: what the latest turn that cited anything cited;
- the follow-up as typed, searched alone: its best documents (`OWN`), and whether its two
  searches, by words (BM25, the KB's analyzer) and by meaning (the KB's embedder), agree on
  the best one.

It is a new topic when the typed question has such a strong match of its own (both searches
rank the same document first) and its best documents share nothing with the conversation's.
Then the history is dropped and the question searched as typed. Anything else follows up: a
follow-up typed without its subject rarely gets both searches to agree on a document the
conversation never cited. No word list: the same test for every language and corpus.

A reply to a turn that asked back (needs_input) that is no question of its own (no question
mark, a few words) is the user's choice: the pending question narrowed to it
(`core.conversation.narrowed`), as the model's condenser does.

What the run shows as searched is the query itself and how it was made ("the follow-up + the
previous turn's query"), never a sentence spliced together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ragloop.core.conversation import Condensed, Turn, TurnKind, narrowed
from ragloop.core.types import Hit, Usage
from ragloop.language.text import ENGLISH_READING, Reading

DEPTH = 5  # documents of each ranked list compared: the evidence a turn keeps is about as deep
# the typed question's own best documents, held against the conversation's: a weak match
# further down (in a small KB every document is somewhere in the top five) is no tie
OWN = 2
CHUNKS_PER_DOC = 3  # chunks fetched per document wanted (several chunks of one document)
# the previous query carried: enough for a subject and its aspect, short enough that a chain
# of follow-ups does not bury what the user typed last
CARRIED_CHARS = 300
CHOICE_WORDS = 3  # a reply to a question back of at most this many content words is a choice


class Searcher(Protocol):
    def search(self, query: str, k: int | None = None) -> list[Hit]: ...


def ranked_documents(kb: Searcher, query: str, depth: int = DEPTH) -> list[str]:
    """The distinct documents of `query`'s hits, best first (at most `depth`)."""
    hits = kb.search(query, k=depth * CHUNKS_PER_DOC)
    return list(dict.fromkeys(h.doc_id for h in hits))[:depth]


def agreed(hits: Sequence[Hit]) -> str | None:
    """The document both searches rank first (the best BM25 hit's and the best vector hit's,
    which the fusion always keeps: retrieval/fusion.py), or None when they differ."""
    words = [h for h in hits if h.bm25_rank is not None]
    meaning = [h for h in hits if h.vector_rank is not None]
    if not words or not meaning:
        return None
    best = min(words, key=lambda h: h.bm25_rank or 0).doc_id
    return best if best == min(meaning, key=lambda h: h.vector_rank or 0).doc_id else None


def carried(turn: Turn) -> str:
    """What a turn searched, as the next turn carries it: its query, clipped at a word."""
    text = " ".join(turn.searched.split())
    if len(text) <= CARRIED_CHARS:
        return text
    cut = text[:CARRIED_CHARS]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


def joined(question: str, turn: Turn) -> str:
    """The follow-up with what the previous turn searched."""
    previous = carried(turn)
    return f"{question} {previous}" if previous and previous not in question else question


def conversation_documents(history: Sequence[Turn]) -> set[str]:
    """The documents the conversation is about: what its latest turn cited, else the latest
    earlier turn that cited any (a turn that declined cites nothing)."""
    for turn in reversed(history):
        if turn.cited_docs:
            return set(turn.cited_docs)
    return set()


def is_choice(question: str, rd: Reading) -> bool:
    return not question.rstrip().endswith(("?", "？")) and \
        len(rd.content_words(question)) <= CHOICE_WORDS


class RetrievalCondenser:
    """The offline `Condenser`: a follow-up searched with the previous turn's query unless
    retrieval says the subject changed (see the module's docstring)."""

    def __init__(self, kb: Searcher, reading: Reading = ENGLISH_READING) -> None:
        self.kb = kb
        self.reading = reading
        self.usage = Usage()  # no model calls

    def condense(self, history: Sequence[Turn], question: str) -> Condensed:
        q = " ".join(question.split())
        if not q:
            raise ValueError("the question is empty")
        if not history:
            return Condensed(q, TurnKind.STANDALONE, "the first turn: nothing to refer to")
        last = history[-1]
        at = len(history) - 1
        if last.asked_back and is_choice(q, self.reading):
            return Condensed(narrowed(last.searched, q), TurnKind.FOLLOW_UP,
                             f"searched: turn {at + 1}'s question narrowed to the reading"
                             " chosen", subject=q, refers_to=at)
        query = joined(q, last)
        if query == q:  # the question already holds what the last turn searched
            return Condensed(q, TurnKind.STANDALONE, "searched: the question as typed (it"
                             " holds what the previous turn searched)")
        if self._new_topic(q, conversation_documents(history)):
            return Condensed(q, TurnKind.NEW_TOPIC,
                             "searched: the question as typed (a new topic: it finds documents"
                             " of its own that share none with the conversation's, and adding"
                             " the previous turn's query does not lead back to them)")
        return Condensed(query, TurnKind.FOLLOW_UP,
                         f"searched: the follow-up + turn {at + 1}'s query"
                         f" \"{carried(last)}\"", subject=carried(last), refers_to=at)

    def _new_topic(self, q: str, talked_about: set[str]) -> bool:
        """The typed question has a strong match of its own that shares nothing with the
        conversation: its word search (BM25) and its meaning search (vectors) agree on a best
        document, that document is not the conversation's, and none of its best `OWN` is."""
        if not talked_about:
            return False
        hits = self.kb.search(q, k=DEPTH * CHUNKS_PER_DOC)
        own = list(dict.fromkeys(h.doc_id for h in hits))[:OWN]
        return bool(own) and agreed(hits) == own[0] and not talked_about & set(own)
