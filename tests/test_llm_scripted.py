"""ScriptedChat: the test double every agent test drives."""

from __future__ import annotations

import pytest

from ragloop.core.types import Usage
from ragloop.llm.base import ChatResponse, Message, ToolCall, ToolSpec
from ragloop.llm.scripted import ScriptedChat

SEARCH = ToolSpec("search", "Search.", {"type": "object", "properties": {}})
CALL = ToolCall("c1", "search", {"query": "x"})


def test_plays_script_and_records_calls():
    chat = ScriptedChat([ChatResponse("", tool_calls=[CALL], stop_reason="tool_use"), "done"])
    history = [Message("user", "q")]
    first = chat.chat(history, system="sys", tools=[SEARCH])
    history.append(Message("assistant", "", tool_calls=first.tool_calls))
    second = chat.chat(history, tools=[SEARCH], tool_choice="required", max_tokens=50)
    assert first.tool_calls == [CALL] and second.text == "done"
    assert [c.tool_choice for c in chat.calls] == ["auto", "required"]
    assert chat.calls[0].system == "sys" and chat.calls[0].tools == [SEARCH]
    assert chat.calls[1].max_tokens == 50
    assert len(chat.calls[0].messages) == 1  # a snapshot, not the caller's mutable list
    assert chat.calls[1].response is second
    assert second.usage.calls == 1 and chat.remaining == 0


def test_tool_choice_none_strips_tool_calls():
    scripted = ChatResponse("answer", tool_calls=[CALL], stop_reason="tool_use")
    chat = ScriptedChat([scripted])
    resp = chat.chat([Message("user", "q")], tools=[SEARCH], tool_choice="none")
    assert resp.tool_calls == [] and resp.text == "answer" and resp.stop_reason == "end_turn"
    assert scripted.tool_calls == [CALL]  # the script itself is untouched


def test_callable_items_see_the_request():
    def reply(messages, tools, tool_choice):
        return f"{len(messages)} msgs, tools={[t.name for t in tools or []]}, {tool_choice}"

    chat = ScriptedChat([reply])
    assert (
        chat.chat([Message("user", "q")], tools=[SEARCH]).text == "1 msgs, tools=['search'], auto"
    )


def test_exhausted_script_raises_clearly():
    chat = ScriptedChat(["one"])
    chat.chat([Message("user", "q")])
    with pytest.raises(AssertionError, match="script exhausted: call #2 but only 1"):
        chat.chat([Message("user", "again")])


def test_repeat_last():
    usage = Usage(input_tokens=5, output_tokens=2)
    chat = ScriptedChat([ChatResponse("a"), ChatResponse("b", usage=usage)], repeat_last=True)
    texts = [chat.chat([Message("user", "q")]).text for _ in range(4)]
    assert texts == ["a", "b", "b", "b"]
    assert usage.calls == 0  # the scripted Usage is copied, never mutated
    assert ScriptedChat([], repeat_last=True).remaining == 0
    with pytest.raises(AssertionError):
        ScriptedChat([], repeat_last=True).chat([])
