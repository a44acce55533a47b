"""A ChatModel that tells the run's observer (core/observe.py) about every call it makes:
the traces' model-call spans come from here, so no provider adapter knows about tracing."""

from __future__ import annotations

import time
from typing import Any

from ragloop.core.answer_stream import written
from ragloop.core.observe import OBSERVER, ModelCall
from ragloop.llm.base import ChatModel, ChatRequest, ChatResponse, ChatStream, Message

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

    def _observed(self, messages: list[Message], streamed: bool,
                  **options: Any) -> ChatStream:
        req = ChatRequest(**options)  # the options as the inner model reads them
        observer = OBSERVER.get()
        started = time.time_ns()
        try:
            if streamed:
                reply = yield from self.inner.stream(messages, **options)
            else:
                reply = self.inner.chat(messages, **options)
        except Exception as exc:
            if observer is not None:
                observer.model_call(_call(self.name, req, started, messages, error=repr(exc)))
            raise
        if observer is not None:
            observer.model_call(_call(self.name, req, started, messages, reply=reply))
        return reply


def _call(model: str, req: ChatRequest, started: int, messages: list[Message],
          reply: ChatResponse | None = None, error: str | None = None) -> ModelCall:
    answered: dict[str, Any] = {} if reply is None else {
        "usage": reply.usage, "output": reply.text,
        "tool_calls": tuple(c.name for c in reply.tool_calls), "finish": str(reply.finish),
        "stop_reason": reply.stop_reason, "response_model": reply.model}
    return ModelCall(model=model, purpose=req.purpose, started_ns=started,
                     ended_ns=time.time_ns(), system=req.system[:MESSAGE_CHARS],
                     messages=tuple((m.role, _shown(m)) for m in messages),
                     max_tokens=req.max_tokens, temperature=req.temperature, error=error,
                     **answered)


def _shown(message: Message) -> str:
    text = message.content
    if message.tool_calls:
        text += "".join(f"\n→ {c.name}({c.raw_arguments or c.arguments})"
                        for c in message.tool_calls)
    return text[:MESSAGE_CHARS]
