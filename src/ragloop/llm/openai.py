"""ChatModel on OpenAI chat.completions, through the official `openai` SDK (3.x).

One adapter, four dialects of the same wire format, declared by how the model was named:
- `openai`   api.openai.com. `max_completion_tokens` (reasoning models require it). Reasoning
  families (o-series, gpt-5*, gpt-6*) reject `temperature` and take `reasoning_effort`; with
  function tools, gpt-5.1 and later need `reasoning_effort: "none"` on Chat Completions, and
  gpt-6 Astra / 6.1 Sol call tools only on the Responses API (deployment checklist), which this
  adapter refuses with a clear error. `parallel_tool_calls` is sent with tools.
- `compatible`  any other OpenAI-compatible server (vLLM, LM Studio, …) by base_url: `max_tokens`,
  `temperature`, no cost. vLLM needs `--enable-auto-tool-choice --tool-call-parser` for "auto".
- `ollama`   ignores `tool_choice` (openai-compatibility.mdx lists it unsupported), so the last
  step is sent with no tools, and a first search cannot be forced; `reasoning_effort: "none"`
  for decisions (listed as supported).
- `llamacpp` llama.cpp's `llama-server` and `llama-cpp-python`'s server: `parallel_tool_calls`
  (off by default in llama-server, docs/function-calling.md), JSON constrained by
  `response_format: {"type": "json_object", "schema": …}` (the form both servers accept;
  llama-cpp-python 0.3.36 rejects `json_schema`), and an assistant turn's `content` is "" beside
  `tool_calls` (llama-cpp-python's request schema rejects null).

Stop reasons: `finish_reason` "length" is truncation; "content_filter" or `message.refusal` is a
refusal. Tool-call arguments that are not a JSON object never raise: `arguments={}` and the text
is kept in `raw_arguments` (an object some servers send is taken as it is). The SDK retries
408/409/429/5xx and connection errors itself; what it finally raises becomes ProviderError, or
ConfigError for a 401. `OPENAI_BASE_URL` keeps working (read by `make_chat_model`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion

from ragloop.core.errors import ConfigError, ProviderError
from ragloop.core.types import Usage
from ragloop.llm.base import (
    ChatRequest,
    ChatResponse,
    ChatStream,
    Finish,
    ForceTool,
    Message,
    ModelTraits,
    Purpose,
    ToolCall,
    ToolChoice,
    without_length_bounds,
)
from ragloop.llm.pricing import cost_usd
from ragloop.llm.sdk_errors import context_full, fix_for, translate

log = logging.getLogger("ragloop.llm")

API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_HOST = "api.openai.com"
Dialect = Literal["openai", "compatible", "ollama", "llamacpp"]

_REASONING = re.compile(r"^(o\d|gpt-5|gpt-6)")
# Reasoning models that accept reasoning_effort "none" (gpt-5.1 and later); gpt-5 and the
# o-series go no lower than "minimal" / "low".
_EFFORT_NONE = re.compile(r"^(gpt-5\.\d|gpt-6)")
_RESPONSES_ONLY_TOOLS = ("gpt-6-astra", "gpt-6.1-sol", "gpt-6.2-astra")


def traits_for(dialect: Dialect) -> ModelTraits:
    if dialect == "ollama":
        return ModelTraits(forced_tool_choice=False, honours_tool_choice=False)
    return ModelTraits()


def reasoning_effort(model: str, purpose: Purpose, with_tools: bool) -> str | None:
    """The `reasoning_effort` for an api.openai.com call, None for a non-reasoning model."""
    name = model.lower()
    if not _REASONING.match(name):
        return None
    if _EFFORT_NONE.match(name):
        return "none" if with_tools or purpose == "decision" else "low"
    if name.startswith("gpt-5"):
        return "minimal" if purpose == "decision" else "low"
    return "low"


class OpenAIChat:
    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 300.0,
        max_retries: int = 3,
        *,
        provider: str = "openai",
        dialect: Dialect | None = None,
        http_client: Any = None,
    ) -> None:
        """`http_client`: an httpx2.Client for the SDK (a proxy, or a test that records the
        wire); the SDK's own by default."""
        official = not base_url or OPENAI_HOST in base_url
        key = api_key or os.environ.get(API_KEY_ENV) or (None if official else "not-needed")
        if not key:
            raise ConfigError(
                f"{provider}:{model} needs an API key: set {API_KEY_ENV} "
                "(or set a base_url / OPENAI_BASE_URL for a local OpenAI-compatible server)"
            )
        self.model = model
        self.provider = provider
        self.name = f"{provider}:{model}"
        self.base_url = base_url
        self.dialect: Dialect = dialect or ("openai" if official else "compatible")
        self.traits = traits_for(self.dialect)
        self._schema_rejected = False
        self._tool_stream_rejected = False
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = openai.OpenAI(
            api_key=key,
            base_url=base_url or f"https://{OPENAI_HOST}/v1",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        req = ChatRequest(**options)
        resp = self._create(build_request(self.model, messages, req, dialect=self.dialect),
                            req)
        return parse_response(resp, self.model, tool_choice=req.tool_choice,
                              priced=self.dialect == "openai")

    def stream(self, messages: list[Message], **options: Any) -> ChatStream:
        """`chat` with `stream=True`: the SDK's `Stream[ChatCompletionChunk]`, assembled by
        `assemble_chunks`. `stream_options.include_usage` asks for the last chunk that carries
        the whole request's usage with empty `choices` (openai-python
        `types/chat/chat_completion_chunk.py`, `ChatCompletionChunk.usage`); llama.cpp's
        llama-server sends it whatever the request says (ggml-org/llama.cpp#16048), while
        llama-cpp-python's server ignores it (abetlen/llama-cpp-python#1640; 0.3.36 has no
        `stream_options`): such a call is counted with its usage unknown (`Usage.unmeasured`),
        not as zero tokens.

        A server that cannot stream a tool call fails such a request before its first piece:
        llama-cpp-python's chatml-function-calling handler raises "Automatic streaming tool
        choice is not supported" once the model picks a tool, after the response began, so
        the connection drops. A streamed request that offers tools and fails before any
        piece is asked again unstreamed (to any server but api.openai.com); when that works,
        this server's calls that offer tools are not streamed from then on (their text comes
        as one piece). A server that is down fails the second ask too, with its own error."""
        req = ChatRequest(**options)
        offers_tools = bool(req.tools) and req.tool_choice != "none"
        if offers_tools and self._tool_stream_rejected:
            reply = self.chat(messages, **options)
            if reply.text:
                yield reply.text
            return reply
        pieces = self._streamed(build_request(self.model, messages, req, dialect=self.dialect),
                                req)
        started = False
        try:
            while True:
                try:
                    piece = next(pieces)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
                started = True
                yield piece
        except ProviderError as e:
            if started or not offers_tools or self.dialect == "openai":
                raise
            try:
                reply = self.chat(messages, **options)
            except ProviderError as again:
                if not isinstance(again.__cause__, openai.APIConnectionError):
                    raise
                # the dropped stream's connection went back to the pool dead; the next
                # request opens a new one
                reply = self.chat(messages, **options)
            self._tool_stream_rejected = True
            log.warning("%s failed a streamed request that offers tools (%s) and answered it"
                        " unstreamed: such calls are not streamed from now on", self.name,
                        str(e)[:200])
            if reply.text:
                yield reply.text
            return reply

    def _streamed(self, kwargs: dict[str, Any], req: ChatRequest) -> ChatStream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        chunks = self._create(kwargs, req)
        try:
            return (yield from assemble_chunks(chunks, self.model, tool_choice=req.tool_choice,
                                               priced=self.dialect == "openai"))
        except openai.OpenAIError as e:  # a stream cut off midway (connection, server error)
            raise self._error(e) from e
        finally:
            chunks.close()  # a consumer that stops early must not leave the response open

    def _create(self, kwargs: dict[str, Any], req: ChatRequest) -> Any:
        """`chat.completions.create(**kwargs)`, a server that rejects response_format asked
        once more without it."""
        if req.tools and self.dialect == "openai" and self.model.lower().startswith(
                _RESPONSES_ONLY_TOOLS):
            raise ConfigError(
                f"{self.name} calls tools only through the Responses API, which ragloop does not"
                " use: pick another model for --driver tools (e.g. openai:gpt-5.4-mini), or use"
                " --driver pipeline")
        if self._schema_rejected:
            kwargs.pop("response_format", None)
        try:
            return self._client.chat.completions.create(**kwargs)
        except openai.APIStatusError as e:
            if ("response_format" not in kwargs or self.dialect == "openai"
                    or not _rejects_response_format(e)):
                raise self._error(e) from e
            # A server that does not take this response_format (llama-cpp-python wants
            # json_object): say so once, then rely on the defensive parse.
            self._schema_rejected = True
            log.warning("%s rejected response_format (%s); JSON decisions are parsed without"
                        " constrained output (llamacpp:<model> sends the form llama.cpp"
                        " servers take)", self.name, str(self._error(e))[:200])
            kwargs.pop("response_format")
            try:
                return self._client.chat.completions.create(**kwargs)
            except openai.OpenAIError as again:
                raise self._error(again) from again
        except openai.OpenAIError as e:
            raise self._error(e) from e

    def _error(self, exc: openai.OpenAIError) -> Exception:
        hint = (f" (model {self.model!r} not found: retired, or not pulled / served at"
                f" {self._client.base_url}? Run `ragloop check-model`)")
        err = translate(openai, exc, provider=self.provider, key_env=API_KEY_ENV,
                        timeout=self.timeout, retries=self.max_retries,
                        base_url=self._client.base_url, hint_404=hint)
        fix = fix_for(str(err)) if not isinstance(exc, openai.NotFoundError) else ""
        return ProviderError(f"{err}: {fix}") if fix else err


def _rejects_response_format(exc: openai.APIStatusError) -> bool:
    """A 400 / 422, or a 500 that names response_format (llama-cpp-python answers its own
    request validation with 500). Not a 400 that says the request does not fit the context
    window: llama-cpp-python answers messages longer than n_ctx with 400 whatever the
    response_format, and reading that as a rejection dropped constrained output for the
    client's life (seen in benchmarks/conversations.py against the tests' server)."""
    text = str(exc.body or exc.message)
    if context_full(text):
        return False
    return exc.status_code in (400, 422) or "response_format" in text


def _tool_choice(choice: ToolChoice) -> Any:
    if isinstance(choice, ForceTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _response_format(schema: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The schema as the server constrains it: llama.cpp's servers and Ollama (whose format
    is llama.cpp's grammar) keep string length bounds; OpenAI's strict mode, and servers
    that may stand in for it, get the schema without them (base.LENGTH_BOUNDS)."""
    if dialect == "llamacpp":
        return {"type": "json_object", "schema": schema}
    if dialect != "ollama":
        schema = without_length_bounds(schema)
    return {"type": "json_schema",
            "json_schema": {"name": "decision", "schema": schema, "strict": True}}


def build_request(model: str, messages: list[Message], request: ChatRequest | None = None, *,
                  dialect: Dialect = "openai", **options: Any) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` (plain JSON-able dicts); fields the SDK
    has no argument for go in `extra_body`. `options`: ChatRequest's fields, without
    `request`."""
    req = request or ChatRequest(**options)
    system, tools, tool_choice = req.system, req.tools, req.tool_choice
    max_tokens, temperature, purpose, json_schema = (req.max_tokens, req.temperature,
                                                      req.purpose, req.json_schema)
    kwargs: dict[str, Any] = {"model": model,
                              "messages": to_openai_messages(messages, system, dialect)}
    extra: dict[str, Any] = {}
    effort = reasoning_effort(model, purpose, bool(tools)) if dialect == "openai" else None
    if dialect == "ollama" and purpose == "decision":
        effort = "none"
    if dialect == "openai":
        kwargs["max_completion_tokens"] = max_tokens
    else:
        kwargs["max_tokens"] = max_tokens
    if effort is not None:
        kwargs["reasoning_effort"] = effort
    if dialect != "openai" or not _REASONING.match(model.lower()):
        kwargs["temperature"] = temperature
    if json_schema is not None:
        kwargs["response_format"] = _response_format(json_schema, dialect)
    if tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        kwargs["tool_choice"] = _tool_choice(tool_choice)
        if tool_choice != "none":
            if dialect == "llamacpp":
                extra["parallel_tool_calls"] = True
            else:
                kwargs["parallel_tool_calls"] = True
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _arguments_text(tc: ToolCall, dialect: Dialect) -> str:
    if tc.raw_arguments is None:
        return json.dumps(tc.arguments)
    # Ollama and llama.cpp reject a history whose arguments are not JSON (C6): send "{}".
    return tc.raw_arguments if dialect in ("openai", "compatible") else "{}"


def to_openai_messages(messages: list[Message], system: str = "",
                       dialect: Dialect = "openai") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": _arguments_text(tc, dialect)},
                    }
                    for tc in m.tool_calls
                ]
            if msg["content"] is None and (dialect != "openai" or not m.tool_calls):
                msg["content"] = ""
            out.append(msg)
        else:
            out.append({"role": "user", "content": m.content})
    return out


def parse_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments → (dict, raw text if it was not a JSON object). Never raises.
    A server that sends the arguments as an object (not the documented string) is taken at
    its word."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None:
        return {}, None
    if not isinstance(raw, str):
        return {}, json.dumps(raw, default=str)
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return {}, raw
    if isinstance(value, dict):
        return value, None
    return {}, raw


def _finish(choice: Any, msg: Any) -> tuple[Finish, str]:
    refusal = getattr(msg, "refusal", None)
    if refusal:
        return Finish.REFUSED, str(refusal)
    reason = str(choice.finish_reason or "")
    if reason == "content_filter":
        return Finish.REFUSED, "the provider's content filter stopped the reply"
    if reason == "length":
        return Finish.TRUNCATED, ""
    return Finish.DONE, ""


def parse_response(
    resp: Any, model: str, *, tool_choice: ToolChoice = "auto", priced: bool = True
) -> ChatResponse:
    if not getattr(resp, "choices", None):
        raise ProviderError(f"openai: response for {model} has no choices")
    choice = resp.choices[0]
    msg = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        call_id = getattr(tc, "id", None) or f"call_{i}"
        fn = getattr(tc, "function", None)
        if fn is not None:
            args, raw = parse_arguments(getattr(fn, "arguments", None))
            calls.append(ToolCall(id=call_id, name=fn.name, arguments=args, raw_arguments=raw))
        elif getattr(tc, "custom", None) is not None:
            calls.append(
                ToolCall(
                    id=call_id, name=tc.custom.name, arguments={}, raw_arguments=tc.custom.input
                )
            )
    if tool_choice == "none":
        calls = []  # the contract: with "none" the model cannot call tools
    usage = Usage(calls=1)
    u = getattr(resp, "usage", None)
    if u is None:  # unknown, not zero (a streamed reply of a server that ignores
        usage.unmeasured = 1  # stream_options.include_usage: llama-cpp-python's)
    else:
        details = getattr(u, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
        written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
        prompt = getattr(u, "prompt_tokens", 0) or 0
        usage.input_tokens = max(prompt - cached - written, 0)
        usage.output_tokens = getattr(u, "completion_tokens", 0) or 0
        usage.cache_read_tokens = cached
        usage.cache_write_tokens = written
    resp_model = getattr(resp, "model", None) or model
    if priced:
        usage.cost_usd = cost_usd("openai", resp_model, usage)
    finish, refusal = _finish(choice, msg)
    return ChatResponse(
        text=msg.content or "",
        tool_calls=calls,
        usage=usage,
        stop_reason=str(choice.finish_reason or ""),
        model=resp_model,
        finish=finish,
        refusal=refusal,
    )


def assemble_chunks(chunks: Iterable[Any], model: str, *, tool_choice: ToolChoice = "auto",
                    priced: bool = True) -> ChatStream:
    """A streamed reply (`ChatCompletionChunk`s) → its text pieces as they come, then the
    ChatResponse `parse_response` makes of the assembled completion.

    The shapes, from openai-python `types/chat/chat_completion_chunk.py`: `choices[0].delta`
    carries `content` (a piece of text), `refusal`, and `tool_calls`, each a
    `ChoiceDeltaToolCall` with an `index`: a call's first delta has its `id` and
    `function.name`, the later ones only pieces of `function.arguments`, so calls are
    assembled by index (parallel calls interleave). `finish_reason` arrives on the last chunk
    with choices; with `include_usage` one more chunk has `choices: []` and `usage`. llama.cpp's
    llama-server streams the same shapes (id and name first, then `arguments` pieces at the
    call's index); Ollama sends each call whole in one delta, which assembles the same."""
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    usage: Any = None
    head: dict[str, Any] = {"id": "", "created": 0, "model": model}
    for chunk in chunks:
        head = {"id": chunk.id or head["id"], "created": chunk.created or head["created"],
                "model": chunk.model or head["model"]}
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            if choice.index != 0:  # n=1 is all ragloop asks for
                continue
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                yield delta.content
            if delta is not None and delta.refusal:
                refusal.append(delta.refusal)
            for tc in (delta.tool_calls if delta is not None else None) or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or tc.id or ""
                if tc.function is not None:
                    slot["name"] = slot["name"] or tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            if choice.finish_reason:
                finish = choice.finish_reason
    if finish is None:  # every complete stream ends its choice with a finish_reason
        raise ProviderError(f"openai: the stream of {model} ended before its reply did (no"
                            " finish_reason): the server stopped streaming")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None,
                               "refusal": "".join(refusal) or None}
    if calls:
        message["tool_calls"] = [
            {"id": slot["id"] or f"call_{index}", "type": "function",
             "function": {"name": slot["name"], "arguments": slot["arguments"]}}
            for index, slot in sorted(calls.items())]
    completion = ChatCompletion.construct(
        **head, object="chat.completion",
        choices=[{"index": 0, "finish_reason": finish, "message": message}],
        usage=usage.to_dict() if usage is not None else None)
    return parse_response(completion, model, tool_choice=tool_choice, priced=priced)
