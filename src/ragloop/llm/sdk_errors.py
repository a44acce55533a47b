"""One translation of SDK exceptions into ragloop's error tiers, for both official SDKs.

The anthropic and openai SDKs share one exception shape (AuthenticationError, APITimeoutError
under APIConnectionError, APIStatusError with status_code/body), so one mapping serves both:
a rejected key names its fix (ConfigError); everything else fails the call (ProviderError),
which the loop turns into a `failed` run that keeps the evidence gathered so far.
"""

from __future__ import annotations

import json
from types import ModuleType

from ragloop.core.errors import ConfigError, ProviderError


def short_body(body: object) -> str:
    """The useful part of an error body: the provider's message when it has one."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:200]
        return json.dumps(body, default=str)[:200]
    return str(body or "")[:200]


def translate(sdk: ModuleType, exc: Exception, *, provider: str, key_env: str,
              timeout: float, retries: int, base_url: object, hint_404: str = ""
              ) -> Exception:
    """The ragloop error to raise for `exc`, an exception of SDK module `sdk`."""
    if isinstance(exc, sdk.AuthenticationError):
        return ConfigError(
            f"{provider} rejected the API key (HTTP 401): set {key_env} to a valid key")
    if isinstance(exc, sdk.APITimeoutError):  # before APIConnectionError, its base class
        return ProviderError(
            f"{provider}: request timed out after {timeout:g}s ({retries} retries)")
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError(
            f"{provider}: cannot connect to {base_url} ({retries} retries): {exc.message}")
    if isinstance(exc, sdk.APIStatusError):
        detail = getattr(exc, "api_message", None) or short_body(exc.body) or exc.message
        hint = hint_404 if exc.status_code == 404 else ""
        return ProviderError(f"{provider}: HTTP {exc.status_code}: {detail}"[:300] + hint)
    credentials = getattr(sdk, "CredentialsError", None)
    if credentials is not None and isinstance(exc, credentials):
        return ConfigError(f"{provider} credentials: {exc}; set {key_env}")
    return ProviderError(f"{provider}: {type(exc).__name__}: {exc}"[:300])


# words of a provider's error saying the request (prompt plus max_tokens) does not fit the
# model's context window
CONTEXT_FULL = ("context length", "context window", "maximum context", "exceeds the context",
                "n_ctx", "too many tokens")


def context_full(message: str) -> bool:
    """A provider's error `message` says the request did not fit the context window."""
    lowered = message.lower()
    return any(n in lowered for n in CONTEXT_FULL)


# (words in a provider's error, the fix to name); the first that matches wins
FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("not found", "404", "does not exist", "retired"),
     "the model id is unknown to this server: retired, misspelt or not pulled (Anthropic and"
     " OpenAI list current ids in their models pages; `ollama pull <model>`; llama.cpp serves"
     " the name given by --alias / --model_alias)"),
    (("--jinja",), "start llama-server with --jinja"),
    (("enable-auto-tool-choice", "tool-call-parser"),
     "start vLLM with --enable-auto-tool-choice --tool-call-parser <parser for the model>"),
    (("does not support tools", "tools are not supported", "tool use is not supported"),
     "this model has no tool support: pick one that has it, or use --driver pipeline"),
    (CONTEXT_FULL,
     "the context is too small: raise it on the server (llama-server -c, Ollama"
     " OLLAMA_CONTEXT_LENGTH or num_ctx, vLLM --max-model-len); a run needs about 16k tokens"),
    (("connect",), "nothing answers at that address: is the server running, and is the base"
                   " URL right (it usually ends in /v1)?"),
)


def fix_for(message: str) -> str:
    """The fix for a provider error a retry cannot mend, named in words; "" when unknown."""
    lowered = message.lower()
    for needles, fix in FIXES:
        if any(n.lower() in lowered for n in needles):
            return fix
    return ""
