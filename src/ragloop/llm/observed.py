"""A ChatModel that tells the run's observer (core/observe.py) about every call it makes:
the traces' model-call spans come from here, so no provider adapter knows about tracing."""

from __future__ import annotations

import time
from typing import Any

from ragloop.core.answer_stream import written
from ragloop.core.observe import OBSERVER, ModelCall
from ragloop.llm.base import (
    ChatModel,
    ChatResponse,
    ChatStream,
    Message,
    Purpose,
    ToolChoice,
    ToolSpec,
)

# Characters of each message kept in a model-call record: enough to read a prompt in a trace
# viewer without sending a whole retrieved context per call over the wire.
MESSAGE_CHARS = 4000


class ObservedChat:
    """Wraps `inner`; forwards every call unchanged and records it while a run is observed."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.traits = inner.traits

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        return written(self._observed(messages, False, **options))

    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        """`inner.stream`, recorded like `chat` once the reply is whole."""
        return self._observed(messages, True, **options)

    def _observed(self, messages: list[Message], streamed: bool, *, system: str = "",
                  tools: list[ToolSpec] | None = None, tool_choice: ToolChoice = "auto",
                  max_tokens: int = 1024, temperature: float = 0.0, purpose: Purpose = "loop",
                  json_schema: dict[str, Any] | None = None) -> ChatStream:
        observer = OBSERVER.get()
        started = time.time_ns()
        options: dict[str, Any] = {"system": system, "tools": tools, "tool_choice": tool_choice,
                                   "max_tokens": max_tokens, "temperature": temperature,
                                   "purpose": purpose, "json_schema": json_schema}
        try:
            if streamed:
                reply = yield from self.inner.stream(messages, **options)
            else:
                reply = self.inner.chat(messages, **options)
        except Exception as exc:
            if observer is not None:
                observer.model_call(_call(self.name, purpose, started, system, messages,
                                          max_tokens, temperature, error=repr(exc)))
            raise
        if observer is not None:
            observer.model_call(_call(self.name, purpose, started, system, messages, max_tokens,
                                      temperature, reply=reply))
        return reply


def _call(model: str, purpose: str, started: int, system: str, messages: list[Message],
          max_tokens: int, temperature: float, reply: ChatResponse | None = None,
          error: str | None = None) -> ModelCall:
    sent = tuple((m.role, _shown(m)) for m in messages)
    if reply is None:
        return ModelCall(model=model, purpose=purpose, started_ns=started,
                         ended_ns=time.time_ns(), system=system[:MESSAGE_CHARS], messages=sent,
                         max_tokens=max_tokens, temperature=temperature, error=error)
    return ModelCall(model=model, purpose=purpose, started_ns=started, ended_ns=time.time_ns(),
                     system=system[:MESSAGE_CHARS], messages=sent, max_tokens=max_tokens,
                     temperature=temperature, usage=reply.usage, output=reply.text,
                     tool_calls=tuple(c.name for c in reply.tool_calls),
                     finish=str(reply.finish), stop_reason=reply.stop_reason,
                     response_model=reply.model)


def _shown(message: Message) -> str:
    text = message.content
    if message.tool_calls:
        text += "".join(f"\n→ {c.name}({c.raw_arguments or c.arguments})"
                        for c in message.tool_calls)
    return text[:MESSAGE_CHARS]
