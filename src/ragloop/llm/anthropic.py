"""ChatModel on the Anthropic Messages API, through the official `anthropic` SDK (2.x).

What the current API requires, and where it is written:
- An assistant turn goes back exactly as it came (every content block in its order: thinking,
  redacted_thinking with their signatures, text, tool_use). Current models think by default and
  the API rejects a tool-use turn rebuilt without its thinking block (thinking-tool-workflows
  page; `types/thinking_block.py`: "pass them back exactly as received"). `parse_response` keeps
  `raw_blocks`; `to_anthropic_messages` sends them verbatim.
- Sampling parameters are not sent: SDK 2.x speaks API version 2026-10-21, whose
  `messages.create` has no `temperature` (MIGRATION.md v1; the API answers 400).
- Effort and JSON: `output_config={"effort": ..., "format": {"type": "json_schema", ...}}`
  (`types/output_config_param.py`): low effort for decisions, medium for the loop; thinking tokens
  count against `max_tokens` (`messages.create` docstring), so budgets leave room for them.
- Stop reasons (`types/stop_reason.py`, handling-stop-reasons page): `max_tokens` and
  `model_context_window_exceeded` are truncation, `refusal` carries `stop_details`.
- Forced tool use (`tool_choice` any / tool) answers 400 on models that think by default
  (thinking-tool-workflows page), so those declare `forced_tool_choice=False`.
- Caching: the system prompt carries a breakpoint and the top-level `cache_control` lets the API
  move one forward as the conversation grows (prompt-caching page, "automatic caching").
- The SDK retries 408/409/429/5xx and connection errors itself (`max_retries`, backoff,
  `retry-after`); what it finally raises becomes ProviderError, or ConfigError for a 401.
  `ANTHROPIC_BASE_URL` (a gateway) is read by the SDK when no base_url is given.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import anthropic

from ragloop.core.errors import ConfigError
from ragloop.core.types import Usage
from ragloop.llm.base import (
    ChatRequest,
    ChatResponse,
    ChatStream,
    Finish,
    ForceTool,
    Message,
    ModelTraits,
    ToolCall,
    ToolChoice,
    without_length_bounds,
)
from ragloop.llm.pricing import cost_usd
from ragloop.llm.sdk_errors import translate

EPHEMERAL = {"type": "ephemeral"}
API_KEY_ENV = "ANTHROPIC_API_KEY"
EFFORT: dict[str, str] = {"decision": "low", "loop": "medium", "answer": "medium"}
TRUNCATING_STOPS = ("max_tokens", "model_context_window_exceeded")

# Families that think unless told otherwise (Claude 5 and later); they reject forced tool use.
_THINKS_BY_DEFAULT = re.compile(r"^claude-(fable|mythos)|^claude-[a-z]+-[5-9]")
# Families older than `output_config` (effort came with Opus 4.5 / Sonnet 4.6; structured
# outputs with Sonnet 4.5 / Opus 4.1 / Haiku 4.5).
_NO_EFFORT = ("claude-3", "claude-haiku-4", "claude-sonnet-4-5", "claude-sonnet-4-0",
              "claude-sonnet-4-2", "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-2")
_NO_JSON_SCHEMA = ("claude-3", "claude-sonnet-4-0", "claude-sonnet-4-2", "claude-opus-4-0",
                   "claude-opus-4-2")


def traits_for(model: str) -> ModelTraits:
    name = model.lower()
    return ModelTraits(forced_tool_choice=not _THINKS_BY_DEFAULT.match(name),
                       honours_tool_choice=True,
                       json_schema_output=not name.startswith(_NO_JSON_SCHEMA))


def takes_effort(model: str) -> bool:
    return not model.lower().startswith(_NO_EFFORT)


class AnthropicChat:
    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 300.0,
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
        self.traits = traits_for(model)
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = anthropic.Anthropic(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        # temperature is not sent, see the module docstring
        req = self._request(options)
        try:
            resp = self._client.messages.create(**build_request(self.model, messages, req))
        except anthropic.AnthropicError as e:
            raise self._error(e) from e
        return parse_response(resp, self.model, tool_choice=req.tool_choice)

    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        """`chat` with `stream=True`: the raw `RawMessageStreamEvent`s (streaming page of the
        API docs; the SDK's `messages.create(..., stream=True)`), assembled by
        `assemble_events`."""
        req = self._request(options)
        try:
            events = self._client.messages.create(**build_request(self.model, messages, req),
                                                  stream=True)
        except anthropic.AnthropicError as e:
            raise self._error(e) from e
        try:
            return (yield from assemble_events(events, self.model,
                                               tool_choice=req.tool_choice))
        except anthropic.AnthropicError as e:  # an `error` event midway (overloaded_error)
            raise self._error(e) from e
        finally:
            events.close()

    def _request(self, options: dict[str, Any]) -> ChatRequest:
        req = ChatRequest(**options)
        return req if self.traits.json_schema_output else replace(req, json_schema=None)

    def _error(self, exc: anthropic.AnthropicError) -> Exception:
        hint = (f" (model {self.model!r} not found: retired? See the models overview for"
                " current ids, e.g. claude-sonnet-5-5, or run `ragloop check-model`)")
        return translate(anthropic, exc, provider="anthropic", key_env=API_KEY_ENV,
                         timeout=self.timeout, retries=self.max_retries,
                         base_url=self._client.base_url, hint_404=hint)


def _tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if isinstance(choice, ForceTool):
        return {"type": "tool", "name": choice.name}
    return {"type": {"auto": "auto", "none": "none", "required": "any"}[choice]}


def build_request(model: str, messages: list[Message], request: ChatRequest | None = None,
                  **options: Any) -> dict[str, Any]:
    """The keyword arguments of `messages.create` (plain JSON-able dicts). `options`:
    ChatRequest's fields, without `request`."""
    req = request or ChatRequest(**options)
    system, tools, tool_choice = req.system, req.tools, req.tool_choice
    max_tokens, purpose, json_schema = req.max_tokens, req.purpose, req.json_schema
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": to_anthropic_messages(messages),
        "cache_control": EPHEMERAL,
    }
    if system:
        kwargs["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    output_config: dict[str, Any] = {}
    if takes_effort(model):
        output_config["effort"] = EFFORT[purpose]
    if json_schema is not None:
        output_config["format"] = {"type": "json_schema",
                                   "schema": without_length_bounds(json_schema)}
    if output_config:
        kwargs["output_config"] = output_config
    if tools:
        kwargs["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
        kwargs["tool_choice"] = _tool_choice(tool_choice)
    return kwargs


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    if m.raw_blocks is not None:
        return [dict(b) for b in m.raw_blocks]  # verbatim: thinking blocks and signatures
    blocks: list[dict[str, Any]] = []
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    for tc in m.tool_calls:
        blocks.append({"type": "tool_use", "id": tc.id, "name": tc.name,
                       "input": tc.arguments if isinstance(tc.arguments, dict) else {}})
    return blocks


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
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "",
                                      "content": m.content or "(empty result)"}
            if m.is_error:
                result["is_error"] = True
            blocks.append(result)
        elif m.role == "assistant":
            role = "assistant"
            blocks = _assistant_blocks(m)
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


def _refusal_text(resp: Any) -> str:
    details = getattr(resp, "stop_details", None)
    if details is None:
        return "the model declined to answer"
    category = getattr(details, "category", None)
    explanation = getattr(details, "explanation", None)
    parts = [p for p in (f"category {category}" if category else "", explanation or "") if p]
    return "; ".join(parts) or "the model declined to answer"


def parse_response(resp: Any, model: str, *, tool_choice: ToolChoice = "auto") -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    raw_blocks: list[dict[str, Any]] = []
    for block in resp.content or []:
        raw_blocks.append(block.to_dict(mode="json", warnings=False))
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
    stop = str(resp.stop_reason or "")
    finish = (Finish.TRUNCATED if stop in TRUNCATING_STOPS
              else Finish.REFUSED if stop == "refusal" else Finish.DONE)
    u = resp.usage
    usage = Usage(
        input_tokens=getattr(u, "input_tokens", 0) or 0,
        output_tokens=getattr(u, "output_tokens", 0) or 0,
        cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
        calls=1,
    )
    resp_model = getattr(resp, "model", None) or model
    usage.cost_usd = cost_usd("anthropic", resp_model, usage)
    return ChatResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=usage,
        stop_reason=stop,
        model=resp_model,
        finish=finish,
        refusal=_refusal_text(resp) if finish is Finish.REFUSED else "",
        raw_blocks=raw_blocks,
    )


def _tool_input(buffer: str) -> Any:
    """A tool_use block's input from its `partial_json` pieces joined: the object, or the text
    itself when it is not JSON (parse_response keeps it as raw_arguments)."""
    if not buffer.strip():
        return {}
    try:
        return json.loads(buffer)
    except ValueError:
        return buffer


def assemble_events(events: Iterable[Any], model: str, *,
                    tool_choice: ToolChoice = "auto") -> ChatStream:
    """A streamed reply (`RawMessageStreamEvent`s) → its text pieces as they come, then the
    ChatResponse `parse_response` makes of the assembled message.

    The flow, from the SDK's `types/raw_message_stream_event.py` and the streaming page of the
    API docs: `message_start` (the message, its input usage), per content block
    `content_block_start` (the block, empty) then `content_block_delta`s at its `index`
    (`text_delta`, `input_json_delta` whose `partial_json` pieces join into the tool input,
    `thinking_delta`, `signature_delta`) and `content_block_stop`; `message_delta` carries the
    stop reason and the cumulative usage (`MessageDeltaUsage`: output tokens, and input/cache
    counts when the server updates them); `message_stop`. Thinking blocks and their
    signatures are kept whole, so the turn can be sent back verbatim."""
    message: dict[str, Any] = {"id": "", "type": "message", "role": "assistant", "model": model,
                               "content": [], "stop_reason": None, "usage": {}}
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for event in events:
        kind = event.type
        if kind == "message_start":
            message = event.message.to_dict(mode="json", warnings=False)
        elif kind == "content_block_start":
            blocks[event.index] = event.content_block.to_dict(mode="json", warnings=False)
            if blocks[event.index].get("type") == "tool_use":
                inputs[event.index] = ""
        elif kind == "content_block_delta":
            block, delta = blocks[event.index], event.delta
            if delta.type == "text_delta":
                block["text"] = block.get("text", "") + delta.text
                yield delta.text
            elif delta.type == "input_json_delta":
                inputs[event.index] = inputs.get(event.index, "") + delta.partial_json
            elif delta.type == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif delta.type == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.signature
        elif kind == "content_block_stop" and event.index in inputs:
            blocks[event.index]["input"] = _tool_input(inputs.pop(event.index))
        elif kind == "message_delta":
            message["stop_reason"] = event.delta.stop_reason
            if event.delta.stop_details is not None:
                message["stop_details"] = event.delta.stop_details.to_dict(mode="json")
            usage = event.usage.to_dict(mode="json", exclude_none=True)
            message["usage"] = {**(message.get("usage") or {}), **usage}
    for index, buffer in inputs.items():  # a stream that ended inside a tool_use block
        blocks[index]["input"] = _tool_input(buffer)
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return parse_response(anthropic.types.Message.construct(**message), model,
                          tool_choice=tool_choice)
