"""What a kept chunk (or the question) points to that is worth reading next: the offline
`FollowUps` of the pipeline driver (core/decisions.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ragloop.core.types import DocumentInfo, Hit
from ragloop.kb import KnowledgeBase
from ragloop.language.text import Reading, TitleIndex
from ragloop.offline.content_cache import PerContent, documents
from ragloop.offline.rewriter import fetch_targets

# Title links are followed only into documents that are one passage (one section): fetching
# the first section of a long document because a chunk named it would mostly add noise.
LINKED_DOC_MAX_SECTIONS = 1


@dataclass
class _Catalogue:
    documents: list[DocumentInfo]
    titles: TitleIndex
    passages: set[str]  # doc_ids with at most LINKED_DOC_MAX_SECTIONS sections


_catalogues: PerContent[_Catalogue] = PerContent()


def catalogue(kb: KnowledgeBase, reading: Reading) -> _Catalogue:
    """The KB's documents and title index in `reading`'s language, made again when its
    content changes (offline/content_cache.py)."""

    def make() -> _Catalogue:
        docs = documents(kb)
        return _Catalogue(docs, TitleIndex(((d.doc_id, d.title) for d in docs), reading),
                          {d.doc_id for d in docs if d.sections <= LINKED_DOC_MAX_SECTIONS})

    return _catalogues.get(kb.store, make, reading.code)


class LocalFollowUps:
    """What a kept chunk points to: its own section when cut off, and the one-passage
    documents it names by title (the bridge of a two-hop question: "… the band Tinted Windows
    …" → the document titled "Tinted Windows"). `named` does the same for the question itself
    (the titles it names)."""

    def __init__(self, kb: KnowledgeBase, reading: Reading) -> None:
        self.kb = kb
        self.reading = reading  # the knowledge base's language
        self.cat = catalogue(kb, reading)
        self._first: dict[str, str | None] = {}

    def _first_section(self, doc_id: str) -> str | None:
        if doc_id not in self._first:
            sections = self.kb.sections(doc_id)
            self._first[doc_id] = sections[0].section if sections else None
        return self._first[doc_id]

    def _titled(self, text: str, skip: str | None = None,
                question: str | None = None) -> list[tuple[str, str]]:
        """Named one-passage documents; with `question`, those named in the sentences that
        share most words with it first ("co-wrote the screenplays of Cool Runnings" before
        "appeared in Spaceballs" for a question about a screenplay)."""
        rd = self.reading
        if question:
            asked = {rd.stem(w) for w in rd.content_words(question)}
            ranked: list[tuple[int, int, str]] = []
            for pos, sentence in enumerate(rd.split_sentences(text)):
                overlap = len(asked & {rd.stem(w) for w in rd.content_words(sentence)})
                ranked += [(-overlap, pos, d) for d in self.cat.titles.named(sentence)]
            names = list(dict.fromkeys(d for *_, d in sorted(ranked)))
            names += [d for d in self.cat.titles.named(text) if d not in names]
        else:
            names = self.cat.titles.named(text)
        out = []
        for doc_id in names:
            if doc_id == skip or doc_id not in self.cat.passages:
                continue
            section = self._first_section(doc_id)
            if section is not None:
                out.append((doc_id, section))
        return out

    def __call__(self, hit: Hit, question: str | None = None) -> list[tuple[str, str]]:
        out = fetch_targets(hit)
        out += self._titled(hit.text, skip=hit.doc_id, question=question)
        return list(dict.fromkeys(out))

    def named(self, text: str) -> list[tuple[str, str]]:
        return self._titled(text)
