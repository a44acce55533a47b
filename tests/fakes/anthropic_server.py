"""A fake Anthropic Messages API: `POST /v1/messages` on a real local HTTP server."""

from __future__ import annotations

import json
from typing import Any

from fakes._http import Delay, Fail, FakeJSONServer

__all__ = ["Delay", "Fail", "FakeAnthropicServer", "message", "redacted_thinking", "thinking",
           "tool_use"]


def tool_use(name: str, input: Any, id: str = "toolu_01") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def thinking(text: str, signature: str) -> dict[str, Any]:
    """A thinking block as the API returns it (types/thinking_block.py): with display
    "omitted" (the default on Claude 5 models) `thinking` is empty and only the signature
    carries it."""
    return {"type": "thinking", "thinking": text, "signature": signature}


def redacted_thinking(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def message(
    text: str | None = "ok",
    *,
    tool_uses: list[dict[str, Any]] | None = None,
    model: str = "claude-sonnet-4-5-20250929",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int = 0,
    cache_write: int = 0,
    stop_reason: str | None = None,
    blocks_before: list[dict[str, Any]] | None = None,
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Messages API response body; `blocks_before` (thinking blocks) come first, as the API
    sends them."""
    content: list[dict[str, Any]] = list(blocks_before or [])
    if text:
        content.append({"type": "text", "text": text})
    content.extend(tool_uses or [])
    body: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }
    if stop_details is not None:
        body["stop_details"] = stop_details
    return body


def _error(status: int) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": f"fake {status}"}}


# Characters per streamed piece of a tool's input JSON.
PIECE = 6


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str | None, Any]]:
    def delta(d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": index,
                                       "delta": d}

    kind = block["type"]
    out: list[tuple[str | None, Any]] = []
    if kind == "text":
        start = {"type": "text", "text": ""}
        words = [w for w in block["text"].replace(" ", " \0").split("\0") if w]
        out = [delta({"type": "text_delta", "text": w}) for w in words]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
        out = [delta({"type": "input_json_delta", "partial_json": raw[i:i + PIECE]})
               for i in range(0, len(raw), PIECE)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        if block["thinking"]:
            out.append(delta({"type": "thinking_delta", "thinking": block["thinking"]}))
        out.append(delta({"type": "signature_delta", "signature": block["signature"]}))
    else:  # redacted_thinking comes whole in its start event
        start = block
    return [("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": start}), *out,
            ("content_block_stop", {"type": "content_block_stop", "index": index})]


def stream(reply: dict[str, Any], request: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The message as the events the Messages API streams (the streaming page of the API
    docs): message_start with the input usage, each block's start / deltas / stop,
    message_delta with the stop reason and the output usage, message_stop."""
    usage = reply["usage"]
    start = {**reply, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    start.pop("stop_details", None)
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start",
                                                               "message": start})]
    for index, block in enumerate(reply["content"]):
        events += _block_events(index, block)
    delta: dict[str, Any] = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    if reply.get("stop_details") is not None:
        delta["stop_details"] = reply["stop_details"]
    events.append(("message_delta", {"type": "message_delta", "delta": delta,
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class FakeAnthropicServer(FakeJSONServer):
    def __init__(self) -> None:
        super().__init__("/v1/messages", lambda body: message(model=body.get("model", "x")),
                         _error, stream)
