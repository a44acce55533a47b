"""`ragloop chat` and `ragloop ask --conversation`, through the real CLI on a real knowledge
base, offline: the follow-up's standalone question is printed, the answer and its sources,
`/new` starts over, end of input leaves with 0; `ask` prints the id to continue with, an
unknown id is a clear error that stores nothing."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ragloop.apps.cli import app
from ragloop.core.errors import NotFoundError
from ragloop.kb import KnowledgeBase


def _kb(small_kb) -> str:
    folder = str(small_kb.store.folder)
    small_kb.close()  # the CLI opens it itself
    return folder


def test_chat_keeps_the_history_and_new_starts_over(small_kb) -> None:
    kb = _kb(small_kb)
    lines = ["What is the IP rating of the T9 sensor?", "", "How long does its battery last?",
             "/new", "How long does its battery last?"]
    res = CliRunner().invoke(app, ["chat", "--kb", kb], input="\n".join(lines) + "\n")
    assert res.exit_code == 0, res.output
    ids = re.findall(r"conversation=(\w+)", res.output)
    assert len(ids) == 3 and ids[0] == ids[1] != ids[2]
    assert re.search(r"searching: .*battery.*T9", res.output)  # the follow-up + turn 1
    assert "5 years" in res.output and "→ products/sensor.md" in res.output
    assert res.output.count("searching:") == 1  # after /new nothing is carried over
    resumed = CliRunner().invoke(app, ["chat", "--kb", kb, "--conversation", ids[0]],
                                 input="And what is its IP rating?\n")
    assert resumed.exit_code == 0, resumed.output
    assert f"conversation {ids[0]}" in resumed.output and "searching:" in resumed.output
    with KnowledgeBase.open(kb, create=False) as base:
        assert [len(base.backend.runs.conversation(i)) for i in (ids[0], ids[2])] == [3, 1]


def test_ask_continues_a_conversation_by_id(small_kb) -> None:
    kb = _kb(small_kb)
    runner = CliRunner()
    first = runner.invoke(app, ["ask", "What is the IP rating of the T9 sensor?", "--kb", kb,
                                "--conversation", "new"])
    assert first.exit_code == 0, first.output
    cid = re.search(r"--conversation (\w+)", first.output).group(1)
    second = runner.invoke(app, ["ask", "How long does its battery last?", "--kb", kb,
                                 "--conversation", cid, "--json"])
    assert second.exit_code == 0, second.output
    data = json.loads(second.output)
    assert data["conversation_id"] == cid and "T9" in data["standalone"]
    bad = runner.invoke(app, ["ask", "and then?", "--kb", kb, "--conversation", "nope"])
    # main() prints a UserError as one line and exits 2 (tests/test_cli_terminal.py)
    assert isinstance(bad.exception, NotFoundError) and "No conversation 'nope'" in str(
        bad.exception)
    with KnowledgeBase.open(kb, create=False) as base:
        assert len(base.backend.runs.conversation(cid)) == 2
        assert base.backend.runs.conversation("nope") == []


CONVERSATIONS = [
    {"id": "c1", "split": "test", "turns": [
        {"q": "What is the IP rating of the T9 sensor?", "type": "first",
         "gold_doc": ["products/sensor.md"], "rewrite": None},
        {"q": "How long does its battery last?", "type": "follow_up",
         "gold_doc": ["products/sensor.md"], "rewrite": "How long does the T9 battery last?"},
        {"q": "Who is the Chief Executive Officer of Northwind Labs?", "type": "topic_switch",
         "gold_doc": ["org/leadership.md"], "rewrite": None},
        {"q": "And what is his salary?", "type": "unanswerable", "gold_doc": [],
         "rewrite": "What is the salary of Tom Becker?"}]}]


def test_eval_reads_the_conversation_set(small_kb, tmp_path) -> None:
    kb = _kb(small_kb)
    data = tmp_path / "conversations.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in CONVERSATIONS) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["eval", str(data), "--kb", kb, "--paths", "single",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 conversations, 4 turns, each asked 4 ways" in res.output
    row = next(line for line in res.output.splitlines()
               if line.startswith("| single | test | follow_up |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # turns, typed, naive join, engine (history), rewrite
    assert cells[3] == "1" and cells[6] == "1.00" and cells[7] == "1.00"
    assert "| single | test | unanswerable | 1 |" in res.output  # abstention table
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 * 4 and {r["way"] for r in records} == {"history", "typed",
                                                                      "naive", "rewrite"}
    follow = next(r for r in records if r["turn"] == 1 and r["way"] == "history")
    assert "T9" in follow["standalone"] and follow["docs"][0] == "products/sensor.md"
    assert (out / "report.md").read_text().startswith("Conversation set")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "turns": [{"type": "first"}]}\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["eval", str(bad), "--kb", kb, "--paths", "single"])
    assert res.exit_code != 0 and 'turn 1 needs a "q"' in str(res.exception)


def test_a_conversation_id_used_twice_is_refused_with_both_lines(tmp_path) -> None:
    from ragloop.core.errors import UserError
    from ragloop.eval.conversations import load_conversations

    data = tmp_path / "conversations.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in [*CONVERSATIONS, *CONVERSATIONS]) + "\n",
                    encoding="utf-8")
    with pytest.raises(UserError, match=r":2: the conversation id 'c1' is also on line 1"):
        load_conversations(data)
