"""The chunk ids a principal's view shows (issue 43.3): the store's, through a keyed permutation.

A store numbers chunks across every document in the order they were written, so between two
ids a user may read, the gap counts the chunks written in between, hidden ones too. A view
(kb/access.py) shows each id through a permutation of [1, 2**40) keyed by a secret kept with
the knowledge base: ids stay whole numbers (below kb/multi.py's stride, so several KBs' ids
still never meet, and far below JavaScript's 2**53), are stable across processes and
restarts, and without the key say nothing of the store's order, gaps or size. An id that no
chunk has, made up or of a hidden chunk, reads back as a missing one.

The permutation is a balanced Feistel network (two 20-bit halves, keyed BLAKE2b as its round
function: any keyed pseudo-random function makes one), with cycle-walking to keep 0 out.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from ragloop.core.errors import UserError
from ragloop.core.types import Hit

log = logging.getLogger(__name__)

#: the meta key the knowledge base's secret is stored under (SQLite and Postgres alike)
KEY_META = "chunk_id_key"
BITS = 40  # kb/multi.py's _ID_STRIDE is 1 << BITS
_HALF = BITS // 2
_MASK = (1 << _HALF) - 1
_ROUNDS = 8
_KEEP = 1 << 16  # ids translated and kept (both ways): a search's ids are read back at once


class ChunkIds:
    """The permutation of one key: `public(store id)` and back (`internal`)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._shown: dict[int, int] = {}  # internal -> public
        self._read: dict[int, int] = {}  # public -> internal

    def _f(self, r: int, half: int) -> int:
        data = (half << 8 | r).to_bytes(4, "little")
        digest = hashlib.blake2b(data, key=self._key, digest_size=8).digest()
        return int.from_bytes(digest, "little") & _MASK

    def _forward(self, x: int) -> int:
        left, right = x >> _HALF, x & _MASK
        for r in range(_ROUNDS):
            left, right = right, left ^ self._f(r, right)
        return left << _HALF | right

    def _backward(self, y: int) -> int:
        left, right = y >> _HALF, y & _MASK
        for r in reversed(range(_ROUNDS)):
            left, right = right ^ self._f(r, left), left
        return left << _HALF | right

    def _keep(self, internal: int, public: int) -> None:
        if len(self._shown) >= _KEEP:
            self._shown.clear()
            self._read.clear()
        self._shown[internal] = public
        self._read[public] = internal

    def public(self, internal: int) -> int:
        found = self._shown.get(internal)
        if found is not None:
            return found
        if not 0 < internal < 1 << BITS:
            raise ValueError(f"chunk id {internal} is outside the ids a view can show")
        y = self._forward(internal)
        while y == 0:  # cycle-walking: 0 is no id (the chain ends at a non-zero one)
            y = self._forward(y)
        self._keep(internal, y)
        return y

    def internal(self, public: Any) -> int | None:
        """The store's id for `public`; None for what no view shows (negative, 0, too big,
        not an int): such an id is simply not found."""
        found = self._read.get(public)
        if found is not None:
            return found
        if isinstance(public, bool) or not isinstance(public, int) or not 0 < public < 1 << BITS:
            return None
        x = self._backward(public)
        while x == 0:
            x = self._backward(x)
        self._keep(x, public)
        return x


class ShownIds:
    """`store` (a principal's view, kb/access.py) with its chunk ids shown through the KB's
    permutation: every id it returns is public, every id it is given is read as one.
    Anything not listed here is the view's own."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._ids: ChunkIds | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def ids(self) -> ChunkIds:
        with self._lock:
            if self._ids is None:
                self._ids = ChunkIds(stored_key(self._store))
            return self._ids

    def _inward(self, ids: Iterable[int]) -> dict[int, int]:
        """{store id: public id} of the public `ids` that name one."""
        read = self.ids.internal
        return {i: p for p in ids if (i := read(p)) is not None}

    def search_bm25(self, terms: list[str], k: int, within: list[str] | None = None,
                    counted: list[str] | None = None) -> list[tuple[int, float]]:
        show = self.ids.public
        return [(show(c), s) for c, s in self._store.search_bm25(terms, k, within, counted)]

    def search_vector(self, vector: np.ndarray, k: int,
                      within: list[str] | None = None) -> list[tuple[int, float]]:
        show = self.ids.public
        return [(show(c), s) for c, s in self._store.search_vector(vector, k, within)]

    def chunks(self, ids: Iterable[int]) -> dict[int, Hit]:
        asked = self._inward(ids)
        return {asked[c]: replace(h, chunk_id=asked[c])
                for c, h in self._store.chunks(asked).items()}

    def chunk_docs(self, ids: Iterable[int]) -> dict[int, str]:
        asked = self._inward(ids)
        return {asked[c]: d for c, d in self._store.chunk_docs(asked).items()}


def stored_key(store: object) -> bytes:
    """The knowledge base's secret, made and stored on first use (`claim_meta`: when two
    processes make one at once, both keep the one stored first). A store that cannot be
    written (a full disk) gets a key for this process alone: ids stay unguessable, but
    differ after a restart until one is stored."""
    found = store.get_meta(KEY_META)  # type: ignore[attr-defined]
    if found is None:
        try:
            found = store.claim_meta(KEY_META, secrets.token_hex(32))  # type: ignore[attr-defined]
        except UserError as exc:
            log.warning("chunk id key not stored (%s): this process's ids are its own", exc)
            found = secrets.token_hex(32)
    return bytes.fromhex(found)
