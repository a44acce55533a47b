"""Rich markup and emoji codes in data: the real CLI prints titles, file names, questions and
chunk text literally, and never crashes on them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ragloop.kb import KnowledgeBase

ODD_NAME = "[red]a[red].md"
ODD_DOC = """# Notes [/] on :x: things

## Part [bold]
The :x: marker and [/] and [link=https://x.example]y[/link] stay literal in the harvest notes.
"""
QUESTION = "[/] planted by any HTTP client :x: [bold]?"


def ragloop(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # no table cell wrapped across lines
    return subprocess.run(
        [sys.executable, "-m", "ragloop", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def kb_with_one_doc_and_run(template, tmp_path, name: str, doc: str, question: str,
                            answer: str, route: str) -> tuple[str, str, str]:
    """A copy of `template` with the file `name` ingested and one finished run stored: its
    folder, the file's last section id and the run id."""
    from ragloop.storage.sqlite.runs import SqliteRunStore as RunStore

    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / name).write_text(doc, encoding="utf-8")
    with KnowledgeBase.open(folder) as kb:
        assert kb.ingest([docs]).added == 1
        section = kb.sections(name)[-1].section
        runs = RunStore(kb.store.db_path)
        run_id = runs.start(question)
        runs.finish(run_id, {"status": "answered", "answer": answer, "steps": 1,
                             "latency_s": 0.1, "route": route})
        runs.close()
    return str(folder), section, run_id


def test_markup_and_emoji_codes_in_data_print_literally(small_kb_template, tmp_path) -> None:
    folder, section, run_id = kb_with_one_doc_and_run(
        small_kb_template, tmp_path, ODD_NAME, ODD_DOC, QUESTION, "[/] :x: answer", "[/]")
    kb_arg = ["--kb", str(folder)]

    listed = ragloop("docs", *kb_arg)
    assert listed.returncode == 0, listed.stderr
    assert ODD_NAME in listed.stdout and "Notes [/] on :x: things" in listed.stdout
    assert "❌" not in listed.stdout

    found = ragloop("search", "harvest notes marker", "--mode", "bm25", *kb_arg)
    assert found.returncode == 0, found.stderr
    assert ODD_NAME in found.stdout and "The :x: marker and [/] and [link=" in found.stdout
    shown = ragloop("section", ODD_NAME, section, *kb_arg)
    assert shown.returncode == 0, shown.stderr
    assert "[link=https://x.example]y[/link]" in shown.stdout and "❌" not in shown.stdout

    recent = ragloop("runs", *kb_arg)
    assert recent.returncode == 0, recent.stderr
    assert QUESTION in recent.stdout
    one = ragloop("runs", run_id, *kb_arg)
    assert one.returncode == 0, one.stderr
    assert QUESTION in one.stdout and "[/] :x: answer" in one.stdout and "❌" not in one.stdout

    removed = ragloop("rm", ODD_NAME, *kb_arg)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"removed {ODD_NAME}"
    missing = ragloop("rm", "[/]nope:x:.md", *kb_arg)
    assert missing.returncode == 2 and "[/]nope:x:.md" in missing.stderr
    assert ODD_NAME not in ragloop("docs", *kb_arg).stdout
