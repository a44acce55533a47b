"""`ragloop check-model`: a real two-step exchange, and a fix named when it fails."""

from __future__ import annotations

import os
import subprocess
import sys

from fakes.anthropic_server import FakeAnthropicServer, message, thinking, tool_use
from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from model_server import MODEL_ALIAS

from ragloop.apps.check_model import check_model
from ragloop.llm.anthropic import AnthropicChat
from ragloop.llm.openai import OpenAIChat


def test_a_working_model_passes_both_steps_and_thinking_goes_back():
    with FakeAnthropicServer() as server:
        think = thinking("", "sig-1")
        server.enqueue(message(None, blocks_before=[think],
                               tool_uses=[tool_use("search_knowledge_base", {"query": "S200"})]),
                       message("The S200 is rated IP67 [1]."))
        chat = AnthropicChat("claude-sonnet-5-5", api_key="k", base_url=server.url, timeout=5)
        steps = check_model(chat)
        assert [s.ok for s in steps] == [True, True]
        assert server.requests[1].body["messages"][1]["content"][0] == think
        assert server.requests[1].body["tool_choice"] == {"type": "none"}


def test_a_retired_model_names_the_fix():
    with FakeOpenAIServer() as server:
        server.fail(404, body={"error": {"message": "The model `gpt-4-0613` does not exist"}})
        chat = OpenAIChat("gpt-4-0613", base_url=server.url + "/v1", timeout=5, max_retries=0)
        (step,) = check_model(chat)
        assert not step.ok and "retired, misspelt or not pulled" in step.detail


def test_a_model_that_answers_in_text_is_told_about_tool_support():
    with FakeOpenAIServer() as server:
        server.enqueue(completion("It is waterproof."))
        chat = OpenAIChat("m", base_url=server.url + "/v1", timeout=5, max_retries=0)
        (step,) = check_model(chat)
        assert not step.ok and "--enable-auto-tool-choice" in step.detail


def test_a_truncated_tool_call_is_not_run():
    with FakeOpenAIServer() as server:
        server.enqueue(completion(None, finish_reason="length",
                                  tool_calls=[tool_call("search_knowledge_base", '{"query": "S2')]))
        chat = OpenAIChat("m", base_url=server.url + "/v1", timeout=5, max_retries=0)
        (step,) = check_model(chat, max_tokens=64)
        assert not step.ok and "cut off at 64 tokens" in step.detail
        assert len(server.requests) == 1


def test_check_model_command_against_the_real_server(llama_server):
    proc = subprocess.run(
        [sys.executable, "-m", "ragloop", "check-model", f"openai:{MODEL_ALIAS}",
         "--base-url", llama_server], capture_output=True, text=True, timeout=300,
        env={**os.environ, "RAGLOOP_LOOP_MAX_TOKENS": "96"})
    assert "ok tool call" in proc.stdout, proc.stdout + proc.stderr[-1000:]
    assert "forced answer" in proc.stdout
    assert proc.returncode == (0 if "works with ragloop" in proc.stdout else 1)
