"""`ragloop check-model`: one real two-step exchange (a tool call, then a forced answer) that
tells a user in seconds whether their key, model and base URL work, and names the fix when not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ragloop.agent.tools import SEARCH, tool_specs
from ragloop.core.data_block import data_block
from ragloop.core.errors import ConfigError, ProviderError
from ragloop.llm.base import ChatModel, Finish, ForceTool, Message, ToolChoice
from ragloop.llm.sdk_errors import fix_for

QUESTION = "Is the S200 sensor waterproof? Search the knowledge base first."
RESULT = data_block(SEARCH, "[1] products/s200.md §2 (Ratings)\nThe S200 is rated IP67.")
ANSWER_NOW = "Answer now from the evidence above in one sentence, citing [1]."

@dataclass
class CheckStep:
    name: str
    ok: bool
    detail: str
    seconds: float


def _failed(name: str, exc: Exception, started: float) -> CheckStep:
    fix = fix_for(str(exc))
    detail = f"{exc}" + (f"\n  fix: {fix}" if fix else "")
    return CheckStep(name, False, detail, time.perf_counter() - started)


def check_model(chat: ChatModel, *, max_tokens: int = 2048) -> list[CheckStep]:
    """Step 1: the search tool is offered (named where the model accepts a forced tool) and
    must come back as a call with a query. Step 2: that call's result goes back and the model,
    offered no tools, must answer."""
    specs = [s for s in tool_specs() if s.name == SEARCH]
    messages = [Message(role="user", content=QUESTION)]
    choice: ToolChoice = ForceTool(SEARCH) if chat.traits.forced_tool_choice else "auto"
    started = time.perf_counter()
    try:
        reply = chat.chat(messages, tools=specs, tool_choice=choice, max_tokens=max_tokens)
    except (ProviderError, ConfigError) as exc:
        return [_failed("tool call", exc, started)]
    took = time.perf_counter() - started
    if reply.finish is Finish.REFUSED:
        return [CheckStep("tool call", False, f"the model refused: {reply.refusal}", took)]
    if reply.finish is Finish.TRUNCATED:
        return [CheckStep("tool call", False, f"the reply was cut off at {max_tokens} tokens"
                          " (a thinking model needs more room: raise RAGLOOP_LOOP_MAX_TOKENS)",
                          took)]
    calls = [c for c in reply.tool_calls if c.name == SEARCH and c.arguments.get("query")]
    if not calls:
        return [CheckStep("tool call", False, "no search_knowledge_base call came back (the"
                          " model answered in text): it may not support tools, or the server"
                          " needs its tool-call flags (vLLM --enable-auto-tool-choice"
                          " --tool-call-parser; llama-server --jinja)", took)]
    steps = [CheckStep("tool call", True, f"search_knowledge_base(query="
                       f"{calls[0].arguments['query']!r})", took)]
    messages += [Message(role="assistant", content=reply.text, tool_calls=calls[:1],
                         raw_blocks=reply.raw_blocks),
                 Message(role="tool", content=RESULT, tool_call_id=calls[0].id, name=SEARCH),
                 Message(role="user", content=ANSWER_NOW)]
    started = time.perf_counter()
    tools = specs if chat.traits.honours_tool_choice else None
    try:
        answer = chat.chat(messages, tools=tools, tool_choice="none", max_tokens=max_tokens)
    except (ProviderError, ConfigError) as exc:
        return [*steps, _failed("forced answer", exc, started)]
    took = time.perf_counter() - started
    if answer.finish is not Finish.DONE or not answer.text.strip():
        why = answer.refusal or ("cut off" if answer.finish is Finish.TRUNCATED else "empty")
        return [*steps, CheckStep("forced answer", False, f"no usable answer ({why})", took)]
    return [*steps, CheckStep("forced answer", True, answer.text.strip()[:200], took)]
