"""Asking the user back, end to end (issue 30): a question with several readings the knowledge
base answers differently ends needs_input with a ClarifyEvent and options — offline through
the clarify rule after step 1, with a model through its ask_user tool — and the user's choice,
sent as the next turn, searches the narrowed question. Real SQLite KB, real CLI subprocess,
the MCP SDK's client over a real stdio pipe."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import write_docs

from ragloop.agent.ask_user import ASK_USER, ASK_USER_SPEC
from ragloop.agent.engine import Engine
from ragloop.core.conversation import Turn, narrowed
from ragloop.core.errors import ConfigError
from ragloop.core.types import EventKind, RunStatus, Usage
from ragloop.language.text import ENGLISH_READING
from ragloop.llm.base import ChatResponse, ToolCall
from ragloop.llm.scripted import ScriptedChat
from ragloop.offline.follow_up import RetrievalCondenser
from ragloop.offline.grader import LocalGrader

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

SENSORS = {
    f"products/{code.lower()}-datasheet.md": f"""# {code} {kind} Vibration Sensor Datasheet

## Power
The {code} runs on a lithium battery. The battery of the {code} lasts {years} years at one
reading every ten minutes.

## Ingress protection
The {code} enclosure is rated {ip} against dust and water.
""" for code, kind, years, ip in (("T100", "Wireless", 3, "IP65"),
                                  ("T200", "Industrial", 5, "IP67"),
                                  ("T300", "Hazardous-Area", 7, "IP68"))}
SENSORS["policies/travel.md"] = """# Travel Policy

## Approvals
Expenses above £2,500 per trip must be approved by the Chief Financial Officer.
"""
AMBIGUOUS = "How long does the sensor's battery last?"


@pytest.fixture(scope="module")
def sensors_template(tmp_path_factory):
    from ragloop.kb import KnowledgeBase

    root = tmp_path_factory.mktemp("sensors")
    with KnowledgeBase.open(root / "kb") as kb:
        kb.ingest([write_docs(root / "docs", SENSORS)])
    return root / "kb"


@pytest.fixture
def sensors(sensors_template, tmp_path):
    from ragloop.kb import KnowledgeBase

    shutil.copytree(sensors_template, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    kb.folder = tmp_path / "kb"  # for the subprocesses (the CLI, the MCP server)
    yield kb
    kb.close()


def test_an_ambiguous_question_ends_needs_input_with_options_from_the_evidence(sensors):
    events = []
    result = Engine(sensors).ask(AMBIGUOUS, on_event=events.append)
    assert result.status is RunStatus.NEEDS_INPUT
    assert result.clarification is not None
    assert sorted(result.clarification["options"]) == ["T100", "T200", "T300"]
    assert result.answer == result.clarification["question"]
    assert result.declined and not result.citations
    clarify = [e for e in events if e.kind == EventKind.CLARIFY]
    assert len(clarify) == 1 and clarify[0].options == result.clarification["options"]
    # stored: the run's status and its clarify event, read back from the run store
    stored = sensors.backend.runs.get(result.run_id)
    assert stored is not None and stored["status"] == "needs_input"
    kinds = [e.kind for e in sensors.backend.runs.events(result.run_id)]
    assert kinds[-2:] == ["clarify", "answer"]
    assert result.to_dict()["clarification"]["options"] == result.clarification["options"]


def test_a_question_that_names_a_reading_is_answered(sensors):
    result = Engine(sensors).ask("How long does the T200 sensor's battery last?")
    assert result.status is RunStatus.ANSWERED, result.answer
    assert result.clarification is None
    assert {c.doc_id for c in result.citations} == {"products/t200-datasheet.md"}


def test_clarifying_can_be_switched_off_and_a_bad_switch_is_a_clear_error(sensors):
    result = Engine(sensors, sensors.settings.with_(clarify="off")).ask(AMBIGUOUS)
    assert result.status is not RunStatus.NEEDS_INPUT and result.clarification is None
    with pytest.raises(ConfigError, match=r"RAGLOOP_CLARIFY=.never.: must be one of auto, off"):
        Engine(sensors, sensors.settings.with_(clarify="never")).ask(AMBIGUOUS)


def test_the_choice_as_the_next_turn_searches_the_narrowed_question(sensors):
    engine = Engine(sensors)
    first = engine.ask(AMBIGUOUS)
    assert first.status is RunStatus.NEEDS_INPUT
    history = [Turn(AMBIGUOUS, first.question, first.answer, run_id=first.run_id,
                    status=str(first.status))]
    condense = RetrievalCondenser(sensors, ENGLISH_READING).condense
    condensed = condense(history, "T300")
    assert condensed.question == "How long does the sensor's battery last (T300)?"
    assert condensed.refers_to == 0
    second = engine.ask(condensed.question)
    assert second.status is RunStatus.ANSWERED, second.answer
    assert {c.doc_id for c in second.citations} == {"products/t300-datasheet.md"}
    assert "7 years" in second.answer
    # a whole question of its own after the question back is condensed as any other
    assert condense(history, "Who approves expenses above £2,500?").question != \
        condensed.question


def test_narrowed_keeps_a_question_that_already_holds_the_choice():
    assert narrowed("What is the battery life?", "S200") == "What is the battery life (S200)?"
    assert narrowed("What is the S200 battery life?", "s200") == "What is the S200 battery life?"
    assert narrowed("What is the battery life?", "  S200. ") == "What is the battery life (S200)?"


def _ask_user(question: str, options: list[str], n: int = 0) -> ChatResponse:
    return ChatResponse(text="", tool_calls=[ToolCall(f"u{n}", ASK_USER, {
        "question": question, "options": options})], usage=Usage(calls=1))


def test_the_model_asks_back_through_the_ask_user_tool(sensors):
    chat = ScriptedChat([_ask_user("Which sensor?", ["T100", "T200", "T300"])])
    events = []
    result = Engine(sensors, sensors.settings.with_(citation_check="offline"), chat=chat,
                    grader=LocalGrader(sensors.embedder, reading=EN_RD)).ask(
        AMBIGUOUS, route="agent", driver="tools", on_event=events.append)
    assert result.status is RunStatus.NEEDS_INPUT
    assert result.clarification is not None
    assert result.clarification["options"] == ["T100", "T200", "T300"]
    assert result.answer == "Which sensor?"
    assert [t.name for t in chat.calls[0].tools][-1] == ASK_USER
    assert len(chat.calls) == 1  # the run ends at the call: no answer is asked for
    assert any(e.kind == EventKind.CLARIFY for e in events)


def test_bad_ask_user_arguments_go_back_to_the_model_and_the_switch_hides_the_tool(sensors):
    chat = ScriptedChat([_ask_user("Which sensor?", ["T100"]),
                         ChatResponse(text="The knowledge base does not say.")])
    settings = sensors.settings.with_(citation_check="offline")
    grader = LocalGrader(sensors.embedder, reading=EN_RD)
    result = Engine(sensors, settings, chat=chat, grader=grader).ask(
        AMBIGUOUS, route="agent", driver="tools")
    assert result.status is not RunStatus.NEEDS_INPUT
    tool_msgs = [m.content for m in chat.calls[1].messages if m.role == "tool"]
    assert "ask_user" in tool_msgs[0] and "options" in tool_msgs[0]
    off = ScriptedChat([ChatResponse(text="The knowledge base does not say.")])
    Engine(sensors, settings.with_(clarify="off"), chat=off, grader=grader).ask(
        AMBIGUOUS, route="agent", driver="tools")
    assert ASK_USER not in [t.name for t in off.calls[0].tools]


def test_the_ask_user_schema_bounds_its_options():
    params = ASK_USER_SPEC.parameters
    assert params["required"] == ["question", "options"]
    assert params["properties"]["options"]["minItems"] == 2
    assert params["properties"]["options"]["maxItems"] == 5
    assert params["additionalProperties"] is False


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "RAGLOOP_MODEL",
                         "RAGLOOP_CLARIFY")}


def test_ragloop_ask_prints_the_question_and_numbered_options(sensors):
    done = subprocess.run([sys.executable, "-m", "ragloop", "ask", "--kb",
                           str(sensors.folder), AMBIGUOUS], capture_output=True, text=True,
                          env=_env(), timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Which one do you mean:" in done.stdout
    options = [line.strip() for line in done.stdout.splitlines()
               if line.strip()[:2] in ("1.", "2.", "3.")]
    assert sorted(o.split(". ", 1)[1] for o in options) == ["T100", "T200", "T300"]
    assert "status=needs_input" in done.stdout
    as_json = subprocess.run([sys.executable, "-m", "ragloop", "ask", "--json", "--kb",
                              str(sensors.folder), AMBIGUOUS], capture_output=True, text=True,
                             env=_env(), timeout=300, check=False)
    assert json.loads(as_json.stdout)["clarification"]["question"].startswith("Which one")


# -- MCP: elicitation over a real stdio pipe ---------------------------------------------------

def _params(kb_folder):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=[
        "-m", "ragloop.apps.mcp_server", "--kb", str(kb_folder)], env=_env())


async def _ask_over_mcp(kb_folder, choose: str | None, mode: str = "auto"):
    """`ask` through the SDK's client; with `choose`, a client that supports elicitation and
    picks that option (recording what it was asked). `mode`: "auto" negotiates 2026-07-28
    (the call returns input_required and is retried with the choice), "legacy" the initialize
    handshake (the server sends elicitation/create mid-call)."""
    from mcp import Client
    from mcp_types import ElicitResult

    asked = []

    async def elicit(context, params):
        asked.append(params)
        if not choose:  # "": the user declines to choose
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"choice": choose})

    kwargs = {"elicitation_callback": elicit} if choose is not None else {}
    async with Client(_params(kb_folder), mode=mode, **kwargs) as client:
        result = await client.call_tool("ask", {"question": AMBIGUOUS})
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return text, asked


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_ask_elicits_the_choice_and_answers_the_narrowed_question(sensors, mode):
    text, asked = asyncio.run(asyncio.wait_for(_ask_over_mcp(sensors.folder, "T100", mode),
                                               300))
    assert len(asked) == 1
    assert asked[0].message.startswith("Which one do you mean:")
    choice = asked[0].requested_schema["properties"]["choice"]
    assert sorted(choice["enum"]) == ["T100", "T200", "T300"]
    assert "status=answered" in text
    assert "products/t100-datasheet.md" in text and "3 years" in text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_ask_without_elicitation_returns_the_question_and_options(sensors, mode):
    text, asked = asyncio.run(asyncio.wait_for(_ask_over_mcp(sensors.folder, None, mode), 300))
    assert asked == []
    assert "status=needs_input" in text and "Which one do you mean:" in text
    assert all(f"{i}. T" in text for i in (1, 2, 3))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_ask_declined_returns_the_question_and_options(sensors, mode):
    text, asked = asyncio.run(asyncio.wait_for(_ask_over_mcp(sensors.folder, "", mode), 300))
    assert len(asked) == 1
    assert "status=needs_input" in text and all(f"{i}. T" in text for i in (1, 2, 3))


async def _answer_over_mcp(kb_folder):
    """A 2026-07-28 client without elicitation: the question comes back as text; the user's
    choice is sent with the conversation id the reply gave, then once more with "new"."""
    from mcp import Client

    async with Client(_params(kb_folder)) as client:
        described = {t.name: t for t in (await client.list_tools()).tools}["ask"]
        asked = await client.call_tool("ask", {"question": AMBIGUOUS})
        cid = (asked.structured_content or {}).get("conversation_id")
        answered = await client.call_tool("ask", {"question": "T100", "conversation_id": cid})
        fresh = await client.call_tool("ask", {"question": "T100", "conversation_id": "new"})
    return described, asked, answered, fresh


def test_an_mcp_client_without_elicitation_answers_the_question_in_its_conversation(sensors):
    """The question back names its conversation (in the text and the structured content) and
    says to pass it with the user's choice, as the tool's description does; so passed, the
    choice is the next turn of the conversation that asked and answers the narrowed question.
    "new" stays new: a conversation of its own."""
    from ragloop.kb import KnowledgeBase

    described, asked, answered, fresh = asyncio.run(
        asyncio.wait_for(_answer_over_mcp(sensors.folder), 300))
    assert "conversation_id" in described.description
    assert "answering a clarifying question" in described.input_schema["properties"][
        "conversation_id"]["description"]
    said = "\n".join(c.text for c in asked.content if c.type == "text")
    data = asked.structured_content
    assert data["status"] == "needs_input" and sorted(data["options"]) == ["T100", "T200",
                                                                            "T300"]
    cid = data["conversation_id"]
    assert cid and f"conversation={cid}" in said
    assert f'call ask again with the user\'s choice as the question and conversation_id "{cid}"' \
        in said
    assert said.rstrip().split("\n")[-1].startswith("status=needs_input")
    text = "\n".join(c.text for c in answered.content if c.type == "text")
    assert answered.structured_content["status"] == "answered", text
    assert answered.structured_content["conversation_id"] == cid
    assert "3 years" in text and "products/t100-datasheet.md" in text
    assert {c["doc_id"] for c in answered.structured_content["citations"]} == {
        "products/t100-datasheet.md"}
    assert fresh.structured_content["conversation_id"] not in (None, cid)
    with KnowledgeBase.open(sensors.folder, create=False) as kb:
        turns = kb.backend.runs.conversation(cid)
    assert [(t["turn"], t["question"], t["status"]) for t in turns] == [
        (0, AMBIGUOUS, "needs_input"), (1, "T100", "answered")]
    assert "T100" in turns[1]["standalone"] and "battery" in turns[1]["standalone"]


def test_http_ask_carries_the_clarification_and_the_events_the_clarify_step(sensors):
    from test_server import serving, steps_of, stream

    with serving(sensors) as live, live.client() as client:
        response = client.post("/ask", json={"question": AMBIGUOUS})
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["status"] == "needs_input"
        assert sorted(result["clarification"]["options"]) == ["T100", "T200", "T300"]
        assert client.get(f"/runs/{result['run_id']}").json()["status"] == "needs_input"
        steps = steps_of(stream(client, result["run_id"]))
        clarify = [s for s in steps if s["kind"] == "clarify"]
        assert clarify and clarify[0]["data"]["options"] == result["clarification"]["options"]


def test_a_conversation_continues_with_the_choice(sensors):
    conversation = Engine(sensors).conversation()
    first = conversation.ask(AMBIGUOUS)
    assert first.status is RunStatus.NEEDS_INPUT
    assert conversation.turns[-1].asked_back
    second = conversation.ask("T200")
    assert second.standalone == "How long does the sensor's battery last (T200)?"
    assert second.status is RunStatus.ANSWERED, second.answer
    assert {c.doc_id for c in second.citations} == {"products/t200-datasheet.md"}
    assert [t.status for t in conversation.turns] == ["needs_input", "answered"]


def test_a_model_condenser_joins_the_choice_by_the_rule_without_a_call(sensors):
    from ragloop.agent.llm_condense import LLMCondenser
    from ragloop.offline import factory

    chat = ScriptedChat([])  # any model call fails the test
    condenser = LLMCondenser(chat, factory.condenser(sensors))
    history = [Turn(AMBIGUOUS, AMBIGUOUS, "Which one do you mean: T100, T200 or T300?",
                    status="needs_input")]
    assert condenser.condense(history, "T100").question == \
        "How long does the sensor's battery last (T100)?"
    assert chat.calls == []
