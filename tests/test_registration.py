"""A new reader or decision registers itself in its own file (`@reader`, `@decision`): the one
line outside it is the import that loads it. Registration refuses a clash instead of guessing."""

from __future__ import annotations

import pytest

from ragloop.agent import decisions
from ragloop.agent.engine import Engine
from ragloop.core import registry
from ragloop.core.config import Settings
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest.readers import base, read_file
from ragloop.offline.build import Build
from ragloop.offline.grader import LocalGrader


def test_a_decorated_reader_reads_its_suffix(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(base, "READERS", list(base.READERS))
    monkeypatch.setattr(base, "BY_SUFFIX", dict(base.BY_SUFFIX))

    @base.reader
    class ToyReader:  # in its own file, in real life
        suffixes = (".toyfmt",)

        def read(self, path, doc_id):
            return [ParsedDocument(doc_id=doc_id, title="t", source=str(path),
                                   sections=[SectionText("0", ("t",), path.read_text())])]

    monkeypatch.setattr("ragloop.ingest.readers.BY_SUFFIX", base.BY_SUFFIX)
    f = tmp_path / "a.toyfmt"
    f.write_text("hello there")
    assert read_file(f, "a.toyfmt")[0].sections[0].text == "hello there"
    assert isinstance(base.READERS[-1], ToyReader)


def test_a_suffix_read_twice_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(base, "READERS", list(base.READERS))
    monkeypatch.setattr(base, "BY_SUFFIX", dict(base.BY_SUFFIX))
    with pytest.raises(ValueError, match=r"\.md already read by MarkdownReader"):
        @base.reader
        class OtherMarkdown:
            suffixes = (".md",)

            def read(self, path, doc_id):  # pragma: no cover - never registered
                return []


def test_a_decorated_decision_is_a_setting_value(small_kb, monkeypatch) -> None:
    monkeypatch.setitem(registry.FACTORIES, "grader", dict(registry.FACTORIES["grader"]))
    monkeypatch.setitem(decisions.DECISION_NAMES, "grader", list(decisions.names("grader")))
    made: list[LocalGrader] = []

    @registry.decision("grader", "second")  # the toy's file: this and its class
    def second(b: Build) -> LocalGrader:
        made.append(LocalGrader(b.kb.embedder, reading=b.reading))
        return made[-1]

    assert "second" in decisions.names("grader")
    Engine(small_kb, small_kb.settings.with_(grader="second")).ask(
        "How is the harvest stored?", route="single")
    assert len(made) == 1
    assert Settings(grader="second").grader == "second"


def test_two_decisions_under_one_name_are_refused(monkeypatch) -> None:
    monkeypatch.setitem(registry.FACTORIES, "grader", dict(registry.FACTORIES["grader"]))
    with pytest.raises(ValueError, match="two graders registered as 'offline'"):
        registry.register("grader", "offline", lambda b: None)
    with pytest.raises(ValueError, match="no decision kind 'graders'"):
        registry.register("graders", "x", lambda b: None)  # type: ignore[arg-type]
