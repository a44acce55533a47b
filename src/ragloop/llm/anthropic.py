"""ChatModel on the Anthropic Messages API, through the official `anthropic` SDK (2.x).

- The system prompt goes as a list of one text block, and the last tool carries a
  `cache_control: ephemeral` breakpoint, so the (system, tools) prefix is cached across the
  steps of one run.
- tool_choice "none" keeps the tools in the request (same cache prefix, and history with
  tool_use blocks stays valid) and sends `{"type": "none"}`; "required" is `{"type": "any"}`.
- `temperature` is accepted for the protocol and NOT sent: SDK 2.x speaks API version
  2026-10-21, which has no sampling parameters (the SDK removed them; the API answers 400).
- The SDK retries 408/409/429/5xx and connection errors itself (`max_retries`, backoff,
  `retry-after`); what it finally raises becomes ProviderError, or ConfigError for a 401.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic

from ragloop.errors import ConfigError
from ragloop.llm.base import ChatResponse, Message, ToolCall, ToolChoice, ToolSpec
from ragloop.llm.pricing import cost_usd
from ragloop.llm.sdk_errors import translate
from ragloop.types import Usage

EPHEMERAL = {"type": "ephemeral"}
API_KEY_ENV = "ANTHROPIC_API_KEY"


class AnthropicChat:
    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
    ) -> None:
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigError(
                f"anthropic:{model} needs an API key: set {API_KEY_ENV} "
                "(or pick another model with RAGLOOP_MODEL, e.g. 'offline')"
            )
        self.model = model
        self.name = f"anthropic:{model}"
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = anthropic.Anthropic(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def chat(
        self,
        messages: list[Message],
        *,
        system: str = "",
        tools: list[ToolSpec] | None = None,
        tool_choice: ToolChoice = "auto",
        max_tokens: int = 1024,
        temperature: float = 0.0,  # not sent, see the module docstring
    ) -> ChatResponse:
        kwargs = build_request(
            self.model,
            messages,
            system=system,
            tools=tools,
            tool_choice=tool_choice,
            max_tokens=max_tokens,
        )
        try:
            resp = self._client.messages.create(**kwargs)
        except anthropic.AnthropicError as e:
            raise translate(anthropic, e, provider="anthropic", key_env=API_KEY_ENV,
                            timeout=self.timeout, retries=self.max_retries,
                            base_url=self._client.base_url) from e
        return parse_response(resp, self.model, tool_choice=tool_choice)


def build_request(
    model: str,
    messages: list[Message],
    *,
    system: str = "",
    tools: list[ToolSpec] | None = None,
    tool_choice: ToolChoice = "auto",
    max_tokens: int = 1024,
) -> dict[str, Any]:
    """The keyword arguments of `messages.create` (plain JSON-able dicts)."""
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": to_anthropic_messages(messages),
    }
    if system:
        kwargs["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    if tools:
        specs: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
        specs[-1]["cache_control"] = EPHEMERAL
        kwargs["tools"] = specs
        kwargs["tool_choice"] = {
            "type": {"auto": "auto", "none": "none", "required": "any"}[tool_choice]
        }
    return kwargs


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Provider-neutral messages → Anthropic turns of content blocks.

    Tool results become `tool_result` blocks in a user turn; consecutive turns of the same role
    (several tool results, a tool result then a user note) merge into one turn, with the
    tool_result blocks first as the API requires.
    """
    turns: list[dict[str, Any]] = []
    for m in messages:
        blocks: list[dict[str, Any]] = []
        if m.role == "tool":
            role = "user"
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id or "",
                    "content": m.content or "(empty result)",
                }
            )
        elif m.role == "assistant":
            role = "assistant"
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for tc in m.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tc.id,
                        "name": tc.name,
                        "input": tc.arguments if isinstance(tc.arguments, dict) else {},
                    }
                )
        else:
            role = "user"
            if m.content:
                blocks.append({"type": "text", "text": m.content})
        if not blocks:
            continue  # the API rejects empty text blocks and empty turns
        if turns and turns[-1]["role"] == role:
            prev = turns[-1]["content"]
            if role == "user":
                results = [b for b in prev + blocks if b["type"] == "tool_result"]
                others = [b for b in prev + blocks if b["type"] != "tool_result"]
                turns[-1]["content"] = results + others
            else:
                prev.extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def parse_response(resp: Any, model: str, *, tool_choice: ToolChoice = "auto") -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in resp.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            args = block.input
            if isinstance(args, dict):
                calls.append(ToolCall(id=block.id, name=block.name, arguments=args))
            else:
                raw = args if isinstance(args, str) else json.dumps(args)
                calls.append(
                    ToolCall(id=block.id, name=block.name, arguments={}, raw_arguments=raw)
                )
    if tool_choice == "none":
        calls = []  # the contract: with "none" the model cannot call tools
    u = resp.usage
    usage = Usage(
        input_tokens=getattr(u, "input_tokens", 0) or 0,
        output_tokens=getattr(u, "output_tokens", 0) or 0,
        cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
        calls=1,
    )
    resp_model = getattr(resp, "model", None) or model
    usage.cost_usd = cost_usd(resp_model, usage)
    return ChatResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=usage,
        stop_reason=str(resp.stop_reason or ""),
        model=resp_model,
    )
