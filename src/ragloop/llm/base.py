"""The ChatModel protocol and the provider-neutral message types."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from ragloop.core.types import Usage


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    #: the arguments as the model sent them, when they were not valid JSON
    raw_arguments: str | None = None


@dataclass
class Message:
    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # for role == "tool"
    name: str | None = None  # tool name, for role == "tool"
    #: an assistant turn exactly as the provider returned it (Anthropic content blocks, thinking
    #: and signatures included); when set, it is sent back verbatim instead of being rebuilt
    raw_blocks: list[dict[str, Any]] | None = None
    #: a tool result that reports an error (Anthropic `is_error`)
    is_error: bool = False


class Finish(StrEnum):
    """How a reply ended, mapped from each provider's stop reason."""

    DONE = "done"  # end_turn / stop / tool_use / tool_calls
    TRUNCATED = "truncated"  # max_tokens, model_context_window_exceeded, length
    REFUSED = "refused"  # refusal, content_filter, message.refusal


@dataclass
class ChatResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""  # the provider's own word
    model: str = ""
    finish: Finish = Finish.DONE
    #: what the provider said about a refusal (category, explanation), for the user
    refusal: str = ""
    #: the reply's content blocks as received (Anthropic); see Message.raw_blocks
    raw_blocks: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class ForceTool:
    """tool_choice that makes the model call this one tool."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForceTool

#: What a call is for: sets its default token budget and reasoning effort. Decisions (planner,
#: grader, rewriter) are short JSON at low effort; the loop and the answer get room to think.
Purpose = Literal["loop", "decision", "answer"]


@dataclass(frozen=True)
class ModelTraits:
    """What a model or server accepts, declared by its adapter from the model name and the
    server kind (never probed at run time)."""

    #: accepts tool_choice "required" / a named tool (Anthropic thinking models answer 400)
    forced_tool_choice: bool = True
    #: obeys tool_choice "none"; False (Ollama ignores it): the last step sends no tools at all
    honours_tool_choice: bool = True
    #: constrains output to a JSON schema (response_format / output_config.format)
    json_schema_output: bool = True


@dataclass(frozen=True)
class ChatRequest:
    """The options of one model call, declared once: every `ChatModel.chat` takes them as
    keywords (`chat(messages, system=..., max_tokens=...)`) and reads them through this."""

    system: str = ""
    tools: list[ToolSpec] | None = None
    tool_choice: ToolChoice = "auto"
    max_tokens: int = 1024
    # sent only where the model takes one (current Anthropic and OpenAI reasoning models
    # reject sampling parameters)
    temperature: float = 0.0
    purpose: Purpose = "loop"
    # one JSON object of this schema, constrained by the provider where it can
    # (`traits.json_schema_output`)
    json_schema: dict[str, Any] | None = None


# A string's length bounds and a list's item bound: llama.cpp's JSON-schema grammar keeps them
# (grammars/README.md, "JSON Schemas → GBNF": minLength/maxLength become `char{m,n}`,
# maxItems a bounded repetition of the item), and they are what stops a small
# grammar-constrained model looping inside a string or a list; strict structured outputs
# (OpenAI response_format json_schema, Anthropic output_config.format, which rejects string
# length and array bounds) do not list them all among the keywords they accept, so the
# adapters for those send the schema without them.
LENGTH_BOUNDS = ("minLength", "maxLength", "maxItems")


def without_length_bounds(schema: Any) -> Any:
    """`schema` (a JSON schema) with every string length and list item bound taken out."""
    if isinstance(schema, list):
        return [without_length_bounds(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: without_length_bounds(v) for k, v in schema.items() if k not in LENGTH_BOUNDS}


#: A streamed model call: yields the reply's text as it is written (each piece once, in order),
#: then returns the whole reply, tool calls assembled, usage counted (see `ChatModel.stream`).
ChatStream = Generator[str, None, ChatResponse]


class ChatModel(Protocol):
    name: str  # "provider:model"
    traits: ModelTraits

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        """One model call with `options` (the fields of ChatRequest; an unknown one is a
        TypeError). Retries provider errors with backoff; raises ProviderError at the end."""
        ...

    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        """`chat`, streamed with the provider's own streaming: the reply's text pieces are
        yielded as they arrive and the assembled ChatResponse (tool calls, usage, stop reason)
        is returned, exactly what `chat` would have returned. Same options and errors."""
        ...
