"""A store as one principal sees it (issue 43.3): the documents it may not read are not there.

Every read a knowledge base, a run, a tool or an offline decision makes goes through its
store; this view answers each as if the hidden documents had never been ingested. Searches
get the readable doc ids as their `within` (intersected with a filter's), which each index
applies while it searches (hnswlib's filter, Postgres's `doc_id = ANY`), so k hits come
back whenever k readable chunks match; BM25 gets them as its `counted` too, so its
statistics are the readable chunks' alone (retrieval/bm25.py); documents, sections and
chunks of a hidden document read as missing ("not found", never "forbidden"); counts are of
readable documents. Writes and the embedding cache go to the store itself.

The readable set is worked out once per version of the content (`generation()`), so a
re-ingest that changes a document's access takes effect at the next read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ragloop.core import audit
from ragloop.core.access import Principal
from ragloop.core.types import DocumentInfo, Hit, SectionInfo
from ragloop.storage.protocols import Store

#: what a hidden id is looked up as: a start no doc id has (Postgres text holds no NUL)
_NO_SUCH = "\x01"


class _Readable:
    """What one principal may read of one version of the content."""

    def __init__(self, generation: object, documents: list[DocumentInfo], everything: bool,
                 hidden: frozenset[str] = frozenset()):
        self.generation = generation
        self.documents = documents
        self.hidden = hidden  # the ids this principal may not read (the audit line's reason)
        self.ids = [d.doc_id for d in documents]
        self.allowed = frozenset(self.ids)
        self.everything = everything  # nothing is hidden: searches run unfiltered
        self.chunks = sum(d.chunks for d in documents)


class ReadableStore:
    """`store` as `principal` sees it; anything not listed here is the store's own."""

    def __init__(self, store: Store, principal: Principal) -> None:
        self._store = store
        self.principal = principal
        self._lock = threading.Lock()
        self._seen: _Readable | None = None

    def __getattr__(self, name: str) -> Any:
        # meta, language, generation, embeddings, writes, flush, location, folder
        return getattr(self._store, name)

    def readable(self) -> _Readable:
        version = self._store.generation()  # before the read: see offline/content_cache.py
        with self._lock:
            seen = self._seen
            if seen is None or seen.generation != version:
                every = self._store.documents()
                mine = [d for d in every if self.principal.may_read(d.metadata)]
                hidden = frozenset(d.doc_id for d in every) - {d.doc_id for d in mine}
                seen = self._seen = _Readable(version, mine, not hidden, hidden)
            return seen

    def _within(self, within: list[str] | None) -> list[str] | None:
        seen = self.readable()
        if seen.everything:
            return within
        if within is None:
            return seen.ids  # the same list each time (a store compares it by identity)
        return [d for d in within if d in seen.allowed]

    # -- reads ----------------------------------------------------------------------------

    def documents(self) -> list[DocumentInfo]:
        return list(self.readable().documents)

    def document_fields(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(d.doc_id, d.source, d.metadata) for d in self.readable().documents]

    def chunk_count(self) -> int:
        seen = self.readable()
        return self._store.chunk_count() if seen.everything else seen.chunks

    def search_bm25(self, terms: list[str], k: int, within: list[str] | None = None,
                    counted: list[str] | None = None) -> list[tuple[int, float]]:
        seen = self.readable()
        if seen.everything:
            return self._store.search_bm25(terms, k, within, counted)
        within = self._within(within)
        if within == []:
            return []
        # the statistics are the readable documents' (whatever a filter narrows the hits
        # to): the scores are those of a KB holding only them, and tell nothing of the rest
        counted = seen.ids if counted is None else [d for d in counted if d in seen.allowed]
        return self._store.search_bm25(terms, k, within, counted)

    def search_vector(self, vector: np.ndarray, k: int,
                      within: list[str] | None = None) -> list[tuple[int, float]]:
        within = self._within(within)
        return [] if within == [] else self._store.search_vector(vector, k, within)

    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]:
        allowed = self.readable().allowed
        return {c: h for c, h in self._store.chunks(ids).items() if h.doc_id in allowed}

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, str]:
        allowed = self.readable().allowed
        return {c: d for c, d in self._store.chunk_docs(ids).items() if d in allowed}

    def _denied(self, doc_id: str, action: str) -> bool:
        """Whether `doc_id` is not this principal's to read: then an audit line, for a
        missing id as for a hidden one (the reason tells the admin which), so that both cost
        the same."""
        seen = self.readable()
        if doc_id in seen.allowed:
            return False
        reason = "hidden" if doc_id in seen.hidden else "not_found"
        audit.denied(self.principal.user, action, reason, doc_id=doc_id)
        return True

    # A hidden id is looked up in the store all the same, as an id no document has
    # (_NO_SUCH): it costs what a missing id's lookup costs, so the time of a "not found"
    # does not tell a hidden document from a missing one (its result is never read).

    def section(self, doc_id: str, section: str) -> SectionInfo | None:
        # no audit line here: a None is always followed by `sections` (KnowledgeBase.section)
        readable = doc_id in self.readable().allowed
        found = self._store.section(doc_id if readable else _NO_SUCH + doc_id, section)
        return found if readable else None

    def sections(self, doc_id: str) -> list[SectionInfo]:
        readable = not self._denied(doc_id, "fetch")
        found = self._store.sections(doc_id if readable else _NO_SUCH + doc_id)
        return found if readable else []

    def remove_document(self, doc_id: str) -> bool:
        """A hidden document is not there to remove."""
        if self._denied(doc_id, "delete"):
            return False
        return self._store.remove_document(doc_id)

    def close(self) -> None:
        """The store is its knowledge base's: a view closes nothing."""


# -- the admin's view (issue 43.5) ---------------------------------------------------------


def readers(documents: Iterable[DocumentInfo], doc_id: str,
            users: Iterable[Principal]) -> dict[str, Any] | None:
    """Who may read `doc_id`: its stored access (None: everyone who may use the KB) and the
    users that lets in, admins among them; None when no such document."""
    found = next((d for d in documents if d.doc_id == doc_id), None)
    if found is None:
        return None
    return {"doc_id": doc_id, "kb": found.kb, "access": found.metadata.get("access"),
            "users": sorted(u.user for u in users if u.may_read(found.metadata)),
            "admins": sorted(u.user for u in users if u.admin)}


def stored_principals(records: Iterable[dict[str, Any]]) -> list[Principal]:
    """The stored users (`PrincipalStore.users()`) as principals."""
    return [Principal(user=r["name"], groups=frozenset(r["groups"]), admin=bool(r["admin"]))
            for r in records]
