"""The Python API: the top-level names (imported lazily), typed results, the async variant, and
the README's Python example, run as a doctest from a copy of the clone's top folder (its
examples/kb)."""

from __future__ import annotations

import asyncio
import dataclasses
import doctest
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from graders import KeepsAll

ROOT = Path(__file__).resolve().parent.parent


def readme_python_example() -> str:
    """The first ```python block of the README's "Python" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "\n## Python\n" in text, "the README has no '## Python' section"
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's Python section has no ```python block"
    return found.group(1)


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch) -> None:
    # the example runs from the clone's top folder: a copy of its examples/kb, whole
    shutil.copytree(ROOT / "examples" / "kb", tmp_path / "examples" / "kb")
    for key in list(os.environ):  # the example runs on the defaults, as a new user's would
        if key.startswith("RAGLOOP_") or key.startswith("OTEL_EXPORTER_OTLP"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    example = readme_python_example()
    test = doctest.DocTestParser().get_doctest(example, {}, "README.md (Python)", "README.md", 0)
    assert len(test.examples) >= 5, "the README's example lost its doctest prompts"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    assert (tmp_path / "kb").is_dir()
    # the example's ingest read the demo documents (not the project's own docs/ folder)
    from ragloop.kb import KnowledgeBase

    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert len(kb.documents()) == len([p for p in (tmp_path / "examples" / "kb").rglob("*")
                                           if p.is_file() and not p.name.startswith(".")])


def test_import_ragloop_is_light_and_names_load_on_first_use() -> None:
    code = (
        "import sys, ragloop\n"
        "heavy = [m for m in ('ragloop.agent.engine', 'ragloop.kb', 'torch', 'transformers',"
        " 'anthropic', 'openai') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from ragloop import KnowledgeBase, Engine, RunResult, Citation, Settings, RunStatus\n"
        "assert Engine.__module__ == 'ragloop.agent.engine'\n"
        "assert KnowledgeBase.__module__ == 'ragloop.kb'\n"
        "assert 'Engine' in dir(ragloop) and set(ragloop.__all__) == set(ragloop._WHERE)\n"
        "try:\n    ragloop.Nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "has no attribute 'Nothing'" in out.stdout


def test_citations_are_typed_and_their_json_is_unchanged(small_kb) -> None:
    from ragloop import Citation, Engine

    result = Engine(small_kb, grader=KeepsAll()).ask("Who approves travel above £2,500?",
                                                      route="single")
    assert result.citations and all(isinstance(c, Citation) for c in result.citations)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.citations[0].n = 9  # type: ignore[misc]
    data = result.to_dict()
    assert data["citations"] == [{"n": c.n, "doc_id": c.doc_id, "section": c.section}
                                 for c in result.citations]
    stored = small_kb.backend.runs.get(result.run_id)
    assert stored is not None and stored["citations"] == data["citations"]


def test_aask_runs_the_same_run_without_blocking_the_event_loop(small_kb) -> None:
    from ragloop import Engine

    engine = Engine(small_kb, grader=KeepsAll())
    question = "Who approves travel above £2,500?"
    expected = engine.ask(question, route="single")

    async def main() -> tuple[object, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        result = await engine.aask(question, route="single")
        ticker.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.answer == expected.answer  # type: ignore[attr-defined]
    assert result.citations == expected.citations  # type: ignore[attr-defined]
    assert ticks > 1  # the loop kept running while the run went on in its thread
