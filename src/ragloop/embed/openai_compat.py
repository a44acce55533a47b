"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, ...).

Uses the official ``openai`` SDK, whose client retries connection errors, 408/409/429 and 5xx
with backoff. Inputs go in batches; rows come back in input order, L2-normalised, float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ragloop.core.errors import ProviderError
from ragloop.embed.base import SymmetricEmbedder, normalize

if TYPE_CHECKING:
    from openai import OpenAI

_DIM_PROBE = "dimension probe"


class OpenAICompatEmbedder(SymmetricEmbedder):
    def __init__(
        self,
        model: str,
        base_url: str | None,
        api_key: str | None = None,
        dim: int | None = None,
        *,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 3,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url
        self.batch_size = max(1, int(batch_size))
        self._dim = dim
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: OpenAI | None = None

    @property
    def client(self) -> OpenAI:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self._timeout,
                max_retries=self._max_retries,
            )
        return self._client

    @property
    def dim(self) -> int:
        """Declared, or discovered from the first response (one probe request if none yet)."""
        if self._dim is None:
            self.embed([_DIM_PROBE])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = [
            self._embed_batch(texts[i : i + self.batch_size])
            for i in range(0, len(texts), self.batch_size)
        ]
        return normalize(np.concatenate(parts, axis=0))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        import openai

        # the API refuses empty strings; an empty text has no meaning to embed anyway
        inputs = [t if t.strip() else " " for t in batch]
        try:
            response = self.client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except openai.APIError as e:
            raise ProviderError(
                f"embedding endpoint {self.base_url or 'api.openai.com'} failed for model "
                f"{self.model!r}: {e}"
            ) from e
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(batch):
            raise ProviderError(
                f"embedding endpoint returned {len(data)} vectors for {len(batch)} inputs"
            )
        vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
        if vectors.ndim != 2:
            raise ProviderError("embedding endpoint returned vectors of differing lengths")
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise ProviderError(
                f"embedding model {self.model!r} returned {vectors.shape[1]} dimensions, "
                f"expected {self._dim}"
            )
        return vectors

    def __repr__(self) -> str:
        return f"OpenAICompatEmbedder(model={self.model!r}, base_url={self.base_url!r})"
