"""A fake OpenAI chat.completions API: `POST /v1/chat/completions` on a real local HTTP server."""

from __future__ import annotations

import json
from typing import Any

from fakes._http import Delay, Fail, FakeJSONServer

__all__ = ["Delay", "Fail", "FakeOpenAIServer", "completion", "tool_call"]


def tool_call(name: str, arguments: Any, id: str = "call_01") -> dict[str, Any]:
    """`arguments` is the raw string the model sent (it may be broken JSON); some servers send
    an object instead."""
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(
    text: str | None = "ok",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = "gpt-4o-mini-2024-07-18",
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    cached_tokens: int | None = None,
    finish_reason: str | None = None,
    refusal: str | None = None,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """A chat.completions response body. `refusal` fills `message.refusal` (content null);
    `reasoning_tokens` fills `completion_tokens_details` (a reasoning model that spent its
    whole budget thinking answers finish_reason "length" with no content)."""
    msg: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": msg,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": usage,
    }


def _error(status: int) -> dict[str, Any]:
    return {"error": {"message": f"fake {status}", "type": "server_error", "code": None}}


# Characters per streamed piece of a tool call's arguments (split mid-key, as servers do).
PIECE = 6


def stream(reply: dict[str, Any], request: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The completion as the `chat.completion.chunk` events the API streams
    (openai-python types/chat/chat_completion_chunk.py): a role delta, the content a word at a
    time, each tool call's id and name then its arguments in pieces by `index`, the
    finish_reason on a last delta, the usage in a chunk with empty choices when
    `stream_options.include_usage`, then `[DONE]`."""
    head = {k: reply[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = reply["choices"][0]
    msg = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = msg.get("content") or ""
    deltas += [{"content": w} for w in text.replace(" ", " \0").split("\0") if w]
    if msg.get("refusal"):
        deltas.append({"refusal": msg["refusal"]})
    for index, call in enumerate(msg.get("tool_calls") or []):
        fn = call["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(
            fn["arguments"])
        deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                       "function": {"name": fn["name"], "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": args[i:i + PIECE]}}]}
                   for i in range(0, len(args), PIECE)]
    events: list[tuple[str | None, Any]] = [
        (None, {**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
        for d in deltas]
    events.append((None, {**head, "choices": [{"index": 0, "delta": {},
                                               "finish_reason": choice["finish_reason"]}]}))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**head, "choices": [], "usage": reply.get("usage")}))
    events.append((None, "[DONE]"))
    return events


class FakeOpenAIServer(FakeJSONServer):
    def __init__(self) -> None:
        super().__init__(
            "/v1/chat/completions", lambda body: completion(model=body.get("model", "x")), _error,
            stream,
        )
