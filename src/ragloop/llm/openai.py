"""ChatModel on OpenAI chat.completions, through the official `openai` SDK (3.x).

Works against any OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio) by
`base_url`; then the API key may be anything ("not-needed" by default), no cost is counted, and
the request uses the widely supported `max_tokens` (api.openai.com gets `max_completion_tokens`,
which its reasoning models require; they also reject `temperature`, which is then left out).

Tool-call arguments that are not a JSON object never raise: `arguments={}` and the text is kept
in `raw_arguments`. The SDK retries 408/409/429/5xx and connection errors itself; what it finally
raises becomes ProviderError, or ConfigError for a 401.
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

from ragloop.errors import ConfigError, ProviderError
from ragloop.llm.base import ChatResponse, Message, ToolCall, ToolChoice, ToolSpec
from ragloop.llm.pricing import cost_usd
from ragloop.llm.sdk_errors import translate
from ragloop.types import Usage

API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_HOST = "api.openai.com"
_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")


class OpenAIChat:
    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        *,
        provider: str = "openai",
    ) -> None:
        official = not base_url or OPENAI_HOST in base_url
        key = api_key or os.environ.get(API_KEY_ENV) or (None if official else "not-needed")
        if not key:
            raise ConfigError(
                f"{provider}:{model} needs an API key: set {API_KEY_ENV} "
                "(or set a base_url / OPENAI_BASE_URL for a local OpenAI-compatible server)"
            )
        self.model = model
        self.provider = provider
        self.name = f"{provider}:{model}"
        self.base_url = base_url
        self.official = official
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = openai.OpenAI(
            api_key=key,
            base_url=base_url or f"https://{OPENAI_HOST}/v1",
            timeout=timeout,
            max_retries=max_retries,
        )

    def chat(
        self,
        messages: list[Message],
        *,
        system: str = "",
        tools: list[ToolSpec] | None = None,
        tool_choice: ToolChoice = "auto",
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> ChatResponse:
        kwargs = build_request(
            self.model,
            messages,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            max_tokens=max_tokens,
            temperature=temperature,
            official=self.official,
        )
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except openai.OpenAIError as e:
            hint = ("" if self.official else
                    f" (is model {self.model!r} available at {self._client.base_url}?)")
            raise translate(openai, e, provider=self.provider, key_env=API_KEY_ENV,
                            timeout=self.timeout, retries=self.max_retries,
                            base_url=self._client.base_url, hint_404=hint) from e
        return parse_response(resp, self.model, tool_choice=tool_choice, priced=self.official)


def build_request(
    model: str,
    messages: list[Message],
    *,
    system: str = "",
    tools: list[ToolSpec] | None = None,
    tool_choice: ToolChoice = "auto",
    max_tokens: int = 1024,
    temperature: float = 0.0,
    official: bool = True,
) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` (plain JSON-able dicts)."""
    kwargs: dict[str, Any] = {"model": model, "messages": to_openai_messages(messages, system)}
    reasoning = official and model.lower().startswith(_NO_TEMPERATURE_PREFIXES)
    if official:
        kwargs["max_completion_tokens"] = max_tokens
    else:
        kwargs["max_tokens"] = max_tokens
    if not reasoning:
        kwargs["temperature"] = temperature
    if tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        kwargs["tool_choice"] = tool_choice
    return kwargs


def to_openai_messages(messages: list[Message], system: str = "") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {
                            "name": tc.name,
                            "arguments": tc.raw_arguments
                            if tc.raw_arguments is not None
                            else json.dumps(tc.arguments),
                        },
                    }
                    for tc in m.tool_calls
                ]
            elif msg["content"] is None:
                msg["content"] = ""
            out.append(msg)
        else:
            out.append({"role": "user", "content": m.content})
    return out


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments → (dict, raw text if it was not a JSON object). Never raises."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return {}, raw
    if isinstance(value, dict):
        return value, None
    return {}, raw


def parse_response(
    resp: Any, model: str, *, tool_choice: ToolChoice = "auto", priced: bool = True
) -> ChatResponse:
    if not getattr(resp, "choices", None):
        raise ProviderError(f"openai: response for {model} has no choices")
    choice = resp.choices[0]
    msg = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        call_id = getattr(tc, "id", None) or f"call_{i}"
        fn = getattr(tc, "function", None)
        if fn is not None:
            args, raw = parse_arguments(getattr(fn, "arguments", None))
            calls.append(ToolCall(id=call_id, name=fn.name, arguments=args, raw_arguments=raw))
        elif getattr(tc, "custom", None) is not None:
            calls.append(
                ToolCall(
                    id=call_id, name=tc.custom.name, arguments={}, raw_arguments=tc.custom.input
                )
            )
    if tool_choice == "none":
        calls = []  # the contract: with "none" the model cannot call tools
    usage = Usage(calls=1)
    u = getattr(resp, "usage", None)
    if u is not None:
        details = getattr(u, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
        written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
        prompt = getattr(u, "prompt_tokens", 0) or 0
        usage.input_tokens = max(prompt - cached - written, 0)
        usage.output_tokens = getattr(u, "completion_tokens", 0) or 0
        usage.cache_read_tokens = cached
        usage.cache_write_tokens = written
    resp_model = getattr(resp, "model", None) or model
    if priced:
        usage.cost_usd = cost_usd(resp_model, usage)
    return ChatResponse(
        text=msg.content or "",
        tool_calls=calls,
        usage=usage,
        stop_reason=str(choice.finish_reason or ""),
        model=resp_model,
    )
