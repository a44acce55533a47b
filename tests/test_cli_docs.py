"""`ragloop docs` through the real CLI: piped, one TSV line per document under a header with
the summary on stderr; on a terminal, a table. In both, a tab or newline in a file name is
escaped, so a name cannot split its row or fake another (issue 39.5, issue 41.5)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ragloop.kb import KnowledgeBase

# a name that, printed raw, ends its row and writes a fake one after it
FAKE = "evil\\x\nfake.md\tFake title\tfake-source\t9\t9\n.md"
HEADER = ["doc_id", "title", "source", "sections", "chunks"]


def ragloop(*args: str, terminal: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    env["COLUMNS"] = "250"
    env.pop("TTY_COMPATIBLE", None)
    if terminal:  # Rich treats stdout as a terminal (rich.console.Console.is_terminal)
        env.update(TTY_COMPATIBLE="1", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def kb_with_odd_names(template, tmp_path) -> str:
    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / FAKE).write_text("# Odd\n\nA note about the odd file name.\n", encoding="utf-8")
    (docs / "plain.md").write_text("# Plain\n\nA plain note.\n", encoding="utf-8")
    with KnowledgeBase.open(folder) as kb:
        assert kb.ingest([docs]).added == 2
    return str(folder)


def test_piped_docs_is_tsv_and_a_newline_in_a_name_fakes_no_row(small_kb_template, tmp_path):
    folder = kb_with_odd_names(small_kb_template, tmp_path)
    with KnowledgeBase.open(folder) as kb:
        documents = kb.documents()
    done = ragloop("docs", "--kb", folder)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    rows = [line.split("\t") for line in lines[:-1]]
    assert rows[0] == HEADER
    assert len(rows) == 1 + len(documents)
    assert all(len(r) == len(HEADER) for r in rows), rows
    assert not any(r[0] == "fake.md" for r in rows)
    by_id = {r[0]: r for r in rows[1:]}
    # PostgreSQL COPY text escapes: backslash doubled, tab and newline as \t and \n
    odd = by_id["evil\\\\x\\nfake.md\\tFake title\\tfake-source\\t9\\t9\\n.md"]
    assert odd[1] == "Odd" and odd[3:] == ["1", "1"]
    assert by_id["plain.md"][1] == "Plain"
    assert f"{len(documents)} documents" in done.stderr
    assert "documents" not in done.stdout


def test_docs_on_a_terminal_is_a_table_with_the_name_on_one_row(small_kb_template, tmp_path):
    folder = kb_with_odd_names(small_kb_template, tmp_path)
    done = ragloop("docs", "--kb", folder, terminal=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "doc_id" in lines[0] and "\t" not in done.stdout
    assert not any(line.lstrip().startswith("fake.md") for line in lines), done.stdout
    odd = [line for line in lines if line.lstrip().startswith("evil")]
    assert len(odd) == 1 and "fake.md\\tFake title\\tfake-source\\t9\\t9\\n.md" in odd[0], lines
    assert "Odd" in odd[0]
    assert "documents," in lines[-1]
