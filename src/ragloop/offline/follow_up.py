"""Offline follow-ups, decided by retrieval (issue 40): what a conversation's next turn
searches, without reading its grammar.

A follow-up ("and how do I delete it?", "e quello del 2010?", "它的价格呢?") rarely names its
subject; the previous turn's search did. So a turn with history is searched three ways at once
and the rankings fused (reciprocal rank fusion, as BM25 and vectors are: retrieval/fusion.py
`fused_pages`, which the run template applies to `Condensed.queries` and `.prior`):

- the follow-up as typed: a question that stands on its own, or switches topic, finds its own
  documents and keeps them near the top;
- the follow-up together with what the previous turn searched (its query: already resolved,
  so a chain of follow-ups keeps the subject its topic started with, clipped to
  `CARRIED_CHARS`): a follow-up typed without its subject finds the subject's documents;
- the previous turn's cited documents as a prior: their chunks ranked as one more list, so
  the documents the conversation is about hold their place unless both searches leave them.

No topic-switch decision is made by default. One from the retrieval itself is here, off
(`RetrievalCondenser(switches=True)`, `benchmarks/conversations.py --switches`,
`benchmarks/follow_up_options.py` way switch+prior), because on a blind set it cost more
follow-ups than it gave switches (benchmarks/RESULTS.md "Conversations: topic switches
decided from retrieval (issue 40)"): `switched`, before any of the fusion: the typed
question's word search (BM25) and meaning search (vectors) agree on a document of their own
(they share one of their best `AGREE`: the question finds its own subject, it is not a
follow-up typed without one), and none of the conversation's documents (what its last turns
cited, and what the previous turn's searches find) is among the best `APART` documents of
either search.
Such a turn is searched as typed, alone: a fused search there keeps the old documents in the
evidence and pushes the new topic's out. It fixed the switches the fusion lost on the sets it
was tuned on, but a follow-up typed without its subject whose own words find strong pages
("From which version did that change?" finds the versions page by both searches) looks the
same to retrieval, and on a 34-document KB the test changed no turn (ten documents of each search
cover most of the KB). With the fusion alone, a switch's typed search is one of the fused
lists and usually keeps its documents in the evidence. No word list: the same for every
language and corpus.

A reply to a turn that asked back (needs_input) that is no question of its own (no question
mark, a few words) is the user's choice: the pending question narrowed to it
(`core.conversation.narrowed`), as the model's condenser does.

What the run shows as searched is the queries themselves and how they were fused, never a
sentence spliced together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ragloop.core.conversation import Condensed, Turn, TurnKind, narrowed
from ragloop.core.script import ends_question
from ragloop.core.types import Hit, Usage
from ragloop.language.text import Reading
from ragloop.retrieval.fusion import Mode

DEPTH = 5  # documents of a ranked list (`ranked_documents`): about the evidence a turn keeps
CHUNKS_PER_DOC = 3  # chunks fetched per document wanted (several chunks of one document)
# the previous query carried: enough for a subject and its aspect, short enough that a chain
# of follow-ups does not bury what the user typed last
CARRIED_CHARS = 300
CHOICE_WORDS = 3  # a reply to a question back of at most this many content words is a choice
# a topic switch (`switched`, off by default): the typed question's BM25 and vector searches
# share one of their best AGREE documents, and the conversation's documents are in neither's
# best APART (chosen on the tuning sets: benchmarks/RESULTS.md, issue 40 switches)
AGREE = 3
APART = 10
TALKED_TURNS = 2  # the turns whose cited documents are the conversation's (`talked_about`)


class Searcher(Protocol):
    def search(self, query: str, k: int | None = None, mode: Mode = "hybrid") -> list[Hit]: ...


def ranked_documents(kb: Searcher, query: str, depth: int = DEPTH,
                     mode: Mode = "hybrid") -> list[str]:
    """The distinct documents of `query`'s hits, best first (at most `depth`)."""
    hits = kb.search(query, k=depth * CHUNKS_PER_DOC, mode=mode)
    return list(dict.fromkeys(h.doc_id for h in hits))[:depth]


def switched(kb: Searcher, question: str, talked_about: Sequence[str]) -> bool:
    """The question starts a topic of its own: its word and meaning searches agree on a
    document (one of each's best `AGREE`), and none of `talked_about` is among the best
    `APART` documents of either (the module's docstring)."""
    if not talked_about:
        return False
    words = ranked_documents(kb, question, APART, "bm25")
    meaning = ranked_documents(kb, question, APART, "vector")
    return bool(set(words[:AGREE]) & set(meaning[:AGREE])) and \
        not set(talked_about) & (set(words) | set(meaning))


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


def conversation_documents(history: Sequence[Turn]) -> tuple[str, ...]:
    """The documents the conversation is about, best first: what its latest turn cited, else
    the latest earlier turn that cited any (a turn that declined cites nothing)."""
    for turn in reversed(history):
        if turn.cited_docs:
            return turn.cited_docs
    return ()


def talked_about(kb: Searcher, history: Sequence[Turn]) -> tuple[str, ...]:
    """The conversation's documents a topic switch shares none with: what its last
    `TALKED_TURNS` cited (else the latest that cited any: `conversation_documents`) and what
    the previous turn's searches found (its query and its question as typed, the two a
    follow-up's search fuses)."""
    last = history[-1]
    found = [d for query in dict.fromkeys((last.searched, last.question))
             for d in ranked_documents(kb, query)]
    cited = [d for t in history[-TALKED_TURNS:] for d in t.cited_docs]
    return tuple(dict.fromkeys((*cited, *conversation_documents(history), *found)))


def is_choice(question: str, rd: Reading) -> bool:
    return not ends_question(question) and \
        len(rd.content_words(question)) <= CHOICE_WORDS


class RetrievalCondenser:
    """The offline `Condenser`: a follow-up searched as typed and with the previous turn's
    query, fused, the conversation's documents a prior; with `switches`, a topic switch
    searched as typed (see the module's docstring)."""

    def __init__(self, kb: Searcher, reading: Reading, switches: bool = False) -> None:
        self.kb = kb
        self.reading = reading
        self.switches = switches  # decide topic switches (`switched`; off: the docstring)
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
        prior = conversation_documents(history)
        if self.switches and switched(self.kb, q, talked_about(self.kb, history)):
            return Condensed(q, TurnKind.NEW_TOPIC,
                             "searched: the question as typed (a new topic: its word and"
                             " meaning searches agree on documents of their own, and none of"
                             " the conversation's documents is among their best"
                             f" {APART})")
        cited = ", the documents the conversation cited as a prior" if prior else ""
        return Condensed(query, TurnKind.FOLLOW_UP,
                         f"searched: the follow-up + turn {at + 1}'s query \"{carried(last)}\""
                         f" and the follow-up as typed, fused{cited}", subject=carried(last),
                         refers_to=at, queries=(query, q), prior=prior)
