"""A fake OpenAI chat.completions API: `POST /v1/chat/completions` on a real local HTTP server."""

from __future__ import annotations

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


class FakeOpenAIServer(FakeJSONServer):
    def __init__(self) -> None:
        super().__init__(
            "/v1/chat/completions", lambda body: completion(model=body.get("model", "x")), _error
        )
