"""`python -m llama_cpp.server`, with its `chatml-function-calling` handler made to keep the
request's `max_tokens` on every generation it makes.

Why: on tool_choice "auto" that handler (llama_cpp/llama_chat_format.py, 0.3.36) generates the
tool arguments, the follow-up call choice and a plain message with `max_tokens=None`, i.e. until
the context window is full, whatever the client asked. A 135M model at temperature 0 can go on
calling tools inside one reply until then: on a loaded 2-core machine one request took minutes,
and since the server serves one request at a time, every test after it timed out too. The tests
are about what crosses the wire, not about that server's budget handling; ragloop's own bounds
(schema maxLength / enum, the request's max_tokens) are what they check.

Usage: python tests/llama_server_bounded.py <llama_cpp.server arguments>
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from llama_cpp import llama_chat_format

HANDLER = "chatml-function-calling"
# a tool call's arguments or a message, when the request gave no max_tokens
DEFAULT_MAX_TOKENS = 256
# tool calls in one reply: the handler asks for another after each until the model stops
MAX_CALLS_PER_REPLY = 4

_registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
_upstream = _registry.get_chat_completion_handler_by_name(HANDLER)


class _Bounded:
    """The Llama object as the handler sees it: create_completion keeps a token budget, and
    after MAX_CALLS_PER_REPLY tool calls the next choice is the end of the reply."""

    def __init__(self, llama: Any, max_tokens: int) -> None:
        self._llama, self._max_tokens, self._calls = llama, max_tokens, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        grammar = getattr(kwargs.get("grammar"), "_grammar", "")
        if "functions ::=" not in grammar:
            # arguments or a message; the choice of a function is bounded by its grammar (and
            # a budget there would cut a long function name short)
            if kwargs.get("max_tokens") is None:
                kwargs["max_tokens"] = self._max_tokens
        elif '"<|im_end|>"' in grammar:
            self._calls += 1  # the handler's follow-up: another function, or the end
            if self._calls > MAX_CALLS_PER_REPLY:
                kwargs["grammar"] = llama_chat_format.llama_grammar.LlamaGrammar.from_string(
                    'root ::= "<|im_end|>"', verbose=False)
        return self._llama.create_completion(*args, **kwargs)


def _bounded_handler(*, llama: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
    return _upstream(llama=_Bounded(llama, max_tokens or DEFAULT_MAX_TOKENS),
                     max_tokens=max_tokens, **kwargs)


_registry.register_chat_completion_handler(HANDLER, _bounded_handler, overwrite=True)

if __name__ == "__main__":
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
