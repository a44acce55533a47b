"""Chat models behind one protocol, chosen by a "provider:model" string.

anthropic:<model>   Anthropic Messages API (ANTHROPIC_API_KEY)
openai:<model>      OpenAI chat.completions, or any OpenAI-compatible server when
                    settings.base_url / OPENAI_BASE_URL is set
ollama:<model>      Ollama's OpenAI-compatible API at http://localhost:11434/v1
                    (settings.base_url overrides the address)
llamacpp:<model>    llama.cpp's llama-server or llama-cpp-python's server (settings.base_url /
                    OPENAI_BASE_URL, default http://127.0.0.1:8080/v1)
offline             no generative model: make_chat_model returns None
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ragloop.core.errors import ConfigError
from ragloop.llm.base import (
    ChatModel,
    ChatResponse,
    Message,
    ModelTraits,
    ToolCall,
    ToolChoice,
    ToolSpec,
)

if TYPE_CHECKING:
    from ragloop.core.config import Settings

OLLAMA_BASE_URL = "http://localhost:11434/v1"
LLAMACPP_BASE_URL = "http://127.0.0.1:8080/v1"
OFFLINE = ("offline", "none", "")

SPEC_FORMS = (
    "'anthropic:<model>' (e.g. anthropic:claude-sonnet-5-5), "
    "'openai:<model>' (e.g. openai:gpt-5.4-mini; any OpenAI-compatible server via "
    "RAGLOOP_BASE_URL or OPENAI_BASE_URL), 'ollama:<model>' (e.g. ollama:qwen2.5:7b), "
    "'llamacpp:<model>' (a llama.cpp server), or 'offline'"
)

__all__ = [
    "OLLAMA_BASE_URL",
    "ChatModel",
    "ChatResponse",
    "Message",
    "ModelTraits",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "make_chat_model",
]


def make_chat_model(spec: str | None, settings: Settings) -> ChatModel | None:
    """The ChatModel a spec names, or None for "offline". Raises ConfigError for a bad spec or a
    missing API key."""
    text = (spec or "").strip()
    if text.lower() in OFFLINE:
        return None
    provider, sep, model = text.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or not model:
        raise ConfigError(f"bad model {spec!r}: use {SPEC_FORMS}")
    timeout = settings.request_timeout_s
    retries = settings.max_retries
    if provider == "anthropic":
        from ragloop.llm.anthropic import AnthropicChat

        return AnthropicChat(model, timeout=timeout, max_retries=retries)
    if provider == "openai":
        from ragloop.llm.openai import OpenAIChat

        base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
        return OpenAIChat(model, base_url=base_url, timeout=timeout, max_retries=retries)
    if provider == "ollama":
        from ragloop.llm.openai import OpenAIChat

        return OpenAIChat(
            model,
            api_key="ollama",
            base_url=settings.base_url or OLLAMA_BASE_URL,
            timeout=timeout,
            max_retries=retries,
            provider="ollama",
            dialect="ollama",
        )
    if provider == "llamacpp":
        from ragloop.llm.openai import OpenAIChat

        base_url = (settings.base_url or os.environ.get("OPENAI_BASE_URL")
                    or LLAMACPP_BASE_URL)
        return OpenAIChat(model, api_key="not-needed", base_url=base_url, timeout=timeout,
                          max_retries=retries, provider="llamacpp", dialect="llamacpp")
    raise ConfigError(f"unknown model provider {provider!r} in {spec!r}: use {SPEC_FORMS}")
