"""An embedder wrapper that remembers vectors by (model name, sha256 of the text)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ragloop.embed.base import Embedder


class EmbeddingCache(Protocol):
    def get_embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]: ...
    def put_embeddings(self, model: str, items: dict[str, np.ndarray]) -> None: ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Embeds only what the cache lacks, each distinct text once; same name and dim as inner."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache, query_space: str = "") -> None:
        """`query_space`: queries are cached apart, under this name (a principal's: its
        search must not find a hidden passage's vector, or another user's query, in the
        cache, as the time of a cache hit would tell that the text is there)."""
        self.inner = inner
        self.cache = cache
        self.query_space = query_space
        self.misses = 0  # texts sent to the inner embedder so far (ingest reports it)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def symmetric(self) -> bool:
        return self.inner.symmetric

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.name, self.inner.embed)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries, where the inner model embeds them apart (e5); cached under their own key."""
        if self.query_space:
            return self._embed(texts, f"{self.name}#query@{self.query_space}",
                               self.inner.embed_query)
        if self.inner.symmetric:
            return self.embed(texts)
        return self._embed(texts, self.name + "#query", self.inner.embed_query)

    def _embed(self, texts: list[str], key: str,
               embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.inner.dim), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        unique = list(dict.fromkeys(hashes))
        found = self.cache.get_embeddings(key, unique)
        misses: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in found and h not in misses:
                misses[h] = t
        if misses:
            self.misses += len(misses)
            vectors = embed(list(misses.values()))
            new = {h: np.asarray(v, dtype=np.float32) for h, v in zip(misses, vectors, strict=True)}
            self.cache.put_embeddings(key, new)
            found = {**found, **new}
        return np.stack([np.asarray(found[h], dtype=np.float32) for h in hashes])
