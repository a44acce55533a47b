"""The decision registry (agent/decisions.py): each kind's implementations by name, the name a
run's settings choose, and a new implementation selectable with one registration line."""

from __future__ import annotations

import re

import pytest

from ragloop.agent import decisions
from ragloop.agent.citations import CitationCheck
from ragloop.agent.engine import Engine
from ragloop.core.config import Settings
from ragloop.core.errors import ConfigError
from ragloop.llm.scripted import ScriptedChat
from ragloop.offline.grader import LocalGrader

KINDS = ("router", "planner", "grader", "rewriter", "condenser", "clarifier", "answerer",
         "citation_check")


def test_every_kind_has_an_offline_implementation() -> None:
    for kind in KINDS:
        assert "offline" in decisions.names(kind), kind
    for kind in ("planner", "grader", "rewriter", "condenser", "answerer", "citation_check"):
        assert "model" in decisions.names(kind), kind


def test_the_settings_choose_the_name(small_kb) -> None:
    offline = decisions.Build(small_kb, small_kb.settings)
    assert {k: decisions.choose(k, offline) for k in KINDS} == dict.fromkeys(KINDS, "offline")
    chat = ScriptedChat([])
    with_model = decisions.Build(small_kb, small_kb.settings, chat, chat)
    assert decisions.choose("planner", with_model) == "model"
    assert decisions.choose("citation_check", with_model) == "model"  # auto: the model judges
    checked_offline = decisions.Build(small_kb, small_kb.settings.with_(citation_check="offline"),
                                      chat, chat)
    check = decisions.make("citation_check", checked_offline)
    assert isinstance(check, CitationCheck) and check.judge is None
    off = decisions.Build(small_kb, small_kb.settings.with_(clarify="off", citation_check="off"))
    assert decisions.make("clarifier", off) is None
    assert decisions.make("citation_check", off) is None
    assert isinstance(decisions.make("grader", offline), LocalGrader)


def test_an_unknown_name_is_a_config_error(small_kb) -> None:
    with pytest.raises(ConfigError, match="No grader named 'nope'; there are: offline, model"):
        decisions.make("grader", decisions.Build(small_kb, small_kb.settings), "nope")


def test_one_registration_line_adds_an_implementation(small_kb, monkeypatch) -> None:
    """A second grader: its class, one `register` line, and the engine runs with it."""
    made: list[LocalGrader] = []

    class SecondGrader(LocalGrader):  # in its own file, in real life
        pass

    def second(b: decisions.Build) -> LocalGrader:
        made.append(SecondGrader(b.kb.embedder, reading=b.reading))
        return made[-1]

    monkeypatch.setitem(decisions._REGISTRY, "grader", dict(decisions._REGISTRY["grader"]))
    monkeypatch.setitem(decisions.DECISION_NAMES, "grader", list(decisions.names("grader")))
    decisions.register("grader", "second", second)
    # not chosen until a setting names it
    Engine(small_kb).ask("How is the harvest stored?", route="single")
    assert made == []
    assert Settings(grader="second").grader == "second"  # a registered name is a value
    chosen = Engine(small_kb, small_kb.settings.with_(grader="second"))
    result = chosen.ask("How is the harvest stored?", route="single")
    assert len(made) == 1 and result.run_id


def test_a_decision_setting_picks_the_implementation(small_kb) -> None:
    """RAGLOOP_<KIND> names the implementation whatever models are configured; `model`
    without a chat model is a clear ConfigError, not an assertion."""
    chat = ScriptedChat([])
    offline_anyway = decisions.Build(small_kb, small_kb.settings.with_(grader="offline",
                                                                       planner="offline"),
                                     chat, chat)
    assert decisions.choose("grader", offline_anyway) == "offline"
    assert decisions.choose("planner", offline_anyway) == "offline"
    assert isinstance(decisions.make("grader", offline_anyway), LocalGrader)
    no_model = decisions.Build(small_kb, small_kb.settings.with_(grader="model"))
    with pytest.raises(ConfigError, match="needs a chat model"):
        decisions.make("grader", no_model)


def test_settings_made_before_the_registry_are_checked_by_it(small_kb, monkeypatch) -> None:
    """A Settings made before agent/decisions.py registered its names (the CLI makes them
    first) is refused where the decision is built, in the settings' own words."""
    monkeypatch.setitem(decisions.DECISION_NAMES, "grader", [])  # as before registration
    settings = Settings(grader="nope")
    with pytest.raises(ConfigError, match=re.escape(
            "Bad setting RAGLOOP_GRADER='nope': must be one of offline, model")):
        decisions.make("grader", decisions.Build(small_kb, settings))
