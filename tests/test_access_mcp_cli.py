"""The MCP server and the CLI as a user (issue 43.4): `ragloop mcp --as USER` or
RAGLOOP_MCP_KEY fixes who every tool answers as, over the real stdio transport; `ask` and
`chat --as USER` search as that user and keep that user's conversations."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from test_access_hostile import PUBLIC, _clean, open_shared
from test_access_principals import ragloop

from ragloop.agent.engine import Engine
from ragloop.agent.tools import FETCH, LIST, SEARCH


@pytest.fixture
def shared(tmp_path, embedder):
    """The hostile suite's knowledge base, with alice (hr) and bob, and one conversation of
    alice's about her own document."""
    kb, keys = open_shared(tmp_path, embedder)
    talk = Engine(kb, principal=kb.backend.principals.principal_of("alice")).conversation()
    talk.ask("What did my salary review with the manager say?")
    yield kb, keys, talk.id
    kb.close()


def _params(folder: str, *args: str, key: str | None = None):
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")
           and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    if key is not None:
        env["RAGLOOP_MCP_KEY"] = key
    return StdioServerParameters(command=sys.executable, env=env,
                                 args=["-m", "ragloop.apps.mcp_server", "--kb", folder, *args])


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _as_bob(params, alices: str) -> dict[str, object]:
    from mcp import Client

    async with Client(params) as client:
        calls = {
            "search": await client.call_tool(SEARCH, {"query": "salary review bands code"}),
            "list": await client.call_tool(LIST, {}),
            "hidden": await client.call_tool(FETCH, {"doc_id": "alice.md", "section": "1"}),
            "missing": await client.call_tool(FETCH, {"doc_id": "nothere.md", "section": "1"}),
            "ask": await client.call_tool("ask", {"question": "What did my salary review"
                                                  " with the manager say?"}),
            "theirs": await client.call_tool("ask", {"question": "And the bands?",
                                                     "conversation_id": alices}),
            "unknown": await client.call_tool("ask", {"question": "And the bands?",
                                                      "conversation_id": "f" * 32}),
        }
        return {k: (v.is_error, _text(v)) for k, v in calls.items()}


@pytest.mark.parametrize("how", ["--as", "RAGLOOP_MCP_KEY"])
def test_mcp_answers_as_its_user_on_every_tool(shared, how):
    kb, keys, alices = shared
    folder = str(kb.store.folder)
    params = _params(folder, "--as", "bob") if how == "--as" else \
        _params(folder, key=keys["bob"])
    got = asyncio.run(asyncio.wait_for(_as_bob(params, alices), 300))
    for name, (_, text) in got.items():
        _clean(text)
        if name != "hidden":  # which echoes the id bob asked for
            assert "alice.md" not in text and "hr/bands.md" not in text, (name, text)
    assert PUBLIC in got["search"][1] and "public0.md" in got["list"][1]
    assert not got["search"][0] and not got["ask"][0]
    # a hidden document and another's conversation read as ids that do not exist
    assert got["hidden"][0] and got["missing"][0]
    assert got["hidden"][1].replace("alice.md", "X") == got["missing"][1].replace(
        "nothere.md", "X")
    assert got["theirs"][0] and got["unknown"][0]
    assert got["theirs"][1].replace(alices, "X") == got["unknown"][1].replace("f" * 32, "X")
    # bob's run is recorded as his
    mine = [r for r in kb.backend.runs.list(20) if r["source"] == "mcp"]
    assert mine and {r["owner"] for r in mine} == {"bob"}


def test_mcp_refuses_a_bad_key_or_two_principals(shared):
    kb, keys, _ = shared
    folder = str(kb.store.folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    for extra_env, args, said in (
            ({"RAGLOOP_MCP_KEY": keys["bob"] + "x"}, [], "RAGLOOP_MCP_KEY is not a valid key"),
            ({"RAGLOOP_MCP_KEY": keys["bob"]}, ["--as", "alice"], "Both --as"),
            ({}, ["--as", "nobody"], "nobody")):
        done = subprocess.run([sys.executable, "-m", "ragloop", "mcp", "--kb", folder, *args],
                              env={**env, **extra_env}, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert said in done.stderr and keys["bob"] not in done.stderr, done.stderr


def test_cli_ask_and_chat_as_a_user(shared):
    kb, _, alices = shared
    folder = str(kb.store.folder)
    question = "What did my salary review with the manager say?"
    as_bob = ragloop("ask", question, "--as", "bob", "--json", "--kb", folder)
    assert as_bob.returncode == 0, as_bob.stderr
    _clean(as_bob.stdout)
    ran = json.loads(as_bob.stdout)
    assert kb.backend.runs.get(ran["run_id"])["owner"] == "bob"
    as_alice = ragloop("ask", question, "--as", "alice", "--json", "--kb", folder)
    assert "alice.md" in as_alice.stdout  # the control: alice reads her document
    # bob cannot continue alice's conversation; alice can
    theirs = ragloop("ask", "And the bands?", "--as", "bob", "--conversation", alices,
                     "--kb", folder)
    assert theirs.returncode == 2 and "No conversation" in theirs.stderr, theirs.stderr
    assert ragloop("ask", "And the bands?", "--as", "alice", "--conversation", alices,
                   "--kb", folder).returncode == 0
    assert ragloop("ask", question, "--as", "nobody", "--kb", folder).returncode == 2
    # chat: the same user for every turn
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    chat = subprocess.run([sys.executable, "-m", "ragloop", "chat", "--as", "bob", "--kb",
                           folder], input=f"{question}\n", capture_output=True, text=True,
                          timeout=300, env=env)
    assert chat.returncode == 0, chat.stderr
    _clean(chat.stdout + chat.stderr)
    chatted = [r for r in kb.backend.runs.list(20) if r["question"] == question
               and r["conversation_id"] not in (None, alices)]
    assert chatted and {r["owner"] for r in chatted} == {"bob"}
    theirs = subprocess.run([sys.executable, "-m", "ragloop", "chat", "--as", "bob",
                             "--conversation", alices, "--kb", folder], input="hi\n",
                            capture_output=True, text=True, timeout=300, env=env)
    assert theirs.returncode == 2 and "No conversation" in theirs.stderr, theirs.stderr
