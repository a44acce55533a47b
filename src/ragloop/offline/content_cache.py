"""What is made from a knowledge base's content once and shared by every run over it (its
document list, the follow-ups' title index, the words in nearly every document, the codes its
titles name), kept per store and per version of that content.

Keyed by the store object itself, held weakly: a closed store's values go with it, and a new
store never finds another's (an `id()` may be reused once a store is freed). A value must not
refer to its store, or the store would never be freed. The version is the store's
`generation()` (storage/protocols.py), which every committed write changes, in any process:
a document replaced by an edited one of as many chunks changes it too.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ragloop.core.types import DocumentInfo
    from ragloop.kb import KnowledgeBase
    from ragloop.kb.multi import KnowledgeBases

T = TypeVar("T")


class Versioned(Protocol):
    """A store (storage/protocols.py `Store`), or several read as one (kb/multi.py)."""

    def generation(self) -> object:
        """Changes whenever the content does; compared with `!=` only."""
        ...


class PerContent(Generic[T]):
    """`get(store, make, key)`: `make()`'s value for the store's content as it is now, made
    again when its version changed since."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[Versioned, dict[Hashable, tuple[object, T]]] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()

    def get(self, store: Versioned, make: Callable[[], T], key: Hashable = None) -> T:
        # the version is read before `make` reads the content: a write between the two is
        # kept under the older version, so the next reader makes it again (never the other
        # way: old content kept under the new version)
        version = store.generation()
        with self._lock:
            kept = self._kept.setdefault(store, {})
            entry = kept.get(key)
            if entry is None or entry[0] != version:
                entry = kept[key] = (version, make())
            return entry[1]


_documents: PerContent[list[DocumentInfo]] = PerContent()


def documents(kb: KnowledgeBase | KnowledgeBases) -> list[DocumentInfo]:
    """`kb.documents()`, read once per version of its content for every reader here (the
    title index, the common words' count, the titled codes): not to be changed in place."""
    return _documents.get(kb.store, kb.documents)
