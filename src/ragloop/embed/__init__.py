"""Embedders: the shipped local MiniLM (default, offline), any OpenAI-compatible endpoint, a cache.

Nothing heavy is imported here: torch and the SDKs load on first use.
"""

from __future__ import annotations

import os

from ragloop.core.config import LOCAL_EMBEDDER, MULTILINGUAL_EMBEDDER, env_setting
from ragloop.core.errors import ConfigError
from ragloop.embed.base import Embedder, normalize
from ragloop.embed.cache import CachedEmbedder, text_hash

__all__ = ["CachedEmbedder", "Embedder", "make_embedder", "normalize", "text_hash"]

_LOCAL_SPECS = {"local", "local:default", LOCAL_EMBEDDER}
_VALID_FORMS = (
    f"'{LOCAL_EMBEDDER}' (or 'local'), '{MULTILINGUAL_EMBEDDER}',"
    " or 'openai:<model>' (e.g. openai:text-embedding-3-small)"
)


def make_embedder(
    spec: str, base_url: str | None = None, *, batch_size: int | None = None
) -> Embedder:
    """Build the embedder a spec names: ``local:all-MiniLM-L6-v2`` or ``openai:<model>``."""
    spec = (spec or "").strip()
    if spec in _LOCAL_SPECS:
        from ragloop.embed.local import LocalEmbedder

        return LocalEmbedder(batch_size=batch_size or 32)
    if spec == MULTILINGUAL_EMBEDDER:
        from ragloop.embed.e5 import E5Embedder

        return E5Embedder(batch_size=batch_size or 32)
    provider, _, model = spec.partition(":")
    if provider == "openai":
        if not model.strip():
            raise ConfigError(f"embedder {spec!r} names no model; valid forms: {_VALID_FORMS}")
        from ragloop.embed.openai_compat import OpenAICompatEmbedder

        url = (env_setting("embed_base_url", base_url or None)
               or os.environ.get("OPENAI_BASE_URL") or None)
        return OpenAICompatEmbedder(
            model.strip(),
            base_url=url,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
            batch_size=batch_size or 64,
        )
    raise ConfigError(f"unknown embedder {spec!r}; valid forms: {_VALID_FORMS}")
