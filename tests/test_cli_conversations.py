"""`ragloop chat` and `ragloop ask --conversation`, through the real CLI on a real knowledge
base, offline: the follow-up's standalone question is printed, the answer and its sources,
`/new` starts over, end of input leaves with 0; `ask` prints the id to continue with, an
unknown id is a clear error that stores nothing."""

from __future__ import annotations

import json
import re

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
    assert re.search(r"searching: .*T9.*battery", res.output)  # the standalone question
    assert "5 years" in res.output and "→ products/sensor.md" in res.output
    assert res.output.count("searching:") == 1  # after /new nothing is carried over
    with KnowledgeBase.open(kb, create=False) as base:
        assert [len(base.backend.runs.conversation(i)) for i in (ids[0], ids[2])] == [2, 1]


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
