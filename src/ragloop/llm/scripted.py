"""A ChatModel that plays a script, for tests: no network, fully deterministic.

Each script item is a ChatResponse, a str (shorthand for a text-only reply), or a callable
`(messages, tools, tool_choice) -> ChatResponse | str` for replies that depend on the request.
Every call is recorded in `.calls`. `stream` plays the same reply as a stream: with
`wire="openai"` or `"anthropic"` as the chunks / events that provider's SDK yields (the shapes
its docs show: `openai_chunks`, `anthropic_events`), assembled by that adapter's own code;
with `wire="text"` (the default) as word-sized pieces of its text. Like a real API, a reply's
tool calls are dropped when the caller passed tool_choice="none" (unless `traits` say the
model ignores tool_choice, as Ollama does), and every reply counts one call in its usage.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ragloop.llm.base import (
    ChatRequest,
    ChatResponse,
    ChatStream,
    Message,
    ModelTraits,
    Purpose,
    ToolChoice,
    ToolSpec,
)

Reply = Callable[[list[Message], list[ToolSpec] | None, ToolChoice], "ChatResponse | str"]
ScriptItem = ChatResponse | str | Reply
Wire = Literal["text", "openai", "anthropic"]
# Characters of a tool call's arguments per streamed piece: small, so a test sees an argument
# object split mid-key across chunks.
ARGUMENT_PIECE = 7


@dataclass
class ScriptedCall:
    messages: list[Message]
    system: str
    tools: list[ToolSpec] | None
    tool_choice: ToolChoice
    max_tokens: int = 1024
    temperature: float = 0.0
    purpose: Purpose = "loop"
    json_schema: dict[str, Any] | None = None
    response: ChatResponse | None = field(default=None, repr=False)


class ScriptedChat:
    def __init__(
        self,
        script: Sequence[ScriptItem],
        *,
        repeat_last: bool = False,
        name: str = "scripted:test",
        traits: ModelTraits | None = None,
        wire: Wire = "text",
    ) -> None:
        """`repeat_last=True` replays the last item once the script runs out; otherwise running
        out raises AssertionError naming how many calls were scripted."""
        self.script = list(script)
        self.repeat_last = repeat_last
        self.name = name
        self.traits = traits or ModelTraits()
        self.wire: Wire = wire
        self.calls: list[ScriptedCall] = []

    @property
    def remaining(self) -> int:
        return max(len(self.script) - len(self.calls), 0)

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        req = ChatRequest(**options)
        call = ScriptedCall(
            messages=copy.deepcopy(list(messages)),
            system=req.system,
            tools=list(req.tools) if req.tools is not None else None,
            tool_choice=req.tool_choice,
            max_tokens=req.max_tokens,
            temperature=req.temperature,
            purpose=req.purpose,
            json_schema=req.json_schema,
        )
        index = len(self.calls)
        self.calls.append(call)
        if index < len(self.script):
            item = self.script[index]
        elif self.repeat_last and self.script:
            item = self.script[-1]
        else:
            raise AssertionError(
                f"ScriptedChat: script exhausted: call #{index + 1} but only "
                f"{len(self.script)} replies scripted (last user/tool message: "
                f"{_last_content(messages)!r})"
            )
        reply = item(call.messages, call.tools, req.tool_choice) if callable(item) else item
        if isinstance(reply, str):
            reply = ChatResponse(text=reply)
        if not isinstance(reply, ChatResponse):
            raise TypeError(f"ScriptedChat: script item #{index + 1} gave {type(reply).__name__}")
        # copy, so a repeated item is never mutated and callers can't edit the script
        usage = replace(reply.usage, calls=reply.usage.calls or 1)
        out = replace(
            reply, tool_calls=list(reply.tool_calls), usage=usage, model=reply.model or self.name
        )
        if req.tool_choice == "none" and out.tool_calls and self.traits.honours_tool_choice:
            out.tool_calls = []
            if out.stop_reason in ("", "tool_use", "tool_calls"):
                out.stop_reason = "end_turn"
        call.response = out
        return out


    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        """The next scripted reply, streamed on `self.wire` (see the module docstring)."""
        reply = self.chat(messages, **options)
        tool_choice = ChatRequest(**options).tool_choice
        if self.wire == "openai":
            from ragloop.llm.openai import assemble_chunks

            out = yield from assemble_chunks(openai_chunks(reply), reply.model,
                                             tool_choice=tool_choice, priced=False)
        elif self.wire == "anthropic":
            from ragloop.llm.anthropic import assemble_events

            out = yield from assemble_events(anthropic_events(reply), reply.model,
                                             tool_choice=tool_choice)
        else:
            yield from text_pieces(reply.text)
            return reply
        # the assembled reply, with the script's own usage (the wire carries tokens only)
        out = replace(out, usage=reply.usage, raw_blocks=out.raw_blocks or reply.raw_blocks)
        assert self.calls[-1].response is not None
        self.calls[-1].response = out
        return out


def text_pieces(text: str) -> list[str]:
    """The text as a model streams it, roughly: each word with the space after it."""
    return re.findall(r"\s*\S+\s*?(?=\s|$)|\s+$", text) if text else []


def _argument_pieces(arguments: str) -> list[str]:
    return [arguments[i:i + ARGUMENT_PIECE] for i in range(0, len(arguments), ARGUMENT_PIECE)]


def openai_chunks(reply: ChatResponse) -> list[Any]:
    """The reply as openai-python's `ChatCompletionChunk`s, in the order the API sends them
    (types/chat/chat_completion_chunk.py): a role delta, the content a word per chunk, each
    tool call's id and name then its arguments in pieces (delta.tool_calls[].index), a last
    delta with finish_reason, and the usage chunk with empty choices (include_usage)."""
    from openai.types.chat import ChatCompletionChunk

    head = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1,
            "model": reply.model}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in text_pieces(reply.text)]
    for index, call in enumerate(reply.tool_calls):
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(
            call.arguments)
        deltas.append({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                       "function": {"name": call.name, "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                   for piece in _argument_pieces(arguments)]
    finish = {"truncated": "length", "refused": "content_filter"}.get(
        str(reply.finish), "tool_calls" if reply.tool_calls else "stop")
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    u = reply.usage
    chunks.append({**head, "choices": [], "usage": {
        "prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens}})
    return [ChatCompletionChunk.model_validate(c) for c in chunks]


def anthropic_events(reply: ChatResponse) -> list[Any]:
    """The reply as the anthropic SDK's `RawMessageStreamEvent`s, in the order the API sends
    them (the streaming page: message_start, per block content_block_start / _delta / _stop,
    message_delta with the stop reason and output usage, message_stop); tool input as
    `input_json_delta` pieces."""
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    u = reply.usage
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": reply.model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": u.input_tokens, "output_tokens": 1}}}]
    index = 0
    if reply.text:
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": piece}}
                   for piece in text_pieces(reply.text)]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.tool_calls:
        arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(
            call.arguments)
        events.append({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call.id, "name": call.name, "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}
                   for piece in _argument_pieces(arguments)]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    stop = {"truncated": "max_tokens", "refused": "refusal"}.get(
        str(reply.finish), "tool_use" if reply.tool_calls else "end_turn")
    events.append({"type": "message_delta", "delta": {"stop_reason": stop,
                                                      "stop_sequence": None},
                   "usage": {"output_tokens": u.output_tokens}})
    events.append({"type": "message_stop"})
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    return [adapter.validate_python(e) for e in events]


def _last_content(messages: list[Message]) -> str:
    return messages[-1].content[:80] if messages else ""
