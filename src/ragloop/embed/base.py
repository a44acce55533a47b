"""The Embedder protocol: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    #: recorded in the knowledge base; another name on open is an EmbedderMismatchError
    name: str
    dim: int

    #: False when queries are embedded apart from passages (e5: "query: " / "passage: ")
    symmetric: bool

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, each row of unit length."""
        ...

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Search queries as the model wants them embedded (`embed` for a symmetric model)."""
        ...


class SymmetricEmbedder:
    """For embedders whose queries are embedded as their passages are (MiniLM, an
    OpenAI-compatible endpoint): `embed_query` is `embed`."""

    symmetric = True

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
