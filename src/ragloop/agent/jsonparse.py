"""Defensive JSON from a chat model: extract, parse, validate, one retry, then a safe fallback.

`ask_json` asks for the reply's JSON schema (`strict_schema`), which the provider enforces where
it can (Anthropic `output_config.format`, OpenAI / Ollama / llama.cpp `response_format`); the
parse below stays as the fallback for servers that cannot. `parse_json_object` drops a
`<think>…</think>` preamble, takes the first `{ … }` that decodes (inside a code fence when there
is one; else first `{` to last `}`), `json.loads` it (control characters inside strings allowed:
models write raw newlines) and validates it against a pydantic model. Any failure is a
`BadModelJSON` with a short reason that the retry message quotes back to the model.

`ask_json` is one decision call at temperature 0 where the model takes one. A reply cut off at
its token budget is asked again once with twice the budget (the schema nag would not help); a
parse or validation failure gets one follow-up turn quoting the error and the schema; after that
the fallback. It never raises for a bad reply; a ProviderError from the chat model propagates
(the run fails, keeping its evidence).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import pydantic

from ragloop.agent.json_stream import FieldStream
from ragloop.agent.prompts import retry_user
from ragloop.core.answer_stream import deltas_of, written
from ragloop.core.errors import RagloopError
from ragloop.core.events import AnswerDeltaEvent
from ragloop.core.types import Usage
from ragloop.llm.base import ChatModel, ChatResponse, Finish, Message, Purpose

M = TypeVar("M", bound=pydantic.BaseModel)
T = TypeVar("T")

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
# Reasoning a local server leaves in the content (llama.cpp --reasoning-format none, qwen3).
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
MAX_REASON_CHARS = 300


class BadModelJSON(RagloopError, ValueError):
    """A model reply that is not one JSON object matching the expected schema."""

    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text


def extract_json_text(text: str) -> str:
    """The candidate JSON object in a reply: the first `{` at which a whole JSON object decodes
    (so prose with braces after it does not matter), else first `{` to last `}`, preferring a
    fenced block that contains one. Raises BadModelJSON when there is no `{ ... }` at all."""
    text = _THINK.sub("", text or "")
    for block in _FENCE.findall(text):
        if "{" in block and "}" in block:
            text = block
            break
    decoder = json.JSONDecoder(strict=False)
    start = text.find("{")
    while start >= 0:
        try:
            _, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return text[start:end]
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise BadModelJSON("no JSON object found in the reply", text)
    return text[start:end + 1]


def _pydantic_reason(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(object)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "schema mismatch: " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_json_object(text: str, model: type[M]) -> M:
    """The reply `text` as a validated `model`; BadModelJSON (with a short reason) otherwise."""
    candidate = extract_json_text(text)
    try:
        data = json.loads(candidate, strict=False)
    except json.JSONDecodeError as exc:
        raise BadModelJSON(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           text) from None
    if not isinstance(data, dict):
        raise BadModelJSON(f"expected a JSON object, got {type(data).__name__}", text)
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise BadModelJSON(_pydantic_reason(exc)[:MAX_REASON_CHARS], text) from None


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items()
                if not (k in ("title", "description") and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def strict_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The reply model's JSON schema in the form strict constrained output accepts (OpenAI
    structured outputs): every property required, no extra properties, no titles or defaults;
    optional fields are already nullable in the models. String length bounds stay: the
    adapters of providers that refuse them take them out (llm/base.without_length_bounds),
    and llama.cpp's grammar keeps them, so an empty string the reply model refuses is not
    written in the first place."""
    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items()
               if k not in ("title", "default")}
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    return walk(model.model_json_schema())


def schema_text(model: type[pydantic.BaseModel]) -> str:
    """The model's JSON schema, compact (no titles), for the retry message."""
    return json.dumps(_strip_titles(model.model_json_schema()), separators=(",", ":"))


def ask_json(
    chat: ChatModel,
    system: str,
    user: str,
    schema_model: type[M],
    *,
    retries: int = 1,
    fallback: T | Callable[[str], T],
    usage: Usage | None = None,
    max_tokens: int = 2048,
    purpose: Purpose = "decision",
) -> tuple[M | T, bool]:
    """Ask `chat` for one JSON object matching `schema_model`: `(value, True)` when a reply
    parsed, else `(fallback, False)` after `retries` follow-up turns that quote the error and
    the schema. `fallback` may be a callable: it gets the text of the last reply. The usage of
    every call is added to `usage`. Never raises for a bad reply; ProviderError propagates."""
    return written(stream_json(chat, system, user, schema_model, retries=retries,
                               fallback=fallback, usage=usage, max_tokens=max_tokens,
                               purpose=purpose))


def stream_json(
    chat: ChatModel,
    system: str,
    user: str,
    schema_model: type[M],
    *,
    field: str | None = None,
    retries: int = 1,
    fallback: T | Callable[[str], T],
    usage: Usage | None = None,
    max_tokens: int = 2048,
    purpose: Purpose = "decision",
) -> Generator[AnswerDeltaEvent, None, tuple[M | T, bool]]:
    """`ask_json`, with the string `field` of the reply streamed as AnswerDeltaEvents while
    the model writes it (`chat.stream`, agent/json_stream.py); a reply asked again (cut off,
    unreadable) first yields a reset. With `field=None` nothing streams (`chat.chat`)."""
    messages = [Message(role="user", content=user)]
    schema = strict_schema(schema_model)
    last_text = ""
    budget = max_tokens
    grown = False
    streamed = False

    def reply_to(sent: list[Message], tokens: int) -> Generator[AnswerDeltaEvent, None,
                                                                 ChatResponse]:
        nonlocal streamed
        options: dict[str, Any] = {"system": system, "max_tokens": tokens, "temperature": 0.0,
                                   "purpose": purpose, "json_schema": schema}
        if field is None:
            reply = chat.chat(sent, **options)
        else:
            if streamed:
                yield AnswerDeltaEvent(reset=True)
                streamed = False
            reading = FieldStream(field)

            def read(piece: str) -> str:
                nonlocal streamed
                text = reading.feed(piece)
                streamed = streamed or bool(text)
                return text

            reply = yield from deltas_of(chat.stream(sent, **options), read)
        if usage is not None:
            usage.add(reply.usage)
        return reply

    for attempt in range(retries + 1):
        reply = yield from reply_to(messages, budget)
        if reply.finish is Finish.TRUNCATED and not grown:
            grown, budget = True, budget * 2
            reply = yield from reply_to(messages, budget)
        last_text = reply.text or ""
        try:
            return parse_json_object(last_text, schema_model), True
        except BadModelJSON as exc:
            if attempt < retries:
                messages = [*messages, Message(role="assistant", content=last_text or "(empty)"),
                            Message(role="user",
                                    content=retry_user(exc.reason, schema_text(schema_model)))]
    value = fallback(last_text) if callable(fallback) else fallback
    return value, False
