"""A ChatModel that plays a script, for tests: no network, fully deterministic.

Each script item is a ChatResponse, a str (shorthand for a text-only reply), or a callable
`(messages, tools, tool_choice) -> ChatResponse | str` for replies that depend on the request.
Every call is recorded in `.calls`. Like a real API, a reply's tool calls are dropped when the
caller passed tool_choice="none" (unless `traits` say the model ignores tool_choice, as Ollama
does), and every reply counts one call in its usage.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragloop.llm.base import (
    ChatRequest,
    ChatResponse,
    Message,
    ModelTraits,
    Purpose,
    ToolChoice,
    ToolSpec,
)

Reply = Callable[[list[Message], list[ToolSpec] | None, ToolChoice], "ChatResponse | str"]
ScriptItem = ChatResponse | str | Reply


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
    ) -> None:
        """`repeat_last=True` replays the last item once the script runs out; otherwise running
        out raises AssertionError naming how many calls were scripted."""
        self.script = list(script)
        self.repeat_last = repeat_last
        self.name = name
        self.traits = traits or ModelTraits()
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


def _last_content(messages: list[Message]) -> str:
    return messages[-1].content[:80] if messages else ""
